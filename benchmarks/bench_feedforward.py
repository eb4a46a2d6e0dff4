"""Chapter 01's teaching code against PyTorch's built-ins, timed in the same run.

Prints, for each pair, the median time of both and their ratio (tinybert / reference): a
ratio near 1 means the readable version costs nothing; above 1, how much readability costs.
"""
from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.benchmark import Timer

from tinybert.blocks.feedforward import (PositionwiseFeedForward, gelu_exact,
                                         gelu_sigmoid, gelu_tanh)
from tinybert.runtime import get_device, seed_everything


def median_seconds(fn, *args, min_run_time: float) -> float:
    return Timer(stmt="fn(*args)", globals={"fn": fn, "args": args}).blocked_autorange(
        min_run_time=min_run_time).median


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default=None, help="cpu, cuda, mps (default: automatic)")
    parser.add_argument("--min-run-time", type=float, default=0.5, help="seconds per timing")
    args = parser.parse_args()
    device = get_device(args.device)
    seed_everything(0)
    B, T, D, F_ = 16, 128, 256, 1024  # noqa: N806 — the shape legend
    x = torch.randn(B, T, D, device=device)  # (B, T, D)

    ffn = PositionwiseFeedForward(D, F_, activation="gelu").to(device).eval()
    reference = nn.Sequential(ffn.expand, nn.GELU(), ffn.contract).eval()  # same weights
    with torch.no_grad():
        assert torch.allclose(ffn(x), reference(x), atol=1e-5)

    pairs = [
        ("gelu_exact vs F.gelu", gelu_exact, lambda t: F.gelu(t), x),
        ("gelu_tanh vs F.gelu(tanh)", gelu_tanh, lambda t: F.gelu(t, approximate="tanh"), x),
        ("gelu_sigmoid vs F.gelu", gelu_sigmoid, lambda t: F.gelu(t), x),
        ("PositionwiseFeedForward vs nn.Sequential", ffn, reference, x),
    ]
    print(f"device: {device}, torch {torch.__version__}, x: {tuple(x.shape)}")
    print(f"{'pair':44s} {'tinybert':>10s} {'reference':>10s} {'ratio':>7s}")
    with torch.no_grad():
        for name, ours, theirs, inp in pairs:
            t_ours = median_seconds(ours, inp, min_run_time=args.min_run_time)
            t_ref = median_seconds(theirs, inp, min_run_time=args.min_run_time)
            print(f"{name:44s} {t_ours * 1e6:8.1f}us {t_ref * 1e6:8.1f}us {t_ours / t_ref:7.2f}")


if __name__ == "__main__":
    main()
