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


# --- skips: every skip names why; the CI targets refuse the ones nobody expected ---------

# A skip is expected when its reason contains one of these (CI has the course's data
# folder, the Hugging Face oracles and no GPU, so nothing else may skip there).
EXPECTED_SKIPS = (
    "is not available offline (download only)",  # tests/test_data.py: WikiText-2's train
    "needs a machine without CUDA",  # on a GPU machine only
)


def pytest_addoption(parser):
    parser.addoption(
        "--fail-on-unexpected-skip",
        action="store_true",
        help="exit non-zero when a test skips for a reason not in EXPECTED_SKIPS",
    )


def skip_reason(report) -> str | None:
    """Why ``report`` (a test phase) was skipped, or None when it was not."""
    if not report.skipped or hasattr(report, "wasxfail"):
        return None
    longrepr = report.longrepr
    reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    return reason.removeprefix("Skipped: ")


def unexpected_skips(reasons: dict[str, str]) -> dict[str, str]:
    """The skips (test id -> reason) whose reason is not expected."""
    return {
        test: reason
        for test, reason in reasons.items()
        if not any(expected in reason for expected in EXPECTED_SKIPS)
    }


_SKIPPED: dict[str, str] = {}


def pytest_runtest_logreport(report):
    reason = skip_reason(report)
    if reason is not None:
        _SKIPPED[report.nodeid] = reason


def pytest_sessionfinish(session, exitstatus):
    if not session.config.getoption("--fail-on-unexpected-skip"):
        return
    unexpected = unexpected_skips(_SKIPPED)
    if unexpected:
        lines = "\n".join(f"  {test}: {reason}" for test, reason in unexpected.items())
        print(f"\n{len(unexpected)} unexpected skip(s) (tests/conftest.py, "
              f"EXPECTED_SKIPS):\n{lines}")
        session.exitstatus = 1
