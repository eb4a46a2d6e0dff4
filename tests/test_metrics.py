"""Hand-written tests for tinybert.finetuning.metrics (chapter 10): accuracy, confusion matrices, and SQuAD's
exact match and F1 against a line-by-line transcription of the official v1.1 evaluation script."""
from __future__ import annotations

import math
import random
import re
import string
from collections import Counter

import pytest
import torch

from tinybert.finetuning.metrics import (accuracy, confusion_matrix, normalize_answer,
                                         per_class_accuracy, squad_evaluate,
                                         squad_exact_match, squad_f1)


# --- accuracy and confusion matrices ------------------------------------------------------------

def test_accuracy_skips_ignored_labels():
    assert accuracy([1, 2, 3, 4], [1, 2, 0, 4]) == 0.75
    assert accuracy(torch.tensor([[1, 2], [3, 4]]), torch.tensor([[1, -100], [0, -100]])) == 0.5


def test_accuracy_errors():
    with pytest.raises(ValueError, match="same shape"):
        accuracy([1, 2, 3], [1, 2])
    with pytest.raises(ValueError, match="no labels"):
        accuracy([1, 2], [-100, -100])


def test_confusion_matrix_by_hand():
    counts = confusion_matrix(torch.tensor([0, 2, 1, 1, 0, 2]), torch.tensor([0, 1, 1, 1, 2, -100]), 3)
    assert counts.tolist() == [[1, 0, 0], [0, 2, 1], [1, 0, 0]]
    per_class = per_class_accuracy(counts)
    assert per_class[:2].tolist() == [1.0, 2 / 3] and per_class[2].item() == 0.0


def test_confusion_matrix_matches_a_loop_on_random_labels():
    g = torch.Generator().manual_seed(0)
    predictions = torch.randint(0, 7, (13, 5), generator=g)
    labels = torch.randint(0, 7, (13, 5), generator=g).masked_fill(torch.rand(13, 5, generator=g) < 0.2, -100)
    expected = torch.zeros(7, 7, dtype=torch.long)
    for p, y in zip(predictions.flatten().tolist(), labels.flatten().tolist()):
        if y != -100:
            expected[y, p] += 1
    counts = confusion_matrix(predictions, labels, 7)
    assert torch.equal(counts, expected)
    assert counts.sum() == (labels != -100).sum()
    diagonal_share = counts.diagonal().sum().item() / counts.sum().item()
    assert math.isclose(diagonal_share, accuracy(predictions, labels))


def test_per_class_accuracy_is_nan_for_an_absent_class():
    per_class = per_class_accuracy(confusion_matrix([0, 1], [0, 1], 3))
    assert per_class[:2].tolist() == [1.0, 1.0] and math.isnan(per_class[2].item())


def test_confusion_matrix_rejects_out_of_range_values():
    with pytest.raises(ValueError, match=r"labels must be class indices in 0\.\.2"):
        confusion_matrix([0, 1], [0, 3], 3)
    with pytest.raises(ValueError, match="predictions"):
        confusion_matrix([0, -1], [0, 1], 3)


# --- SQuAD: a transcription of the official evaluate-v1.1.py, function by function ---------------

def _official_normalize_answer(s):
    def remove_articles(text):
        return re.sub(r"\b(a|an|the)\b", " ", text)

    def white_space_fix(text):
        return " ".join(text.split())

    def remove_punc(text):
        exclude = set(string.punctuation)
        return "".join(ch for ch in text if ch not in exclude)

    def lower(text):
        return text.lower()

    return white_space_fix(remove_articles(remove_punc(lower(s))))


def _official_f1_score(prediction, ground_truth):
    prediction_tokens = _official_normalize_answer(prediction).split()
    ground_truth_tokens = _official_normalize_answer(ground_truth).split()
    common = Counter(prediction_tokens) & Counter(ground_truth_tokens)
    num_same = sum(common.values())
    if num_same == 0:
        return 0
    precision = 1.0 * num_same / len(prediction_tokens)
    recall = 1.0 * num_same / len(ground_truth_tokens)
    return (2 * precision * recall) / (precision + recall)


def _official_exact_match_score(prediction, ground_truth):
    return _official_normalize_answer(prediction) == _official_normalize_answer(ground_truth)


def _official_max(metric_fn, prediction, ground_truths):
    return max(metric_fn(prediction, gt) for gt in ground_truths)


@pytest.mark.parametrize("text, expected", [
    ("The Cat!", "cat"), ("  An   apple  ", "apple"), ("a-the", "athe"), ("the-end", "theend"),
    ("Theatre", "theatre"), ("café—bar", "café—bar"), ("1,000.5", "10005"), ("", ""), ("THE A AN", ""),
    ("rock 'n' roll", "rock n roll"), ("rock—the—roll", "rock— —roll")])
def test_normalize_answer(text, expected):
    assert normalize_answer(text) == expected == _official_normalize_answer(text)


@pytest.mark.parametrize("prediction, references, exact, f1", [
    ("in Paris, France", ["Paris"], 0.0, 0.5),
    ("new new york", ["New York"], 0.0, 0.8),
    ("Denver Broncos", ["Broncos", "the Denver Broncos", "Denver"], 1.0, 1.0),
    ("Denver", ["Denver Broncos"], 0.0, 2 / 3),
    ("Carolina Panthers", ["Denver Broncos"], 0.0, 0.0),
    ("the", ["a"], 1.0, 0.0),                       # both normalise to "": equal, but no shared word
])
def test_squad_scores_by_hand(prediction, references, exact, f1):
    assert squad_exact_match(prediction, references) == exact
    assert squad_f1(prediction, references) == pytest.approx(f1, abs=1e-12)


