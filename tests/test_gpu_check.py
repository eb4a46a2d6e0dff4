"""Hand-written: the prepared GPU run (benchmarks/gpu_check.py, ``make gpu-check``)
works, so that it has not rotted by the day a GPU is lent. ``--tiny`` runs every step on
the CPU in seconds: the device parity tests, chapter 01 in quick mode, one small
throughput row."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import run_chapter  # noqa: E402


def test_run_chapter_executes_cells_with_future_imports_and_reports_the_failing_cell(
    tmp_path,
):
    chapter = tmp_path / "99_toy.py"
    chapter.write_text(
        "# %% [markdown]\n# # A toy chapter\n\n"
        "# %%\nfrom __future__ import annotations\nx = 1\n\n"
        "# %% tags=[\"export\"]\nfrom __future__ import annotations\n\n\n"
        "def f(a: Undefined):\n    return a\n\n"
        "# %%\nassert f(x) == 1\n\n"
        "# %%\nraise RuntimeError('boom')\n\n"
        "# %%\nnever = True\n"
    )
    assert [start for start, _ in run_chapter.code_cells(chapter)] == [5, 9, 16, 19, 22]
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "run_chapter.py"), str(chapter)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert done.returncode == 1
    summary = json.loads(done.stderr.splitlines()[-1].split(" ", 1)[1])
    assert summary == {
        "cells": 5,
        "ran": 3,
        "failed_cell": 4,
        "line": 19,
        "error": "RuntimeError: boom",
    }
    assert f'File "{chapter}", line 19' in done.stderr


@pytest.mark.skipif(
    not os.environ.get("TINYBERT_DATA_DIR", "").strip(),
    reason="TINYBERT_DATA_DIR is not set: the course data is not available",
)
def run_tiny_check(out: Path, *args: str, timeout: int):
    """benchmarks/gpu_check.py --tiny --out OUT ARGS in a subprocess: (the finished
    process, the JSON it wrote)."""
    done = subprocess.run(
        [sys.executable, "benchmarks/gpu_check.py", "--tiny", "--out", str(out), *args],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return done, json.loads((out / "gpu_check.json").read_text())


def test_gpu_check_tiny_passes_and_writes_its_json(tmp_path):
    archive = str(tmp_path / "none.tar.xz")
    done, result = run_tiny_check(tmp_path, "--data-archive", archive, timeout=300)
    steps = result["steps"]
    failed = {
        name: {k: step.get(k) for k in ("error", "output_tail", "chapters")}
        for name, step in steps.items()
        if step["status"] != "passed"
    }
    assert done.returncode == 0 and not failed, (done.stdout[-2000:], failed)
    assert list(steps) == [
        "environment",
        "data",
        "parity",
        "throughput",
        "chapters_quick",
    ]
    assert result["finished"] and result["all_passed"] and result["tiny"]
    assert result["device"] == "cpu" and result["summary"]["passed"] == list(steps)
    env_ = result["environment"]
    assert {
        "device_name",
        "capability",
        "torch",
        "cuda",
        "python",
        "git_commit",
    } <= set(env_)
    assert steps["data"]["verified"] > 30 and not steps["data"]["missing"]
    parity = steps["parity"]
    assert parity["counts"]["passed"] == parity["counts"]["tests"] >= 20
    assert all(t["outcome"] == "passed" and t["seconds"] >= 0 for t in parity["tests"])
    assert parity["measured_errors"]["device"] == "cpu"
    table = steps["throughput"]["table"]
    assert (
        table["flops_per_token"]["total"] > 2e7
    )  # bert-mini: about 22.7 MFLOP per token
    (row,) = table["rows"]
    assert (
        row["precision"] == "fp32"
        and row["tokens_per_second"] > 0
        and row["tflops"] > 0
    )
    (chapter,) = steps["chapters_quick"]["chapters"]
    assert chapter["chapter"] == "01_feedforward" and chapter["status"] == "passed"
    assert chapter["ran"] == chapter["cells"] > 10 and chapter["seconds"] > 0
    assert (tmp_path / "chapters" / "01_feedforward.quick.log").is_file()


def test_gpu_check_skips_what_the_deadline_leaves_no_time_for(tmp_path):
    done, result = run_tiny_check(
        tmp_path, "--deadline-s", "25", "--skip", "data", timeout=120
    )
    steps = result["steps"]
    assert done.returncode == 0 and result["finished"] and not result["all_passed"]
    assert steps["data"] == {"status": "skipped", "reason": "--skip"}
    assert all(
        steps[name]["status"] == "skipped" and "deadline" in steps[name]["reason"]
        for name in ("parity", "throughput", "chapters_quick")
    )
