"""Hand-written: the learning-rate sweep behind chapter 11's ladder of named entities.

UNER English-EWT's training file is not in the course data, so chapter 11 trains on 300
sentences of its development file and tests on 600 of its test file. This script chooses
each arm's learning rate from the ladder's grid (tinybert.finetuning.ladder.LADDER_LRS)
on 300 *other* development sentences: evenly spread over those that the chapter does not
train on. One seed; entity-level F1. Chapter 11 reads the result and runs the final
comparison (several seeds, test sentences) itself.

    python experiments/ner_sweep.py --out tinybert/shipped/results/ner_sweep.json --threads 2
"""

from __future__ import annotations

import shlex
import sys
import time

from results_file import record, sweep_arguments  # beside this script

TRAIN_SENTENCES, VALIDATION_SENTENCES, EPOCHS = 300, 300, 4  # chapter 11's settings


def main(argv: list[str] | None = None) -> int:
    args = sweep_arguments(__doc__, argv)
    out = args.out

    import torch

    from tinybert.data import fetch
    from tinybert.finetuning.ladder import LADDER_LRS, ladder_arms, ner_tags
    from tinybert.finetuning.metrics import entity_scores
    from tinybert.finetuning.tagging_tasks import NER_TAGS, read_iob2
    from tinybert.finetuning.text_tasks import evenly_spaced

    if args.threads:
        torch.set_num_threads(args.threads)
    development = read_iob2(fetch("uner_ewt/dev"))
    train = evenly_spaced(
        development, TRAIN_SENTENCES
    )  # chapter 11's training sentences
    chosen = {id(s) for s in train}
    validation = evenly_spaced(
        [s for s in development if id(s) not in chosen], VALIDATION_SENTENCES
    )
    gold = [[NER_TAGS[t] for t in s.tags] for s in validation]
    results = {
        "command": "python " + " ".join(shlex.quote(a) for a in sys.argv),
        "settings": {
            "train_sentences": TRAIN_SENTENCES,
            "validation_sentences": VALIDATION_SENTENCES,
            "epochs": EPOCHS,
            "seed": args.seed,
        },
        "note": "validation entity F1 (UNER development sentences the chapter does not "
        "train on)",
        "log": [],
        "validation": {},
    }
    arms = ladder_arms()
    for name in args.arms or list(arms):
        for lr in LADDER_LRS:
            start = time.perf_counter()
            predicted = ner_tags(
                arms[name], train, validation, lr=lr, seed=args.seed, epochs=EPOCHS
            )
            f1 = entity_scores(gold, predicted)["overall"]["f1"]
            results["validation"].setdefault(name, {})[f"{lr:g}"] = f1
            line = (
                f"{name} lr {lr:g}: F1 {f1:.4f} ({time.perf_counter() - start:.0f} s)"
            )
            record(results, out, line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
