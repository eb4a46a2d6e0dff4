"""Hand-written: measure how long every chapter runs, and write ``book/budgets.json``.

Usage::

    python -m book.tools.budget                          # every chapter in the book, both modes
    python -m book.tools.budget --mode quick             # quick mode only (make budget-quick)
    python -m book.tools.budget --mode normal --only 03  # one chapter at a time
    python -m book.tools.budget --note "shared machine"  # a remark stored with the numbers
    python -m book.tools.budget --show                   # print the table from the JSON

Each chapter is executed top to bottom in a fresh Jupyter kernel, exactly as the book build
executes it (same kernel, working directory ``chapters/``, ``TINYBERT_QUICK`` set or unset),
and the wall-clock time from kernel start to the last cell is recorded with the machine it
ran on: the device the chapter chose, CPU count and model, GPU name, versions, load average.
A last probe cell, run in the same kernel after the chapter, reports the device and versions.

``book/budgets.json`` keeps one measurement per chapter, mode and device type (cpu, cuda,
mps): measuring again replaces only what was measured. The badge at the top of each chapter
page and the budget table of the instructor guide are made from this file at build time
(``book/_ext/budget_badges.py``); nothing typed by hand.
"""
from __future__ import annotations

import argparse
import copy
import hashlib
import json
import os
import platform
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

from book.tools.chapters import ROOT, Chapter, chapters
from tinybert.checkpoint.atomic import write_atomically

BUDGETS = ROOT / "book" / "budgets.json"
MODES = ("quick", "normal")
PROBE_TAG = "tinybert-budget-probe"
# Runs before the chapter: every assert statement of the chapter's cells (in functions
# too) counts itself when it runs, so the record says how many asserts ran and held.
COUNT_ASSERTS = f'''# {PROBE_TAG}: count the chapter's asserts as they run
import ast as _ast, builtins as _builtins
_builtins._tinybert_asserts = [0]
class _TinybertCountAsserts(_ast.NodeTransformer):
    def visit_Module(self, node):
        return _ast.fix_missing_locations(self.generic_visit(node))
    def visit_Assert(self, node):
        count = _ast.parse("_tinybert_asserts[0] += 1").body[0]
        return [_ast.copy_location(count, node), node]
get_ipython().ast_transformers.append(_TinybertCountAsserts())'''
PROBE = f'''# {PROBE_TAG}: what this kernel ran the chapter with
import json as _json, os as _os, platform as _platform
import torch as _torch
import tinybert as _tinybert
from tinybert.runtime import get_device as _get_device
_device = _get_device()
print("{PROBE_TAG}", _json.dumps({{
    "device": _device.type,
    "gpu": _torch.cuda.get_device_name(_device) if _device.type == "cuda" else None,
    "torch_threads": _torch.get_num_threads(),
    "torch": _torch.__version__,
    "tinybert": _tinybert.__version__,
    "python": _platform.python_version(),
    "quick": _os.environ.get("TINYBERT_QUICK", ""),
    "asserts": __import__("builtins")._tinybert_asserts[0],
}}))'''


# --- the chapters, as they are executed ---------------------------------------------------

def code_sha256(chapter: Chapter) -> str:
    """A fingerprint of the chapter's code cells: prose edits do not change a chapter's
    budget, nor does its quiz (a cell tagged ``quiz`` only shows questions), nor do its
    diagrams (a cell tagged ``diagram`` only draws a figure with tinybert.diagrams, and
    holds no assert: tests/test_diagrams.py checks both)."""
    digest = hashlib.sha256()
    for cell in chapter.read().cells:
        shows = {"quiz", "diagram"} & set(cell.get("metadata", {}).get("tags", []))
        if cell.cell_type == "code" and not shows:
            digest.update(cell.source.encode("utf-8") + b"\0")
    return digest.hexdigest()


def execution_timeout(root: Path = ROOT) -> int:
    """Seconds a chapter may run in the book build (``execute.timeout`` in _config.yml)."""
    import yaml

    config = yaml.safe_load((root / "_config.yml").read_text())
    return int(config["execute"]["timeout"])


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _cpus_available() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


