"""Hand-written: the small-scale ablation behind the course checkpoint's pretraining recipe.

Five short `tinybert pretrain` runs that add one change at a time to BERT's recipe, all with
the same vocabulary, batch, steps and learning rate; then every final model is scored on the
same held-out masked tokens (WikiText-2 test, single segments, 15% static masking). Chapter 09
plots the result.

    python experiments/recipe_ablation.py --out tinybert/shipped/results/recipe_ablation.json \\
        --vocab tinybert/shipped/bert-mini/vocab.txt --steps 200 --work /tmp/ablation
"""
from __future__ import annotations

import argparse
import json
import shlex
import shutil
import sys
import time
from pathlib import Path

# name -> settings of the PretrainingRecipe, each adding one change to the row above
VARIANTS = {
    "BERT: post-LN, MLM + NSP": dict(objective="mlm+nsp"),
    "+ pre-LN": dict(objective="mlm+nsp", pre_ln=True),
    "+ MLM alone (no NSP)": dict(objective="mlm", pre_ln=True),
    "+ no dropout, 20% masked, beta2 0.98": dict(objective="mlm", pre_ln=True, no_dropout=True,
                                                  mlm_probability=0.2, adam_beta2=0.98),
    "+ the tasks' training text": dict(objective="mlm", pre_ln=True, no_dropout=True,
                                       mlm_probability=0.2, adam_beta2=0.98, task_text=True),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="JSON file to write")
    parser.add_argument("--vocab", required=True, help="vocab.txt shared by every run")
    parser.add_argument("--work", required=True, help="folder for the runs (must not exist)")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args(argv)

    import torch

    from tinybert.training.inputs import SpecialTokens
    from tinybert.pretraining.evaluation import evaluate_pretraining
    from tinybert.pretraining.recipe import PretrainingRecipe
    from tinybert.pretraining.run import pretrain_bert
    from tinybert.pretraining.examples import (PretrainingBatches,
                                               single_segment_examples)
    from tinybert.models.course_checkpoint import load_pretrained
    from tinybert.pretraining.documents import course_documents, tokenize_documents

    if args.threads:
        torch.set_num_threads(args.threads)
    work = Path(args.work)
    work.mkdir(parents=True)                         # refuses to reuse a folder
    results = {"command": "python " + " ".join(shlex.quote(a) for a in sys.argv),
               "steps": args.steps, "batch_size": args.batch_size, "lr": args.lr, "runs": {}}
    held = None
    for i, (name, options) in enumerate(VARIANTS.items()):
        options = dict(options)
        overrides = {}
        if options.pop("pre_ln", False):
            overrides["norm_first"] = True
        if options.pop("no_dropout", False):
            overrides.update(dropout=0.0, attention_dropout=0.0)
        folder = work / f"run{i}"
        folder.mkdir()
        shutil.copy(args.vocab, folder / "vocab.txt")
        start = time.perf_counter()
        recipe = PretrainingRecipe(steps=args.steps, batch_size=args.batch_size, lr=args.lr,
                                   warmup_fraction=0.05, eval_every=max(1, args.steps // 8),
                                   eval_batches=10, overrides=overrides, **options)
        history = pretrain_bert(folder, recipe, resume=True)  # resume: start from our vocab
        seconds = time.perf_counter() - start
        model = load_pretrained(folder)
        if held is None:                              # the common held-out set, built once
            special = SpecialTokens.from_vocab(model.tokenizer.vocab)
            documents = tokenize_documents(course_documents("heldout"), model.tokenizer)
            examples = single_segment_examples(documents, special, model.config.max_len)
            batches = PretrainingBatches(examples, special, 64, seed=0, dynamic_masking=False)
            held = [batches(j) for j in range(min(20, batches.steps_per_epoch))]
        final = evaluate_pretraining(model.model, held)
        results["runs"][name] = {"options": {**options, "overrides": overrides},
                                 "seconds": seconds, "eval": history["eval"],
                                 "train": history["train"], "final": final}
        print(f"{name}: held-out MLM loss {final['mlm_loss']:.3f}, accuracy "
              f"{final['mlm_accuracy']:.3f} ({seconds:.0f} s)", flush=True)
        Path(args.out).write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
