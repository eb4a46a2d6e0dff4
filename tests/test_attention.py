"""Unit tests for tinybert.blocks.attention (generated from chapters/03_attention.md).

Odd, distinct sizes (batch 13, 4 heads, query length 7, key length 9, Dk 8, Dv 5) make swapped
axes fail loudly; T != S covers cross-attention shapes.
"""
from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from tinybert.blocks.attention import (causal_mask, fast_scaled_dot_product_attention,
                                       masked_softmax, padding_mask,
                                       scaled_dot_product_attention)

B, H, T, S, DK, DV = 13, 4, 7, 9, 8, 5
BOTH_PATHS = [scaled_dot_product_attention, fast_scaled_dot_product_attention]
PATH_IDS = ["explicit", "fast"]


@pytest.fixture
def generator() -> torch.Generator:
    return torch.Generator().manual_seed(3003)


def qkv(g, lead=(B, H), t=T, s=S, dk=DK, dv=DV, dtype=torch.float32):
    return (torch.randn(*lead, t, dk, generator=g, dtype=dtype),
            torch.randn(*lead, s, dk, generator=g, dtype=dtype),
            torch.randn(*lead, s, dv, generator=g, dtype=dtype))


def reference_attention(q, k, v, mask=None):
    """An independent float64 reference written with loops over the leading axes' rows."""
    q, k, v = q.double(), k.double(), v.double()
    scores = torch.einsum("...td,...sd->...ts", q, k) / math.sqrt(q.shape[-1])
    if mask is not None:
        mask = mask.expand_as(scores)
        scores = scores.masked_fill(~mask, -math.inf)
    weights = torch.softmax(scores, dim=-1)
    weights = torch.nan_to_num(weights, nan=0.0)          # fully masked rows -> zeros
    return torch.einsum("...ts,...sd->...td", weights, v), weights


def random_mask(g, shape, p=0.4):
    return torch.rand(*shape, generator=g) < p


# --- correctness against an independent reference ------------------------------------------------

@pytest.mark.parametrize("path", BOTH_PATHS, ids=PATH_IDS)
def test_matches_reference_on_odd_shapes(path, generator):
    q, k, v = qkv(generator)
    mask = random_mask(generator, (B, H, T, S))
    out, _ = path(q, k, v, mask)
    expected, _ = reference_attention(q, k, v, mask)
    assert out.shape == (B, H, T, DV)
    assert torch.allclose(out.double(), expected, atol=1e-5)


def test_weights_shape_and_row_sums(generator):
    q, k, v = qkv(generator)
    mask = padding_mask(torch.randint(1, S + 1, (B,), generator=generator), S=S)
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    assert weights.shape == (B, H, T, S)
    assert torch.allclose(weights.sum(-1), torch.ones(B, H, T), atol=1e-6)
    assert torch.all(weights.masked_select(~mask.expand(B, H, T, S)) == 0)
    assert torch.allclose(out, weights @ v, atol=1e-6)


def test_scaling_is_by_sqrt_dk_of_the_keys():
    q = torch.zeros(1, 2, 16)
    q[0, 0, 0] = 4.0                                               # q·k1 = 4 → scaled 1; q·k2 = 0
    k = torch.zeros(1, 2, 16)
    k[0, 0, 0] = 1.0
    v = torch.eye(2)[None]
    _, weights = scaled_dot_product_attention(q, k, v)
    expected = torch.softmax(torch.tensor([1.0, 0.0]), -1)
    assert torch.allclose(weights[0, 0], expected, atol=1e-7)


def test_thinking_machines_numbers():
    """The lecture's example: scores 112 and 96 at d_k = 64 give weights 0.88 and 0.12."""
    q = torch.zeros(1, 64, dtype=torch.float64)
    q[0, :2] = torch.tensor([112.0, 96.0])
    k = torch.zeros(2, 64, dtype=torch.float64)
    k[0, 0] = k[1, 1] = 1.0
    _, weights = scaled_dot_product_attention(q, k, torch.randn(2, 3, dtype=torch.float64))
    assert torch.allclose(weights[0], torch.tensor([1 / (1 + math.exp(-2)), 1 / (1 + math.exp(2))],
                                                   dtype=torch.float64))
    assert [round(w, 2) for w in weights[0].tolist()] == [0.88, 0.12]


