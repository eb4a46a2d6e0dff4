"""Hand-written tests for tinybert.finetuning.sentence_pairs (chapter 11): the
QNLI-style pair builder (labels, balance, skips, the article split), the word-overlap
baseline, the pair formats and one fine-tuning run."""
from __future__ import annotations

import random

import pytest
import torch

from tinybert.data import DataUnavailableError
from tinybert.finetuning.ladder import LadderArm
from tinybert.finetuning.sentence_pairs import (PAIR_FORMATS, SentencePair, encode_pairs,
                                                overlap_threshold, pair_run, pair_splits,
                                                pair_subset, question_overlap,
                                                question_sentence_pairs, sentence_spans)
from tinybert.finetuning.squad import load_squad_dev_split
from tinybert.models.bert import BertConfig, BertModel
from tinybert.training.inputs import split_sentences
from tinybert.tokenizers.wordpiece_training import train_wordpiece_tokenizer

CONTEXT = ("The river  Rhine rises in the Alps. "
           "It flows north to Basel, where it turns.  "
           "Ships carry coal on the Rhine to Rotterdam. The Alps are high.")


def squad(*paragraphs, title="Rhine"):
    """A SQuAD object of one article; a paragraph is (context, [(question, answers)]),
    each answer (text, start)."""
    return {"version": "1.1", "data": [{"title": title, "paragraphs": [
        {"context": context, "qas": [
            {"id": f"{title}-{j}-{i}", "question": question,
             "answers": [{"text": text, "answer_start": start} for text, start in answers]}
            for i, (question, answers) in enumerate(qas)]}
        for j, (context, qas) in enumerate(paragraphs)]}]}


def answer(text, context=CONTEXT):
    return text, context.index(text)


def test_sentence_spans_find_every_sentence_in_the_original_text():
    spans = sentence_spans(CONTEXT)
    found = [" ".join(CONTEXT[s:e].split()) for s, e in spans]
    assert found == split_sentences(CONTEXT)
    assert CONTEXT[slice(*spans[1])] == "It flows north to Basel, where it turns."


def test_pairs_are_the_answer_sentence_and_another_one_drawn_by_the_question_id():
    data = squad((CONTEXT, [("Where does the Rhine carry coal to?", [answer("Rotterdam")]),
                            ("Where does the Rhine rise?", [answer("the Alps")])]))
    pairs, skipped = question_sentence_pairs(data)
    assert not skipped and [p.label for p in pairs] == [1, 0, 1, 0]
    assert pairs[0].sentence == "Ships carry coal on the Rhine to Rotterdam."
    assert pairs[2].sentence == "The river  Rhine rises in the Alps."
    sentences = [CONTEXT[s:e] for s, e in sentence_spans(CONTEXT)]
    for positive, negative in (pairs[:2], pairs[2:]):
        assert negative.question == positive.question
        assert negative.sentence in sentences and negative.sentence != positive.sentence
    assert all(p.title == "Rhine" for p in pairs)
    again, _ = question_sentence_pairs(data)
    assert again == pairs                                   # the id seeds the draw


def test_negatives_are_spread_over_the_other_sentences():
    question = ("Where does the Rhine rise?", [answer("the Alps")])
    data = {"data": [squad((CONTEXT, [question] * 40), title=f"t{i}")["data"][0]
                     for i in range(5)]}
    pairs, _ = question_sentence_pairs(data)
    negatives = {p.sentence for p in pairs if p.label == 0}
    assert len(negatives) == 3                     # every sentence without the answer


def test_negative_holds_none_of_the_reference_answers():
    alps = CONTEXT.rindex("The Alps")                   # a second reference, elsewhere
    references = [answer("the Alps"), ("The Alps", alps)]
    for i in range(10):
        data = squad((CONTEXT, [("What is high?", references)]), title=f"t{i}")
        (positive, negative), _ = question_sentence_pairs(data)
        assert positive.sentence.startswith("The river")
        assert "Alps" not in negative.sentence


def test_questions_that_cannot_be_paired_are_skipped_and_counted():
    across = CONTEXT.index("Alps. It")
    one_sentence = "Only one sentence here."
    data = squad((CONTEXT, [("Which words cross?", [("Alps. It flows", across)])]),
                 (one_sentence, [("How many?", [("one", one_sentence.index("one"))])]))
    pairs, skipped = question_sentence_pairs(data)
    assert pairs == []
    assert skipped == {"answer across sentences": 1, "no sentence without an answer": 1}


def test_question_overlap():
    assert question_overlap("Where is Basel?", "Basel is in Switzerland.") == 2 / 3
    assert question_overlap("WHERE, where", "where") == 1.0   # distinct lower-cased words
    assert question_overlap("Who?", "Nobody.") == 0.0
    with pytest.raises(ValueError, match="question with a word"):
        question_overlap("?!", "anything")


