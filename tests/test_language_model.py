"""Unit tests for tinybert.blocks.language_model (chapters/06_transformer.md): the decoder-only LM."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from tinybert.blocks.attention import causal_mask
from tinybert.blocks.feedforward import count_parameters
from tinybert.blocks.language_model import DecoderOnlyLM, LMOutput
from tinybert.blocks.transformer import TransformerConfig
from tinybert.blocks.transformer_layers import EncoderLayer

B, T, D, H, FF, V = 13, 7, 32, 4, 37, 11


def make_lm(seed: int = 0, **overrides) -> DecoderOnlyLM:
    torch.manual_seed(seed)
    config = TransformerConfig(**{**dict(vocab_size=V, d_model=D, n_heads=H, n_layers=2, d_ff=FF, dropout=0.0,
                                         max_len=16, norm_first=True, pad_id=None), **overrides})
    return DecoderOnlyLM(config).eval()


@pytest.mark.parametrize("norm_first", [False, True])
def test_causal_invariance(norm_first):
    lm, g = make_lm(1, norm_first=norm_first), torch.Generator().manual_seed(1)
    tokens = torch.randint(0, V, (B, T), generator=g)
    logits = lm(tokens).logits
    for t in range(T - 1):
        changed = tokens.clone()
        changed[:, t + 1:] = torch.randint(0, V, (B, T - t - 1), generator=g)
        torch.testing.assert_close(lm(changed).logits[:, :t + 1], logits[:, :t + 1], atol=1e-5, rtol=1e-5)


def test_loss_is_next_token_cross_entropy():
    lm, g = make_lm(2), torch.Generator().manual_seed(2)
    tokens, targets = torch.randint(0, V, (B, T), generator=g), torch.randint(0, V, (B, T), generator=g)
    out = lm(tokens, targets)
    assert isinstance(out, LMOutput) and out.logits.shape == (B, T, V)
    torch.testing.assert_close(out.loss, F.cross_entropy(out.logits.reshape(-1, V), targets.reshape(-1)))
    assert lm(tokens).loss is None


def test_layers_are_encoder_layers_under_a_causal_mask():
    lm, g = make_lm(3), torch.Generator().manual_seed(3)
    assert all(type(layer) is EncoderLayer for layer in lm.layers)
    tokens = torch.randint(0, V, (B, T), generator=g)
    x = lm.embed(tokens)
    for layer in lm.layers:
        x = layer(x, causal_mask(T))
    torch.testing.assert_close(lm(tokens).logits, lm.norm(x) @ lm.embed.tokens.weight.T)


def test_tied_output_and_parameter_count():
    lm = make_lm(4)
    assert lm.output.weight is lm.embed.tokens.weight
    layer = 4 * D * D + 4 * D + 2 * D * FF + FF + D + 4 * D
    assert count_parameters(lm) == V * D + 2 * layer + 2 * D          # embedding, 2 layers, final norm


def test_bad_inputs():
    lm = make_lm(5)
    with pytest.raises(ValueError, match=r"tokens: expected token ids in \[0, 11\), got ids from 0 to 11"):
        lm(torch.tensor([[0, 11]]))
    with pytest.raises(ValueError, match="max_len = 16"):
        lm(torch.zeros(1, 17, dtype=torch.long))
