"""Hand-written tests for tinybert.finetuning.heads (chapter 10): shapes and losses on a tiny odd-sized BERT,
any encoder with the contract's interface, padding invariance, bad labels, parity with Hugging
Face's BERT heads, and what set_trainable_layers freezes."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tinybert.finetuning.heads import (QuestionAnswerer, SequenceClassifier, SpanOutput,
                                       TokenClassifier, set_trainable_layers)
from tinybert.models.bert import BertConfig, BertModel

B, T, V, C = 13, 7, 99, 5
TINY = BertConfig(vocab_size=V, d_model=32, n_layers=3, n_heads=4, d_ff=37, max_len=16)


def tiny_bert(pooler: bool = True) -> BertModel:
    torch.manual_seed(0)
    return BertModel(TINY, add_pooler=pooler).eval()


def batch(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, V, (B, T), generator=g)
    lengths = torch.randint(2, T + 1, (B,), generator=g)
    mask = torch.arange(T)[None, :] < lengths[:, None]                         # (B, T)
    types = ((torch.arange(T)[None, :] >= 3) & mask).long()
    return ids.masked_fill(~mask, 0), types, mask


class MeanEncoder(nn.Module):
    """Not a BERT: an embedding table and a linear layer, with the contract's interface."""

    def __init__(self):
        super().__init__()
        self.config = SimpleNamespace(d_model=16)
        self.embed, self.mix = nn.Embedding(V, 16), nn.Linear(16, 16)

    def forward(self, input_ids, token_type_ids=None, attention_mask=None):
        return SimpleNamespace(last_hidden_state=torch.tanh(self.mix(self.embed(input_ids))))


@pytest.mark.parametrize("encoder_factory", [tiny_bert, lambda: tiny_bert(pooler=False), MeanEncoder])
def test_shapes_and_losses(encoder_factory):
    ids, types, mask = batch()
    g = torch.Generator().manual_seed(1)
    labels = torch.randint(0, C, (B,), generator=g)
    tags = torch.randint(0, C, (B, T), generator=g).masked_fill(~mask, -100)
    starts, ends = torch.randint(0, T, (B,), generator=g), torch.randint(0, T, (B,), generator=g)

    out = SequenceClassifier(encoder_factory(), C).eval()(ids, types, mask, labels=labels)
    assert out.logits.shape == (B, C)
    assert torch.allclose(out.loss, F.cross_entropy(out.logits, labels))

    out = TokenClassifier(encoder_factory(), C).eval()(ids, types, mask, labels=tags)
    assert out.logits.shape == (B, T, C)
    assert torch.allclose(out.loss, F.cross_entropy(out.logits[mask], tags[mask]))   # padding ignored

    out = QuestionAnswerer(encoder_factory()).eval()(ids, types, mask, start_positions=starts, end_positions=ends)
    assert isinstance(out, SpanOutput) and out.start_logits.shape == out.end_logits.shape == (B, T)
    expected = (F.cross_entropy(out.start_logits, starts) + F.cross_entropy(out.end_logits, ends)) / 2
    assert torch.allclose(out.loss, expected)
    assert QuestionAnswerer(encoder_factory())(ids, types, mask).loss is None


def test_sequence_classifier_reads_the_pooler_when_there_is_one():
    encoder = tiny_bert()
    model = SequenceClassifier(encoder, C).eval()
    ids, types, mask = batch()
    with torch.no_grad():
        pooled = encoder(ids, types, mask).pooler_output
        assert torch.allclose(model(ids, types, mask).logits, model.classifier(pooled))
        model_without = SequenceClassifier(tiny_bert(pooler=False), C).eval()
        cls_vector = model_without.encoder(ids, types, mask).last_hidden_state[:, 0]
        assert torch.allclose(model_without(ids, types, mask).logits, model_without.classifier(cls_vector))


def test_padding_does_not_change_the_real_tokens_logits():
    model = TokenClassifier(tiny_bert(), C).eval()
    ids, types, mask = batch()
    padded_ids = torch.cat([ids, torch.zeros(B, 4, dtype=torch.long)], dim=1)
    padded_types = torch.cat([types, torch.zeros(B, 4, dtype=torch.long)], dim=1)
    padded_mask = torch.cat([mask, torch.zeros(B, 4, dtype=torch.bool)], dim=1)
    with torch.no_grad():
        short = model(ids, types, mask).logits
        long = model(padded_ids, padded_types, padded_mask).logits[:, :T]
    assert torch.allclose(short[mask], long[mask], atol=1e-5)


def test_new_layers_start_as_bert_initialises_them():
    torch.manual_seed(0)
    layer = SequenceClassifier(BertModel(BertConfig.preset("bert-mini", n_layers=1)), 1000).classifier
    assert torch.all(layer.bias == 0) and abs(layer.weight.std().item() - 0.02) < 0.002


