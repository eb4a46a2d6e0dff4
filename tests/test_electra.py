"""ELECTRA (tinybert.models.electra, electra_heads, convert_electra, tinybert.pretraining.electra;
chapters/16_electra.md).

Parity with Hugging Face's ELECTRA built from transformers.ElectraConfig with tiny odd configs
(vocab 99, embedding 24 != hidden 32, 4 heads, 3 layers, intermediate 37, 23 positions), never
downloaded, every parameter randomised first. Tolerance 1e-6 in float32.
"""
from __future__ import annotations

import pytest
import torch

from tinybert.blocks.feedforward import count_parameters
from tinybert.models.bert import BertConfig
from tinybert.models.electra import ELECTRA_PRESETS, ElectraConfig, ElectraModel
from tinybert.models.electra_heads import ElectraForMaskedLM, ElectraForPreTraining
from tinybert.models.registry import load_model, save_model
from tinybert.pretraining.electra import (
    ElectraPretraining,
    replaced_token_inputs,
    sample_replacements,
    tie_embeddings,
)
from tinybert.pretraining.objective import seeded_generator
from helpers import max_error, padded_batch, randomised

B, T, V = 13, 7, 99
TOLERANCE = 1e-6

try:  # a test oracle of the [test] extra; without it only the tests that use it skip
    import transformers
except ImportError:
    transformers = None
needs_transformers = pytest.mark.skipif(
    transformers is None, reason="transformers is not installed: pip install -e '.[test]'"
)


def small_config(**overrides) -> ElectraConfig:
    kwargs = dict(vocab_size=V, embedding_size=24, d_model=32, n_layers=3, n_heads=4, d_ff=37, max_len=23)
    return ElectraConfig(**{**kwargs, **overrides})


def batch(seed: int = 1):
    ids, real, labels = padded_batch(B, T, V, seed=seed)
    segments = (torch.arange(T) >= 4).long().expand(B, T)
    replaced = torch.randint(0, 2, (B, T), generator=torch.Generator().manual_seed(seed))
    return ids, segments, real.long(), labels, replaced


# --- the configuration and the model -------------------------------------------------------------

def test_config_extends_bert_config_and_round_trips():
    config = small_config()
    assert isinstance(config, BertConfig) and ElectraConfig.from_dict(config.to_dict()) == config
    assert config.embedding_config().d_model == 24 and type(config.embedding_config()) is BertConfig
    small = ElectraConfig.preset("electra-small-discriminator")
    assert (small.embedding_size, small.d_model, small.n_layers, small.n_heads, small.d_ff) == (128, 256, 12, 4, 1024)
    with pytest.raises(ValueError):
        small_config(embedding_size=0)
    with pytest.raises(ValueError, match="known presets"):
        ElectraConfig.preset("electra-huge")


def test_no_pooler_and_no_projection_when_e_equals_d():
    with pytest.raises(ValueError, match="no pooler"):
        ElectraModel(small_config(), add_pooler=True)
    square = ElectraModel(small_config(embedding_size=32))
    assert isinstance(square.embeddings.projection, torch.nn.Identity)
    assert isinstance(ElectraModel(small_config()).embeddings.projection, torch.nn.Linear)


def test_padding_changes_nothing_at_the_real_positions():
    torch.manual_seed(0)
    model = randomised(ElectraForPreTraining(small_config()), 0)
    ids = torch.randint(5, V, (2, 5))
    padded = torch.cat([ids, torch.zeros(2, 2, dtype=torch.long)], dim=1)
    mask = torch.cat([torch.ones(2, 5), torch.zeros(2, 2)], dim=1).long()
    with torch.no_grad():
        assert max_error(model(ids).logits, model(padded, attention_mask=mask).logits[:, :5]) < 1e-5