# --- explicit vs fast -----------------------------------------------------------------------------

def _masks(g):
    lengths = torch.tensor([S, 1, 4, 9, 2, 3, 7, 8, 5, 6, 9, 1, 2])
    return {
        "none": None,
        "padding": padding_mask(lengths, S=S),
        "causal": causal_mask(T, S),
        "padding & causal": padding_mask(lengths, S=S) & causal_mask(T, S),
        "random": random_mask(g, (B, H, T, S)),
        "random, broadcast over heads": random_mask(g, (B, 1, T, S)),
        "random (T, S)": random_mask(g, (T, S)),
        "query rows only (B, 1, T, 1)": random_mask(g, (B, 1, T, 1), p=0.7),
    }


@pytest.mark.parametrize("mask_name", list(_masks(torch.Generator().manual_seed(0))))
def test_explicit_and_fast_agree(mask_name, generator):
    mask = _masks(generator)[mask_name]
    q, k, v = qkv(generator)
    explicit, weights = scaled_dot_product_attention(q, k, v, mask)
    fast, none = fast_scaled_dot_product_attention(q, k, v, mask)
    assert none is None and weights.shape == (B, H, T, S)
    assert fast.shape == explicit.shape == (B, H, T, DV)
    assert (explicit - fast).abs().max().item() <= 1e-6


@pytest.mark.parametrize("shapes", [
    ((B, H, T, DK), (B, H, S, DK), (B, H, S, DV)),   # the usual (B, H, ...)
    ((B, H, T, DK), (B, 1, S, DK), (B, 1, S, DV)),   # keys shared by the heads
    ((T, DK), (S, DK), (S, DV)),                     # a single unbatched sequence
    ((B, T, DK), (1, S, DK), (1, S, DV)),            # keys shared by the batch
], ids=["BHTD", "shared-heads", "unbatched", "shared-batch"])
def test_explicit_and_fast_agree_on_broadcast_shapes(shapes, generator):
    q, k, v = (torch.randn(*shape, generator=generator) for shape in shapes)
    mask = random_mask(generator, (T, S))
    explicit, _ = scaled_dot_product_attention(q, k, v, mask)
    fast, _ = fast_scaled_dot_product_attention(q, k, v, mask)
    expected_lead = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2])
    assert explicit.shape == (*expected_lead, T, DV) == fast.shape
    assert (explicit - fast).abs().max().item() <= 1e-6


def test_explicit_and_fast_gradients_agree(generator):
    q, k, v = qkv(generator)
    mask = random_mask(generator, (B, H, T, S))
    grads = []
    for path in BOTH_PATHS:
        leaves = [x.clone().requires_grad_(True) for x in (q, k, v)]
        out, _ = path(*leaves, mask)
        (out * torch.linspace(-1, 1, DV)).sum().backward()
        grads.append([x.grad for x in leaves])
    for g_explicit, g_fast in zip(*grads):
        assert torch.allclose(g_explicit, g_fast, atol=1e-5)


# --- invariances -----------------------------------------------------------------------------------

@pytest.mark.parametrize("path", BOTH_PATHS, ids=PATH_IDS)
def test_padding_invariance(path, generator):
    """Appending masked padding keys never changes the outputs at real positions."""
    q, k, v = qkv(generator)
    lengths = torch.randint(1, S + 1, (B,), generator=generator)
    mask = padding_mask(lengths, S=S)
    out, _ = path(q, k, v, mask)
    extra = 6
    k_pad = torch.cat([k, 1e3 * torch.randn(B, H, extra, DK, generator=generator)], dim=-2)
    v_pad = torch.cat([v, 1e3 * torch.randn(B, H, extra, DV, generator=generator)], dim=-2)
    out_pad, _ = path(q, k_pad, v_pad, padding_mask(lengths, S=S + extra))
    assert torch.allclose(out_pad, out, atol=1e-5)
    # and the padded positions' own content is irrelevant: scramble the keys beyond each length
    k_scrambled = k.clone()
    for b, n in enumerate(lengths.tolist()):
        k_scrambled[b, :, n:] = torch.randn(H, S - n, DK, generator=generator)
    assert torch.allclose(path(q, k_scrambled, v, mask)[0], out, atol=1e-6)


