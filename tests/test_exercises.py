"""Exercises: every reference solution passes its check, and every student stub fails it."""
import re

import pytest

from book.tools.chapters import chapters
from book.tools.course import KINDS, exercises
from book.tools.editions import BEGIN, END, coding_exercises, stub_solution, student_notebook

CHAPTERS = chapters()
EXERCISES = [ex for chapter in CHAPTERS for ex in coding_exercises(chapter)]


def _run(sources):
    namespace = {"__name__": "__exercise__"}
    for source in sources:
        exec(compile(source, "<exercise>", "exec"), namespace)


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda c: c.stem)
def test_chapter_has_enough_exercises(chapter):
    text = chapter.path.read_text()
    exercises = re.findall(r"\{exercise-start\}", text)
    solutions = re.findall(r"\{solution-start\}", text)
    coding = coding_exercises(chapter)
    assert len(exercises) >= 4, f"{chapter.relpath}: {len(exercises)} exercises, want >= 4"
    assert len(solutions) == len(exercises), "every exercise needs a solution"
    assert len(coding) >= 2, f"{chapter.relpath}: {len(coding)} coding exercises, want >= 2"


@pytest.mark.parametrize("exercise", EXERCISES, ids=lambda e: e.label)
def test_solution_has_markers_and_a_check(exercise):
    assert BEGIN in exercise.solution and END in exercise.solution
    assert exercise.checks, f"{exercise.label}: no cell tagged 'check' follows the solution"


@pytest.mark.parametrize("exercise", EXERCISES, ids=lambda e: e.label)
def test_reference_solution_passes_its_check(exercise):
    _run([exercise.solution, *exercise.checks])


@pytest.mark.parametrize("exercise", EXERCISES, ids=lambda e: e.label)
def test_student_stub_fails_its_check(exercise):
    with pytest.raises((NotImplementedError, AssertionError)):
        _run([exercise.stub, *exercise.checks])


def test_stub_keeps_indentation_and_surroundings():
    source = "def f(x):\n    y = 1\n    ### BEGIN SOLUTION\n    return x + y\n    ### END SOLUTION\n"
    stub = stub_solution(source, "ex-1")
    assert "return x + y" not in stub and "    y = 1" in stub
    assert '    raise NotImplementedError("ex-1: write your answer here")' in stub
    with pytest.raises(ValueError, match="without"):
        stub_solution("### BEGIN SOLUTION\nx = 1\n")


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda c: c.stem)
def test_student_edition_has_no_solutions(chapter):
    notebook = chapter.read()
    student = student_notebook(notebook)
    text = "\n".join(cell.source for cell in student.cells)
    assert BEGIN not in text and "solution-start" not in text and "solution-end" not in text
    for exercise in coding_exercises(chapter):  # the answer itself is gone
        answer = exercise.solution.split(BEGIN)[1].split(END)[0].strip()
        assert answer not in text
    assert text.count("exercise-start") == notebook_text(notebook).count("exercise-start")


def notebook_text(notebook):
    return "\n".join(cell.source for cell in notebook.cells)


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda c: c.stem)
def test_every_exercise_has_metadata_and_every_open_answer_a_rubric(chapter):
    found = exercises(chapter)
    assert len(found) == chapter.path.read_text().count("{exercise-start}")
    for exercise in found:
        assert not exercise.problems(), (exercise.label, exercise.problems())
        assert (exercise.kind == "coding") == exercise.auto_checked, exercise.label
    # The rubric goes with the solution: the student edition must not keep it.
    student = "\n".join(c.source for c in student_notebook(chapter.read()).cells)
    assert "**Rubric**" not in student and ":difficulty:" in student


def test_metadata_problems_are_found():
    from book.tools.course import Exercise

    bad = Exercise("ex-x", "X", (), difficulty=4, minutes=None, kind="essay")
    problems = " ".join(bad.problems())
    for option in (":difficulty:", ":minutes:", ":kind:", "rubric"):
        assert option in problems
    good = Exercise("ex-y", "Y", ("check_y",), difficulty=2, minutes=20, kind=KINDS[2])
    assert good.problems() == [] and good.points == 2


