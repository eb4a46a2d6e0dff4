"""`python -m tinybert doctor` reports versions, device and data, and flags what is missing."""
import subprocess
import sys

import pytest

from tinybert.__main__ import main


def test_doctor_reports_everything_with_the_data_dir(capsys, monkeypatch):
    data = pytest.importorskip("tinybert.data")
    if data.data_dir() is None:
        pytest.skip("TINYBERT_DATA_DIR is not set")
    monkeypatch.delenv("TINYBERT_DEVICE", raising=False)
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    for needle in ["torch ", "device ", "quick mode", "data dir", "status   ok"]:
        assert needle in out, f"{needle!r} missing from:\n{out}"
    assert "download only" in out  # wikitext2/train has no offline copy: said, not hidden


def test_doctor_flags_missing_data(capsys, monkeypatch, tmp_path):
    monkeypatch.delenv("TINYBERT_DATA_DIR", raising=False)
    monkeypatch.setenv("TINYBERT_CACHE_DIR", str(tmp_path))  # an empty cache
    assert main(["doctor"]) == 1
    out = capsys.readouterr().out
    assert "missing gutenberg/1342" in out and "status   check: data" in out


def test_doctor_flags_an_unavailable_device(capsys, monkeypatch):
    import torch
    if torch.cuda.is_available():
        pytest.skip("needs a machine without CUDA")
    monkeypatch.setenv("TINYBERT_DEVICE", "cuda")
    assert main(["doctor"]) == 1
    assert "CUDA is not available" in capsys.readouterr().out


def test_doctor_runs_as_a_module():
    result = subprocess.run([sys.executable, "-m", "tinybert", "doctor"], capture_output=True,
                            text=True)
    assert result.returncode in (0, 1) and "tinybert" in result.stdout
