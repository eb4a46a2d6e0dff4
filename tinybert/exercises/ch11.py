"""Hand-written (not generated): the checks for chapter 11's exercises (does
pretraining pay off?): ``check_compare_rungs`` (the ladder's reading of two arms),
``check_truncate_pair`` (cutting a pair to fit ``max_len``) and ``check_word_overlap``
(the word-overlap baseline and its fitted threshold).

Each ``check_*`` function calls the student's code on several inputs, raises
``AssertionError`` saying what was expected and what came back, and prints a line
starting with ✓ when everything passes.
"""

from __future__ import annotations

import math
import random
import re

from tinybert.exercises._assertions import answers_required
from tinybert.exercises._assertions import check_cases

__all__ = ["check_compare_rungs", "check_truncate_pair", "check_word_overlap"]


# --- ex-ft-truncate-pair --------------------------------------------------------------


def _reference_truncate(a, b, max_len):
    a, b = list(a), list(b)
    while len(a) + len(b) + 3 > max_len:
        (a if len(a) > len(b) else b).pop()
    return a, b


@answers_required
def check_truncate_pair(truncate_pair) -> None:
    """Check ``truncate_pair(a, b, max_len) -> (a', b')``, longest first, ties cut B."""
    a, b = [11, 12, 13, 14, 15], [21, 22, 23]
    cases = [
        ("the worked case: 5 + 3 tokens, max_len 8", a, b, 8, ([11, 12, 13], [21, 22])),
        ("a pair that already fits", a, b, 11, (a, b)),
        ("room for the special tokens only", a, b, 3, ([], [])),
        ("equal lengths: B loses first", [1, 2], [3, 4], 6, ([1, 2], [3])),
        ("B longer than A", [1], [2, 3, 4, 5, 6], 6, ([1], [2, 3])),
        ("empty B", [1, 2, 3, 4], [], 5, ([1, 2], [])),
    ]
    rng = random.Random(112)
    for i in range(100):
        first = list(range(rng.randint(0, 20)))
        second = list(range(100, 100 + rng.randint(0, 20)))
        max_len = rng.randint(3, 45)
        expected = _reference_truncate(first, second, max_len)
        cases.append((f"random pair {i}", first, second, max_len, expected))
    check_cases(
        truncate_pair, cases, returns=tuple, normalise=lambda got: tuple(map(list, got))
    )
    for max_len in (2, 0, -1):
        try:
            truncate_pair([1], [2], max_len)
        except ValueError:
            continue
        raise AssertionError(
            f"truncate_pair(..., max_len={max_len}): expected "
            f"ValueError (no room for [CLS] and two [SEP]), "
            f"got no error"
        )
    print(
        "✓ truncate_pair cuts the longer segment first (B on ties) and leaves its "
        "inputs alone (106 cases)"
    )


# --- ex-ft-word-overlap ---------------------------------------------------------------

_WORD = re.compile(r"[a-z0-9']+")


def _reference_overlap(a: str, b: str) -> float:
    words_a, words_b = set(_WORD.findall(a.lower())), set(_WORD.findall(b.lower()))
    union = words_a | words_b
    return len(words_a & words_b) / len(union) if union else 0.0


def _correct(scores, labels, t) -> int:
    return sum((score >= t) == (label == 1) for score, label in zip(scores, labels))


