"""Hand-written (not generated): the checks for chapter 10's exercises
(fine-tuning BERT).

Each ``check_*`` function calls the student's code on several inputs, including edge
cases, raises ``AssertionError`` saying what was expected and what came back, and prints
a line starting with ✓ when everything passes. This module holds the
token-classification checks (labels from word ids, entity-level F1) and re-exports
the SQuAD F1 check from ``tinybert.exercises.ch10_qa``, so that every check cell
imports from here.
"""

from __future__ import annotations

import random

from tinybert.exercises._assertions import answers_required
from tinybert.exercises._assertions import check_cases
from tinybert.exercises.ch10_qa import check_token_f1

__all__ = [
    "check_labels_from_word_ids",
    "check_token_f1",
]


# --- ex-ft-word-ids -------------------------------------------------------------------


def _reference_labels(word_ids, word_labels):
    labels, previous = [], None
    for word in word_ids:
        labels.append(-100 if word is None or word == previous else word_labels[word])
        previous = word
    return labels


@answers_required
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
    rng = random.Random(110)
    # random sentences of 1 to 9 words
    for i in range(50):
        n_words = rng.randint(1, 9)
        pieces = [rng.randint(1, 4) for _ in range(n_words)]
        word_ids = [None] + [w for w, k in enumerate(pieces) for _ in range(k)] + [None]
        # truncation: keep a prefix, then [SEP]
        cut = rng.randint(2, len(word_ids))
        word_ids = word_ids[: cut - 1] + [None]
        word_labels = [rng.randint(0, 16) for _ in range(n_words)]
        expected = _reference_labels(word_ids, word_labels)
        cases.append((f"random sentence {i}", word_ids, word_labels, expected))
    check_cases(labels_from_word_ids, cases, returns=list)
    print(
        "✓ labels_from_word_ids labels the first token of every word, -100 "
        "elsewhere (59 cases)"
    )


# --- ex-ft-entity-f1 ------------------------------------------------------------------


@answers_required
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
