"""Hand-written: the options of ``tinybert pretrain`` (chapter 09), made from the fields
of ``tinybert.pretraining.recipe.PretrainingRecipe``, and the recipe they give.

``tinybert.commands.pretrain`` re-exports ``add_arguments``; its ``run`` calls
``pretrain_bert`` with ``recipe_from_args(args)``. No option is written here twice: a
new field of the recipe is a new option, with its type, default and help.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import typing
from dataclasses import MISSING


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


# A recipe field's option is its name with dashes; these are spelled otherwise (the
# first spelling is the one messages use). The shipped checkpoint's command line
# (tinybert/shipped/bert-mini/train.log) uses --set, --warmup and --mask-probability.
SPELLINGS = {
    "overrides": ("--set",),
    "warmup_fraction": ("--warmup-fraction", "--warmup"),
    "mlm_probability": ("--mlm-probability", "--mask-probability"),
    "stop_after": ("--stop-after",),
}


def flag(name: str) -> str:
    """The option that sets the recipe field (or run control) ``name``."""
    return SPELLINGS.get(name, ("--" + name.replace("_", "-"),))[0]


def _number(kind: type):
    """An argparse type: an int or a float, with a message that says which."""

    def parse(text: str):
        try:
            return kind(text)
        except ValueError:
            what = "an integer" if kind is int else "a number"
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None

    parse.__name__ = kind.__name__
    return parse


def _recipe_class():
    from tinybert.pretraining.recipe import PretrainingRecipe

    return PretrainingRecipe


def _add_setting(parser: argparse.ArgumentParser, field, kind) -> None:
    """One option made from one field of the recipe: its name, type, default, help."""
    text = field.metadata.get("help", "")
    default = field.default if field.default_factory is MISSING else None
    names = SPELLINGS.get(field.name, (flag(field.name),))
    if kind is bool:
        parser.add_argument(
            *names,
            action=argparse.BooleanOptionalAction,
            default=default,
            help=f"{text} (default: %(default)s)",
        )
    elif kind is dict:  # KEY=VALUE, repeatable
        parser.add_argument(
            *names,
            dest=field.name,
            action="append",
            type=_override,
            default=[],
            metavar="KEY=VALUE",
            help=f"{text} (repeatable)",
        )
    else:
        value_type = {int: _number(int), float: _number(float), str: str}[kind]
        parser.add_argument(
            *names,
            dest=field.name,
            type=value_type,
            default=default,
            choices=field.metadata.get("choices"),
            metavar=None if field.metadata.get("choices") else field.name.upper(),
            help=f"{text} (default: %(default)s)",
        )


def _field_kind(annotation) -> type:
    """int, float, str, bool or dict: the type an option parses (None allowed too)."""
    kinds = [a for a in typing.get_args(annotation) if a is not type(None)]
    return kinds[0] if kinds else annotation


def add_arguments(parser: argparse.ArgumentParser, recipe_class=None) -> None:
    """The options of ``tinybert pretrain``: the run's folder and its controls, then one
    option per field of the recipe (PretrainingRecipe), made from the field."""
    recipe_class = recipe_class or _recipe_class()
    parser.add_argument(
        "--out",
        required=True,
        type=_folder,
        help="output folder: vocab.txt, model.safetensors, "
        "config.json, metrics.json, loss_curves.png, training_state/",
    )
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
    group = parser.add_argument_group(
        "the recipe", "what the run learns; saved whole with the run"
    )
    hints = typing.get_type_hints(recipe_class)
    for field in dataclasses.fields(recipe_class):
        _add_setting(group, field, _field_kind(hints[field.name]))


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


def recipe_from_args(args: argparse.Namespace, recipe_class=None):
    """The recipe the parsed command line asks for, checked (its __post_init__). A
    setting it refuses raises ValueError naming the option."""
    from tinybert.pretraining.pretrain_loop import SettingError

    recipe_class = recipe_class or _recipe_class()
    values = {f.name: getattr(args, f.name) for f in dataclasses.fields(recipe_class)}
    for name, value in values.items():
        if isinstance(value, list):  # KEY=VALUE pairs
            values[name] = dict(value)
    try:
        return recipe_class(**values)
    except SettingError as error:
        raise ValueError(f"{flag(error.name)}: {error.message}") from None
