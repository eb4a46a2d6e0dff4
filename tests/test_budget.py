"""The compute budgets: measured by book/tools/budget.py, stored in book/budgets.json, shown on
every chapter page by book/_ext/budget_badges.py."""
from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

from book.tools import budget
from book.tools.chapters import ROOT, Chapter, chapters

sys.path.insert(0, str(ROOT / "book" / "_ext"))
import budget_badges  # noqa: E402

REQUIRED = {"seconds", "measured", "device", "gpu", "cpu_count", "cpu_model", "torch_threads",
            "load_average", "python", "torch", "tinybert", "platform", "code_sha256"}


def entry(seconds=12.0, device="cpu", **extra):
    base = {"seconds": seconds, "measured": "2026-01-02T03:04:05Z", "device": device,
            "gpu": "NVIDIA Test" if device == "cuda" else None, "cpu_count": 2, "cpu_model": "Test CPU",
            "torch_threads": 2, "load_average": [0.1, 0.2], "python": "3.11.0", "torch": "2.13.0",
            "tinybert": "0.1.0", "platform": "Linux", "code_sha256": "0" * 64}
    return {**base, **extra}


@pytest.mark.parametrize("seconds, words", [
    (0, "0 s"), (8.4, "8 s"), (59.4, "59 s"), (59.6, "1 min"), (125, "2 min 05 s"), (1800, "30 min"),
    (3725, "1 h 02 min")])
def test_duration_in_words(seconds, words):
    assert budget.duration(seconds) == words


def test_duration_rejects_negative_times():
    with pytest.raises(ValueError, match="negative"):
        budget.duration(-1)


def test_record_replaces_only_its_own_chapter_mode_and_device():
    data = budget.record(budget.load(Path("/nonexistent.json")), "01_a", "quick", entry(10))
    data = budget.record(data, "01_a", "normal", entry(100))
    data = budget.record(data, "01_a", "normal", entry(20, device="cuda"))
    data = budget.record(data, "02_b", "quick", entry(5), note="shared machine")
    again = budget.record(data, "01_a", "quick", entry(11))
    assert budget.lookup(again, "01_a", "quick")["seconds"] == 11
    assert budget.lookup(again, "01_a", "normal")["seconds"] == 100
    assert budget.lookup(again, "01_a", "normal", "cuda")["seconds"] == 20
    assert budget.lookup(again, "02_b", "quick")["note"] == "shared machine"
    assert budget.lookup(data, "01_a", "quick")["seconds"] == 10, "record must not change its input"
    assert budget.lookup(again, "03_c", "quick") is None
    with pytest.raises(ValueError, match="mode"):
        budget.record(data, "01_a", "slow", entry())


def test_save_and_load_round_trip(tmp_path):
    path = tmp_path / "budgets.json"
    data = budget.record(budget.load(path), "01_a", "quick", entry(3))
    budget.save(data, path)
    assert budget.load(path) == data
    path.write_text('{"chapters": []}')
    with pytest.raises(ValueError, match="chapters"):
        budget.load(path)


def test_needs_gpu_comes_from_the_normal_mode_cpu_time():
    data = budget.record({"chapters": {}}, "01_a", "normal", entry(100))
    data = budget.record(data, "02_b", "normal", entry(4000))
    data = budget.record(data, "03_c", "quick", entry(10))
    assert budget.needs_gpu(data, "01_a", limit=1800) is False
    assert budget.needs_gpu(data, "02_b", limit=1800) is True
    assert budget.needs_gpu(data, "03_c", limit=1800) is None  # no normal-mode measurement


def words(data, stem, limit=1800, stale=False):
    return "".join(text for _, text in budget_badges.badge_words(budget, data, stem, limit, stale))


def test_badge_without_a_measurement_invents_nothing():
    text = words({"chapters": {}}, "09_pretraining")
    assert text == "Compute budget: not measured yet."


def test_badge_says_what_was_measured_and_what_was_not():
    data = budget.record({"chapters": {}}, "01_a", "quick", entry(22))
    text = words(data, "01_a")
    assert "on a 2-core CPU" in text and "quick mode 22 s" in text
    assert "normal mode not measured yet" in text and "GPU is not known yet" in text
    assert "Measured 2026-01-02" in text
    data = budget.record(data, "01_a", "normal", entry(130))
    text = words(data, "01_a")
    assert "normal mode 2 min 10 s" in text and "no GPU needed" in text
    assert "on a GPU: not measured yet" in text
    data = budget.record(data, "01_a", "normal", entry(31, device="cuda"))
    assert "on a GPU, normal mode: 31 s, NVIDIA Test" in words(data, "01_a")
    slow = budget.record({"chapters": {}}, "02_b", "normal", entry(4000))
    assert "needs a GPU" in words(slow, "02_b", limit=1800)
    assert "before the chapter's code last changed" in words(data, "01_a", stale=True)


def write_chapter(folder: Path, code: str) -> Chapter:
    path = folder / "01_tiny.md"
    path.write_text(textwrap.dedent(f"""\
        ---
        kernelspec:
          display_name: Python 3
          language: python
          name: python3
        ---
        # Tiny

        ```{{code-cell}} ipython3
        {code}
        ```
        """))
    return Chapter(path)


