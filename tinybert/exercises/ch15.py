"""Hand-written (not generated): the checks for chapter 15's exercises (the BERT family
side by side).

Each ``check_*`` function calls the student's code on several inputs, including edge
cases, raises ``AssertionError`` saying what was expected and what came back, and prints
a line starting with ✓ when everything passes.
"""

from __future__ import annotations

import torch
from torch.utils.flop_counter import FlopCounterMode

from tinybert.exercises._assertions import answers_required
from tinybert.models.albert import AlbertConfig, AlbertModel
from tinybert.models.bert import BertConfig, BertModel
from tinybert.models.distilbert import DistilBertConfig, DistilBertModel

__all__ = ["check_prefix_lm_mask", "check_encoder_flops"]


# --- ex-family-prefix-mask ------------------------------------------------------------


def _prefix_rule(T: int, prefix: int) -> torch.Tensor:
    """The mask written out from its definition, one query-key pair at a time."""
    mask = torch.zeros(T, T, dtype=torch.bool)
    for query in range(T):
        for key in range(T):
            mask[query, key] = key <= query or (query < prefix and key < prefix)
    return mask


@answers_required
def check_prefix_lm_mask(prefix_lm_mask) -> None:
    """Check ``prefix_lm_mask(T, prefix)`` against the definition, for every prefix of
    several lengths."""
    for T in (1, 2, 5, 8):
        for prefix in range(T + 1):
            got = prefix_lm_mask(T, prefix)
            expected = _prefix_rule(T, prefix)
            assert isinstance(got, torch.Tensor), (
                f"prefix_lm_mask({T}, {prefix}) must return a torch.Tensor, got "
                f"{type(got).__name__}"
            )
            assert got.dtype == torch.bool, (
                f"prefix_lm_mask({T}, {prefix}) must be a bool mask (True = may "
                f"attend), got dtype {got.dtype}"
            )
            assert tuple(got.shape) == (T, T), (
                f"prefix_lm_mask({T}, {prefix}): expected shape ({T}, {T}), got "
                f"{tuple(got.shape)}"
            )
            if not torch.equal(got, expected):
                raise AssertionError(
                    f"prefix_lm_mask({T}, {prefix}) differs from the "
                    f"definition (rows = queries, columns = keys):\n"
                    f"  expected\n{expected.int()}\n"
                    f"  got\n{got.int()}"
                )
    for T, prefix in ((4, -1), (4, 5), (0, 1)):
        try:
            prefix_lm_mask(T, prefix)
        except ValueError:
            continue
        raise AssertionError(
            f"prefix_lm_mask({T}, {prefix}) must raise ValueError (prefix "
            f"outside [0, T])"
        )
    print(
        "✓ prefix_lm_mask: causal for prefix 0, full for prefix T, bidirectional "
        "prefix in between"
    )


# --- ex-family-flops ------------------------------------------------------------------


def _counted(
    model: torch.nn.Module, batch_size: int, seq_len: int, vocab_size: int
) -> int:
    ids = torch.randint(
        0, vocab_size, (batch_size, seq_len), generator=torch.Generator().manual_seed(0)
    )
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model.eval()(ids)
    return counter.get_total_flops()


@answers_required
def check_encoder_flops(encoder_flops) -> None:
    """Check ``encoder_flops(...)`` against PyTorch's FlopCounterMode on BERT,
    DistilBERT and ALBERT."""
    V = 50
    # (family, n_layers, d_model, n_heads, d_ff, batch_size, seq_len, embedding_size)
    cases = [
        ("BERT", 1, 16, 2, 32, 1, 1, None),
        ("BERT", 2, 32, 4, 64, 3, 7, None),
        ("BERT", 4, 128, 4, 512, 2, 64, None),
        ("DistilBERT", 2, 32, 4, 48, 2, 9, None),
        ("DistilBERT", 3, 24, 3, 24, 1, 5, None),
        ("ALBERT", 3, 32, 4, 64, 2, 9, 8),
        ("ALBERT", 4, 128, 4, 512, 2, 64, 64),
    ]
    for family, N, D, H, F, B, T, E in cases:
        sizes = dict(zip(("n_layers", "d_model", "n_heads", "d_ff"), (N, D, H, F)))
        common = dict(vocab_size=V, max_len=64, fast=False, **sizes)
        torch.manual_seed(0)
        if family == "BERT":
            model, kwargs = BertModel(BertConfig(**common)), {}
        elif family == "DistilBERT":
            model, kwargs = (
                DistilBertModel(DistilBertConfig(**common)),
                {"pooler": False},
            )
        else:
            model, kwargs = (
                AlbertModel(AlbertConfig(embedding_size=E, **common)),
                {"embedding_size": E},
            )
        expected = _counted(model, B, T, V)
        got = encoder_flops(N, D, F, B, T, **kwargs)
        call = (
            f"encoder_flops(n_layers={N}, d_model={D}, d_ff={F}, "
            f"batch_size={B}, seq_len={T}"
            + "".join(f", {k}={v}" for k, v in kwargs.items())
            + f") for a {family} encoder"
        )
        assert isinstance(got, int) and not isinstance(got, bool), (
            f"{call} must return an int, got {type(got).__name__} ({got!r})"
        )
        assert got == expected, (
            f"{call}: FlopCounterMode counts {expected:,} operations, got {got:,}"
        )
    print(
        "✓ encoder_flops matches PyTorch's FlopCounterMode on BERT, DistilBERT and "
        "ALBERT encoders"
    )
