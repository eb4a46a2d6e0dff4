"""Hand-written (not generated): the checks for chapter 01's exercises
(feed-forward networks).

Each ``check_*`` function calls the student's code on several inputs, including odd
sizes and edge cases, raises ``AssertionError`` saying what was expected and what came
back, and prints a line starting with ✓ when everything passes.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from tinybert.exercises._assertions import answers_required
from tinybert.exercises._assertions import assert_close as _assert_close

__all__ = ["check_cross_entropy", "check_silu", "check_mlp_parameter_count"]


# --- ex-ffn-cross-entropy -------------------------------------------------------------


@answers_required
def check_cross_entropy(cross_entropy) -> None:
    """Check ``cross_entropy(logits (N, C), targets (N,)) -> mean loss`` against
    ``F.cross_entropy``."""
    g = torch.Generator().manual_seed(101)
    cases = []
    for n, c, scale in [
        (13, 7, 1.0),
        (1, 5, 3.0),
        (4, 1, 1.0),
        (9, 2, 10.0),
        (6, 37, 0.1),
    ]:
        logits = scale * torch.randn(n, c, generator=g)
        targets = torch.randint(0, c, (n,), generator=g)
        cases.append((f"random logits of shape ({n}, {c})", logits, targets))
    base_logits, base_targets = cases[0][1], cases[0][2]
    cases.append(
        ("the (13, 7) logits shifted by +1000", base_logits + 1000.0, base_targets)
    )
    cases.append(
        ("the (13, 7) logits shifted by -1000", base_logits - 1000.0, base_targets)
    )
    cases.append(
        (
            "huge logits [[1000, 0], [0, -1000], [500, 500]]",
            torch.tensor([[1000.0, 0.0], [0.0, -1000.0], [500.0, 500.0]]),
            torch.tensor([1, 0, 1]),
        )
    )

    for description, logits, targets in cases:
        expected = F.cross_entropy(logits, targets)
        got = cross_entropy(logits, targets)
        _assert_close(
            f"cross_entropy on {description}", got, expected, atol=1e-4, rtol=1e-5
        )

    # One class only: the softmax is 1 and the loss is exactly 0.
    got = cross_entropy(
        torch.randn(5, 1, generator=g), torch.zeros(5, dtype=torch.long)
    )
    _assert_close(
        "cross_entropy with a single class (the loss must be 0)",
        got,
        torch.tensor(0.0),
        atol=1e-6,
    )

    # The gradient of the mean loss w.r.t. the logits is (softmax - one_hot) / N.
    logits = (5 * torch.randn(11, 3, generator=g)).requires_grad_(True)
    targets = torch.randint(0, 3, (11,), generator=g)
    loss = cross_entropy(logits, targets)
    assert loss.requires_grad, (
        "cross_entropy: the result must be differentiable "
        "w.r.t. the logits (build it from torch operations on "
        "`logits`, without .detach() or .item())"
    )
    loss.backward()
    expected_grad = (
        torch.softmax(logits.detach(), -1) - F.one_hot(targets, 3).float()
    ) / 11
    _assert_close(
        "gradient of cross_entropy w.r.t. the logits",
        logits.grad,
        expected_grad,
        atol=1e-6,
    )

    # The gradient must stay finite (no nan) for huge logits as well.
    huge = torch.tensor([[1000.0, -1000.0, 0.0]], requires_grad=True)
    cross_entropy(huge, torch.tensor([1])).backward()
    _assert_close(
        "gradient for huge logits [[1000, -1000, 0]], target 1",
        huge.grad,
        torch.tensor([[1.0, -1.0, 0.0]]),
        atol=1e-6,
    )
    print(
        "✓ cross_entropy matches F.cross_entropy (values and gradients), including "
        "logits of ±1000"
    )


# --- ex-ffn-silu ----------------------------------------------------------------------


@answers_required
def check_silu(silu, silu_derivative) -> None:
    """Check ``silu(x)`` against ``F.silu`` and ``silu_derivative(x)`` against
    autograd."""
    g = torch.Generator().manual_seed(102)
    inputs = {
        "a grid on [-8, 8]": torch.linspace(-8, 8, 1601),
        "random values of shape (3, 5, 7)": 3 * torch.randn(3, 5, 7, generator=g),
        "a 0-dimensional tensor 0.5": torch.tensor(0.5),
        "large values [-100, -30, 30, 100]": torch.tensor([-100.0, -30.0, 30.0, 100.0]),
        "float64 values of shape (13,)": torch.randn(
            13, generator=g, dtype=torch.float64
        ),
    }
    for description, x in inputs.items():
        given = x.clone()
        _assert_close(f"silu on {description}", silu(given), F.silu(x), atol=1e-6)
        assert torch.equal(given, x), f"silu changed its input ({description})"
        leaf = x.clone().requires_grad_(True)
        (expected,) = torch.autograd.grad(F.silu(leaf).sum(), leaf)
        given = x.clone()
        got = silu_derivative(given)
        assert torch.equal(given, x), (
            f"silu_derivative changed its input ({description})"
        )
        _assert_close(f"silu_derivative on {description}", got, expected, atol=1e-6)
        assert got.dtype == x.dtype, (
            f"silu_derivative: expected dtype {x.dtype}, got {got.dtype}"
        )

    # Two values worth knowing by heart: SiLU'(0) = 1/2, and SiLU' dips below 0 for
    # negative inputs.
    _assert_close(
        "silu_derivative(0)",
        silu_derivative(torch.tensor(0.0)),
        torch.tensor(0.5),
        atol=1e-7,
    )
    assert silu_derivative(torch.tensor(-2.0)).item() < 0, (
        f"silu_derivative(-2) should be negative, got "
        f"{silu_derivative(torch.tensor(-2.0)).item()}"
    )
    print(
        "✓ silu matches F.silu and silu_derivative matches autograd on all test inputs"
    )


# --- ex-ffn-mlp-params ----------------------------------------------------------------


@answers_required
def check_mlp_parameter_count(mlp_parameter_count) -> None:
    """Check ``mlp_parameter_count(sizes)`` against counting the parameters of a real
    ``MLP(sizes)``."""
    from tinybert.blocks.feedforward import MLP, count_parameters

    cases = [
        [2, 1],
        [1, 1],
        [7, 13, 5],
        [2, 220, 1],
        [2, 16, 16, 16, 16, 1],
        [3, 37, 37, 2],
        [768, 3072, 768],
        [5, 1, 5, 1, 5],
    ]
    for sizes in cases:
        expected = count_parameters(MLP(sizes))
        got = mlp_parameter_count(list(sizes))
        assert isinstance(got, int) and not isinstance(got, bool), (
            f"mlp_parameter_count({sizes}): expected a Python int, got "
            f"{type(got).__name__} {got!r}"
        )
        assert got == expected, (
            f"mlp_parameter_count({sizes}): expected {expected}, got {got}"
        )

    got = mlp_parameter_count((4, 9, 2))
    assert got == count_parameters(MLP([4, 9, 2])), (
        f"mlp_parameter_count((4, 9, 2)) with a tuple: expected "
        f"{count_parameters(MLP([4, 9, 2]))}, got {got}"
    )

    for bad in ([], [5]):
        try:
            result = mlp_parameter_count(bad)
        except ValueError:
            continue
        raise AssertionError(
            f"mlp_parameter_count({bad}): expected a ValueError, got {result!r}"
        )
    print(
        f"✓ mlp_parameter_count agrees with count_parameters(MLP(sizes)) on "
        f"{len(cases) + 1} configurations and rejects fewer than two sizes"
    )
