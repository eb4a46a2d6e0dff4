"""Hand-written tests for tinybert.finetuning.text_tasks (chapter 10): the data readers, on small hand-made files
(every format detail and every error), and on the course's data files when they are available."""
from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from pathlib import Path

import pytest

from tinybert.data import DataUnavailableError, fetch
from tinybert.finetuning.squad import (
    QAExample,
    load_squad_dev_split,
    read_squad,
    split_squad,
)
from tinybert.finetuning.tagging_tasks import UPOS_TAGS, read_conllu
from tinybert.finetuning.text_tasks import (
    POEM_LABELS,
    TextExample,
    evenly_spaced,
    holdout_split,
    read_banking77,
    read_labelled_csv,
    read_poem_sentiment,
)


def _available(name: str):
    try:
        return fetch(name)
    except DataUnavailableError as error:       # offline with no data folder: say so, don't error
        pytest.skip(f"course data unavailable: {error}")


# --- small hand-made files -------------------------------------------------------------------------

def test_read_labelled_csv_handles_quotes_commas_and_newlines(tmp_path):
    path = tmp_path / "tiny.csv"
    path.write_text('text,category\nplain,b\n"with, comma",a\n"two\nlines",b\n', encoding="utf-8")
    examples = read_labelled_csv(path, ["a", "b"])
    assert examples == [TextExample("plain", 1), TextExample("with, comma", 0), TextExample("two\nlines", 1)]


@pytest.mark.parametrize("content, message", [
    ("text,label\nx,a\n", "header"),
    ("text,category\nx,a,extra\n", "line 2: expected 2 columns"),
    ("text,category\nx,a\n\"y\nz\",pizza\n", r"line 4: the label 'pizza' is not one of the 2 known labels"),
])
def test_read_labelled_csv_errors(tmp_path, content, message):
    path = tmp_path / "bad.csv"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ValueError, match=message):
        read_labelled_csv(path, ["a", "b"])


def test_holdout_split_is_per_label_and_deterministic():
    examples = [TextExample(f"{label}-{k}", label) for label in (0, 1, 2) for k in range(23)]
    examples = examples[::2] + examples[1::2]                    # interleave the labels
    kept, held_out = holdout_split(examples, every=10)
    assert Counter(e.label for e in held_out) == {0: 2, 1: 2, 2: 2}
    assert sorted(map(id, kept + held_out)) == sorted(map(id, examples))
    assert (kept, held_out) == holdout_split(examples, every=10)
    for label in (0, 1, 2):                                      # the 10th and 20th of each label
        of_label = [e for e in examples if e.label == label]
        assert [e for e in held_out if e.label == label] == [of_label[9], of_label[19]]
    with pytest.raises(ValueError, match="at least 2"):
        holdout_split(examples, every=1)


def test_evenly_spaced():
    items = list(range(10))
    assert evenly_spaced(items, None) == items and evenly_spaced(items, 99) == items
    assert evenly_spaced(items, 5) == [0, 2, 4, 6, 8]
    assert evenly_spaced(items, 3) == [0, 3, 6]
    assert evenly_spaced(items, 0) == []
    by_label = [label for label in range(7) for _ in range(13)]  # a file sorted by label
    assert set(evenly_spaced(by_label, 7)) == set(range(7))
    with pytest.raises(ValueError):
        evenly_spaced(items, -1)


CONLLU = """# newdoc id = test
# sent_id = 1
# text = I don't know.
1\tI\tI\tPRON\tPRP\t_\t4\tnsubj\t_\t_
2-3\tdon't\t_\t_\t_\t_\t_\t_\t_\t_
2\tdo\tdo\tAUX\tVBP\t_\t4\taux\t_\t_
3\tn't\tnot\tPART\tRB\t_\t4\tadvmod\t_\t_
4\tknow\tknow\tVERB\tVB\t_\t0\troot\t_\tSpaceAfter=No
5\t.\t.\tPUNCT\t.\t_\t4\tpunct\t_\t_

# sent_id = 2
1\tGo\tgo\tVERB\tVB\t_\t0\troot\t_\t_
1.1\tgo\tgo\tVERB\tVB\t_\t_\t_\t0:root\t_
2\thome\thome\tADV\tRB\t_\t1\tadvmod\t_\t_"""          # no blank line at the end


def test_read_conllu_skips_multiword_ranges_and_empty_nodes(tmp_path):
    path = tmp_path / "tiny.conllu"
    path.write_text(CONLLU, encoding="utf-8")
    first, second = read_conllu(path)
    assert first.words == ["I", "do", "n't", "know", "."]
    assert [UPOS_TAGS[t] for t in first.tags] == ["PRON", "AUX", "PART", "VERB", "PUNCT"]
    assert second.words == ["Go", "home"] and [UPOS_TAGS[t] for t in second.tags] == ["VERB", "ADV"]
    assert len(read_conllu(path, limit=1)) == 1


@pytest.mark.parametrize("line, message", [("6\tx\tx\tNOPE\t_\t_\t4\tdep\t_\t_", "'NOPE' is not a UPOS tag"),
                                           ("6\tx\tx\tNOUN\t_\t_\t4\tdep\t_", "10 tab-separated columns")])
def test_read_conllu_errors(tmp_path, line, message):
    path = tmp_path / "bad.conllu"
    path.write_text(CONLLU.split("\n\n")[0] + "\n" + line + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=f"line 10: .*{message}"):
        read_conllu(path)


def _toy_squad(n_articles: int) -> dict:
    return {"data": [{"title": f"T{i}", "paragraphs": [{"context": f"context {i}", "qas": [
        {"id": f"q{i}", "question": "what?", "answers": [{"answer_start": 8, "text": str(i)}]}]}]}
        for i in range(n_articles)], "version": "1.1"}


