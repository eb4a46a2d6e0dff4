"""Checking students' notebooks (book/tools/grade.py) and the nbgrader edition (book/tools/nbgrader.py)."""
from __future__ import annotations

import copy
import csv
import re

import nbformat
import pytest

from book.tools import course, editions, grade, nbgrader
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
    assert rows[0] == "submission,chapter,exercise,passed,points,max_points,message"
    assert len(rows) == 1 + len(CODING) and all(row.split(",")[3] == "1" for row in rows[1:])
    worth = {e.label: e.points for e in course.exercises(CHAPTER)}
    points = [row.split(",")[4] for row in rows[1:]]
    assert points == [str(worth[label]) for label in CODING]
    assert f"{len(CODING)} of {len(CODING)} exercise checks passed" in capsys.readouterr().out


@pytest.mark.parametrize("target, expected", [
    ("submission", "is one of the submissions"),
    ("no/such/folder/grades.csv", "does not exist"),
    ("a_folder", "is a folder"),
    ("existing.csv", "exists; choose a new file"),
    ("grades.ipynb", "is a notebook"),
])
def test_a_bad_csv_is_refused_before_anything_is_graded(tmp_path, capsys, target, expected):
    path = write(CHAPTER.read(), tmp_path / f"{CHAPTER.stem}.ipynb")
    before = path.read_bytes()
    (tmp_path / "a_folder").mkdir()
    (tmp_path / "existing.csv").write_text("earlier grades\n")
    csv_path = path if target == "submission" else tmp_path / target
    with pytest.raises(SystemExit) as stop:
        grade.main([str(path), "--csv", str(csv_path)])
    assert stop.value.code == 2
    out = capsys.readouterr()
    assert expected in out.err and "exercise checks passed" not in out.out  # not graded
    assert path.read_bytes() == before
    assert (tmp_path / "existing.csv").read_text() == "earlier grades\n"


def test_overwrite_lets_the_csv_replace_an_earlier_one(tmp_path):
    path = write(CHAPTER.read(), tmp_path / f"{CHAPTER.stem}.ipynb")
    (tmp_path / "grades.csv").write_text("earlier grades\n")
    assert grade.main([str(path), "--csv", str(tmp_path / "grades.csv"), "--overwrite"]) == 0
    assert (tmp_path / "grades.csv").read_text().startswith("submission,chapter")
    assert not list(tmp_path.glob(".grades.csv.*"))  # no temporary file left


def test_the_exit_status_says_when_a_notebook_could_not_be_graded(tmp_path, capsys):
    good = write(CHAPTER.read(), tmp_path / f"{CHAPTER.stem}.ipynb")
    missing = tmp_path / "nope" / f"{CHAPTER.stem}.ipynb"
    assert grade.main([str(missing)]) == 1
    assert "could not be graded" in capsys.readouterr().err
    assert grade.main([str(good), str(missing)]) == 1
    assert grade.main([str(good)]) == 0


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


@pytest.mark.parametrize("chapter", book_chapters(), ids=lambda c: c.stem)
def test_nbgrader_points_come_from_the_exercise_metadata(chapter):
    notebook = nbgrader.nbgrader_notebook(chapter.read())
    graded = [c.metadata["nbgrader"] for c in notebook.cells
              if c.metadata.get("nbgrader", {}).get("grade")]
    earned: dict[str, float] = {}
    for meta in graded:
        label = re.sub(r"-(check-\d+|answer)$", "", meta["grade_id"])
        earned[label] = earned.get(label, 0) + meta["points"]
    expected = {e.label: e.points for e in course.exercises(chapter)}
    assert earned == pytest.approx(expected)
    assert set(expected.values()) <= {1, 2, 3}


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


# --- a class's worth of realistic submissions --------------------------------------