@pytest.mark.parametrize("cls", [ElectraModel, ElectraForMaskedLM, ElectraForPreTraining])
def test_save_and_load_round_trip(cls, tmp_path):
    torch.manual_seed(1)
    model = randomised(cls(small_config()), 1)
    save_model(model, tmp_path)
    loaded = load_model(tmp_path)
    assert type(loaded) is cls
    a, b = model.state_dict(), loaded.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    if cls is ElectraForMaskedLM:
        assert loaded.mlm_head.decoder.weight is loaded.bert.embeddings.token_embeddings.weight


# --- parity with Hugging Face --------------------------------------------------------------------

def hf_config(**overrides):
    kwargs = dict(vocab_size=V, embedding_size=24, hidden_size=32, num_attention_heads=4, num_hidden_layers=3,
                  intermediate_size=37, max_position_embeddings=23)
    return transformers.ElectraConfig(**{**kwargs, **overrides})


def hf_model(name: str, seed: int = 0, **overrides):
    torch.manual_seed(seed)
    return randomised(getattr(transformers, name)(hf_config(**overrides)), seed)


HF_VARIANTS = [dict(), dict(embedding_size=32), dict(hidden_act="gelu_new", layer_norm_eps=1e-5),
               dict(hidden_size=20, num_attention_heads=2, intermediate_size=29)]


@needs_transformers
@pytest.mark.parametrize("overrides", HF_VARIANTS)
@pytest.mark.parametrize("fast", [True, False])
def test_electra_model_parity(overrides, fast):
    theirs = hf_model("ElectraModel", **overrides)
    ours = from_hf(theirs)
    assert type(ours) is ElectraModel and not ours.training and ours.pooler is None
    for layer in ours.encoder.layers:
        layer.fast = layer.attention.fast = fast
    ids, segments, mask, _, _ = batch()
    with torch.no_grad():
        a = ours(ids, segments, mask, output_hidden_states=True)
        b = theirs(input_ids=ids, token_type_ids=segments, attention_mask=mask, output_hidden_states=True)
    real = mask.bool()
    assert max_error(a.last_hidden_state[real], b.last_hidden_state[real]) < TOLERANCE
    assert len(a.hidden_states) == len(b.hidden_states)
    for x, y in zip(a.hidden_states, b.hidden_states):
        assert max_error(x[real], y[real]) < TOLERANCE


@needs_transformers
@pytest.mark.parametrize("overrides", HF_VARIANTS)
def test_discriminator_parity_with_its_loss(overrides):
    ids, segments, mask, _, replaced = batch(2)
    theirs = hf_model("ElectraForPreTraining", seed=3, **overrides)
    ours = from_hf(theirs)
    assert type(ours) is ElectraForPreTraining
    with torch.no_grad():
        a = ours(ids, segments, mask, labels=replaced)
        b = theirs(input_ids=ids, token_type_ids=segments, attention_mask=mask, labels=replaced)
        a_none = ours(ids, segments, labels=replaced)
        b_none = theirs(input_ids=ids, token_type_ids=segments, labels=replaced)
    real = mask.bool()
    assert max_error(a.logits[real], b.logits[real]) < TOLERANCE
    assert abs(a.loss.item() - b.loss.item()) < TOLERANCE
    assert abs(a_none.loss.item() - b_none.loss.item()) < TOLERANCE


@needs_transformers
@pytest.mark.parametrize("overrides", HF_VARIANTS)
def test_generator_parity_with_tied_weights_and_loss(overrides):
    ids, segments, mask, labels, _ = batch(3)
    theirs = hf_model("ElectraForMaskedLM", seed=4, **overrides)
    ours = from_hf(theirs)
    assert type(ours) is ElectraForMaskedLM
    assert ours.mlm_head.decoder.weight is ours.bert.embeddings.token_embeddings.weight
    with torch.no_grad():
        a = ours(ids, segments, mask)
        b = theirs(input_ids=ids, token_type_ids=segments, attention_mask=mask, labels=labels)
        a_loss = ours(ids, segments, mask, labels=labels).loss
    real = mask.bool()
    assert max_error(a.logits[real], b.logits[real]) < TOLERANCE
    assert abs(a_loss.item() - b.loss.item()) < TOLERANCE