@pytest.mark.parametrize("path", BOTH_PATHS, ids=PATH_IDS)
def test_causal_invariance(path, generator):
    """Changing tokens after position t never changes outputs at positions <= t."""
    x = torch.randn(B, H, T, DK, generator=generator)
    mask = causal_mask(T)
    out, _ = path(x, x, x, mask)
    for t in range(T - 1):
        x2 = x.clone()
        x2[..., t + 1:, :] = 10 * torch.randn(B, H, T - t - 1, DK, generator=generator)
        out2, _ = path(x2, x2, x2, mask)
        assert torch.allclose(out2[..., :t + 1, :], out[..., :t + 1, :], atol=1e-6)
        assert not torch.allclose(out2[..., t + 1:, :], out[..., t + 1:, :])     # the future did change


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), t=st.integers(1, 6), s=st.integers(1, 8),
       lead=st.sampled_from([(), (3,), (2, 3)]), use_mask=st.booleans())
def test_permuting_keys_and_values_together_changes_nothing(seed, t, s, lead, use_mask):
    """Attention is a set operation over (key, value) pairs: their order does not matter."""
    g = torch.Generator().manual_seed(seed)
    q, k, v = qkv(g, lead=lead, t=t, s=s, dk=4, dv=3)
    mask = random_mask(g, (*lead, t, s), p=0.6) if use_mask else None
    perm = torch.randperm(s, generator=g)
    for path in BOTH_PATHS:
        out, _ = path(q, k, v, mask)
        permuted_mask = None if mask is None else mask[..., perm]
        out_perm, _ = path(q, k[..., perm, :], v[..., perm, :], permuted_mask)
        assert torch.allclose(out, out_perm, atol=1e-5)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), t=st.integers(1, 6), s=st.integers(1, 8))
def test_permuting_queries_permutes_outputs(seed, t, s):
    g = torch.Generator().manual_seed(seed)
    q, k, v = qkv(g, lead=(2,), t=t, s=s, dk=4, dv=3)
    perm = torch.randperm(t, generator=g)
    out, weights = scaled_dot_product_attention(q, k, v)
    out_perm, weights_perm = scaled_dot_product_attention(q[:, perm], k, v)
    assert torch.allclose(out_perm, out[:, perm], atol=1e-6)
    assert torch.allclose(weights_perm, weights[:, perm], atol=1e-6)


# --- fully masked rows ------------------------------------------------------------------------------

@pytest.mark.parametrize("path", BOTH_PATHS, ids=PATH_IDS)
def test_fully_masked_rows_give_zeros_and_finite_gradients(path, generator):
    q, k, v = (x.requires_grad_(True) for x in qkv(generator))
    mask = random_mask(generator, (B, H, T, S), p=0.5)
    mask[0, 0, 3] = False                                            # some rows see nothing
    mask[5, 2, :] = False                                            # a whole head sees nothing
    mask[:, :, 0] = False                                            # the first query of every sequence
    dead = ~mask.any(-1)                                             # (B, H, T)
    out, weights = path(q, k, v, mask)
    assert torch.isfinite(out).all()
    assert torch.all(out[dead] == 0)
    if weights is not None:
        assert torch.all(weights[dead] == 0) and torch.isfinite(weights).all()
    (out * torch.randn(out.shape, generator=generator)).sum().backward()
    for x in (q, k, v):
        assert torch.isfinite(x.grad).all()
    assert torch.all(q.grad[dead] == 0)                               # a dead query gets no gradient


def test_fast_path_survives_a_backend_that_returns_nan_for_dead_rows(generator, monkeypatch):
    """Older PyTorch versions and some kernels give NaN for a fully masked row; the wrapper must not."""
    def sdpa_with_nan_rows(q, k, v, attn_mask=None, dropout_p=0.0):
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        if attn_mask is not None:
            scores = scores.masked_fill(~attn_mask, -math.inf)
        return torch.softmax(scores, dim=-1) @ v                      # NaN where a row is all -inf

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", sdpa_with_nan_rows)
    q, k, v = (x.requires_grad_(True) for x in qkv(generator))
    mask = random_mask(generator, (B, H, T, S))
    mask[:, :, 0] = False
    assert torch.isnan(sdpa_with_nan_rows(q, k, v, mask)).any()        # the simulated backend misbehaves
    out, _ = fast_scaled_dot_product_attention(q, k, v, mask)
    expected, _ = scaled_dot_product_attention(q, k, v, mask)
    assert torch.allclose(out, expected, atol=1e-6)
    out.sum().backward()
    assert all(torch.isfinite(x.grad).all() for x in (q, k, v))


