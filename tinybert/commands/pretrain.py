"""Hand-written: ``tinybert pretrain`` — pretrain a BERT with MLM + NSP on the course
corpus (chapter 09).

Thin on purpose: it turns command-line arguments into a call of
``tinybert.pretraining.run.pretrain_bert``, which the chapter builds and explains. Runs
under ``torchrun --nproc_per_node=N`` too (DistributedDataParallel; only rank 0
prints and saves). Its options, made from the fields of the recipe, and the recipe
they give are in ``tinybert.commands.pretrain_arguments``.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path

from tinybert.commands.pretrain_arguments import add_arguments, flag, recipe_from_args

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


def _resumed(argv: list[str], *, keep_stop_after: bool = True) -> list[str]:
    """``argv`` turned into the command that continues its run: no --overwrite, with
    --resume (and without --stop-after unless ``keep_stop_after``)."""
    again, skip = [], False
    for a in argv:
        if skip or a == "--overwrite":
            skip = False
            continue
        if not keep_stop_after and a.startswith("--stop-after"):
            skip = a == "--stop-after"  # its value is the next argument
            continue
        again.append(a)
    return again if "--resume" in again else [*again, "--resume"]


def _run_files(out: str) -> dict[str, tuple[int, int]]:
    """The run files in ``out`` and their (inode, mtime): whether a run was touched."""
    from tinybert.pretraining.run_checks import RUN_FILES

    paths = [Path(out) / name for name in RUN_FILES]
    return {
        p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in paths if p.exists()
    }


def _interrupted(
    interrupt: KeyboardInterrupt,
    out: str,
    argv: list[str],
    processes: int,
    before: dict | None = None,
) -> str:
    """After Ctrl-C: where the run stopped, and the command that continues it.
    ``before``: the run files in ``out`` before an --overwrite run started."""
    step = getattr(interrupt, "step", None)  # TrainingInterrupted knows its step
    where = (
        f"after step {step}; the checkpoint in {interrupt.directory} keeps it"
        if step is not None
        else "before the first checkpoint of this attempt"
    )
    files = _run_files(out)
    if not files:
        return f"tinybert pretrain: interrupted {where}. Nothing was saved yet."
    if before and files == before:  # --overwrite: the old run was not yet deleted
        return (
            f"tinybert pretrain: interrupted before the new run wrote anything; the "
            f"run already in {out} is untouched. Start again with:\n"
            f"  {_command(argv, processes)}"
        )
    return (
        f"tinybert pretrain: interrupted {where}. Continue the run with:\n"
        f"  {_command(_resumed(argv), processes)}"
    )


# the library's words for this command's run controls, and the options that set them
_CONTROLS = {
    "resume=True": "--resume",
    "resume=False": "without --resume",
    "overwrite=True": "--overwrite",
}


def _in_options(message: str) -> str:
    """A library error told in this command's options (the library knows none)."""
    for words, option in _CONTROLS.items():
        message = message.replace(words, option)
    return message


def run(args: argparse.Namespace) -> int:
    import torch

    from tinybert.pretraining.distributed import init_distributed
    from tinybert.pretraining.run import pretrain_bert
    from tinybert.pretraining.settings import SettingError
    from tinybert.runtime import fix_malloc_threshold

    try:  # the recipe checks itself, before anything else happens
        recipe = recipe_from_args(args)
    except ValueError as error:
        print(f"tinybert pretrain: error: {error}", file=sys.stderr)
        return 2

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
    before = _run_files(args.out) if args.overwrite and dist.is_main else None
    start = time.perf_counter()
    try:
        history = pretrain_bert(
            args.out,
            recipe,
            resume=args.resume,
            overwrite=args.overwrite,
            stop_after=args.stop_after,
            device=device,
            dist=dist,
        )
    except SettingError as error:  # named by its field: say its option
        print(
            f"tinybert pretrain: error: {flag(error.name)}: {error.message}",
            file=sys.stderr,
        )
        return 2
    except (ValueError, OSError) as error:  # arguments, folder, data
        print(f"tinybert pretrain: error: {_in_options(str(error))}", file=sys.stderr)
        return 2
    except FloatingPointError as error:  # diverged: the last checkpoint is kept
        print(f"tinybert pretrain: error: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as interrupt:  # Ctrl-C: a checkpoint at the last step
        if dist.is_main:
            print(
                _interrupted(interrupt, args.out, argv, dist.world_size, before),
                file=sys.stderr,
            )
        return 130  # 128 + SIGINT, as the shell reports it
    if dist.is_main:
        final = history["eval"][-1] if history["eval"] else {}
        stopped = args.stop_after is not None and args.stop_after < args.steps
        print(
            (
                f"stopped after step {args.stop_after} of {args.steps} "
                if stopped
                else "done "
            )
            + f"in {time.perf_counter() - start:.0f} s wall clock; "
            + ", ".join(
                f"held-out {k} {v:.4f}"
                for k, v in final.items()
                if isinstance(v, float)
            )
        )
        if stopped:
            again = _resumed(argv, keep_stop_after=False)
            print(
                "the run is not finished (no model.safetensors yet); continue it "
                f"with:\n  {_command(again, dist.world_size)}"
            )
    return 0
