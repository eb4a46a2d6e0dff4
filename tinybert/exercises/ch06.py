"""Hand-written (not generated): the checks for chapter 06's exercises (the
Transformer).

Each ``check_*`` function calls the student's code on several inputs, including odd
sizes and edge cases, raises ``AssertionError`` saying what was expected and what came
back, and prints a line starting with ✓ when everything passes.
"""

from __future__ import annotations

import copy

import torch
from torch import nn

from tinybert.exercises._assertions import answers_required
from tinybert.exercises._assertions import assert_close as _assert_close

__all__ = ["check_smoothed_cross_entropy", "check_noam_lr", "check_pre_ln_forward"]


# --- ex-transformer-label-smoothing ---------------------------------------------------


@answers_required
def check_smoothed_cross_entropy(smoothed_cross_entropy) -> None:
    """Check ``smoothed_cross_entropy(logits (N, V), targets (N,), smoothing,
    ignore_index)`` against ``nn.CrossEntropyLoss(label_smoothing=smoothing,
    ignore_index=ignore_index)``."""
    g = torch.Generator().manual_seed(601)
    cases = []
    for n, v, smoothing, ignore_index, scale in [
        (13, 11, 0.1, -100, 1.0),
        (7, 37, 0.1, 0, 3.0),
        (5, 2, 0.2, -100, 1.0),
        (1, 5, 0.1, -100, 1.0),
        (9, 13, 0.0, 0, 2.0),
        (6, 4, 1.0, -100, 1.0),
        (11, 7, 0.1, 3, 10.0),
    ]:
        logits = scale * torch.randn(n, v, generator=g)
        targets = torch.randint(0, v, (n,), generator=g)
        if ignore_index >= 0 and n > 1:
            # at least one position counts
            targets[0] = (ignore_index + 1) % v
            # and at least one is ignored
            targets[-1] = ignore_index
        cases.append(
            (
                f"logits ({n}, {v}), smoothing {smoothing}, ignore_index "
                f"{ignore_index}",
                logits,
                targets,
                smoothing,
                ignore_index,
            )
        )
    big = torch.tensor([[1000.0, 0.0, -1000.0], [0.0, 500.0, 0.0]])
    cases.append(
        (
            "huge logits [[1000, 0, -1000], [0, 500, 0]]",
            big,
            torch.tensor([0, 2]),
            0.1,
            -100,
        )
    )

    for description, logits, targets, smoothing, ignore_index in cases:
        expected = nn.CrossEntropyLoss(
            label_smoothing=smoothing, ignore_index=ignore_index
        )(logits, targets)
        got = smoothed_cross_entropy(
            logits.clone(), targets.clone(), smoothing, ignore_index
        )
        _assert_close(
            f"smoothed_cross_entropy on {description}",
            got,
            expected,
            atol=1e-4,
            rtol=1e-5,
        )

    # Ignored positions must not count at all: changing their logits changes nothing.
    logits = torch.randn(8, 6, generator=g)
    targets = torch.tensor([1, 0, 2, 0, 5, 0, 3, 4])
    before = smoothed_cross_entropy(logits.clone(), targets, 0.1, 0)
    changed = logits.clone()
    changed[targets == 0] += 50 * torch.randn(3, 6, generator=g)
    after = smoothed_cross_entropy(changed, targets, 0.1, 0)
    _assert_close(
        "smoothed_cross_entropy after changing the logits of ignored positions",
        after,
        before,
        atol=1e-5,
    )

    # The gradient matches PyTorch's too (it is what training uses).
    logits = torch.randn(10, 7, generator=g, requires_grad=True)
    targets = torch.randint(0, 7, (10,), generator=g)
    targets[2] = -100
    loss = smoothed_cross_entropy(logits, targets, 0.1, -100)
    assert isinstance(loss, torch.Tensor) and loss.requires_grad, (
        "smoothed_cross_entropy: the result must be differentiable w.r.t. the logits "
        "(no .item() or .detach())"
    )
    (got_grad,) = torch.autograd.grad(loss, logits)
    reference = logits.detach().clone().requires_grad_(True)
    (expected_grad,) = torch.autograd.grad(
        nn.CrossEntropyLoss(label_smoothing=0.1, ignore_index=-100)(reference, targets),
        reference,
    )
    _assert_close(
        "gradient of smoothed_cross_entropy w.r.t. the logits",
        got_grad,
        expected_grad,
        atol=1e-6,
    )
    print(
        f"✓ smoothed_cross_entropy matches nn.CrossEntropyLoss(label_smoothing=...) "
        f"on {len(cases)} cases, ignores ignore_index positions and has the "
        f"same gradient"
    )


