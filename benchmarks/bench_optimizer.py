"""Chapter 09's make_optimizer (fused AdamW) against the same AdamW run as a batched
(foreach) and as a plain per-tensor update, timed in the same process.

The three optimizers get the same parameter groups (weight decay on matrices, none on
biases and LayerNorm weights) and the same gradients, and only ``optimizer.step()`` is
timed, alternately (fused, foreach, loop, fused, ...), several times; the medians are
compared. Before timing, a few steps from the same start check that the three give the
same parameters up to float32 rounding. Two model sizes: the course's bert-mini and a
model of all-MiniLM-L6-v2's shape (hidden 384, 6 layers, vocabulary 30,522), both with a
2-class head as in fine-tuning. Ratios are reference time / make_optimizer time: above 1
means make_optimizer's update is faster.
"""
from __future__ import annotations

import argparse
import copy
import statistics
import time

import torch

from tinybert.finetuning.heads import SequenceClassifier
from tinybert.models.bert import BertConfig, BertModel
from tinybert.training.optim import make_optimizer

SIZES = {
    "bert-mini (course)": dict(vocab_size=8192, d_model=256, n_layers=4, n_heads=4,
                               d_ff=1024),
    "MiniLM-L6 shape": dict(vocab_size=30522, d_model=384, n_layers=6, n_heads=12,
                            d_ff=1536),
}


def optimizers(model: torch.nn.Module, lr: float) -> dict[str, torch.optim.Optimizer]:
    ours = make_optimizer(model, lr=lr)
    groups = [{"params": g["params"], "weight_decay": g["weight_decay"]}
              for g in ours.param_groups]
    options = dict(lr=lr, betas=(0.9, 0.999), eps=1e-6)
    return {"make_optimizer": ours,
            "foreach": torch.optim.AdamW(groups, foreach=True, fused=False, **options),
            "loop": torch.optim.AdamW(groups, foreach=False, fused=False, **options)}


def fill_gradients(model: torch.nn.Module, generator: torch.Generator) -> None:
    for p in model.parameters():
        p.grad = torch.randn(p.shape, generator=generator) * 1e-2


def check_same_numbers(model: torch.nn.Module, steps: int = 5) -> float:
    """Largest difference between the parameters each optimizer gives after ``steps``
    updates from the same start with the same gradients."""
    results = []
    for name in ("make_optimizer", "foreach", "loop"):
        copy_ = copy.deepcopy(model)
        optimizer = optimizers(copy_, lr=1e-3)[name]
        generator = torch.Generator().manual_seed(0)
        for _ in range(steps):
            fill_gradients(copy_, generator)
            optimizer.step()
        results.append([p.detach().clone() for p in copy_.parameters()])
    return max((a - b).abs().max().item()
               for other in results[1:] for a, b in zip(results[0], other))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, CPU")
    for size, fields in SIZES.items():
        torch.manual_seed(0)
        model = SequenceClassifier(BertModel(BertConfig(max_len=128, **fields)), 2)
        difference = check_same_numbers(model)
        assert difference < 1e-5, f"{size}: the optimizers disagree by {difference:.1e}"
        fill_gradients(model, torch.Generator().manual_seed(1))
        runs = optimizers(model, lr=1e-5)  # small: the weights barely move
        times = {name: [] for name in runs}
        for repeat in range(args.repeats + 2):
            for name, optimizer in runs.items():
                start = time.perf_counter()
                optimizer.step()
                if repeat >= 2:  # the first steps create the optimizer's state
                    times[name].append(time.perf_counter() - start)
        median = {name: statistics.median(t) for name, t in times.items()}
        n = sum(p.numel() for p in model.parameters())
        print(f"{size}: {n / 1e6:.1f}M parameters; the three agree to {difference:.1e}")
        for name, seconds in median.items():
            ratio = seconds / median["make_optimizer"]
            print(f"  {name:>15}: {1000 * seconds:6.1f} ms per step, "
                  f"{ratio:.2f}x make_optimizer's time")


if __name__ == "__main__":
    main()
