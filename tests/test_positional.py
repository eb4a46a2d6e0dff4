"""Unit tests for tinybert.blocks.positional and tinybert.blocks.rotary (generated from chapters/05_positional_encoding.md).

Odd, distinct sizes (batch 13, length 7, d_model 32, 4 heads) make swapped axes fail loudly.
References: the closed-form rotation M_k for the sinusoidal offsets, torch.nn.functional's fused
attention with a float mask for the relative bias, complex multiplication for RoPE, and the
rotary code of Hugging Face's GPT-J (adjacent pairs) and LLaMA (halves) where transformers is
installed.
"""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from tinybert.blocks.attention import masked_softmax
from tinybert.blocks.multihead import MultiHeadAttention
from tinybert.blocks.positional import (LearnedPositionalEmbedding,
                                        RelativePositionBias,
                                        SinusoidalPositionalEncoding,
                                        relative_positions, sinusoidal_encoding)
from tinybert.blocks.rotary import RotaryEmbedding

B, T, D, H = 13, 7, 32, 4
Dh = D // H


@pytest.fixture
def generator() -> torch.Generator:
    return torch.Generator().manual_seed(505)


def offset_matrix(k: int, d_model: int) -> torch.Tensor:
    """Block-diagonal M_k with blocks [[cos kω, sin kω], [-sin kω, cos kω]], ω_i = 10000^(-2i/D)."""
    omega = 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    c, s = torch.cos(k * omega), torch.sin(k * omega)
    blocks = torch.stack([torch.stack([c, s], -1), torch.stack([-s, c], -1)], -2)    # (D/2, 2, 2)
    return torch.block_diag(*blocks)                                                  # (D, D)


# --- sinusoidal_encoding -------------------------------------------------------------------------

def test_sinusoidal_known_values():
    pe = sinusoidal_encoding(10, 8)
    assert pe.shape == (10, 8) and pe.dtype == torch.float32
    assert torch.equal(pe[0], torch.tensor([0.0, 1.0] * 4))
    omega = [10000.0 ** (-2 * i / 8) for i in range(4)]                  # 1, 0.1, 0.01, 0.001
    for pos in (1, 3, 9):
        expected = torch.tensor([f(pos * w) for w in omega for f in (math.sin, math.cos)])
        assert torch.allclose(pe[pos], expected, atol=1e-7)


def test_sinusoidal_matches_formula_elementwise():
    pe = sinusoidal_encoding(37, 6)
    for pos in range(37):
        for i in range(3):
            angle = pos / 10000.0 ** (2 * i / 6)
            assert abs(pe[pos, 2 * i].item() - math.sin(angle)) < 1e-6
            assert abs(pe[pos, 2 * i + 1].item() - math.cos(angle)) < 1e-6


@settings(max_examples=40, deadline=None)
@given(k=st.integers(1, 400), half_width=st.integers(1, 24))
def test_sinusoidal_offset_is_a_fixed_rotation(k, half_width):
    """PE[pos + k] = M_k PE[pos] for every pos, with one M_k per offset k."""
    d_model = 2 * half_width
    pe = sinusoidal_encoding(500, d_model).double()
    M_k = offset_matrix(k, d_model)
    assert torch.allclose(pe[:-k] @ M_k.T, pe[k:], atol=1e-5)
    assert torch.allclose(M_k @ M_k.T, torch.eye(d_model, dtype=torch.float64), atol=1e-12)


def test_sinusoidal_dot_products_depend_only_on_the_offset():
    pe = sinusoidal_encoding(300, 32).double()
    gram = pe @ pe.T                                                      # (300, 300)
    for k in range(-299, 300, 13):
        diagonal = gram.diagonal(k)
        assert torch.allclose(diagonal, diagonal[0].expand_as(diagonal), atol=1e-5)


