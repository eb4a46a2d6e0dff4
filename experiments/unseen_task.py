"""Hand-written: does the course checkpoint transfer to a task that no chapter uses?

Two sentence-classification sets of the course data are in no chapter:

- ``sentence_polarity``: the Sentence Polarity Dataset (Pang and Lee 2005; movie-review
  snippets, positive or negative). None of its text was in the course
  checkpoint's pretraining corpus. Splits follow the course data's derived files
  (SOURCES.md section 9): line i of each polarity file goes to validation if i % 10
  == 8, to test if i % 10 == 9, otherwise to training
  (``tinybert.data.read_sentence_polarity``).
- ``authorship``: which of four novelists (Austen, Dickens, Twain, Doyle) wrote a
  passage, the rows of the derived files of SOURCES.md section 9, which
  ``tinybert.data.read_authorship`` derives from the registered books. Training and
  validation passages come from eight novels that *were* in the pretraining corpus
  (as unlabelled text); the test passages come from the four novels that chapter 9
  keeps out of it, one per author.

This script runs chapter 11's transfer ladder on one of them with the ladder's fair
recipe: every arm picks its learning rate from the ladder's grid on the validation
split (seed 0), then runs several seeds on the test split; the majority class and a
multinomial naive Bayes classifier over word counts (a model-free baseline) stand
beside it.

    python experiments/unseen_task.py --out experiments/unseen_task.json --threads 2
    python experiments/unseen_task.py --task authorship --out OUT.json --threads 2

The main result, ``unseen_task_authorship_32_full.json`` (32 passages per author, all
3,000 test passages, 10 seeds, on this CPU), came from

    python experiments/unseen_task.py --task authorship --per-label 32 \
        --eval-examples 3000 --seeds 0 1 2 3 4 5 6 7 8 9 \
        --arms 'random init' 'course checkpoint' --threads 2 --out OUT.json

``unseen_task_256_full.json`` holds Sentence Polarity with 256 examples per label, and
``unseen_task_gpu/`` the exploratory runs that chose these settings. Every result file
records its command, and newer ones the device.
"""

from __future__ import annotations

import argparse
import math
import re
import shlex
import sys
import time
from collections import Counter
from pathlib import Path

from results_file import record  # beside this script


def read_splits(task: str) -> dict[str, list]:
    """The train, validation and test splits of ``task`` as TextExamples, from the
    package's readers (tinybert.data), which need only the registered files."""
    from tinybert.data import read_authorship, read_sentence_polarity
    from tinybert.finetuning.text_tasks import TextExample

    reader = read_authorship if task == "authorship" else read_sentence_polarity
    splits = {}
    for split in ("train", "validation", "test"):
        pairs = reader(split)
        if task == "sentence_polarity":
            # the recorded results read all positive lines, then all negative ones;
            # the package pairs them line by line (positive first), so sort, stably
            pairs = sorted(pairs, key=lambda pair: -pair[1])
        splits[split] = [TextExample(text, label) for text, label in pairs]
    return splits


def naive_bayes(train, test, n_labels: int) -> float:
    """Accuracy of multinomial naive Bayes over lower-cased word counts (add-one
    smoothing): a baseline that needs no network."""

    def words(text: str) -> list[str]:
        return re.findall(r"[a-z0-9']+", text.lower())

    counts = [Counter() for _ in range(n_labels)]
    for e in train:
        counts[e.label].update(words(e.text))
    vocab = set().union(*counts)
    prior = Counter(e.label for e in train)
    totals = [sum(c.values()) + len(vocab) for c in counts]
    correct = 0
    for e in test:
        scores = [
            math.log(prior[c] / len(train))
            + sum(
                math.log((counts[c][w] + 1) / totals[c])
                for w in words(e.text)
                if w in vocab
            )
            for c in range(n_labels)
        ]
        correct += max(range(n_labels), key=scores.__getitem__) == e.label
    return correct / len(test)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--out", required=True, help="JSON file to write (must not exist)"
    )
    parser.add_argument(
        "--task",
        choices=("sentence_polarity", "authorship"),
        default="sentence_polarity",
    )
    parser.add_argument(
        "--per-label", type=int, default=32, help="training examples per label"
    )
    parser.add_argument("--epochs", type=int, default=16)
    parser.add_argument("--eval-examples", type=int, default=500)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--arms", nargs="+", default=None, help="default: every arm")
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args(argv)
    out = Path(args.out)
    if out.exists():
        parser.error(f"--out {out} exists; choose a new file")

    import torch

    import tinybert.finetuning.recipes as recipes
    from tinybert.finetuning.ladder import (
        LADDER,
        LADDER_LRS,
        LadderTask,
        ladder_arms,
        ladder_score,
    )
    from tinybert.finetuning.text_tasks import evenly_spaced, per_label
    from tinybert.runtime import get_device

    if args.threads:
        torch.set_num_threads(args.threads)
    from tinybert.data import AUTHORS, POLARITY_LABELS

    splits = read_splits(args.task)
    labels = list(AUTHORS if args.task == "authorship" else POLARITY_LABELS)
    original_task_data = recipes.task_data

    def task_data(task: str, split: str):
        if task == args.task:
            return splits[split], labels
        return original_task_data(task, split)

    recipes.task_data = task_data  # finetune_task reads its data through it
    LADDER[args.task] = LadderTask(
        None, args.eval_examples, args.epochs, per_label=args.per_label
    )
    arms = ladder_arms()
    results = {
        "command": "python " + " ".join(shlex.quote(a) for a in sys.argv),
        "settings": vars(args) | {"out": str(out)},
        "device": f"{get_device()} (torch {torch.__version__})",
        "log": [],
        "validation": {},
        "test": {},
    }

    def log(line: str) -> None:
        record(results, out, line)

    test = evenly_spaced(splits["test"], args.eval_examples)
    majority = max(range(len(labels)), key=[e.label for e in splits["train"]].count)
    results["majority class"] = sum(e.label == majority for e in test) / len(test)
    # the same few-shot training examples as every arm (finetune_task's per_label)
    few_shot = per_label(splits["train"], args.per_label)
    results["naive Bayes"] = naive_bayes(few_shot, test, len(labels))
    for name in args.arms or list(arms):
        arm, by_lr = arms[name], {}
        for lr in LADDER_LRS:
            start = time.perf_counter()
            by_lr[f"{lr:g}"] = ladder_score(
                args.task, arm, lr=lr, seed=0, split="validation"
            )
            log(
                f"validation {name} lr {lr:g}: {by_lr[f'{lr:g}']:.4f} "
                f"({time.perf_counter() - start:.0f} s)"
            )
        results["validation"][name] = by_lr
        best = float(max(by_lr, key=by_lr.get))
        scores = []
        for seed in args.seeds:
            scores.append(
                ladder_score(args.task, arm, lr=best, seed=seed, split="test")
            )
            log(f"test {name} lr {best:g} seed {seed}: {scores[-1]:.4f}")
        results["test"][name] = {"lr": best, "scores": scores}
    for name, run in results["test"].items():
        scores = torch.tensor(run["scores"])
        log(
            f"{name}: test accuracy {scores.mean():.1%} "
            f"[{scores.min():.1%}, {scores.max():.1%}] over seeds {args.seeds}"
        )
    log(
        f"majority class: {results['majority class']:.1%}; naive Bayes on the same "
        f"{len(few_shot)} training examples: {results['naive Bayes']:.1%}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
