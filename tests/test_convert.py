"""Parity with Hugging Face's BERT (tinybert.models.convert, generated from chapters/08_bert.md).

The Hugging Face models are built from transformers.BertConfig with a tiny odd config (vocab 99,
hidden 32, 4 heads, 3 layers, intermediate 37, 23 positions), never downloaded. Every parameter
is randomised first (HF initialises biases to zero and LayerNorms to the identity, which would
hide a bias or a LayerNorm in the wrong place).
"""
from __future__ import annotations

import pytest
import torch

try:  # a test oracle of the [test] extra; without it only the tests that use it skip
    import transformers
except ImportError:
    transformers = None
needs_transformers = pytest.mark.skipif(
    transformers is None, reason="transformers is not installed: pip install -e '.[test]'"
)

from tinybert.models.convert import from_hf, register, to_hf  # noqa: E402
from tinybert.models.convert_names import bert_config_from_hf  # noqa: E402
from tinybert.blocks.feedforward import count_parameters  # noqa: E402
from tinybert.models.bert import BertConfig, BertModel  # noqa: E402
from tinybert.models.bert_heads import BertForMaskedLM, BertForPreTraining
from helpers import max_error, randomised  # noqa: E402

B, T, V = 13, 7, 99
HF_CLASSES = ["BertModel", "BertForMaskedLM", "BertForPreTraining"]


def hf_config(**overrides):
    kwargs = dict(vocab_size=V, hidden_size=32, num_attention_heads=4, num_hidden_layers=3,
                  intermediate_size=37, max_position_embeddings=23)
    return transformers.BertConfig(**{**kwargs, **overrides})


def hf_model(name: str, seed: int = 0, **overrides):
    torch.manual_seed(seed)
    model = getattr(transformers, name)(hf_config(**overrides))
    return randomised(model, seed)


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
    nsp = torch.randint(0, 2, (B,), generator=g)
    return ids, segments, mask, labels, nsp


@needs_transformers
@pytest.mark.parametrize("eps", [1e-5, None])        # None: transformers' default, 1e-12 like Google's
@pytest.mark.parametrize("fast", [True, False])
def test_bert_model_parity(eps, fast):
    hf = hf_model("BertModel", **({} if eps is None else dict(layer_norm_eps=eps)))
    ours = from_hf(hf)
    ours_config = BertConfig.from_dict({**ours.config.to_dict(), "fast": fast})
    assert ours_config.layer_norm_eps == (1e-12 if eps is None else eps)
    ours = BertModel(ours_config).eval()
    ours.load_state_dict(from_hf(hf).state_dict())
    ids, segments, mask, _, _ = batch()
    with torch.no_grad():
        theirs = hf(input_ids=ids, token_type_ids=segments, attention_mask=mask)
        mine = ours(ids, segments, mask)
    real = mask.bool()
    assert theirs.last_hidden_state.abs().max() > 0.1                # not a trivial comparison
    assert max_error(mine.last_hidden_state[real], theirs.last_hidden_state[real]) < 1e-5
    assert max_error(mine.pooler_output, theirs.pooler_output) < 1e-5


@needs_transformers
def test_hidden_states_and_attentions_parity():
    hf = hf_model("BertModel", attn_implementation="eager")   # eager: the one with weights
    ours = from_hf(hf)
    assert ours.config.fast                                    # weights even from a fast model
    ids, segments, mask, _, _ = batch()
    with torch.no_grad():
        theirs = hf(input_ids=ids, token_type_ids=segments, attention_mask=mask,
                    output_hidden_states=True, output_attentions=True)
        mine = ours(ids, segments, mask, output_hidden_states=True, output_attentions=True)
    real = mask.bool()
    assert len(mine.hidden_states) == len(theirs.hidden_states) == 4
    for a, b in zip(mine.hidden_states, theirs.hidden_states):
        assert max_error(a[real], b[real]) < 1e-5
    assert len(mine.attentions) == len(theirs.attentions) == 3
    for a, b in zip(mine.attentions, theirs.attentions):
        assert a.shape == b.shape == (B, 4, T, T)
        rows = real[:, None, :, None].expand_as(a)             # real queries, every key
        assert max_error(a[rows], b[rows]) < 1e-5