def measure(chapter: Chapter, mode: str, *, timeout: int | None = None,
            kernel_name: str = "python3", keep: Path | None = None) -> dict:
    """Execute ``chapter`` in ``mode`` ('quick' or 'normal') and return one measurement.

    With ``keep`` (a folder), the executed notebook is also written there, outputs included.

    Raises ``nbclient.exceptions.CellExecutionError`` when a cell fails: a chapter that does
    not run has no budget.
    """
    import nbformat
    from nbclient import NotebookClient

    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    notebook = chapter.read()
    notebook.metadata.pop("jupytext", None)
    notebook.cells.insert(0, nbformat.v4.new_code_cell(COUNT_ASSERTS,
                                                       metadata={"tags": [PROBE_TAG]}))
    notebook.cells.append(nbformat.v4.new_code_cell(PROBE, metadata={"tags": [PROBE_TAG]}))
    timeout = timeout or execution_timeout()
    saved = os.environ.get("TINYBERT_QUICK")
    os.environ["TINYBERT_QUICK"] = "1" if mode == "quick" else "0"
    load_before = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    started = datetime.now(timezone.utc)
    try:
        client = NotebookClient(notebook, timeout=timeout, kernel_name=kernel_name,
                                resources={"metadata": {"path": str(chapter.path.parent)}})
        start = time.perf_counter()
        client.execute()
        seconds = time.perf_counter() - start
    finally:
        if saved is None:
            os.environ.pop("TINYBERT_QUICK", None)
        else:
            os.environ["TINYBERT_QUICK"] = saved
    load_after = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    probe = _probe_output(notebook.cells[-1])
    if keep is not None:
        Path(keep).mkdir(parents=True, exist_ok=True)
        nbformat.write(notebook, Path(keep) / f"{chapter.stem}.{mode}.ipynb")
    return {
        "seconds": round(seconds, 1),
        "measured": started.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "device": probe["device"],
        "gpu": probe["gpu"],
        "cpu_count": _cpus_available(),
        "cpu_model": cpu_model(),
        "torch_threads": probe["torch_threads"],
        "asserts_passed": probe["asserts"],  # the chapter's asserts that ran (and held)
        "load_average": [None if x is None else round(x, 2) for x in (load_before, load_after)],
        "python": probe["python"],
        "torch": probe["torch"],
        "tinybert": probe["tinybert"],
        "platform": platform.platform(),
        "code_sha256": code_sha256(chapter),
    }


def _probe_output(cell) -> dict:
    # One print() can arrive as several stream outputs: join them before reading the line.
    text = "".join(output.get("text", "") for output in cell.get("outputs", [])
                   if output.get("output_type") == "stream")
    for line in text.splitlines():
        if line.startswith(PROBE_TAG + " "):
            return json.loads(line[len(PROBE_TAG) + 1:])
    raise RuntimeError(f"the probe cell did not print its report; its outputs: "
                       f"{cell.get('outputs', [])!r:.500}")


# --- the JSON file ------------------------------------------------------------------------

ABOUT = ("Wall-clock seconds to execute each chapter top to bottom in a fresh kernel (kernel "
         "start included), in quick mode (TINYBERT_QUICK=1) and in normal mode, one entry per "
         "device type. Written by `make budget` (python -m book.tools.budget); do not edit by "
         "hand. The chapter badges and the instructor guide's table are made from this file.")


def load(path: Path = BUDGETS) -> dict:
    """The budgets file, or an empty one. Layout: chapters -> stem -> mode -> device -> entry."""
    if not path.is_file():
        return {"about": ABOUT, "chapters": {}}
    data = json.loads(path.read_text())
    if not isinstance(data.get("chapters"), dict):
        raise ValueError(f"{path}: expected an object with a 'chapters' mapping")
    return data


def record(data: dict, stem: str, mode: str, entry: dict, note: str = "") -> dict:
    """A copy of ``data`` with ``entry`` stored for (chapter, mode, entry's device type)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    data = copy.deepcopy(data)
    data["about"] = ABOUT
    entry = dict(entry)
    if note:
        entry["note"] = note
    data["chapters"].setdefault(stem, {}).setdefault(mode, {})[entry["device"]] = entry
    data["chapters"] = dict(sorted(data["chapters"].items()))
    return data


def save(data: dict, path: Path = BUDGETS) -> None:
    text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    write_atomically(path, lambda temporary: Path(temporary).write_text(text))


def lookup(data: dict, stem: str, mode: str, device: str = "cpu") -> dict | None:
    return data.get("chapters", {}).get(stem, {}).get(mode, {}).get(device)


# --- words for the pages ------------------------------------------------------------------

def duration(seconds: float) -> str:
    """'8 s', '45 s', '2 min 05 s', '30 min', '1 h 02 min': how long, for a reader."""
    if seconds < 0:
        raise ValueError(f"a duration cannot be negative, got {seconds}")
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds} s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min" if seconds == 0 else f"{minutes} min {seconds:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def where(entry: dict) -> str:
    """The machine of a measurement, in words: 'a 2-core CPU' or 'an NVIDIA H100 GPU'."""
    if entry["device"] == "cuda":
        return f"a GPU ({entry.get('gpu') or 'CUDA'})"
    if entry["device"] == "mps":
        return "an Apple GPU (MPS)"
    return f"a {entry['cpu_count']}-core CPU"


def needs_gpu(data: dict, stem: str, limit: int) -> bool | None:
    """True/False from the normal-mode CPU measurement against ``limit`` seconds; None if unmeasured."""
    entry = lookup(data, stem, "normal", "cpu")
    return None if entry is None else entry["seconds"] > limit


def is_stale(entry: dict, chapter: Chapter) -> bool:
    """True when the chapter's code changed after the measurement."""
    return entry.get("code_sha256") not in (None, code_sha256(chapter))


