"""book/tools/gpu_budgets.py: the GPU check's chapter times become cuda budget entries."""
import json

import pytest

from book.tools import budget, gpu_budgets
from book.tools.chapters import chapters


def report(device="cuda"):
    env = {"device_name": "NVIDIA H200", "cpu_count": 16, "torch_threads": 16,
           "python": "3.12.3", "torch": "2.11.0+cu130", "platform": "Linux"}
    return {
        "device": device, "started": "2026-11-28T05:07:50Z",
        "steps": {
            "environment": env,
            "chapters_quick": {"chapters": [
                {"chapter": "01_feedforward", "status": "passed", "seconds": 11.7},
                {"chapter": "03_attention", "status": "failed", "seconds": 2.0},
            ]},
            "chapters_normal": {"chapters": [
                {"chapter": "01_feedforward", "status": "passed", "seconds": 30.5},
                {"chapter": "02_word_vectors", "status": "passed", "seconds": 42.0},
            ]},
        },
    }


def test_passed_chapters_named_by_only_become_cuda_entries(tmp_path):
    source, out = tmp_path / "gpu_check.json", tmp_path / "budgets.json"
    source.write_text(json.dumps(report()))
    assert gpu_budgets.main([str(source), "--only", "01", "03", "--note", "lent",
                             "--out", str(out)]) == 0
    data = budget.load(out)
    quick = budget.lookup(data, "01_feedforward", "quick", "cuda")
    normal = budget.lookup(data, "01_feedforward", "normal", "cuda")
    assert (quick["seconds"], normal["seconds"]) == (11.7, 30.5)
    assert normal["gpu"] == "NVIDIA H200" and normal["device"] == "cuda"
    assert normal["code_sha256"] == budget.code_sha256(chapters()[0])
    assert "lent" in normal["note"]
    assert budget.lookup(data, "03_attention", "quick", "cuda") is None  # it failed
    assert budget.lookup(data, "02_word_vectors", "normal", "cuda") is None  # not named
    assert budget.lookup(data, "01_feedforward", "quick", "cpu") is None


def test_a_report_from_the_cpu_is_refused(tmp_path):
    source = tmp_path / "gpu_check.json"
    source.write_text(json.dumps(report(device="cpu")))
    with pytest.raises(ValueError, match="not from a CUDA device"):
        gpu_budgets.main([str(source), "--only", "01", "--note", "x",
                          "--out", str(tmp_path / "b.json")])
