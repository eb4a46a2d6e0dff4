"""Hand-written: the learning-rate sweep behind chapter 11's transfer ladder.

For each task and each encoder (random initialisation of the course's architecture, the
course's own checkpoint, the real pretrained all-MiniLM-L6-v2), fine-tune with every learning
rate of one grid, one seed, and score on the *validation* split. Chapter 11 reads the result,
takes each arm's best rate and runs the final comparison (several seeds, test split) itself.

    python experiments/transfer_sweep.py --out tinybert/shipped/results/transfer_sweep.json

The settings (examples, epochs, batch size, pooling) are the chapter's, from
tinybert.finetuning.ladder.LADDER; the command, a log line per run and the seconds are written beside
the numbers.
"""
from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path

from results_file import record  # beside this script


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="JSON file to write (replaced atomically)")
    parser.add_argument("--checkpoint", default=None,
                        help="course checkpoint folder (default: the shipped one)")
    parser.add_argument("--tasks", nargs="+", default=None, help="default: every ladder task")
    parser.add_argument("--arms", nargs="+", default=None, help="default: every arm")
    parser.add_argument("--lrs", nargs="+", type=float, default=None,
                        help="default: tinybert.finetuning.ladder.LADDER_LRS")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args(argv)

    from dataclasses import asdict

    import torch

    from tinybert.finetuning.ladder import LADDER, LADDER_LRS, ladder_arms, ladder_score

    if args.threads:
        torch.set_num_threads(args.threads)
    out = Path(args.out)
    results = json.loads(out.read_text()) if out.is_file() else {}
    command = "python " + " ".join(shlex.quote(a) for a in sys.argv)
    if command not in results.setdefault("commands", []):
        results["commands"].append(command)
    settings = {task: asdict(LADDER[task]) for task in LADDER}
    if results.setdefault("settings", settings) != settings:
        raise SystemExit(f"{out} holds results for other ladder settings "
                         f"({results['settings']}); write to a new file")
    results.setdefault("note", "validation accuracy; settings: tinybert.finetuning.ladder.LADDER")
    results.setdefault("log", [])
    arms = ladder_arms(args.checkpoint)
    for task in args.tasks or list(LADDER):
        for arm_name in args.arms or list(arms):
            for lr in args.lrs or LADDER_LRS:
                start = time.perf_counter()
                score = ladder_score(task, arms[arm_name], lr=lr, seed=args.seed,
                                     split="validation")
                seconds = time.perf_counter() - start
                results.setdefault(task, {}).setdefault(arm_name, {})[f"{lr:g}"] = score
                line = f"{task} {arm_name} lr {lr:g} seed {args.seed}: {score:.4f} ({seconds:.0f} s)"
                record(results, out, line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
