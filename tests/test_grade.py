"""Checking students' notebooks (book/tools/grade.py) and the nbgrader edition (book/tools/nbgrader.py)."""
from __future__ import annotations

import copy
import re

import nbformat
import pytest

from book.tools import editions, grade, nbgrader
from book.tools.chapters import cell_tags
from book.tools.course import book_chapters

CHAPTER = book_chapters()[0]
CODING = [e.label for e in editions.coding_exercises(CHAPTER)]


def write(notebook, path):
    editions.to_ipynb(notebook, path)
    return path


def test_reference_solutions_pass_and_student_stubs_fail(tmp_path):
    solved = write(CHAPTER.read(), tmp_path / "alice" / f"{CHAPTER.stem}.ipynb")
    blank = write(editions.student_notebook(CHAPTER.read()), tmp_path / "bob" / f"{CHAPTER.stem}.ipynb")
    results = grade.grade(solved) + grade.grade(blank)
    passed = {(r.submission.split("/")[-2], r.exercise): r.passed for r in results}
    assert [r.exercise for r in results[:len(CODING)]] == CODING
    assert all(passed[("alice", label)] for label in CODING), results
    assert not any(passed[("bob", label)] for label in CODING), results
    assert all("NotImplementedError" in r.message for r in results if not r.passed)


def test_the_courses_checks_are_used_not_the_submitted_ones(tmp_path):
    student = editions.student_notebook(CHAPTER.read())
    for cell in student.cells:
        if "check" in cell_tags(cell):
            cell.source = "pass  # a student who edited the check"
    results = grade.grade(write(student, tmp_path / f"{CHAPTER.stem}.ipynb"))
    assert results and not any(r.passed for r in results)


def test_a_missing_solution_cell_is_reported(tmp_path):
    notebook = CHAPTER.read()
    first = next(c for c in notebook.cells if "solution" in cell_tags(c))
    notebook.cells.remove(first)
    results = grade.grade(write(notebook, tmp_path / f"{CHAPTER.stem}.ipynb"))
    missing = [r for r in results if r.exercise == CODING[0]]
    assert missing and not missing[0].passed and "no solution cell" in missing[0].message


def test_an_answer_that_never_returns_is_stopped(tmp_path):
    notebook = CHAPTER.read()
    for cell in notebook.cells:
        if "solution" in cell_tags(cell):
            cell.source = "while True:\n    pass"
            break
    results = grade.grade(write(notebook, tmp_path / f"{CHAPTER.stem}.ipynb"), timeout=2)
    stopped = next(r for r in results if r.exercise == CODING[0])
    assert not stopped.passed and "TimeoutError" in stopped.message


def test_chapter_is_recognised_by_name_or_metadata(tmp_path):
    notebook = CHAPTER.read()
    assert grade.chapter_of(tmp_path / f"x_{CHAPTER.stem}_final.ipynb", notebook) == CHAPTER
    assert grade.chapter_of(tmp_path / "homework.ipynb", notebook) == CHAPTER  # tinybert metadata
    notebook.metadata.pop("tinybert", None)
    with pytest.raises(ValueError, match="which chapter"):
        grade.chapter_of(tmp_path / "homework.ipynb", notebook)


def test_grade_command_writes_a_csv(tmp_path, capsys):
    path = write(CHAPTER.read(), tmp_path / f"{CHAPTER.stem}.ipynb")
    assert grade.main([str(path), "--csv", str(tmp_path / "grades.csv")]) == 0
    rows = (tmp_path / "grades.csv").read_text().splitlines()
    assert rows[0] == "submission,chapter,exercise,passed,message"
    assert len(rows) == 1 + len(CODING) and all(row.split(",")[3] == "1" for row in rows[1:])
    assert f"{len(CODING)} of {len(CODING)} exercise checks passed" in capsys.readouterr().out


# --- nbgrader ---------------------------------------------------------------------------------

NBGRADER_KEYS = {"schema_version", "grade", "solution", "locked", "grade_id", "points"}


@pytest.mark.parametrize("chapter", book_chapters(), ids=lambda c: c.stem)
def test_nbgrader_source_has_valid_metadata_and_no_loose_solutions(chapter):
    notebook = nbgrader.nbgrader_notebook(chapter.read(), points=2)
    nbformat.validate(notebook)
    graded = [c for c in notebook.cells if "nbgrader" in c.metadata]
    ids = [c.metadata["nbgrader"]["grade_id"] for c in graded]
    assert len(ids) == len(set(ids))
    for cell in graded:
        meta = cell.metadata["nbgrader"]
        assert set(meta) <= NBGRADER_KEYS and meta["schema_version"] == 3
        assert re.fullmatch(r"[a-zA-Z0-9_\-]+", meta["grade_id"])
        assert ("points" in meta) == meta["grade"]
        if cell.cell_type == "markdown":  # nbgrader: a markdown answer is graded by hand
            assert meta["grade"] and meta["solution"] and not meta["locked"]
    coding = editions.coding_exercises(chapter)
    answers = [c for c in graded if c.cell_type == "code" and c.metadata["nbgrader"]["solution"]]
    tests = [c for c in graded if c.metadata["nbgrader"]["grade"] and c.cell_type == "code"]
    assert [c.metadata["nbgrader"]["grade_id"] for c in answers] == [e.label for e in coding]
    assert all(editions.BEGIN in c.source and editions.END in c.source for c in answers)
    assert len(tests) == sum(len(e.checks) for e in coding)
    assert all(c.metadata["nbgrader"]["locked"] and c.metadata["nbgrader"]["points"] == 2 for c in tests)
    # Everything that is not an nbgrader answer is released as it is: no solution may hide there.
    loose = "\n".join(c.source for c in notebook.cells if not c.metadata.get("nbgrader", {}).get("solution"))
    assert editions.BEGIN not in loose and "solution-start" not in loose
    for exercise in coding:
        answer = exercise.solution.split(editions.BEGIN)[1].split(editions.END)[0].strip()
        assert answer not in loose
    pen_and_paper = [e for e in re.findall(r"\{solution-start\}\s+(\S+)", chapter.path.read_text())
                     if e not in {x.label for x in coding}]
    written = [c.metadata["nbgrader"]["grade_id"] for c in graded if c.cell_type == "markdown"]
    assert written == [f"{label}-answer" for label in pen_and_paper]


def test_nbgrader_edition_writes_one_source_assignment_per_chapter(tmp_path):
    written = nbgrader.write_nbgrader(tmp_path)
    assert [p.relative_to(tmp_path).as_posix() for p in written] == [
        f"source/ch{c.number:02d}/{c.stem}.ipynb" for c in book_chapters()]
    notebook = nbformat.read(str(written[0]), as_version=4)
    assert "jupytext" not in notebook.metadata
    assert all(not c.get("outputs") for c in notebook.cells if c.cell_type == "code")
    reference = copy.deepcopy(CHAPTER.read())
    assert len(notebook.cells) <= len(reference.cells) + 2 * len(re.findall(r"solution-start",
                                                                            CHAPTER.path.read_text()))