@pytest.mark.parametrize("path", BOTH_PATHS, ids=PATH_IDS)
def test_everything_masked(path, generator):
    q, k, v = qkv(generator)
    out, _ = path(q, k, v, torch.zeros(T, S, dtype=torch.bool))
    assert torch.equal(out, torch.zeros(B, H, T, DV))


def test_masked_softmax_rows():
    scores = torch.tensor([[1e4, -1e4, 3.0], [0.0, 0.0, 0.0], [5.0, 1.0, 2.0]])
    mask = torch.tensor([[True, True, False], [False, False, False], [True, True, True]])
    w = masked_softmax(scores, mask)
    assert torch.isfinite(w).all()
    assert torch.equal(w[1], torch.zeros(3))
    assert torch.allclose(w[0], torch.tensor([1.0, 0.0, 0.0]))
    assert torch.allclose(w[2], torch.softmax(scores[2], -1))
    assert torch.allclose(masked_softmax(scores), torch.softmax(scores, -1))


# --- dropout --------------------------------------------------------------------------------------

@pytest.mark.parametrize("path", BOTH_PATHS, ids=PATH_IDS)
def test_dropout_zero_is_deterministic_and_positive_dropout_is_not(path, generator):
    q, k, v = qkv(generator)
    first, _ = path(q, k, v, None, 0.0)
    second, _ = path(q, k, v, None, 0.0)
    assert torch.equal(first, second)
    torch.manual_seed(0)
    dropped, _ = path(q, k, v, None, 0.5)
    assert not torch.allclose(dropped, first)


def test_explicit_dropout_acts_on_the_returned_weights(generator):
    q, k, v = qkv(generator)
    torch.manual_seed(1)
    out, weights = scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    assert (weights == 0).any()                                  # some weights were dropped
    assert torch.allclose(out, weights @ v, atol=1e-6)           # the output uses exactly those


# --- masks ----------------------------------------------------------------------------------------

def test_causal_mask_square_and_rectangular():
    assert torch.equal(causal_mask(5), torch.ones(5, 5).tril().bool())
    assert torch.equal(causal_mask(5, 5), causal_mask(5))
    assert torch.equal(causal_mask(3, 7), torch.ones(3, 7).tril(diagonal=4).bool())   # last query sees all
    assert causal_mask(3, 7)[-1].all() and causal_mask(3, 7).dtype == torch.bool
    assert torch.equal(causal_mask(4, 2), torch.ones(4, 2).tril(diagonal=-2).bool())  # first 2 rows dead
    from torch.nn.attention.bias import causal_lower_right
    assert torch.equal(causal_mask(3, 7), causal_lower_right(3, 7)._materialize())


def test_padding_mask_from_lengths_and_from_bool():
    m = padding_mask(torch.tensor([3, 1, 0]), S=4)
    assert m.shape == (3, 1, 1, 4) and m.dtype == torch.bool
    assert m[:, 0, 0].tolist() == [[True, True, True, False], [True, False, False, False], [False] * 4]
    assert padding_mask(torch.tensor([2, 5])).shape == (2, 1, 1, 5)          # S defaults to the longest
    real = torch.tensor([[True, False, True]])
    assert torch.equal(padding_mask(real), real[:, None, None, :])
    hf = torch.tensor([[1, 1, 0], [1, 0, 0]])                                 # boundary conversion
    assert torch.equal(padding_mask(hf.bool()), padding_mask(torch.tensor([2, 1]), S=3))


