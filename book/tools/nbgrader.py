"""Hand-written: the chapters as nbgrader source assignments (``make nbgrader``).

Usage::

    python -m book.tools.nbgrader --out _build/nbgrader            # every chapter
    python -m book.tools.nbgrader --out _build/nbgrader --points 1  # 1 per graded cell

Writes ``OUT/source/chNN/NN_name.ipynb`` for every chapter in the book (``_toc.yml``): the chapter's notebook with
nbgrader's cell metadata (schema version 3) added, ready for ``nbgrader generate_assignment``.

- a code cell tagged ``solution`` becomes an *autograded answer* (``solution: true``); its
  ``### BEGIN SOLUTION`` / ``### END SOLUTION`` region is nbgrader's own marker, which
  ``generate_assignment`` replaces with nbgrader's stub;
- a code cell tagged ``check`` becomes an *autograder test*: locked, and worth the
  exercise's points from the chapter's metadata (its difficulty, shared among its check
  cells), or ``--points`` each when that is given;
- the worked solution of a pen-and-paper exercise becomes a *manually graded answer* cell,
  which nbgrader replaces with "YOUR ANSWER HERE" in the released notebook;
- the hints of coding exercises and the demonstration code inside solutions are dropped, and
  the quiz keeps only fingerprints of its answers, as in the student edition (``make
  student``), so that nothing of a solution is released.
"""
from __future__ import annotations

import argparse
import copy
import re
import sys
from pathlib import Path

import nbformat

from book.tools.chapters import Chapter, cell_tags
from book.tools.editions import DIRECTIVE, hide_quiz_answers, to_ipynb

LABEL = re.compile(r"\{exercise-start\}[^\n]*\n:label:\s*(\S+)")
SOLUTION_LABEL = re.compile(r"\{solution-start\}\s+(\S+)")


def _meta(grade_id: str, *, grade: bool, solution: bool, locked: bool,
          points: float | None = None) -> dict:
    meta = {"schema_version": 3, "grade": grade, "solution": solution, "locked": locked,
            "grade_id": re.sub(r"[^a-zA-Z0-9_\-]", "-", grade_id)}
    if grade:
        meta["points"] = points
    return meta


def _split_solutions(source: str, inside: bool, label: str) -> tuple[list[tuple[bool, str, str]], bool, str]:
    """Split a markdown cell at solution-start/-end directives.

    Returns ([(inside a solution?, label, text), ...], still inside at the end, current label).
    The directive lines themselves (and their option blocks) are dropped.
    """
    parts: list[tuple[bool, str, str]] = []
    current: list[str] = []
    fence = None
    for line in source.splitlines():
        if fence is not None:  # the options block or closing fence of a start/end directive
            if line.strip() == fence:
                fence = None
            continue
        match = DIRECTIVE.match(line)
        if match:
            parts.append((inside, label, "\n".join(current).strip("\n")))
            current, fence = [], match.group(1)
            inside = match.group(2) == "solution-start"
            found = SOLUTION_LABEL.search(line)
            label = found.group(1) if found else label
            continue
        current.append(line)
    parts.append((inside, label, "\n".join(current).strip("\n")))
    return [p for p in parts if p[2].strip()], inside, label


def nbgrader_notebook(notebook, *,
                      points: float | None = None) -> nbformat.NotebookNode:
    """A copy of a chapter notebook with nbgrader metadata on its exercise cells.

    An exercise is worth its ``points`` from the chapter's metadata (its difficulty): a
    written answer gets them all, and a coding exercise shares them among its checks.
    ``points``, when given, is what every written answer and every check cell is worth.
    """
    from book.tools.course import exercises_in

    worth = {e.label: e.points for e in exercises_in(notebook)}
    source = copy.deepcopy(notebook)
    source.metadata.pop("jupytext", None)
    coding = {label for label in _coding_labels(source)}
    cells, inside, label, checks = [], False, "exercise", {}
    for cell in source.cells:
        if cell.cell_type == "markdown":
            exercise = LABEL.search(cell.source)
            label = exercise.group(1) if exercise else label
            parts, inside, label = _split_solutions(cell.source, inside, label)
            for in_solution, part_label, text in parts:
                if not in_solution:
                    cells.append(nbformat.v4.new_markdown_cell(text))
                elif part_label not in coding:  # a pen-and-paper answer: graded by a person
                    value = points if points is not None else worth.get(part_label, 1)
                    cells.append(nbformat.v4.new_markdown_cell(text, metadata={"nbgrader": _meta(
                        f"{part_label}-answer", grade=True, solution=True, locked=False,
                        points=value)}))
            continue
        tags = cell_tags(cell)
        if "solution" in tags:
            cell.metadata["nbgrader"] = _meta(label, grade=False, solution=True, locked=False)
        elif "check" in tags:
            checks[label] = checks.get(label, 0) + 1
            cell.metadata["nbgrader"] = _meta(f"{label}-check-{checks[label]}", grade=True,
                                              solution=False, locked=True, points=points)
        elif inside:
            continue  # demonstration code that belongs to a solution
        elif "quiz" in tags:
            cell.source = hide_quiz_answers(cell.source)  # released as it is
        cell.outputs, cell.execution_count = [], None
        cells.append(cell)
    source.cells = cells
    if points is None:  # each coding exercise's points, shared among its check cells
        for cell in cells:
            meta = cell.metadata.get("nbgrader", {})
            label = meta.get("grade_id", "").rpartition("-check-")[0]
            if cell.cell_type == "code" and meta.get("grade") and label:
                meta["points"] = worth.get(label, 1) / checks[label]
    _check_unique(source)
    return source


def _coding_labels(notebook) -> list[str]:
    labels, label = [], None
    for cell in notebook.cells:
        if cell.cell_type == "markdown":
            found = SOLUTION_LABEL.search(cell.source) or LABEL.search(cell.source)
            label = found.group(1) if found else label
        elif "solution" in cell_tags(cell) and label:
            labels.append(label)
    return labels


def _check_unique(notebook) -> None:
    ids = [c.metadata["nbgrader"]["grade_id"] for c in notebook.cells if "nbgrader" in c.metadata]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise ValueError(f"duplicate nbgrader grade ids: {duplicates}")


def assignment_name(chapter: Chapter) -> str:
    return f"ch{chapter.number:02d}"


def write_nbgrader(out: Path, *, points: float | None = None) -> list[Path]:
    """One source assignment per chapter of the book (those listed in _toc.yml)."""
    from book.tools.course import book_chapters

    written = []
    for chapter in book_chapters():
        path = out / "source" / assignment_name(chapter) / f"{chapter.stem}.ipynb"
        to_ipynb(nbgrader_notebook(chapter.read(), points=points), path)
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--points", type=float, default=None,
                        help="points per graded cell (default: each exercise's points "
                        "from the chapter, its difficulty)")
    args = parser.parse_args(argv)
    written = write_nbgrader(args.out, points=args.points)
    print(f"wrote {len(written)} nbgrader source notebook(s) under {args.out / 'source'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
