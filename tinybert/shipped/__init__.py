"""Hand-written module: the files that ship inside the package.

A student on Colab has a pip-installed wheel and no checkout, so everything a chapter
reads at run time travels inside the package, never beside it:

- ``bert-mini/``: the course checkpoint of chapter 09 (weights, config, vocabulary,
  metrics), with the README, log and curves that say how it was made;
- ``results/``: the committed results that chapters show, written by the scripts in the
  repository's ``experiments/`` folder (each file records the command that made it).

They are package data: in the wheel and in site-packages after ``pip install``, and in
this folder of the source tree for an editable install.
"""

from __future__ import annotations

import json
from pathlib import Path

__all__ = ["SHIPPED", "shipped_path", "load_result", "RESULTS"]

SHIPPED = Path(__file__).resolve().parent
# the results that chapters read, and the script in experiments/ that wrote each
RESULTS = {
    "recipe_ablation": "experiments/recipe_ablation.py (chapter 09)",
    "transfer_sweep": "experiments/transfer_sweep.py (chapters 10 and 11)",
    "ner_sweep": "experiments/ner_sweep.py (chapter 11)",
    "pair_sweep": "experiments/pair_sweep.py (chapter 11)",
    "unseen_sweep": "experiments/unseen_task.py, via experiments/ship_unseen.py "
    "(chapter 11)",
    "electra_sweep": "experiments/electra_budget.py (chapter 16)",
    "electra_full": "experiments/ship_electra_full.py, from electra_full.py, "
    "electra_transfer.py and electra_budget.py (chapter 16)",
}


def shipped_path(*parts: str) -> Path:
    """The path of a shipped file or folder: ``shipped_path("bert-mini", "vocab.txt")``.
    Raises FileNotFoundError naming what is missing and how to get it."""
    path = SHIPPED.joinpath(*parts)
    if not path.exists():
        raise FileNotFoundError(
            f"{path}: not in this installation of tinybert. The course's checkpoint "
            f"and results ship inside the package; reinstall it from the course "
            f"repository (pip install 'tinybert @ git+<repository>@<commit>') or run "
            f"`pip install -e .` in a checkout"
        )
    return path


def load_result(name: str) -> dict:
    """The committed result ``name`` (a key of RESULTS), read from
    ``results/<name>.json``."""
    if name not in RESULTS:
        raise ValueError(
            f"load_result: unknown result {name!r}; shipped: {list(RESULTS)}"
        )
    path = shipped_path("results", f"{name}.json")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except ValueError as error:
        raise ValueError(
            f"{path}: corrupt ({error}); it was written by {RESULTS[name]}"
        ) from error
