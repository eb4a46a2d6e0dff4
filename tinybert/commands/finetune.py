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

Every option that is a keyword of ``finetune_task`` takes its default from that
function's signature, so that the command and a call from Python give the same model.
"""

from __future__ import annotations

import argparse
import inspect
import math
import sys

from tinybert.commands.finetune_encoders import encoder_of, load_hf
from tinybert.commands.pretrain_arguments import add_count, at_least, seed_number

# the tasks with one label per sentence, which --pooling applies to
SENTENCE_TASKS = ("banking77", "poem_sentiment")


def _learning_rate(text: str) -> float:
    """An argparse type: a positive, finite number."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(
            f"expected a positive finite number, got {text!r}"
        )
    return value


# (option, type, help) of the options that take one value, each the finetune_task
# keyword of the same name, whose default argparse writes into the help
_SETTINGS = (
    ("--epochs", at_least(1), "passes over the training examples"),
    ("--lr", _learning_rate, "peak learning rate"),
    ("--batch-size", at_least(1), "examples per step"),
    ("--seed", seed_number, "random seed"),
)


def library_defaults() -> dict[str, object]:
    """finetune_task's keywords and their defaults: the defaults of this command."""
    from tinybert.finetuning.recipes import finetune_task

    parameters = inspect.signature(finetune_task).parameters.values()
    return {p.name: p.default for p in parameters if p.kind is p.KEYWORD_ONLY}


def _keyword(flag: str) -> str:
    """The finetune_task keyword of an option: "--batch-size" -> "batch_size"."""
    return flag.removeprefix("--").replace("-", "_")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from tinybert.finetuning.recipes import TASKS
    from tinybert.runtime import is_quick

    # a bad TINYBERT_QUICK raises ValueError here, which `tinybert` reports as a message
    is_quick()
    defaults = library_defaults()

    parser.add_argument("task", choices=TASKS, help="the task to fine-tune on")
    parser.add_argument(
        "--checkpoint",
        default=None,
        metavar="DIR",
        help=(
            "pretrained checkpoint folder (default: the course checkpoint, bert-mini)"
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
    for flag, kind, text in _SETTINGS:
        parser.add_argument(
            flag,
            type=kind,
            default=defaults[_keyword(flag)],
            help=f"{text} (default: %(default)s)",
        )
    for flag, verb, split in (
        ("--train-examples", "train", "training"),
        ("--eval-examples", "evaluate", "evaluation"),
    ):
        text = (
            f"{verb} on N examples spread evenly over the {split} set, at most all "
            "of them (default: all)"
        )
        add_count(parser, flag, 1, text, defaults[_keyword(flag)], metavar="N")
    add_count(
        parser,
        "--trainable-layers",
        0,
        "update only the top K encoder layers and the head; 0 = the head alone "
        "(default: update everything)",
        defaults["trainable_layers"],
        metavar="K",
    )
    parser.add_argument(
        "--test",
        action="store_true",
        help="evaluate on the test split instead of the validation split "
        "(not squad, whose one evaluation set is its validation split)",
    )
    # None when not given: the library's default then, and no error for the tasks
    # without a sentence label, which refuse --pooling (_usage_problem)
    parser.add_argument(
        "--pooling",
        choices=("mean", "pooler"),
        default=None,
        help="sentence summary for banking77/poem_sentiment only: the pooled [CLS] "
        "vector, which only NSP pretrains, or the mean of the final vectors, the "
        "better start for the shipped checkpoint, which learned MLM alone "
        f"(default: {defaults['pooling']})",
    )


def _error(message: str, code: int = 2) -> int:
    """Report an error as ``tinybert pretrain`` does: on stderr, exit code 2 for
    arguments, folders and data, 1 for a run that diverged."""
    print(f"tinybert finetune: error: {message}", file=sys.stderr)
    return code


def _usage_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with a combination of options, or None."""
    if args.from_hf is not None and args.checkpoint is not None:
        return (
            "--from-hf and --checkpoint both name the encoder to start from; give "
            "one of them"
        )
    if args.pooling is not None and args.task not in SENTENCE_TASKS:
        return (
            f"--pooling applies to {' and '.join(SENTENCE_TASKS)}, not "
            f"{args.task}; leave it out"
        )
    if args.test and args.task == "squad":
        return (
            "--test: squad has no separate test split (its one evaluation set, "
            "articles held out of SQuAD's training set, is the validation split); "
            "leave it out"
        )
    return None


def run(args: argparse.Namespace) -> int:
    from tinybert.models.bert import BertModel
    from tinybert.models.course_checkpoint import load_pretrained
    from tinybert.finetuning.recipes import finetune_task
    from tinybert.runtime import fix_malloc_threshold, get_device, seed_everything

    fix_malloc_threshold()
    problem = _usage_problem(args)
    if problem is not None:
        return _error(problem)
    try:
        if args.from_hf is not None:
            encoder, tokenizer, source = load_hf(args.from_hf)
        else:
            pretrained = load_pretrained(args.checkpoint)
            encoder, tokenizer = encoder_of(pretrained.model), pretrained.tokenizer
            source = f"the checkpoint in {pretrained.directory}"
    except (OSError, ValueError) as error:  # no such encoder
        return _error(str(error))
    layers = getattr(getattr(encoder, "encoder", None), "layers", None)
    if args.trainable_layers is not None and layers is not None:
        if args.trainable_layers > len(layers):
            return _error(
                f"--trainable-layers: expected 0..{len(layers)}, the layers of "
                f"the encoder; got {args.trainable_layers}"
            )
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
            pooling=args.pooling or library_defaults()["pooling"],
            desc=args.task,
        )
    # data that cannot be read, more examples than a split holds
    except (OSError, ValueError) as error:  # the library names its arguments
        message = str(error)
        for name in ("train_examples", "eval_examples"):
            message = message.replace(f"{name}:", f"--{name.replace('_', '-')}:")
        return _error(message)
    except FloatingPointError as error:  # diverged: nothing to report but that
        return _error(str(error), code=1)
    except KeyboardInterrupt:  # Ctrl-C: nothing was saved, so nothing is lost
        print(
            f"tinybert finetune: interrupted; {args.task} was not finished and "
            "nothing was written. Run the same command again to start over.",
            file=sys.stderr,
        )
        return 130
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
