"""Unit tests for tinybert.blocks.losses (chapters/06_transformer.md): label smoothing."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from tinybert.blocks.losses import label_smoothed_cross_entropy


@pytest.mark.parametrize("shape", [(13, 5, 11), (7, 37), (1, 2), (2, 3, 4, 6)])
@pytest.mark.parametrize("smoothing", [0.0, 0.1, 0.3, 1.0])
@pytest.mark.parametrize("ignore_index", [-100, 0])
def test_matches_cross_entropy_loss(shape, smoothing, ignore_index):
    g = torch.Generator().manual_seed(hash((shape, smoothing, ignore_index)) % 2**31)
    logits = 3 * torch.randn(shape, generator=g)
    targets = torch.randint(0, shape[-1], shape[:-1], generator=g)
    targets.view(-1)[0] = 1 % shape[-1] if ignore_index == 0 else targets.view(-1)[0]
    if targets.numel() > 1 and ignore_index == 0:
        targets.view(-1)[-1] = 0
    if ignore_index == 0 and (targets != 0).sum() == 0:
        pytest.skip("every position ignored")
    ours = label_smoothed_cross_entropy(logits, targets, smoothing=smoothing, ignore_index=ignore_index)
    theirs = nn.CrossEntropyLoss(label_smoothing=smoothing, ignore_index=ignore_index)(
        logits.reshape(-1, shape[-1]), targets.reshape(-1))
    torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=1e-5)


def test_gradient_matches_and_ignored_positions_get_none():
    g = torch.Generator().manual_seed(1)
    logits = torch.randn(13, 5, 11, generator=g, requires_grad=True)
    targets = torch.randint(1, 11, (13, 5), generator=g)
    targets[:, 3:] = 0
    label_smoothed_cross_entropy(logits, targets, 0.1, ignore_index=0).backward()
    reference = logits.detach().clone().requires_grad_(True)
    nn.CrossEntropyLoss(label_smoothing=0.1, ignore_index=0)(reference.flatten(0, 1), targets.flatten()).backward()
    torch.testing.assert_close(logits.grad, reference.grad, atol=1e-6, rtol=1e-5)
    assert torch.all(logits.grad[:, 3:] == 0)


def test_smoothing_floor_is_the_entropy_of_the_target():
    V, eps = 13, 0.1
    q = torch.full((V,), eps / V)
    q[4] += 1 - eps
    loss = label_smoothed_cross_entropy(q.log()[None], torch.tensor([4]), smoothing=eps)
    torch.testing.assert_close(loss, -(q * q.log()).sum())
    # and any other prediction is worse
    other = label_smoothed_cross_entropy((q.log() + 0.5 * torch.randn(V))[None], torch.tensor([4]), smoothing=eps)
    assert other > loss


@pytest.mark.parametrize("logits, targets, kwargs, message", [
    (torch.randn(4, 5), torch.zeros(3, dtype=torch.long), {}, r"expected logits of shape \(..., V\) and targets of shape \(...\), got \(4, 5\) and \(3,\)"),
    (torch.randn(5), torch.zeros(5, dtype=torch.long), {}, r"got \(5,\) and \(5,\)"),
    (torch.randn(4, 5), torch.zeros(4, dtype=torch.long), {"smoothing": 1.5}, r"smoothing: expected a value in \[0, 1\], got 1.5"),
])
def test_bad_inputs(logits, targets, kwargs, message):
    with pytest.raises(ValueError, match=message):
        label_smoothed_cross_entropy(logits, targets, **kwargs)
