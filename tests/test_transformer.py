"""Unit tests for tinybert.blocks.transformer_layers and tinybert.blocks.transformer (chapters/06_transformer.md).

Odd, distinct sizes (batch 13, source length 7, target length 5, d_model 32, 4 heads, d_ff 37)
make swapped axes fail loudly. The reference is torch.nn.Transformer with our weights copied in.
"""
from __future__ import annotations

import copy
import warnings

import pytest
import torch
from torch import nn

from tinybert.blocks.attention import causal_mask, padding_mask
from tinybert.blocks.feedforward import count_parameters
from tinybert.blocks.transformer import (PRESETS, Seq2SeqOutput, Transformer,
                                         TransformerConfig)
from tinybert.blocks.transformer_layers import (Decoder, DecoderLayer, Encoder,
                                                EncoderLayer, LayerNorm)

B, S, T, D, H, F, V = 13, 7, 5, 32, 4, 37, 11


def randomise(model: nn.Module, seed: int) -> nn.Module:
    """Random biases, γ and β, so that a bias or norm in the wrong place shows."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1:
                noise = torch.randn(p.shape, generator=g)
                p.copy_(1.0 + 0.3 * noise if "norm" in name and name.endswith("weight") else 0.5 * noise)
    return model


def make_model(seed: int = 0, **overrides) -> Transformer:
    torch.manual_seed(seed)
    config = TransformerConfig(**{**dict(vocab_size=V, d_model=D, n_heads=H, n_layers=2, d_ff=F, dropout=0.0,
                                         max_len=16), **overrides})
    return randomise(Transformer(config), seed).eval()


def torch_reference(model: Transformer) -> nn.Transformer:
    """nn.Transformer (batch_first, ReLU, no dropout) holding the weights of model's two stacks."""
    c = model.config
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reference = nn.Transformer(c.d_model, c.n_heads, c.n_layers, c.n_layers, c.d_ff, dropout=0.0,
                                   activation="relu", batch_first=True, norm_first=c.norm_first,
                                   layer_norm_eps=c.layer_norm_eps)

    def attention(theirs, ours):
        theirs.in_proj_weight.copy_(torch.cat([ours.query.weight, ours.key.weight, ours.value.weight]))
        theirs.in_proj_bias.copy_(torch.cat([ours.query.bias, ours.key.bias, ours.value.bias]))
        theirs.out_proj.load_state_dict(ours.output.state_dict())

    def common(theirs, ours):
        theirs.linear1.load_state_dict(ours.feed_forward.expand.state_dict())
        theirs.linear2.load_state_dict(ours.feed_forward.contract.state_dict())
        theirs.norm1.load_state_dict(ours.norm1.state_dict())
        theirs.norm2.load_state_dict(ours.norm2.state_dict())
        attention(theirs.self_attn, ours.self_attn)

    with torch.no_grad():
        for theirs, ours in zip(reference.encoder.layers, model.encoder.layers):
            common(theirs, ours)
        for theirs, ours in zip(reference.decoder.layers, model.decoder.layers):
            common(theirs, ours)
            attention(theirs.multihead_attn, ours.cross_attn)
            theirs.norm3.load_state_dict(ours.norm3.state_dict())
        for theirs, ours in [(reference.encoder, model.encoder), (reference.decoder, model.decoder)]:
            if c.uses_final_norm:
                theirs.norm.load_state_dict(ours.norm.state_dict())
            else:
                theirs.norm = None
    return reference.eval()


def tokens_with_padding(generator, n: int, length: int, pad_id: int = 0) -> torch.Tensor:
    """Random ids in [1, V) with random right padding; the first row is full length."""
    tokens = torch.randint(1, V, (n, length), generator=generator)
    lengths = torch.randint(1, length + 1, (n,), generator=generator)
    lengths[0] = length
    tokens[torch.arange(length)[None, :] >= lengths[:, None]] = pad_id
    return tokens


@pytest.fixture
def generator() -> torch.Generator:
    return torch.Generator().manual_seed(606)


# --- LayerNorm -----------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(13, 7, 32), (5, 37), (1, 1, 8), (2, 3, 4, 6)])
def test_layer_norm_matches_torch(shape, generator):
    ours = randomise(LayerNorm(shape[-1]), 1)
    reference = nn.LayerNorm(shape[-1])
    reference.load_state_dict(ours.state_dict())
    x = 4 * torch.randn(shape, generator=generator) - 2
    torch.testing.assert_close(ours(x), reference(x), atol=1e-5, rtol=1e-5)


