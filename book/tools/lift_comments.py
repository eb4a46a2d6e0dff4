"""Hand-written: after `ruff format`, a comment left after a statement's closing bracket
(`)  # (B, T, D)`) goes on its own line above the statement (part of `make format`).

Usage: python -m book.tools.lift_comments FILES_OR_DIRS...
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

CLOSE = re.compile(r"^(\s*)([)\]}]+,?)\s+(#.*)$")


def lift(lines: list[str]) -> int:
    """Move each such comment above its statement, in place; how many moved."""
    i, moved = 0, 0
    while i < len(lines):
        found = CLOSE.match(lines[i])
        if found and "noqa" not in found.group(3):
            indent = found.group(1)
            j = i - 1                   # the statement starts on the line with its indent
            while j >= 0 and not (lines[j].startswith(indent) and lines[j].strip()
                                  and not lines[j][len(indent):][:1].isspace()):
                j -= 1
            if j >= 0:
                lines[i] = indent + found.group(2)
                lines.insert(j, indent + found.group(3))
                moved += 1
                i += 1
        i += 1
    return moved


def main(argv: list[str]) -> int:
    total = 0
    for name in argv:
        paths = [Path(name)] if name.endswith(".py") else sorted(Path(name).rglob("*.py"))
        for path in paths:
            lines = path.read_text(encoding="utf-8").split("\n")
            moved = lift(lines)
            if moved:
                path.write_text("\n".join(lines), encoding="utf-8")
                total += moved
    print(f"{total} comments lifted")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
