"""DistilBERT (tinybert.models.distilbert and tinybert.pretraining.distillation, generated from chapters/13_distilbert.md).

Parity: Hugging Face models built from transformers.DistilBertConfig with a tiny odd config (vocab 99,
dim 32, 4 heads, 3 layers, hidden_dim 37), never downloaded, every parameter randomised.
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from tinybert.models.registry import load_model, save_model
from tinybert.pretraining.distillation import distillation_loss, student_from_teacher
from tinybert.blocks.feedforward import count_parameters
from tinybert.models.bert import BertConfig, BertModel
from tinybert.models.bert_heads import BertForMaskedLM, BertForPreTraining
from tinybert.models.distilbert import (DistilBertConfig, DistilBertForMaskedLM, DistilBertModel,
                                        distilbert_weight_names)
import helpers  # noqa: E402
from helpers import max_error, randomised  # noqa: E402

B, T, V = 13, 7, 99


def hf_model(name: str, seed: int = 0, **overrides):
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(seed)
    kwargs = dict(vocab_size=V, dim=32, n_layers=3, n_heads=4, hidden_dim=37, max_position_embeddings=23)
    model = getattr(transformers, name)(transformers.DistilBertConfig(**{**kwargs, **overrides}))
    return randomised(model, seed)


def padded_batch(seed: int = 1):
    return helpers.padded_batch(B, T, V, seed=seed)


def tiny_config(**overrides) -> BertConfig:
    return BertConfig(**{**dict(vocab_size=V, d_model=32, n_layers=4, n_heads=4, d_ff=37, max_len=16), **overrides})


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize("activation", ["gelu", "relu"])
def test_distilbert_model_parity(fast, activation):
    from tinybert.models.convert import from_hf

    hf = hf_model("DistilBertModel", activation=activation)
    converted = from_hf(hf)
    assert isinstance(converted, DistilBertModel) and converted.pooler is None
    ours = DistilBertModel(DistilBertConfig.from_dict({**converted.config.to_dict(), "fast": fast})).eval()
    ours.load_state_dict(converted.state_dict())
    ids, real, _ = padded_batch()
    with torch.no_grad():
        theirs = hf(input_ids=ids, attention_mask=real.long(), output_hidden_states=True)
        mine = ours(ids, attention_mask=real, output_hidden_states=True)
    assert theirs.last_hidden_state.abs().max() > 0.1
    assert max_error(mine.last_hidden_state[real], theirs.last_hidden_state[real]) < 1e-5
    for a, b in zip(mine.hidden_states, theirs.hidden_states, strict=True):
        assert max_error(a[real], b[real]) < 1e-5


def test_distilbert_masked_lm_parity_and_loss():
    from tinybert.models.convert import from_hf

    hf = hf_model("DistilBertForMaskedLM", seed=3)
    ours = from_hf(hf)
    assert isinstance(ours, DistilBertForMaskedLM)
    assert ours.mlm_head.decoder.weight is ours.bert.embeddings.token_embeddings.weight
    ids, real, labels = padded_batch(2)
    with torch.no_grad():
        theirs = hf(input_ids=ids, attention_mask=real.long(), labels=labels)
        mine = ours(ids, attention_mask=real)
        mine_loss = ours(ids, attention_mask=real, labels=labels).loss
    assert max_error(mine.logits[real], theirs.logits[real]) < 1e-5
    assert abs(mine_loss.item() - theirs.loss.item()) < 1e-5


@pytest.mark.parametrize("name", ["DistilBertModel", "DistilBertForMaskedLM"])
def test_round_trip_reproduces_every_tensor(name):
    from tinybert.models.convert import from_hf, to_hf

    hf = hf_model(name, seed=5)
    back = to_hf(from_hf(hf))
    assert type(back) is type(hf)
    a, b = hf.state_dict(), back.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_weight_names_cover_every_tensor_once():
    model = DistilBertForMaskedLM(DistilBertConfig(vocab_size=V, d_model=32, n_layers=2, n_heads=4, d_ff=37, max_len=9))
    names = distilbert_weight_names(model)
    assert len(set(names.values())) == len(names)
    assert names["bert.encoder.layers.1.attention.output.weight"] == "distilbert.transformer.layer.1.attention.out_lin.weight"
    assert names["bert.encoder.layers.0.feed_forward.contract.bias"] == "distilbert.transformer.layer.0.ffn.lin2.bias"
    assert names["bert.encoder.layers.0.feed_forward_norm.weight"] == "distilbert.transformer.layer.0.output_layer_norm.weight"
    assert not any("segment" in k or "pooler" in k for k in names)


def test_preset_parameter_count_equals_hugging_face():
    transformers = pytest.importorskip("transformers")
    with torch.device("meta"):
        ours = count_parameters(DistilBertModel(DistilBertConfig.preset("distilbert-base-uncased")))
        theirs = count_parameters(transformers.DistilBertModel(transformers.DistilBertConfig()))
        ours_mlm = count_parameters(DistilBertForMaskedLM(DistilBertConfig.preset("distilbert-base-uncased")))
        theirs_mlm = count_parameters(transformers.DistilBertForMaskedLM(transformers.DistilBertConfig()))
        bert = count_parameters(BertModel(BertConfig.preset("bert-base-uncased")))
    assert ours == theirs == 66_362_880 and ours_mlm == theirs_mlm
    assert 0.39 < 1 - ours / bert < 0.40                     # "40% fewer parameters"


def test_errors_and_token_types():
    with pytest.raises(ValueError, match="DistilBertConfig"):
        DistilBertModel(tiny_config())
    with pytest.raises(ValueError, match="unknown DistilBERT preset"):
        DistilBertConfig.preset("distilbert-huge")
    model = DistilBertModel(DistilBertConfig(vocab_size=V, d_model=32, n_layers=1, n_heads=4, d_ff=37, max_len=9)).eval()
    ids = torch.randint(1, V, (2, 5))
    with torch.no_grad():
        assert torch.equal(model(ids).last_hidden_state, model(ids, torch.zeros_like(ids)).last_hidden_state)
    with pytest.raises(ValueError, match="token_type_ids"):
        model(ids, torch.ones_like(ids))                                  # no sentence B
    with pytest.raises(ValueError, match="max_len"):
        model(torch.randint(1, V, (2, 10)))
    from tinybert.models.distilbert import distilbert_config_to_hf
    with pytest.raises(ValueError, match="1e-12"):
        distilbert_config_to_hf(DistilBertConfig(vocab_size=V, d_model=32, n_layers=1, n_heads=4, d_ff=37,
                                                 layer_norm_eps=1e-5))


def test_save_and_load(tmp_path):
    torch.manual_seed(0)
    model = DistilBertForMaskedLM(DistilBertConfig(vocab_size=V, d_model=32, n_layers=2, n_heads=4, d_ff=37, max_len=9))
    loaded = load_model(save_model(model, tmp_path / "distil"))
    assert type(loaded) is DistilBertForMaskedLM and loaded.config == model.config
    ids, real, _ = padded_batch(7)
    with torch.no_grad():
        assert torch.equal(loaded(ids, attention_mask=real).logits, model.eval()(ids, attention_mask=real).logits)


# --- the student -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("teacher_class", [BertForPreTraining, BertForMaskedLM])
@pytest.mark.parametrize("layers", [[0, 2], [3], [1, 0, 3], None])
def test_student_holds_exactly_the_chosen_teacher_layers(teacher_class, layers):
    torch.manual_seed(0)
    teacher = teacher_class(tiny_config()).eval()
    with torch.no_grad():                                     # nothing may sit at an identity or zero value
        for p in teacher.parameters():
            p.add_(0.05 * torch.randn_like(p))
    student = student_from_teacher(teacher, layers).eval()
    chosen = [0, 2] if layers is None else layers
    assert student.config.n_layers == len(chosen) and isinstance(student.config, DistilBertConfig)
    for k, i in enumerate(chosen):
        a, b = student.bert.encoder.layers[k].state_dict(), teacher.bert.encoder.layers[i].state_dict()
        assert a.keys() == b.keys() and all(torch.equal(a[key], b[key]) for key in a)
    ids, real, _ = padded_batch(8)
    with torch.no_grad():
        x = teacher.bert.embeddings(ids, torch.zeros_like(ids))
        mask = real[:, None, None, :]
        for i in chosen:
            x = teacher.bert.encoder.layers[i](x, mask)
        expected = teacher.mlm_head(x)
        got = student(ids, attention_mask=real).logits
    assert max_error(got[real], expected[real]) < 1e-5


def test_student_with_every_layer_is_the_teacher_and_is_a_copy():
    torch.manual_seed(1)
    teacher = BertForPreTraining(tiny_config()).eval()
    student = student_from_teacher(teacher, [0, 1, 2, 3]).eval()
    ids, real, _ = padded_batch(9)
    with torch.no_grad():
        assert max_error(student(ids, attention_mask=real).logits[real],
                         teacher(ids, attention_mask=real).mlm_logits[real]) < 1e-5
    assert student.mlm_head.decoder.weight is student.bert.embeddings.token_embeddings.weight
    before = teacher.bert.embeddings.token_embeddings.weight.clone()
    with torch.no_grad():
        student.bert.embeddings.token_embeddings.weight.add_(1.0)
    assert torch.equal(teacher.bert.embeddings.token_embeddings.weight, before)
    assert {id(p) for p in student.parameters()}.isdisjoint({id(p) for p in teacher.parameters()})


def test_student_from_teacher_errors():
    teacher = BertForMaskedLM(tiny_config())
    for bad in ([], [0, 0], [4], [-1], [True]):
        with pytest.raises(ValueError, match="layers"):
            student_from_teacher(teacher, bad)
    with pytest.raises(ValueError, match="BERT with an MLM head"):
        student_from_teacher(BertModel(tiny_config()))
    from tinybert.models.roberta import RobertaConfig, RobertaForMaskedLM
    with pytest.raises(ValueError, match="BERT with an MLM head"):
        student_from_teacher(RobertaForMaskedLM(RobertaConfig(vocab_size=V, d_model=32, n_layers=2, n_heads=4,
                                                              d_ff=37, max_len=12)))


# --- the loss -----------------------------------------------------------------------------------------------

def by_hand(s, t, T, labels, hs, ht, alpha, beta, gamma):
    """The triple loss with plain loops over positions (no log_softmax, no cosine_similarity)."""
    kl_terms, ce_terms, cos_terms = [], [], []
    for n in range(s.shape[0]):
        ps = torch.exp(s[n] / T) / torch.exp(s[n] / T).sum()
        pt = torch.exp(t[n] / T) / torch.exp(t[n] / T).sum()
        kl_terms.append((pt * torch.log(pt / ps)).sum())
        if labels[n] != -100:
            p1 = torch.exp(s[n]) / torch.exp(s[n]).sum()
            ce_terms.append(-torch.log(p1[labels[n]]))
    for m in range(hs.shape[0]):
        cos_terms.append(1 - (hs[m] @ ht[m]) / (hs[m].norm() * ht[m].norm()))
    kl = T**2 * torch.stack(kl_terms).mean()
    mlm, cos = torch.stack(ce_terms).mean(), torch.stack(cos_terms).mean()
    return alpha * kl + beta * mlm + gamma * cos, kl, mlm, cos


@pytest.mark.parametrize("T", [1.0, 2.0, 3.5])
def test_distillation_loss_equals_a_hand_computation(T):
    g = torch.Generator().manual_seed(int(T * 10))
    s, t = torch.randn(13, 37, generator=g, dtype=torch.float64), 2 * torch.randn(13, 37, generator=g, dtype=torch.float64)
    hs, ht = torch.randn(21, 32, generator=g, dtype=torch.float64), torch.randn(21, 32, generator=g, dtype=torch.float64)
    labels = torch.randint(0, 37, (13,), generator=g)
    labels[::3] = -100
    out = distillation_loss(s, t, temperature=T, labels=labels, student_hidden=hs, teacher_hidden=ht,
                            alpha=5.0, beta=2.0, gamma=1.0)
    total, kl, mlm, cos = by_hand(s, t, T, labels, hs, ht, 5.0, 2.0, 1.0)
    for got, expected in [(out.loss, total), (out.kl, kl), (out.mlm, mlm), (out.cosine, cos)]:
        assert abs(got.item() - expected.item()) < 1e-10


def test_only_the_requested_terms():
    s, t = torch.randn(4, 9), torch.randn(4, 9)
    out = distillation_loss(s, t, temperature=2.0, alpha=0.5)
    assert out.mlm is None and out.cosine is None and torch.allclose(out.loss, 0.5 * out.kl)
    same = distillation_loss(s, s.clone(), temperature=3.0)
    assert abs(same.kl.item()) < 1e-6                                  # a perfect student: KL = 0
    nothing = distillation_loss(s, t, labels=torch.full((4,), -100))
    assert nothing.mlm.item() == 0.0


def test_gradient_flows_only_to_the_student():
    torch.manual_seed(0)
    teacher = BertForMaskedLM(tiny_config()).eval()
    student = student_from_teacher(teacher, [1, 3]).train()
    ids, real, labels = padded_batch(3)
    masked = labels != -100
    t_hidden = teacher.bert(ids, attention_mask=real).last_hidden_state      # with grad on purpose
    t_logits = teacher.mlm_head(t_hidden[masked])
    s_hidden = student.bert(ids, attention_mask=real).last_hidden_state
    s_logits = student.mlm_head(s_hidden[masked])
    out = distillation_loss(s_logits, t_logits, labels=labels[masked], student_hidden=s_hidden[real],
                            teacher_hidden=t_hidden[real])
    out.loss.backward()
    assert all(p.grad is None for p in teacher.parameters())
    assert all(p.grad is not None for p in student.parameters() if p.requires_grad)


def test_t_squared_keeps_the_gradient_size():
    g = torch.Generator().manual_seed(4)
    zs, zt = torch.randn(32, 50, generator=g), torch.randn(32, 50, generator=g)
    norms = {}
    for T in (1.0, 4.0, 8.0, 32.0):
        z = zs.clone().requires_grad_(True)
        distillation_loss(z, zt, temperature=T).kl.backward()
        norms[T] = z.grad
        expected = T * (F.softmax(zs / T, -1) - F.softmax(zt / T, -1)) / 32       # d(T² KL)/dz_s
        assert torch.allclose(z.grad, expected, atol=1e-6)
    centred = ((zs - zs.mean(-1, keepdim=True)) - (zt - zt.mean(-1, keepdim=True))) / 50 / 32
    assert torch.allclose(norms[32.0], centred, atol=2e-4)                        # logit matching at high T
    ratio = norms[8.0].norm() / norms[32.0].norm()
    assert 0.9 < ratio < 1.1                                                      # without T², 16x apart


def test_distillation_loss_errors():
    with pytest.raises(ValueError, match="temperature"):
        distillation_loss(torch.randn(3, 5), torch.randn(3, 5), temperature=0.0)
    with pytest.raises(ValueError, match="same shape"):
        distillation_loss(torch.randn(3, 5), torch.randn(3, 6))
    with pytest.raises(ValueError, match="labels"):
        distillation_loss(torch.randn(3, 5), torch.randn(3, 5), labels=torch.zeros(4, dtype=torch.long))
    with pytest.raises(ValueError, match="both"):
        distillation_loss(torch.randn(3, 5), torch.randn(3, 5), student_hidden=torch.randn(3, 4))
    with pytest.raises(ValueError, match="hidden"):
        distillation_loss(torch.randn(3, 5), torch.randn(3, 5), student_hidden=torch.randn(3, 4),
                          teacher_hidden=torch.randn(3, 8))
