"""ALBERT (tinybert.models.albert, tinybert.models.convert_albert, tinybert.pretraining.sentence_order; chapters/14_albert.md).

Parity with Hugging Face's ALBERT built from transformers.AlbertConfig with a tiny odd config
(vocab 99, embedding 24 != hidden 32, 4 heads, 3 layers, intermediate 37, 23 positions), never
downloaded. Every parameter is randomised first (HF initialises biases to zero and LayerNorms to
the identity, which would hide a bias or a LayerNorm in the wrong place).
"""
from __future__ import annotations

import copy

import pytest
import torch

from tinybert.blocks.feedforward import count_parameters
from tinybert.training.inputs import SpecialTokens
from tinybert.pretraining.objective import seeded_generator
from tinybert.models.albert import (
    ALBERT_PRESETS,
    AlbertConfig,
    AlbertEmbeddings,
    AlbertEncoder,
    AlbertModel,
)
from tinybert.models.albert_heads import AlbertForMaskedLM, AlbertForPreTraining
from tinybert.models.bert import BertConfig, BertModel
from tinybert.models.bert_layers import BertLayer
from tinybert.pretraining.examples import PretrainingBatches, make_examples
from tinybert.pretraining.pairs import SegmentPair
from tinybert.pretraining.sentence_order import sample_sop_pairs

B, T, V = 13, 7, 99


def small_config(**overrides) -> AlbertConfig:
    kwargs = dict(vocab_size=V, embedding_size=24, d_model=32, n_layers=3, n_heads=4, d_ff=37, max_len=23)
    return AlbertConfig(**{**kwargs, **overrides})


def batch(seed: int = 1):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, V, (B, T), generator=g)
    segments = (torch.arange(T)[None, :] >= torch.randint(1, T, (B, 1), generator=g)).long()   # A...A B...B
    lengths = torch.randint(2, T + 1, (B,), generator=g)
    lengths[0] = T
    mask = (torch.arange(T)[None, :] < lengths[:, None]).long()
    ids = ids.masked_fill(mask == 0, 0)
    labels = torch.where(torch.rand(B, T, generator=g) < 0.3, torch.randint(0, V, (B, T), generator=g), -100)
    labels = labels.masked_fill(mask == 0, -100)
    labels[0, 1] = 5
    order = torch.randint(0, 2, (B,), generator=g)
    return ids, segments, mask, labels, order


# --- the configuration ---------------------------------------------------------------------------

def test_config_extends_bert_config_and_round_trips():
    config = small_config(n_groups=3, inner_group_num=2)
    assert isinstance(config, BertConfig)
    assert AlbertConfig.from_dict(config.to_dict()) == config
    embedding = config.embedding_config()
    assert type(embedding) is BertConfig and embedding.d_model == 24 and embedding.vocab_size == V
    base = AlbertConfig.preset("albert-base-v2")
    assert (base.vocab_size, base.embedding_size, base.d_model, base.n_layers, base.n_groups) == (30000, 128, 768, 12, 1)
    assert base.activation == "gelu_tanh" and base.dropout == 0.0
    assert AlbertConfig.preset("albert-large-v2", n_groups=2).n_groups == 2


@pytest.mark.parametrize("overrides", [dict(embedding_size=0), dict(n_groups=0), dict(inner_group_num=-1),
                                       dict(n_groups=4), dict(embedding_size=True), dict(classifier_dropout=1.0),
                                       dict(classifier_dropout=False), dict(classifier_dropout="0.1"),
                                       dict(d_model=30), dict(activation="swish")])
def test_config_rejects_bad_values(overrides):
    with pytest.raises(ValueError):
        small_config(**overrides)


def test_unknown_preset_and_wrong_config_type():
    with pytest.raises(ValueError, match="known presets"):
        AlbertConfig.preset("albert-huge")
    with pytest.raises(ValueError, match="AlbertConfig"):
        AlbertModel(BertConfig(vocab_size=V, d_model=32, n_heads=4, d_ff=37))
    with pytest.raises(ValueError, match="from_dict"):
        AlbertConfig.from_dict({**small_config().to_dict(), "hidden_size": 32})


# --- the model -----------------------------------------------------------------------------------

def test_embeddings_are_factorised():
    config = small_config()
    emb = AlbertEmbeddings(config)
    assert emb.token_embeddings.weight.shape == (V, 24)
    assert emb.position_embeddings.weight.shape == (23, 24)
    assert emb.projection.weight.shape == (32, 24)
    x = emb(torch.randint(0, V, (B, T)), torch.zeros(B, T, dtype=torch.long))
    assert x.shape == (B, T, 32)
    assert count_parameters(emb) == (V + 23 + 2) * 24 + 2 * 24 + 24 * 32 + 32


