"""Hand-written (not generated): the check for chapter 10's question-answering exercise,
``check_token_f1`` (SQuAD v1.1's token-overlap F1).

Imported from ``tinybert.exercises.ch10``, the module the chapter's check cells use.
"""

from __future__ import annotations

import random
import re
import string
from collections import Counter

from tinybert.exercises._assertions import answers_required

__all__ = ["check_token_f1"]


# --- ex-ft-squad-f1 -------------------------------------------------------------------


def _reference_f1(prediction: str, references: list[str]) -> float:
    def words(text):
        text = "".join(ch for ch in text.lower() if ch not in set(string.punctuation))
        return re.sub(r"\b(a|an|the)\b", " ", text).split()

    def f1(p, g):
        common = sum((Counter(p) & Counter(g)).values())
        # = 2PR / (P + R)
        return 0.0 if common == 0 else 2 * common / (len(p) + len(g))

    return max(f1(words(prediction), words(r)) for r in references)


@answers_required
def check_token_f1(token_f1) -> None:
    """Check ``token_f1(prediction, references) -> float`` on hand-worked cases and
    random strings."""
    cases = [
        ("in Paris, France", ["Paris"], 0.5),
        ("new new york", ["New York"], 0.8),
        ("The  Eiffel-Tower!", ["eiffeltower"], 1.0),
        ("Denver Broncos", ["Broncos", "the Denver Broncos", "Denver"], 1.0),
        ("Denver", ["Denver Broncos"], 2 / 3),
        ("Carolina Panthers", ["Denver Broncos"], 0.0),
        ("theatre", ["the atre"], 0.0),
        ("the-end", ["theend"], 1.0),
        ("An apple a day", ["apple day"], 1.0),
        ("", ["something"], 0.0),
        ("the", ["a"], 0.0),
        ("1,000 km", ["1000 km", "one thousand kilometres"], 1.0),
        ("Saint-Étienne", ["saintétienne"], 1.0),
        # an article between non-ASCII dashes
        ("rock—the—roll", ["rock— —roll"], 1.0),
    ]
    for prediction, references, expected in cases:
        got = token_f1(prediction, list(references))
        assert isinstance(got, (int, float)), (
            f"token_f1{(prediction, references)}: expected a float, got {got!r}"
        )
        assert abs(got - expected) < 1e-9, (
            f"token_f1({prediction!r}, {references}): "
            f"expected {expected:.4f}, got {got!r}"
        )
    rng = random.Random(111)
    vocabulary = [
        "the",
        "a",
        "an",
        "The",
        "river",
        "Rhine",
        "river's",
        "1,000",
        "km",
        "(km)",
        "Basel",
        "-",
        "—",
        "an.",
        "theatre",
        "A",
        "of",
        "of",
        "école",
        "Zürich",
        "!",
        "and",
    ]
    for _ in range(200):
        prediction = " ".join(rng.choices(vocabulary, k=rng.randint(0, 6)))
        references = [
            " ".join(rng.choices(vocabulary, k=rng.randint(1, 6)))
            for _ in range(rng.randint(1, 3))
        ]
        expected = _reference_f1(prediction, references)
        got = token_f1(prediction, references)
        assert abs(got - expected) < 1e-9, (
            f"token_f1({prediction!r}, {references}): "
            f"expected {expected:.4f}, got {got!r}"
        )
    print(
        f"✓ token_f1 matches the official SQuAD v1.1 F1 on {len(cases)} hand-worked "
        f"cases and 200 random ones"
    )
