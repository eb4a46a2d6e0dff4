"""Hand-written (not generated): the checks for chapter 14's exercises (ALBERT).

Each ``check_*`` function calls the student's code on several inputs, including odd
sizes and edge cases, raises ``AssertionError`` saying what was expected and what came
back, and prints a line starting with ✓ when everything passes. The sentence-order
check, ``check_sop_pairs``, lives in ``tinybert.exercises.ch14_sop`` and is re-exported
here, the module the chapter's check cells import from.
"""

from __future__ import annotations

import copy

import torch
from torch import nn

from tinybert.exercises._assertions import answers_required
from tinybert.exercises._assertions import assert_close as _assert_close
from tinybert.exercises.ch14_sop import check_sop_pairs
from tinybert.blocks.feedforward import count_parameters
from tinybert.models.albert import AlbertConfig, AlbertEmbeddings, AlbertEncoder
from tinybert.models.bert import BertConfig
from tinybert.models.bert_layers import BertLayer

__all__ = [
    "check_albert_embedding_parameters",
    "check_shared_layers",
    "check_sop_pairs",
]


# --- ex-albert-embedding-count --------------------------------------------------------


@answers_required
def check_albert_embedding_parameters(albert_embedding_parameters) -> None:
    """Check ``albert_embedding_parameters(V, E, D, max_len, type_vocab_size=2)``
    against AlbertEmbeddings."""
    cases = [
        (30000, 128, 768, 512, 2),
        (30000, 128, 1024, 512, 2),
        (99, 16, 32, 23, 2),
        (8192, 128, 256, 128, 2),
        (101, 37, 37, 7, 3),
        (5, 1, 4, 1, 1),
        (1000, 300, 64, 50, 4),
    ]
    for V, E, D, P, S in cases:
        config = AlbertConfig(
            vocab_size=V,
            embedding_size=E,
            d_model=D,
            n_heads=1,
            max_len=P,
            type_vocab_size=S,
        )
        with torch.device("meta"):
            expected = count_parameters(AlbertEmbeddings(config))
        got = (
            albert_embedding_parameters(V, E, D, P)
            if S == 2
            else albert_embedding_parameters(V, E, D, P, type_vocab_size=S)
        )
        assert isinstance(got, int) and not isinstance(got, bool), (
            f"albert_embedding_parameters must return an int, got "
            f"{type(got).__name__} ({got!r})"
        )
        assert got == expected, (
            f"albert_embedding_parameters(vocab_size={V}, "
            f"embedding_size={E}, d_model={D}, max_len={P}, "
            f"type_vocab_size={S}): expected "
            f"{expected:,}, got {got:,}"
        )
    print(
        "✓ albert_embedding_parameters matches AlbertEmbeddings (tables, LayerNorm "
        "over E, projection E -> D)"
    )


# --- ex-albert-shared-layers ----------------------------------------------------------


def _layer(seed: int, d_model: int = 32, n_heads: int = 4, d_ff: int = 37) -> BertLayer:
    torch.manual_seed(seed)
    layer = BertLayer(
        BertConfig(
            d_model=d_model,
            n_heads=n_heads,
            d_ff=d_ff,
            dropout=0.0,
            attention_dropout=0.0,
        )
    )
    # move biases and LayerNorms off their initial values
    with torch.no_grad():
        for p in layer.parameters():
            p.add_(0.1 * torch.randn_like(p))
    return layer.eval()


@answers_required
def check_shared_layers(SharedLayers) -> None:
    """Check ``SharedLayers(layer, n_layers)``: one module applied n_layers times, its
    parameters only."""
    g = torch.Generator().manual_seed(13)
    for n_layers in (1, 4):
        layer = _layer(n_layers)
        shared = SharedLayers(layer, n_layers)
        assert isinstance(shared, nn.Module), (
            f"SharedLayers must be an nn.Module, got {type(shared).__name__}"
        )
        assert count_parameters(shared) == count_parameters(layer), (
            f"SharedLayers(layer, {n_layers}) must hold the parameters of one layer "
            f"({count_parameters(layer):,}), got {count_parameters(shared):,}"
        )
        own = {id(p) for p in layer.parameters()}
        assert all(id(p) in own for p in shared.parameters()), (
            "SharedLayers must use the layer it was given (the same parameter "
            "tensors), not a copy"
        )
        x = torch.randn(13, 7, 32, generator=g)
        mask = (torch.arange(7)[None, :] < torch.randint(1, 8, (13, 1), generator=g))[
            :, None, None, :
        ]
        for m in (None, mask):
            expected = x
            with torch.no_grad():
                for _ in range(n_layers):
                    expected = layer(expected, m)
                got = shared(x, m) if m is not None else shared(x)
            what = "with a padding mask" if m is not None else "without a mask"
            _assert_close(
                f"SharedLayers(layer, {n_layers}) {what}", got, expected, atol=1e-5
            )

    # The same function as ALBERT's encoder with one group.
    layer = _layer(7)
    encoder = AlbertEncoder(
        AlbertConfig(d_model=32, n_heads=4, d_ff=37, n_layers=4, activation="gelu")
    ).eval()
    encoder.groups[0][0].load_state_dict(layer.state_dict())
    x = torch.randn(3, 5, 32, generator=g)
    with torch.no_grad():
        _assert_close(
            "SharedLayers(layer, 4) against AlbertEncoder (N = 4, G = 1)",
            SharedLayers(layer, 4)(x),
            encoder(x)[0],
            atol=1e-5,
        )

    # The gradient of a shared weight is the sum of the gradients of N separate copies.
    layer = _layer(11)
    copies = [copy.deepcopy(layer) for _ in range(3)]
    x = torch.randn(4, 6, 32, generator=g)
    y = x
    for c in copies:
        y = c(y)
    (y**2).mean().backward()
    shared = SharedLayers(layer, 3)
    (shared(x) ** 2).mean().backward()
    for (name, p), *same in zip(
        layer.named_parameters(), *(c.parameters() for c in copies)
    ):
        assert p.grad is not None, f"no gradient reached the shared layer's {name}"
        _assert_close(
            f"gradient of the shared {name} (sum over the 3 depths)",
            p.grad,
            sum(q.grad for q in same),
            atol=1e-5,
        )

    for bad in (0, -2, 2.0, True):
        try:
            SharedLayers(_layer(0), bad)
        except ValueError:
            continue
        raise AssertionError(
            f"SharedLayers(layer, {bad!r}) must raise ValueError (n_layers must be a "
            f"positive int)"
        )
    print(
        "✓ SharedLayers applies one layer N times, holds one layer's parameters, "
        "matches AlbertEncoder, and sums the gradients of all depths"
    )