def _student_edition(answers: dict, *, edit_checks: bool = False, untagged: tuple = ()):
    """Chapter 1's student notebook, some stubs replaced by `answers` (label -> source).

    Labels in `untagged` lose their tagged stub cell and get the answer in a new cell
    without tags, as when a student deletes the stub and writes an answer of their own.
    """
    notebook = editions.student_notebook(CHAPTER.read())
    cells, label = [], None
    for cell in notebook.cells:
        if cell.cell_type == "markdown":
            found = grade.LABEL.search(cell.source)
            label = found.group(1) if found else label
        elif "solution" in cell_tags(cell) and label in answers:
            if label in untagged:
                cell = nbformat.v4.new_code_cell(answers[label])
            else:
                cell.source = answers[label]
        elif "check" in cell_tags(cell) and edit_checks:
            cell.source = "print('all good')  # the student's own 'check'"
        cells.append(cell)
    notebook.cells = cells
    return notebook


SOLVED = {e.label: e.solution for e in editions.coding_exercises(CHAPTER)}
CE, SILU, MLP = "ex-ffn-cross-entropy", "ex-ffn-silu", "ex-ffn-mlp-params"
WRONG_SILU = ("import torch\n\ndef silu(x):\n    return x * torch.sigmoid(x)\n\n"
              "def silu_derivative(x):\n    return torch.sigmoid(x)  # forgot a term\n")
CHEAT_SILU = WRONG_SILU + ("\nimport tinybert.exercises.ch01 as checks\n"
                           "checks.check_silu = lambda *args: None\n")
STUBBORN = ("import time\nwhile True:\n    try:\n        time.sleep(0.05)\n"
            "    except BaseException:\n        pass  # swallows the time limit too\n")
FOREVER = "while True:\n    pass"
WRONG_CE = "def cross_entropy(logits, targets):\n    return 0.0"
# student -> (notebook, {exercise: (passed, a phrase its message must contain)})
CLASS = {
    "alice": (_student_edition(SOLVED),
              {CE: (True, ""), SILU: (True, ""), MLP: (True, "")}),
    "bob": (_student_edition({CE: SOLVED[CE], SILU: WRONG_SILU}),
            {CE: (True, ""), SILU: (False, "AssertionError"),
             MLP: (False, "NotImplementedError")}),
    "carol": (_student_edition({CE: "import os\nos._exit(3)",
                                SILU: "import sys\nsys.exit('bye')", MLP: SOLVED[MLP]}),
              {CE: (False, "exit status 3"), SILU: (False, "SystemExit: bye"),
               MLP: (True, "")}),
    "dave": (_student_edition({CE: FOREVER, SILU: STUBBORN, MLP: SOLVED[MLP]}),
             {CE: (False, "TimeoutError"), SILU: (False, "did not stop"),
              MLP: (True, "")}),
    "erin": (_student_edition({CE: WRONG_CE, SILU: CHEAT_SILU, MLP: SOLVED[MLP]},
                              edit_checks=True, untagged=(MLP,)),
             {CE: (False, "AssertionError"), SILU: (False, "AssertionError"),
              MLP: (True, "")}),
}


def test_a_class_of_realistic_submissions_gets_the_right_grade_table(tmp_path, capsys):
    paths = [write(notebook, tmp_path / name / f"{CHAPTER.stem}.ipynb")
             for name, (notebook, _) in CLASS.items()]
    garbled = tmp_path / "zoe" / f"{CHAPTER.stem}.ipynb"  # not a notebook at all
    garbled.parent.mkdir()
    garbled.write_text('{"cells": [')
    unnamed = write(nbformat.v4.new_notebook(), tmp_path / "yann" / "homework.ipynb")
    table = tmp_path / "grades.csv"
    # 1: two notebooks could not be graded (the table says why)
    assert grade.main([*map(str, paths + [garbled, unnamed]), "--timeout", "2",
                       "--csv", str(table)]) == 1
    rows = list(csv.DictReader(table.open()))
    got = {(row["submission"].split("/")[-2], row["exercise"]): row for row in rows}
    graded = sum(len(outcomes) for _, outcomes in CLASS.values())
    expected_rows = graded + len(CODING) + 1  # + zoe's exercises + yann's single row
    assert len(rows) == len(got) == expected_rows
    for name, (_, outcomes) in CLASS.items():
        mine = [row["exercise"] for row in rows if f"/{name}/" in row["submission"]]
        assert mine == CODING
        for label, (passed, phrase) in outcomes.items():
            row = got[(name, label)]
            assert row["passed"] == str(int(passed)), (name, label, row["message"])
            assert phrase in row["message"], (name, label, row["message"])
            assert row["chapter"] == CHAPTER.stem
            assert row["points"] == (row["max_points"] if passed else "0")
    for label in CODING:  # the garbled file: every exercise fails, saying why
        assert got[("zoe", label)]["passed"] == "0"
        assert "not graded" in got[("zoe", label)]["message"]
    assert got[("yann", "")]["passed"] == "0"
    assert "which chapter" in got[("yann", "")]["message"]
    passed = sum(ok for _, outcomes in CLASS.values() for ok, _ in outcomes.values())
    summary = f"{passed} of {expected_rows} exercise checks passed in 7 notebook(s)"
    assert summary in capsys.readouterr().out