def test_overlap_threshold_is_the_best_threshold():
    rng = random.Random(0)
    questions = ["a b c d", "a b", "a b c", "e f g h i"]
    for _ in range(30):
        pairs = [SentencePair(q, " ".join(rng.sample("abcdefghi", rng.randint(0, 5))),
                              rng.randint(0, 1))
                 for q in rng.choices(questions, k=rng.randint(1, 25))]
        overlaps = [question_overlap(p.question, p.sentence) for p in pairs]

        def right(t):
            return sum((o > t) == bool(p.label) for o, p in zip(overlaps, pairs)) / len(pairs)

        threshold, train_accuracy = overlap_threshold(pairs)
        assert train_accuracy == right(threshold)
        assert train_accuracy == max(right(t) for t in [-1.0, *overlaps])
    with pytest.raises(ValueError, match="at least one pair"):
        overlap_threshold([])


def test_pair_subset_keeps_both_pairs_of_each_question():
    pairs = [SentencePair(f"q{i // 2}", "s", 1 - i % 2) for i in range(20)]
    subset = pair_subset(pairs, 6)
    assert [p.label for p in subset] == [1, 0] * 3
    assert [p.question for p in subset[::2]] == [p.question for p in subset[1::2]]
    assert pair_subset(pairs, None) == pairs


@pytest.fixture(scope="module")
def tokenizer():
    texts = [CONTEXT, "Where does the Rhine rise?"] * 3
    return train_wordpiece_tokenizer(texts, vocab_size=90, min_count=1)


def test_encode_pairs_formats(tokenizer):
    pair = SentencePair("Where does the Rhine rise?", "The river Rhine rises in the Alps.", 1)
    q, s = tokenizer.encode(pair.question).ids, tokenizer.encode(pair.sentence).ids
    cls, sep = tokenizer.vocab["[CLS]"], tokenizer.vocab["[SEP]"]
    features = {f: encode_pairs(tokenizer, [pair], pair_format=f)[0] for f in PAIR_FORMATS}
    assert features["pair"]["input_ids"] == [cls, *q, sep, *s, sep]
    assert features["pair"]["token_type_ids"] == [0] * (len(q) + 2) + [1] * (len(s) + 1)
    assert features["no segment ids"]["input_ids"] == features["pair"]["input_ids"]
    assert set(features["no segment ids"]["token_type_ids"]) == {0}
    assert features["no [SEP]"]["input_ids"] == [cls, *q, *s, sep]
    assert set(features["no [SEP]"]["token_type_ids"]) == {0}
    assert all(f["labels"] == 1 for f in features.values())
    long = SentencePair(" ".join(["where"] * 40), pair.sentence, 0)
    (cut,) = encode_pairs(tokenizer, [long], max_len=200)
    assert cut["input_ids"].index(sep) == 1 + 24                    # question: 24 pieces
    (short,) = encode_pairs(tokenizer, [pair], max_len=10)
    assert len(short["input_ids"]) == 10 and short["input_ids"].count(sep) == 2
    with pytest.raises(ValueError, match="pair_format"):
        encode_pairs(tokenizer, [pair], pair_format="pairs")


def test_pair_run_fine_tunes_and_scores_every_format(tokenizer):
    config = BertConfig(vocab_size=len(tokenizer.vocab), d_model=16, n_layers=1,
                        n_heads=2, d_ff=32, max_len=64)

    def fresh(seed):
        torch.manual_seed(seed)
        return BertModel(config)

    arm = LadderArm(fresh, tokenizer, "mean")
    question = "Where does the Rhine rise?"
    splits = {name: [SentencePair(question, "The river Rhine rises in the Alps.", 1),
                     SentencePair(question, "The Alps are high.", 0)] * 4
              for name in ("train", "test")}
    scores = pair_run(arm, splits, lr=1e-3, seed=0)
    assert set(scores) == set(PAIR_FORMATS)
    assert all(0.0 <= v <= 1.0 for v in scores.values())
    assert pair_run(arm, splits, lr=1e-3, seed=0) == scores          # fixed by its seed


def test_course_pairs_are_balanced_and_split_by_article():
    try:
        splits = pair_splits()
        train_articles, eval_articles = load_squad_dev_split()
    except DataUnavailableError as error:
        pytest.skip(f"course data unavailable: {error}")
    titles = {name: {p.title for p in pairs} for name, pairs in splits.items()}
    assert titles["test"] == {a["title"] for a in eval_articles["data"]}
    training_titles = {a["title"] for a in train_articles["data"]}
    assert titles["train"] | titles["validation"] == training_titles
    assert not titles["train"] & titles["validation"]
    assert not titles["test"] & (titles["train"] | titles["validation"])
    for pairs in splits.values():
        assert [p.label for p in pairs] == [1, 0] * (len(pairs) // 2)
        assert all(a.question == b.question for a, b in zip(pairs[::2], pairs[1::2]))
        assert all(a.sentence != b.sentence for a, b in zip(pairs[::2], pairs[1::2]))
