"""Hand-written (not generated): the checks for chapter 10's exercises
(fine-tuning BERT).

Each ``check_*`` function calls the student's code on several inputs, including edge
cases, raises ``AssertionError`` saying what was expected and what came back, and prints
a line starting with ✓ when everything passes.
"""

from __future__ import annotations

import math
import random
import re
import string
from collections import Counter

__all__ = [
    "check_labels_from_word_ids",
    "check_token_f1",
    "check_truncate_pair",
    "check_word_overlap",
]


# --- ex-ft-word-ids -------------------------------------------------------------------


def _reference_labels(word_ids, word_labels):
    labels, previous = [], None
    for word in word_ids:
        labels.append(-100 if word is None or word == previous else word_labels[word])
        previous = word
    return labels


def check_labels_from_word_ids(labels_from_word_ids) -> None:
    """Check ``labels_from_word_ids(word_ids, word_labels) -> one label per token``."""
    cases = [
        (
            "the chapter's example",
            [None, 0, 1, 1, 1, 2, None],
            [3, 4, 5],
            [-100, 3, 4, -100, -100, 5, -100],
        ),
        ("one word, one piece, no special tokens", [0], [7], [7]),
        (
            "a word cut by truncation (word 2 is missing)",
            [None, 0, 0, 1, None],
            [7, 8, 9],
            [-100, 7, -100, 8, -100],
        ),
        ("only special tokens", [None, None], [], [-100, -100]),
        (
            "neighbouring words with the same label",
            [None, 0, 1, 1, 2, None],
            [4, 4, 4],
            [-100, 4, 4, -100, 4, -100],
        ),
        (
            "a pair: [CLS] A [SEP] B [SEP], word ids restart in B",
            [None, 0, 1, None, 0, 0, None],
            [1, 2],
            [-100, 1, 2, -100, 1, -100, -100],
        ),
    ]
    for description, word_ids, word_labels, expected in cases:
        saved = (list(word_ids), list(word_labels))
        got = labels_from_word_ids(word_ids, word_labels)
        assert isinstance(got, list), (
            f"labels_from_word_ids on {description}: expected a list, got "
            f"{type(got).__name__}"
        )
        assert got == expected, (
            f"labels_from_word_ids on {description}, "
            f"word_ids={word_ids}, word_labels={word_labels}:\n"
            f"  expected {expected}\n  got      {got}"
        )
        assert (word_ids, word_labels) == saved, (
            f"labels_from_word_ids on {description}: the inputs were modified"
        )

    rng = random.Random(110)
    # random sentences of 1 to 9 words
    for _ in range(50):
        n_words = rng.randint(1, 9)
        pieces = [rng.randint(1, 4) for _ in range(n_words)]
        word_ids = [None] + [w for w, k in enumerate(pieces) for _ in range(k)] + [None]
        # truncation: keep a prefix, then [SEP]
        cut = rng.randint(2, len(word_ids))
        word_ids = word_ids[: cut - 1] + [None]
        word_labels = [rng.randint(0, 16) for _ in range(n_words)]
        expected = _reference_labels(word_ids, word_labels)
        got = labels_from_word_ids(word_ids, word_labels)
        assert got == expected, (
            f"labels_from_word_ids(word_ids={word_ids}, "
            f"word_labels={word_labels}):\n  expected {expected}\n"
            f"  got      {got}"
        )
    print(
        "✓ labels_from_word_ids labels the first token of every word, -100 "
        "elsewhere (59 cases)"
    )


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


# --- ex-ft-entity-f1 ------------------------------------------------------------------


def check_entity_f1(entity_f1) -> None:
    """Check ``entity_f1(gold, predicted) -> float`` on hand-worked cases and random tag
    sequences, against chapter 10's ``entity_scores`` (equal to seqeval in
    the tests)."""
    from tinybert.finetuning.metrics import entity_scores

    cases = [
        ([["B-PER", "I-PER", "O"]], [["B-PER", "I-PER", "O"]], 1.0),
        # boundary wrong
        ([["B-PER", "I-PER", "O"]], [["B-PER", "O", "O"]], 0.0),
        ([["B-PER", "O", "B-LOC"]], [["B-ORG", "O", "B-LOC"]], 0.5),  # type wrong
        # I- starts one
        ([["I-LOC", "I-LOC", "O"]], [["B-LOC", "I-LOC", "O"]], 1.0),
        # I-PER: new entity
        ([["B-LOC", "I-PER"]], [["B-LOC", "B-PER"]], 1.0),
        ([["B-LOC", "B-LOC"]], [["B-LOC", "I-LOC"]], 0.0),
        ([["O", "O"]], [["O", "O"]], 0.0),
        # other sentence
        ([["B-ORG"], ["O"]], [["O"], ["B-ORG"]], 0.0),
        ([["B-ORG", "I-ORG", "I-ORG"]], [["B-ORG", "I-ORG", "I-ORG"]], 1.0),
    ]
    for gold, predicted, expected in cases:
        got = entity_f1(gold, predicted)
        assert isinstance(got, (int, float)), (
            f"entity_f1({gold}, {predicted}): expected a float, got {got!r}"
        )
        assert abs(got - expected) < 1e-9, (
            f"entity_f1({gold}, {predicted}): expected {expected:.4f}, got {got!r}"
        )
    rng = random.Random(10)
    tags = ["O", "O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG", "I-ORG"]
    for _ in range(300):
        lengths = [rng.randint(1, 8) for _ in range(rng.randint(1, 4))]
        gold = [rng.choices(tags, k=n) for n in lengths]
        predicted = [
            [t if rng.random() < 0.7 else rng.choice(tags) for t in s] for s in gold
        ]
        expected = entity_scores(gold, predicted)["overall"]["f1"]
        got = entity_f1(gold, predicted)
        assert abs(got - expected) < 1e-9, (
            f"entity_f1({gold}, {predicted}): expected {expected:.4f}, got {got!r}"
        )
    print(
        f"✓ entity_f1 matches entity-level F1 on {len(cases)} hand-worked cases and "
        f"300 random ones"
    )


# --- ex-ft-ladder-verdict -------------------------------------------------------------


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


# --- ex-ft-truncate-pair --------------------------------------------------------------


def _reference_truncate(a, b, max_len):
    a, b = list(a), list(b)
    while len(a) + len(b) + 3 > max_len:
        (a if len(a) > len(b) else b).pop()
    return a, b


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
    for description, first, second, max_len, expected in cases:
        saved = (list(first), list(second))
        got = truncate_pair(first, second, max_len)
        assert isinstance(got, tuple) and len(got) == 2, (
            f"truncate_pair on {description}: expected a tuple (a, b), got {got!r}"
        )
        got = (list(got[0]), list(got[1]))
        assert got == expected, (
            f"truncate_pair({first}, {second}, max_len={max_len}) "
            f"({description}):\n  expected {expected}\n"
            f"  got      {got}"
        )
        assert (first, second) == saved, (
            f"truncate_pair on {description}: the input lists were modified"
        )
    rng = random.Random(112)
    for _ in range(100):
        first = list(range(rng.randint(0, 20)))
        second = list(range(100, 100 + rng.randint(0, 20)))
        max_len = rng.randint(3, 45)
        expected = _reference_truncate(first, second, max_len)
        got = truncate_pair(first, second, max_len)
        assert (list(got[0]), list(got[1])) == expected, (
            f"truncate_pair({first}, {second}, max_len={max_len}):\n"
            f"  expected {expected}\n  got      {got}"
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