def test_sinusoidal_far_positions_stay_accurate():
    """Angles in float64: position 4999 of the first pair is sin(4999) to float32 precision."""
    pe = sinusoidal_encoding(5000, 4)
    assert abs(pe[4999, 0].item() - math.sin(4999.0)) < 1e-6
    assert abs(pe[4999, 1].item() - math.cos(4999.0)) < 1e-6


def test_sinusoidal_matches_gptj_table():
    """transformers' GPT-J builds the same sinusoids, sines first and cosines second."""
    gptj = pytest.importorskip("transformers.models.gptj.modeling_gptj")
    reference = gptj.create_sinusoidal_positions(50, 16)                 # (50, 16) = [sin | cos]
    ours = sinusoidal_encoding(50, 16)
    assert torch.allclose(ours[:, 0::2], reference[:, :8], atol=1e-5)
    assert torch.allclose(ours[:, 1::2], reference[:, 8:], atol=1e-5)


@pytest.mark.parametrize("max_len, d_model", [(10, 7), (10, 1), (0, 8), (-3, 8), (10, 0), (10, 2.0), (True, 4)])
def test_sinusoidal_bad_sizes(max_len, d_model):
    with pytest.raises(ValueError, match="max_len|d_model"):
        sinusoidal_encoding(max_len, d_model)


# --- SinusoidalPositionalEncoding ----------------------------------------------------------------

def test_sinusoidal_module_adds_the_table(generator):
    module = SinusoidalPositionalEncoding(D, max_len=20)
    x = torch.randn(B, T, D, generator=generator)
    out = module(x)
    assert out.shape == (B, T, D)
    assert torch.allclose(out - x, sinusoidal_encoding(20, D)[:T].expand(B, T, D), atol=1e-6)
    assert list(module.state_dict()) == [] and sum(p.numel() for p in module.parameters()) == 0
    assert module.pe.shape == (20, D)                                     # a buffer, moved by .to()


def test_sinusoidal_module_keeps_the_dtype(generator):
    x = torch.randn(2, 5, 8, generator=generator, dtype=torch.float64)
    out = SinusoidalPositionalEncoding(8)(x)
    assert out.dtype == torch.float64


def test_sinusoidal_module_errors():
    module = SinusoidalPositionalEncoding(D, max_len=5)
    with pytest.raises(ValueError, match=r"T = 7.*max_len = 5"):
        module(torch.zeros(B, T, D))
    with pytest.raises(ValueError, match=r"d_model=32"):
        module(torch.zeros(B, 3, D + 1))
    with pytest.raises(ValueError, match=r"\(B, T, d_model"):
        module(torch.zeros(3, D))
    with pytest.raises(ValueError):
        SinusoidalPositionalEncoding(31)


def test_positions_break_permutation_equivariance(generator):
    """Without positions self-attention only permutes its output; with them it does not."""
    torch.manual_seed(0)
    mha = MultiHeadAttention(D, H).eval()
    x = torch.randn(B, T, D, generator=generator)
    order = torch.randperm(T, generator=generator)
    with torch.no_grad():
        assert torch.allclose(mha(x[:, order])[0], mha(x)[0][:, order], atol=1e-5)
        for positions in (SinusoidalPositionalEncoding(D), LearnedPositionalEmbedding(T, D)):
            out = mha(positions(x))[0]
            out_permuted = mha(positions(x[:, order]))[0]
            assert not torch.allclose(out_permuted, out[:, order], atol=1e-3)


# --- LearnedPositionalEmbedding ------------------------------------------------------------------

def test_learned_adds_rows_zero_to_T(generator):
    module = LearnedPositionalEmbedding(max_len=11, d_model=D)
    x = torch.randn(B, T, D, generator=generator)
    out = module(x)
    assert out.shape == (B, T, D)
    assert torch.allclose(out - x, module.embedding.weight[:T].expand(B, T, D), atol=1e-6)
    assert module.embedding.weight.shape == (11, D)
    assert 0.01 < module.embedding.weight.std().item() < 0.03              # BERT's initialiser, std 0.02