def test_split_squad_by_article():
    train, evaluation = split_squad(_toy_squad(14))
    assert [a["title"] for a in evaluation["data"]] == ["T5", "T11"]
    assert len(train["data"]) == 12 and train["version"] == evaluation["version"] == "1.1"
    assert list(train) == ["data", "version"]                    # the original key order
    examples = read_squad(evaluation)
    assert examples[0] == QAExample("q5", "what?", "context 5", ["5"], [8], "T5")
    with pytest.raises(ValueError, match="SQuAD object"):
        split_squad({"articles": []})


def test_read_squad_rejects_unanswerable_questions():
    squad = _toy_squad(1)
    squad["data"][0]["paragraphs"][0]["qas"][0]["answers"] = []
    with pytest.raises(ValueError, match="v2.0"):
        read_squad(squad)


@pytest.mark.parametrize("reader, split", [(read_banking77, "valid"), (read_poem_sentiment, "validation")])
def test_unknown_splits(reader, split):
    with pytest.raises(ValueError, match="splits"):
        reader(split)


# --- the course's data files -----------------------------------------------------------------------

def test_banking77_counts():
    _available("banking77/train")
    train, intents = read_banking77("train")
    test, _ = read_banking77("test")
    kept, held_out = holdout_split(train)
    assert (len(train), len(test), len(intents)) == (10_003, 3_080, 77)
    assert len(set(e.label for e in held_out)) == 77 and len(kept) + len(held_out) == len(train)


def test_poem_sentiment_counts():
    _available("poem_sentiment/train")
    assert len(read_poem_sentiment("train", keep_mixed=True)) == 892
    train = read_poem_sentiment("train")
    assert len(train) == 892 - 49 and POEM_LABELS[3] not in {POEM_LABELS[e.label] for e in train}
    assert (len(read_poem_sentiment("dev")), len(read_poem_sentiment("test"))) == (105, 104)
    assert Counter(POEM_LABELS[e.label] for e in train) == {"no_impact": 555, "negative": 155, "positive": 133}


def test_ud_ewt_counts():
    for split, sentences, words in [("dev", 2_001, 25_147), ("test", 2_077, 25_094)]:
        parsed = read_conllu(_available(f"ud_ewt/{split}"))
        assert (len(parsed), sum(len(s.words) for s in parsed)) == (sentences, words)


def test_squad_split_is_identical_to_the_published_one():
    _available("squad1.1/dev")
    train, evaluation = load_squad_dev_split()
    published = {"train": "f556449b475a70374155ad55a3c5ef9298c985325b78d2c519ead0fa42fd7024",
                 "eval": "3153e6e45edf6fdd9dc3087fcf8f8285a49973dfcc84427784575aa550231c72"}
    for name, data in (("train", train), ("eval", evaluation)):
        ours = json.dumps(data).encode("utf-8")
        assert hashlib.sha256(ours).hexdigest() == published[name]
        derived = Path(os.environ.get("TINYBERT_DATA_DIR", "/nonexistent")) / "derived" / \
            f"squad_v1.1_dev_split_{name}.json"
        if derived.is_file():                                    # the data folder's copy, when there
            assert ours == derived.read_bytes()
    assert (len(read_squad(train)), len(read_squad(evaluation))) == (8_839, 1_731)
    titles = [a["title"] for a in evaluation["data"]]
    assert titles == ["Teacher", "Steam_engine", "Ctenophora", "Victoria_and_Albert_Museum", "Construction",
                      "University_of_Chicago", "Rhine", "Force"]


# --- Universal NER (IOB2) ------------------------------------------------------------

def test_read_iob2_reads_words_tags_and_sentence_breaks(tmp_path):
    from tinybert.finetuning.tagging_tasks import NER_TAGS, read_iob2
    path = tmp_path / "tiny.iob2"
    path.write_text("# sent_id = a\n1\tin\tO\t-\t-\n2\ttampa\tB-LOC\t-\tx\n3\tbay\tI-LOC\t-\tx\n"
                    "\n\n# sent_id = b\n1\tJo\tB-PER\t-\t-\n", encoding="utf-8")
    first, second = read_iob2(path)
    assert first.words == ["in", "tampa", "bay"] and second.words == ["Jo"]
    assert [NER_TAGS[t] for t in first.tags] == ["O", "B-LOC", "I-LOC"]
    assert [NER_TAGS[t] for t in second.tags] == ["B-PER"]


@pytest.mark.parametrize("line, message", [("1\tParis\tB-GPE\t-\t-", r"line 2: 'B-GPE'"),
                                           ("1 Paris B-LOC", "line 2: expected index")])
def test_read_iob2_errors_name_the_file_and_line(tmp_path, line, message):
    from tinybert.finetuning.tagging_tasks import read_iob2
    path = tmp_path / "bad.iob2"
    path.write_text(f"# text = Paris\n{line}\n", encoding="utf-8")
    with pytest.raises(ValueError, match=message) as error:
        read_iob2(path)
    assert "bad.iob2" in str(error.value)


def test_uner_files_have_the_documented_sizes():
    from tinybert.finetuning.tagging_tasks import read_iob2
    dev, test = read_iob2(fetch("uner_ewt/dev")), read_iob2(fetch("uner_ewt/test"))
    assert (len(dev), len(test)) == (2_001, 2_077)              # SOURCES.md §10
    assert sum(len(s.words) for s in dev) == 25_149
    entities = sum(t % 2 == 1 for s in dev for t in s.tags)   # B- tags: odd indices
    assert entities == 966
