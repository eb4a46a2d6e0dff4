"""Unit tests for tinybert.blocks.multihead (generated from chapters/04_multihead_attention.md).

Odd, distinct sizes (batch 13, query length 7, key length 5, d_model 32, 4 heads) make swapped
axes fail loudly. The reference is torch.nn.MultiheadAttention with our weights copied in.
"""
from __future__ import annotations

import pytest
import torch
from einops import rearrange
from torch import nn

from tinybert.blocks.attention import causal_mask, padding_mask
from tinybert.blocks.multihead import MultiHeadAttention, merge_heads, split_heads

B, T, S, D, H = 13, 7, 5, 32, 4


@pytest.fixture
def generator() -> torch.Generator:
    return torch.Generator().manual_seed(404)


def make_mha(seed: int = 0, **kwargs) -> MultiHeadAttention:
    torch.manual_seed(seed)
    mha = MultiHeadAttention(kwargs.pop("d_model", D), kwargs.pop("n_heads", H), **kwargs)
    with torch.no_grad():  # non-zero biases, so that a bias in the wrong place shows
        for p in mha.parameters():
            if p.dim() == 1:
                p.normal_(0.0, 0.5)
    return mha.eval()


def torch_reference(mha: MultiHeadAttention) -> nn.MultiheadAttention:
    has_bias = mha.query.bias is not None
    reference = nn.MultiheadAttention(mha.d_model, mha.n_heads, bias=has_bias, batch_first=True)
    with torch.no_grad():
        reference.in_proj_weight.copy_(torch.cat([mha.query.weight, mha.key.weight, mha.value.weight]))
        reference.out_proj.weight.copy_(mha.output.weight)
        if has_bias:
            reference.in_proj_bias.copy_(torch.cat([mha.query.bias, mha.key.bias, mha.value.bias]))
            reference.out_proj.bias.copy_(mha.output.bias)
    return reference.eval()


def lengths(generator, n: int, longest: int) -> torch.Tensor:
    """Random lengths in [1, longest], with at least one full-length sequence."""
    out = torch.randint(1, longest + 1, (n,), generator=generator)
    out[0] = longest
    return out


# --- split_heads / merge_heads ------------------------------------------------------------------