# --- ex-transformer-schedule ----------------------------------------------------------


@answers_required
def check_noam_lr(noam_lr) -> None:
    """Check ``noam_lr(step, d_model, warmup_steps)`` against the formula, the peak and
    bad steps."""

    def expected(step, d_model, warmup):
        return d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)

    for d_model, warmup in [
        (512, 4000),
        (1024, 4000),
        (64, 200),
        (37, 1),
        (768, 10000),
    ]:
        for step in sorted(
            {1, 2, 3, warmup - 1, warmup, warmup + 1, 2 * warmup, 4 * warmup, 100_000}
            - {0}
        ):
            got = noam_lr(step, d_model, warmup)
            assert isinstance(got, float), (
                f"noam_lr({step}, {d_model}, {warmup}): expected a float, got "
                f"{type(got).__name__}"
            )
            want = expected(step, d_model, warmup)
            assert abs(got - want) <= 1e-12 + 1e-9 * want, (
                f"noam_lr({step}, {d_model}, {warmup}): expected {want:.6e}, "
                f"got {got:.6e}"
            )
        values = [noam_lr(s, d_model, warmup) for s in range(1, 3 * warmup + 2)]
        peak = 1 + max(range(len(values)), key=values.__getitem__)
        assert peak == warmup, (
            f"noam_lr(·, {d_model}, {warmup}): expected the peak at step {warmup}, "
            f"got step {peak}"
        )
    for bad in (0, -5):
        try:
            result = noam_lr(bad, 512, 4000)
        except ValueError:
            continue
        raise AssertionError(
            f"noam_lr({bad}, 512, 4000): expected a ValueError (steps count from 1), "
            f"got {result!r}"
        )
    print(
        "✓ noam_lr follows the formula, peaks at step = warmup_steps and rejects "
        "steps below 1"
    )


# --- ex-transformer-pre-ln ------------------------------------------------------------


@answers_required
def check_pre_ln_forward(pre_ln_forward) -> None:
    """Check ``pre_ln_forward(layer, x, mask)`` against an EncoderLayer built with
    norm_first=True."""
    from tinybert.blocks.attention import causal_mask, padding_mask
    from tinybert.blocks.transformer_layers import EncoderLayer

    g = torch.Generator().manual_seed(606)
    for B, T, D, H, d_ff, mask_kind in [
        (13, 7, 32, 4, 37, "padding"),
        (2, 5, 12, 3, 48, "causal"),
        (1, 1, 8, 2, 16, None),
        (3, 9, 16, 1, 5, "padding"),
    ]:
        torch.manual_seed(int(torch.randint(0, 10_000, (1,), generator=g)))
        post = EncoderLayer(D, H, d_ff, dropout=0.0, norm_first=False).eval()
        # random γ, β and biases: misplaced ones show
        with torch.no_grad():
            for name, p in post.named_parameters():
                if p.dim() == 1:
                    noise = torch.randn(p.shape, generator=g)
                    p.copy_(
                        1.0 + 0.3 * noise
                        if "norm" in name and name.endswith("weight")
                        else 0.5 * noise
                    )
        pre = copy.deepcopy(post)
        pre.norm_first = True
        x = 2 * torch.randn(B, T, D, generator=g) + 1
        if mask_kind == "padding":
            lengths = torch.randint(1, T + 1, (B,), generator=g)
            mask = padding_mask(lengths, S=T)
        elif mask_kind == "causal":
            mask = causal_mask(T)
        else:
            mask = None
        expected = pre(x, mask)
        got = pre_ln_forward(post, x.clone(), mask)
        _assert_close(
            f"pre_ln_forward on x of shape {(B, T, D)} with mask {mask_kind}",
            got,
            expected,
            atol=1e-5,
        )
        assert not post.norm_first, "pre_ln_forward must not change layer.norm_first"
    # It is not the post-LN result: a post-LN answer must fail.
    post_out = post(x, mask)
    assert not torch.allclose(pre_ln_forward(post, x, mask), post_out, atol=1e-4), (
        "pre_ln_forward returned the post-LN output: put the norm inside the residual "
        "branch, x + F(LN(x))"
    )
    print(
        "✓ pre_ln_forward equals EncoderLayer(norm_first=True) on 4 shapes, with "
        "padding, causal and no masks"
    )
