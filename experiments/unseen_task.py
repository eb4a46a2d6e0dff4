"""Hand-written: does the course checkpoint transfer to a task that no chapter uses?

The Sentence Polarity Dataset (Pang and Lee 2005; movie-review snippets, positive or negative)
is in the course data but in no chapter, and none of its text was in the course checkpoint's
pretraining corpus. This script runs chapter 10's transfer ladder on it with the ladder's fair
recipe: every arm picks its learning rate from the ladder's grid on the validation split
(seed 0), then runs several seeds on the test split; the majority class and bag-of-words
centroids stand beside it.

    python experiments/unseen_task.py --out experiments/unseen_task.json --threads 2

Splits follow the course data's derived files (SOURCES.md section 9): line i of each polarity
file goes to validation if i % 10 == 8, to test if i % 10 == 9, otherwise to training.
"""
from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
import zipfile
from pathlib import Path


def read_sentence_polarity() -> dict[str, list]:
    """The train, validation and test splits of the Sentence Polarity Dataset v1.0."""
    from tinybert.data import fetch
    from tinybert.finetuning.tasks import TextExample

    splits = {"train": [], "validation": [], "test": []}
    with zipfile.ZipFile(fetch("sentence_polarity/zip")) as archive:
        for label, name in ((1, "pos"), (0, "neg")):
            raw = archive.read(f"sentence_polarity/rt-polarity.{name}").decode("utf-8")
            for i, line in enumerate(raw.splitlines()):
                split = {8: "validation", 9: "test"}.get(i % 10, "train")
                splits[split].append(TextExample(line.strip(), label))
    return splits


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True,
                        help="JSON file to write (must not exist)")
    parser.add_argument("--per-label", type=int, default=32,
                        help="training examples per label")
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
    from tinybert.finetuning.ladder import (LADDER, LADDER_LRS, LadderTask, ladder_arms,
                                            ladder_score)
    from tinybert.finetuning.tasks import evenly_spaced

    if args.threads:
        torch.set_num_threads(args.threads)
    splits = read_sentence_polarity()
    labels = ["negative", "positive"]
    original_task_data = recipes.task_data

    def task_data(task: str, split: str):
        if task == "sentence_polarity":
            return splits[split], labels
        return original_task_data(task, split)

    recipes.task_data = task_data            # finetune_task reads its data through it
    LADDER["sentence_polarity"] = LadderTask(
        None, args.eval_examples, args.epochs, per_label=args.per_label)
    arms = ladder_arms()
    results = {"command": "python " + " ".join(shlex.quote(a) for a in sys.argv),
               "settings": vars(args) | {"out": str(out)}, "log": [],
               "validation": {}, "test": {}}

    def log(line: str) -> None:
        results["log"].append(line)
        print(line, flush=True)
        tmp = out.with_suffix(".tmp")
        tmp.write_text(json.dumps(results, indent=1) + "\n")
        tmp.replace(out)

    test = evenly_spaced(splits["test"], args.eval_examples)
    majority = max((0, 1), key=[e.label for e in splits["train"]].count)
    results["majority class"] = sum(e.label == majority for e in test) / len(test)
    for name in args.arms or list(arms):
        arm, by_lr = arms[name], {}
        for lr in LADDER_LRS:
            start = time.perf_counter()
            by_lr[f"{lr:g}"] = ladder_score("sentence_polarity", arm, lr=lr, seed=0,
                                            split="validation")
            log(f"validation {name} lr {lr:g}: {by_lr[f'{lr:g}']:.4f} "
                f"({time.perf_counter() - start:.0f} s)")
        results["validation"][name] = by_lr
        best = float(max(by_lr, key=by_lr.get))
        scores = []
        for seed in args.seeds:
            scores.append(ladder_score("sentence_polarity", arm, lr=best, seed=seed,
                                       split="test"))
            log(f"test {name} lr {best:g} seed {seed}: {scores[-1]:.4f}")
        results["test"][name] = {"lr": best, "scores": scores}
    for name, run in results["test"].items():
        scores = torch.tensor(run["scores"])
        log(f"{name}: test accuracy {scores.mean():.1%} "
            f"[{scores.min():.1%}, {scores.max():.1%}] over seeds {args.seeds}")
    log(f"majority class: {results['majority class']:.1%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
