"""Hand-written: tokens per second of the course's bert-mini pretraining step, by
precision and batch size, with the analytic FLOPs per token; and the same step on
this machine's CPU, measured in the same run, for a ratio.

    python benchmarks/gpu_throughput.py --out throughput.json            # the GPU table
    python benchmarks/gpu_throughput.py --out t.json --device cpu --tiny  # on a CPU

The step is chapter 9's ``train_step`` (autocast, GradScaler, clipping, fused AdamW, the
warm-up/decay schedule) on ``BertForPreTraining`` of the course checkpoint's shape
(vocabulary 7,164, 4 layers of width 256, 4 heads, d_ff 1,024, pre-LN, no dropout), MLM
only with 20% of the positions labelled, as the checkpoint was trained. Batches are
random ids made on the device, so the table measures the model's step, not the Python
data pipeline. Precisions: float32 (TF32 off), bfloat16 autocast (only on compute
capability >= 8.0, where it is native) and float16 autocast with a GradScaler. Each row:
warm-up steps, then timed steps between ``torch.cuda.synchronize()`` calls until
``--min-seconds`` have passed. The JSON is rewritten after every row, so a run that is
stopped keeps what it measured.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import torch

from tinybert.checkpoint.atomic import write_atomically
from tinybert.models.bert import BertConfig
from tinybert.models.bert_heads import IGNORE_INDEX, BertForPreTraining
from tinybert.pretraining.distributed import DistributedContext
from tinybert.pretraining.objective import train_step
from tinybert.training.optim import linear_warmup_decay, make_optimizer

ROOT = Path(__file__).resolve().parents[1]
LABELLED = 0.2  # share of positions with an MLM label, as in the checkpoint's recipe
# dense tensor-core peaks (TFLOP/s) from the vendor's data sheets, for a
# utilisation figure
PEAK_TFLOPS = {
    "H100": {"bf16": 989.0, "fp16": 989.0, "fp32": 67.0},
    "H200": {"bf16": 989.0, "fp16": 989.0, "fp32": 67.0},
    "A100": {"bf16": 312.0, "fp16": 312.0, "fp32": 19.5},
}


def course_config() -> BertConfig:
    """The shipped checkpoint's configuration, read from its config.json where it is."""
    for folder in (
        ROOT / "tinybert" / "shipped" / "bert-mini",
        ROOT / "checkpoints" / "bert-mini",
    ):
        if (folder / "config.json").is_file():
            saved = json.loads((folder / "config.json").read_text())["config"]
            return BertConfig.from_dict(saved)
    return BertConfig(
        vocab_size=7164,
        d_model=256,
        n_layers=4,
        n_heads=4,
        d_ff=1024,
        max_len=128,
        dropout=0.0,
        attention_dropout=0.0,
        norm_first=True,
    )


def flops_per_token(c: BertConfig, seq_len: int, labelled: float = LABELLED) -> dict:
    """Training FLOPs per token (forward + backward = 3 x forward; a matrix product of
    n x k by k x m is 2nkm): 6 x the encoder's weights; attention's scores and weighted
    sum, 12 T D per layer; the MLM head (D x D transform, D x V decoder) at labelled
    positions only. Embedding look-ups, LayerNorm, softmax and the pooler are
    left out."""
    encoder = c.n_layers * (4 * c.d_model**2 + 2 * c.d_model * c.d_ff)
    parts = {
        "encoder_matmuls": 6 * encoder,
        "attention_scores": 12 * c.n_layers * seq_len * c.d_model,
        "mlm_head": 6 * labelled * (c.d_model**2 + c.d_model * c.vocab_size),
    }
    return {**parts, "total": sum(parts.values())}


def make_batch(c: BertConfig, batch: int, seq_len: int, device, seed: int = 0) -> dict:
    g = torch.Generator(device=device).manual_seed(seed)
    ids = torch.randint(5, c.vocab_size, (batch, seq_len), device=device, generator=g)
    labelled = torch.rand(batch, seq_len, device=device, generator=g) < LABELLED
    return {
        "input_ids": ids,
        "token_type_ids": (torch.arange(seq_len, device=device) >= seq_len // 2)
        .long()
        .expand(batch, seq_len)
        .contiguous(),
        "attention_mask": torch.ones(batch, seq_len, dtype=torch.long, device=device),
        "mlm_labels": torch.where(labelled, ids, torch.full_like(ids, IGNORE_INDEX)),
    }


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure(
    c: BertConfig,
    device,
    precision: str,
    batch: int,
    seq_len: int,
    *,
    warmup: int,
    min_seconds: float,
    max_steps: int,
) -> dict:
    """One row of the table: seconds per step and tokens per second."""
    dtype = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}[precision]
    if device.type == "cuda":  # the previous row's memory
        torch.cuda.empty_cache()
    torch.manual_seed(0)
    model = BertForPreTraining(c).to(device).train()
    optimizer = make_optimizer(model, lr=1e-4)
    scheduler = linear_warmup_decay(optimizer, 0, 10**6)
    scaler = torch.amp.GradScaler(device.type, enabled=dtype == torch.float16)
    data = make_batch(c, batch, seq_len, device)
    losses = []

    def step(s: int) -> None:
        losses.append(
            train_step(
                model,
                data,
                optimizer,
                scheduler,
                scaler,
                1.0,
                dtype,
                DistributedContext(),
                s,
                None,
            )[0].item()
        )

    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    for s in range(warmup):
        step(s)
    sync(device)
    start, steps = time.perf_counter(), 0
    while steps < max_steps and (
        steps == 0 or time.perf_counter() - start < min_seconds
    ):
        step(warmup + steps)
        steps += 1
    sync(device)
    seconds = (time.perf_counter() - start) / steps
    row = {
        "precision": precision,
        "batch": batch,
        "seq_len": seq_len,
        "tokens_per_step": batch * seq_len,
        "timed_steps": steps,
        "warmup_steps": warmup,
        "seconds_per_step": seconds,
        "tokens_per_second": batch * seq_len / seconds,
        "last_loss": losses[-1],
    }
    if device.type == "cuda":
        row["peak_memory_gib"] = torch.cuda.max_memory_allocated(device) / 2**30
    return row