def test_learned_full_length_is_allowed_and_trains_only_used_rows(generator):
    module = LearnedPositionalEmbedding(max_len=T, d_model=D)
    module(torch.randn(B, T, D, generator=generator)).sum().backward()    # T == max_len is fine
    module.zero_grad()
    module(torch.randn(B, 4, D, generator=generator)).square().sum().backward()
    grad = module.embedding.weight.grad
    assert grad[:4].abs().sum() > 0 and torch.equal(grad[4:], torch.zeros_like(grad[4:]))


def test_learned_past_maximum_is_a_clear_value_error():
    module = LearnedPositionalEmbedding(max_len=512, d_model=16)
    with pytest.raises(ValueError, match=r"length T = 600 but this model was built for at most max_len = 512"):
        module(torch.zeros(1, 600, 16))
    with pytest.raises(ValueError, match=r"T = 513"):
        module(torch.zeros(2, 513, 16))


@pytest.mark.parametrize("args", [(0, 8), (8, 0), (8.0, 8), (-1, 8)])
def test_learned_bad_sizes(args):
    with pytest.raises(ValueError):
        LearnedPositionalEmbedding(*args)


def test_learned_wrong_width():
    with pytest.raises(ValueError, match="d_model=32"):
        LearnedPositionalEmbedding(10, D)(torch.zeros(B, T, 16))


# --- relative positions ---------------------------------------------------------------------------

def test_relative_positions_values():
    assert torch.equal(relative_positions(3), torch.tensor([[0, 1, 2], [-1, 0, 1], [-2, -1, 0]]))
    # S > T: the queries are the last T positions (as in causal_mask); the last query is at distance 0
    assert torch.equal(relative_positions(2, 4), torch.tensor([[-2, -1, 0, 1], [-3, -2, -1, 0]]))
    with pytest.raises(ValueError):
        relative_positions(0)
    with pytest.raises(ValueError):
        relative_positions(3, -1)


def test_relative_bias_shape_clipping_and_toeplitz(generator):
    module = RelativePositionBias(n_heads=H, max_distance=3)
    with torch.no_grad():
        module.bias.weight.copy_(torch.randn(7, H, generator=generator))
    bias = module(T)
    assert bias.shape == (H, T, T) and bias.dtype == torch.float32
    assert torch.equal(bias[:, 1:, 1:], bias[:, :-1, :-1])               # depends only on s - t
    table = module.bias.weight                                            # (2K + 1, H)
    for t in range(T):
        for s in range(T):
            bucket = max(-3, min(3, s - t)) + 3
            assert torch.equal(bias[:, t, s], table[bucket])
    assert module(5, 9).shape == (H, 5, 9)
    assert torch.equal(module(5, 9)[:, :, 4:], module(5)[:, :, :])        # keys 4..8 align with queries 0..4


def test_relative_bias_starts_neutral_and_learns():
    module = RelativePositionBias(n_heads=3, max_distance=2)
    assert torch.equal(module(4), torch.zeros(3, 4, 4))
    module(4).square().add(module(4)).sum().backward()
    assert module.bias.weight.grad is not None and module.bias.weight.grad.abs().sum() > 0


def test_biased_attention_matches_fused_attention_with_a_float_mask(generator):
    module = RelativePositionBias(n_heads=H, max_distance=4)
    with torch.no_grad():
        module.bias.weight.copy_(3 * torch.randn(9, H, generator=generator))
    q, k, v = (torch.randn(B, H, T, Dh, generator=generator) for _ in range(3))
    bias = module(T)                                                      # (H, T, T)
    weights = masked_softmax(q @ k.transpose(-2, -1) / math.sqrt(Dh) + bias)
    reference = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
    assert torch.allclose(weights @ v, reference, atol=1e-5)