@pytest.mark.parametrize("make, labels", [
    (lambda e: SequenceClassifier(e, C), {"labels": torch.full((B,), C)}),
    (lambda e: SequenceClassifier(e, C), {"labels": torch.full((B,), -1)}),
    (lambda e: TokenClassifier(e, C), {"labels": torch.full((B, T), 7)}),
    (QuestionAnswerer, {"start_positions": torch.full((B,), T), "end_positions": torch.zeros(B, dtype=torch.long)}),
])
def test_labels_outside_the_label_set_are_a_clear_error(make, labels):
    ids, types, mask = batch()
    with pytest.raises(ValueError, match=r"must be in 0\.\."):
        make(tiny_bert())(ids, types, mask, **labels)


def test_parity_with_hugging_face():
    transformers = pytest.importorskip("transformers")
    from tinybert.models.convert import from_hf
    from tinybert.models.convert_names import bert_config_to_hf

    ids, types, mask = batch(3)
    g = torch.Generator().manual_seed(4)
    cases = [(lambda e: SequenceClassifier(e, C), transformers.BertForSequenceClassification, "classifier",
              "classifier", {"labels": torch.randint(0, C, (B,), generator=g)}),
             (lambda e: TokenClassifier(e, C), transformers.BertForTokenClassification, "classifier", "classifier",
              {"labels": torch.randint(0, C, (B, T), generator=g).masked_fill(~mask, -100)}),
             (QuestionAnswerer, transformers.BertForQuestionAnswering, "qa_outputs", "span",
              {"start_positions": torch.randint(0, T, (B,), generator=g),
               "end_positions": torch.randint(0, T, (B,), generator=g)})]
    for make, hf_class, hf_layer, our_layer, labels in cases:
        hf_config = bert_config_to_hf(TINY)
        hf_config.num_labels = 2 if hf_layer == "qa_outputs" else C     # QA: a start and an end score
        torch.manual_seed(5)
        hf_model = hf_class(hf_config).eval()
        ours = make(from_hf(hf_model.bert)).eval()
        getattr(ours, our_layer).load_state_dict(getattr(hf_model, hf_layer).state_dict())
        with torch.no_grad():
            theirs = hf_model(input_ids=ids, token_type_ids=types, attention_mask=mask.long(), **labels)
            mine = ours(ids, types, mask, **labels)
        names = ["start_logits", "end_logits"] if hf_layer == "qa_outputs" else ["logits"]
        for name in names:
            a, b = getattr(mine, name), getattr(theirs, name)
            if a.shape[:2] == mask.shape:
                a, b = a[mask], b[mask]
            assert torch.allclose(a, b, atol=1e-5), f"{hf_class.__name__}.{name}"
        assert torch.allclose(mine.loss, theirs.loss, atol=1e-6), hf_class.__name__


def _trainable_names(model):
    return {name for name, p in model.named_parameters() if p.requires_grad}


def test_set_trainable_layers():
    model = SequenceClassifier(tiny_bert(), C)
    everything = sum(p.numel() for p in model.parameters())
    assert set_trainable_layers(model, None) == everything
    head = sum(p.numel() for p in model.classifier.parameters())
    assert set_trainable_layers(model, 0) == head and _trainable_names(model) == {"classifier.weight", "classifier.bias"}
    n = set_trainable_layers(model, 2)
    names = _trainable_names(model)
    assert all(name.startswith(("classifier.", "encoder.pooler.", "encoder.encoder.layers.1.",
                                "encoder.encoder.layers.2.")) for name in names)
    assert any(".layers.1." in name for name in names) and any("pooler" in name for name in names)
    assert n == sum(p.numel() for name, p in model.named_parameters() if name in names)
    for bad in (-1, 4):
        with pytest.raises(ValueError, match=r"0\.\.3"):
            set_trainable_layers(model, bad)


def test_frozen_layers_get_no_gradient():
    model = TokenClassifier(tiny_bert(), C).train()
    set_trainable_layers(model, 1)
    ids, types, mask = batch()
    model(ids, types, mask, labels=torch.zeros(B, T, dtype=torch.long)).loss.backward()
    for name, p in model.named_parameters():
        if "pooler" not in name:                       # unfrozen, but a token classifier never reads it
            assert (p.grad is not None) == p.requires_grad, name
    assert model.encoder.encoder.layers[2].feed_forward_norm.weight.grad is not None
    assert model.encoder.embeddings.token_embeddings.weight.grad is None


def test_set_trainable_layers_with_an_albert_encoder():
    """ALBERT shares one layer: training everything works; choosing top layers is refused clearly."""
    from tinybert.models.albert import AlbertConfig, AlbertModel

    config = AlbertConfig(vocab_size=50, embedding_size=8, d_model=16, n_layers=3, n_heads=2, d_ff=24, max_len=12)
    model = SequenceClassifier(AlbertModel(config), 3)
    assert set_trainable_layers(model, None) == sum(p.numel() for p in model.parameters())
    with pytest.raises(ValueError, match=r"\.encoder\.layers.*AlbertModel"):
        set_trainable_layers(model, 1)
    assert all(p.requires_grad for p in model.parameters())