@needs_transformers
@pytest.mark.parametrize("name", ["ElectraModel", "ElectraForMaskedLM", "ElectraForPreTraining"])
@pytest.mark.parametrize("overrides", [dict(), dict(embedding_size=32)])
def test_round_trip_is_exact(name, overrides):
    theirs = hf_model(name, **overrides)
    back = to_hf(from_hf(theirs))
    assert type(back) is type(theirs)
    a, b = theirs.state_dict(), back.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    if name == "ElectraForMaskedLM":
        assert back.generator_lm_head.weight is back.electra.embeddings.word_embeddings.weight
    assert electra_config_from_hf(electra_config_to_hf(from_hf(theirs).config)) == from_hf(theirs).config


@needs_transformers
@pytest.mark.parametrize("name", [n for n in ELECTRA_PRESETS if n != "electra-mini"])
def test_presets_match_hugging_face_parameter_counts(name):
    config = ElectraConfig.preset(name)
    ours_cls = ElectraForMaskedLM if "generator" in name else ElectraForPreTraining
    with torch.device("meta"):
        ours = ours_cls(config)
        theirs = getattr(transformers, ours_cls.__name__)(electra_config_to_hf(config))
        assert count_parameters(ours) == count_parameters(theirs)


if transformers is not None:
    from tinybert.models.convert import from_hf, to_hf
    from tinybert.models.convert_electra import electra_config_from_hf, electra_config_to_hf


# --- the objective -------------------------------------------------------------------------------

def test_gumbel_samples_follow_the_softmax_and_are_seeded():
    logits = torch.tensor([[1.0, 0.0, -1.0, 2.0]]).expand(30_000, 4)
    a = sample_replacements(logits, seeded_generator(0, "s"))
    assert torch.equal(a, sample_replacements(logits, seeded_generator(0, "s")))
    frequencies = torch.bincount(a, minlength=4) / len(a)
    assert (frequencies - logits[0].softmax(0)).abs().max() < 0.01


def test_a_sample_equal_to_the_original_is_labelled_original():
    ids = torch.tensor([[2, 4, 11, 4, 13]])  # 4 = [MASK]
    labels = torch.tensor([[-100, 10, -100, 12, -100]])
    corrupted, replaced = replaced_token_inputs(ids, labels, torch.tensor([10, 7]))
    assert corrupted.tolist() == [[2, 10, 11, 7, 13]] and replaced.tolist() == [[0, 0, 0, 1, 0]]


def test_shared_embeddings_and_the_combined_loss():
    torch.manual_seed(0)
    d = ElectraForPreTraining(small_config())
    g = ElectraForMaskedLM(small_config(d_model=16, n_heads=2, d_ff=19))
    objective = ElectraPretraining(g, d, rtd_weight=50.0)
    assert g.bert.embeddings.token_embeddings is d.bert.embeddings.token_embeddings
    assert g.mlm_head.decoder.weight is d.bert.embeddings.token_embeddings.weight
    assert g.bert.embeddings.projection is not d.bert.embeddings.projection
    ids, segments, mask, labels, _ = batch(4)
    masked = torch.where(labels != -100, 4, ids)
    out = objective(masked, segments, mask, labels, sampler=seeded_generator(1))
    assert torch.allclose(out.loss, out.mlm_loss + 50.0 * out.rtd_loss)
    assert out.replaced.shape == (B, T) and not out.replaced[labels == -100].any()
    out.loss.backward()
    assert d.bert.embeddings.token_embeddings.weight.grad is not None
    with pytest.raises(ValueError, match="embedding_size"):
        tie_embeddings(ElectraForMaskedLM(small_config(embedding_size=8)), d)