@answers_required
def check_word_overlap(word_overlap, fit_threshold) -> None:
    """Check ``word_overlap(a, b) -> float`` (Jaccard of lowercased word sets) and
    ``fit_threshold(pairs, labels) -> float`` (the best training threshold, smallest on
    ties, infinity when never saying 1 is best)."""
    cases = [
        ("The cat sat.", "the cat ran", 2 / 4),
        ("Don't stop!", "don't STOP", 1.0),
        ("", "", 0.0),
        ("...", "a b", 0.0),
        ("a a a b", "b c", 1 / 3),
        ("It's 10 o'clock", "it is 10", 1 / 5),
    ]
    for a, b, expected in cases:
        got = word_overlap(a, b)
        assert isinstance(got, float) and math.isclose(got, expected), (
            f"word_overlap({a!r}, {b!r}): expected {expected:.4f}, got {got!r}"
        )
    rng = random.Random(77)
    vocabulary = ["the", "bank", "card", "Card", "top", "up", "it's", "7", "money", "!"]
    for _ in range(60):
        pairs = [
            tuple(
                " ".join(rng.choices(vocabulary, k=rng.randint(0, 6))) for _ in range(2)
            )
            for _ in range(rng.randint(1, 12))
        ]
        labels = [rng.randint(0, 1) for _ in pairs]
        scores = [_reference_overlap(a, b) for a, b in pairs]
        for (a, b), score in zip(pairs, scores):
            got = word_overlap(a, b)
            assert math.isclose(got, score), (
                f"word_overlap({a!r}, {b!r}): expected {score:.4f}, got {got!r}"
            )
        candidates = sorted(set(scores)) + [math.inf]
        best = max(_correct(scores, labels, t) for t in candidates)
        expected = min(t for t in candidates if _correct(scores, labels, t) == best)
        got = fit_threshold(list(pairs), list(labels))
        right = _correct(scores, labels, got) if isinstance(got, float) else "?"
        assert got == expected or math.isclose(got, expected), (
            f"fit_threshold on {len(pairs)} pairs with overlaps "
            f"{[round(x, 3) for x in scores]} and labels {labels}: expected {expected} "
            f"({best} right), got {got!r} ({right} right)"
        )
    all_zero = fit_threshold([("a b", "c d"), ("a b", "a b")], [0, 0])
    assert all_zero == math.inf, (
        f"fit_threshold when every training label is 0: expected inf (never say 1), "
        f"got {all_zero!r}"
    )
    for pairs, labels in [([], []), ([("a", "b")], [1, 0])]:
        try:
            fit_threshold(pairs, labels)
        except ValueError:
            continue
        raise AssertionError(
            f"fit_threshold({pairs}, {labels}): expected ValueError "
            f"({len(pairs)} pairs, {len(labels)} labels), got no error"
        )
    print(
        f"✓ word_overlap on {len(cases) + 60} sentence sets and fit_threshold on 61 "
        f"training sets"
    )


# --- ex-ft-ladder-verdict -------------------------------------------------------------


@answers_required
def check_compare_rungs(compare_rungs) -> None:
    """Check ``compare_rungs(upper, lower) -> "ahead" | "behind" | "level"`` on
    worked cases."""
    cases = [
        ([0.60, 0.62, 0.61], [0.50, 0.52, 0.51], "ahead"),  # gap 0.10, spread 0.02
        ([0.50, 0.52, 0.51], [0.60, 0.62, 0.61], "behind"),
        ([0.60, 0.40, 0.50], [0.45, 0.46, 0.47], "level"),  # gap 0.04, spread 0.20
        # different numbers of seeds
        ([0.55, 0.56], [0.50, 0.51, 0.52], "ahead"),
        ([0.5], [0.4], "ahead"),  # one seed: spread 0
        ([0.5, 0.5], [0.5, 0.5], "level"),
        ([0.70, 0.50], [0.50, 0.50], "level"),  # gap 0.10, spread 0.20
        ([0.54, 0.52], [0.50, 0.50], "ahead"),  # gap 0.03, spread 0.02
        ([0.46, 0.48], [0.50, 0.50], "behind"),
    ]
    for upper, lower, expected in cases:
        got = compare_rungs(list(upper), list(lower))
        assert got == expected, (
            f"compare_rungs({upper}, {lower}): expected {expected!r}, got {got!r}"
        )
    print(f"✓ compare_rungs gives the ladder's reading on {len(cases)} cases")
