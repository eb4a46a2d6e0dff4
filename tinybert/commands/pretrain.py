"""Hand-written: ``tinybert pretrain`` — pretrain a BERT with MLM + NSP on the course
corpus (chapter 09).

Thin on purpose: it turns command-line arguments into a call of
``tinybert.pretraining.run.pretrain_bert``, which the chapter builds and explains. Runs
under ``torchrun --nproc_per_node=N`` too (DistributedDataParallel; only rank 0
prints and saves). Its options, and the keyword arguments they give, are in
``tinybert.commands.pretrain_arguments``.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path

from tinybert.commands.pretrain_arguments import (
    add_arguments,
    pretrain_bert_arguments,
)

__all__ = ["add_arguments", "run"]


def _command(argv: list[str], processes: int) -> str:
    """The command line that runs ``argv`` (``pretrain ...``) again."""
    program = (
        f"torchrun --nproc_per_node={processes} -m tinybert"
        if processes > 1
        else "python -m tinybert"
        if sys.argv[0].endswith("__main__.py")
        else "tinybert"
    )
    return " ".join([program, *map(shlex.quote, argv)])


def _interrupted(
    interrupt: KeyboardInterrupt, out: str, argv: list[str], processes: int
) -> str:
    """After Ctrl-C: where the run stopped, and the command that continues it."""
    from tinybert.pretraining.run_checks import RUN_FILES

    step = getattr(interrupt, "step", None)  # TrainingInterrupted knows its step
    where = (
        f"after step {step}; the checkpoint in {interrupt.directory} keeps it"
        if step is not None
        else "before the first checkpoint of this attempt"
    )
    if not any((Path(out) / name).exists() for name in RUN_FILES):
        return f"tinybert pretrain: interrupted {where}. Nothing was saved yet."
    again = [a for a in argv if not (len(a) > 3 and "--overwrite".startswith(a))]
    if not any(len(a) > 3 and "--resume".startswith(a) for a in again):
        again.append("--resume")
    return (
        f"tinybert pretrain: interrupted {where}. Continue the run with:\n"
        f"  {_command(again, processes)}"
    )


def run(args: argparse.Namespace) -> int:
    import torch

    from tinybert.pretraining.distributed import init_distributed
    from tinybert.pretraining.run import pretrain_bert
    from tinybert.runtime import fix_malloc_threshold

    # else the heap grows ~25 MB a step (see its docstring)
    fix_malloc_threshold()
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    dist = init_distributed()
    device = args.device
    if device is None and dist.world_size > 1 and torch.cuda.is_available():
        device = f"cuda:{dist.local_rank}"
    argv = getattr(args, "argv", sys.argv[1:])
    if dist.is_main:
        print("command: tinybert " + " ".join(map(shlex.quote, argv)))
        print(
            f"processes: {dist.world_size}; torch {torch.__version__}; threads "
            f"{torch.get_num_threads()}"
        )
    start = time.perf_counter()
    try:
        history = pretrain_bert(
            args.out, **pretrain_bert_arguments(args), device=device, dist=dist
        )
    except (ValueError, OSError) as error:  # arguments, folder, data
        print(f"tinybert pretrain: error: {error}", file=sys.stderr)
        return 2
    except FloatingPointError as error:  # diverged: the last checkpoint is kept
        print(f"tinybert pretrain: error: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as interrupt:  # Ctrl-C: a checkpoint at the last step
        if dist.is_main:
            print(
                _interrupted(interrupt, args.out, argv, dist.world_size),
                file=sys.stderr,
            )
        return 130  # 128 + SIGINT, as the shell reports it
    if dist.is_main:
        final = history["eval"][-1] if history["eval"] else {}
        print(
            f"done in {time.perf_counter() - start:.0f} s wall clock; "
            + ", ".join(
                f"held-out {k} {v:.4f}"
                for k, v in final.items()
                if isinstance(v, float)
            )
        )
    return 0