def test_squad_scores_match_the_official_script_on_random_strings():
    rng = random.Random(0)
    words = ["The", "the", "a", "An", "river", "Rhine's", "1,000", "km", "(km)", "Basel", "-", "—", "école",
             "of", "of", "theatre", "Zürich", "!", "and", "U.S."]
    for _ in range(500):
        prediction = " ".join(rng.choices(words, k=rng.randint(0, 6)))
        references = [" ".join(rng.choices(words, k=rng.randint(1, 6))) for _ in range(rng.randint(1, 4))]
        assert squad_f1(prediction, references) == pytest.approx(
            _official_max(_official_f1_score, prediction, references), abs=1e-12)
        assert squad_exact_match(prediction, references) == float(
            _official_max(_official_exact_match_score, prediction, references))


def test_squad_scores_need_a_list_of_references():
    with pytest.raises(ValueError, match="non-empty list"):
        squad_f1("Paris", [])
    with pytest.raises(ValueError, match="non-empty list"):
        squad_exact_match("Paris", "Paris")          # a str, not a list: would compare characters


def test_squad_evaluate_counts_unanswered_questions_as_zero():
    references = {"q1": ["Paris"], "q2": ["Paris"], "q3": ["x"]}
    scores = squad_evaluate({"q1": "Paris", "q2": "in Paris, France", "extra": "ignored"}, references)
    assert scores == {"exact_match": 100 / 3, "f1": 50.0, "questions": 3, "unanswered": 1}
    with pytest.raises(ValueError, match="no questions"):
        squad_evaluate({}, {})


# --- entity-level scores (named entities) against seqeval -----------------------------

def _random_tags(rng: random.Random, n: int, types=("PER", "ORG", "LOC")) -> list[str]:
    """Random IOB2 tags, scheme-breaking ones included (I-X after O or after a Y)."""
    return [rng.choice(["O", "O", "O", f"B-{rng.choice(types)}", f"I-{rng.choice(types)}"])
            for _ in range(n)]


def test_entity_spans_by_hand():
    from tinybert.finetuning.metrics import entity_spans
    assert entity_spans(["B-PER", "I-PER", "O", "B-LOC", "B-LOC"]) == {
        ("PER", 0, 2), ("LOC", 3, 4), ("LOC", 4, 5)}
    assert entity_spans(["O", "I-ORG", "I-ORG", "I-PER", "B-PER", "I-LOC"]) == {
        ("ORG", 1, 3), ("PER", 3, 4), ("PER", 4, 5), ("LOC", 5, 6)}
    assert entity_spans([]) == set() and entity_spans(["O", "O"]) == set()


@pytest.mark.parametrize("bad", ["B", "I-", "X-PER", "b-PER", "PER"])
def test_entity_spans_rejects_tags_outside_the_scheme(bad):
    from tinybert.finetuning.metrics import entity_spans
    with pytest.raises(ValueError, match="IOB2 tags"):
        entity_spans(["O", bad])


def test_entity_scores_errors():
    from tinybert.finetuning.metrics import entity_scores
    with pytest.raises(ValueError, match="one predicted sequence per gold"):
        entity_scores([["O"]], [])
    with pytest.raises(ValueError, match="sentence 0"):
        entity_scores([["O", "O"]], [["O"]])


def test_entity_scores_match_seqeval_on_random_sequences():
    from seqeval import metrics as seqeval_metrics      # the oracle, installed by make venv

    from tinybert.finetuning.metrics import entity_scores
    rng = random.Random(0)
    for trial in range(300):
        n_sentences = rng.randint(1, 8)
        gold = [_random_tags(rng, rng.randint(1, 12)) for _ in range(n_sentences)]
        if trial % 3 == 0:               # predictions close to gold: many exact matches
            predicted = [[t if rng.random() < 0.8 else rng.choice(["O", "B-PER", "I-LOC"])
                          for t in g] for g in gold]
        else:
            predicted = [_random_tags(rng, len(g)) for g in gold]
        ours = entity_scores(gold, predicted)
        for name, theirs in (("precision", seqeval_metrics.precision_score),
                             ("recall", seqeval_metrics.recall_score),
                             ("f1", seqeval_metrics.f1_score)):
            expected = theirs(gold, predicted, zero_division=0)
            assert ours["overall"][name] == pytest.approx(expected, abs=1e-12), (trial, name)
        report = seqeval_metrics.classification_report(gold, predicted, output_dict=True,
                                                       zero_division=0)
        for kind in ("PER", "ORG", "LOC"):
            if kind in report:
                assert ours[kind]["f1"] == pytest.approx(report[kind]["f1-score"], abs=1e-12)
                assert ours[kind]["precision"] == pytest.approx(report[kind]["precision"],
                                                                abs=1e-12)
                assert ours[kind]["recall"] == pytest.approx(report[kind]["recall"],
                                                             abs=1e-12)
                assert ours[kind]["support"] == report[kind]["support"]
            else:
                assert kind not in ours
