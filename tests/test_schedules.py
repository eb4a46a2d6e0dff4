"""Unit tests for tinybert.blocks.schedules (chapters/06_transformer.md): the warm-up schedule."""
from __future__ import annotations

import pytest
import torch

from tinybert.blocks.schedules import transformer_lr, warmup_inverse_sqrt


@pytest.mark.parametrize("d_model, warmup", [(512, 4000), (1024, 4000), (64, 200), (37, 1), (768, 333)])
def test_schedule_peaks_at_warmup(d_model, warmup):
    rates = [transformer_lr(s, d_model, warmup) for s in range(1, 3 * warmup + 2)]
    peak = 1 + max(range(len(rates)), key=rates.__getitem__)
    assert peak == warmup
    assert transformer_lr(warmup, d_model, warmup) == pytest.approx(d_model ** -0.5 * warmup ** -0.5, rel=1e-12)


def test_schedule_shape():
    assert transformer_lr(1, 512) == pytest.approx(512 ** -0.5 * 4000 ** -1.5)
    assert transformer_lr(2000, 512) == pytest.approx(transformer_lr(1000, 512) * 2)        # linear warm-up
    assert transformer_lr(16000, 512) == pytest.approx(transformer_lr(4000, 512) / 2)       # 1/sqrt decay
    assert transformer_lr(4000, 256) == pytest.approx(transformer_lr(4000, 1024) * 2)       # d_model^-0.5


@pytest.mark.parametrize("args, message", [
    ((0, 512), "step: expected a positive int"),
    ((-3, 512), "step: expected a positive int"),
    ((1.5, 512), "step: expected a positive int"),
    ((1, 0), "d_model: expected a positive int"),
    ((1, 512, 0), "warmup_steps: expected a positive int"),
])
def test_bad_arguments(args, message):
    with pytest.raises(ValueError, match=message):
        transformer_lr(*args)


def test_scheduler_sets_the_rate_of_every_update():
    parameter = torch.nn.Parameter(torch.zeros(3))
    optimizer = torch.optim.Adam([parameter], lr=0.5, betas=(0.9, 0.98), eps=1e-9)
    scheduler = warmup_inverse_sqrt(optimizer, d_model=64, warmup_steps=10)
    for step in range(1, 31):
        assert optimizer.param_groups[0]["lr"] == pytest.approx(0.5 * transformer_lr(step, 64, 10))
        optimizer.step()
        scheduler.step()
