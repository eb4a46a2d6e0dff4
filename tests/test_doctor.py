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


def test_doctor_flags_a_data_dir_without_the_data(capsys, monkeypatch, tmp_path):
    """M5: TINYBERT_DATA_DIR naming the wrong folder is not "status ok"."""
    pytest.importorskip("tinybert.data")
    (tmp_path / "wrong").mkdir()
    monkeypatch.setenv("TINYBERT_DATA_DIR", str(tmp_path / "wrong"))
    monkeypatch.setenv("TINYBERT_CACHE_DIR", str(tmp_path / "cache"))   # an empty cache
    monkeypatch.delenv("TINYBERT_DEVICE", raising=False)
    assert main(["doctor"]) == 1
    out = capsys.readouterr().out
    assert "holds none of the course's data files" in out
    assert "missing gutenberg/1342" in out and "status   check: data" in out
    assert "status   ok" not in out


def test_doctor_does_not_count_a_corrupt_file_as_found(capsys, monkeypatch, tmp_path):
    """M5: a copy whose SHA-256 is not the registry's is reported, not found."""
    data = pytest.importorskip("tinybert.data")
    root = data.data_dir()
    if root is None:
        pytest.skip("TINYBERT_DATA_DIR is not set")
    copy = tmp_path / "data"
    for entry in data.REGISTRY.values():          # the real files, linked, but one
        if (root / entry.relpath).is_file():
            (copy / entry.relpath).parent.mkdir(parents=True, exist_ok=True)
            (copy / entry.relpath).symlink_to(root / entry.relpath)
    corrupt = copy / data.REGISTRY["wikitext2/valid"].relpath
    corrupt.unlink()
    corrupt.write_text("not WikiText\n")
    monkeypatch.setenv("TINYBERT_DATA_DIR", str(copy))
    monkeypatch.setenv("TINYBERT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TINYBERT_DEVICE", raising=False)
    assert main(["doctor"]) == 1
    out = capsys.readouterr().out
    found = len([e for e in data.REGISTRY.values() if (root / e.relpath).is_file()])
    assert f"data     {found - 1} of {len(data.REGISTRY)} registered files found" in out
    assert "missing wikitext2/valid" in out and "corrupt" in out and str(corrupt) in out
    assert "status   check: data" in out