def test_stale_when_the_code_changes_but_not_the_prose(tmp_path):
    chapter = write_chapter(tmp_path, "x = 1")
    measured = entry(code_sha256=budget.code_sha256(chapter))
    assert not budget.is_stale(measured, chapter)
    chapter.path.write_text(chapter.path.read_text().replace("# Tiny", "# Tiny, retitled"))
    assert not budget.is_stale(measured, chapter)
    chapter.path.write_text(chapter.path.read_text().replace("x = 1", "x = 2"))
    assert budget.is_stale(measured, chapter)


def test_measure_executes_the_chapter_and_records_its_machine(tmp_path, monkeypatch):
    monkeypatch.setenv("TINYBERT_QUICK", "0")
    chapter = write_chapter(tmp_path, "import os, time\nassert os.environ['TINYBERT_QUICK'] == '1'\n"
                                      "time.sleep(1.5)")
    result = budget.measure(chapter, "quick")
    assert REQUIRED <= set(result)
    assert result["seconds"] >= 1.5
    assert result["device"] in {"cpu", "cuda", "mps"} and result["cpu_count"] >= 1
    import torch

    import tinybert
    assert result["torch"] == torch.__version__ and result["tinybert"] == tinybert.__version__
    assert result["code_sha256"] == budget.code_sha256(chapter)
    assert budget.duration(result["seconds"]).endswith("s")
    import os
    assert os.environ["TINYBERT_QUICK"] == "0", "measure must restore the caller's quick mode"


def test_measure_counts_the_asserts_that_ran(tmp_path):
    chapter = write_chapter(tmp_path, "x = 1")
    code = ("def check(x):\n    assert x > 0\n\nfor i in range(1, 4):\n    check(i)\n"
            "assert True, 'top level'\nif False:\n    assert False\n")
    chapter.path.write_text(chapter.path.read_text().replace("x = 1\n", code))
    assert len(chapter.read().cells) == 2
    # 3 calls of check and the top-level one; not the assert that never ran
    assert budget.measure(chapter, "quick")["asserts_passed"] == 4


def test_ci_fails_on_a_chapter_changed_since_its_normal_mode_run(tmp_path):
    chapter = write_chapter(tmp_path, "x = 1")
    data = {"chapters": {}}
    assert budget.unchecked_chapters(data, [chapter]) == ["01_tiny: never run in normal mode"]
    data = budget.record(data, "01_tiny", "normal", entry(code_sha256=budget.code_sha256(chapter)))
    assert budget.unchecked_chapters(data, [chapter]) == []
    data = budget.record(data, "01_tiny", "quick", entry(code_sha256="f" * 64))
    assert budget.unchecked_chapters(data, [chapter]) == []  # quick mode is not the check
    chapter.path.write_text(chapter.path.read_text().replace("x = 1", "x = 2"))
    [problem] = budget.unchecked_chapters(data, [chapter])
    assert "01_tiny: code changed since its normal-mode run" in problem


def test_every_chapter_ran_its_normal_mode_asserts_on_its_current_code():
    """Results that stay true: a chapter whose code changed since its last normal-mode run
    (book/budgets.json) fails here until it is run again in normal mode."""
    from book.tools.course import book_chapters

    problems = budget.unchecked_chapters(budget.load(), book_chapters())
    assert not problems, ("re-run in normal mode (python -m book.tools.budget --mode normal "
                          "--only NN): " + "; ".join(problems))


def test_a_failing_chapter_is_not_measured(tmp_path):
    chapter = write_chapter(tmp_path, "raise RuntimeError('broken chapter')")
    with pytest.raises(Exception, match="broken chapter"):
        budget.measure(chapter, "quick")


def test_only_selects_chapters_by_number_or_stem():
    stems = [c.stem for c in chapters()]
    assert [c.stem for c in budget._select(["3"])] == [s for s in stems if s.startswith("03_")]
    assert [c.stem for c in budget._select([stems[0]])] == [stems[0]]
    with pytest.raises(SystemExit):
        budget._select(["99"])


def test_the_committed_budgets_describe_real_chapters_and_machines():
    data = json.loads(budget.BUDGETS.read_text())
    assert data["about"] == budget.ABOUT
    stems = {c.stem for c in chapters()}
    assert data["chapters"], "book/budgets.json holds no measurement: run `make budget`"
    for stem, modes in data["chapters"].items():
        assert stem in stems, f"budgets.json measures {stem}, which is not a chapter"
        for mode, devices in modes.items():
            assert mode in budget.MODES
            for device, measured in devices.items():
                assert REQUIRED <= set(measured), f"{stem} {mode} {device}: fields missing"
                assert measured["device"] == device and measured["seconds"] > 0
                assert len(measured["code_sha256"]) == 64


def test_probe_report_is_read_even_when_split_across_stream_outputs():
    report = {"device": "cpu", "torch": "2.13.0"}
    line = f"{budget.PROBE_TAG} {json.dumps(report)}\n"
    cell = {"outputs": [{"output_type": "stream", "name": "stdout", "text": line[:10]},
                        {"output_type": "stream", "name": "stdout", "text": line[10:]}]}
    assert budget._probe_output(cell) == report
    with pytest.raises(RuntimeError, match="did not print its report"):
        budget._probe_output({"outputs": []})
