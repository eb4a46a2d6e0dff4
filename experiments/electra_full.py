"""Hand-written: issue 37's full-scale run, ELECTRA at the course checkpoint's scale.

The MLM arm is the shipped course checkpoint (``tinybert/shipped/bert-mini``; its
recipe is in its metrics.json: 3,500 steps of 64 single segments of at most 128
tokens, 20% of the tokens chosen, dynamic masking, AdamW at 2e-3 with 5% warm-up and
beta2 0.98, no dropout, pre-LN, the course documents plus the tasks' unlabelled text).
This script trains the ELECTRA arm on the same examples, from the checkpoint's own
vocabulary (its vocab.txt) and with the same batch size, masking, optimiser and
schedule. The discriminator has the checkpoint's shape (D = 256, 4 layers, 4 heads,
F = 1024, pre-LN) with E = D, so that its encoder is BERT's without a pooler; the
generator is ``--generator-divisor`` times narrower (width, heads and F; 4 by default,
ELECTRA-Small's ratio) and shares the embedding tables; the loss is MLM + 50 x RTD.

Compute is matched in FLOPs, counted with FlopCounterMode on one training step
(forward and backward) of each model on the same batch: ELECTRA gets as many steps
as makes its FLOPs equal to the checkpoint's 3,500 MLM steps (``--steps`` overrides).
The script checks that it rebuilt the checkpoint's data (the same number of training
sequences) before training.

Every ``--eval-every`` steps it scores 25 held-out batches (WikiText-2's test
articles, 15% masked, as the checkpoint's evaluation): the generator's MLM loss and
accuracy and the discriminator's accuracy on replaced and on original tokens. Every
``--save-every`` steps it saves the whole training state in one file (written
atomically), so that ``--resume`` continues where it stopped and sees the same
batches, masks and samples; ``--stop-after N`` stops at step N (a session's limit).
At the end: OUT/discriminator (an ElectraForPreTraining and vocab.txt, what the
ladder fine-tunes), OUT/generator, OUT/metrics.json (command, settings, FLOPs, curves,
seconds) and OUT/loss_curves.png.

    python experiments/electra_full.py --out runs/electra-mini --lr 5e-4
    python experiments/electra_full.py --out runs/electra-mini --lr 5e-4 --resume

The recorded runs (``electra_full_runs/``, metrics.json of each, with its commands):

- ``lr5e-4_metrics.json`` and ``lr5e-4_loss_curves.png``: the full run at 5e-4, the
  rate that chapter 16's grid chose for ELECTRA (3,246 steps, 3,892 s on this 2-core
  CPU, stopped once at step 250 to look at it and resumed);
- ``lr1e-3_stopped_at_750_metrics.json``: a first attempt at 1e-3 (half the
  checkpoint's rate, as the chapter's grid halved MLM's), stopped by hand after 750
  steps, with the discriminator still at the constant answer "original".

``experiments/electra_transfer.py`` fine-tunes the discriminator on the target tasks;
its result for the 5e-4 run is ``electra_full_runs/transfer_lr5e-4.json``.
"""

from __future__ import annotations

import argparse
import json
import platform
import shlex
import shutil
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

