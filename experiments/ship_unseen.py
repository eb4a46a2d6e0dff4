"""Hand-written: the validation sweeps of the two unseen-text tasks, shipped for
chapter 11.

Chapter 11 runs Sentence Polarity and authorship on the test split with each arm's
learning rate, and a sweep over rates costs more than the chapter's time budget. The
sweeps ran once, inside the recorded runs of ``experiments/unseen_task.py`` (each file
holds its command and log); this script copies their validation scores and settings
into ``tinybert/shipped/results/unseen_sweep.json``, where the chapter reads them
(``tinybert.shipped.load_result("unseen_sweep")``):

    python experiments/ship_unseen.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from results_file import write_json

HERE = Path(__file__).resolve().parent
SOURCES = {  # the recorded run whose validation sweep each task uses
    "sentence_polarity": HERE / "unseen_task.json",
    "authorship": HERE / "unseen_task_authorship_32_full.json",
}
OUT = HERE.parent / "tinybert" / "shipped" / "results" / "unseen_sweep.json"


def main() -> int:
    shipped = {"commands": [], "settings": {}, "note": "", "sources": {}}
    for task, path in SOURCES.items():
        run = json.loads(path.read_text(encoding="utf-8"))
        settings = run["settings"]
        if settings.get("task", "sentence_polarity") != task:
            sys.exit(f"{path}: expected a run of {task}, got {settings.get('task')}")
        shipped["commands"] += [run["command"]] + [
            v for k, v in run.items() if k.startswith("command_")
        ]
        shipped["settings"][task] = {
            "train_examples": None,
            "eval_examples": settings["eval_examples"],
            "epochs": settings["epochs"],
            "per_label": settings["per_label"],
            "batch_size": 16,
        }
        shipped["sources"][task] = f"experiments/{path.name}"
        shipped[task] = run["validation"]
    shipped["note"] = (
        "validation accuracy, seed 0, copied from the recorded runs named in "
        "'sources' by experiments/ship_unseen.py; settings as chapter 11's UNSEEN"
    )
    write_json(OUT, shipped)
    print(f"wrote {OUT.relative_to(HERE.parent)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