def test_mask_polarity_matches_nn_multihead_attention(generator):
    """Our True = may attend is nn.MultiheadAttention's False: converted with ~ at the boundary."""
    E = 8
    mha = nn.MultiheadAttention(E, num_heads=1, bias=False, batch_first=True)
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.eye(E).repeat(3, 1))
        mha.out_proj.weight.copy_(torch.eye(E))
    x = torch.randn(B, T, E, generator=generator)
    pad = padding_mask(torch.randint(1, T + 1, (B,), generator=generator), S=T)
    expected, expected_weights = mha(x, x, x, attn_mask=~causal_mask(T), key_padding_mask=~pad[:, 0, 0])
    mask = (pad & causal_mask(T))[:, 0]                                       # (B, T, S)
    out, weights = scaled_dot_product_attention(x, x, x, mask)
    fast, _ = fast_scaled_dot_product_attention(x, x, x, mask)
    assert torch.allclose(out, expected, atol=1e-6) and torch.allclose(fast, expected, atol=1e-6)
    assert torch.allclose(weights, expected_weights, atol=1e-6)


# --- bad input --------------------------------------------------------------------------------------

@pytest.mark.parametrize("path", BOTH_PATHS, ids=PATH_IDS)
@pytest.mark.parametrize("case, match", [
    ("dk mismatch", r"expected k of shape \(\.\.\., S, 8\).*got k of shape \(13, 4, 9, 6\)"),
    ("length mismatch", r"expected v of shape \(\.\.\., 9, Dv\).*got v of shape \(13, 4, 8, 5\)"),
    ("batch mismatch", r"must broadcast, got q \(13, 4, 7, 8\), k \(12, 4, 9, 8\)"),
    ("int mask", r"expected a bool tensor .*got torch.int64"),
    ("float mask", r"expected a bool tensor .*got torch.float32"),
    ("mask wrong S", r"broadcasts to the scores' .* = \(13, 4, 7, 9\), got \(7, 8\)"),
    ("mask swapped axes", r"broadcasts to the scores' .* = \(13, 4, 7, 9\), got \(9, 7\)"),
    ("mask adds a batch axis", r"broadcasts to the scores' .* = \(13, 4, 7, 9\), got \(2, 13, 4, 7, 9\)"),
    ("1-d query", r"q: expected a tensor of shape \(\.\.\., length, features\), got \(8,\)"),
    ("dropout 1", r"dropout_p: expected a probability in \[0, 1\), got 1.0"),
])
def test_bad_input_raises_value_error_naming_shapes(path, case, match, generator):
    q, k, v = qkv(generator)
    kwargs = {}
    if case == "dk mismatch":
        k = k[..., :6]
    elif case == "length mismatch":
        v = v[..., :8, :]
    elif case == "batch mismatch":
        k = k[:12]
    elif case == "int mask":
        kwargs["mask"] = torch.ones(T, S, dtype=torch.long)
    elif case == "float mask":
        kwargs["mask"] = torch.zeros(T, S)
    elif case == "mask wrong S":
        kwargs["mask"] = torch.ones(T, 8, dtype=torch.bool)
    elif case == "mask swapped axes":
        kwargs["mask"] = torch.ones(S, T, dtype=torch.bool)
    elif case == "mask adds a batch axis":
        kwargs["mask"] = torch.ones(2, B, H, T, S, dtype=torch.bool)
    elif case == "1-d query":
        q = q[0, 0, 0]
    elif case == "dropout 1":
        kwargs["dropout_p"] = 1.0
    with pytest.raises(ValueError, match=match):
        path(q, k, v, **kwargs)


@pytest.mark.parametrize("call, match", [
    (lambda: causal_mask(0), r"T: expected a positive int, got 0"),
    (lambda: causal_mask(3, 2.5), r"S: expected a positive int, got 2.5"),
    (lambda: causal_mask(True), r"T: expected a positive int, got True"),
    (lambda: padding_mask([3, 2]), r"expected a tensor, got list"),
    (lambda: padding_mask(torch.tensor([3.0, 2.0])), r"integer tensor of shape \(B,\).*got torch.float32 of shape \(2,\)"),
    (lambda: padding_mask(torch.tensor([[1, 0]])), r"got torch.int64 of shape \(1, 2\) \(for a 1/0 mask use .bool\(\)\)"),
    (lambda: padding_mask(torch.tensor([5, 2]), S=4), r"expected values in \[0, S=4\], got \[5, 2\]"),
    (lambda: padding_mask(torch.tensor([-1, 2]), S=4), r"expected values in \[0, S=4\], got \[-1, 2\]"),
    (lambda: padding_mask(torch.ones(2, 3, dtype=torch.bool), S=4), r"S: expected 3 .* got 4"),
])
def test_mask_helpers_reject_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()
