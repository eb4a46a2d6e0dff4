"""Hand-written (not generated): ``tinybert finetune TASK`` — fine-tune a pretrained BERT on one task.

A thin wrapper around ``tinybert.recipes.finetune_task`` (chapter 10): it loads the pretrained
checkpoint (chapter 09's ``load_pretrained``), optionally swaps in a randomly initialised encoder
of the same architecture, fine-tunes a new head and prints the evaluation metrics.
"""
from __future__ import annotations

import argparse


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from tinybert.recipes import TASKS

    parser.add_argument("task", choices=TASKS, help="the task to fine-tune on")
    parser.add_argument("--checkpoint", default=None, metavar="DIR",
                        help="pretrained checkpoint folder (default: the shipped checkpoints/bert-mini)")
    parser.add_argument("--random-init", action="store_true",
                        help="start from random weights of the same architecture (the no-pretraining baseline)")
    parser.add_argument("--epochs", type=_positive_int, default=3, help="passes over the training examples (default 3)")
    parser.add_argument("--lr", type=float, default=1e-4, help="peak learning rate (default 1e-4)")
    parser.add_argument("--batch-size", type=_positive_int, default=32, help="examples per step (default 32)")
    parser.add_argument("--train-examples", type=_positive_int, default=None, metavar="N",
                        help="train on N examples spread evenly over the training set (default: all)")
    parser.add_argument("--eval-examples", type=_positive_int, default=None, metavar="N",
                        help="evaluate on N examples spread evenly over the evaluation set (default: all)")
    parser.add_argument("--trainable-layers", type=int, default=None, metavar="K",
                        help="update only the top K encoder layers and the head; 0 = the head alone "
                             "(default: update everything)")
    parser.add_argument("--test", action="store_true",
                        help="evaluate on the test split instead of the validation split")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")


def run(args: argparse.Namespace) -> int:
    from tinybert.models.bert import BertModel
    from tinybert.pretraining import load_pretrained
    from tinybert.recipes import finetune_task
    from tinybert.runtime import get_device, seed_everything

    try:
        pretrained = load_pretrained(args.checkpoint, train_if_missing=False)
    except (FileNotFoundError, ValueError) as error:
        print(f"tinybert finetune: {error}")
        return 1
    seed_everything(args.seed)
    encoder = BertModel(pretrained.config) if args.random_init else pretrained.model.bert
    encoder = encoder.to(get_device())
    start = "random initialisation" if args.random_init else f"the checkpoint in {pretrained.directory}"
    print(f"fine-tuning on {args.task} from {start}")
    try:
        outcome = finetune_task(args.task, encoder, pretrained.tokenizer, train_examples=args.train_examples,
                                eval_examples=args.eval_examples, eval_split="test" if args.test else "validation",
                                epochs=args.epochs, lr=args.lr, batch_size=args.batch_size,
                                trainable_layers=args.trainable_layers, seed=args.seed, desc=args.task)
    except ValueError as error:                      # e.g. --trainable-layers out of range
        print(f"tinybert finetune: {error}")
        return 2
    result = outcome.result
    print(f"trained {result.trainable_parameters:,} parameters for {len(result.losses)} steps in "
          f"{result.seconds:.1f} s; final training loss {result.losses[-1]:.3f}")
    split = "test" if args.test else "validation"
    print(f"{split}: " + ", ".join(f"{name} {value:.4g}" for name, value in outcome.metrics.items()))
    return 0
