"""Hand-written (not generated): the checks for chapter 04's exercises
(multi-head attention).

Each ``check_*`` function calls the student's code on several inputs, including odd
sizes and edge cases, raises ``AssertionError`` saying what was expected and what came
back, and prints a line starting with ✓ when everything passes.
"""

from __future__ import annotations

import torch
from torch import nn

from tinybert.exercises._assertions import answers_required
from tinybert.exercises._assertions import assert_close as _assert_close

__all__ = [
    "check_multihead_by_loop",
    "check_to_torch_attn_mask",
    "check_mha_parameter_count",
]


def _random_mask(shape, generator) -> torch.Tensor:
    """A random bool mask of ``shape`` whose every (T, S) row keeps at least one key (no
    empty rows)."""
    mask = torch.rand(shape, generator=generator) < 0.6
    # key 0 always visible: no fully masked row
    mask[..., 0] = True
    return mask


def _torch_reference(mha) -> nn.MultiheadAttention:
    """nn.MultiheadAttention holding the weights of our MultiHeadAttention ``mha``."""
    has_bias = mha.query.bias is not None
    reference = nn.MultiheadAttention(
        mha.d_model, mha.n_heads, bias=has_bias, batch_first=True
    )
    with torch.no_grad():
        reference.in_proj_weight.copy_(
            torch.cat([mha.query.weight, mha.key.weight, mha.value.weight])
        )
        reference.out_proj.weight.copy_(mha.output.weight)
        if has_bias:
            reference.in_proj_bias.copy_(
                torch.cat([mha.query.bias, mha.key.bias, mha.value.bias])
            )
            reference.out_proj.bias.copy_(mha.output.bias)
    return reference.eval()


# --- ex-mha-loop ----------------------------------------------------------------------


@answers_required
def check_multihead_by_loop(multihead_by_loop) -> None:
    """Check ``multihead_by_loop(mha, x, context, mask)`` against
    ``mha(x, context, mask)[0]``."""
    from tinybert.blocks.multihead import MultiHeadAttention

    g = torch.Generator().manual_seed(401)
    # (B, T, S, D, H, bias, cross, mask shape or None)
    cases = [
        (13, 7, 7, 32, 4, True, False, None),
        (3, 5, 5, 12, 3, True, False, (5, 5)),
        (2, 6, 9, 16, 2, False, True, (2, 1, 1, 9)),
        (4, 3, 8, 24, 4, True, True, (4, 4, 3, 8)),
        (1, 1, 1, 8, 8, True, False, None),
        (2, 4, 4, 10, 1, True, False, (1, 1, 4, 4)),
        (3, 7, 5, 18, 6, False, True, (1, 6, 1, 5)),
    ]
    for B, T, S, D, H, bias, cross, mask_shape in cases:
        torch.manual_seed(int(torch.randint(0, 2**31 - 1, (1,), generator=g)))
        mha = MultiHeadAttention(D, H, bias=bias).eval()
        x = torch.randn(B, T, D, generator=g)
        context = torch.randn(B, S, D, generator=g) if cross else None
        mask = None if mask_shape is None else _random_mask(mask_shape, g)
        with torch.no_grad():
            expected, _ = mha(x, context=context, mask=mask)
            got = multihead_by_loop(mha, x, context=context, mask=mask)
        what = (
            f"multihead_by_loop with B={B}, T={T}, S={S}, D={D}, H={H}, "
            f"bias={bias}, {'cross' if cross else 'self'}-attention, mask "
            f"{mask_shape}"
        )
        _assert_close(what, got, expected, atol=1e-5)
    print(
        f"✓ multihead_by_loop equals MultiHeadAttention on {len(cases)} "
        f"configurations (1 to 8 heads, with and without bias, self and cross, "
        f"per-head masks)"
    )


# --- ex-mha-torch-mask ----------------------------------------------------------------


