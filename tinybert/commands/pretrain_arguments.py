"""Hand-written: the options of ``tinybert pretrain`` (chapter 09) and the keyword
arguments of ``tinybert.pretraining.run.pretrain_bert`` that they give.

``tinybert.commands.pretrain`` re-exports ``add_arguments``; its ``run`` calls
``pretrain_bert`` with ``pretrain_bert_arguments(args)``.
"""

from __future__ import annotations

import argparse
import json


def _override(text: str) -> tuple[str, object]:
    """KEY=VALUE with VALUE read as JSON when it can be (numbers, true/false), else as
    a string."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(
            f"expected KEY=VALUE (e.g. n_layers=2), got {text!r}"
        )
    try:
        return key, json.loads(value)
    except json.JSONDecodeError:
        return key, value


def at_least(minimum: int):
    """An argparse type: an integer >= ``minimum``, else a usage error."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected an integer, got {text!r}"
            ) from None
        if value < minimum:
            raise argparse.ArgumentTypeError(
                f"expected an integer >= {minimum}, got {value}"
            )
        return value

    parse.__name__ = "positive int" if minimum == 1 else f"int >= {minimum}"
    return parse


def add_count(
    parser: argparse.ArgumentParser,
    flag: str,
    minimum: int,
    text: str,
    default: int | None = None,
    metavar: str | None = None,
) -> None:
    """Add the option ``flag``, an integer >= ``minimum``, with the help ``text``."""
    kind = at_least(minimum)
    parser.add_argument(flag, type=kind, default=default, metavar=metavar, help=text)


def seed_number(text: str) -> int:
    """An argparse type: a seed, an integer from 0 to 2**64 - 1 (what torch takes)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if not 0 <= value < 2**64:
        raise argparse.ArgumentTypeError(
            f"expected an integer from 0 to 2**64 - 1, got {value}"
        )
    return value


def _folder(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError(
            "expected the folder to write the run to, got ''"
        )
    return text


# (option, type, default, help) of the options that take one value with a default;
# argparse writes the default into the help
_SETTINGS = (
    ("--steps", at_least(1), 1000, "optimizer steps in the whole run"),
    ("--batch-size", at_least(1), 32, "sequences per step and process"),
    ("--lr", float, 1e-3, "peak learning rate"),
    ("--warmup", float, 0.05, "fraction of steps to warm up"),
    ("--vocab-size", at_least(1), 8192, "WordPiece vocabulary size"),
    ("--vocab-min-count", at_least(1), 40, "a pair must occur this often to be merged"),
    ("--eval-every", at_least(1), 100, "held-out evaluation every N steps"),
    ("--eval-batches", at_least(1), 25, "held-out batches per evaluation"),
    ("--seed", seed_number, 0, "random seed"),
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--out",
        required=True,
        type=_folder,
        help="output folder: vocab.txt, model.safetensors, "
        "config.json, metrics.json, loss_curves.png, training_state/",
    )
    parser.add_argument(
        "--preset", default="bert-mini", help="BertConfig preset (default: bert-mini)"
    )
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        type=_override,
        default=[],
        metavar="KEY=VALUE",
        help=("override a BertConfig field, e.g. --set n_layers=2 (repeatable)"),
    )
    for flag, kind, default, text in _SETTINGS:
        parser.add_argument(
            flag, type=kind, default=default, help=f"{text} (default: %(default)s)"
        )
    add_count(
        parser,
        "--checkpoint-every",
        0,
        "save a resumable checkpoint every N steps (0: only at the end)",
        default=0,
    )
    parser.add_argument(
        "--vocab-score",
        choices=("count", "likelihood"),
        default="count",
        help="merge the most frequent pair (count, as Hugging Face's "
        "trainer does) or the most associated one (likelihood, "
        "the Hugging Face course's ratio of chapter 7); default: count",
    )
    parser.add_argument(
        "--static-masking",
        action="store_true",
        help="mask each example once (BERT) "
        "instead of per batch (RoBERTa's dynamic masking, the default)",
    )
    parser.add_argument(
        "--objective",
        choices=("mlm+nsp", "mlm"),
        default="mlm+nsp",
        help="mlm+nsp: BERT's pairs and both losses (default); mlm: "
        "single segments and the MLM loss alone (RoBERTa)",
    )
    parser.add_argument(
        "--mask-probability",
        type=float,
        default=0.15,
        help="share of tokens chosen for the MLM loss in training "
        "(default: 0.15; held-out evaluation always uses 0.15)",
    )
    parser.add_argument(
        "--adam-beta2",
        type=float,
        default=0.999,
        help="AdamW's beta2 (default: 0.999 as in BERT; RoBERTa: 0.98)",
    )
    parser.add_argument(
        "--task-text",
        action="store_true",
        help=("add the unlabelled training text of chapter 10's tasks to the corpus"),
    )
    add_count(parser, "--max-documents", 1, "use only the first N documents (tests)")
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue the run in OUT (from OUT/training_state/)",
    )
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="delete the run already in OUT (its files only) and "
        "start again; without --resume or --overwrite, an OUT that "
        "holds a run is refused",
    )
    add_count(
        parser,
        "--stop-after",
        1,
        "save and stop after this step (at most --steps); --resume continues later",
        metavar="STEP",
    )
    parser.add_argument(
        "--device",
        default=None,
        help=("cpu, cuda, cuda:1, mps (default: the best available)"),
    )
    parser.add_argument(
        "--threads",
        type=thread_count,
        default=None,
        help="torch CPU threads (torch.set_num_threads), at most the machine's cores",
    )


def thread_count(text: str) -> int:
    """An argparse type: a number of CPU threads, from 1 to the cores this process may
    use (more only slows a run down, and a huge number crashed torch)."""
    import os

    value = at_least(1)(text)
    cores = (
        len(os.sched_getaffinity(0))
        if hasattr(os, "sched_getaffinity")
        else os.cpu_count() or 1
    )
    if value > cores:
        raise argparse.ArgumentTypeError(
            f"expected at most {cores} (the CPU cores this process may use), "
            f"got {value}"
        )
    return value


def pretrain_bert_arguments(args: argparse.Namespace) -> dict:
    """``pretrain_bert``'s keyword arguments, read from the parsed command line in
    one place: all of them but ``device`` and ``dist``, which depend on the processes
    the run is launched with."""
    return dict(
        preset=args.preset,
        overrides=dict(args.overrides),
        steps=args.steps,
        batch_size=args.batch_size,
        lr=args.lr,
        warmup_fraction=args.warmup,
        vocab_size=args.vocab_size,
        vocab_min_count=args.vocab_min_count,
        vocab_score=args.vocab_score,
        eval_every=args.eval_every,
        eval_batches=args.eval_batches,
        checkpoint_every=args.checkpoint_every,
        seed=args.seed,
        max_documents=args.max_documents,
        dynamic_masking=not args.static_masking,
        resume=args.resume,
        stop_after=args.stop_after,
        objective=args.objective,
        mlm_probability=args.mask_probability,
        adam_beta2=args.adam_beta2,
        task_text=args.task_text,
        overwrite=args.overwrite,
    )
