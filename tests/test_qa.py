"""Hand-written tests for tinybert.finetuning.qa (chapter 10): document-stride windows, answer labels through
the tokenizer's offsets, skips with counts, the best-span search against brute force, and answers
mapped back to characters."""
from __future__ import annotations

import math

import pytest
import torch

from tinybert.finetuning.heads import QuestionAnswerer
from tinybert.models.bert import BertConfig, BertModel
from tinybert.finetuning.qa import (Answer, answer_question, answer_token_span,
                                    best_span, make_qa_features, predict_answers,
                                    window_starts)
from tinybert.finetuning.squad import QAExample
from tinybert.tokenizers.wordpiece_training import train_wordpiece_tokenizer

CONTEXT = ("The Rhine rises in the Swiss Alps and flows north through Basel. " * 3 +
           "Its mouth is near Rotterdam, in the Netherlands. " +
           "Barges carry coal, grain and containers along the river every day. " * 3)


@pytest.fixture(scope="module")
def tokenizer():
    return train_wordpiece_tokenizer([CONTEXT, "Where does the Rhine end? Where does Matt live?"] * 2,
                                     vocab_size=90, min_count=1)


def example(question="Where does the Rhine end?", answer="Rotterdam", start=None):
    start = CONTEXT.index(answer) if start is None else start
    return QAExample("q1", question, CONTEXT, [answer], [start])


@pytest.mark.parametrize("n, window, stride", [(0, 5, 2), (5, 5, 5), (6, 5, 5), (100, 17, 4), (101, 17, 17)])
def test_window_starts_cover_every_token(n, window, stride):
    starts = window_starts(n, window, stride)
    assert starts[0] == 0 and all(b - a == stride for a, b in zip(starts, starts[1:]))
    assert len(starts) == 1 + math.ceil(max(0, n - window) / stride)
    assert starts[-1] + window >= n                             # the last window reaches the end
    covered = {i for s in starts for i in range(s, min(s + window, n))}
    assert covered == set(range(n))


def test_window_starts_rejects_a_stride_that_skips_tokens():
    with pytest.raises(ValueError, match="stride"):
        window_starts(20, 5, 6)
    with pytest.raises(ValueError, match="stride"):
        window_starts(20, 5, 0)


def test_answer_token_span():
    offsets = [(0, 3), (4, 9), (9, 12), (13, 14)]             # "The Rhine's ." style pieces
    assert answer_token_span(offsets, 4, 12) == (1, 2)
    assert answer_token_span(offsets, 5, 7) == (1, 1)         # inside one token: that token
    assert answer_token_span(offsets, 3, 4) is None           # only a space
    assert answer_token_span(offsets, 0, 14) == (0, 3)


def test_windows_labels_point_at_the_answer(tokenizer):
    n_context = len(tokenizer.encode(CONTEXT))
    features, stats = make_qa_features(tokenizer, [example()], max_len=40, doc_stride=12)
    question = len(tokenizer.encode("Where does the Rhine end?"))
    window = 40 - question - 3
    assert len(features) == 1 + math.ceil((n_context - window) / 12) == stats["windows"] > 2
    with_answer = [f for f in features if f["start_positions"] != 0]
    assert with_answer and stats["windows without the answer, labelled [CLS]"] == len(features) - len(with_answer)
    for f in features:
        assert len(f["input_ids"]) <= 40 and len(f["offsets"]) == len(f["input_ids"]) == len(f["token_type_ids"])
        assert f["token_type_ids"][:question + 2] == [0] * (question + 2) and set(f["token_type_ids"][question + 2:]) == {1}
        assert f["offsets"][:question + 2] == [None] * (question + 2) and f["offsets"][-1] is None
    for f in with_answer:
        first, last = f["offsets"][f["start_positions"]][0], f["offsets"][f["end_positions"]][1]
        assert CONTEXT[first:last] == "Rotterdam"
    pieces = tokenizer.encode(CONTEXT).tokens
    for f in features:                                          # answers start and end on whole words
        inside = [i for i, o in enumerate(f["offsets"]) if o is not None]
        assert not any(f["can_start"][i] for i in range(len(f["offsets"])) if i not in inside)
        for i in inside:
            piece = tokenizer.id_to_token[f["input_ids"][i]]
            assert f["can_start"][i] == (not piece.startswith("##"))
            following = f["offsets"][i + 1] if i + 1 < len(f["offsets"]) else None
            if following is not None:
                assert f["can_end"][i] == f["can_start"][i + 1]
    assert any(p.startswith("##") for p in pieces)              # the test covers split words
    for f in features:
        if f["start_positions"] == 0:                           # the answer is not fully inside
            spans = [o for o in f["offsets"] if o is not None]
            answer = CONTEXT.index("Rotterdam")
            assert not (spans[0][0] <= answer and answer + len("Rotterdam") <= spans[-1][1])


