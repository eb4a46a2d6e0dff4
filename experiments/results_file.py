"""Hand-written: how the experiment scripts keep their results. The JSON file is
rewritten after every run, atomically, so that an interrupted sweep keeps all it
measured and never leaves a half-written file."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from tinybert.checkpoint.atomic import write_atomically


def record(results: dict, out: Path, line: str) -> None:
    """Append ``line`` to ``results["log"]``, print it, and write ``results`` to
    ``out`` (a temporary file beside it, then one rename)."""
    results["log"].append(line)
    print(line, flush=True)
    write_json(out, results)


def write_json(out: Path, data: dict) -> None:
    """Write ``data`` to ``out`` as indented JSON, atomically (a temporary file beside
    it, then one rename)."""
    text = json.dumps(data, indent=1) + "\n"
    write_atomically(out, lambda temporary: Path(temporary).write_text(text, "utf-8"))


def sweep_arguments(doc: str, argv: list[str] | None = None) -> argparse.Namespace:
    """The options of a learning-rate sweep (the first paragraph of ``doc`` is its
    description): --out, a JSON file that must not exist yet; --arms, default every
    arm; --seed; --threads."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument(
        "--out", required=True, type=Path, help="JSON file to write (must not exist)"
    )
    parser.add_argument("--arms", nargs="+", default=None, help="default: every arm")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args(argv)
    if args.out.exists():
        parser.error(f"--out {args.out} exists; choose a new file")
    return args