def test_layer_norm_of_a_constant_vector_is_beta():
    norm = randomise(LayerNorm(9), 2)
    torch.testing.assert_close(norm(torch.full((3, 9), 7.0)), norm.bias.detach().expand(3, 9))


# --- parity with torch.nn.Transformer ------------------------------------------------------------

@pytest.mark.parametrize("norm_first, final_norm", [(False, False), (False, True), (True, None), (True, True)])
def test_stacks_match_torch_transformer(norm_first, final_norm, generator):
    model = make_model(seed=3, norm_first=norm_first, final_norm=final_norm)
    reference = torch_reference(model)
    src, tgt = torch.randn(B, S, D, generator=generator), torch.randn(B, T, D, generator=generator)
    src_pad = padding_mask(torch.randint(1, S + 1, (B,), generator=generator), S=S)     # (B, 1, 1, S)
    tgt_pad = padding_mask(torch.randint(1, T + 1, (B,), generator=generator), S=T)     # (B, 1, 1, T)
    causal = causal_mask(T)
    ours = model.decoder(tgt, model.encoder(src, src_pad), causal & tgt_pad, src_pad)
    theirs = reference(src, tgt, tgt_mask=~causal, src_key_padding_mask=~src_pad[:, 0, 0],
                       tgt_key_padding_mask=~tgt_pad[:, 0, 0], memory_key_padding_mask=~src_pad[:, 0, 0])
    assert (ours - theirs).abs().max().item() < 1e-5


@pytest.mark.parametrize("norm_first", [False, True])
def test_whole_model_matches_torch_transformer_with_shared_embedding(norm_first, generator):
    """Token ids with padding: our masks from pad_id, the embedding and the tied output layer."""
    model = make_model(seed=4, norm_first=norm_first, final_norm=True)
    reference = torch_reference(model)
    src, tgt = tokens_with_padding(generator, B, S), tokens_with_padding(generator, B, T)
    ours = model(src, tgt).logits                                                     # (B, T, V)
    hidden = reference(model.embed(src), model.embed(tgt), tgt_mask=~causal_mask(T),
                       src_key_padding_mask=src == 0, tgt_key_padding_mask=tgt == 0,
                       memory_key_padding_mask=src == 0)                              # (B, T, D)
    theirs = hidden @ model.embed.tokens.weight.T                                     # tied output
    assert ours.shape == (B, T, V)
    assert (ours - theirs).abs().max().item() < 1e-4


def test_post_ln_without_final_norm_differs_from_torch_as_is(generator):
    """nn.Transformer's extra final norms change the output: the comparison must account for them."""
    model = make_model(seed=5, norm_first=False, final_norm=False)
    reference = torch_reference(copy.deepcopy(model))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        as_is = nn.Transformer(D, H, 2, 2, F, dropout=0.0, batch_first=True)
    as_is.load_state_dict(reference.state_dict(), strict=False)          # keeps its own final norms
    with torch.no_grad():
        as_is.encoder.norm.weight.fill_(2.0)
        as_is.decoder.norm.bias.fill_(1.0)
    src, tgt = torch.randn(B, S, D, generator=generator), torch.randn(B, T, D, generator=generator)
    ours = model.decoder(tgt, model.encoder(src), causal_mask(T))
    assert torch.allclose(ours, reference(src, tgt, tgt_mask=~causal_mask(T)), atol=1e-5)
    assert not torch.allclose(ours, as_is.eval()(src, tgt, tgt_mask=~causal_mask(T)), atol=1e-3)


# --- invariances ---------------------------------------------------------------------------------

@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_is_causal(norm_first, generator):
    model = make_model(seed=6, norm_first=norm_first)
    src = tokens_with_padding(generator, B, S)
    tgt = torch.randint(1, V, (B, T), generator=generator)
    logits = model(src, tgt).logits
    for t in range(T - 1):
        changed = tgt.clone()
        changed[:, t + 1:] = torch.randint(1, V, (B, T - t - 1), generator=generator)
        new_logits = model(src, changed).logits
        torch.testing.assert_close(new_logits[:, :t + 1], logits[:, :t + 1], atol=1e-5, rtol=1e-5)
    assert not torch.allclose(new_logits[:, -1], logits[:, -1])          # the last position did see the change


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_padding_invariance(norm_first, generator):
    model = make_model(seed=7, norm_first=norm_first)
    src = tokens_with_padding(generator, B, S)
    tgt = torch.randint(1, V, (B, T), generator=generator)
    out = model(src, tgt)
    longer = torch.cat([src, torch.zeros(B, 4, dtype=torch.long)], dim=1)          # 4 more padding tokens
    out_longer = model(longer, tgt)
    real = src != 0
    torch.testing.assert_close(out_longer.memory[:, :S][real], out.memory[real], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out_longer.logits, out.logits, atol=1e-5, rtol=1e-5)