@pytest.mark.parametrize("groups, inner", [(1, 1), (3, 1), (1, 2), (2, 3)])
def test_encoder_shares_layers(groups, inner):
    config = small_config(n_layers=6, n_groups=groups, inner_group_num=inner)
    encoder = AlbertEncoder(config)
    one_layer = count_parameters(BertLayer(config))
    assert count_parameters(encoder) == groups * inner * one_layer
    calls = []
    for g, group in enumerate(encoder.groups):
        for i, layer in enumerate(group):
            layer.register_forward_hook(lambda module, args, out, g=g, i=i: calls.append((g, i)))
    x, hidden, _ = encoder(torch.randn(2, 5, 32), output_hidden_states=True)
    expected = [(depth * groups // 6, i) for depth in range(6) for i in range(inner)]
    assert calls == expected
    assert len(hidden) == 1 + 6 * inner and torch.equal(hidden[-1], x)


def test_output_attentions_one_map_per_depth():
    torch.manual_seed(0)
    config = small_config(n_layers=4, n_groups=1, inner_group_num=2)
    model = AlbertModel(config).eval()
    ids = torch.randint(1, V, (3, 5))
    out = model(ids, output_attentions=True)
    assert len(out.attentions) == 4 * 2 and all(w.shape == (3, 4, 5, 5) for w in out.attentions)
    assert not torch.allclose(out.attentions[0], out.attentions[2])    # one layer, other inputs
    assert torch.allclose(out.last_hidden_state, model(ids).last_hidden_state, atol=1e-5)

def test_shared_layer_gets_the_sum_of_all_depths_gradients():
    torch.manual_seed(0)
    model = AlbertModel(small_config(n_layers=4, dropout=0.0), add_pooler=False)
    ids = torch.randint(1, V, (3, 5))
    model(ids).last_hidden_state.pow(2).mean().backward()
    shared_grad = model.encoder.groups[0][0].feed_forward.expand.weight.grad.clone()
    # Unroll: four separate copies of the layer, each gets its own gradient; their sum is the shared one.
    layer = model.encoder.groups[0][0]
    copies = [copy.deepcopy(layer) for _ in range(4)]
    for c in copies:
        c.zero_grad()
    with torch.no_grad():
        x0 = model.embeddings(ids, torch.zeros_like(ids))
    x = x0
    for c in copies:
        x = c(x)
    x.pow(2).mean().backward()
    total = sum(c.feed_forward.expand.weight.grad for c in copies)
    assert torch.allclose(shared_grad, total, atol=1e-6)


def test_forward_shapes_tying_and_padding_invariance():
    torch.manual_seed(0)
    model = AlbertForPreTraining(small_config()).eval()
    assert model.mlm_head.decoder.weight is model.bert.embeddings.token_embeddings.weight
    assert model.mlm_head.decoder.weight.shape == (V, 24) and model.mlm_head.dense.weight.shape == (24, 32)
    ids, segments, mask, labels, order = batch()
    with torch.no_grad():
        out = model(ids, segments, mask)
        assert out.mlm_logits.shape == (B, T, V) and out.sop_logits.shape == (B, 2)
        padded = model(torch.cat([ids, torch.zeros(B, 3, dtype=torch.long)], 1),
                       torch.cat([segments, torch.zeros(B, 3, dtype=torch.long)], 1),
                       torch.cat([mask, torch.zeros(B, 3, dtype=torch.long)], 1))
        real = mask.bool()
        assert max_error(out.mlm_logits[real], padded.mlm_logits[:, :T][real]) < 1e-5
        assert max_error(out.sop_logits, padded.sop_logits) < 1e-5
        full = model(ids, segments, mask, mlm_labels=labels, pair_labels=order)
    assert torch.isclose(full.loss, full.mlm_loss + full.sop_loss)
    assert full.mlm_logits.shape == ((labels != -100).sum().item(), V)


def test_bad_labels_are_rejected():
    model = AlbertForPreTraining(small_config()).eval()
    ids, segments, mask, labels, order = batch()
    with pytest.raises(ValueError, match="pair_labels"):
        model(ids, segments, mask, pair_labels=order[:-1])
    with pytest.raises(ValueError, match="pair_labels"):
        model(ids, segments, mask, pair_labels=order + 2)
    with pytest.raises(ValueError, match="input_ids"):
        model(ids + V)


@pytest.mark.parametrize("cls", [AlbertModel, AlbertForMaskedLM, AlbertForPreTraining])
def test_checkpoint_round_trip(cls, tmp_path):
    from tinybert.models.registry import load_model, save_model

    torch.manual_seed(0)
    model = (AlbertModel(small_config(), add_pooler=False) if cls is AlbertModel else cls(small_config())).eval()
    save_model(model, tmp_path)
    loaded = load_model(tmp_path)
    assert type(loaded) is cls and loaded.config == model.config
    ids, segments, mask, _, _ = batch()
    with torch.no_grad():
        a, b = model(ids, segments, mask), loaded(ids, segments, mask)
    first = a.last_hidden_state if cls is AlbertModel else (a.logits if cls is AlbertForMaskedLM else a.mlm_logits)
    second = b.last_hidden_state if cls is AlbertModel else (b.logits if cls is AlbertForMaskedLM else b.mlm_logits)
    assert torch.equal(first, second)


# --- parameter counts ----------------------------------------------------------------------------

try:  # a test oracle of the [test] extra; without it only the tests that use it skip
    import transformers
except ImportError:
    transformers = None
needs_transformers = pytest.mark.skipif(
    transformers is None, reason="transformers is not installed: pip install -e '.[test]'"
)

from tinybert.models.convert import from_hf, to_hf  # noqa: E402
from tinybert.models.convert_albert import (albert_config_from_hf, albert_config_to_hf,
                                            albert_weight_names)  # noqa: E402
from helpers import max_error, randomised  # noqa: E402


@needs_transformers
@pytest.mark.parametrize("name", list(ALBERT_PRESETS))
def test_presets_match_hugging_face_parameter_counts(name):
    config = AlbertConfig.preset(name)
    with torch.device("meta"):
        for ours, theirs in [(AlbertModel(config), transformers.AlbertModel(albert_config_to_hf(config))),
                             (AlbertForPreTraining(config), transformers.AlbertForPreTraining(albert_config_to_hf(config)))]:
            assert count_parameters(ours) == count_parameters(theirs)


def test_published_sizes_and_the_ninety_percent():
    with torch.device("meta"):
        base = count_parameters(AlbertModel(AlbertConfig.preset("albert-base-v2")))
        large = count_parameters(AlbertModel(AlbertConfig.preset("albert-large-v2")))
        bert_base = count_parameters(BertModel(BertConfig.preset("bert-base-uncased")))
        bert_large = count_parameters(BertModel(BertConfig.preset("bert-large-uncased")))
    assert base == 11_683_584 and large == 17_683_968           # Hugging Face's counts for the released configs
    assert 0.85 < 1 - base / bert_base < 0.95 and 1 - large / bert_large > 0.9


# --- parity with Hugging Face --------------------------------------------------------------------

def hf_config(**overrides):
    kwargs = dict(vocab_size=V, embedding_size=24, hidden_size=32, num_attention_heads=4, num_hidden_layers=3,
                  intermediate_size=37, max_position_embeddings=23)
    return transformers.AlbertConfig(**{**kwargs, **overrides})


def hf_model(name: str, seed: int = 0, **overrides):
    torch.manual_seed(seed)
    model = getattr(transformers, name)(hf_config(**overrides))
    return randomised(model, seed)


HF_VARIANTS = [dict(), dict(hidden_act="gelu", layer_norm_eps=1e-5),
               dict(num_hidden_layers=6, num_hidden_groups=3, inner_group_num=2), dict(num_hidden_groups=2)]


@needs_transformers
@pytest.mark.parametrize("overrides", HF_VARIANTS)
@pytest.mark.parametrize("fast", [True, False])
def test_albert_model_parity(overrides, fast):
    theirs = hf_model("AlbertModel", **overrides)
    ours = from_hf(theirs)
    assert type(ours) is AlbertModel and not ours.training
    for layer in (layer for group in ours.encoder.groups for layer in group):
        layer.fast = layer.attention.fast = fast
    ids, segments, mask, _, _ = batch()
    with torch.no_grad():
        a = ours(ids, segments, mask, output_hidden_states=True)
        b = theirs(input_ids=ids, token_type_ids=segments, attention_mask=mask, output_hidden_states=True)
    real = mask.bool()
    assert max_error(a.last_hidden_state[real], b.last_hidden_state[real]) < 1e-5
    assert max_error(a.pooler_output, b.pooler_output) < 1e-5
    assert len(a.hidden_states) == len(b.hidden_states)
    for x, y in zip(a.hidden_states, b.hidden_states):
        assert max_error(x[real], y[real]) < 1e-5


@needs_transformers
@pytest.mark.parametrize("overrides", HF_VARIANTS[:3])
def test_masked_lm_and_pretraining_parity(overrides):
    ids, segments, mask, labels, order = batch(2)
    real = mask.bool()
    theirs = hf_model("AlbertForMaskedLM", **overrides)
    ours = from_hf(theirs)
    assert type(ours) is AlbertForMaskedLM
    with torch.no_grad():
        a = ours(ids, segments, mask)
        b = theirs(input_ids=ids, token_type_ids=segments, attention_mask=mask, labels=labels)
        a_loss = ours(ids, segments, mask, labels=labels).loss
    assert max_error(a.logits[real], b.logits[real]) < 1e-5
    assert abs(a_loss.item() - b.loss.item()) < 1e-5

    theirs = hf_model("AlbertForPreTraining", seed=3, **overrides)
    ours = from_hf(theirs)
    assert type(ours) is AlbertForPreTraining
    with torch.no_grad():
        a = ours(ids, segments, mask)
        b = theirs(input_ids=ids, token_type_ids=segments, attention_mask=mask, labels=labels,
                   sentence_order_label=order)
        a_loss = ours(ids, segments, mask, mlm_labels=labels, pair_labels=order).loss
    assert max_error(a.mlm_logits[real], b.prediction_logits[real]) < 1e-5
    assert max_error(a.sop_logits, b.sop_logits) < 1e-5
    assert abs(a_loss.item() - b.loss.item()) < 1e-5


@needs_transformers
@pytest.mark.parametrize("name", ["AlbertModel", "AlbertForMaskedLM", "AlbertForPreTraining"])
@pytest.mark.parametrize("overrides", [dict(), dict(num_hidden_layers=4, num_hidden_groups=2, inner_group_num=2)])
def test_round_trip_is_exact(name, overrides):
    theirs = hf_model(name, **overrides)
    back = to_hf(from_hf(theirs))
    assert type(back) is type(theirs)
    a, b = theirs.state_dict(), back.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    if name != "AlbertModel":
        assert back.predictions.decoder.weight is back.albert.embeddings.word_embeddings.weight
    assert back.config.hidden_act == theirs.config.hidden_act == "gelu_new"


def test_to_hf_from_our_model_computes_the_same_function():
    torch.manual_seed(4)
    ours = AlbertForPreTraining(small_config(n_layers=4, n_groups=2)).eval()
    with torch.no_grad():
        for p in ours.parameters():
            p.add_(0.05 * torch.randn_like(p))
    theirs = to_hf(ours).eval()
    ids, segments, mask, _, _ = batch(3)
    with torch.no_grad():
        a = ours(ids, segments, mask)
        b = theirs(input_ids=ids, token_type_ids=segments, attention_mask=mask)
    real = mask.bool()
    assert max_error(a.mlm_logits[real], b.prediction_logits[real]) < 1e-5
    assert max_error(a.sop_logits, b.sop_logits) < 1e-5


@needs_transformers
def test_model_without_pooler_and_config_round_trip():
    theirs = transformers.AlbertModel(hf_config(), add_pooling_layer=False).eval()
    ours = from_hf(theirs)
    assert ours.pooler is None and "pooler.dense.weight" not in albert_weight_names(ours)
    assert albert_config_from_hf(albert_config_to_hf(ours.config)) == ours.config
    assert type(to_hf(ours)) is transformers.AlbertModel and to_hf(ours).pooler is None


# --- sentence-order pairs ------------------------------------------------------------------------

def documents(n: int = 400, seed: int = 0) -> list[list[list[int]]]:
    g = torch.Generator().manual_seed(seed)
    sizes = torch.randint(0, 8, (n,), generator=g).tolist()
    return [[[1000 * d + j, d, j] for j in range(size)] for d, size in enumerate(sizes)]


def test_sop_pairs_are_consecutive_segments_in_order_or_swapped():
    docs = documents()
    pairs = sample_sop_pairs(docs, seeded_generator(0, "sop"))
    assert all(isinstance(p, SegmentPair) for p in pairs)
    assert len(pairs) == sum(max(0, len(d) - 1) for d in docs)
    seen = []
    for p in pairs:
        (da, ia), (db, ib) = divmod(p.a[0], 1000), divmod(p.b[0], 1000)
        assert da == db
        if p.pair_label == 0:
            assert ib == ia + 1
            seen.append((da, ia))
        else:
            assert p.pair_label == 1 and ia == ib + 1
            assert (p.a, p.b) == (docs[da][ib + 1], docs[da][ib])      # exactly the reversed consecutive pair
            seen.append((da, ib))
    assert sorted(seen) == sorted((d, i) for d, s in enumerate(docs) for i in range(len(s) - 1))


@pytest.mark.parametrize("p", [0.5, 0.2, 0.9])
def test_sop_rate_within_tolerance(p):
    pairs = sample_sop_pairs([[[i] for i in range(4001)]], seeded_generator(1, p), p_in_order=p)
    in_order = sum(pair.pair_label == 0 for pair in pairs) / len(pairs)
    assert abs(in_order - p) < 4 * (p * (1 - p) / len(pairs)) ** 0.5


def test_sop_extremes_determinism_and_errors():
    docs = documents(50)
    assert all(p.pair_label == 0 for p in sample_sop_pairs(docs, seeded_generator(2), p_in_order=1.0))
    assert all(p.pair_label == 1 for p in sample_sop_pairs(docs, seeded_generator(2), p_in_order=0.0))
    first = sample_sop_pairs(docs, seeded_generator(3, "x"))
    assert first == sample_sop_pairs(docs, seeded_generator(3, "x"))
    assert first != sample_sop_pairs(docs, seeded_generator(4, "x"))
    with pytest.raises(ValueError, match="two segments"):
        sample_sop_pairs([[[1]], [], [[2]]], seeded_generator(0))
    with pytest.raises(ValueError, match="p_in_order"):
        sample_sop_pairs(docs, seeded_generator(0), p_in_order=1.5)


def test_sop_examples_feed_chapter_9_batches():
    vocab = {t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(40)])}
    special = SpecialTokens.from_vocab(vocab)
    g = torch.Generator().manual_seed(0)
    docs = [[torch.randint(5, 45, (int(n),), generator=g).tolist() for n in torch.randint(2, 9, (12,), generator=g)]
            for _ in range(6)]
    examples = make_examples(docs, special, 21, seeded_generator(0, "examples"),
                             sample_pairs=sample_sop_pairs)
    assert examples and {e.pair_label for e in examples} == {0, 1}
    for e in examples:
        assert len(e.input_ids) <= 21 and e.input_ids[0] == special.cls and e.input_ids[-1] == special.sep
        assert e.input_ids.count(special.sep) == 2 and len(e.token_type_ids) == len(e.input_ids)
    batches = PretrainingBatches(examples, special, 4, seed=0)
    b = batches(0)
    assert set(b) == {"input_ids", "token_type_ids", "attention_mask", "pair_labels", "mlm_labels"}
    model = AlbertForPreTraining(AlbertConfig(vocab_size=45, embedding_size=8, d_model=16, n_heads=2, d_ff=19,
                                              n_layers=2, max_len=21))
    out = model(b["input_ids"], b["token_type_ids"], b["attention_mask"], mlm_labels=b["mlm_labels"],
                pair_labels=b["pair_labels"])
    assert torch.isfinite(out.loss)


