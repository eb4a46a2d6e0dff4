"""Unit tests for tinybert.models.bert (generated from chapters/08_bert.md).

Tiny, odd, distinct sizes (batch 13, length 7, vocab 99, d_model 32, 4 heads, d_ff 37, 3 layers,
23 positions) so that a swapped axis fails loudly. Parity with Hugging Face is in test_convert.py.
"""
from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F

from tinybert.blocks.feedforward import count_parameters
from tinybert.models.bert import BERT_PRESETS, BertConfig, BertModel
from tinybert.models.bert_layers import BertLayer
from tinybert.models.bert_heads import BertForMaskedLM, BertForPreTraining
from tinybert.blocks.multihead import MultiHeadAttention

B, T = 13, 7
TINY = dict(vocab_size=99, d_model=32, n_layers=3, n_heads=4, d_ff=37, max_len=23)


def tiny_config(**overrides) -> BertConfig:
    return BertConfig(**{**TINY, **overrides})


def randomize(model: torch.nn.Module, seed: int = 0) -> torch.nn.Module:
    """Non-trivial biases and LayerNorm parameters, so that one in the wrong place shows."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 1:
                p.copy_(torch.randn(p.shape, generator=g) * 0.5 + (1.0 if p.shape[0] == 32 else 0.0))
    return model


def inputs(seed: int = 1, vocab: int = 99, padded: bool = True):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, vocab, (B, T), generator=g)
    segments = (torch.arange(T) >= 4).long().expand(B, T).clone()          # A A A A B B B
    mask = torch.ones(B, T, dtype=torch.long)
    if padded:
        lengths = torch.randint(2, T + 1, (B,), generator=g)
        lengths[0] = T
        mask = (torch.arange(T)[None, :] < lengths[:, None]).long()
        ids = ids.masked_fill(mask == 0, 0)
    return ids, segments, mask


# --- configuration ------------------------------------------------------------------------------

def test_presets_have_the_published_sizes():
    base, large = BertConfig.preset("bert-base-uncased"), BertConfig.preset("bert-large-uncased")
    assert (base.n_layers, base.d_model, base.n_heads, base.d_ff, base.vocab_size) == (12, 768, 12, 3072, 30522)
    assert (large.n_layers, large.d_model, large.n_heads, large.d_ff) == (24, 1024, 16, 4096)
    assert BertConfig.preset("bert-base-cased").vocab_size == 28996
    mini = BertConfig.preset("bert-mini")
    assert (mini.vocab_size, mini.d_model, mini.n_layers, mini.n_heads, mini.d_ff, mini.max_len) == \
        (8192, 256, 4, 4, 1024, 128)
    assert BertConfig.preset("bert-mini", dropout=0.0).dropout == 0.0
    assert set(BERT_PRESETS) >= {"bert-base-uncased", "bert-large-uncased", "bert-base-cased", "bert-mini"}


def test_unknown_preset_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown BERT preset 'bert-huge'.*bert-base-uncased"):
        BertConfig.preset("bert-huge")


def test_config_round_trips_through_json():
    config = tiny_config(dropout=0.2, activation="gelu_tanh")
    assert BertConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config


def test_from_dict_rejects_unknown_and_missing_keys():
    d = tiny_config().to_dict()
    with pytest.raises(ValueError, match="unknown keys \\['hidden_size'\\]"):
        BertConfig.from_dict({**d, "hidden_size": 32})
    del d["d_ff"]
    with pytest.raises(ValueError, match="missing keys \\['d_ff'\\]"):
        BertConfig.from_dict(d)


@pytest.mark.parametrize("overrides, message", [
    (dict(n_heads=5), "divisible"),
    (dict(d_model=0), "d_model"),
    (dict(n_layers=2.0), "n_layers"),
    (dict(dropout=1.0), "dropout"),
    (dict(attention_dropout=-0.1), "attention_dropout"),
    (dict(activation="swish"), "unknown activation"),
    (dict(pad_token_id=99), "pad_token_id"),
    (dict(layer_norm_eps=0.0), "layer_norm_eps"),
    (dict(d_model="32"), "d_model: expected a positive int, got '32'"),   # issue 16
    (dict(layer_norm_eps="1e-12"), "layer_norm_eps: expected a finite positive number"),
    (dict(initializer_range=float("inf")), "initializer_range: .* got inf"),
    (dict(initializer_range=float("nan")), "initializer_range: .* got nan"),
    (dict(pad_token_id=True), "pad_token_id: .* got True"),
    (dict(fast="no"), "fast: expected True or False, got 'no'"),
])
def test_bad_configs_are_rejected(overrides, message):
    with pytest.raises(ValueError, match=message):
        tiny_config(**overrides)


# --- the encoder --------------------------------------------------------------------------------

def test_shapes_and_hidden_states():
    model = BertModel(tiny_config()).eval()
    ids, segments, mask = inputs()
    out = model(ids, segments, mask, output_hidden_states=True)
    assert out.last_hidden_state.shape == (B, T, 32)
    assert out.pooler_output.shape == (B, 32)
    assert len(out.hidden_states) == 3 + 1                       # embeddings + every layer
    assert torch.equal(out.hidden_states[-1], out.last_hidden_state)
    assert torch.allclose(out.hidden_states[0], model.embeddings(ids, segments))
    assert model(ids).hidden_states is None
    assert BertModel(tiny_config(), add_pooler=False)(ids).pooler_output is None



@pytest.mark.parametrize("fast, norm_first", [(True, False), (False, False), (True, True)])
def test_output_attentions(fast, norm_first):
    model = randomize(BertModel(tiny_config(fast=fast, norm_first=norm_first))).eval()
    ids, segments, mask = inputs()
    plain = model(ids, segments, mask)
    out = model(ids, segments, mask, output_attentions=True)
    assert plain.attentions is None
    assert len(out.attentions) == 3 and all(w.shape == (B, 4, T, T) for w in out.attentions)
    # asking for the weights (the explicit path) leaves the outputs unchanged
    assert torch.allclose(out.last_hidden_state, plain.last_hidden_state, atol=1e-5)
    real = mask.bool()
    for w in out.attentions:
        assert torch.allclose(w.sum(-1)[real[:, None, :].expand(B, 4, T)], torch.tensor(1.0), atol=1e-5)
        assert (w.masked_select(~real[:, None, None, :]) == 0).all()     # no weight on padding
    # layer 0's weights, recomputed by hand from its query and key projections
    layer = model.encoder.layers[0]
    x = model.embeddings(ids, segments)
    x = layer.attention_norm(x) if norm_first else x
    q = layer.attention.query(x).view(B, T, 4, 8).transpose(1, 2)       # (B, H, T, Dh)
    k = layer.attention.key(x).view(B, T, 4, 8).transpose(1, 2)
    scores = (q @ k.transpose(-1, -2) / 8 ** 0.5).masked_fill(~real[:, None, None, :], float("-inf"))
    assert torch.allclose(out.attentions[0], scores.softmax(-1), atol=1e-5)
    assert layer.fast == fast                                       # the call changed no setting

def test_embeddings_are_the_layer_normed_sum_of_three_tables():
    model = randomize(BertModel(tiny_config())).eval()
    ids, segments, _ = inputs(padded=False)
    e = model.embeddings
    total = e.token_embeddings.weight[ids] + e.segment_embeddings.weight[segments] + e.position_embeddings.weight[:T]
    expected = F.layer_norm(total, (32,), e.norm.weight, e.norm.bias, eps=1e-12)
    assert torch.allclose(e(ids, segments), expected, atol=1e-5)


def test_pooler_is_tanh_of_dense_on_cls():
    model = randomize(BertModel(tiny_config())).eval()
    ids, segments, mask = inputs()
    out = model(ids, segments, mask)
    expected = torch.tanh(out.last_hidden_state[:, 0] @ model.pooler.dense.weight.T + model.pooler.dense.bias)
    assert torch.allclose(out.pooler_output, expected, atol=1e-6)


def test_missing_token_types_mean_segment_a():
    model = randomize(BertModel(tiny_config())).eval()
    ids, segments, mask = inputs()
    a = model(ids, None, mask).last_hidden_state
    assert torch.equal(a, model(ids, torch.zeros_like(ids), mask).last_hidden_state)
    assert not torch.allclose(a, model(ids, segments, mask).last_hidden_state)   # segments do matter


def test_attention_mask_bool_int_and_none_agree():
    model = randomize(BertModel(tiny_config())).eval()
    ids, segments, mask = inputs()
    as_int = model(ids, segments, mask).last_hidden_state
    assert torch.equal(as_int, model(ids, segments, mask.bool()).last_hidden_state)
    full = torch.ones_like(ids)
    assert torch.equal(model(ids, segments, full).last_hidden_state, model(ids, segments).last_hidden_state)


@pytest.mark.parametrize("fast", [True, False])
def test_padding_does_not_change_real_positions(fast):
    model = randomize(BertModel(tiny_config(fast=fast))).eval()
    ids, segments, mask = inputs(padded=False)
    out = model(ids, segments, mask)
    extra = 5
    padded_ids = torch.cat([ids, torch.zeros(B, extra, dtype=torch.long)], dim=1)
    padded_segments = torch.cat([segments, torch.ones(B, extra, dtype=torch.long)], dim=1)
    padded_mask = torch.cat([mask, torch.zeros(B, extra, dtype=torch.long)], dim=1)
    padded = model(padded_ids, padded_segments, padded_mask)
    assert torch.allclose(padded.last_hidden_state[:, :T], out.last_hidden_state, atol=1e-5)
    assert torch.allclose(padded.pooler_output, out.pooler_output, atol=1e-5)
    # without the mask the padding is attended to, and the real positions change
    assert not torch.allclose(model(padded_ids, padded_segments).last_hidden_state[:, :T],
                              out.last_hidden_state, atol=1e-3)


def test_fast_path_equals_teaching_path():
    slow = randomize(BertForPreTraining(tiny_config(fast=False))).eval()
    fast = BertForPreTraining(tiny_config(fast=True)).eval()
    fast.load_state_dict(slow.state_dict())
    ids, segments, mask = inputs()
    a, b = slow(ids, segments, mask), fast(ids, segments, mask)
    assert torch.allclose(a.mlm_logits, b.mlm_logits, atol=1e-5)
    assert torch.allclose(a.nsp_logits, b.nsp_logits, atol=1e-5)


def test_the_fast_path_of_multihead_attention_equals_the_explicit_one():
    """Chapter 4's fast path (one fused Q/K/V product, the SDPA kernel) is BERT's."""
    torch.manual_seed(3)
    x = torch.randn(B, T, 32)
    mask = torch.rand(B, 1, T, T) < 0.7
    mask[..., 0] = True
    for bias in (True, False):
        mha = randomize(MultiHeadAttention(32, 4, bias=bias)).eval()
        for m in (mask, None):
            mha.fast = False
            explicit, weights = mha(x, mask=m)
            assert mha(x, mask=m, need_weights=True)[1] is not None  # still explicit
            mha.fast = True
            fast, none = mha(x, mask=m)
            assert weights.shape == (B, 4, T, T) and none is None
            assert torch.allclose(fast, explicit, atol=1e-5)
    assert mha(x)[1] is None and mha(x, need_weights=True)[1] is not None
    context = torch.randn(B, 5, 32)                      # cross-attention: no fused product
    assert torch.allclose(mha(x, context)[0], mha(x, context, need_weights=True)[0],
                          atol=1e-5)


def test_bert_layer_fast_is_its_attention_setting():
    layer = BertLayer(BertConfig(**TINY))
    assert layer.fast and layer.attention.fast
    layer.fast = False
    assert not layer.attention.fast
    x = torch.randn(B, T, 32)
    out, weights = layer.eval()(x, output_attentions=True)
    assert weights.shape == (B, 4, T, T) and out.shape == x.shape


def test_fast_path_gradients_equal_teaching_path():
    slow = randomize(BertForMaskedLM(tiny_config(fast=False, dropout=0.0, attention_dropout=0.0)))
    fast = BertForMaskedLM(tiny_config(fast=True, dropout=0.0, attention_dropout=0.0))
    fast.load_state_dict(slow.state_dict())
    ids, segments, mask = inputs()
    labels = torch.where(torch.rand(B, T, generator=torch.Generator().manual_seed(5)) < 0.3, ids, -100)
    labels[0, 0] = ids[0, 0]
    for model in (slow, fast):
        model(ids, segments, mask, labels=labels).loss.backward()
    for (name, p), q in zip(slow.named_parameters(), fast.parameters()):
        assert torch.allclose(p.grad, q.grad, atol=1e-5), name


def test_initialisation():
    torch.manual_seed(0)
    model = BertForPreTraining(BertConfig.preset("bert-mini"))
    token = model.bert.embeddings.token_embeddings
    assert torch.count_nonzero(token.weight[0]) == 0                      # [PAD] row starts at zero
    assert abs(token.weight[1:].std().item() - 0.02) < 1e-3
    assert abs(model.bert.encoder.layers[2].attention.query.weight.std().item() - 0.02) < 1e-3
    assert torch.count_nonzero(model.bert.encoder.layers[0].feed_forward.expand.bias) == 0
    assert torch.equal(model.mlm_head.norm.weight, torch.ones(256))
    assert torch.count_nonzero(model.mlm_head.decoder.bias) == 0


# --- heads --------------------------------------------------------------------------------------

@pytest.mark.parametrize("cls", [BertForMaskedLM, BertForPreTraining])
def test_mlm_decoder_is_tied_to_the_token_embeddings(cls):
    model = cls(tiny_config())
    assert model.mlm_head.decoder.weight is model.bert.embeddings.token_embeddings.weight
    own = count_parameters(model) - count_parameters(model.bert)
    D, V = 32, 99
    assert own == D * D + D + 2 * D + V + (2 * D + 2 if cls is BertForPreTraining else 0)
    with torch.no_grad():
        model.bert.embeddings.token_embeddings.weight[5, 3] = 7.0
    assert model.mlm_head.decoder.weight[5, 3] == 7.0


def test_masked_lm_logits_and_loss_at_labelled_positions():
    model = randomize(BertForMaskedLM(tiny_config())).eval()
    ids, segments, mask = inputs()
    full = model(ids, segments, mask)
    assert full.loss is None and full.logits.shape == (B, T, 99)
    labels = torch.full((B, T), -100)
    labels[:, 1] = ids[:, 1]
    labels[2, 3] = 17
    out = model(ids, segments, mask, labels=labels)
    selected = labels != -100
    assert out.logits.shape == (int(selected.sum()), 99)
    assert torch.allclose(out.logits, full.logits[selected], atol=1e-5)
    expected = F.cross_entropy(full.logits.reshape(-1, 99), labels.reshape(-1))
    assert torch.allclose(out.loss, expected, atol=1e-6)


def test_pretraining_losses():
    model = randomize(BertForPreTraining(tiny_config())).eval()
    ids, segments, mask = inputs()
    labels = torch.full((B, T), -100)
    labels[:, 2] = ids[:, 2]
    nsp = torch.randint(0, 2, (B,), generator=torch.Generator().manual_seed(9))
    none = model(ids, segments, mask)
    assert none.loss is None and none.mlm_loss is None and none.nsp_loss is None
    assert none.mlm_logits.shape == (B, T, 99) and none.nsp_logits.shape == (B, 2)
    both = model(ids, segments, mask, mlm_labels=labels, pair_labels=nsp)
    assert torch.allclose(both.nsp_loss, F.cross_entropy(none.nsp_logits, nsp))
    assert torch.allclose(both.mlm_loss, F.cross_entropy(none.mlm_logits.reshape(-1, 99), labels.reshape(-1)),
                          atol=1e-6)
    assert torch.allclose(both.loss, both.mlm_loss + both.nsp_loss)
    only_nsp = model(ids, segments, mask, pair_labels=nsp)
    assert only_nsp.mlm_loss is None and torch.allclose(only_nsp.loss, both.nsp_loss)


def test_training_step_reaches_every_parameter():
    model = BertForPreTraining(tiny_config())
    ids, segments, mask = inputs()
    labels = torch.where(torch.arange(T)[None, :] % 3 == 1, ids, -100)
    out = model(ids, segments, mask, mlm_labels=labels, pair_labels=torch.zeros(B, dtype=torch.long))
    out.loss.backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name
        if name != "bert.embeddings.segment_embeddings.weight":
            assert p.grad.abs().sum() > 0, name


def test_dropout_only_in_training_mode():
    model = BertModel(tiny_config(dropout=0.3))
    ids, segments, mask = inputs()
    model.train()
    assert not torch.equal(model(ids, segments, mask).last_hidden_state, model(ids, segments, mask).last_hidden_state)
    model.eval()
    assert torch.equal(model(ids, segments, mask).last_hidden_state, model(ids, segments, mask).last_hidden_state)


# --- bad input ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def tiny_model():
    return BertForPreTraining(tiny_config()).eval()


@pytest.mark.parametrize("make, message", [
    (lambda ids, tt, m: dict(input_ids=ids.float()), "input_ids: expected an integer tensor"),
    (lambda ids, tt, m: dict(input_ids=ids[0]), "input_ids: expected shape \\(B, T\\)"),
    (lambda ids, tt, m: dict(input_ids=ids.masked_fill(ids == ids[0, 0], 99)), "\\[0, 99\\).*vocabulary"),
    (lambda ids, tt, m: dict(input_ids=ids - 200), "\\[0, 99\\)"),
    (lambda ids, tt, m: dict(input_ids=torch.ones(2, 24, dtype=torch.long)), "max_len = 23.*length 24"),
    (lambda ids, tt, m: dict(input_ids=torch.ones(2, 0, dtype=torch.long)), "1 to max_len = 23.*length 0"),
    (lambda ids, tt, m: dict(input_ids=ids, attention_mask=m.to(torch.complex64)), "attention_mask: expected bool"),
    (lambda ids, tt, m: dict(input_ids=ids, token_type_ids=tt + 1), "token_type_ids.*\\[0, 2\\)"),
    (lambda ids, tt, m: dict(input_ids=ids, token_type_ids=tt[:, :5]), "token_type_ids: expected shape \\(13, 7\\)"),
    (lambda ids, tt, m: dict(input_ids=ids, token_type_ids=tt.bool()), "token_type_ids: expected an integer"),
    (lambda ids, tt, m: dict(input_ids=ids.to(torch.uint8)),
     "input_ids: .*torch.long.*got torch.uint8"),
    (lambda ids, tt, m: dict(input_ids=ids.to(torch.int8)),
     "input_ids: .*torch.long.*got torch.int8"),
    (lambda ids, tt, m: dict(input_ids=ids, token_type_ids=tt.to(torch.uint8)),
     "token_type_ids: .*got torch.uint8"),
    (lambda ids, tt, m: dict(input_ids=ids, attention_mask=m * 2), "attention_mask: expected bool or 0/1"),
    (lambda ids, tt, m: dict(input_ids=ids, attention_mask=m.float()), "attention_mask: expected bool or 0/1"),
    (lambda ids, tt, m: dict(input_ids=ids, attention_mask=m[:, None]), "attention_mask: expected shape \\(13, 7\\)"),
    (lambda ids, tt, m: dict(input_ids=ids, mlm_labels=ids.float()), "labels: expected an integer"),
    (lambda ids, tt, m: dict(input_ids=ids, mlm_labels=ids + 99), "labels: expected values in \\[0, 99\\) or -100"),
    (lambda ids, tt, m: dict(input_ids=ids, mlm_labels=ids[:, :3]), "labels: expected shape \\(13, 7\\)"),
    (lambda ids, tt, m: dict(input_ids=ids, pair_labels=torch.full((B,), 2)), "pair_labels.*\\[0, 2\\)"),
    (lambda ids, tt, m: dict(input_ids=ids, pair_labels=torch.zeros(B, 1, dtype=torch.long)), "pair_labels: expected shape"),
])
def test_bad_input_is_a_clear_error(tiny_model, make, message):
    ids, segments, mask = inputs()
    with pytest.raises(ValueError, match=message):
        tiny_model(**make(ids, segments, mask))


def test_model_needs_a_bert_config():
    with pytest.raises(ValueError, match="BertConfig"):
        BertModel(dict(TINY))