def test_source_mask_matters(generator):
    """Sanity check for the invariance test: without pad_id the padding is attended to."""
    model = make_model(seed=7, pad_id=None)
    src = tokens_with_padding(generator, B, S)
    tgt = torch.randint(1, V, (B, T), generator=generator)
    longer = torch.cat([src, torch.zeros(B, 4, dtype=torch.long)], dim=1)
    assert not torch.allclose(model(longer, tgt).logits, model(src, tgt).logits, atol=1e-4)


def test_encoder_layer_mask_is_used(generator):
    layer = randomise(EncoderLayer(D, H, F, dropout=0.0), 8).eval()
    x = torch.randn(B, T, D, generator=generator)
    assert not torch.allclose(layer(x, causal_mask(T)), layer(x))


def test_decoder_layer_reads_memory(generator):
    layer = randomise(DecoderLayer(D, H, F, dropout=0.0), 9).eval()
    x, memory = torch.randn(B, T, D, generator=generator), torch.randn(B, S, D, generator=generator)
    out = layer(x, memory, causal_mask(T))
    assert out.shape == (B, T, D)
    assert not torch.allclose(out, layer(x, memory + 1.0, causal_mask(T)))
    permuted = memory[:, torch.randperm(S, generator=generator)]          # keys and values move together
    torch.testing.assert_close(layer(x, permuted, causal_mask(T)), out, atol=1e-5, rtol=1e-5)


def test_stacks_run_layers_in_order_and_final_norm(generator):
    layers = [randomise(EncoderLayer(D, H, F, dropout=0.0), 10 + i).eval() for i in range(3)]
    norm = randomise(LayerNorm(D), 20)
    x = torch.randn(B, S, D, generator=generator)
    expected = x
    for layer in layers:
        expected = layer(expected)
    torch.testing.assert_close(Encoder(layers)(x), expected)
    torch.testing.assert_close(Encoder(layers, norm)(x), norm(expected))
    dec_layers = [randomise(DecoderLayer(D, H, F, dropout=0.0), 30 + i).eval() for i in range(2)]
    memory, y = torch.randn(B, S, D, generator=generator), torch.randn(B, T, D, generator=generator)
    expected = dec_layers[1](dec_layers[0](y, memory), memory)
    torch.testing.assert_close(Decoder(dec_layers)(y, memory), expected)


def test_dropout_only_in_training(generator):
    model = make_model(seed=11, dropout=0.3)
    src, tgt = tokens_with_padding(generator, B, S), torch.randint(1, V, (B, T), generator=generator)
    no_dropout = copy.deepcopy(model)
    for module in no_dropout.modules():
        if isinstance(module, nn.Dropout):
            module.p = 0.0
    torch.testing.assert_close(model.eval()(src, tgt).logits, no_dropout(src, tgt).logits)
    torch.manual_seed(0)
    assert not torch.allclose(model.train()(src, tgt).logits, no_dropout(src, tgt).logits)


# --- embeddings, configuration, parameter counts -------------------------------------------------

def test_tied_embeddings_are_really_tied(generator):
    model = make_model(seed=12)
    assert model.output.weight is model.embed.tokens.weight
    state = model.state_dict()
    assert state["output.weight"].data_ptr() == state["embed.tokens.weight"].data_ptr()
    assert count_parameters(model) == sum(p.numel() for p in model.parameters())
    n_weights = sum(p.numel() for name, p in model.named_parameters(remove_duplicate=False))
    assert n_weights - count_parameters(model) == V * D               # listed twice, counted once
    # The gradient of the output layer lands in the embedding matrix.
    src, tgt = tokens_with_padding(generator, B, S), torch.randint(1, V, (B, T), generator=generator)
    model.zero_grad()
    model(src, tgt).logits.sum().backward()
    assert model.embed.tokens.weight.grad is not None
    assert model.embed.tokens.weight.grad.abs().sum() > 0


def test_embedding_is_scaled_and_positioned():
    model = make_model(seed=13)
    tokens = torch.tensor([[3, 3, 5]])
    expected = model.embed.tokens.weight[tokens] * D ** 0.5 + model.embed.positions.pe[:3]
    torch.testing.assert_close(model.embed(tokens), expected)


