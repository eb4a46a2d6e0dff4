"""Hand-written (not generated): the checks for chapter 05's exercises
(positional encoding).

Each ``check_*`` function calls the student's code on several inputs, including odd
sizes and edge cases, raises ``AssertionError`` saying what was expected and what came
back, and prints a line starting with ✓ when everything passes.
"""

from __future__ import annotations

import math

import torch

from tinybert.exercises._assertions import answers_required
from tinybert.exercises._assertions import assert_close as _assert_close

__all__ = ["check_sinusoidal_table", "check_rope_rotate", "check_alibi_bias"]


# --- ex-pos-sinusoidal-table ----------------------------------------------------------


@answers_required
def check_sinusoidal_table(sinusoidal_table) -> None:
    """Check ``sinusoidal_table(max_len, d_model)`` against the formula and
    ``sinusoidal_encoding``."""
    from tinybert.blocks.positional import sinusoidal_encoding

    for max_len, d_model in [(1, 2), (7, 32), (50, 64), (13, 6), (200, 2), (3, 512)]:
        got = sinusoidal_table(max_len, d_model)
        _assert_close(
            f"sinusoidal_table({max_len}, {d_model})",
            got,
            sinusoidal_encoding(max_len, d_model),
            atol=1e-4,
            rtol=0,
        )

    # Known values, written out: position 0 is (0, 1, 0, 1, ...); position p of a
    # width-4 table is (sin p, cos p, sin p/100, cos p/100) because 10000^(2/4) = 100.
    _assert_close(
        "sinusoidal_table(5, 10)[0] (position 0)",
        sinusoidal_table(5, 10)[0],
        torch.tensor([0.0, 1.0] * 5),
        atol=1e-6,
    )
    for p in (1, 2):
        expected = torch.tensor(
            [math.sin(p), math.cos(p), math.sin(p / 100), math.cos(p / 100)]
        )
        _assert_close(
            f"sinusoidal_table(3, 4)[{p}] (position {p})",
            sinusoidal_table(3, 4)[p],
            expected,
            atol=1e-6,
        )

    got = sinusoidal_table(4, 8)
    assert got.dtype.is_floating_point, (
        f"sinusoidal_table: expected a float tensor, got {got.dtype}"
    )

    for bad in (7, 1):
        try:
            result = sinusoidal_table(5, bad)
        except ValueError:
            continue
        raise AssertionError(
            f"sinusoidal_table(5, {bad}) with an odd d_model: "
            f"expected a ValueError, got a result of shape "
            f"{tuple(getattr(result, 'shape', ()))}"
        )
    print(
        "✓ sinusoidal_table matches the formula and sinusoidal_encoding, and "
        "rejects odd widths"
    )


# --- ex-pos-rope-rotate ---------------------------------------------------------------


