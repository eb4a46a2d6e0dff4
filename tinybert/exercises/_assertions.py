"""Hand-written: the comparison every exercise check uses, with a message a student
can act on."""

from __future__ import annotations

import torch

__all__ = ["assert_close"]


def assert_close(
    name: str, got, expected: torch.Tensor, atol: float = 1e-5, rtol: float = 1e-5
) -> None:
    """Assert that ``got`` is a finite tensor of ``expected``'s shape with (nearly)
    its values."""
    assert isinstance(got, torch.Tensor), (
        f"{name}: expected a torch.Tensor, got {type(got).__name__}"
    )
    assert got.shape == expected.shape, (
        f"{name}: expected shape {tuple(expected.shape)}, got {tuple(got.shape)}"
    )
    assert torch.isfinite(got).all(), (
        f"{name}: expected finite values (no NaN or inf), got\n{got}"
    )
    if not torch.allclose(got.to(expected.dtype), expected, atol=atol, rtol=rtol):
        worst = (got.to(expected.dtype) - expected).abs().max().item()
        raise AssertionError(
            f"{name}: values differ from the reference by up to "
            f"{worst:.3g}\n  expected {expected}\n  got      {got}"
        )