@pytest.mark.parametrize("shape, n_heads", [((B, T, D), H), ((1, 1, 8), 8), ((2, 3, 6), 1), ((3, 4, 6), 3)])
def test_split_merge_round_trip(shape, n_heads, generator):
    x = torch.randn(shape, generator=generator)
    heads = split_heads(x, n_heads)
    b, t, d = shape
    assert heads.shape == (b, n_heads, t, d // n_heads)
    assert torch.equal(merge_heads(heads), x)
    h = torch.randn(b, n_heads, t, d // n_heads, generator=generator)
    assert torch.equal(split_heads(merge_heads(h), n_heads), h)


def test_split_heads_takes_contiguous_blocks_of_features(generator):
    x = torch.randn(B, T, D, generator=generator)
    heads = split_heads(x, H)
    dh = D // H
    for h in range(H):
        assert torch.equal(heads[:, h], x[..., h * dh:(h + 1) * dh])


def test_einops_equals_view_transpose(generator):
    x = torch.randn(B, T, D, generator=generator)
    assert torch.equal(rearrange(x, "b t (h d) -> b h t d", h=H), split_heads(x, H))
    heads = split_heads(x, H)
    assert torch.equal(rearrange(heads, "b h t d -> b t (h d)"), merge_heads(heads))
    # merge_heads also accepts a non-contiguous input
    transposed = torch.randn(B, T, H, D // H, generator=generator).transpose(1, 2)
    assert torch.equal(merge_heads(transposed), rearrange(transposed, "b h t d -> b t (h d)"))


def test_split_merge_errors_name_shapes():
    with pytest.raises(ValueError, match=r"D = 30.*\(2, 3, 30\).*n_heads = 4"):
        split_heads(torch.zeros(2, 3, 30), 4)
    with pytest.raises(ValueError, match=r"\(B, T, D\).*\(2, 30\)"):
        split_heads(torch.zeros(2, 30), 2)
    with pytest.raises(ValueError, match="positive int"):
        split_heads(torch.zeros(2, 3, 4), 0)
    with pytest.raises(ValueError, match=r"\(B, H, T, Dh\).*\(2, 3, 4\)"):
        merge_heads(torch.zeros(2, 3, 4))


# --- shapes, and the computation itself ---------------------------------------------------------

def test_self_attention_shapes_and_weights(generator):
    mha = make_mha()
    x = torch.randn(B, T, D, generator=generator)
    out, weights = mha(x)
    assert out.shape == (B, T, D) and weights.shape == (B, H, T, T)
    assert torch.allclose(weights.sum(-1), torch.ones(B, H, T), atol=1e-6)


def test_cross_attention_with_t_different_from_s(generator):
    mha = make_mha()
    x, context = torch.randn(B, T, D, generator=generator), torch.randn(B, S, D, generator=generator)
    out, weights = mha(x, context=context)
    assert out.shape == (B, T, D) and weights.shape == (B, H, T, S)
    # each query's output depends on its own row of x only (no mixing across queries)
    single, _ = mha(x[:, 3:4], context=context)
    assert torch.allclose(single[:, 0], out[:, 3], atol=1e-6)


def test_matches_the_equation_written_out(generator):
    mha = make_mha()
    x, context = torch.randn(B, T, D, generator=generator), torch.randn(B, S, D, generator=generator)
    dh = D // H
    heads = []
    for h in range(H):
        rows = slice(h * dh, (h + 1) * dh)
        q = x @ mha.query.weight[rows].T + mha.query.bias[rows]          # (B, T, Dh)
        k = context @ mha.key.weight[rows].T + mha.key.bias[rows]        # (B, S, Dh)
        v = context @ mha.value.weight[rows].T + mha.value.bias[rows]    # (B, S, Dh)
        heads.append(torch.softmax(q @ k.transpose(1, 2) / dh ** 0.5, dim=-1) @ v)
    expected = torch.cat(heads, dim=-1) @ mha.output.weight.T + mha.output.bias
    out, _ = mha(x, context=context)
    assert torch.allclose(out, expected, atol=1e-5)


# --- parity with torch.nn.MultiheadAttention ----------------------------------------------------

def _parity_cases(generator):
    x, context = torch.randn(B, T, D, generator=generator), torch.randn(B, S, D, generator=generator)
    pad_x, pad_c = padding_mask(lengths(generator, B, T)), padding_mask(lengths(generator, B, S))
    causal = causal_mask(T)
    return x, {  # name: (context, our mask, attn_mask, key_padding_mask) in nn.MultiheadAttention's polarity
        "self": (None, None, None, None),
        "self+padding": (None, pad_x, None, ~pad_x[:, 0, 0]),
        "self+causal": (None, causal, ~causal, None),
        "self+causal+padding": (None, causal & pad_x, ~causal, ~pad_x[:, 0, 0]),
        "cross": (context, None, None, None),
        "cross+padding": (context, pad_c, None, ~pad_c[:, 0, 0]),
    }


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("case", ["self", "self+padding", "self+causal", "self+causal+padding",
                                  "cross", "cross+padding"])
def test_parity_with_torch_multihead_attention(case, bias, generator):
    mha = make_mha(bias=bias)
    reference = torch_reference(mha)
    x, cases = _parity_cases(generator)
    context, mask, attn_mask, key_padding_mask = cases[case]
    kv = x if context is None else context
    with torch.no_grad():
        ours, ours_weights = mha(x, context=context, mask=mask)
        theirs, their_weights = reference(x, kv, kv, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                                          average_attn_weights=False)
        _, their_average = reference(x, kv, kv, attn_mask=attn_mask, key_padding_mask=key_padding_mask)
    assert (ours - theirs).abs().max().item() <= 1e-5
    assert (ours_weights - their_weights).abs().max().item() <= 1e-5
    assert (ours_weights.mean(dim=1) - their_average).abs().max().item() <= 1e-5


def test_per_head_mask_parity(generator):
    """A mask that differs per sequence and per head: nn.MultiheadAttention wants (B*H, T, S), b-major."""
    mha = make_mha()
    x, context = torch.randn(B, T, D, generator=generator), torch.randn(B, S, D, generator=generator)
    mask = torch.rand(B, H, T, S, generator=generator) < 0.5
    mask[..., 0] = True
    with torch.no_grad():
        ours, _ = mha(x, context=context, mask=mask)
        theirs, _ = torch_reference(mha)(x, context, context, attn_mask=~mask.reshape(B * H, T, S))
    assert (ours - theirs).abs().max().item() <= 1e-5


def test_unconverted_mask_polarity_is_wrong(generator):
    """Guard for the polarity note: passing our mask unconverted gives a different answer."""
    mha = make_mha()
    x = torch.randn(B, T, D, generator=generator)
    pad = padding_mask(torch.full((B,), T - 2), S=T)   # every sequence has 2 padded keys
    with torch.no_grad():
        ours, _ = mha(x, mask=pad)
        wrong, _ = torch_reference(mha)(x, x, x, key_padding_mask=pad[:, 0, 0])
    assert not torch.allclose(ours, wrong, atol=1e-3)


@pytest.mark.parametrize("case", ["self", "self+padding", "self+causal+padding", "cross+padding"])
def test_fast_path_equals_explicit_path(case, generator):
    mha = make_mha()
    x, cases = _parity_cases(generator)
    context, mask, _, _ = cases[case]
    explicit, weights = mha(x, context=context, mask=mask)
    mha.fast = True
    fast, no_weights = mha(x, context=context, mask=mask)
    assert no_weights is None and weights is not None
    assert torch.allclose(fast, explicit, atol=1e-5)
    assert MultiHeadAttention(D, H, fast=True).fast


def test_fully_masked_query_gives_zeros_not_nan(generator):
    mha = make_mha()
    x = torch.randn(2, 3, D, generator=generator)
    mask = torch.ones(2, 1, 3, 3, dtype=torch.bool)
    mask[1, :, 2] = False                                 # query 2 of sequence 1 may attend to nothing
    for fast in (False, True):
        mha.fast = fast
        out, _ = mha(x, mask=mask)
        assert torch.isfinite(out).all()
        # its heads are zero, so the output is W^O's bias alone
        assert torch.allclose(out[1, 2], mha.output.bias, atol=1e-6)


# --- invariances --------------------------------------------------------------------------------

@pytest.mark.parametrize("fast", [False, True])
def test_padding_invariance(fast, generator):
    """Appending masked padding to the keys never changes the outputs at real positions."""
    mha = make_mha(fast=fast)
    x, context = torch.randn(B, T, D, generator=generator), torch.randn(B, S, D, generator=generator)
    real = lengths(generator, B, S)
    out, _ = mha(x, context=context, mask=padding_mask(real, S=S))
    for extra in (1, 6):
        padded = torch.cat([context, 100 * torch.randn(B, extra, D, generator=generator)], dim=1)
        out_padded, weights = mha(x, context=padded, mask=padding_mask(real, S=S + extra))
        assert torch.allclose(out_padded, out, atol=1e-5)
        if weights is not None:
            assert torch.all(weights[..., S:] == 0)
    # self-attention with padded positions: the real queries do not notice the padding
    n = 4
    x_real = x[:, :n]
    out_real, _ = mha(x_real)
    out_pad, _ = mha(x, mask=padding_mask(torch.full((B,), n), S=T))
    assert torch.allclose(out_pad[:, :n], out_real, atol=1e-5)


@pytest.mark.parametrize("fast", [False, True])
def test_causal_invariance(fast, generator):
    """With a causal mask, changing positions >= t never changes the outputs before t."""
    mha = make_mha(fast=fast)
    x = torch.randn(B, T, D, generator=generator)
    out, _ = mha(x, mask=causal_mask(T))
    for t in range(1, T):
        changed = x.clone()
        changed[:, t:] = torch.randn(B, T - t, D, generator=generator)
        out_changed, _ = mha(changed, mask=causal_mask(T))
        assert torch.allclose(out_changed[:, :t], out[:, :t], atol=1e-5)
        assert not torch.allclose(out_changed[:, t:], out[:, t:], atol=1e-3)
    # and a prefix on its own gives the same outputs as inside the full sequence
    prefix, _ = mha(x[:, :3], mask=causal_mask(3))
    assert torch.allclose(prefix, out[:, :3], atol=1e-5)


def test_key_permutation_invariance_and_query_equivariance(generator):
    mha = make_mha()
    x, context = torch.randn(B, T, D, generator=generator), torch.randn(B, S, D, generator=generator)
    out, _ = mha(x, context=context)
    perm_s, perm_t = torch.randperm(S, generator=generator), torch.randperm(T, generator=generator)
    assert torch.allclose(mha(x, context=context[:, perm_s])[0], out, atol=1e-5)
    assert torch.allclose(mha(x[:, perm_t], context=context)[0], out[:, perm_t], atol=1e-5)


# --- errors -------------------------------------------------------------------------------------

def test_constructor_errors():
    with pytest.raises(ValueError, match=r"d_model = 30 must be divisible by n_heads = 4"):
        MultiHeadAttention(30, 4)
    with pytest.raises(ValueError, match="n_heads: expected a positive int, got 0"):
        MultiHeadAttention(32, 0)
    with pytest.raises(ValueError, match="d_model: expected a positive int, got 32.0"):
        MultiHeadAttention(32.0, 4)
    with pytest.raises(ValueError, match=r"dropout: expected a probability in \[0, 1\), got 1.5"):
        MultiHeadAttention(32, 4, dropout=1.5)


def test_forward_errors_name_expected_and_given_shapes(generator):
    mha = make_mha()
    x = torch.randn(B, T, D, generator=generator)
    with pytest.raises(ValueError, match=r"x: expected shape \(B, T, d_model=32\), got \(13, 7, 31\)"):
        mha(torch.randn(B, T, D - 1))
    with pytest.raises(ValueError, match=r"x: expected shape \(B, T, d_model=32\), got \(7, 32\)"):
        mha(x[0])
    with pytest.raises(ValueError, match=r"context: expected shape \(B, S, d_model=32\), got \(13, 5, 16\)"):
        mha(x, context=torch.randn(B, S, 16))
    with pytest.raises(ValueError, match=r"context: expected shape \(B=13, S, 32\).*got \(12, 5, 32\)"):
        mha(x, context=torch.randn(B - 1, S, D))
    with pytest.raises(ValueError, match=r"mask.*\(13, 4, 7, 7\).*got \(7, 8\)"):
        mha(x, mask=torch.ones(T, T + 1, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"mask.*\(13, 4, 7, 5\).*got \(13, 1, 1, 7\)"):
        mha(x, context=torch.randn(B, S, D), mask=padding_mask(torch.full((B,), T)))
    with pytest.raises(ValueError, match=r"mask: expected a bool tensor"):
        mha(x, mask=torch.ones(T, T))


# --- training behaviour -------------------------------------------------------------------------

def test_dropout_only_in_training_mode(generator):
    mha = make_mha(dropout=0.5)
    plain = make_mha(dropout=0.0)
    plain.load_state_dict(mha.state_dict())
    x = torch.randn(B, T, D, generator=generator)

    mha.eval()
    out_a, w_a = mha(x)
    out_b, _ = mha(x)
    assert torch.equal(out_a, out_b)
    assert torch.allclose(out_a, plain(x)[0], atol=1e-6)
    assert torch.allclose(w_a.sum(-1), torch.ones(B, H, T), atol=1e-6)

    mha.train()
    torch.manual_seed(0)
    out_c, w_c = mha(x)
    out_d, _ = mha(x)
    assert not torch.allclose(out_c, out_d)               # dropout is random ...
    assert not torch.allclose(out_c, out_a)
    zero_fraction = (w_c == 0).float().mean().item()      # ... and drops about half the weights
    assert 0.35 < zero_fraction < 0.65
    kept = w_c[w_c != 0]
    assert kept.min().item() > 0                          # survivors are scaled up, never negative

    mha.fast = True                                       # the fast path also drops only in training
    mha.eval()
    assert torch.allclose(mha(x)[0], out_a, atol=1e-5)
    mha.train()
    assert not torch.allclose(mha(x)[0], out_a, atol=1e-3)


@pytest.mark.parametrize("fast", [False, True])
@pytest.mark.parametrize("cross", [False, True])
def test_gradients_reach_every_parameter(fast, cross, generator):
    mha = make_mha(fast=fast).train()
    x = torch.randn(B, T, D, generator=generator, requires_grad=True)
    context = torch.randn(B, S, D, generator=generator, requires_grad=True) if cross else None
    out, _ = mha(x, context=context)
    (out * torch.randn(out.shape, generator=generator)).sum().backward()
    for name, p in mha.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name
        assert p.grad.abs().sum() > 0, f"no gradient reached {name}"
    assert x.grad.abs().sum() > 0
    if cross:
        assert context.grad.abs().sum() > 0


def test_readable_parameter_names_and_count():
    mha = MultiHeadAttention(D, H)
    names = {name for name, _ in mha.named_parameters()}
    assert names == {f"{p}.{q}" for p in ("query", "key", "value", "output") for q in ("weight", "bias")}
    assert sum(p.numel() for p in mha.parameters()) == 4 * D * D + 4 * D
    assert sum(p.numel() for p in MultiHeadAttention(D, H, bias=False).parameters()) == 4 * D * D
    for n_heads in (1, 2, 8, 32):   # the number of heads does not change the parameter count
        assert sum(p.numel() for p in MultiHeadAttention(D, n_heads).parameters()) == 4 * D * D + 4 * D


def test_fused_qkv_projection_equals_separate_projections(generator):
    mha = make_mha()
    fused = nn.Linear(D, 3 * D)
    with torch.no_grad():
        fused.weight.copy_(torch.cat([mha.query.weight, mha.key.weight, mha.value.weight]))
        fused.bias.copy_(torch.cat([mha.query.bias, mha.key.bias, mha.value.bias]))
    x = torch.randn(B, T, D, generator=generator)
    q, k, v = fused(x).chunk(3, dim=-1)
    assert torch.allclose(q, mha.query(x), atol=1e-6)
    assert torch.allclose(k, mha.key(x), atol=1e-6)
    assert torch.allclose(v, mha.value(x), atol=1e-6)


def test_float64_and_device_dtype_follow_the_module(generator):
    mha = make_mha().double()
    x = torch.randn(B, T, D, generator=generator, dtype=torch.float64)
    out, weights = mha(x)
    assert out.dtype == torch.float64 and weights.dtype == torch.float64