def test_chapter_10_heads_accept_albert():
    from tinybert.finetuning.heads import SequenceClassifier

    torch.manual_seed(0)
    classifier = SequenceClassifier(AlbertModel(small_config()), n_labels=3).eval()
    ids, segments, mask, _, _ = batch()
    out = classifier(ids, segments, mask, labels=torch.randint(0, 3, (B,)))
    assert out.logits.shape == (B, 3) and torch.isfinite(out.loss)
    out.loss.backward()
    assert classifier.encoder.encoder.groups[0][0].attention.query.weight.grad is not None


def test_the_pretraining_loop_trains_albert_as_it_is():
    """Chapter 9's loop passes the batch as it is (pair_labels) and reads pair_loss, so an
    AlbertForPreTraining needs no adapter and no renaming (issue 17)."""
    from tinybert.pretraining.evaluation import evaluate_pretraining
    from tinybert.pretraining.objective import pretraining_losses
    torch.manual_seed(0)
    model = AlbertForPreTraining(small_config(classifier_dropout=0.0)).eval()
    ids, segments, mask, labels, order = batch()
    given = {"input_ids": ids, "token_type_ids": segments, "attention_mask": mask,
             "mlm_labels": labels, "pair_labels": order}
    loss, _, pair = pretraining_losses(model, given)
    direct = model(ids, segments, mask, mlm_labels=labels, pair_labels=order)
    assert torch.allclose(loss, direct.loss) and torch.allclose(pair, direct.sop_loss)
    assert direct.pair_loss is direct.sop_loss and direct.pair_logits is direct.sop_logits
    metrics = evaluate_pretraining(model, [given])
    expected = (direct.sop_logits.argmax(-1) == order).float().mean().item()
    assert metrics["pair_accuracy"] == pytest.approx(expected)
