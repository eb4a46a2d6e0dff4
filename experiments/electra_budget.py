"""Hand-written: chapter 16's equal-compute comparison of MLM and ELECTRA, repeated at
several budgets, to see whether (and when) the lines cross at this scale.

The protocol is the chapter's (section "Equal compute on this CPU"): the same course
documents and WordPiece vocabulary, single segments, the same batches and masks, the
same initial encoder per seed, AdamW with warm-up and linear decay, no dropout; the MLM
model gets as many more steps as makes its FLOPs (counted with FlopCounterMode) equal to
ELECTRA's, generator included; judged by a linear probe of the frozen encoder on UD
English-EWT part-of-speech tags (400 training sentences; 400 validation and 400 test
sentences). A budget of ``scale`` means scale x 200 ELECTRA steps. Results are written
after every run.

With one rate in ``--lrs`` (the default, 2e-3, as the chapter) both arms train with it.
With several, each arm and budget chooses its own: seed ``--seeds[0]`` trains at every
rate and the rate whose last-layer probe scores best on the *validation* sentences is
kept; the other seeds train at that rate only, and every reported test score comes
from the chosen rate. Besides the last layer (``probe``, chosen before any run) the
results hold every layer's test accuracy (``layers``: embeddings first), and for
ELECTRA the discriminator's accuracy on the replaced and on the original tokens of 20
held-out batches, and the generator's MLM accuracy there.

    python experiments/electra_budget.py --out experiments/electra_budget.json \
        --scales 1 4 16 --seeds 0 1 2 --documents 400
    python experiments/electra_budget.py --out OUT.json --scales 4 --seeds 0 1 2 \
        --lrs 5e-4 1e-3 2e-3 4e-3
    python experiments/electra_budget.py --out OUT.json --scales 4 --seeds 0 1 2 \
        --methods ELECTRA --generator-divisor 4
    python experiments/electra_budget.py --out OUT.json --scales 4 --seeds 0 1 2 \
        --methods ELECTRA --lrs 2.5e-4 5e-4 1e-3 --temperature 2

``--temperature`` and ``--uniform-share`` change where ELECTRA's replacements come
from, to keep the discriminator's task learnable while the generator is weak: samples
from softmax(logits / T), and a share of them drawn uniformly from the non-special
tokens. The held-out detection figures always use the plain objective's samples, so
that they compare across variants.

Result files beside this script (each holds its command and log):

- ``electra_budget.json``: budgets 1, 4 and 16 with one rate, 2e-3, for both arms (the
  chapter's first protocol).
- ``tinybert/shipped/results/electra_sweep.json``: the chapter's own setting (40
  documents, budget 1), seed 0, five rates per arm on validation; chapter 16 reads it
  and trains each arm at its chosen rate.
- ``electra_budget_rates_x4.json``: budget 4, 400 documents, four rates per arm; stopped
  by hand after ELECTRA's second test seed (the third never ran).
- ``electra_budget_generator4_x4.json`` and ``electra_budget_generator1_x4.json``: the
  same budget, ELECTRA alone with a generator a quarter as wide and as wide as the
  discriminator; the second was stopped after its rate grid (no test seeds). With a
  quarter-width generator the ELECTRA step is cheaper, so those runs used fewer FLOPs
  than the MLM arm (their ``tflops`` says how many).
- ``electra_budget_temperature_x4.json`` and ``electra_budget_uniform_x4.json``: the
  same budget, ELECTRA alone with its replacements sampled at temperature 2, and with
  half of them drawn uniformly; rates 2.5e-4, 5e-4 and 1e-3 on validation, three test
  seeds. They ran from the working tree that added these two options to this script,
  whose parent is the ``commit`` they record.
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

METHODS = ("MLM", "ELECTRA")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, type=Path, help="JSON (must not exist)")
    parser.add_argument("--scales", type=int, nargs="+", default=[1, 4, 10])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--documents", type=int, default=400)
    parser.add_argument("--lrs", type=float, nargs="+", default=[2e-3],
                        help="peak rates; several: each arm chooses on validation")
    parser.add_argument("--methods", nargs="+", choices=METHODS, default=list(METHODS))
    parser.add_argument("--generator-divisor", type=int, default=2,
                        help="the generator's width, heads and F are the "
                        "discriminator's divided by this (default 2, as the chapter)")
    parser.add_argument("--temperature", type=float, default=1.0,
                        help="ELECTRA samples its replacements from softmax(logits / "
                        "this) (default 1, as the paper)")
    parser.add_argument("--uniform-share", type=float, default=0.0,
                        help="this share of the replacements is drawn uniformly from "
                        "the non-special tokens instead of from the generator")
    args = parser.parse_args(argv)
    if args.out.exists():
        parser.error(f"--out {args.out} exists; choose a new file")
    if any(lr <= 0 for lr in args.lrs):
        parser.error(f"--lrs must be positive, got {args.lrs}")
    if args.generator_divisor not in (1, 2, 4):
        parser.error(f"--generator-divisor must be 1, 2 or 4, got "
                     f"{args.generator_divisor}")
    if args.temperature <= 0:
        parser.error(f"--temperature must be positive, got {args.temperature}")
    if not 0 <= args.uniform_share <= 1:
        parser.error(f"--uniform-share must be in [0, 1], got {args.uniform_share}")

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
    from tinybert.pretraining.electra import ElectraPretraining, sample_replacements
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
    k = args.generator_divisor
    g_size = {**d_size, **{n: max(1, d_size[n] // k)
                           for n in ("d_model", "n_heads", "d_ff")}}
    shared = dict(vocab_size=len(tokenizer), pad_token_id=special.pad, max_len=max_len,
                  embedding_size=d_size["d_model"] // 2, dropout=0.0,
                  attention_dropout=0.0)
    d_config = ElectraConfig(**shared, **d_size)
    g_config = ElectraConfig(**shared, **g_size)
    results["settings"] = {"discriminator": d_size, "generator": g_size,
                           "temperature": args.temperature,
                           "uniform_share": args.uniform_share,
                           "max_len": max_len, "batch_size": batch_size,
                           "sequences": len(examples)}

    first_word = 1 + max(special.pad, special.unk, special.cls, special.sep,
                         special.mask)

    class VariantElectra(ElectraPretraining):
        """Chapter 16's objective with the replacements drawn at ``--temperature``,
        and ``--uniform-share`` of them uniformly from the non-special tokens."""

        plain = False  # True: the chapter's samples (the held-out figures use them)

        def replacements(self, logits, sampler):
            if self.plain:
                return super().replacements(logits, sampler)
            sampled = sample_replacements(logits, sampler, args.temperature)
            if args.uniform_share > 0:
                pick = torch.rand(sampled.shape, generator=sampler)
                uniform = torch.randint(first_word, len(tokenizer), sampled.shape,
                                        generator=sampler)
                sampled = torch.where(pick < args.uniform_share, uniform, sampled)
            return sampled

    variant = args.temperature != 1.0 or args.uniform_share > 0

    def build(method: str, seed: int):
        torch.manual_seed(seed)
        if method == "MLM":
            return ElectraForMaskedLM(d_config)
        discriminator = ElectraForPreTraining(d_config)
        kind = VariantElectra if variant else ElectraPretraining
        return kind(ElectraForMaskedLM(g_config), discriminator)

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

    flops = {m: step_flops(m) for m in METHODS}
    pos_train, tags = task_data("ud_pos", "train")
    probe_sets = {}
    for split, rows in (("train", pos_train), ("validation", None), ("test", None)):
        rows = rows if rows is not None else task_data("ud_pos", split)[0]
        probe_sets[split], _ = encode_tagged(tokenizer, evenly_spaced(rows, 400),
                                             max_len=max_len)

    def probe(encoder, split: str) -> list[float]:
        """The probe's accuracy on ``split``, for the embeddings and every layer."""
        x, y = labelled_vectors(encoder, probe_sets["train"], pad_id=special.pad)
        x_eval, y_eval = labelled_vectors(encoder, probe_sets[split],
                                          pad_id=special.pad)
        scores = []
        for layer in range(x.shape[0]):
            head = train_probe(x[layer], y, len(tags))
            with torch.no_grad():
                scores.append(float(accuracy(head(x_eval[layer]).argmax(-1), y_eval)))
        return scores

    held_out = PretrainingBatches(examples, special, batch_size, seed=10_000)

    @torch.no_grad()
    def detection(model, seed: int) -> dict:
        """The discriminator's accuracy on replaced and on original tokens, and the
        generator's on the masked ones, over 20 batches it never trained on."""
        model.eval()
        model.plain = True  # the plain objective's samples, whatever it trained on
        counts = dict.fromkeys(("replaced", "replaced_right", "original",
                                "original_right", "masked", "masked_right"), 0)
        for i in range(20):
            batch = held_out(i)
            out = model(**batch, sampler=seeded_generator(seed, "held-out", i))
            real = batch["attention_mask"].bool()
            said = out.rtd_logits > 0
            for name, where in (("replaced", out.replaced.bool() & real),
                                ("original", ~out.replaced.bool() & real)):
                counts[name] += int(where.sum())
                counts[name + "_right"] += int((said == (name == "replaced"))[where]
                                               .sum())
            gen = model.generator(batch["input_ids"], batch["token_type_ids"],
                                  batch["attention_mask"])
            chosen = batch["mlm_labels"] != -100
            counts["masked"] += int(chosen.sum())
            counts["masked_right"] += int((gen.logits.argmax(-1)[chosen]
                                           == batch["mlm_labels"][chosen]).sum())
        return {name: counts[name + "_right"] / max(1, counts[name])
                for name in ("replaced", "original", "masked")}

    def train(method: str, seed: int, scale: int, lr: float, split: str) -> dict:
        start = time.perf_counter()
        total = 200 * scale
        if method == "MLM":
            total = round(total * flops["ELECTRA"] / flops["MLM"])
        model = build(method, seed).train()
        optimizer = make_optimizer(model, lr)
        schedule = linear_warmup_decay(optimizer, total // 10, total)
        batches = PretrainingBatches(examples, special, batch_size, seed=seed)
        for step in range(total):
            loss(method, model, batches(step), seed, step).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            schedule.step()
            optimizer.zero_grad(set_to_none=True)
        encoder = model.bert if method == "MLM" else model.discriminator.bert
        layers = probe(encoder.eval(), split)
        run = {"method": method, "scale": scale, "seed": seed, "lr": lr,
               "split": split, "steps": total,
               "tflops": flops[method] * total / 1e12, "probe": layers[-1],
               "layers": layers}
        if method == "ELECTRA":
            run["detection"] = detection(model, seed)
        run["seconds"] = time.perf_counter() - start
        results["runs"].append(run)
        extra = "".join(f", {k} {v:.1%}" for k, v in run.get("detection", {}).items())
        record(results, args.out,
               f"scale {scale} seed {seed} {method} lr {lr:g} ({split}): {total} "
               f"steps, {run['tflops']:.2f} TFLOPs, probe {layers[-1]:.1%} (layers "
               + " ".join(f"{v:.1%}" for v in layers) + f"){extra} "
               f"({run['seconds']:.0f} s)")
        return run

    record(results, args.out,
           f"{len(examples):,} sequences from {args.documents} documents; step FLOPs "
           f"MLM {flops['MLM']:.3g}, ELECTRA {flops['ELECTRA']:.3g}; generator "
           f"{g_size}")
    for seed in args.seeds:
        layers = probe(build("MLM", seed).bert.eval(), "test")
        results["runs"].append({"method": "random init", "seed": seed, "split": "test",
                                "probe": layers[-1], "layers": layers})
        record(results, args.out, f"seed {seed} random init: probe {layers[-1]:.1%} "
               "(layers " + " ".join(f"{v:.1%}" for v in layers) + ")")
    for scale in args.scales:
        for method in args.methods:
            lr = args.lrs[0]
            if len(args.lrs) > 1:
                grid = {rate: train(method, args.seeds[0], scale, rate, "validation")
                        for rate in args.lrs}
                lr = max(args.lrs, key=lambda rate: grid[rate]["probe"])
                record(results, args.out,
                       f"scale {scale} {method}: validation chooses lr {lr:g}")
            for seed in args.seeds:
                train(method, seed, scale, lr, "test")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