@answers_required
def check_rope_rotate(rope_rotate) -> None:
    """Check ``rope_rotate(x, positions, base)`` against ``RotaryEmbedding`` and RoPE's
    two properties."""
    from tinybert.blocks.rotary import RotaryEmbedding

    g = torch.Generator().manual_seed(505)
    cases = [
        (
            "x of shape (13, 4, 7, 32), positions 0..6",
            (13, 4, 7, 32),
            torch.arange(7),
            10000.0,
        ),
        ("x of shape (7, 2), positions 0..6", (7, 2), torch.arange(7), 10000.0),
        (
            "x of shape (3, 5, 6), positions 10..14, base 500",
            (3, 5, 6),
            torch.arange(10, 15),
            500.0,
        ),
        (
            "x of shape (2, 1, 4, 16), positions [0, 3, 3, 100]",
            (2, 1, 4, 16),
            torch.tensor([0, 3, 3, 100]),
            10000.0,
        ),
    ]
    for description, shape, positions, base in cases:
        x = torch.randn(shape, generator=g)
        expected = RotaryEmbedding(shape[-1], base=base)(x, positions)
        got = rope_rotate(x.clone(), positions, base=base)
        _assert_close(
            f"rope_rotate on {description}", got, expected, atol=1e-4, rtol=1e-5
        )

    x64 = torch.randn(5, 12, dtype=torch.float64, generator=g)
    got = rope_rotate(x64, torch.arange(5))
    assert isinstance(got, torch.Tensor) and got.dtype == torch.float64, (
        f"rope_rotate on float64 input: expected a float64 result, got "
        f"{got.dtype if isinstance(got, torch.Tensor) else type(got).__name__}"
    )

    # Position 0 is no rotation at all; the rotation of pair 0 at position 1 is by
    # exactly 1 radian.
    x = torch.randn(1, 8, generator=g)
    _assert_close(
        "rope_rotate at position 0 (must return x unchanged)",
        rope_rotate(x, torch.tensor([0])),
        x,
        atol=1e-6,
    )
    e0 = torch.zeros(1, 4)
    e0[0, 0] = 1.0
    expected = torch.tensor([[math.cos(1.0), math.sin(1.0), 0.0, 0.0]])
    _assert_close(
        "rope_rotate of (1, 0, 0, 0) at position 1 (pair 0 turns by 1 "
        "radian, (1, 0) -> (cos 1, sin "
        "1))",
        rope_rotate(e0, torch.tensor([1])),
        expected,
        atol=1e-6,
    )

    # A rotation preserves lengths.
    x = torch.randn(3, 9, 20, generator=g)
    _assert_close(
        "norms of rope_rotate(x) (a rotation keeps every vector's length)",
        rope_rotate(x, torch.arange(9)).norm(dim=-1),
        x.norm(dim=-1),
        atol=1e-4,
    )

    # <R_m q, R_n k> depends only on m - n.
    q, k = torch.randn(16, generator=g), torch.randn(16, generator=g)
    for m, n, shift in [(3, 1, 5), (0, 7, 20), (11, 11, 3)]:
        near = (
            rope_rotate(q[None], torch.tensor([m]))[0]
            @ rope_rotate(k[None], torch.tensor([n]))[0]
        )
        far = (
            rope_rotate(q[None], torch.tensor([m + shift]))[0]
            @ rope_rotate(k[None], torch.tensor([n + shift]))[0]
        )
        _assert_close(
            f"<R_{m + shift} q, R_{n + shift} k> vs <R_{m} q, R_{n} k> (the "
            f"score must depend only on m - n)",
            far,
            near,
            atol=1e-4,
        )
    print(
        "✓ rope_rotate matches RotaryEmbedding, keeps norms, and its scores depend "
        "only on m - n"
    )


# --- ex-pos-alibi ---------------------------------------------------------------------


def _alibi_reference(n_heads: int, T: int) -> torch.Tensor:
    # (H,)
    slopes = torch.tensor([2.0 ** (-8.0 * (h + 1) / n_heads) for h in range(n_heads)])
    position = torch.arange(T)
    # (T, T)
    distance = (position[None, :] - position[:, None]).abs().float()
    # (H, T, T)
    return -slopes[:, None, None] * distance


@answers_required
def check_alibi_bias(alibi_bias) -> None:
    """Check ``alibi_bias(n_heads, T)`` against the formula -2^(-8(h+1)/H) |s - t|."""
    for n_heads, T in [(8, 5), (4, 7), (1, 3), (12, 1), (3, 13)]:
        _assert_close(
            f"alibi_bias({n_heads}, {T})",
            alibi_bias(n_heads, T),
            _alibi_reference(n_heads, T),
            atol=1e-6,
        )

    bias = alibi_bias(8, 4)
    _assert_close(
        "alibi_bias(8, 4)[0, 0] (head 0 has slope 1/2)",
        bias[0, 0],
        torch.tensor([0.0, -0.5, -1.0, -1.5]),
        atol=1e-6,
    )
    _assert_close(
        "alibi_bias(8, 4)[7, 3] (head 7 has slope 1/256)",
        bias[7, 3],
        torch.tensor([-3.0, -2.0, -1.0, 0.0]) / 256,
        atol=1e-7,
    )
    assert torch.equal(bias, bias.transpose(-2, -1)), (
        "alibi_bias: expected a symmetric bias in (t, s)"
    )
    assert bias.diagonal(dim1=-2, dim2=-1).abs().max() == 0, (
        "alibi_bias: expected 0 at distance 0"
    )
    print(
        "✓ alibi_bias matches -m_h |s - t| with slopes 2^(-8(h+1)/H), for several head "
        "counts and lengths"
    )
