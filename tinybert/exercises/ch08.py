"""Hand-written (not generated): the checks for chapter 08's exercises (BERT).

Each ``check_*`` function calls the student's code on several inputs, including odd
sizes and edge cases, raises ``AssertionError`` saying what was expected and what came
back, and prints a line starting with ✓ when everything passes. The attention-probing
check, ``check_offset_baseline``, lives in ``tinybert.exercises.ch08_probing`` and is
re-exported here, the module the chapter's check cells import from.
"""

from __future__ import annotations

import torch

from tinybert.exercises._assertions import answers_required
from tinybert.exercises._assertions import assert_close as _assert_close
from tinybert.exercises.ch08_probing import check_offset_baseline

__all__ = [
    "check_bert_input_embeddings",
    "check_bert_parameter_count",
    "check_mean_pool",
    "check_offset_baseline",
]


# --- ex-bert-embeddings ---------------------------------------------------------------


@answers_required
def check_bert_input_embeddings(bert_input_embeddings) -> None:
    """Check ``bert_input_embeddings`` against BertEmbeddings (eval mode, so no
    dropout)."""
    from tinybert.models.bert import BertConfig
    from tinybert.models.bert_layers import BertEmbeddings

    g = torch.Generator().manual_seed(801)
    # (B, T, V, D, P, eps)
    cases = [
        (13, 7, 99, 32, 23, 1e-12),
        (1, 1, 5, 8, 1, 1e-12),
        (2, 11, 40, 12, 11, 1e-5),
        (3, 5, 17, 6, 9, 1e-3),
    ]
    for B, T, V, D, P, eps in cases:
        config = BertConfig(
            vocab_size=V,
            d_model=D,
            n_layers=1,
            n_heads=1,
            d_ff=4,
            max_len=P,
            layer_norm_eps=eps,
        )
        embeddings = BertEmbeddings(config).eval()
        with torch.no_grad():
            for p in embeddings.parameters():
                p.copy_(
                    torch.randn(p.shape, generator=g) * (0.5 if p.dim() == 1 else 1.0)
                    + (1.0 if p is embeddings.norm.weight else 0.0)
                )
        ids = torch.randint(0, V, (B, T), generator=g)
        segments = torch.randint(0, 2, (B, T), generator=g)
        with torch.no_grad():
            expected = embeddings(ids, segments)
            got = bert_input_embeddings(
                ids,
                segments,
                embeddings.token_embeddings.weight.clone(),
                embeddings.segment_embeddings.weight.clone(),
                embeddings.position_embeddings.weight.clone(),
                embeddings.norm.weight.clone(),
                embeddings.norm.bias.clone(),
                eps,
            )
        _assert_close(
            f"bert_input_embeddings with B={B}, T={T}, V={V}, D={D}, "
            f"max_len={P}, eps={eps}",
            got,
            expected,
            atol=1e-4,
        )
    print(
        f"✓ bert_input_embeddings equals BertEmbeddings on {len(cases)} "
        f"configurations (including B = T = 1 and T = max_len)"
    )


# --- ex-bert-parameter-count ----------------------------------------------------------


@answers_required
def check_bert_parameter_count(bert_parameter_count) -> None:
    """Check ``bert_parameter_count`` against count_parameters of BertModels built on
    the meta device."""
    from tinybert.blocks.feedforward import count_parameters
    from tinybert.models.bert import BertConfig, BertModel

    # (vocab_size, d_model, n_layers, n_heads, d_ff, max_len, type_vocab_size, pooler)
    cases = [
        (30522, 768, 12, 12, 3072, 512, 2, True),
        (30522, 1024, 24, 16, 4096, 512, 2, True),
        (8192, 256, 4, 4, 1024, 128, 2, True),
        (99, 32, 3, 4, 37, 23, 2, False),
        (50, 12, 1, 3, 7, 9, 3, True),
        (28996, 768, 12, 12, 3072, 512, 2, False),
    ]
    fields = "vocab_size d_model n_layers n_heads d_ff max_len type_vocab_size".split()
    for *sizes, pooler in cases:
        V, D, N, H, F, P, S = sizes
        config = BertConfig(**dict(zip(fields, sizes)))
        with torch.device("meta"):
            expected = count_parameters(BertModel(config, add_pooler=pooler))
        got = bert_parameter_count(V, D, N, F, P, type_vocab_size=S, pooler=pooler)
        assert isinstance(got, int) and not isinstance(got, bool), (
            f"bert_parameter_count: expected an int, got {type(got).__name__} {got!r}"
        )
        assert got == expected, (
            f"bert_parameter_count(vocab_size={V}, d_model={D}, n_layers={N}, "
            f"d_ff={F}, max_len={P}, type_vocab_size={S}, pooler={pooler}): expected "
            f"{expected:,}, got {got:,} (off by {got - expected:+,})"
        )
    print(
        f"✓ bert_parameter_count matches the built models on {len(cases)} "
        f"configurations (BERT-base 109,482,240, BERT-large 335,141,888)"
    )


# --- ex-bert-mean-pool ----------------------------------------------------------------


@answers_required
def check_mean_pool(mean_pool) -> None:
    """Check ``mean_pool(hidden, attention_mask)`` on odd shapes, both mask types, and
    padding garbage."""
    g = torch.Generator().manual_seed(803)
    for B, T, D in [(13, 7, 32), (1, 1, 5), (4, 9, 3)]:
        hidden = torch.randn(B, T, D, generator=g)
        lengths = torch.randint(1, T + 1, (B,), generator=g)
        # (B, T) 1 = real
        mask = (torch.arange(T)[None, :] < lengths[:, None]).long()
        expected = torch.stack([hidden[b, : lengths[b]].mean(dim=0) for b in range(B)])
        for what, m in [("0/1 int mask", mask), ("bool mask", mask.bool())]:
            got = mean_pool(hidden, m)
            _assert_close(
                f"mean_pool with B={B}, T={T}, D={D} and a {what}", got, expected
            )
        # padding must not count
        garbage = hidden.masked_fill(mask[..., None] == 0, 1e3)
        _assert_close(
            f"mean_pool with B={B}, T={T}, D={D}: large values at padded positions",
            mean_pool(garbage, mask),
            expected,
        )
    hidden = torch.randn(2, 4, 3, generator=g)
    mask = torch.tensor([[1, 1, 0, 0], [0, 0, 0, 0]])
    got = mean_pool(hidden, mask)
    assert torch.isfinite(got).all(), (
        f"mean_pool: a sequence without real tokens gave {got[1]}; expected no NaN"
    )
    _assert_close(
        "mean_pool of the first row of [[1, 1, 0, 0], [0, 0, 0, 0]]",
        got[0],
        hidden[0, :2].mean(dim=0),
    )
    print(
        "✓ mean_pool averages exactly the real positions (int and bool masks, odd "
        "shapes, no NaN for an empty row)"
    )
