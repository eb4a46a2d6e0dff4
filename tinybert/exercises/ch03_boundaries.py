"""Hand-written (not generated): the check for chapter 03's exercise on masks at the
library boundaries, ``check_mask_conversions`` (Hugging Face's 1/0 attention mask to the
book's bool mask, and that to ``nn.MultiheadAttention``'s ``key_padding_mask``).

Imported from ``tinybert.exercises.ch03``, the module the chapter's check cells use. The
references are the chapter's own functions in ``tinybert.blocks.attention``.
"""

from __future__ import annotations

import torch
from torch import nn

from tinybert.exercises._assertions import answers_required
from tinybert.blocks.attention import padding_mask, scaled_dot_product_attention
from tinybert.blocks.checks import describe
from tinybert.exercises._assertions import assert_close as _assert_close

__all__ = ["check_mask_conversions"]


# --- ex-attention-boundaries ----------------------------------------------------------


@answers_required
def check_mask_conversions(from_hf_attention_mask, to_key_padding_mask) -> None:
    """Check the two mask converters, the second one against a real
    ``nn.MultiheadAttention``."""
    right_padded = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 0, 0, 0, 0]])
    left_padded = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]])
    cases = [
        (
            "an int64 mask padded on the right",
            right_padded,
            padding_mask(torch.tensor([5, 3, 1]), S=5),
        ),
        (
            "an int64 mask padded on the left",
            left_padded,
            left_padded.bool()[:, None, None, :],
        ),
        (
            "a float mask of 1.0 and 0.0",
            right_padded.float(),
            padding_mask(torch.tensor([5, 3, 1]), S=5),
        ),
        (
            "an int32 mask of shape (1, 7)",
            torch.tensor([[1, 1, 1, 1, 0, 0, 0]], dtype=torch.int32),
            padding_mask(torch.tensor([4]), S=7),
        ),
    ]
    for description, hf, expected in cases:
        got = from_hf_attention_mask(hf.clone())
        assert isinstance(got, torch.Tensor) and got.dtype == torch.bool, (
            f"from_hf_attention_mask on {description}: expected a bool tensor, got "
            f"{got.dtype if isinstance(got, torch.Tensor) else type(got).__name__}"
        )
        assert got.shape == expected.shape, (
            f"from_hf_attention_mask on {description}: expected shape "
            f"{tuple(expected.shape)}, got {tuple(got.shape)}"
        )
        assert torch.equal(got, expected), (
            f"from_hf_attention_mask on {description}:\n"
            f"  expected {expected.flatten(1)}\n  got      {got.flatten(1)}"
        )

    for lengths, S in [([5, 3, 1], 5), ([2], 9), ([4, 4, 1, 3], 4)]:
        ours = padding_mask(torch.tensor(lengths), S=S)
        # True = ignore
        expected = torch.arange(S)[None, :] >= torch.tensor(lengths)[:, None]
        got = to_key_padding_mask(ours.clone())
        assert (
            isinstance(got, torch.Tensor)
            and got.dtype == torch.bool
            and got.shape == expected.shape
        ), (
            f"to_key_padding_mask for lengths {lengths}: expected a bool tensor of "
            f"shape {tuple(expected.shape)}, got "
            f"{describe(got)}"
        )
        assert torch.equal(got, expected), (
            f"to_key_padding_mask for lengths {lengths}: expected {expected}, got "
            f"{got} (True must mean 'ignore')"
        )

    # The real thing: nn.MultiheadAttention with identity projections is our attention
    # with q = k = v = x.
    g = torch.Generator().manual_seed(303)
    E = 8
    mha = nn.MultiheadAttention(E, num_heads=1, bias=False, batch_first=True)
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.eye(E).repeat(3, 1))
        mha.out_proj.weight.copy_(torch.eye(E))
    hf = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 0, 0, 0, 0], [0, 0, 0, 1, 1, 1]])
    x = torch.randn(3, 6, E, generator=g)
    ours = from_hf_attention_mask(hf)
    reference, _ = scaled_dot_product_attention(x, x, x, mask=hf.bool()[:, None, :])
    got, _ = mha(x, x, x, key_padding_mask=to_key_padding_mask(ours))
    _assert_close(
        "nn.MultiheadAttention(key_padding_mask="
        "to_key_padding_mask(from_hf_attention_mask(hf)))",
        got.detach(),
        reference,
        atol=1e-5,
    )
    print(
        "✓ from_hf_attention_mask and to_key_padding_mask convert both ways, "
        "and nn.MultiheadAttention agrees with the book's attention"
    )