def environment(device: torch.device) -> dict:
    env = {
        "device": str(device),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
    }
    if device.type == "cuda":
        env.update(
            name=torch.cuda.get_device_name(device),
            capability=list(torch.cuda.get_device_capability(device)),
        )
    return env


def write(path: Path, data: dict) -> None:
    text = json.dumps(data, indent=1) + "\n"
    write_atomically(path, lambda temporary: Path(temporary).write_text(text))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="JSON file to write")
    parser.add_argument(
        "--device", default=None, help="default: cuda if available, else cpu"
    )
    parser.add_argument(
        "--tiny", action="store_true", help="one small row (CPU smoke test)"
    )
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument(
        "--tokens",
        type=int,
        nargs="+",
        default=[16384, 65536, 131072],
        help="tokens per step of the device rows",
    )
    parser.add_argument("--min-seconds", type=float, default=1.0)
    parser.add_argument(
        "--cpu-batch", type=int, default=16, help="sequences per CPU step"
    )
    parser.add_argument("--cpu-steps", type=int, default=3)
    args = parser.parse_args(argv)
    device = torch.device(
        args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    )
    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 means fp32
    torch.backends.cudnn.allow_tf32 = False
    c = course_config()
    if args.tiny:
        args.tokens, args.min_seconds, args.cpu_batch, args.cpu_steps = (
            [2 * args.seq_len],
            0.0,
            2,
            2,
        )
    precisions = ["fp32"]
    if device.type == "cuda":
        if torch.cuda.get_device_capability(device) >= (8, 0):
            precisions.append("bf16")
        precisions.append("fp16")
    flops = flops_per_token(c, args.seq_len)
    result = {
        "environment": environment(device),
        "config": c.to_dict(),
        "labelled_share": LABELLED,
        "flops_per_token": flops,
        "rows": [],
        "cpu_reference": None,
        "errors": [],
    }
    name = result["environment"].get("name", "")
    peaks = next((v for k, v in PEAK_TFLOPS.items() if k in name), None)
    if peaks:
        result["peak_tflops_dense"] = peaks
    write(args.out, result)
    for precision in precisions:
        for tokens in args.tokens:
            batch = max(1, tokens // args.seq_len)
            try:
                row = measure(
                    c,
                    device,
                    precision,
                    batch,
                    args.seq_len,
                    warmup=1 if args.tiny else 3,
                    min_seconds=args.min_seconds,
                    max_steps=2 if args.tiny else 50,
                )
            # an out-of-memory row is a result too
            except Exception as error:  # noqa: BLE001
                result["errors"].append(
                    {
                        "precision": precision,
                        "tokens": tokens,
                        "error": f"{type(error).__name__}: {error}"[:1000],
                    }
                )
                if device.type == "cuda":
                    torch.cuda.empty_cache()
                write(args.out, result)
                continue
            row["tflops"] = row["tokens_per_second"] * flops["total"] / 1e12
            if peaks:
                row["utilisation_of_peak"] = row["tflops"] / peaks[precision]
            result["rows"].append(row)
            print(
                f"{precision:>5} {row['tokens_per_step']:>7} tokens/step: "
                f"{row['tokens_per_second']:>12,.0f} tokens/s, "
                f"{row['tflops']:7.2f} TFLOP/s",
                flush=True,
            )
            write(args.out, result)
    if device.type != "cpu":  # the same step on this machine's CPU, for a ratio
        try:
            cpu = measure(
                c,
                torch.device("cpu"),
                "fp32",
                args.cpu_batch,
                args.seq_len,
                warmup=1,
                min_seconds=0.0,
                max_steps=args.cpu_steps,
            )
            cpu["tflops"] = cpu["tokens_per_second"] * flops["total"] / 1e12
            result["cpu_reference"] = cpu
            for row in result["rows"]:
                row["times_cpu"] = row["tokens_per_second"] / cpu["tokens_per_second"]
            print(
                f"  cpu {cpu['tokens_per_step']:>7} tokens/step: "
                f"{cpu['tokens_per_second']:>12,.0f} tokens/s (fp32, "
                f"{torch.get_num_threads()} threads)",
                flush=True,
            )
        except Exception as error:  # noqa: BLE001
            result["errors"].append(
                {"precision": "cpu fp32", "error": repr(error)[:1000]}
            )
    write(args.out, result)
    return 1 if result["errors"] and not result["rows"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