@needs_transformers
@pytest.mark.parametrize("eps", [1e-5, None])
def test_masked_lm_parity(eps):
    hf = hf_model("BertForMaskedLM", seed=2, **({} if eps is None else dict(layer_norm_eps=eps)))
    ours = from_hf(hf)
    assert isinstance(ours, BertForMaskedLM) and not ours.training
    ids, segments, mask, labels, _ = batch(3)
    with torch.no_grad():
        theirs = hf(input_ids=ids, token_type_ids=segments, attention_mask=mask, labels=labels)
        full = ours(ids, segments, mask)
        mine = ours(ids, segments, mask, labels=labels)
    real = mask.bool()
    assert max_error(full.logits[real], theirs.logits[real]) < 1e-5
    assert max_error(mine.logits, theirs.logits[labels != -100]) < 1e-5
    assert abs(mine.loss.item() - theirs.loss.item()) < 1e-5


@needs_transformers
@pytest.mark.parametrize("eps", [1e-5, None])
def test_pretraining_parity(eps):
    hf = hf_model("BertForPreTraining", seed=4, **({} if eps is None else dict(layer_norm_eps=eps)))
    ours = from_hf(hf)
    assert isinstance(ours, BertForPreTraining)
    ids, segments, mask, labels, nsp = batch(5)
    with torch.no_grad():
        theirs = hf(input_ids=ids, token_type_ids=segments, attention_mask=mask, labels=labels,
                    next_sentence_label=nsp)
        full = ours(ids, segments, mask)
        mine = ours(ids, segments, mask, mlm_labels=labels, pair_labels=nsp)
    real = mask.bool()
    assert max_error(full.mlm_logits[real], theirs.prediction_logits[real]) < 1e-5
    assert max_error(full.nsp_logits, theirs.seq_relationship_logits) < 1e-5
    assert abs(mine.loss.item() - theirs.loss.item()) < 1e-5


@needs_transformers
def test_training_mode_gradients_match_without_dropout():
    hf = hf_model("BertForPreTraining", seed=6, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0).train()
    ours = from_hf(hf)
    assert ours.training
    ids, segments, mask, labels, nsp = batch(7)
    hf(input_ids=ids, token_type_ids=segments, attention_mask=mask, labels=labels,
       next_sentence_label=nsp).loss.backward()
    ours(ids, segments, mask, mlm_labels=labels, pair_labels=nsp).loss.backward()
    pairs = [(hf.bert.embeddings.word_embeddings.weight, ours.bert.embeddings.token_embeddings.weight),
             (hf.bert.encoder.layer[1].attention.self.key.weight, ours.bert.encoder.layers[1].attention.key.weight),
             (hf.bert.encoder.layer[2].intermediate.dense.bias, ours.bert.encoder.layers[2].feed_forward.expand.bias),
             (hf.bert.pooler.dense.weight, ours.bert.pooler.dense.weight),
             (hf.cls.predictions.bias, ours.mlm_head.decoder.bias),
             (hf.cls.seq_relationship.weight, ours.nsp_head.weight)]
    for a, b in pairs:
        assert max_error(a.grad, b.grad) < 1e-5


@needs_transformers
@pytest.mark.parametrize("name", HF_CLASSES)
def test_round_trip_reproduces_the_state_dict_exactly(name):
    hf = hf_model(name, seed=8)
    back = to_hf(from_hf(hf))
    assert type(back) is type(hf)
    a, b = hf.state_dict(), back.state_dict()
    assert a.keys() == b.keys()
    for key in a:
        assert torch.equal(a[key], b[key]), key
    ours = from_hf(hf)
    again = from_hf(to_hf(ours))
    for (k1, v1), (k2, v2) in zip(ours.state_dict().items(), again.state_dict().items()):
        assert k1 == k2 and torch.equal(v1, v2)


@needs_transformers
@pytest.mark.parametrize("name", ["BertForMaskedLM", "BertForPreTraining"])
def test_weights_stay_tied_after_conversion(name):
    ours = from_hf(hf_model(name))
    assert ours.mlm_head.decoder.weight is ours.bert.embeddings.token_embeddings.weight
    hf = to_hf(ours)
    assert hf.cls.predictions.decoder.weight is hf.bert.embeddings.word_embeddings.weight
    assert torch.equal(hf.cls.predictions.decoder.bias, ours.mlm_head.decoder.bias)


@needs_transformers
def test_bert_model_without_pooler():
    hf = transformers.BertModel(hf_config(), add_pooling_layer=False).eval()
    ours = from_hf(hf)
    assert ours.pooler is None
    assert to_hf(ours).pooler is None


