"""Hand-written: how the experiment scripts keep their results. The JSON file is
rewritten after every run, atomically, so that an interrupted sweep keeps all it
measured and never leaves a half-written file."""

from __future__ import annotations

import json
from pathlib import Path


def record(results: dict, out: Path, line: str) -> None:
    """Append ``line`` to ``results["log"]``, print it, and write ``results`` to
    ``out`` (a temporary file beside it, then one rename)."""
    results["log"].append(line)
    print(line, flush=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(results, indent=1) + "\n")
    tmp.replace(out)
