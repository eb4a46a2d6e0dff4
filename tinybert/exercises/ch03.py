"""Hand-written (not generated): the checks for chapter 03's exercises (attention).

Each ``check_*`` function calls the student's code on several inputs, including odd
sizes and edge cases, raises ``AssertionError`` saying what was expected and what came
back, and prints a line starting with ✓ when everything passes. The references are the
chapter's own functions in ``tinybert.blocks.attention``. The check on masks at the
library boundaries, ``check_mask_conversions``, lives in
``tinybert.exercises.ch03_boundaries`` and is re-exported here, the module the chapter's
check cells import from.
"""

from __future__ import annotations

import torch

from tinybert.exercises._assertions import answers_required
from tinybert.blocks.attention import (
    causal_mask,
    masked_softmax,
    padding_mask,
    scaled_dot_product_attention,
)
from tinybert.exercises._assertions import assert_close as _assert_close
from tinybert.exercises.ch03_boundaries import check_mask_conversions

__all__ = [
    "check_softmax_with_mask",
    "check_causal_attention_loop",
    "check_mask_conversions",
]


# --- ex-attention-masked-softmax ------------------------------------------------------


@answers_required
def check_softmax_with_mask(softmax_with_mask) -> None:
    """Check ``softmax_with_mask(scores, mask)`` against
    ``tinybert.blocks.attention.masked_softmax``."""
    g = torch.Generator().manual_seed(301)
    random_mask = torch.rand(13, 7, 9, generator=g) < 0.5
    # a few rows that may attend to nothing
    random_mask[0, 0] = False
    random_mask[5, 3] = False
    random_mask[12, 6] = True
    cases = [
        (
            "scores (13, 7, 9), random mask with fully masked rows",
            torch.randn(13, 7, 9, generator=g),
            random_mask,
        ),
        (
            "scores (13, 7, 9), causal mask (7, 9) that broadcasts",
            torch.randn(13, 7, 9, generator=g),
            causal_mask(7, 9),
        ),
        (
            "scores (2, 4, 5, 6), padding mask (2, 1, 1, 6) with a "
            "sequence of length 0",
            torch.randn(2, 4, 5, 6, generator=g),
            padding_mask(torch.tensor([4, 0]), S=6),
        ),
        (
            "scores of size ±1e4, random mask",
            1e4 * torch.randn(13, 7, 9, generator=g),
            random_mask,
        ),
        (
            "float64 scores (3, 4), all True",
            torch.randn(3, 4, generator=g, dtype=torch.float64),
            torch.ones(3, 4, dtype=torch.bool),
        ),
        (
            "scores (1, 1), all False",
            torch.randn(1, 1, generator=g),
            torch.zeros(1, 1, dtype=torch.bool),
        ),
    ]
    for description, scores, mask in cases:
        expected = masked_softmax(scores.double(), mask).to(scores.dtype)
        got = softmax_with_mask(scores.clone(), mask)
        _assert_close(f"softmax_with_mask on {description}", got, expected, atol=1e-6)
        assert got.dtype == scores.dtype, (
            f"softmax_with_mask: expected dtype {scores.dtype}, got {got.dtype}"
        )
        full = mask.expand_as(scores)
        assert torch.all(got[~full] == 0), (
            f"softmax_with_mask on {description}: masked entries must be exactly 0"
        )
        live = full.any(dim=-1)
        sums = got.sum(dim=-1)
        _assert_close(
            f"row sums on {description} (1 for rows with an allowed key, 0 "
            f"for the others)",
            sums,
            live.to(scores.dtype),
            atol=1e-5,
        )

    # All True: an ordinary softmax.
    scores = torch.randn(6, 11, generator=g)
    _assert_close(
        "softmax_with_mask with an all-True mask (must equal torch.softmax)",
        softmax_with_mask(scores, torch.ones(6, 11, dtype=torch.bool)),
        torch.softmax(scores, -1),
        atol=1e-6,
    )

    # Gradients: equal to the reference's, and finite even through fully masked rows and
    # huge scores.
    for description, scale in [("ordinary scores", 1.0), ("scores of size ±1e4", 1e4)]:
        base = scale * torch.randn(13, 7, 9, generator=g)
        upstream = torch.randn(13, 7, 9, generator=g)
        leaf = base.clone().requires_grad_(True)
        got = softmax_with_mask(leaf, random_mask)
        assert got.requires_grad, (
            "softmax_with_mask: the result must be "
            "differentiable w.r.t. the scores (build it from "
            "torch operations, without .detach() on the output)"
        )
        (got * upstream).sum().backward()
        reference_leaf = base.double().requires_grad_(True)
        (
            masked_softmax(reference_leaf, random_mask) * upstream.double()
        ).sum().backward()
        _assert_close(
            f"gradient w.r.t. the scores ({description}, with fully masked rows)",
            leaf.grad,
            reference_leaf.grad.float(),
            atol=1e-5,
        )
    print(
        "✓ softmax_with_mask matches the reference (values and gradients): masked "
        "entries 0, rows sum to 1, fully masked rows are zeros, no NaN"
    )


# --- ex-attention-causal-loop ---------------------------------------------------------


@answers_required
def check_causal_attention_loop(causal_attention_loop) -> None:
    """Check ``causal_attention_loop(q, k, v)`` against attention with
    ``causal_mask(T)``."""
    g = torch.Generator().manual_seed(302)
    shapes = [  # (leading axes, T, Dk, Dv)
        ((13,), 7, 8, 5),
        ((2, 4), 7, 8, 8),
        ((), 9, 16, 3),
        ((3,), 1, 4, 6),
    ]
    for lead, T, d_k, d_v in shapes:
        q = torch.randn(*lead, T, d_k, generator=g)
        k = torch.randn(*lead, T, d_k, generator=g)
        v = torch.randn(*lead, T, d_v, generator=g)
        expected, _ = scaled_dot_product_attention(q, k, v, mask=causal_mask(T))
        got = causal_attention_loop(q.clone(), k.clone(), v.clone())
        _assert_close(
            f"causal_attention_loop with q {tuple(q.shape)}, k {tuple(k.shape)}, v "
            f"{tuple(v.shape)}",
            got,
            expected,
            atol=1e-5,
        )

    # Changing the future must not change the past.
    q, k, v = torch.randn(3, 2, 8, 4, generator=g)  # (B, T, D) each
    before = causal_attention_loop(q, k, v)
    t = 4
    q2, k2, v2 = q.clone(), k.clone(), v.clone()
    for x in (q2, k2, v2):
        x[:, t + 1 :] = 100 * torch.randn(2, 8 - t - 1, 4, generator=g)
    after = causal_attention_loop(q2, k2, v2)
    _assert_close(
        f"outputs at positions <= {t} after changing positions > {t}",
        after[:, : t + 1],
        before[:, : t + 1],
        atol=1e-6,
    )
    print(
        f"✓ causal_attention_loop agrees with masked attention on {len(shapes)} shapes "
        f"and never looks ahead"
    )
