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
    # the chapter's paragraph says how to answer; the form on the page does not repeat it
    assert "quiz.check" not in quiz._repr_html_() and "Check</em>" not in quiz._repr_html_()
    assert "3.14159" not in quiz._repr_html_() and 'value="b"' in quiz._repr_html_()


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda c: c.stem)
def test_every_chapter_ends_with_its_quiz(chapter):
    notebook = chapter.read()
    sections = [title for cell in notebook.cells if cell.cell_type == "markdown"
                for level, title in headings(cell.source) if level == 2]
    assert sections[-1] == "Quiz", f"{chapter.relpath}: the last section is {sections[-1]!r}"
    assert notebook.cells[-1] is quiz_cell(notebook), "the quiz cell comes last"
    assert {"quiz", "remove-input"} <= set(cell_tags(notebook.cells[-1]))
    start = max(i for i, c in enumerate(notebook.cells) if c.cell_type == "markdown"
                and (2, "Quiz") in headings(c.source))
    section = [notebook.cells[start].source.split("## Quiz", 1)[1]]
    section += [c.source for c in notebook.cells[start + 1:-1] if c.cell_type == "markdown"]
    said = sum(text.count("quiz.check(question, answer)") for text in section)
    assert said == 1, f"{chapter.relpath}: the Quiz section says how to answer {said} times"


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


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda c: c.stem)
def test_right_answers_are_spread_over_the_letters(chapter):
    """Always answering the same letter must not pass a quiz: in each chapter no letter
    holds more than 40% of the multiple-choice answers (the chapters place the right
    option by hand, and what a student reads is what is checked)."""
    quiz = run(quiz_cell(chapter.read()).source)
    answers = [q.answer for q in quiz.questions if q.kind == "choice"]
    spread = {letter: answers.count(letter) for letter in LETTERS if letter in answers}
    assert max(spread.values()) <= 0.4 * len(answers), (
        f"{chapter.relpath}: right answers by letter {spread} over {len(answers)} "
        f"multiple-choice questions; move some so that no letter holds more than 40%")


def test_the_longest_option_is_not_a_clue():
    """A reader who always picks the longest option must not do better than chance: over
    the course, the right option is the strictly longest one in at most 30% of the
    multiple-choice questions (a quarter is chance with four options)."""
    found, total = [], 0
    for chapter in CHAPTERS:
        quiz = run(quiz_cell(chapter.read()).source)
        for index, q in enumerate(quiz.questions, start=1):
            if q.kind == "choice":
                total += 1
                right = q.options[LETTERS.index(q.answer)]
                if all(len(right) > len(o) for o in q.options if o is not right):
                    found.append(f"{chapter.stem} question {index}")
    assert len(found) <= 0.3 * total, (
        f"the right option is the longest in {len(found)} of {total}: {found}; make "
        "the distractors as specific as the answer")


def test_right_answers_in_the_forms_students_give_them_are_right():
    """Reliability probe: a tensor, "(a)" as the quiz prints it and a decimal comma were
    marked wrong; a string or float question number gave a raw TypeError."""
    import numpy as np
    import torch

    from tinybert.exercises.quiz import Quiz, choice, number

    quiz = Quiz("p", [choice("?", ["x", "y", "z"], answer="b"),
                      number("?", answer=0.881, decimals=3),
                      number("?", answer=1234.5, decimals=1)])
    for index, attempt in [(1, "(b)"), (1, "b)"), (1, " B "), (1, 2),
                           (2, torch.tensor(0.881)), (2, np.float64(0.881)),
                           (2, "0,881"), (2, 0.881), (3, "1,234.5"), (3, "1234,5")]:
        assert quiz.is_right(index, attempt), (index, attempt)
    for index, attempt in [(1, "(a)"), (2, torch.ones(2)), (2, "0,87"), (2, True),
                           (3, "12345")]:
        assert not quiz.is_right(index, attempt), (index, attempt)
    for index in ["1", 1.0, True]:
        with pytest.raises(TypeError, match="whole number from 1 to 3"):
            quiz.check(index, "a")
    with pytest.raises(ValueError, match="decimals"):
        number("?", answer=1.5, decimals=-1)


def test_the_silu_check_refuses_an_answer_that_overwrites_its_input():
    import torch

    from tinybert.exercises.ch01 import check_silu

    def derivative(x):
        s = torch.sigmoid(x)
        return s * (1 + x * (1 - s))

    with pytest.raises(AssertionError, match="changed its input"):
        check_silu(lambda x: x.mul_(torch.sigmoid(x.clone())), derivative)
    check_silu(lambda x: x * torch.sigmoid(x), derivative)