@needs_transformers
@pytest.mark.parametrize("preset", ["bert-base-uncased", "bert-large-uncased"])
def test_parameter_counts_equal_hugging_face(preset):
    config = BertConfig.preset(preset)
    from tinybert.models.convert_names import bert_config_to_hf

    with torch.device("meta"):
        for ours_cls in (BertModel, BertForMaskedLM, BertForPreTraining):
            ours = ours_cls(config)
            theirs = getattr(transformers, ours_cls.__name__)(bert_config_to_hf(config))
            assert count_parameters(ours) == count_parameters(theirs), ours_cls.__name__
    D, N, F, V, P = config.d_model, config.n_layers, config.d_ff, config.vocab_size, config.max_len
    per_layer = 4 * (D * D + D) + 2 * D + (D * F + F) + (F * D + D) + 2 * D
    formula = (V + P + 2) * D + 2 * D + N * per_layer + D * D + D
    with torch.device("meta"):
        assert count_parameters(BertModel(config)) == formula


@needs_transformers
def test_activation_names_are_translated():
    assert bert_config_from_hf(hf_config(hidden_act="gelu_new")).activation == "gelu_tanh"
    assert bert_config_from_hf(hf_config(hidden_act="relu")).activation == "relu"
    with pytest.raises(ValueError, match="unsupported hidden_act 'silu'"):
        bert_config_from_hf(hf_config(hidden_act="silu"))


@needs_transformers
def test_unsupported_configs_are_clear_errors():
    config = hf_config()
    config.position_embedding_type = "relative_key"
    with pytest.raises(ValueError, match="absolute"):
        bert_config_from_hf(config)
    with pytest.raises(ValueError, match="is_decoder"):
        bert_config_from_hf(hf_config(is_decoder=True))


def test_unknown_classes_are_clear_errors():
    with pytest.raises(ValueError, match="from_hf: no converter for Linear; known classes: .*BertForMaskedLM, BertForPreTraining, BertModel"):
        from_hf(torch.nn.Linear(2, 2))
    with pytest.raises(ValueError, match="to_hf: no converter for Linear"):
        to_hf(torch.nn.Linear(2, 2))


def test_later_chapters_can_register_converters(monkeypatch):
    import tinybert.models.convert as convert

    monkeypatch.setattr(convert, "_FROM_HF", dict(convert._FROM_HF))     # leave the real registry alone
    monkeypatch.setattr(convert, "_TO_HF", dict(convert._TO_HF))
    class Toy(torch.nn.Module):
        pass

    class HFToy(torch.nn.Module):
        pass

    register("HFToy", Toy, lambda hf: Toy(), lambda model: HFToy())
    assert isinstance(from_hf(HFToy()), Toy)
    assert isinstance(to_hf(Toy()), HFToy)


@needs_transformers
def test_index_buffers_saved_by_older_transformers_are_ignored(monkeypatch):
    hf = hf_model("BertForMaskedLM")
    state = hf.state_dict()
    state["bert.embeddings.position_ids"] = torch.arange(23)[None]        # persistent before transformers 4.31
    monkeypatch.setattr(hf, "state_dict", lambda: state)
    ours = from_hf(hf)
    assert torch.equal(ours.bert.embeddings.position_embeddings.weight, hf.bert.embeddings.position_embeddings.weight)
    state["bert.embeddings.extra.weight"] = torch.zeros(3)                   # anything else is an error
    with pytest.raises(ValueError, match="unused source tensors \\['bert.embeddings.extra.weight'\\]"):
        from_hf(hf)


def test_from_hf_finds_later_families_without_their_modules_imported():
    """A fresh interpreter that imports only tinybert.models.convert converts RoBERTa, DistilBERT and ALBERT both ways."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent("""
        import sys
        import transformers
        from tinybert.models.convert import from_hf, to_hf
        later = ("tinybert.models.roberta", "tinybert.models.distilbert", "tinybert.models.convert_albert")
        assert not any(m in sys.modules for m in later), [m for m in later if m in sys.modules]
        small = dict(vocab_size=99, num_hidden_layers=1, num_attention_heads=2, max_position_embeddings=40)
        hf = [transformers.RobertaForMaskedLM(transformers.RobertaConfig(hidden_size=32, intermediate_size=37, **small)),
              transformers.AlbertModel(transformers.AlbertConfig(embedding_size=8, hidden_size=32,
                                                                 intermediate_size=37, **small)),
              transformers.DistilBertModel(transformers.DistilBertConfig(vocab_size=99, dim=32, n_layers=1, n_heads=2,
                                                                         hidden_dim=37, max_position_embeddings=40))]
        for model in hf:
            ours = from_hf(model)
            assert type(to_hf(ours)).__name__ == type(model).__name__, (type(model).__name__, type(ours).__name__)
            print(type(model).__name__, "->", type(ours).__module__, type(ours).__name__)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count("->") == 3, done.stdout