def test_config_presets():
    base, big = TransformerConfig.from_preset("base"), TransformerConfig.from_preset("big")
    assert (base.n_layers, base.d_model, base.d_ff, base.n_heads, base.dropout) == (6, 512, 2048, 8, 0.1)
    assert (big.n_layers, big.d_model, big.d_ff, big.n_heads, big.dropout) == (6, 1024, 4096, 16, 0.3)
    assert base.vocab_size == big.vocab_size == 37000 and not base.norm_first and not base.uses_final_norm
    custom = TransformerConfig.from_preset("big", vocab_size=32000, norm_first=True)
    assert custom.vocab_size == 32000 and custom.d_model == 1024 and custom.uses_final_norm
    assert set(PRESETS) == {"base", "big"}
    with pytest.raises(ValueError, match="unknown preset 'huge'.*'base', 'big'"):
        TransformerConfig.from_preset("huge")
    with pytest.raises(ValueError, match="unknown TransformerConfig fields"):
        TransformerConfig.from_preset("base", d_modle=256)


@pytest.mark.parametrize("kwargs, message", [
    (dict(d_model=30, n_heads=4), "d_model: expected an even multiple of n_heads = 4, got 30"),
    (dict(n_layers=0), "n_layers: expected a positive int, got 0"),
    (dict(vocab_size=2.5), "vocab_size: expected a positive int, got 2.5"),
    (dict(dropout=1.0), r"dropout: expected a probability in \[0, 1\), got 1.0"),
    (dict(vocab_size=10, pad_id=10), r"pad_id: expected None or an id in \[0, 10\), got 10"),
])
def test_bad_config(kwargs, message):
    with pytest.raises(ValueError, match=message):
        TransformerConfig(**kwargs)


def parameter_formula(config: TransformerConfig) -> int:
    Vc, Dc, Fc, N = config.vocab_size, config.d_model, config.d_ff, config.n_layers
    attention, ffn, norm = 4 * Dc * Dc + 4 * Dc, 2 * Dc * Fc + Fc + Dc, 2 * Dc
    final = 2 * norm if config.uses_final_norm else 0
    return Vc * Dc + N * (attention + ffn + 2 * norm) + N * (2 * attention + ffn + 3 * norm) + final


@pytest.mark.parametrize("preset, expected", [("base", 63_082_496), ("big", 214_245_376)])
def test_parameter_counts_of_the_presets(preset, expected):
    config = TransformerConfig.from_preset(preset)
    with torch.device("meta"):
        model = Transformer(config)
    assert count_parameters(model) == parameter_formula(config) == expected


def test_parameter_count_of_small_models_with_final_norms():
    for norm_first in (False, True):
        model = make_model(seed=14, norm_first=norm_first, n_layers=3)
        assert count_parameters(model) == parameter_formula(model.config)
        assert count_parameters(model.embed.positions) == 0


# --- bad inputs ----------------------------------------------------------------------------------

@pytest.mark.parametrize("src, tgt, message", [
    (torch.randint(0, V, (B, S)).float(), torch.randint(0, V, (B, T)),
     r"src: expected a non-empty integer tensor of token ids of shape \(B, T\), got torch.float32 of shape \(13, 7\)"),
    (torch.randint(0, V, (S,)), torch.randint(0, V, (B, T)), r"src: .*got torch.int64 of shape \(7,\)"),
    (torch.randint(0, V, (B, S)), torch.full((B, T), V), r"tgt: expected token ids in \[0, 11\), got ids from 11 to 11"),
    (torch.full((B, S), -1), torch.randint(0, V, (B, T)), r"src: expected token ids in \[0, 11\), got ids from -1"),
    (torch.randint(0, V, (B, 17)), torch.randint(0, V, (B, T)), "max_len = 16"),
])
def test_bad_inputs(src, tgt, message):
    model = make_model(seed=15)
    with pytest.raises(ValueError, match=message):
        model(src, tgt)


def test_memory_with_wrong_batch_is_an_error(generator):
    layer = DecoderLayer(D, H, F)
    with pytest.raises(ValueError, match=r"context: expected shape \(B=13"):
        layer(torch.randn(B, T, D), torch.randn(B + 1, S, D))


def test_forward_returns_dataclass(generator):
    model = make_model(seed=16)
    out = model(tokens_with_padding(generator, B, S), torch.randint(1, V, (B, T), generator=generator))
    assert isinstance(out, Seq2SeqOutput)
    assert out.logits.shape == (B, T, V) and out.memory.shape == (B, S, D)