@pytest.mark.parametrize("args", [(0, 3), (4, 0), (4, 2.5), (True, 3)])
def test_relative_bias_bad_arguments(args):
    with pytest.raises(ValueError):
        RelativePositionBias(*args)


# --- RotaryEmbedding -----------------------------------------------------------------------------

def rope_by_complex(x: torch.Tensor, positions: torch.Tensor, base: float = 10000.0) -> torch.Tensor:
    """Reference: pair i as a complex number, multiplied by e^{i m θ_i}."""
    d = x.shape[-1]
    theta = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    turn = torch.polar(torch.ones(len(positions), d // 2, dtype=torch.float64), positions.double()[:, None] * theta)
    z = torch.view_as_complex(x.double().reshape(*x.shape[:-1], d // 2, 2))
    return torch.view_as_real(z * turn).flatten(-2).to(x.dtype)


@pytest.mark.parametrize("shape, base", [((B, H, T, Dh), 10000.0), ((T, 2), 10000.0), ((3, 5, 32), 500.0)])
def test_rope_matches_complex_multiplication(shape, base, generator):
    x = torch.randn(shape, generator=generator)
    positions = torch.arange(shape[-2]) * 3 + 2
    rope = RotaryEmbedding(shape[-1], base=base)
    assert torch.allclose(rope(x, positions), rope_by_complex(x, positions, base), atol=1e-5)
    assert torch.allclose(rope(x), rope_by_complex(x, torch.arange(shape[-2]), base), atol=1e-5)


@settings(max_examples=40, deadline=None)
@given(m=st.integers(0, 200), n=st.integers(0, 200), c=st.integers(-100, 300),
       half=st.integers(1, 16), seed=st.integers(0, 2**16))
def test_rope_scores_depend_only_on_the_distance(m, n, c, half, seed):
    """<R_m q, R_n k> = <R_{m+c} q, R_{n+c} k> for any shift c (negative shifts included)."""
    d = 2 * half
    g = torch.Generator().manual_seed(seed)
    q, k = torch.randn(1, d, generator=g, dtype=torch.float64), torch.randn(1, d, generator=g, dtype=torch.float64)
    rope = RotaryEmbedding(d)
    near = (rope(q, torch.tensor([m])) * rope(k, torch.tensor([n]))).sum()
    far = (rope(q, torch.tensor([m + c])) * rope(k, torch.tensor([n + c]))).sum()
    scale = q.norm() * k.norm()
    assert abs(far.item() - near.item()) < 1e-4 * scale.item()


def test_rope_preserves_norms_and_leaves_position_zero_alone(generator):
    rope = RotaryEmbedding(Dh)
    x = torch.randn(B, H, T, Dh, generator=generator)
    rotated = rope(x)
    assert rotated.shape == x.shape
    assert torch.allclose(rotated.norm(dim=-1), x.norm(dim=-1), atol=1e-5)
    assert torch.equal(rotated[..., 0, :], x[..., 0, :])
    assert not torch.allclose(rotated[..., 1:, :], x[..., 1:, :], atol=1e-3)


def test_rope_rotates_adjacent_pairs():
    """(1, 0, 0, 0) at position 1 turns in the plane of features 0 and 1, by exactly 1 radian."""
    x = torch.tensor([[1.0, 0.0, 0.0, 0.0]])
    out = RotaryEmbedding(4)(x, torch.tensor([1]))
    assert torch.allclose(out, torch.tensor([[math.cos(1.0), math.sin(1.0), 0.0, 0.0]]), atol=1e-7)


def test_rope_composes_and_inverts(generator):
    rope = RotaryEmbedding(Dh)
    x = torch.randn(2, T, Dh, generator=generator)
    a, b = torch.arange(T) * 5, torch.arange(T) + 11
    assert torch.allclose(rope(rope(x, a), b), rope(x, a + b), atol=1e-4)
    assert torch.allclose(rope(rope(x, a), -a), x, atol=1e-5)


def test_rope_per_sequence_positions_broadcast(generator):
    rope = RotaryEmbedding(Dh)
    x = torch.randn(3, H, T, Dh, generator=generator)
    positions = torch.stack([torch.arange(T), torch.arange(T) + 4, torch.arange(T) * 2])   # (B, T)
    together = rope(x, positions[:, None, :])                            # (B, 1, T) broadcasts over heads
    for b in range(3):
        assert torch.allclose(together[b], rope(x[b], positions[b]), atol=1e-6)


def test_rope_keeps_dtype(generator):
    x = torch.randn(2, 5, 8, generator=generator, dtype=torch.float64)
    assert RotaryEmbedding(8)(x).dtype == torch.float64


def test_rope_matches_gptj():
    """transformers' GPT-J rotates adjacent pairs, like us; its tensors are (B, T, H, Dh)."""
    gptj = pytest.importorskip("transformers.models.gptj.modeling_gptj")
    g = torch.Generator().manual_seed(7)
    x = torch.randn(B, H, T, Dh, generator=g)                            # (B, H, T, Dh)
    table = gptj.create_sinusoidal_positions(T, Dh)                      # (T, Dh) = [sin | cos]
    sin, cos = table[None, :, :Dh // 2].expand(B, T, Dh // 2), table[None, :, Dh // 2:].expand(B, T, Dh // 2)
    reference = gptj.apply_rotary_pos_emb(x.transpose(1, 2), sin, cos).transpose(1, 2)
    assert torch.allclose(RotaryEmbedding(Dh)(x), reference, atol=1e-5)


def test_rope_matches_llama_after_permuting_features():
    """LLaMA pairs feature i with i + Dh/2: the same rotation once the features are permuted."""
    llama = pytest.importorskip("transformers.models.llama.modeling_llama")
    g = torch.Generator().manual_seed(8)
    q, k = torch.randn(B, H, T, Dh, generator=g), torch.randn(B, H, T, Dh, generator=g)
    theta = 10000.0 ** (-torch.arange(0, Dh, 2, dtype=torch.float32) / Dh)
    angle = torch.arange(T, dtype=torch.float32)[:, None] * torch.cat([theta, theta])    # (T, Dh)
    cos, sin = angle.cos()[None].expand(B, T, Dh), angle.sin()[None].expand(B, T, Dh)
    to_halves = torch.cat([torch.arange(0, Dh, 2), torch.arange(1, Dh, 2)])
    q_ref, k_ref = llama.apply_rotary_pos_emb(q[..., to_halves], k[..., to_halves], cos, sin)
    back = to_halves.argsort()
    rope = RotaryEmbedding(Dh)
    assert torch.allclose(rope(q), q_ref[..., back], atol=1e-5)
    assert torch.allclose(rope(k), k_ref[..., back], atol=1e-5)


def test_rope_errors():
    with pytest.raises(ValueError, match="even"):
        RotaryEmbedding(7)
    with pytest.raises(ValueError):
        RotaryEmbedding(0)
    with pytest.raises(ValueError, match="base"):
        RotaryEmbedding(8, base=1.0)
    rope = RotaryEmbedding(8)
    with pytest.raises(ValueError, match="d_head=8"):
        rope(torch.zeros(2, 5, 6))
    with pytest.raises(ValueError, match="d_head=8"):
        rope(torch.zeros(8))
    with pytest.raises(ValueError, match="positions"):
        rope(torch.zeros(2, 5, 8), torch.arange(4))                       # wrong length
    with pytest.raises(ValueError, match="positions"):
        rope(torch.zeros(3, 4, 5, 8), torch.zeros(3, 5, dtype=torch.long))  # (B, T) would pair B with H
    with pytest.raises(ValueError, match="positions"):
        rope(torch.zeros(2, 5, 8), [0, 1, 2, 3, 4])
