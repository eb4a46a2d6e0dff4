"""Shared test set-up: the repository root on sys.path (for book.tools) and common fixtures."""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


import pytest  # noqa: E402
import torch  # noqa: E402


@pytest.fixture
def one_thread():
    """One torch thread for the test, restored afterwards. Tiny models run as fast on one
    thread, and two threads waiting for each other are very slow on a busy machine.
    A module opts in with ``pytestmark = pytest.mark.usefixtures("one_thread")``."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