def _bwrap_works() -> bool:
    return bool(grade.sandbox_prefix("auto"))


@pytest.mark.skipif(not _bwrap_works(), reason="bubblewrap is not installed or cannot run")
def test_in_the_sandbox_a_submission_cannot_touch_other_files(tmp_path):
    """Reliability probe: a submission deleted another student's notebook and wrote
    anywhere. In bubblewrap the machine is read-only to it."""
    other = write(CHAPTER.read(), tmp_path / "other" / f"{CHAPTER.stem}.ipynb")
    outside = tmp_path / "written-by-a-student.txt"
    vandal = (f"import os\nos.remove({str(other)!r})\n")
    writer = (f"open({str(outside)!r}, 'w').write('x')\n")
    notebook = _student_edition({CE: vandal, SILU: writer, MLP: SOLVED[MLP]})
    path = write(notebook, tmp_path / "mallory" / f"{CHAPTER.stem}.ipynb")
    results = {r.exercise: r for r in grade.grade(path, sandbox=grade.BWRAP)}
    assert other.is_file() and not outside.exists()
    assert not results[CE].passed and "Read-only file system" in results[CE].message
    assert results[MLP].passed  # the sandbox does not stop an honest answer


# --- verdicts out of the answer's reach ----------------------------------------

CONSTANT_CE = ("import torch\n\ndef cross_entropy(logits, targets):\n"
               "    return torch.tensor(1.0)\n")
TAMPERING = {
    # issue 35: an answer patched torch.allclose and returned a constant
    "patches torch.allclose": "import torch\ntorch.allclose = lambda *a, **k: True\n",
    "patches the check": (
        "import tinybert.exercises._assertions as a, tinybert.exercises.ch01 as c\n"
        "a.assert_close = c._assert_close = lambda *args, **kwargs: None\n"
        "c.check_cross_entropy = lambda *args: None\n"),
    # the old runner ran the checks with the builtins the answer could replace
    "patches exec": "import builtins\nbuiltins.exec = lambda *args, **kwargs: None\n",
    "prints a verdict": "print('pass  alice  ex-ffn-cross-entropy')\n",
    # issue 35: an answer appended a passing line to the results log and exited
    "writes a results log": (
        "import glob, json, os, sys\n"
        "line = json.dumps({'label': 'ex-ffn-cross-entropy', 'passed': True,\n"
        "                   'message': ''}) + '\\n'\n"
        "for path in sys.argv[1:] + glob.glob('*') + glob.glob('../*'):\n"
        "    try:\n        open(path, 'a').write(line)\n"
        "    except OSError:\n        pass\n"),
    "sends a verdict on the grader's pipe": (
        "import os\nfrom book.tools import grade_worker as w\n"
        "for fd in range(3, 30):\n    try:\n"
        "        os.write(fd, w.encode(('verdict', True, '')))\n"
        "        os.write(fd, w.encode(('names', {})))\n"
        "    except OSError:\n        pass\n"),
}