def unchecked_chapters(data: dict, found: list[Chapter]) -> list[str]:
    """The chapters whose normal-mode asserts have not run on their current code: no
    normal-mode run on the CPU, or one made before the code last changed. CI fails on
    any (tests/test_budget.py): re-run them with `make budget` or
    `python -m book.tools.budget --mode normal --only NN`."""
    problems = []
    for chapter in found:
        entry = lookup(data, chapter.stem, "normal", "cpu")
        if entry is None:
            problems.append(f"{chapter.stem}: never run in normal mode")
        elif entry.get("code_sha256") is None or is_stale(entry, chapter):
            problems.append(f"{chapter.stem}: code changed since its normal-mode run "
                            f"of {entry['measured'][:10]}")
    return problems


def table(data: dict, stems: list[str]) -> list[list[str]]:
    """Rows (chapter, quick on CPU, normal on CPU, normal on GPU) for a plain-text report."""
    rows = []
    for stem in stems:
        cells = [stem]
        for mode, device in (("quick", "cpu"), ("normal", "cpu"), ("normal", "cuda")):
            entry = lookup(data, stem, mode, device)
            cells.append("not measured yet" if entry is None else
                         f"{duration(entry['seconds'])} ({where(entry)})")
        rows.append(cells)
    return rows


# --- command line -------------------------------------------------------------------------

def _select(only: list[str] | None) -> list[Chapter]:
    """The chapters named by --only (any chapter file), else every chapter in the book's _toc.yml."""
    from book.tools.course import book_chapters

    if not only:
        return book_chapters()
    found = chapters()
    def matches(chapter: Chapter, wanted: str) -> bool:  # "3", "03" or "03_attention"
        return chapter.stem == wanted or chapter.stem[:2] == wanted.zfill(2)

    chosen = [c for c in found if any(matches(c, o) for o in only)]
    unknown = [o for o in only if not any(matches(c, o) for c in found)]
    if unknown:
        raise SystemExit(f"no chapter matches {unknown}; chapters: {[c.stem for c in found]}")
    return chosen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=["quick", "normal", "both"], default="both")
    parser.add_argument("--only", nargs="+", metavar="NN",
                        help="chapter numbers or stems (default: every chapter in _toc.yml)")
    parser.add_argument("--note", default="", help="a remark stored with these measurements")
    parser.add_argument("--out", type=Path, default=BUDGETS)
    parser.add_argument("--show", action="store_true", help="print the table and measure nothing")
    parser.add_argument("--keep", type=Path, default=None,
                        help="also write each executed notebook (with its outputs) into this folder")
    args = parser.parse_args(argv)
    if args.show:
        for row in table(load(args.out), [c.stem for c in _select(args.only)]):
            print(" | ".join(row))
        return 0
    if not os.environ.get("TINYBERT_DATA_DIR"):
        print("note: TINYBERT_DATA_DIR is not set; chapters download their data on first use "
              "(a download would be timed too)", file=sys.stderr)
    modes = MODES if args.mode == "both" else (args.mode,)
    failures = []
    for mode in modes:
        for chapter in _select(args.only):
            print(f"{chapter.stem} ({mode} mode) ...", end=" ", flush=True)
            try:
                entry = measure(chapter, mode, keep=args.keep)
            except Exception as error:  # a failing chapter is reported, the others still run
                print(f"FAILED: {type(error).__name__}: {str(error).splitlines()[0][:300]}")
                failures.append(f"{chapter.stem} ({mode})")
                continue
            # Re-read before writing: another run (one chapter at a time) may have written since.
            save(record(load(args.out), chapter.stem, mode, entry, args.note), args.out)
            print(f"{duration(entry['seconds'])} on {where(entry)}, load average "
                  f"{entry['load_average'][0]} -> {entry['load_average'][1]}")
    if failures:
        print(f"not measured (a cell failed): {', '.join(failures)}", file=sys.stderr)
        return 1
    print(f"wrote {args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