def test_unlabelable_examples_are_skipped_and_counted(tokenizer):
    long_answer = CONTEXT[:CONTEXT.rindex("Barges")]
    examples = [example(), example(answer="Rotterdam", start=3), example(answer=long_answer, start=0),
                example(question="Where " * 40 + "?")]
    features, stats = make_qa_features(tokenizer, examples, max_len=64, doc_stride=16, max_query_len=20)
    assert stats["skipped: answer not found at its offset"] == 1
    assert stats["skipped: answer longer than a window"] == 1
    assert stats["questions cut to max_query_len"] == 1
    assert {f["example_index"] for f in features} == {0, 3}
    with pytest.raises(ValueError, match="no room"):
        make_qa_features(tokenizer, [example()], max_len=8, max_query_len=20)


def _brute_force(start, end, can_start, can_end, max_answer_len):
    best = None
    for i in range(len(start)):
        for j in range(i, min(len(start), i + max_answer_len)):
            if can_start[i] and can_end[j] and (best is None or start[i] + end[j] > best[2]):
                best = (i, j, start[i] + end[j])
    return best


def test_best_span_matches_brute_force():
    g = torch.Generator().manual_seed(0)
    for T, max_answer_len in [(7, 1), (13, 3), (31, 30), (64, 5), (2, 4)]:
        for _ in range(20):
            start, end = torch.randn(T, generator=g), torch.randn(T, generator=g)
            can_start, can_end = torch.rand(T, generator=g) < 0.7, torch.rand(T, generator=g) < 0.7
            can_start[T // 2] = can_end[T // 2] = True
            expected = _brute_force(start.tolist(), end.tolist(), can_start.tolist(), can_end.tolist(),
                                    max_answer_len)
            got = best_span(start, end, can_start, can_end, max_answer_len)
            assert got[:2] == expected[:2] and got[2] == pytest.approx(expected[2], abs=1e-6)
    yes, no = torch.ones(4, dtype=torch.bool), torch.zeros(4, dtype=torch.bool)
    with pytest.raises(ValueError, match="no span"):
        best_span(torch.zeros(4), torch.zeros(4), no, yes)
    with pytest.raises(ValueError, match="no span"):           # the only end comes before the only start
        best_span(torch.zeros(4), torch.zeros(4), torch.tensor([0, 0, 1, 0]).bool(), torch.tensor([1, 0, 0, 0]).bool())


def test_predict_answers_takes_the_best_window_and_maps_to_characters():
    context = "Matt lives in Canada and Sinan lives in California"
    examples = [QAExample("q", "Where?", context, [], [])]
    offsets = [None, None, None, (0, 4), (5, 10), (11, 13), (14, 20), None]    # [CLS] q q [SEP] Matt lives in Canada [SEP]
    second = [None, None, None, (21, 24), (25, 30), (31, 36), (37, 39), (40, 50), None]
    logits_a = torch.full((8, 2), -5.0)
    logits_a[6] = torch.tensor([2.0, 2.0])                      # "Canada", score 4
    logits_b = torch.full((9, 2), -5.0)
    logits_b[7] = torch.tensor([1.0, 1.5])                      # "California", score 2.5
    logits_b[0] = torch.tensor([9.0, 9.0])                      # [CLS] is never an answer
    def flags(o):
        return [x is not None for x in o]
    features = [{"offsets": offsets, "can_start": flags(offsets), "can_end": flags(offsets), "example_index": 0},
                {"offsets": second, "can_start": flags(second), "can_end": flags(second), "example_index": 0}]
    (answer,) = predict_answers([logits_a, logits_b], features, examples)
    assert answer == Answer("Canada", 14, 20, 4.0) and context[answer.start:answer.end] == answer.text
    logits_b[7] = torch.tensor([3.0, 3.0])
    assert predict_answers([logits_a, logits_b], features, examples)[0].text == "California"
    with pytest.raises(ValueError):                             # one logits tensor per feature
        predict_answers([logits_a], features, examples)


def test_answer_question_returns_a_piece_of_the_context(tokenizer):
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(tokenizer), d_model=32, n_layers=2, n_heads=4, d_ff=37, max_len=48)
    model = QuestionAnswerer(BertModel(config)).eval()
    answer = answer_question(model, tokenizer, "Where does the Rhine end?", CONTEXT, max_len=48, doc_stride=16,
                             max_answer_len=4)
    assert CONTEXT[answer.start:answer.end] == answer.text and answer.text.strip()
    assert len(tokenizer.encode(answer.text)) <= 4
