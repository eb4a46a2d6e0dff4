"""The quizzes that end the chapters (tinybert/exercises/quiz.py): each chapter's last section
is a quiz of 5 to 8 questions whose stored answers are right and whose wrong answers are
wrong, and the student and nbgrader editions keep only fingerprints of the literal answers."""
from __future__ import annotations

import ast
import re

import pytest

from book.tools import editions, nbgrader
from book.tools.chapters import ROOT, cell_tags, chapters, headings
from tinybert.exercises.quiz import LETTERS, Quiz, choice, fnv1a, number

CHAPTERS = chapters()


def quiz_cell(notebook):
    cells = [c for c in notebook.cells if "quiz" in cell_tags(c)]
    assert len(cells) == 1, "a chapter has exactly one quiz cell"
    return cells[0]


def run(source: str) -> Quiz:
    namespace: dict = {}
    exec(compile(source, "<quiz>", "exec"), namespace)
    return namespace["quiz"]


def literal_answers(source: str) -> dict[int, object]:
    """question number -> the literal answer written in the cell (computed ones left out)."""
    found = {}
    for call in ast.walk(ast.parse(source)):
        if isinstance(call, ast.Call) and getattr(call.func, "id", None) == "Quiz":
            for index, question in enumerate(call.args[1].elts, start=1):
                for keyword in question.keywords:
                    if keyword.arg == "answer":
                        try:
                            found[index] = ast.literal_eval(keyword.value)
                        except ValueError:
                            pass
    return found


def test_the_fingerprint_is_fnv1a():
    assert fnv1a(b"") == 0x811C9DC5 and fnv1a(b"a") == 0xE40C292C
    assert fnv1a(b"foobar") == 0xBF9CF968
    script = (ROOT / "book" / "_ext" / "static" / "quiz.js").read_text()
    assert "0x811c9dc5" in script and "0x01000193" in script  # the browser's twin


def test_a_quiz_tells_right_from_wrong(capsys):
    quiz = Quiz("t", [choice("Pick b", ["x", "y", "z"], answer="b", explain="Because."),
                      number("Pi?", answer=3.14159, decimals=2),
                      number("Thousands?", answer=1234, decimals=0)])
    assert quiz.is_right(1, "b") and quiz.is_right(1, "B") and quiz.is_right(1, 2)
    assert not quiz.is_right(1, "a") and not quiz.is_right(1, "x")
    for attempt in (3.14, "3.14", 3.141, 3.13, 3.15, "3.14%"):
        assert quiz.is_right(2, attempt), attempt
    for attempt in (3.12, 3.16, 31.4, "pi", ""):
        assert not quiz.is_right(2, attempt), attempt
    assert quiz.is_right(3, "1,234") and not quiz.is_right(3, 1236)
    assert quiz.check(1, "b") and "✓ Question 1: right. Because." in capsys.readouterr().out
    assert not quiz.check(1, "c") and "✗ Question 1" in capsys.readouterr().out
    with pytest.raises(IndexError, match="questions 1 to 3"):
        quiz.check(4, "a")
    with pytest.raises(ValueError):
        choice("?", ["x", "y"], answer="c")
    assert "quiz.check" in repr(quiz) and 'data-digest="' in quiz._repr_html_()
    assert "3.14159" not in quiz._repr_html_() and 'value="b"' in quiz._repr_html_()


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda c: c.stem)
def test_every_chapter_ends_with_its_quiz(chapter):
    notebook = chapter.read()
    sections = [title for cell in notebook.cells if cell.cell_type == "markdown"
                for level, title in headings(cell.source) if level == 2]
    assert sections[-1] == "Quiz", f"{chapter.relpath}: the last section is {sections[-1]!r}"
    assert notebook.cells[-1] is quiz_cell(notebook), "the quiz cell comes last"
    assert {"quiz", "remove-input"} <= set(cell_tags(notebook.cells[-1]))


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda c: c.stem)
def test_quiz_answers_are_right_and_the_editions_hide_them(chapter):
    source = quiz_cell(chapter.read()).source
    quiz = run(source)
    assert quiz.name == f"ch{chapter.number:02d}" and 5 <= len(quiz.questions) <= 8
    assert any(q.kind == "choice" for q in quiz.questions)
    assert any(q.kind == "number" for q in quiz.questions)
    literal = literal_answers(source)
    assert len(literal) < len(quiz.questions), "at least one answer is computed"
    for index, question in enumerate(quiz.questions, start=1):
        assert quiz.is_right(index, question.answer)
        if question.kind == "choice":
            wrong = [letter for letter in LETTERS[:len(question.options)]
                     if letter != question.answer]
        else:
            wrong = [question.answer + 5 * 10.0 ** -question.decimals]
        assert wrong and not any(quiz.is_right(index, attempt) for attempt in wrong)
    for hidden in (quiz_cell(editions.student_notebook(chapter.read())).source,
                   quiz_cell(nbgrader.nbgrader_notebook(chapter.read())).source):
        assert literal_answers(hidden) == {}
        assert not re.search(r'explain="[^"]', hidden)
        student = run(hidden)
        assert [q.digest for q in student.questions] == [q.digest for q in quiz.questions]
