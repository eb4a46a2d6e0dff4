"""Hand-written: the ``tinybert`` command line (``python -m tinybert COMMAND``).

Each command is a hand-written module under tinybert/commands/ with
``add_arguments(parser)`` and ``run(args) -> int``. Only the chosen command's module is
imported, so that ``tinybert doctor`` works even when the heavier parts of the package
cannot be imported, and ``tinybert --help`` imports none of them.
"""

from __future__ import annotations

import argparse
import sys
from importlib import import_module

COMMANDS = {  # name -> (module, one line of help)
    "doctor": (
        "tinybert.commands.doctor",
        "report the set-up: versions, device, quick mode, data",
    ),
    "pretrain": (
        "tinybert.commands.pretrain",
        "pretrain a BERT with MLM + NSP (chapter 09)",
    ),
    "finetune": (
        "tinybert.commands.finetune",
        "fine-tune a pretrained encoder on a task (chapter 10)",
    ),
}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # allow_abbrev=False: --over is not --overwrite (a prefix must not delete a run)
    parser = argparse.ArgumentParser(
        prog="tinybert",
        description="tinybert: the course's command line",
        allow_abbrev=False,
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="command")
    # the command is the first word that is not an option
    chosen = next((word for word in argv if not word.startswith("-")), None)
    module = None
    for name, (module_name, help_text) in COMMANDS.items():
        command = sub.add_parser(
            name, help=help_text, description=help_text, allow_abbrev=False
        )
        if name != chosen:
            continue
        try:
            module = import_module(module_name)
            module.add_arguments(command)
        except ValueError as error:  # e.g. TINYBERT_QUICK=maybe, read for the defaults
            print(
                f"tinybert {name}: error: {error} "
                "(`tinybert doctor` checks the set-up)",
                file=sys.stderr,
            )
            return 2
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    args.argv = argv  # as typed, for messages
    return module.run(args)


if __name__ == "__main__":
    sys.exit(main())
