"""Hand-written (not generated): the check for chapter 02's recurrence exercise,
``check_gru_cell`` (one step of a GRU, against ``nn.GRUCell``).

Imported from ``tinybert.exercises.ch02``, the module the chapter's check cells use.
"""

from __future__ import annotations

import torch
from torch import nn

from tinybert.exercises._assertions import answers_required
from tinybert.exercises._assertions import assert_close as _assert_close

__all__ = ["check_gru_cell"]


# --- ex-wv-gru ------------------------------------------------------------------------


@answers_required
def check_gru_cell(gru_cell) -> None:
    """Check ``gru_cell(x, h, weight_ih, weight_hh, bias_ih, bias_hh)`` against
    ``nn.GRUCell``."""
    g = torch.Generator().manual_seed(203)
    for B, I, H, dtype in [
        (13, 7, 5, torch.float32),
        (1, 3, 1, torch.float32),
        (4, 32, 37, torch.float32),
        (6, 5, 9, torch.float64),
    ]:
        torch.manual_seed(B * 1000 + I * 10 + H)
        reference = nn.GRUCell(I, H).to(dtype)
        # make every bias matter (defaults are small)
        with torch.no_grad():
            reference.bias_ih.normal_(generator=g)
            reference.bias_hh.normal_(generator=g)
        x = torch.randn(B, I, generator=g, dtype=dtype)
        h = torch.randn(B, H, generator=g, dtype=dtype)
        with torch.no_grad():
            expected = reference(x, h)
            got = gru_cell(
                x,
                h,
                reference.weight_ih.clone(),
                reference.weight_hh.clone(),
                reference.bias_ih.clone(),
                reference.bias_hh.clone(),
            )
        atol = 1e-12 if dtype == torch.float64 else 1e-6
        _assert_close(
            f"gru_cell with B={B}, I={I}, H={H}, {dtype}", got, expected, atol=atol
        )
        assert got.dtype == dtype, f"gru_cell: expected dtype {dtype}, got {got.dtype}"

    # A run over a sequence must follow nn.GRU step by step.
    torch.manual_seed(0)
    gru = nn.GRU(6, 8, batch_first=True)
    x = torch.randn(3, 11, 6, generator=g)
    with torch.no_grad():
        expected, _ = gru(x)
        h = torch.zeros(3, 8)
        for t in range(11):
            h = gru_cell(
                x[:, t],
                h,
                gru.weight_ih_l0,
                gru.weight_hh_l0,
                gru.bias_ih_l0,
                gru.bias_hh_l0,
            )
            _assert_close(
                f"gru_cell run over a sequence, step {t}", h, expected[:, t], atol=1e-5
            )
    print(
        "✓ gru_cell matches nn.GRUCell (float32 and float64, odd sizes) and nn.GRU "
        "over 11 steps"
    )
