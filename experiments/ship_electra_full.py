"""Hand-written: issue 37's longer ELECTRA runs, summarised for chapter 16.

Chapter 16 compares MLM and ELECTRA at a budget its time allows. The longer runs took
hours, so they ran once, as recorded scripts whose files sit beside this one (each
holds its command and log):

- the full-scale run, ``electra_full.py`` at 5e-4 (``electra_full_runs/
  lr5e-4_metrics.json``): its settings, FLOPs and held-out curves;
- its downstream test, ``electra_transfer.py`` (``electra_full_runs/
  transfer_lr5e-4.json``): each arm's rate on validation and its five test scores per
  task, with the trivial baselines;
- the budget-4 runs of ``electra_budget.py`` (``electra_budget_*_x4.json``): the test
  probes of the MLM arm, of ELECTRA as the chapter runs it, and of three variants.

This script copies what the chapter shows into
``tinybert/shipped/results/electra_full.json``, where the chapter reads it
(``tinybert.shipped.load_result("electra_full")``), and checks that each source is
the run it claims to be:

    python experiments/ship_electra_full.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from results_file import write_json

HERE = Path(__file__).resolve().parent
FULL = HERE / "electra_full_runs" / "lr5e-4_metrics.json"
TRANSFER = HERE / "electra_full_runs" / "transfer_lr5e-4.json"
# the budget-4 arms: (file, method, what the chapter calls it)
BUDGET4 = [
    ("electra_budget_rates_x4.json", "random init", "random init"),
    ("electra_budget_rates_x4.json", "MLM", "MLM"),
    ("electra_budget_rates_x4.json", "ELECTRA", "ELECTRA (the chapter's)"),
    ("electra_budget_generator4_x4.json", "ELECTRA", "generator a quarter wide"),
    ("electra_budget_temperature_x4.json", "ELECTRA", "samples at temperature 2"),
    ("electra_budget_uniform_x4.json", "ELECTRA", "half the samples uniform"),
]
OUT = HERE.parent / "tinybert" / "shipped" / "results" / "electra_full.json"


def read(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def main() -> int:
    full, transfer = read(FULL), read(TRANSFER)
    if full["settings"]["steps"] != full["eval"][-1]["step"]:
        sys.exit(f"{FULL}: the run stopped at step {full['eval'][-1]['step']} of "
                 f"{full['settings']['steps']}; ship a finished run")
    words = " ".join(full["commands"]).split()
    rates = {float(words[i + 1]) for i, word in enumerate(words[:-1]) if word == "--lr"}
    if rates != {full["settings"]["lr"]}:
        sys.exit(f"{FULL}: its commands do not give its rate {full['settings']['lr']}")
    shipped = {
        "sources": {"full": f"experiments/{FULL.relative_to(HERE)}",
                    "transfer": f"experiments/{TRANSFER.relative_to(HERE)}"},
        "full": {key: full[key] for key in ("commands", "date", "commit", "machine",
                                            "torch", "threads", "settings",
                                            "flops_per_step", "mlm_steps",
                                            "train_sequences", "eval", "seconds")},
        "transfer": {key: transfer[key] for key in ("command", "device", "seeds", "lrs",
                                                    "test", "baselines")},
        "budget4": {},
    }
    for name, method, label in BUDGET4:
        run = read(HERE / name)
        tests = [r for r in run["runs"] if r["method"] == method
                 and r.get("split") == "test" and r.get("scale", 4) == 4]
        if not tests:
            sys.exit(f"{name}: no test runs of {method} at budget 4")
        if len({r.get("lr") for r in tests}) != 1:
            sys.exit(f"{name}: {method}'s test runs used several rates")
        shipped["budget4"][label] = {
            "source": f"experiments/{name}",
            "command": run["command"],
            "settings": run["settings"],
            "lr": tests[0].get("lr"),
            "tflops": tests[0].get("tflops"),
            "seeds": [r["seed"] for r in tests],
            "probe": [r["probe"] for r in tests],
            "flagged": [r["detection"]["replaced"] for r in tests
                        if "detection" in r],
        }
    shipped["note"] = (
        "copied from the recorded runs named in 'sources' and 'budget4' by "
        "experiments/ship_electra_full.py"
    )
    write_json(OUT, shipped)
    print(f"wrote {OUT.relative_to(HERE.parent)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
