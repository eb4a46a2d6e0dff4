"""Hand-written: issue 37's downstream test of a checkpoint beside random init and the
course checkpoint, on the three tasks of its target.

Arms: chapter 11's ladder arms (``random init``, ``course checkpoint``; the ladder's
encoders, dropout 0.1, mean pooling) and, with ``--electra DIR``, ``ELECTRA
checkpoint``: the discriminator's encoder that ``experiments/electra_full.py`` wrote
to DIR (an ElectraForPreTraining with its vocab.txt, which must be the course
checkpoint's vocabulary), with the same dropout and pooling.

Tasks, each with the ladder's fair recipe: every arm chooses its learning rate from
the ladder's grid (LADDER_LRS) on the *validation* split with seed 0, then runs every
seed of ``--seeds`` on the test split at that rate; a trivial baseline stands beside.

- ``sentence_polarity``: text that no pretraining corpus read, with the settings of
  ``experiments/unseen_task_256_full.json`` (256 training snippets per label, 8 epochs,
  1,066 test snippets); baselines: the majority class and naive Bayes.
- ``pairs``: chapter 11's QNLI-style sentence pairs from the SQuAD split (its
  PAIR_TASK), judged in the pair format; baseline: the majority label.
- ``ner``: chapter 11's named entities (300 UNER development sentences to train on, 300
  others to validate on, 600 test sentences, 4 epochs), entity F1 (seqeval's rules);
  baseline: the most frequent tag of each word seen in training.

    python experiments/electra_transfer.py --out OUT.json --electra runs/electra-mini \
        --threads 2
"""

from __future__ import annotations

import argparse
import shlex
import statistics
import sys
import time
from collections import Counter, defaultdict
from dataclasses import replace
from pathlib import Path

from results_file import record

TASKS = ("sentence_polarity", "pairs", "ner")


