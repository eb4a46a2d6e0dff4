"""Hand-written: the baselines without a neural network that the project briefs quote.

Two of the projects (book/projects.md) work on tasks that no chapter scores, so this script
gives them a floor to beat, computed from the course data in a few seconds:

- named entities on Universal NER English-EWT: tag each word with its most frequent tag in
  the dev file (the training data of the project: the offline folder has no training file),
  decode the BIO tags into spans and score the exact spans of the test file (micro F1);
- answer-sentence selection on the course's SQuAD split (chapter 10's ``load_squad_dev_split``):
  for each evaluation question, pick the sentence of its paragraph that shares the most words
  with the question, and count how often it holds the answer; a random pick is the chance
  level.

    python experiments/project_baselines.py --out experiments/project_baselines.json
"""
from __future__ import annotations

import argparse
import json
import re
import shlex
import sys
from collections import Counter, defaultdict
from pathlib import Path


def read_iob2(path: Path) -> list[tuple[list[str], list[str]]]:
    """(words, BIO tags) of every sentence of a UNER .iob2 file."""
    sentences, words, tags = [], [], []
    for line in path.read_text(encoding="utf-8").splitlines() + [""]:
        if line.startswith("#"):
            continue
        if not line.strip():
            if words:
                sentences.append((words, tags))
            words, tags = [], []
            continue
        columns = line.split("\t")
        words.append(columns[1])
        tags.append(columns[2])
    return sentences


def spans(tags: list[str]) -> set[tuple[int, int, str]]:
    """The (start, end, type) entity spans of a BIO sequence; a stray I- starts a span."""
    found, start, kind = set(), None, None
    for i, tag in enumerate(tags + ["O"]):
        inside = tag.startswith("I-") and kind == tag[2:]
        if start is not None and not inside:
            found.add((start, i, kind))
            start, kind = None, None
        if tag != "O" and not inside:
            start, kind = i, tag[2:]
    return found


def span_f1(gold: list[list[str]], predicted: list[list[str]]) -> dict[str, float]:
    """Micro precision, recall and F1 of exact entity spans."""
    hits = n_gold = n_predicted = 0
    for g, p in zip(gold, predicted):
        g_spans, p_spans = spans(g), spans(p)
        hits += len(g_spans & p_spans)
        n_gold += len(g_spans)
        n_predicted += len(p_spans)
    precision = hits / n_predicted if n_predicted else 0.0
    recall = hits / n_gold if n_gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if hits else 0.0
    return {"precision": precision, "recall": recall, "f1": f1, "gold_spans": n_gold}


def ner_baseline() -> dict:
    from tinybert.data import fetch

    train = read_iob2(fetch("uner_ewt/dev"))
    test = read_iob2(fetch("uner_ewt/test"))
    by_word: dict[str, Counter] = defaultdict(Counter)
    for words, tags in train:
        for word, tag in zip(words, tags):
            by_word[word][tag] += 1
    predicted = [[by_word[w].most_common(1)[0][0] if w in by_word else "O" for w in words]
                 for words, _ in test]
    return {"train_sentences": len(train), "test_sentences": len(test),
            "most_frequent_tag": span_f1([tags for _, tags in test], predicted)}


def sentences_of(context: str) -> list[tuple[int, int]]:
    """(start, end) character offsets of the sentences of a paragraph (a simple splitter)."""
    bounds, start = [], 0
    for match in re.finditer(r"[.!?](?=\s+[A-Z0-9\"'(])", context):
        bounds.append((start, match.end()))
        start = match.end()
    bounds.append((start, len(context)))
    return [(s, e) for s, e in bounds if context[s:e].strip()]


def words_of(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower()))


def answer_sentence_baseline() -> dict:
    from tinybert.finetuning.squad import load_squad_dev_split, read_squad

    _, evaluation = load_squad_dev_split()
    examples = read_squad(evaluation)
    overlap_hits, chance, n_sentences = 0, 0.0, 0
    for example in examples:
        bounds = sentences_of(example.context)
        start = example.answer_starts[0]
        gold = next(i for i, (s, e) in enumerate(bounds) if s <= start < e)
        question = words_of(example.question)
        scores = [len(question & words_of(example.context[s:e])) for s, e in bounds]
        overlap_hits += scores.index(max(scores)) == gold     # ties: the first sentence
        chance += 1 / len(bounds)
        n_sentences += len(bounds)
    return {"questions": len(examples), "sentences_per_paragraph": n_sentences / len(examples),
            "word_overlap_accuracy": overlap_hits / len(examples),
            "random_sentence_accuracy": chance / len(examples)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="JSON file to write")
    args = parser.parse_args(argv)
    result = {"command": "python " + shlex.join(["experiments/project_baselines.py",
                                                 *(argv if argv is not None else
                                                   sys.argv[1:])]),
              "uner_ewt": ner_baseline(), "squad_answer_sentence": answer_sentence_baseline()}
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