@pytest.mark.parametrize("how", TAMPERING)
def test_an_answer_cannot_forge_or_patch_its_verdict(tmp_path, how):
    """Reliability probe: a wrong answer passed by patching torch.allclose or by
    writing the results log. The checks now run in the grader's process."""
    answer = TAMPERING[how] + CONSTANT_CE
    notebook = _student_edition({CE: answer, SILU: WRONG_SILU, MLP: SOLVED[MLP]})
    path = write(notebook, tmp_path / "mallory" / f"{CHAPTER.stem}.ipynb")
    results = {r.exercise: r for r in grade.grade(path)}
    assert not results[CE].passed, results[CE]
    assert not results[SILU].passed and results[MLP].passed  # and no effect on others


def test_an_answer_that_exits_after_forging_fails(tmp_path):
    answer = TAMPERING["writes a results log"] + CONSTANT_CE + "os._exit(0)\n"
    path = write(_student_edition({CE: answer}), tmp_path / f"{CHAPTER.stem}.ipynb")
    results = {r.exercise: r for r in grade.grade(path)}
    assert not results[CE].passed
    assert "ended during this exercise" in results[CE].message


def test_the_answers_results_reach_the_checks_as_data_with_their_gradients(tmp_path):
    """The checks see what the answer returns (values, gradients through it, changes
    to its inputs) as they would in one process, and its errors by their kind."""
    mutating = ("import torch\n\ndef silu(x):\n"
                "    return x.mul_(torch.sigmoid(x.clone()))\n\n"
                "def silu_derivative(x):\n"
                "    s = torch.sigmoid(x)\n"
                "    return s * (1 + x * (1 - s))\n")
    no_error = ("def mlp_parameter_count(sizes):\n    return 0 if len(sizes) < 2 else "
                "sum((a + 1) * b for a, b in zip(sizes, sizes[1:]))\n")
    detached = ("import torch.nn.functional as F\n\n"
                "def cross_entropy(logits, targets):\n"
                "    return F.cross_entropy(logits.detach(), targets)\n")
    notebook = _student_edition({CE: detached, SILU: mutating, MLP: no_error})
    results = {r.exercise: r.message for r in grade.grade(
        write(notebook, tmp_path / f"{CHAPTER.stem}.ipynb"))}
    assert "must be differentiable" in results[CE]
    assert "silu changed its input" in results[SILU]
    assert "expected a ValueError, got 0" in results[MLP]


def test_a_function_that_returns_what_is_not_data_fails_saying_what_it_was(tmp_path):
    answer = "def cross_entropy(logits, targets):\n    return lambda: 0\n"
    path = write(_student_edition({CE: answer}), tmp_path / f"{CHAPTER.stem}.ipynb")
    results = {r.exercise: r for r in grade.grade(path)}
    assert "expected a torch.Tensor, got function" in results[CE].message


@pytest.mark.parametrize("target", ["os.getcwd()", "os.path.dirname(os.getcwd())"])
def test_an_answer_that_deletes_the_grader_folder_loses_no_results(tmp_path,
                                                                     target):
    """Reliability probe: `shutil.rmtree(os.getcwd())` in an answer made every
    exercise of the submission 'not graded', the right ones too."""
    vandal = f"import os, shutil\nshutil.rmtree({target}, ignore_errors=True)\n"
    notebook = _student_edition({CE: vandal + SOLVED[CE], SILU: WRONG_SILU,
                                 MLP: SOLVED[MLP]})
    path = write(notebook, tmp_path / f"{CHAPTER.stem}.ipynb")
    results = {r.exercise: r for r in grade.grade(path, sandbox=())}
    assert results[CE].passed and results[MLP].passed, results
    assert not results[SILU].passed and "AssertionError" in results[SILU].message


def test_the_exercises_judged_beside_the_answer_exist():
    labels = {e.label for c in book_chapters() for e in editions.coding_exercises(c)}
    assert grade.JUDGED_BESIDE_THE_ANSWER <= labels