def electra_arm(directory: Path, course_tokenizer):
    """The ladder arm of an ELECTRA checkpoint: its discriminator's encoder, fresh for
    every seed, with the ladder's dropout and mean pooling."""
    from tinybert.finetuning.ladder import LadderArm
    from tinybert.models.registry import load_model

    from tinybert.models.course_checkpoint import shipped_checkpoint

    mine = (directory / "vocab.txt").read_bytes()
    if mine != (shipped_checkpoint() / "vocab.txt").read_bytes():
        raise SystemExit(f"{directory}/vocab.txt is not the course checkpoint's "
                         "vocabulary; the arms must share a tokenizer")
    saved = load_model(directory)
    config = replace(saved.config, dropout=0.1, attention_dropout=0.1)
    weights = saved.bert.state_dict()

    def make(seed: int):
        from tinybert.models.electra import ElectraModel

        encoder = ElectraModel(config)
        encoder.load_state_dict(weights)
        return encoder

    return LadderArm(make, course_tokenizer, "mean")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, type=Path, help="JSON (must not exist)")
    parser.add_argument("--electra", type=Path, default=None,
                        help="folder of electra_full.py's discriminator")
    parser.add_argument("--tasks", nargs="+", choices=TASKS, default=list(TASKS))
    parser.add_argument("--arms", nargs="+", default=None, help="default: every arm")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args(argv)
    if args.out.exists():
        parser.error(f"--out {args.out} exists; choose a new file")
    if args.electra is not None and not (args.electra / "config.json").is_file():
        parser.error(f"--electra {args.electra}: no config.json there")

    import torch

    import tinybert.finetuning.recipes as recipes
    from tinybert.data import POLARITY_LABELS, fetch, read_sentence_polarity
    from tinybert.finetuning.ladder import (
        LADDER,
        LADDER_LRS,
        LadderTask,
        ladder_arms,
        ladder_score,
        ner_tags,
    )
    from tinybert.finetuning.metrics import entity_scores
    from tinybert.finetuning.sentence_pairs import (
        PAIR_TASK,
        pair_run,
        pair_splits,
        pair_subset,
    )
    from tinybert.finetuning.tagging_tasks import NER_TAGS, read_iob2
    from tinybert.finetuning.text_tasks import TextExample, evenly_spaced, per_label
    from tinybert.runtime import get_device

    if args.threads:
        torch.set_num_threads(args.threads)
    arms = ladder_arms()
    arms.pop("all-MiniLM-L6-v2")  # another vocabulary and corpus: not this question
    if args.electra is not None:
        arms["ELECTRA checkpoint"] = electra_arm(args.electra,
                                                 arms["course checkpoint"].tokenizer)
    unknown = set(args.arms or []) - set(arms)
    if unknown:
        parser.error(f"--arms: expected names from {sorted(arms)}, got "
                     f"{sorted(unknown)}")
    names = args.arms or list(arms)
    results = {"command": "python " + " ".join(shlex.quote(a) for a in sys.argv),
               "device": f"{get_device()} (torch {torch.__version__})",
               "seeds": args.seeds, "lrs": list(LADDER_LRS), "log": [],
               "validation": {}, "test": {}, "baselines": {}}

    def log(line: str) -> None:
        record(results, args.out, line)

    # Sentence Polarity, as experiments/unseen_task.py runs it
    polarity = {split: [TextExample(text, label) for text, label in sorted(
        read_sentence_polarity(split), key=lambda row: -row[1])]
        for split in ("train", "validation", "test")}
    original_task_data = recipes.task_data

    def task_data(task: str, split: str):
        if task == "sentence_polarity":
            return polarity[split], list(POLARITY_LABELS)
        return original_task_data(task, split)

    recipes.task_data = task_data  # finetune_task reads its data through it
    LADDER["sentence_polarity"] = LadderTask(None, 1066, 8, per_label=256)
    pairs = pair_splits()
    development = read_iob2(fetch("uner_ewt/dev"))
    ner_train = evenly_spaced(development, 300)
    chosen = {id(s) for s in ner_train}
    ner_eval = {"validation": evenly_spaced(
        [s for s in development if id(s) not in chosen], 300),
        "test": evenly_spaced(read_iob2(fetch("uner_ewt/test")), 600)}

    def score(task: str, arm, lr: float, seed: int, split: str) -> float:
        if task == "sentence_polarity":
            return ladder_score(task, arm, lr=lr, seed=seed, split=split)
        if task == "pairs":
            return pair_run(arm, pairs, lr=lr, seed=seed, split=split,
                            formats=("pair",))["pair"]
        sentences = ner_eval[split]
        predicted = ner_tags(arm, ner_train, sentences, lr=lr, seed=seed, epochs=4)
        gold = [[NER_TAGS[t] for t in s.tags] for s in sentences]
        return entity_scores(gold, predicted)["overall"]["f1"]

    # the trivial baselines, on the test split
    test = evenly_spaced(polarity["test"], 1066)
    results["baselines"]["sentence_polarity"] = {
        "majority class": max(Counter(e.label for e in test).values()) / len(test),
        "few-shot examples": len(per_label(polarity["train"], 256))}
    labels = [p.label for p in pair_subset(pairs["test"], PAIR_TASK.eval_pairs)]
    results["baselines"]["pairs"] = {
        "majority label": max(Counter(labels).values()) / len(labels)}
    seen = defaultdict(Counter)
    for s in ner_train:
        for word, tag in zip(s.words, s.tags):
            seen[word][tag] += 1
    gold = [[NER_TAGS[t] for t in s.tags] for s in ner_eval["test"]]
    memorised = [[NER_TAGS[seen[w].most_common(1)[0][0]] if w in seen else "O"
                  for w in s.words] for s in ner_eval["test"]]
    results["baselines"]["ner"] = {
        "memorised names": entity_scores(gold, memorised)["overall"]["f1"]}
    log(f"baselines: {results['baselines']}; pair task {vars(PAIR_TASK)}")

    for task in args.tasks:
        for name in names:
            arm, by_lr = arms[name], {}
            for lr in LADDER_LRS:
                start = time.perf_counter()
                by_lr[f"{lr:g}"] = score(task, arm, lr, 0, "validation")
                log(f"{task} validation {name} lr {lr:g}: {by_lr[f'{lr:g}']:.4f} "
                    f"({time.perf_counter() - start:.0f} s)")
            results["validation"].setdefault(task, {})[name] = by_lr
            best = float(max(by_lr, key=by_lr.get))
            scores = []
            for seed in args.seeds:
                scores.append(score(task, arm, best, seed, "test"))
                log(f"{task} test {name} lr {best:g} seed {seed}: {scores[-1]:.4f}")
            results["test"].setdefault(task, {})[name] = {"lr": best,
                                                          "scores": scores}
            log(f"{task} {name}: test mean {statistics.mean(scores):.1%} "
                f"[{min(scores):.1%}, {max(scores):.1%}]")
        by_arm = results["test"][task]
        if "random init" in by_arm:
            floor = by_arm["random init"]["scores"]
            for name, run in by_arm.items():
                if name == "random init":
                    continue
                gap = statistics.mean(run["scores"]) - statistics.mean(floor)
                beyond = min(run["scores"]) > max(floor)
                run["gap_over_random_init"] = gap
                run["beyond_spread"] = beyond
                log(f"{task} {name} - random init: {100 * gap:+.1f} points"
                    f"{', beyond the spread' if beyond else ', within the spread'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
