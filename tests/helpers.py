"""Hand-written helpers shared by the parity tests (import them: ``from helpers import ...``;
the fixtures live in conftest.py)."""
from __future__ import annotations

import torch


def randomised(model: torch.nn.Module, seed: int) -> torch.nn.Module:
    """``model`` in eval mode with every parameter moved off its initialisation (Hugging
    Face starts biases at zero and LayerNorms at the identity, which would hide a bias or a
    LayerNorm in the wrong place)."""
    g = torch.Generator().manual_seed(seed + 100)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=g) * (0.3 if p.dim() == 1 else 0.05))
    return model.eval()


def max_error(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a - b).abs().max().item()


def padded_batch(B: int, T: int, V: int, *, seed: int = 1, pad_id: int = 0,
                 first_id: int = 1):
    """Ids in [first_id, V) padded with ``pad_id`` to random lengths (the first row full),
    the (B, T) bool mask of real tokens, and MLM labels on ~30% of the real tokens."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(2, T + 1, (B,), generator=g)
    lengths[0] = T
    real = torch.arange(T)[None, :] < lengths[:, None]                       # (B, T)
    ids = torch.randint(first_id, V, (B, T), generator=g).masked_fill(~real, pad_id)
    labels = torch.where((torch.rand(B, T, generator=g) < 0.3) & real, ids, -100)
    labels[0, 1] = 5
    return ids, real, labels
