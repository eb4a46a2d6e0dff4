"""Hand-written: execute a chapter's py:percent twin cell by cell, as a notebook kernel
would, with nothing but Python (no Jupyter, nbclient or jupytext: the lent GPU
machine has none).

    python benchmarks/run_chapter.py chapters/03_attention.py

A plain ``python chapters/NN_name.py`` does not work for every chapter: each exported
cell starts with ``from __future__ import annotations``, which Python accepts only at
the top of a file. Here every code cell is compiled on its own, by one
``codeop.Compile`` that keeps the ``__future__`` flags between cells the way IPython
does, and executed in one namespace (``__name__ == "__main__"``). Line numbers in
tracebacks are those of the .py file.

Before each cell it writes ``#cell K/N line L`` on stderr, and at the end one line
``#run_chapter {json}`` with ``cells``, ``ran`` and, when a cell raised,
``failed_cell``, ``line`` and ``error``; the exit status is 0 only when every cell ran.
Markdown and raw cells are skipped.
"""

from __future__ import annotations

import codeop
import json
import re
import sys
import traceback
from pathlib import Path

HEADER = re.compile(r"^# %%(?P<rest>.*)$")


def code_cells(path: Path) -> list[tuple[int, str]]:
    """(first line number, source) of every code cell of a py:percent file."""
    lines = path.read_text(encoding="utf-8").splitlines()
    cells, current, start, is_code = [], [], 0, False

    def close():
        if is_code and "".join(current).strip():
            cells.append((start, "\n".join(current) + "\n"))

    for number, line in enumerate(lines, start=1):
        match = HEADER.match(line)
        if match:
            close()
            rest = match.group("rest").strip()
            is_code = not rest.startswith(("[markdown]", "[md]", "[raw]"))
            current, start = [], number + 1
        else:
            current.append(line)
    close()
    return cells


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    path = Path(argv[0]).resolve()
    cells = code_cells(path)
    sys.argv = [str(path)]
    compiler = codeop.Compile()
    namespace = {"__name__": "__main__", "__builtins__": __builtins__}
    summary: dict = {"cells": len(cells), "ran": 0}
    for index, (start, source) in enumerate(cells, start=1):
        print(f"#cell {index}/{len(cells)} line {start}", file=sys.stderr, flush=True)
        try:
            # padded so that tracebacks give the line numbers of the .py file
            code = compiler("\n" * (start - 1) + source, str(path), "exec")
            exec(code, namespace)
        # reported, then the exit status says it
        except BaseException as error:  # noqa: BLE001
            traceback.print_exc()
            line = next(
                (
                    f.lineno
                    for f in reversed(traceback.extract_tb(error.__traceback__))
                    if f.filename == str(path)
                ),
                start,
            )
            summary.update(
                failed_cell=index,
                line=line,
                error=f"{type(error).__name__}: {error}"[:2000],
            )
            break
        summary["ran"] = index
        sys.stdout.flush()
    print("#run_chapter " + json.dumps(summary), file=sys.stderr, flush=True)
    return 0 if summary["ran"] == len(cells) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
