"""Hand-written: the comparisons the exercise checks share, with messages a student
can act on."""

from __future__ import annotations

import copy
import functools
import inspect

import torch

__all__ = [
    "answers_required",
    "assert_close",
    "call_unmodified",
    "check_cases",
    "checked_pairs",
    "origin",
]


def answers_required(check):
    """Decorate a ``check_*`` function: each of its arguments must be the student's
    function (or class), so that a check given None, or a value, fails saying so."""
    names = list(inspect.signature(check).parameters)

    @functools.wraps(check)
    def checked(*answers):
        for name, answer in zip(names, answers):
            assert callable(answer), (
                f"{check.__name__}: expected your function {name} (define it with "
                f"def, and pass it without calling it), got "
                f"{type(answer).__name__} {answer!r}"[:300]
            )
        return check(*answers)

    return checked


def assert_close(
    name: str, got, expected: torch.Tensor, atol: float = 1e-5, rtol: float = 1e-5
) -> None:
    """Assert that ``got`` is a finite tensor of ``expected``'s shape with (nearly)
    its values."""
    assert isinstance(got, torch.Tensor), (
        f"{name}: expected a torch.Tensor, got {type(got).__name__}"
    )
    assert got.shape == expected.shape, (
        f"{name}: expected shape {tuple(expected.shape)}, got {tuple(got.shape)}"
    )
    assert torch.isfinite(got).all(), (
        f"{name}: expected finite values (no NaN or inf), got\n{got}"
    )
    if not torch.allclose(got.to(expected.dtype), expected, atol=atol, rtol=rtol):
        worst = (got.to(expected.dtype) - expected).abs().max().item()
        raise AssertionError(
            f"{name}: values differ from the reference by up to "
            f"{worst:.3g}\n  expected {expected}\n  got      {got}"
        )


def call_unmodified(function, description: str, *args):
    """``function(*args)``, asserting that the call left its arguments as they were (a
    student's function must not change the lists it is given)."""
    saved = copy.deepcopy(args)
    got = function(*args)
    assert args == saved, (
        f"{function.__name__} on {description}: the inputs were modified"
    )
    return got


def check_cases(function, cases, *, returns: type, normalise=None) -> None:
    """Call ``function`` on every case ``(description, *args, expected)``: it must leave
    its arguments as they were and return a ``returns`` that equals ``expected``
    (after ``normalise``, where given: a tuple of sequences compared as lists, say)."""
    for description, *args, expected in cases:
        got = call_unmodified(function, description, *args)
        assert isinstance(got, returns), (
            f"{function.__name__} on {description}: expected a {returns.__name__}, "
            f"got {type(got).__name__} {got!r}"
        )
        got = normalise(got) if normalise else got
        shown = ", ".join(repr(a) for a in args)
        assert got == expected, (
            f"{function.__name__}({shown}) ({description}):\n"
            f"  expected {expected}\n  got      {got}"
        )


def checked_pairs(make_pairs, documents, one_pair_per: str, labels: str) -> list:
    """``make_pairs(documents, generator)`` (chapter 9's NSP pairs, chapter 14's SOP
    pairs) with a generator seeded with 0, checked to give one pair per segment that
    has a successor (``one_pair_per`` says it in the task's words), each labelled 0 or
    1 (``labels`` names the two)."""
    pairs = make_pairs(documents, torch.Generator().manual_seed(0))
    expected_n = sum(max(0, len(d) - 1) for d in documents)
    assert len(pairs) == expected_n, (
        f"expected one pair per {one_pair_per}: {expected_n} pairs, got {len(pairs)}"
    )
    for _, _, label in pairs:
        assert label in (0, 1), f"labels must be {labels}, got {label!r}"
    return pairs


def origin(segment: list[int]) -> tuple[int, int]:
    """(d, j) for segment j of document d in the checks' documents, whose segments
    start with the id 1000 d + j."""
    return divmod(segment[0], 1000)
