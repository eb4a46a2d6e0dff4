"""The experiment scripts that chapters and issues rely on: the shipped results name
their scripts, and issue 37's full-scale ELECTRA run resumes to the same numbers."""

from __future__ import annotations

import json
import re
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tinybert.shipped import RESULTS, load_result

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("name", sorted(RESULTS))
def test_every_shipped_result_parses_and_names_an_existing_script(name):
    result = load_result(name)
    assert isinstance(result, dict) and result
    script = re.match(r"experiments/\w+\.py", RESULTS[name]).group()
    assert (ROOT / script).is_file(), f"{name}: {script} is not in the repository"


def test_the_electra_sweep_chose_on_validation_and_kept_its_command():
    sweep = load_result("electra_sweep")
    assert "electra_budget.py" in sweep["command"]
    grid = [run for run in sweep["runs"] if run.get("split") == "validation"]
    for method in ("MLM", "ELECTRA"):
        rates = sorted(run["lr"] for run in grid if run["method"] == method)
        assert len(rates) >= 3 and len(set(rates)) == len(rates), (method, rates)


def _electra_full(out: Path, *extra: str) -> subprocess.CompletedProcess:
    """A tiny run of experiments/electra_full.py: 4 documents, 4 steps."""
    command = [sys.executable, str(ROOT / "experiments" / "electra_full.py"),
               "--out", str(out), "--lr", "1e-3", "--max-documents", "4",
               "--steps", "4", "--eval-every", "2", "--save-every", "2",
               "--threads", "1", *extra]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(command, capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=600)


def test_electra_full_run_resumes_to_the_numbers_of_an_uninterrupted_run(tmp_path):
    straight = _electra_full(tmp_path / "straight")
    assert straight.returncode == 0, straight.stderr
    stopped = _electra_full(tmp_path / "resumed", "--stop-after", "2")
    assert stopped.returncode == 0, stopped.stderr
    assert "continue with --resume" in stopped.stdout
    assert not (tmp_path / "resumed" / "discriminator").exists()  # not finished
    refused = _electra_full(tmp_path / "resumed")  # the folder exists: no --resume
    assert refused.returncode != 0 and "exists" in refused.stderr
    other = _electra_full(tmp_path / "resumed", "--resume", "--rtd-weight", "10")
    assert other.returncode != 0 and "rtd_weight: saved 50.0, now 10.0" in other.stderr
    resumed = _electra_full(tmp_path / "resumed", "--resume")
    assert resumed.returncode == 0, resumed.stderr
    a, b = (json.loads((tmp_path / run / "metrics.json").read_text())
            for run in ("straight", "resumed"))
    assert a["train"] and a["eval"]
    for key in ("train", "eval"):
        strip = [{k: v for k, v in row.items() if k != "seconds"} for row in a[key]]
        assert strip == [{k: v for k, v in row.items() if k != "seconds"}
                         for row in b[key]]
    for run in ("straight", "resumed"):
        folder = tmp_path / run / "discriminator"
        assert (folder / "model.safetensors").is_file()
        assert (folder / "vocab.txt").is_file()