def test_checks_refuse_a_solution_that_changes_the_lists_it_is_given():
    """The classic slip: right answers, reached by popping from the caller's lists."""
    from tinybert.exercises.ch10 import check_labels_from_word_ids
    from tinybert.exercises.ch11 import check_truncate_pair

    def truncate_pair(a, b, max_len):
        while len(a) + len(b) + 3 > max_len:
            (a if len(a) > len(b) else b).pop()
        return a, b

    def labels_from_word_ids(word_ids, word_labels):
        labels, previous = [], None
        for word in word_ids:
            new = word is not None and word != previous
            labels.append(word_labels[word] if new else -100)
            previous = word
        word_ids.clear()
        return labels

    with pytest.raises(AssertionError, match="truncate_pair on .*: the inputs were modified"):
        check_truncate_pair(truncate_pair)
    with pytest.raises(AssertionError, match="the inputs were modified"):
        check_labels_from_word_ids(labels_from_word_ids)


@pytest.mark.parametrize("exercise", EXERCISES, ids=lambda e: e.label)
def test_a_check_given_none_fails_saying_so(exercise):
    """Reliability probe: check_cross_entropy(None) raised a raw TypeError."""
    namespace = {"__name__": "__exercise__"}
    exec(compile(exercise.solution, "<solution>", "exec"), namespace)
    answers = [n for n, v in namespace.items()
               if callable(v) and not n.startswith("__") and not isinstance(v, type(re))]
    for name in answers:
        namespace[name] = None
    with pytest.raises(AssertionError, match="expected your function .*got NoneType"):
        for source in exercise.checks:
            exec(compile(source, "<check>", "exec"), namespace)


def _perturbed(value):
    """A plausible wrong version of an answer's value: tensors scaled slightly (or
    shifted by one), numbers off by one, sequences one element short, strings altered.
    None where there is nothing to perturb."""
    import torch

    if isinstance(value, torch.Tensor):
        if value.is_floating_point() or value.is_complex():
            return value * 1.01 + 0.01
        return value + 1 if value.dtype != torch.bool else ~value
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 1
    if isinstance(value, str):
        return value + " "
    if isinstance(value, (list, tuple)):
        if not value:
            return None
        parts = [_perturbed(v) for v in value]
        if all(p is None for p in parts):
            return type(value)(value[:-1])
        return type(value)(p if p is not None else v for p, v in zip(parts, value))
    if isinstance(value, dict):
        if not value:
            return None
        return dict(list(value.items())[:-1])
    return None


# answers that are classes or modules, or that return objects the check inspects
# through their behaviour: the generic perturbation cannot reach them
UNPERTURBABLE = {"ex-albert-shared-layers", "ex-roberta-accumulation"}


def test_the_unperturbable_exercises_exist():
    assert UNPERTURBABLE <= {e.label for e in EXERCISES}


@pytest.mark.parametrize(
    "exercise",
    [e for e in EXERCISES if e.label not in UNPERTURBABLE],
    ids=lambda e: e.label,
)
def test_a_check_rejects_a_plausible_wrong_answer(exercise):
    """Every check rejects the reference solution with its results nudged: a check that
    passes any output (or only catches NotImplementedError) would let this through."""
    import functools
    import inspect

    namespace = {"__name__": "__exercise__"}
    exec(compile(exercise.solution, "<solution>", "exec"), namespace)
    answers = [n for n, v in namespace.items()
               if inspect.isfunction(v) and not n.startswith("_")]
    perturbed = []

    def wrong(fn):
        @functools.wraps(fn)
        def answer(*args, **kwargs):
            out = fn(*args, **kwargs)
            nudged = _perturbed(out)
            if nudged is None:
                return out
            perturbed.append(fn.__name__)
            return nudged
        return answer

    for name in answers:
        namespace[name] = wrong(namespace[name])
    with pytest.raises(AssertionError):
        for source in exercise.checks:
            exec(compile(source, "<check>", "exec"), namespace)
    assert perturbed, f"{exercise.label}: no answer returned a value to nudge"
