"""Hand-written: copy the chapter times that ``make gpu-check`` measured on a lent GPU
into ``book/budgets.json`` as ``cuda`` entries, so that the chapter badges and the
instructor guide show them.

Usage::

    python -m book.tools.gpu_budgets benchmarks/results/gpu_check_h200.json \\
        --only 01 02 03 --note "lent H200 on 2026-11-28"

Only chapters that passed are copied, and only those named by ``--only``: name a chapter
only if its code has not changed since the GPU ran it (the entry records the chapter's
code as it is now, so a later change marks it stale, as for CPU measurements). The GPU
check runs a chapter's cells in one Python process (benchmarks/run_chapter.py), not in a
Jupyter kernel: the note says so.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from book.tools import budget
from book.tools.chapters import chapters

STEPS = {"chapters_quick": "quick", "chapters_normal": "normal"}


def entries(report: dict) -> list[tuple[str, str, dict]]:
    """(chapter stem, mode, budget entry) for every chapter the report says passed."""
    env = report["steps"]["environment"]
    if env.get("device_name") is None or report.get("device") != "cuda":
        raise ValueError("the report is not from a CUDA device")
    found = []
    for step, mode in STEPS.items():
        for run in report["steps"].get(step, {}).get("chapters", []):
            if run.get("status") != "passed":
                continue
            found.append((run["chapter"], mode, {
                "seconds": run["seconds"],
                "measured": report["started"],
                "device": "cuda",
                "gpu": env["device_name"],
                "cpu_count": env["cpu_count"],
                "cpu_model": "the lent machine's CPU",
                "torch_threads": env["torch_threads"],
                "load_average": [None, None],
                "python": env["python"],
                "torch": env["torch"],
                "tinybert": "0.1.0",
                "platform": env["platform"],
            }))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reports", nargs="+", type=Path, help="gpu_check.json files")
    parser.add_argument("--only", nargs="+", required=True, metavar="NN",
                        help="chapters whose code is unchanged since the GPU ran them")
    parser.add_argument("--note", required=True)
    parser.add_argument("--out", type=Path, default=budget.BUDGETS)
    args = parser.parse_args(argv)
    by_stem = {c.stem: c for c in chapters()}
    wanted = {s for s in by_stem if any(s[:2] == o.zfill(2) for o in args.only)}
    data, copied = budget.load(args.out), []
    for path in args.reports:
        for stem, mode, entry in entries(json.loads(path.read_text())):
            if stem in wanted:
                entry["code_sha256"] = budget.code_sha256(by_stem[stem])
                note = f"{args.note}; run cell by cell by benchmarks/run_chapter.py"
                data = budget.record(data, stem, mode, entry, note)
                copied.append(f"{stem} {mode} {entry['seconds']} s")
    budget.save(data, args.out)
    print("\n".join(copied) or "nothing copied", file=sys.stderr)
    return 0 if copied else 1


if __name__ == "__main__":
    sys.exit(main())
