"""Hand-written: check that every chapter's .md and .py are the same notebook.

Usage::

    python -m book.tools.pairs            # report pairs out of sync (exit 1 if any)
    python -m book.tools.pairs --sync     # bring them in sync with jupytext (newest wins)

Uses jupytext's own notebook comparison (``jupytext --diff`` exits 0 even when files differ).
"""
from __future__ import annotations

import argparse
import subprocess
import sys

import jupytext
from jupytext.compare import NotebookDifference, compare_notebooks

from book.tools.chapters import CHAPTERS, ROOT, Chapter, chapters


def pair_problems(chapter: Chapter) -> list[str]:
    py = chapter.paired_py
    if not py.exists():
        return [f"{chapter.relpath}: no paired {py.name} (run `make sync`)"]
    md_nb, py_nb = jupytext.read(chapter.path), jupytext.read(py)
    formats = md_nb.metadata.get("jupytext", {}).get("formats", "")
    if formats != "md:myst,py:percent":
        return [f"{chapter.relpath}: jupytext formats are {formats!r}, "
                "expected 'md:myst,py:percent'"]
    try:
        compare_notebooks(py_nb, md_nb, fmt="py:percent", allow_expected_differences=False)
    except NotebookDifference as difference:
        return [f"{chapter.relpath} and {py.name} differ (run `make sync`):\n{difference}"]
    return []


def orphans() -> list[str]:
    mds = {c.paired_py for c in chapters()}
    return [f"{p.relative_to(ROOT)}: no paired .md chapter" for p in sorted(CHAPTERS.glob("*.py"))
            if p not in mds]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sync", action="store_true", help="run jupytext --sync on each pair")
    args = parser.parse_args(argv)
    if args.sync:
        for chapter in chapters():
            subprocess.run([sys.executable, "-m", "jupytext", "--sync", "--quiet",
                            str(chapter.path)], check=True)
            if not chapter.paired_py.exists():  # a new chapter: create its .py
                subprocess.run([sys.executable, "-m", "jupytext", "--quiet", "--set-formats",
                                "md:myst,py:percent", str(chapter.path)], check=True)
    problems = orphans() + [p for c in chapters() for p in pair_problems(c)]
    for problem in problems:
        print(problem, file=sys.stderr)
    print(f"pair check: {len(chapters())} chapter(s), {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
