"""Hand-written: the learning-rate sweep behind chapter 11's sentence pairs.

Chapter 11 builds QNLI-style pairs from the course's SQuAD split
(tinybert.finetuning.sentence_pairs): training pairs from 32 of the 40 training
articles, validation pairs from the other 8, test pairs from the 8 evaluation articles.
This script fine-tunes each arm once per learning rate of the ladder's grid
(tinybert.finetuning.ladder.LADDER_LRS) with the chapter's settings (PAIR_TASK) and
scores it on the validation pairs. One seed; accuracy in the pair format. Chapter 11
reads the result and runs the final comparison (several seeds, test pairs) itself.

    python experiments/pair_sweep.py --out tinybert/shipped/results/pair_sweep.json --threads 2
"""

from __future__ import annotations

import shlex
import sys
import time

from results_file import record, sweep_arguments  # beside this script


def main(argv: list[str] | None = None) -> int:
    args = sweep_arguments(__doc__, argv)
    out = args.out

    import torch

    from tinybert.finetuning.ladder import LADDER_LRS, ladder_arms
    from tinybert.finetuning.sentence_pairs import PAIR_TASK, pair_run, pair_splits

    if args.threads:
        torch.set_num_threads(args.threads)
    splits = pair_splits()
    results = {
        "command": "python " + " ".join(shlex.quote(a) for a in sys.argv),
        "settings": {**vars(PAIR_TASK), "seed": args.seed},
        "note": "validation accuracy, pair format (pairs from every fifth of the 40 "
        "training articles)",
        "log": [],
        "validation": {},
    }
    arms = ladder_arms()
    unknown = set(args.arms or []) - set(arms)
    if unknown:
        names = f"expected names from {sorted(arms)}, got {sorted(unknown)}"
        raise SystemExit(f"pair_sweep.py: --arms: {names}")
    for name in args.arms or list(arms):
        for lr in LADDER_LRS:
            start = time.perf_counter()
            scores = pair_run(
                arms[name], splits, lr=lr, seed=args.seed, split="validation",
                formats=("pair",),
            )
            results["validation"].setdefault(name, {})[f"{lr:g}"] = scores["pair"]
            line = (
                f"{name} lr {lr:g}: accuracy {scores['pair']:.4f} "
                f"({time.perf_counter() - start:.0f} s)"
            )
            record(results, out, line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