@answers_required
def check_to_torch_attn_mask(to_torch_attn_mask) -> None:
    """Check ``to_torch_attn_mask(mask, batch_size, n_heads, T, S)`` by running
    nn.MultiheadAttention with it."""
    from tinybert.blocks.multihead import MultiHeadAttention

    g = torch.Generator().manual_seed(402)
    # (B, H, T, S, mask shape)
    cases = [
        (3, 4, 7, 7, (7, 7)),
        (3, 4, 7, 5, (3, 1, 1, 5)),
        (2, 3, 4, 6, (1, 3, 1, 6)),
        (5, 2, 3, 3, (5, 2, 3, 3)),
        (2, 4, 5, 5, (4, 5, 5)),
        (1, 1, 1, 4, (1, 4)),
        (4, 2, 6, 3, (4, 2, 6, 3)),
    ]
    for B, H, T, S, mask_shape in cases:
        mask = _random_mask(mask_shape, g)
        expected = ~torch.broadcast_to(mask, (B, H, T, S)).reshape(B * H, T, S)
        got = to_torch_attn_mask(mask.clone(), B, H, T, S)
        what = (
            f"to_torch_attn_mask(mask of shape {mask_shape}, batch_size={B}, "
            f"n_heads={H}, T={T}, S={S})"
        )
        assert isinstance(got, torch.Tensor), (
            f"{what}: expected a torch.Tensor, got {type(got).__name__}"
        )
        assert got.dtype == torch.bool, (
            f"{what}: expected a bool tensor, got {got.dtype}"
        )
        assert got.shape == (B * H, T, S), (
            f"{what}: expected shape {(B * H, T, S)}, got {tuple(got.shape)}"
        )
        if torch.equal(got, ~expected):
            raise AssertionError(
                f"{what}: the polarity is reversed; "
                f"nn.MultiheadAttention's True means 'not allowed', "
                f"the book's True means 'may attend'"
            )
        if not torch.equal(got, expected):
            swapped = ~torch.broadcast_to(mask, (B, H, T, S)).transpose(0, 1).reshape(
                B * H, T, S
            )
            hint = (
                " (it looks like head-major order; nn.MultiheadAttention expects index "
                "b * n_heads + h)"
                if torch.equal(got, swapped)
                else ""
            )
            raise AssertionError(
                f"{what}: wrong entries at "
                f"{int((got != expected).sum())} of "
                f"{expected.numel()} positions{hint}"
            )

        # The real test: nn.MultiheadAttention with the converted mask equals our
        # layer with ours.
        D = 4 * H
        torch.manual_seed(int(torch.randint(0, 2**31 - 1, (1,), generator=g)))
        mha = MultiHeadAttention(D, H).eval()
        x, context = (
            torch.randn(B, T, D, generator=g),
            torch.randn(B, S, D, generator=g),
        )
        with torch.no_grad():
            ours, ours_weights = mha(x, context=context, mask=mask)
            theirs, their_weights = _torch_reference(mha)(
                x, context, context, attn_mask=got, average_attn_weights=False
            )
        _assert_close(f"nn.MultiheadAttention output with {what}", theirs, ours)
        _assert_close(
            f"nn.MultiheadAttention weights with {what}", their_weights, ours_weights
        )
    print(
        f"✓ to_torch_attn_mask gives nn.MultiheadAttention the book's masks on "
        f"{len(cases)} shapes ((T, S), (B, 1, 1, S), (1, H, 1, S), (H, T, S), (B, "
        f"H, T, S), ...)"
    )


# --- ex-mha-params --------------------------------------------------------------------


@answers_required
def check_mha_parameter_count(mha_parameter_count) -> None:
    """Check ``mha_parameter_count(d_model, n_heads, bias)`` against real modules."""
    from tinybert.blocks.feedforward import count_parameters
    from tinybert.blocks.multihead import MultiHeadAttention

    cases = [
        (32, 4, True),
        (32, 4, False),
        (8, 1, True),
        (12, 12, True),
        (30, 5, False),
        (768, 12, True),
        (1024, 16, True),
        (7, 7, False),
    ]
    for d_model, n_heads, bias in cases:
        expected = count_parameters(MultiHeadAttention(d_model, n_heads, bias=bias))
        got = mha_parameter_count(d_model, n_heads, bias=bias)
        what = f"mha_parameter_count({d_model}, {n_heads}, bias={bias})"
        assert isinstance(got, int) and not isinstance(got, bool), (
            f"{what}: expected a Python int, got {type(got).__name__} {got!r}"
        )
        assert got == expected, f"{what}: expected {expected}, got {got}"
        if n_heads > 1 and d_model <= 64:  # same count as PyTorch's layer
            torch_count = count_parameters(
                nn.MultiheadAttention(d_model, n_heads, bias=bias)
            )
            assert got == torch_count, (
                f"{what}: nn.MultiheadAttention has {torch_count}, got {got}"
            )
    assert mha_parameter_count(64, 8) == mha_parameter_count(64, 8, bias=True), (
        "mha_parameter_count: bias should default to True"
    )
    for d_model, n_heads in [(30, 4), (10, 3), (768, 10)]:
        try:
            result = mha_parameter_count(d_model, n_heads)
        except ValueError:
            continue
        raise AssertionError(
            f"mha_parameter_count({d_model}, {n_heads}): expected a "
            f"ValueError ({d_model} is not divisible by {n_heads}), "
            f"got {result!r}"
        )
    print(
        f"✓ mha_parameter_count agrees with MultiHeadAttention on {len(cases)} "
        f"configurations and rejects widths not divisible by the number of heads"
    )