STATE = "training_state.pt"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, type=Path, help="run folder")
    parser.add_argument("--lr", type=float, required=True, help="peak learning rate")
    parser.add_argument("--generator-divisor", type=int, default=4, choices=(1, 2, 4))
    parser.add_argument("--rtd-weight", type=float, default=50.0, help="lambda")
    parser.add_argument("--steps", type=int, default=None,
                        help="default: the checkpoint's FLOPs, in ELECTRA steps")
    parser.add_argument("--eval-every", type=int, default=250)
    parser.add_argument("--save-every", type=int, default=250)
    parser.add_argument("--log-every", type=int, default=10)
    parser.add_argument("--stop-after", type=int, default=None)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--max-documents", type=int, default=None,
                        help="the first N documents only (a smoke test: skips the "
                        "check that the data are the checkpoint's)")
    parser.add_argument("--resume", action="store_true")
    args = parser.parse_args(argv)
    for name in ("lr", "rtd_weight"):
        if getattr(args, name) <= 0:
            parser.error(f"--{name.replace('_', '-')} must be positive, got "
                         f"{getattr(args, name)}")
    for name in ("steps", "eval_every", "save_every", "log_every", "stop_after",
                 "threads", "max_documents"):
        value = getattr(args, name)
        if value is not None and value < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1, got {value}")
    out = args.out
    if args.resume and not (out / STATE).is_file():
        parser.error(f"--resume: {out / STATE} does not exist; nothing to resume")
    if not args.resume and out.exists():
        parser.error(f"--out {out} exists; choose a new folder or pass --resume")

    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from tinybert.checkpoint.atomic import write_atomically
    from tinybert.models.bert import BertConfig
    from tinybert.models.bert_heads import BertForPreTraining
    from tinybert.models.course_checkpoint import shipped_checkpoint
    from tinybert.models.electra import ElectraConfig
    from tinybert.models.electra_heads import ElectraForMaskedLM, ElectraForPreTraining
    from tinybert.models.registry import save_model
    from tinybert.pretraining.documents import (
        course_documents,
        task_documents,
        tokenize_documents,
    )
    from tinybert.pretraining.electra import ElectraPretraining
    from tinybert.pretraining.examples import (
        PretrainingBatches,
        single_segment_examples,
    )
    from tinybert.pretraining.objective import seeded_generator
    from tinybert.tokenizers.wordpiece import WordPieceTokenizer
    from tinybert.training.inputs import SpecialTokens
    from tinybert.training.optim import linear_warmup_decay, make_optimizer

    if args.threads:
        torch.set_num_threads(args.threads)
    shipped = shipped_checkpoint()
    mlm_run = json.loads((shipped / "metrics.json").read_text(encoding="utf-8"))
    loop, recipe = mlm_run["config"], mlm_run["recipe"]
    if recipe["objective"] != "mlm":
        sys.exit(f"expected the checkpoint's objective 'mlm', got "
                 f"{recipe['objective']}")
    tokenizer = WordPieceTokenizer.from_file(shipped / "vocab.txt", lowercase=True)
    special = SpecialTokens.from_vocab(tokenizer.vocab)
    bert_config = BertConfig(**json.loads(
        (shipped / "config.json").read_text(encoding="utf-8"))["config"])
    max_len, batch_size = bert_config.max_len, recipe["batch_size"]

    documents = course_documents("train", max_documents=args.max_documents)
    if recipe["task_text"]:
        documents += task_documents()[: args.max_documents]
    train_examples = single_segment_examples(
        tokenize_documents(documents, tokenizer), special, max_len)
    if args.max_documents is None and len(train_examples) != recipe["train_pairs"]:
        sys.exit(f"rebuilt {len(train_examples)} training sequences, the checkpoint "
                 f"trained on {recipe['train_pairs']}: not the same data")
    held_out = single_segment_examples(
        tokenize_documents(course_documents("heldout",
                                            max_documents=args.max_documents),
                           tokenizer), special, max_len)
    held = PretrainingBatches(held_out, special, batch_size, seed=loop["seed"],
                              dynamic_masking=False)
    eval_list = [held(i) for i in range(min(recipe["eval_batches"],
                                            held.steps_per_epoch))]
    batches = PretrainingBatches(train_examples, special, batch_size,
                                 seed=loop["seed"], dynamic_masking=True,
                                 mlm_probability=recipe["mlm_probability"])

    shape = {k: getattr(bert_config, k) for k in (
        "vocab_size", "d_model", "n_layers", "n_heads", "d_ff", "max_len",
        "type_vocab_size", "layer_norm_eps", "initializer_range", "pad_token_id",
        "activation", "norm_first", "dropout", "attention_dropout")}
    d_config = ElectraConfig(**shape, embedding_size=bert_config.d_model)
    k = args.generator_divisor
    g_config = ElectraConfig(**{**shape, **{n: shape[n] // k for n in (
        "d_model", "n_heads", "d_ff")}}, embedding_size=bert_config.d_model)

    def build() -> ElectraPretraining:
        torch.manual_seed(loop["seed"])
        discriminator = ElectraForPreTraining(d_config)
        return ElectraPretraining(ElectraForMaskedLM(g_config), discriminator,
                                  rtd_weight=args.rtd_weight)

    def one_step_flops(model, forward) -> int:
        with FlopCounterMode(display=False) as counter:
            forward(model, batches(0)).backward()
        model.zero_grad(set_to_none=True)
        return counter.get_total_flops()

    torch.manual_seed(0)
    mlm_flops = one_step_flops(BertForPreTraining(bert_config), lambda m, b: m(
        b["input_ids"], b["token_type_ids"], b["attention_mask"],
        mlm_labels=b["mlm_labels"]).mlm_loss)
    electra_flops = one_step_flops(build(), lambda m, b: m(
        **b, sampler=seeded_generator(0, "flops")).loss)
    steps = args.steps or round(loop["steps"] * mlm_flops / electra_flops)

    model = build().train()
    optimizer = make_optimizer(model, args.lr, loop["weight_decay"],
                               betas=(0.9, loop["adam_beta2"]))
    schedule = linear_warmup_decay(optimizer, round(loop["warmup_fraction"] * steps),
                                   steps)
    command = "python " + " ".join(shlex.quote(a) for a in sys.argv)
    settings = {"lr": args.lr, "generator_divisor": k, "rtd_weight": args.rtd_weight,
                "steps": steps, "batch_size": batch_size, "max_len": max_len,
                "mlm_probability": recipe["mlm_probability"],
                "warmup_fraction": loop["warmup_fraction"],
                "weight_decay": loop["weight_decay"], "adam_beta2": loop["adam_beta2"],
                "max_grad_norm": loop["max_grad_norm"], "seed": loop["seed"],
                "max_documents": args.max_documents,
                "discriminator": {n: getattr(d_config, n) for n in (
                    "d_model", "n_layers", "n_heads", "d_ff", "embedding_size")},
                "generator": {n: getattr(g_config, n) for n in (
                    "d_model", "n_layers", "n_heads", "d_ff", "embedding_size")}}
    step, window = 0, []
    if args.resume:
        state = torch.load(out / STATE, weights_only=True)
        if state["settings"] != settings:
            changed = sorted(n for n in settings
                             if state["settings"].get(n) != settings[n])
            sys.exit("--resume with other settings: " + ", ".join(
                f"{n}: saved {state['settings'].get(n)!r}, now {settings[n]!r}"
                for n in changed))
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        schedule.load_state_dict(state["schedule"])
        step, metrics = state["step"], json.loads(state["metrics"])
        metrics["commands"].append(command)
        # the losses of the unfinished logging window (none when saved at a log step)
        window = [tuple(losses) for losses in json.loads(state.get("window", "[]"))]
    else:
        out.mkdir(parents=True)
        metrics = {"commands": [command],
                   "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                   "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"],
                                            capture_output=True,
                                            text=True).stdout.strip(),
                   "machine": platform.processor() or platform.machine(),
                   "torch": torch.__version__, "threads": torch.get_num_threads(),
                   "settings": settings,
                   "flops_per_step": {"MLM (checkpoint)": mlm_flops,
                                      "ELECTRA": electra_flops},
                   "mlm_steps": loop["steps"], "train_sequences": len(train_examples),
                   "train": [], "eval": [], "seconds": 0.0, "log": []}

    def say(line: str) -> None:
        metrics["log"].append(line)
        print(line, flush=True)

    def write_metrics() -> None:
        text = json.dumps(metrics, indent=1) + "\n"
        write_atomically(out / "metrics.json",
                         lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))

    def save_state() -> None:
        state = {"step": step, "settings": settings, "model": model.state_dict(),
                 "optimizer": optimizer.state_dict(),
                 "schedule": schedule.state_dict(), "metrics": json.dumps(metrics),
                 "window": json.dumps(window)}
        write_atomically(out / STATE, lambda tmp: torch.save(state, tmp))
        write_metrics()

    @torch.no_grad()
    def evaluate() -> dict:
        model.eval()
        sums = dict.fromkeys(("mlm_loss", "rtd_loss", "masked", "masked_right",
                              "replaced", "replaced_right", "original",
                              "original_right"), 0.0)
        for i, batch in enumerate(eval_list):
            result = model(**batch, sampler=seeded_generator(loop["seed"], "eval", i))
            gen = model.generator(batch["input_ids"], batch["token_type_ids"],
                                  batch["attention_mask"])
            chosen = batch["mlm_labels"] != -100
            sums["mlm_loss"] += result.mlm_loss.item() * int(chosen.sum())
            sums["masked"] += int(chosen.sum())
            sums["masked_right"] += int((gen.logits.argmax(-1)[chosen]
                                         == batch["mlm_labels"][chosen]).sum())
            real = batch["attention_mask"].bool()
            said = result.rtd_logits > 0
            sums["rtd_loss"] += result.rtd_loss.item() * int(real.sum())
            for name, where in (("replaced", result.replaced.bool() & real),
                                ("original", ~result.replaced.bool() & real)):
                sums[name] += int(where.sum())
                sums[name + "_right"] += int((said == (name == "replaced"))[where]
                                             .sum())
        model.train()
        real = sums["replaced"] + sums["original"]
        return {"step": step, "mlm_loss": sums["mlm_loss"] / sums["masked"],
                "mlm_accuracy": sums["masked_right"] / sums["masked"],
                "rtd_loss": sums["rtd_loss"] / real,
                "replaced_accuracy": sums["replaced_right"] / max(1, sums["replaced"]),
                "original_accuracy": sums["original_right"] / max(1, sums["original"]),
                "replaced_share": sums["replaced"] / real}

    if not args.resume:
        say(f"{len(train_examples):,} training sequences, {len(eval_list)} held-out "
            f"batches; FLOPs per step: MLM {mlm_flops:.4g}, ELECTRA "
            f"{electra_flops:.4g}; {steps} ELECTRA steps = {loop['steps']} MLM steps")
        metrics["eval"].append(evaluate())
    last = args.stop_after or steps
    window_start = time.perf_counter()
    while step < min(last, steps):
        result = model(**batches(step),
                       sampler=seeded_generator(loop["seed"], "sample", step))
        if not torch.isfinite(result.loss):
            write_metrics()
            sys.exit(f"step {step + 1}: the loss is {result.loss.item()}; the state "
                     f"saved at step {step - step % args.save_every} is the last good")
        result.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), loop["max_grad_norm"])
        optimizer.step()
        schedule.step()
        optimizer.zero_grad(set_to_none=True)
        step += 1
        window.append((result.loss.item(), result.mlm_loss.item(),
                       result.rtd_loss.item()))
        if step % args.log_every == 0 or step == steps:
            seconds = time.perf_counter() - window_start
            metrics["seconds"] += seconds
            row = {"step": step, "seconds": metrics["seconds"],
                   "lr": schedule.get_last_lr()[0]}
            for i, name in enumerate(("loss", "mlm_loss", "rtd_loss")):
                row[name] = sum(w[i] for w in window) / len(window)
            metrics["train"].append(row)
            window, window_start = [], time.perf_counter()
        if step % args.eval_every == 0 or step == steps:
            row = evaluate()
            metrics["eval"].append(row)
            say(f"step {step}/{steps}: held-out generator MLM accuracy "
                f"{row['mlm_accuracy']:.1%}, discriminator replaced "
                f"{row['replaced_accuracy']:.1%} / original "
                f"{row['original_accuracy']:.1%}; {metrics['seconds']:.0f} s")
            window_start = time.perf_counter()
        if step % args.save_every == 0 or step == steps or step == last:
            save_state()
    if step < steps:
        say(f"stopped at step {step} of {steps}; continue with --resume")
        save_state()
        return 0
    discriminator = out / "discriminator"
    if not discriminator.exists():
        save_model(model.discriminator, discriminator)
        shutil.copyfile(shipped / "vocab.txt", discriminator / "vocab.txt")
        save_model(model.generator, out / "generator")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(12, 3.4))
    train = metrics["train"]
    axes[0].plot([r["step"] for r in train], [r["mlm_loss"] for r in train], lw=1)
    axes[0].set(xlabel="step", ylabel="generator MLM loss", title="generator")
    axes[1].plot([r["step"] for r in train], [r["rtd_loss"] for r in train], lw=1)
    axes[1].set(xlabel="step", ylabel="binary cross-entropy", title="discriminator")
    evals = metrics["eval"]
    for key in ("mlm_accuracy", "replaced_accuracy", "original_accuracy"):
        axes[2].plot([r["step"] for r in evals], [100 * r[key] for r in evals],
                     label=key.replace("_", " "))
    axes[2].set(xlabel="step", ylabel="held-out %", title="held-out")
    axes[2].legend(fontsize=8)
    fig.tight_layout()
    write_atomically(out / "loss_curves.png",
                     lambda tmp: fig.savefig(tmp, format="png"))
    plt.close(fig)
    say(f"done: {steps} steps in {metrics['seconds']:.0f} s")
    write_metrics()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
