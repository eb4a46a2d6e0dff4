"""Hand-written: chapter 16's equal-compute comparison of MLM and ELECTRA, repeated at
several budgets, to see whether (and when) the lines cross at this scale.

The protocol is the chapter's (section "Equal compute on this CPU"): the same course
documents and WordPiece vocabulary, single segments, the same batches and masks, the
same initial encoder per seed, AdamW with warm-up and linear decay at 2e-3, no dropout;
the MLM model gets as many more steps as makes its FLOPs (counted with FlopCounterMode)
equal to ELECTRA's, generator included; judged by a linear probe of the frozen last
layer on UD English-EWT part-of-speech tags (400 training and 400 test sentences). A
budget of ``scale`` means scale x 200 ELECTRA steps. Results are written after every
run.

    python experiments/electra_budget.py --out experiments/electra_budget.json \
        --scales 1 4 10 --seeds 0 1 --documents 400
"""

from __future__ import annotations

import argparse
import platform
import shlex
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

from results_file import record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, type=Path, help="JSON (must not exist)")
    parser.add_argument("--scales", type=int, nargs="+", default=[1, 4, 10])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--documents", type=int, default=400)
    args = parser.parse_args(argv)
    if args.out.exists():
        parser.error(f"--out {args.out} exists; choose a new file")

    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from tinybert.finetuning.feature_based import labelled_vectors, train_probe
    from tinybert.finetuning.features import encode_tagged
    from tinybert.finetuning.metrics import accuracy
    from tinybert.finetuning.recipes import task_data
    from tinybert.finetuning.text_tasks import evenly_spaced
    from tinybert.models.course_checkpoint import shipped_checkpoint
    from tinybert.models.electra import ElectraConfig
    from tinybert.models.electra_heads import ElectraForMaskedLM, ElectraForPreTraining
    from tinybert.pretraining.documents import course_documents, tokenize_documents
    from tinybert.pretraining.electra import ElectraPretraining
    from tinybert.pretraining.examples import (
        PretrainingBatches,
        single_segment_examples,
    )
    from tinybert.pretraining.objective import seeded_generator
    from tinybert.tokenizers.wordpiece import WordPieceTokenizer
    from tinybert.training.inputs import SpecialTokens
    from tinybert.training.optim import linear_warmup_decay, make_optimizer

    torch.set_num_threads(1)  # as the chapter: tiny matrices, one thread
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    results = {"command": "python " + " ".join(shlex.quote(a) for a in sys.argv),
               "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
               "commit": commit, "machine": platform.processor() or platform.machine(),
               "torch": torch.__version__, "runs": [], "log": []}
    max_len, batch_size = 64, 32
    tokenizer = WordPieceTokenizer.from_file(shipped_checkpoint() / "vocab.txt",
                                             lowercase=True)
    special = SpecialTokens.from_vocab(tokenizer.vocab)
    documents = tokenize_documents(
        course_documents("train", max_documents=args.documents), tokenizer)
    examples = single_segment_examples(documents, special, max_len)
    d_size = dict(d_model=64, n_layers=2, n_heads=2, d_ff=256)
    g_size = {**d_size, **{k: d_size[k] // 2 for k in ("d_model", "n_heads", "d_ff")}}
    shared = dict(vocab_size=len(tokenizer), pad_token_id=special.pad, max_len=max_len,
                  embedding_size=d_size["d_model"] // 2, dropout=0.0,
                  attention_dropout=0.0)
    d_config = ElectraConfig(**shared, **d_size)
    g_config = ElectraConfig(**shared, **g_size)

    def build(method: str, seed: int):
        torch.manual_seed(seed)
        if method == "MLM":
            return ElectraForMaskedLM(d_config)
        discriminator = ElectraForPreTraining(d_config)
        return ElectraPretraining(ElectraForMaskedLM(g_config), discriminator)

    def loss(method: str, model, batch: dict, seed: int, step: int):
        if method == "MLM":
            return model(batch["input_ids"], batch["token_type_ids"],
                         batch["attention_mask"], labels=batch["mlm_labels"]).loss
        return model(**batch, sampler=seeded_generator(seed, "sample", step)).loss

    def step_flops(method: str) -> int:
        batch = PretrainingBatches(examples, special, batch_size, seed=0)(0)
        with FlopCounterMode(display=False) as counter:
            loss(method, build(method, 0), batch, 0, 0).backward()
        return counter.get_total_flops()

    flops = {m: step_flops(m) for m in ("MLM", "ELECTRA")}
    pos_train, tags = task_data("ud_pos", "train")
    pos_test, _ = task_data("ud_pos", "test")
    probe_train, _ = encode_tagged(tokenizer, evenly_spaced(pos_train, 400),
                                   max_len=max_len)
    probe_test, _ = encode_tagged(tokenizer, evenly_spaced(pos_test, 400),
                                  max_len=max_len)

    def probe(encoder) -> float:
        x, y = labelled_vectors(encoder, probe_train, pad_id=special.pad)
        x_test, y_test = labelled_vectors(encoder, probe_test, pad_id=special.pad)
        head = train_probe(x[-1], y, len(tags))
        with torch.no_grad():
            return float(accuracy(head(x_test[-1]).argmax(-1), y_test))

    record(results, args.out,
           f"{len(examples):,} sequences from {args.documents} documents; step FLOPs "
           f"MLM {flops['MLM']:.3g}, ELECTRA {flops['ELECTRA']:.3g}")
    for seed in args.seeds:
        score = probe(build("MLM", seed).bert.eval())
        results["runs"].append({"method": "random init", "seed": seed, "probe": score})
        record(results, args.out, f"seed {seed} random init: probe {score:.1%}")
    for scale in args.scales:
        steps = {"ELECTRA": 200 * scale}
        steps["MLM"] = round(steps["ELECTRA"] * flops["ELECTRA"] / flops["MLM"])
        for seed in args.seeds:
            for method in ("MLM", "ELECTRA"):
                start = time.perf_counter()
                model = build(method, seed).train()
                optimizer = make_optimizer(model, 2e-3)
                schedule = linear_warmup_decay(optimizer, steps[method] // 10,
                                               steps[method])
                batches = PretrainingBatches(examples, special, batch_size, seed=seed)
                for step in range(steps[method]):
                    loss(method, model, batches(step), seed, step).backward()
                    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                    optimizer.step()
                    schedule.step()
                    optimizer.zero_grad(set_to_none=True)
                encoder = model.bert if method == "MLM" else model.discriminator.bert
                score = probe(encoder.eval())
                results["runs"].append({
                    "method": method, "scale": scale, "seed": seed,
                    "steps": steps[method],
                    "tflops": flops[method] * steps[method] / 1e12, "probe": score,
                    "seconds": time.perf_counter() - start})
                record(results, args.out,
                       f"scale {scale} seed {seed} {method}: {steps[method]} steps, "
                       f"{flops[method] * steps[method] / 1e12:.2f} TFLOPs, probe "
                       f"{score:.1%} ({time.perf_counter() - start:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
