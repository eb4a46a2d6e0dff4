"""Hand-written (not generated): ``tinybert finetune TASK`` — fine-tune a pretrained
BERT on one task.

A thin wrapper around ``tinybert.finetuning.recipes.finetune_task`` (chapter 10): it
loads the pretrained encoder, optionally swaps in a randomly initialised encoder of the
same architecture, fine-tunes a new head and prints the evaluation metrics. The encoder
comes from the course's own checkpoint (chapter 09's ``load_pretrained``, the default,
or ``--checkpoint DIR``) or, with ``--from-hf``, from any Hugging Face BERT: a local
folder is read by chapter 08's ``load_hf_bert`` (no ``transformers`` needed), a hub name
such as ``google/bert_uncased_L-4_H-256_A-4`` through ``transformers`` and ``from_hf``
(online, once: Hugging Face caches the files).
"""

from __future__ import annotations

import argparse

from tinybert.commands.finetune_encoders import encoder_of, load_hf


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text}")
    return value


# (option, type, default, help) of the options that take one value with a default;
# argparse writes the default into the help
_SETTINGS = (
    ("--epochs", _positive_int, 3, "passes over the training examples"),
    ("--lr", float, 1e-4, "peak learning rate"),
    ("--batch-size", _positive_int, 32, "examples per step"),
    ("--seed", int, 0, "random seed"),
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from tinybert.finetuning.recipes import TASKS
    from tinybert.runtime import is_quick

    # a bad TINYBERT_QUICK raises ValueError here, which `tinybert` reports as a message
    is_quick()

    parser.add_argument("task", choices=TASKS, help="the task to fine-tune on")
    parser.add_argument(
        "--checkpoint",
        default=None,
        metavar="DIR",
        help=(
            "pretrained checkpoint folder (default: the shipped checkpoints/bert-mini)"
        ),
    )
    parser.add_argument(
        "--from-hf",
        default=None,
        metavar="NAME_OR_DIR",
        help="start from a Hugging Face BERT instead: a local folder "
        "(config.json, model.safetensors, vocab.txt; no "
        "transformers needed) or a hub name such as "
        "google/bert_uncased_L-4_H-256_A-4 (needs transformers "
        "and, the first time, a network)",
    )
    parser.add_argument(
        "--random-init",
        action="store_true",
        help=(
            "start from random weights of the same architecture (the "
            "no-pretraining baseline)"
        ),
    )
    for flag, kind, default, text in _SETTINGS:
        parser.add_argument(
            flag, type=kind, default=default, help=f"{text} (default: %(default)s)"
        )
    for flag, verb, split in (
        ("--train-examples", "train", "training"),
        ("--eval-examples", "evaluate", "evaluation"),
    ):
        parser.add_argument(
            flag,
            type=_positive_int,
            default=None,
            metavar="N",
            help=f"{verb} on N examples spread evenly over the {split} set "
            "(default: all)",
        )
    parser.add_argument(
        "--trainable-layers",
        type=int,
        default=None,
        metavar="K",
        help="update only the top K encoder layers and the head; 0 = "
        "the head alone (default: update everything)",
    )
    parser.add_argument(
        "--test",
        action="store_true",
        help=("evaluate on the test split instead of the validation split"),
    )
    parser.add_argument(
        "--pooling",
        choices=("mean", "pooler"),
        default="mean",
        help="sentence summary for banking77/poem_sentiment: the mean "
        "of the final vectors (default; the shipped checkpoint "
        "learned MLM alone) or the pooled [CLS] vector, which "
        "only NSP trains",
    )


def run(args: argparse.Namespace) -> int:
    from tinybert.models.bert import BertModel
    from tinybert.checkpoint.pretrained import load_pretrained
    from tinybert.finetuning.recipes import finetune_task
    from tinybert.runtime import fix_malloc_threshold, get_device, seed_everything

    fix_malloc_threshold()
    if args.from_hf is not None and args.checkpoint is not None:
        print(
            "tinybert finetune: --from-hf and --checkpoint both name the encoder to "
            "start from; give one of them"
        )
        return 1
    try:
        if args.from_hf is not None:
            encoder, tokenizer, source = load_hf(args.from_hf)
        else:
            pretrained = load_pretrained(args.checkpoint, train_if_missing=False)
            encoder, tokenizer = encoder_of(pretrained.model), pretrained.tokenizer
            source = f"the checkpoint in {pretrained.directory}"
    except (FileNotFoundError, ValueError) as error:
        print(f"tinybert finetune: {error}")
        return 1
    seed_everything(args.seed)
    if args.random_init:  # same architecture, random weights
        encoder = BertModel(encoder.config, add_pooler=encoder.pooler is not None)
        source = f"random initialisation (the architecture of {source})"
    encoder = encoder.to(get_device())
    print(f"fine-tuning on {args.task} from {source}")
    try:
        outcome = finetune_task(
            args.task,
            encoder,
            tokenizer,
            train_examples=args.train_examples,
            eval_examples=args.eval_examples,
            eval_split="test" if args.test else "validation",
            epochs=args.epochs,
            lr=args.lr,
            batch_size=args.batch_size,
            trainable_layers=args.trainable_layers,
            seed=args.seed,
            pooling=args.pooling,
            desc=args.task,
        )
    # e.g. --trainable-layers out of range
    except ValueError as error:
        print(f"tinybert finetune: {error}")
        return 2
    result = outcome.result
    print(
        f"trained {result.trainable_parameters:,} parameters for "
        f"{len(result.losses)} steps in {result.seconds:.1f} s; final training loss "
        f"{result.losses[-1]:.3f}"
    )
    split = "test" if args.test else "validation"
    print(
        f"{split}: "
        + ", ".join(f"{name} {value:.4g}" for name, value in outcome.metrics.items())
    )
    return 0
