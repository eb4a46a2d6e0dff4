"""The CI targets (`make unit`, `make unit-oldest-torch`) fail on a skip nobody expected:
a missing oracle or data folder must not pass as a green run."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from conftest import unexpected_skips

HERE = Path(__file__).resolve().parent


def test_only_the_expected_reasons_pass():
    found = {
        "tests/test_data.py::test_x[wikitext2/train]": "wikitext2/train is not "
        "available offline (download only)",
        "tests/test_convert.py::test_y": "transformers is not installed",
    }
    assert unexpected_skips(found) == {
        "tests/test_convert.py::test_y": "transformers is not installed"
    }


def _run(tmp_path: Path, *options: str) -> subprocess.CompletedProcess:
    shutil.copy(HERE / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_sample.py").write_text(
        "import pytest\n\n"
        "def test_runs():\n    assert True\n\n"
        "def test_skips():\n    pytest.skip('the oracle is missing')\n"
    )
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *options,
         str(tmp_path)],
        capture_output=True, text=True, cwd=tmp_path,
    )


def test_an_unexpected_skip_fails_the_run_and_is_named(tmp_path):
    strict = _run(tmp_path, "--fail-on-unexpected-skip")
    assert strict.returncode == 1, strict.stdout[-1500:]
    assert "1 unexpected skip(s)" in strict.stdout
    assert "test_sample.py::test_skips: the oracle is missing" in strict.stdout
    relaxed = _run(tmp_path)  # a student's own run may skip
    assert relaxed.returncode == 0, relaxed.stdout[-1500:]
