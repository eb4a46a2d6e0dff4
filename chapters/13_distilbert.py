# ---
# jupyter:
#   jupytext:
#     default_lexer: ipython3
#     formats: md:myst,py:percent
#     notebook_metadata_filter: tinybert
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
#   tinybert:
#     module: models.distilbert
# ---

# %% [markdown]
# (sec-distil)=
# # DistilBERT
#
# BERT-base has 110 million parameters and twelve layers, and every input goes through all of
# them. For a phone, a browser or a server answering thousands of requests a second, that is a lot.
# DistilBERT {cite}`sanh2019distilbert` is a smaller BERT trained to imitate a large one: a
# *{term}`student <student model>`* with half the layers learns from the outputs of a pretrained *{term}`teacher <teacher model>`*, a technique
# called {term}`knowledge distillation` {cite}`hinton2015distilling`.
# {ref}`Ozdemir's lecture slides <sources-decks>` give its headline numbers: 40% fewer parameters, 60%
# faster, and 97% of BERT's performance on the GLUE benchmark.
#
# This chapter builds the student from BERT's parts, initialises it from the teacher's layers,
# writes the distillation loss, and distils the course's own pretrained `bert-mini` into a
# two-layer student, to set our own numbers beside those three.
#
# **What you will learn**
#
# - knowledge distillation: {term}`soft targets <soft target>`, the {term}`softmax temperature <temperature>` $T$, what the teacher's "wrong"
#   probabilities teach, and why the loss is multiplied by $T^2$;
# - DistilBERT's {term}`triple loss`, $\alpha\,\mathcal L_\text{KL} + \beta\,\mathcal L_\text{MLM} +
#   \gamma\,\mathcal L_\text{cos}$, as a function you can test by hand;
# - the student: half the layers, no segment embeddings, no pooler, built from BERT's parts, equal
#   to Hugging Face's `DistilBertModel` to $10^{-5}$ with its exact parameter count;
# - initialising the student from every other layer of the teacher, and checking that it holds
#   exactly those layers;
# - what distillation buys on a laptop: parameters, CPU speed measured in the same run, and
#   Banking77 accuracy relative to the teacher.
#
# **Uses.** From {doc}`08_bert`: `BertConfig`, `BertEmbeddings`, `BertModel`, `BertForMaskedLM`,
# `BertForPreTraining` and `IGNORE_INDEX`; the converter
# registry of `tinybert.models.convert` (`register_family`, `from_hf`, `to_hf`) and, from
# `tinybert.models.convert_names`, `bert_encoder_names`, BERT's configuration names
# `BERT_CONFIG_NAMES` and the activation-name tables
# `ACTIVATIONS_TO_HF` and `ACTIVATIONS_FROM_HF`, and the parity report (`parity_report`,
# `round_trip_tensors`, `tinybert.models.parity`). From {doc}`09_pretraining`: `load_pretrained`
# (the course's `bert-mini`, our teacher), `PretrainingBatches`, `SpecialTokens`, the corpus
# functions `course_documents` and `tokenize_documents`,
# `make_optimizer` and `linear_warmup_decay`. From {doc}`10_finetuning`: `finetune_task`. From
# {doc}`12_roberta`: `full_sentence_examples` (DistilBERT was trained RoBERTa-style: dynamic
# masking, no NSP). The model goes to `tinybert.models.distilbert`, the student's initialisation
# and the loss to `tinybert.pretraining.distillation`. From {doc}`01_feedforward`: `count_parameters`.
#
# (sec-distil-setup)=
# ## Setup
#
# The first cell holds the imports of `tinybert.models.distilbert`; the second, those of
# `tinybert.pretraining.distillation`; the third, those of the teaching code.

# %% tags=["export"]
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from tinybert.models.convert import register_family
from tinybert.models.convert_names import (
    ACTIVATIONS_FROM_HF,
    ACTIVATIONS_TO_HF,
    BERT_CONFIG_NAMES,
    bert_encoder_names,
)
from tinybert.models.bert import BertConfig, BertModel
from tinybert.models.bert_heads import BertForMaskedLM

# %% tags=["export:pretraining.distillation"]
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from tinybert.models.bert_heads import IGNORE_INDEX
from tinybert.models.bert_layers import BertEmbeddings
from tinybert.models.distilbert import DistilBertConfig, DistilBertForMaskedLM

# %%
import copy
import time
import warnings

import matplotlib.pyplot as plt

from tinybert.blocks.feedforward import count_parameters
from tinybert.models.bert_heads import BertForPreTraining
from tinybert.runtime import get_device, is_quick, pick, seed_everything

# transformers' progress bars warn about widgets
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import transformers

device = get_device()
print(f"device: {device}, quick mode: {is_quick()}")

# %% [markdown]
# (sec-distil-kd)=
# ## Knowledge distillation
#
# A classifier trained with cross-entropy learns to put its probability on the right class, but
# it learns more than that. In Hinton and colleagues' example, a network shown a photo of a BMW
# puts almost all the probability on "BMW", and of the little that remains, much more on "garbage
# truck" than on "carrot". Those
# small probabilities say which classes the network finds similar: how it *generalises*. Hinton,
# Vinyals and Dean {cite}`hinton2015distilling` proposed to train a small *student* network on the
# full output distributions of a large *teacher*, the *soft targets*, instead of (or besides) the
# one-hot labels, and called it distillation. A soft target carries much more information per
# example than a label, so the student learns faster and from less data than it would alone.
#
# For BERT's masked language model the outputs are distributions over the vocabulary at each
# masked position. Given "I think this is the beginning of a beautiful [MASK]", a good teacher
# puts high probability on "day" and "life", and some on "friendship", "story" or "future": all
# plausible, and each one a hint that the student would never get from the one word the text
# actually had.
#
# (sec-distil-temperature)=
# ### Temperature
#
# Most of the teacher's probabilities are tiny, so they barely affect a cross-entropy. The
# *temperature* $T$ softens the distribution by dividing the logits before the softmax,
#
# $$p_i(T) = \frac{\exp(z_i / T)}{\sum_j \exp(z_j / T)},$$
#
# which is the ordinary softmax at $T = 1$, tends to the one-hot argmax as $T \to 0$, and to the
# uniform distribution as $T \to \infty$. The same logits at three temperatures:

# %%
logits = torch.tensor([6.0, 4.5, 3.0, 1.0, -2.0])
words = ["day", "life", "story", "table", "of"]
print(f"{'T':>4}  " + "  ".join(f"{w:>6}" for w in words) + "   entropy (nats)")
for T in (0.5, 1.0, 2.0, 5.0):
    p = torch.softmax(logits / T, dim=-1)
    entropy = -(p * p.log()).sum()
    print(
        f"{T:>4}  " + "  ".join(f"{x:>6.3f}" for x in p.tolist()) + f"   {entropy:.3f}"
    )


# %% [markdown]
# At $T = 1$ the two least likely words have a share of the probability too small to matter in a
# loss; at $T = 2$ or $5$ their differences become visible. Distillation compares the student's and
# the teacher's distributions at the *same* temperature $T$, with the {term}`Kullback-Leibler divergence`
# (the cross-entropy minus the teacher's own entropy, which the student cannot change), averaged
# over the $N$ positions that count:
#
# $$\mathcal L_\text{KL} = \frac{T^2}{N} \sum_{n=1}^{N} \sum_{v=1}^{V} p^\text{teacher}_{n,v}(T)
# \,\log \frac{p^\text{teacher}_{n,v}(T)}{p^\text{student}_{n,v}(T)} .$$
#
# Why $T^2$? The gradient of the KL divergence with respect to the student's logits is
# $\frac1T\bigl(p^\text{student}(T) - p^\text{teacher}(T)\bigr)$, and for large $T$ the difference
# of the two softmaxes is itself about $\frac{1}{VT}$ times the difference of the logits (with
# logits of mean zero). The gradient therefore shrinks like $1/T^2$; multiplying the loss by $T^2$
# keeps its size the same whatever the temperature, so that changing $T$ does not silently change
# how much this term weighs against the others {cite}`hinton2015distilling`. In the limit, the
# gradient becomes $(z^\text{student} - z^\text{teacher}) / V$: at high temperature, distillation
# is matching the logits.
#
# (sec-distil-loss)=
# ### DistilBERT's triple loss
#
# DistilBERT trains its student with three terms {cite}`sanh2019distilbert`: the distillation loss
# above; the ordinary masked-language-model loss, the cross-entropy with the tokens that were
# really there (at $T = 1$); and a *cosine* loss that pulls the direction of the student's final
# hidden vector at every position towards the teacher's, which works because student and teacher
# have the same width,
#
# $$\mathcal L = \alpha\,\mathcal L_\text{KL} + \beta\,\mathcal L_\text{MLM} + \gamma\,\mathcal L_\text{cos},
# \qquad \mathcal L_\text{cos} = \frac1M \sum_{m=1}^{M} \bigl(1 - \cos(\mathbf h^\text{student}_m, \mathbf h^\text{teacher}_m)\bigr).$$
#
# The released training script weighs them $\alpha = 5$, $\beta = 2$, $\gamma = 1$, with $T = 2$.
# In the paper's ablation, initialising from the teacher and the two terms that involve the teacher
# each mattered more than the MLM term. The function takes the logits and hidden vectors of the
# positions that count, already selected, and returns the total with its parts. The teacher's
# tensors are detached inside: whatever the caller does, no gradient reaches the teacher.

# %% tags=["export:pretraining.distillation"]
@dataclass
class DistillationLoss:
    # alpha * kl + beta * mlm + gamma * cosine (the terms that were computed)
    loss: torch.Tensor
    # T² · KL(teacher ‖ student) at temperature T, mean over the N positions
    kl: torch.Tensor
    # the student's cross-entropy with the true tokens (T = 1)
    mlm: torch.Tensor | None
    # mean over the M positions of 1 - cos(student hidden, teacher hidden)
    cosine: torch.Tensor | None


def distillation_loss(
    student_logits: torch.Tensor,
    teacher_logits: torch.Tensor,
    *,
    temperature: float = 2.0,
    labels: torch.Tensor | None = None,
    student_hidden: torch.Tensor | None = None,
    teacher_hidden: torch.Tensor | None = None,
    alpha: float = 5.0,
    beta: float = 2.0,
    gamma: float = 1.0,
) -> DistillationLoss:
    """DistilBERT's loss, alpha · T² KL(teacher ‖ student) + beta · MLM +
    gamma · cosine.

    Logits are (N, V) at the N positions distilled, ``labels`` (N,) the true tokens
    there (-100 = none), hidden states (M, D) at the M positions aligned. The teacher's
    tensors are detached.
    """
    if not temperature > 0:
        raise ValueError(f"temperature must be positive, got {temperature!r}")
    if student_logits.dim() != 2 or student_logits.shape != teacher_logits.shape:
        raise ValueError(
            f"expected student and teacher logits of the same shape (N, "
            f"V), got {tuple(student_logits.shape)} and "
            f"{tuple(teacher_logits.shape)}"
        )
    T = temperature
    log_p_student = F.log_softmax(student_logits / T, dim=-1)  # (N, V)
    log_p_teacher = F.log_softmax(teacher_logits.detach() / T, dim=-1)  # (N, V)
    kl = (log_p_teacher.exp() * (log_p_teacher - log_p_student)).sum(-1).mean() * T**2
    loss, mlm, cosine = alpha * kl, None, None
    if labels is not None:
        if tuple(labels.shape) != tuple(student_logits.shape[:1]):
            raise ValueError(
                f"labels: expected shape ({student_logits.shape[0]},), got "
                f"{tuple(labels.shape)}"
            )
        labelled = labels != IGNORE_INDEX  # (N,)
        # no label: no MLM term
        mlm = (
            F.cross_entropy(student_logits[labelled], labels[labelled])
            if labelled.any()
            else student_logits.sum() * 0.0
        )
        loss = loss + beta * mlm
    if (student_hidden is None) != (teacher_hidden is None):
        raise ValueError("give both student_hidden and teacher_hidden, or neither")
    if student_hidden is not None:
        if student_hidden.dim() != 2 or student_hidden.shape != teacher_hidden.shape:
            raise ValueError(
                f"expected hidden states of the same shape (M, D), got "
                f"{tuple(student_hidden.shape)} and "
                f"{tuple(teacher_hidden.shape)}"
            )
        cosine = (
            1 - F.cosine_similarity(student_hidden, teacher_hidden.detach(), dim=-1)
        ).mean()
        loss = loss + gamma * cosine
    return DistillationLoss(loss=loss, kl=kl, mlm=mlm, cosine=cosine)


# %% [markdown]
# The function on a small example, against the formula written out in another way, with
# `torch.nn.functional.kl_div`:

# %%
seed_everything(0)
s_logits, t_logits = (
    torch.randn(5, 11, requires_grad=True),
    (3 * torch.randn(5, 11)).requires_grad_(True),
)
s_hidden, t_hidden = torch.randn(9, 16, requires_grad=True), torch.randn(9, 16)
labels = torch.tensor([3, -100, 7, 0, -100])
out = distillation_loss(
    s_logits,
    t_logits,
    temperature=2.0,
    labels=labels,
    student_hidden=s_hidden,
    teacher_hidden=t_hidden,
)
kl = (
    F.kl_div(
        F.log_softmax(s_logits / 2, -1),
        F.log_softmax(t_logits / 2, -1),
        reduction="batchmean",
        log_target=True,
    )
    * 4
)
# -100 is ignored
mlm = F.cross_entropy(s_logits, labels)
cos = F.cosine_embedding_loss(s_hidden, t_hidden, torch.ones(9))
print(
    f"KL {out.kl.item():.5f} (kl_div: {kl.item():.5f}), MLM {out.mlm.item():.5f} "
    f"({mlm.item():.5f}), cosine {out.cosine.item():.5f} ({cos.item():.5f}), total "
    f"{out.loss.item():.5f}"
)
assert torch.allclose(out.loss, 5 * kl + 2 * mlm + cos, atol=1e-5)
out.loss.backward()
# only the student learns
assert t_logits.grad is None and s_logits.grad is not None

# %% [markdown]
# And the reason for $T^2$, measured: the size of the gradient that the KL term sends to the
# student's logits, for the same pair of logit vectors at growing temperatures, with and without
# the factor.

# %%
seed_everything(1)
z_student, z_teacher = torch.randn(64, 100), torch.randn(64, 100)
print(f"{'T':>5} {'|grad| with T²':>15} {'without':>12}")
norms = {}
for T in (1.0, 2.0, 4.0, 8.0, 16.0):
    z = z_student.clone().requires_grad_(True)
    distillation_loss(z, z_teacher, temperature=T).kl.backward()
    norms[T] = z.grad.norm().item()
    print(f"{T:>5.0f} {norms[T]:>15.5f} {norms[T] / T**2:>12.5f}")
limit = (
    (
        (z_student - z_student.mean(-1, keepdim=True))
        - (z_teacher - z_teacher.mean(-1, keepdim=True))
    )
    / 100
    / 64
)
print(
    f"limit (z_student - z_teacher) / (V N), logits centred: {limit.norm().item():.5f}"
)
assert (
    abs(norms[16.0] / limit.norm().item() - 1) < 0.05 and norms[16.0] / norms[4.0] < 1.2
)

# %% [markdown]
# With the factor, the gradient settles at the logit-matching limit as $T$ grows; without it, it
# would fall by a factor of four at every doubling of $T$.
#
# (sec-distil-student)=
# ## The student
#
# DistilBERT's student is BERT with three things removed {cite}`sanh2019distilbert`:
#
# - half of the layers: 6 instead of BERT-base's 12, of the same width. The authors found that,
#   for a fixed number of parameters, the hidden width matters less for speed than the number of
#   layers (each layer is one more sequential step, while a wider matrix product parallelises);
# - the segment embeddings, the token-type table of sentence A and B: trained without NSP (like
#   RoBERTa), the student only ever reads one segment;
# - the pooler, which only the NSP head used.
#
# Its configuration is therefore `BertConfig` with six layers and one segment; the one segment
# means that `BertModel`'s input checks accept only `token_type_ids` of zeros, and no table is
# built for it. The embedding layer is BERT's without the segment table, and the models are BERT's
# with that embedding layer and no pooler: as in {doc}`12_roberta`, they set only the class
# attributes that differ (`config_class`, `embeddings_class`, `model_class`), and the encoder keeps
# the attribute name `bert`. Chapter 8's table `MODEL_CLASS_MODULES` names both models, so
# `save_model` and `load_model` handle them as they handle BERT.

# %% tags=["export"]
DISTILBERT_PRESETS = {
    "distilbert-base-uncased": dict(),  # N=6, D=768, H=12
    "distilbert-base-cased": dict(vocab_size=28996),
}


@dataclass
class DistilBertConfig(BertConfig):
    """BERT's configuration with distilbert-base-uncased's defaults: BERT-base with half
    the layers."""

    presets = DISTILBERT_PRESETS
    model_name = "DistilBERT"

    n_layers: int = 6  # BERT-base's 12, halved
    # one segment and no segment table: token_type_ids must be all 0
    type_vocab_size: int = 1


class DistilBertEmbeddings(nn.Module):
    """BERT's embeddings without the segment table: Dropout(LayerNorm(E_token[w_t] +
    E_position[t]))."""

    def __init__(self, config: DistilBertConfig):
        super().__init__()
        D = config.d_model
        self.token_embeddings = nn.Embedding(
            config.vocab_size, D, padding_idx=config.pad_token_id
        )
        self.position_embeddings = nn.Embedding(config.max_len, D)
        self.norm = nn.LayerNorm(D, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.dropout)

    def forward(
        self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None = None
    ) -> torch.Tensor:
        # token_type_ids: passed by BertModel.forward, which has checked that they are
        # all 0; unused
        # (T,)
        positions = torch.arange(input_ids.shape[1], device=input_ids.device)
        # (B, T, D)
        x = self.token_embeddings(input_ids) + self.position_embeddings(positions)
        # (B, T, D)
        return self.dropout(self.norm(x))


class DistilBertModel(BertModel):
    """BertModel with DistilBertEmbeddings and no pooler; layers, checks and outputs
    are BERT's."""

    config_class = DistilBertConfig
    embeddings_class = DistilBertEmbeddings

    def __init__(self, config: DistilBertConfig, add_pooler: bool = False):
        if add_pooler:
            raise ValueError(
                "DistilBertModel has no pooler (DistilBERT drops BERT's), "
                "got add_pooler=True"
            )
        super().__init__(config, add_pooler=False)


class DistilBertForMaskedLM(BertForMaskedLM):
    """BertForMaskedLM over a DistilBertModel: the same tied head and the
    same forward."""

    config_class = DistilBertConfig
    model_class = DistilBertModel


# %% [markdown]
# (sec-distil-sizes)=
# ### Sizes: where the 40% comes from
#
# Counting on the `meta` device, ours against Hugging Face's `DistilBertModel` built from the
# released configuration, and against BERT-base:

# %%
with torch.device("meta"):
    distil_count = count_parameters(
        DistilBertModel(DistilBertConfig.preset("distilbert-base-uncased"))
    )
    hf_count = count_parameters(
        transformers.DistilBertModel(transformers.DistilBertConfig())
    )
    bert_count = count_parameters(BertModel(BertConfig.preset("bert-base-uncased")))
    layer_count = count_parameters(
        BertModel(BertConfig.preset("bert-base-uncased")).encoder.layers[0]
    )
print(f"distilbert-base-uncased: ours {distil_count:,}, Hugging Face {hf_count:,}")
print(
    f"bert-base-uncased:       {bert_count:,}; DistilBERT has "
    f"{1 - distil_count / bert_count:.1%} fewer"
)
print(
    f"one layer {layer_count:,}; embeddings {distil_count - 6 * layer_count:,} "
    f"({(distil_count - 6 * layer_count) / distil_count:.0%} of DistilBERT)"
)
assert distil_count == hf_count

# %% [markdown]
# Half of the layers is not half of the parameters: the token table (30,522 rows of 768) stays
# whole, and is more than a third of the student. The same arithmetic will matter for our smaller
# model, whose vocabulary is a larger share of the total.
#
# (sec-distil-convert)=
# ### Converting to and from Hugging Face
#
# Hugging Face's DistilBERT has the same tensors as BERT under other names (`transformer.layer`
# for `encoder.layer`, `q_lin` for `attention.self.query`, `sa_layer_norm` for the attention's
# LayerNorm, `ffn.lin1` for the intermediate layer, and `vocab_transform`, `vocab_layer_norm` and
# `vocab_projector` for the MLM head). The converter takes chapter 8's table of BERT names and
# translates Hugging Face's BERT names into DistilBERT's, and chapter 8's `register_family`
# registers the two classes. Its configuration uses other field names
# (`dim`, `hidden_dim`), and its LayerNorms have $\varepsilon = 10^{-12}$ fixed in the code. One
# difference only shows in training mode: Hugging Face's DistilBERT applies no dropout to the
# attention output before the residual addition, where BERT's layer (and ours) does; in evaluation
# mode the two compute the same function.

# %% tags=["export"]
# Hugging Face's BERT names -> its DistilBERT names
_BERT_TO_DISTILBERT_NAMES = (
    ("encoder.layer.", "transformer.layer."),
    ("attention.self.query", "attention.q_lin"),
    ("attention.self.key", "attention.k_lin"),
    ("attention.self.value", "attention.v_lin"),
    ("attention.output.dense", "attention.out_lin"),
    ("attention.output.LayerNorm", "sa_layer_norm"),
    ("intermediate.dense", "ffn.lin1"),
    ("output.dense", "ffn.lin2"),
    ("output.LayerNorm", "output_layer_norm"),
)


# our field -> Hugging Face's DistilBertConfig's: chapter 8's table for BERT without
# segments and layer_norm_eps (DistilBERT fixes it at 1e-12), under DistilBERT's names:
# two renamed, four that are our own
_DISTILBERT_RENAMES = {"d_model": "dim", "d_ff": "hidden_dim"} | {
    name: name for name in ("n_layers", "n_heads", "dropout", "attention_dropout")
}
_DISTILBERT_CONFIG_NAMES = {
    ours: _DISTILBERT_RENAMES.get(ours, hf)
    for ours, hf in BERT_CONFIG_NAMES.items()
    if ours not in ("type_vocab_size", "layer_norm_eps")
}


def distilbert_config_from_hf(hf_config) -> DistilBertConfig:
    """transformers.DistilBertConfig (dim, hidden_dim, ...) -> ours (d_model,
    d_ff, ...)."""
    if getattr(hf_config, "sinusoidal_pos_embds", False):
        raise ValueError(
            "only learned position embeddings are supported "
            "(sinusoidal_pos_embds=False)"
        )
    if hf_config.activation not in ACTIVATIONS_FROM_HF:
        raise ValueError(
            f"unsupported activation {hf_config.activation!r}; supported: "
            f"{sorted(ACTIVATIONS_FROM_HF)}"
        )
    names = _DISTILBERT_CONFIG_NAMES
    fields = {ours: getattr(hf_config, hf) for ours, hf in names.items()}
    fields["pad_token_id"] = fields["pad_token_id"] or 0  # None in some of theirs
    return DistilBertConfig(
        **fields,
        layer_norm_eps=1e-12,
        activation=ACTIVATIONS_FROM_HF[hf_config.activation],
    )


def distilbert_config_to_hf(config: DistilBertConfig):
    """Our DistilBertConfig -> transformers.DistilBertConfig (whose LayerNorms have ε =
    1e-12, fixed)."""
    import transformers

    if config.layer_norm_eps != 1e-12 or config.activation not in ACTIVATIONS_TO_HF:
        raise ValueError(
            f"Hugging Face's DistilBERT needs layer_norm_eps = 1e-12 and "
            f"an activation in {sorted(ACTIVATIONS_TO_HF)}, got "
            f"{config.layer_norm_eps} and {config.activation!r}"
        )
    names = _DISTILBERT_CONFIG_NAMES
    fields = {hf: getattr(config, ours) for ours, hf in names.items()}
    return transformers.DistilBertConfig(
        **fields, activation=ACTIVATIONS_TO_HF[config.activation]
    )


def distilbert_weight_names(model: nn.Module) -> dict[str, str]:
    """Every tensor name of our DistilBertModel / DistilBertForMaskedLM ->
    Hugging Face's."""
    ours = "" if isinstance(model, DistilBertModel) else "bert."
    names = bert_encoder_names(
        model.config.n_layers, ours, "" if ours == "" else "distilbert.", pooler=False
    )
    # no segment table
    del names[f"{ours}embeddings.segment_embeddings.weight"]
    if ours:
        names.update(
            {
                "mlm_head.dense.weight": "vocab_transform.weight",
                "mlm_head.dense.bias": "vocab_transform.bias",
                "mlm_head.norm.weight": "vocab_layer_norm.weight",
                "mlm_head.norm.bias": "vocab_layer_norm.bias",
                # decoder.weight: tied to the token table
                "mlm_head.decoder.bias": "vocab_projector.bias",
            }
        )
    # in order: the longer names first
    for bert_name, distilbert_name in _BERT_TO_DISTILBERT_NAMES:
        names = {o: t.replace(bert_name, distilbert_name) for o, t in names.items()}
    return names


# no pooler to choose: DistilBERT has none
register_family(
    (DistilBertModel, DistilBertForMaskedLM),
    distilbert_config_from_hf,
    distilbert_config_to_hf,
    distilbert_weight_names,
)

# %% [markdown]
# Parity with a small Hugging Face `DistilBertForMaskedLM` with odd sizes, every parameter
# perturbed, and a padded batch:

# %%
from tinybert.models.convert import from_hf, to_hf
from tinybert.models.parity import parity_report, round_trip_tensors

seed_everything(2)
hf_model = transformers.DistilBertForMaskedLM(
    transformers.DistilBertConfig(
        vocab_size=99,
        dim=32,
        n_layers=3,
        n_heads=4,
        hidden_dim=37,
        max_position_embeddings=23,
    )
).eval()
with torch.no_grad():
    for p in hf_model.parameters():
        p.add_(0.1 * torch.randn_like(p))
ours = from_hf(hf_model)
B_, T_ = 13, 7
# (B, T) True at real tokens
real = torch.arange(T_)[None, :] < torch.randint(2, T_ + 1, (B_,))[:, None]
ids = torch.randint(1, 99, (B_, T_)).masked_fill(~real, 0)
labels = torch.where((torch.rand(B_, T_) < 0.3) & real, ids, -100)
labels[0, 0] = ids[0, 0]
with torch.no_grad():
    theirs = hf_model(input_ids=ids, attention_mask=real.long(), labels=labels)
    theirs_hidden = hf_model.distilbert(
        input_ids=ids, attention_mask=real.long()
    ).last_hidden_state
    mine_hidden = ours.bert(ids, attention_mask=real).last_hidden_state
    mine = ours(ids, attention_mask=real)
    mine_loss = ours(ids, attention_mask=real, labels=labels).loss
parity = {
    "last hidden state": (mine_hidden[real] - theirs_hidden[real]).abs().max(),
    "MLM logits": (mine.logits[real] - theirs.logits[real]).abs().max(),
    "MLM loss": (mine_loss - theirs.loss).abs(),
}
parity_report(parity)
n_tensors = round_trip_tensors(hf_model, ours)
print(f"to_hf(from_hf(model)): all {n_tensors} tensors reproduced exactly")


# %% [markdown]
# (sec-distil-init)=
# ## Initialising the student from the teacher
#
# A student of the teacher's width can start from the teacher's own weights. DistilBERT takes the
# teacher's embeddings and MLM head, and "one layer out of two" of its encoder
# {cite}`sanh2019distilbert` (the released script picks layers 0, 2, 4, 7, 9 and 11 of BERT-base,
# spreading them from the bottom to the top; see {ref}`an exercise <ex-distil-spread>`). Every chosen layer
# is a function the student's next layer can read, since all layers map vectors of width $D$ to
# vectors of width $D$; the student starts as a "shortcut" version of the teacher, not from
# scratch, and the paper's ablation found this initialisation to be worth more than any one of
# the three loss terms.
#
# One detail is ours. The teacher adds the segment-A vector $\mathbf E^\text{segment}_A$ to every
# token of a single-segment input; the student has no segment table. We add that vector to every
# row of the student's position table, so that on single-segment inputs the student's embeddings
# are *exactly* the teacher's (the released script simply drops the table, leaving the student to
# adapt).

# %% tags=["export:pretraining.distillation"]
def student_from_teacher(
    teacher: nn.Module, layers: Sequence[int] | None = None
) -> DistilBertForMaskedLM:
    """A DistilBERT student built from a BERT teacher (BertForMaskedLM or
    BertForPreTraining), copied.

    It gets the teacher's token table, position table (plus the segment-A vector, so
    that on single-segment inputs its embeddings equal the teacher's), embedding
    LayerNorm, MLM head, and the encoder layers listed in ``layers``, in that order
    (default: every other one, 0, 2, 4, ...).
    """
    bert = getattr(teacher, "bert", None)
    if (
        not hasattr(teacher, "mlm_head")
        or type(getattr(bert, "embeddings", None)) is not BertEmbeddings
    ):
        raise ValueError(
            f"student_from_teacher: expected a BERT with an MLM head "
            f"(BertForMaskedLM or BertForPreTraining), got "
            f"{type(teacher).__name__}"
        )
    n = teacher.config.n_layers
    layers = list(range(0, n, 2)) if layers is None else list(layers)
    if (
        not layers
        or len(set(layers)) != len(layers)
        or not all(
            isinstance(i, int) and not isinstance(i, bool) and 0 <= i < n
            for i in layers
        )
    ):
        raise ValueError(
            f"layers: expected distinct layer indices in [0, {n}), got {layers}"
        )
    config = DistilBertConfig(
        **{**teacher.config.to_dict(), "n_layers": len(layers), "type_vocab_size": 1}
    )
    student = DistilBertForMaskedLM(config).to(next(teacher.parameters()).device)
    source, target = bert.embeddings, student.bert.embeddings
    with torch.no_grad():
        target.token_embeddings.weight.copy_(source.token_embeddings.weight)
        target.position_embeddings.weight.copy_(
            source.position_embeddings.weight
            # (P, D) + (D,)
            + source.segment_embeddings.weight[0]
        )
        target.norm.load_state_dict(source.norm.state_dict())
        for k, i in enumerate(layers):
            student.bert.encoder.layers[k].load_state_dict(
                bert.encoder.layers[i].state_dict()
            )
        # a pre-LN teacher's last norm
        if bert.encoder.final_norm is not None:
            student.bert.encoder.final_norm.load_state_dict(
                bert.encoder.final_norm.state_dict()
            )
        # its decoder is the (copied) token table
        student.mlm_head.load_state_dict(teacher.mlm_head.state_dict())
    return student.train(teacher.training)


# %% [markdown]
# The check that the student holds exactly the chosen layers: run the teacher's embeddings and
# then its layers 0 and 2 by hand, and compare with the student built from those two layers.
# Choosing all of the teacher's layers must give the teacher back.

# %%
seed_everything(3)
small_teacher = BertForPreTraining(
    BertConfig(vocab_size=99, d_model=32, n_layers=4, n_heads=4, d_ff=37, max_len=16)
).eval()
student = student_from_teacher(small_teacher, layers=[0, 2]).eval()
ids = torch.randint(5, 99, (3, 9))
with torch.no_grad():
    # (B, T, D), segment A
    x = small_teacher.bert.embeddings(ids, torch.zeros_like(ids))
    for i in (0, 2):
        x = small_teacher.bert.encoder.layers[i](x)
    # (B, T, V)
    by_hand = small_teacher.mlm_head(x)
    gap = (student(ids).logits - by_hand).abs().max().item()
    whole = student_from_teacher(small_teacher, layers=[0, 1, 2, 3]).eval()
    gap_all = (whole(ids).logits - small_teacher(ids).mlm_logits).abs().max().item()
print(
    f"student (layers 0, 2) vs the teacher's layers 0, 2 by hand: max difference "
    f"{gap:.1e}; all four layers vs the teacher: {gap_all:.1e}"
)
assert gap < 1e-5 and gap_all < 1e-5
with torch.no_grad():
    # the copies are independent
    student.bert.encoder.layers[0].attention.query.weight.add_(1.0)
assert not torch.equal(
    student.bert.encoder.layers[0].attention.query.weight,
    small_teacher.bert.encoder.layers[0].attention.query.weight,
)

# %% [markdown]
# (sec-distil-run)=
# ## Distilling the course's bert-mini
#
# The teacher is the course's pretrained `bert-mini` of {doc}`09_pretraining` (four layers of width
# 256). The student takes its layers 0 and 2: two layers, the same width. Like DistilBERT, it is
# trained on the teacher's pretraining corpus (its first articles, for time), in FULL-SENTENCES inputs with dynamic masking and no
# NSP ({doc}`12_roberta`), and with the triple loss. Two departures, to fit a laptop: the KL term is
# computed at the masked positions only (DistilBERT computes it at every token; Hugging Face's
# script has an option for masked positions only, and the teacher's distribution is most
# informative where the input is hidden), and the cosine term at every real token.

# %%
from tinybert.training.inputs import SpecialTokens
from tinybert.models.bert_heads import IGNORE_INDEX
from tinybert.pretraining.examples import PretrainingBatches
from tinybert.models.course_checkpoint import load_pretrained
from tinybert.pretraining.documents import course_documents, tokenize_documents
from tinybert.pretraining.roberta_data import full_sentence_examples
from tinybert.training.optim import linear_warmup_decay, make_optimizer

# checkpoints/bert-mini (chapter 09)
pretrained = load_pretrained()
teacher, tokenizer = pretrained.model.to(device).eval(), pretrained.tokenizer
special = SpecialTokens.from_vocab(tokenizer.vocab)
print(
    f"teacher: {pretrained.directory}, {teacher.config.n_layers} layers of width "
    f"{teacher.config.d_model}"
)

max_len = pick(quick=32, full=64)
documents = tokenize_documents(
    course_documents("train", max_documents=pick(quick=3, full=40)), tokenizer
)
examples = full_sentence_examples(documents, special, max_len)
BATCH = pick(quick=4, full=16)
# dynamic masking, a new mask per batch
batches = PretrainingBatches(examples, special, BATCH, seed=0)
print(
    f"{len(examples):,} FULL-SENTENCES inputs of at most {max_len} tokens, "
    f"batches of {BATCH}"
)


# %%
def distill(
    student: nn.Module,
    teacher: nn.Module,
    steps: int,
    *,
    lr: float = 5e-4,
    temperature: float = 2.0,
    alpha: float = 5.0,
    beta: float = 2.0,
    gamma: float = 1.0,
) -> list[dict]:
    """Train ``student`` to imitate ``teacher`` for ``steps`` batches; the history of
    the loss and its parts."""
    teacher.eval()
    student.to(device).train()
    optimizer = make_optimizer(student, lr)
    scheduler = linear_warmup_decay(
        optimizer, warmup_steps=steps // 10, total_steps=steps
    )
    history = []
    for step in range(steps):
        batch = {k: v.to(device) for k, v in batches(step).items()}
        ids, real, labels = (
            batch["input_ids"],
            batch["attention_mask"],
            batch["mlm_labels"],
        )
        # (B, T)
        masked = labels != IGNORE_INDEX
        with torch.no_grad():
            # (B, T, D)
            t_hidden = teacher.bert(ids, attention_mask=real).last_hidden_state
            # (N, V)
            t_logits = teacher.mlm_head(t_hidden[masked])
        # (B, T, D)
        s_hidden = student.bert(ids, attention_mask=real).last_hidden_state
        # (N, V)
        s_logits = student.mlm_head(s_hidden[masked])
        out = distillation_loss(
            s_logits,
            t_logits,
            temperature=temperature,
            labels=labels[masked],
            student_hidden=s_hidden[real],
            teacher_hidden=t_hidden[real],
            alpha=alpha,
            beta=beta,
            gamma=gamma,
        )
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(student.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        scheduler.step()
        history.append(
            {k: getattr(out, k).item() for k in ("loss", "kl", "mlm", "cosine")}
        )
    return history


STEPS = pick(quick=4, full=120)
# initialised, not distilled: a baseline
truncated = student_from_teacher(teacher, layers=[0, 2])
distilled = student_from_teacher(teacher, layers=[0, 2])
start = time.perf_counter()
history = distill(distilled, teacher, STEPS)
print(
    f"{STEPS} distillation steps in {time.perf_counter() - start:.0f} s; "
    f"first and last: "
    + "; ".join(f"{k} {history[0][k]:.3f} -> {history[-1][k]:.3f}" for k in history[0])
)

# %% [markdown]
# {numref}`fig-distillation` draws one step of `distill` as it just ran: the sizes of `teacher`
# and of the student `distilled`, and the temperature and weights that `distill` used, read
# from its signature.

# %% mystnb={"figure": {"caption": "One distillation step of this section. The frozen teacher (the course's `bert-mini`) and the student made from some of its layers read the same masked batch. Three losses: the cosine between their final hidden vectors at every real token, the KL divergence between their softened distributions at the masked positions (temperature $T$, scaled by $T^2$), and the student's own cross-entropy with the hidden tokens; weighted by $\\gamma$, $\\alpha$ and $\\beta$ and summed. The values are the defaults that `distill` used.", "name": "fig-distillation"}, "image": {"alt": "Diagram: a masked batch (B, T) on the left goes to the teacher above, with its N layers and width D, frozen with no gradient, and to the student below, with fewer layers of the same width, copied from the teacher. Between them, a row of three loss boxes joined by plus signs: one minus the cosine of the student and teacher hidden vectors at every real token, times gamma; T squared times the KL divergence of teacher and student, both softmax of z over T, times alpha; and the student's cross-entropy with the hidden tokens, from its logits at T = 1, times beta. Arrows lead from the teacher to the first two and from the student to all three; the sum is the loss."}} tags=["diagram", "hide-input"]
import inspect

from tinybert.diagrams import distillation_diagram

settings = {
    name: parameter.default
    for name, parameter in inspect.signature(distill).parameters.items()
    if name in ("temperature", "alpha", "beta", "gamma")
}
distillation_diagram(teacher.config, distilled.config, **settings)

# %% mystnb={"image": {"alt": "Three line plots of the parts of the distillation loss against the step, every step faint and a running mean solid: the KL divergence from the teacher, the MLM cross-entropy and one minus the cosine of the hidden states."}}
fig, axes = plt.subplots(1, 3, figsize=(11, 2.8))
for ax, part in zip(axes, ("kl", "mlm", "cosine")):
    values = [h[part] for h in history]
    window = max(1, len(values) // 20)
    smooth = [
        sum(values[max(0, i - window + 1) : i + 1])
        / len(values[max(0, i - window + 1) : i + 1])
        for i in range(len(values))
    ]
    ax.plot(values, alpha=0.3)
    ax.plot(smooth)
    ax.set(
        title={
            "kl": "T² KL(teacher ‖ student)",
            "mlm": "MLM cross-entropy",
            "cosine": "1 - cos(hidden)",
        }[part],
        xlabel="step",
    )
fig.tight_layout()
plt.show()

# %% [markdown]
# The three parts of the loss during distillation (faint: every step; solid: a running mean). The
# student starts from the teacher's layers, so it starts well below an untrained model, and the
# KL and cosine terms measure how far the two-layer shortcut is from the teacher.
#
# Distillation trains the student to imitate, so the first question is whether it does, on text
# neither model trained on. The cell masks held-out articles once, with a fixed seed, and scores
# both students at the masked positions: how often a student's top guess is the teacher's top
# guess, and how often it is the hidden token itself. The student that was only initialised from
# the teacher's layers is the baseline: whatever it has, it got from the copy, not from the
# distillation steps.

# %%
heldout_examples = full_sentence_examples(
    tokenize_documents(
        course_documents("heldout", max_documents=pick(quick=2, full=10)), tokenizer
    ),
    special,
    max_len,
)
fixed = PretrainingBatches(
    heldout_examples, special, BATCH, seed=1, dynamic_masking=False
)
heldout_batches = [
    fixed(i) for i in range(min(pick(quick=2, full=40), fixed.steps_per_epoch))
]


@torch.no_grad()
def imitation(student: nn.Module) -> dict:
    """At the held-out masked positions: the share of the student's top guesses that
    are the teacher's, and that are the hidden token; and the teacher's own score."""
    student.to(device).eval()
    agree = right = teacher_right = n = 0
    for batch in heldout_batches:
        ids, real, labels = (
            batch[k].to(device) for k in ("input_ids", "attention_mask", "mlm_labels")
        )
        masked = labels != IGNORE_INDEX  # (B, T)
        # (N,) each
        guesses = [
            model.mlm_head(
                model.bert(ids, attention_mask=real).last_hidden_state[masked]
            ).argmax(-1)
            for model in (student, teacher)
        ]
        agree += (guesses[0] == guesses[1]).sum().item()
        right += (guesses[0] == labels[masked]).sum().item()
        teacher_right += (guesses[1] == labels[masked]).sum().item()
        n += int(masked.sum())
    return {"agrees": agree / n, "correct": right / n, "teacher": teacher_right / n}


scores = {
    "student, not distilled": imitation(truncated),
    "student, distilled": imitation(distilled),
}
n_masked = sum(int((b["mlm_labels"] != IGNORE_INDEX).sum()) for b in heldout_batches)
print(
    f"{n_masked:,} held-out masked tokens; the teacher guesses "
    f"{scores['student, distilled']['teacher']:.1%} of them"
)
for name, score in scores.items():
    print(
        f"{name:<24} top guess = the teacher's {score['agrees']:6.1%}, "
        f"= the hidden token {score['correct']:6.1%}"
    )
if not is_quick():  # the distillation steps, not the copied layers, make it imitate
    plain, taught = scores["student, not distilled"], scores["student, distilled"]
    # 4,000 masked tokens: a standard error under a point
    assert taught["agrees"] > plain["agrees"] + 0.03
    assert taught["correct"] > plain["correct"]

# %% [markdown]
# The copy alone already shares most of its teacher's guesses: it *is* the teacher, with two of
# its four layers removed. The distillation steps close part of the rest: the distilled student's
# top guess is the teacher's more than three points more often than the copy's, as the cell
# asserts. It also finds the hidden token more often, but the assert on that has no margin: with
# about 4,000 masked tokens a point is about one standard error, so read that half as "no worse"
# unless the printed gap is a few points.
#
# (sec-distil-results)=
# ## What distillation buys
#
# Three numbers, measured in this run: parameters, CPU inference speed, and accuracy on Banking77
# after fine-tuning, for the teacher and the distilled student. Each encoder gets the same
# fine-tuning budget with chapter 10's
# `finetune_task`, on a copy, so that the teacher stays as it is: ten examples per intent, for
# more epochs than chapter 10 uses, since a small model needs many passes over so little data to
# learn 77 classes. Every classifier reads the mean of its encoder's final vectors: the course
# checkpoint was trained by MLM alone, so its pooler never learned anything (chapter 9), and the
# students have no pooler at all.

# %%
from tinybert.finetuning.recipes import finetune_task

encoders = {
    "teacher (bert-mini)": teacher.bert,
    "student, distilled": distilled.bert,
}
accuracies = {}
for name, encoder in encoders.items():
    run = finetune_task(
        "banking77",
        copy.deepcopy(encoder).to(device),
        tokenizer,
        train_examples=pick(quick=16, full=10 * 77),
        eval_examples=pick(quick=16, full=5 * 77),
        epochs=pick(quick=1, full=8),
        lr=pick(quick=1e-3, full=5e-4),
        batch_size=pick(quick=8, full=32),
        pooling="mean",
    )
    accuracies[name] = run.metrics["accuracy"]
    print(
        f"{name:<24} Banking77 validation accuracy {accuracies[name]:.1%} "
        f"({run.result.seconds:.0f} s of fine-tuning)"
    )


# %% [markdown]
# The speed of the encoders on the CPU, in one process, alternating so that both see the same
# machine load, on a batch of inputs of Banking77's typical length. Each number is the fastest of
# many forward passes: other programs on the machine can only add time to a pass, never remove it.

# %%
def seconds_per_batch(encoder: nn.Module, ids: torch.Tensor, repeats: int) -> float:
    """The fastest of ``repeats`` forward passes: other programs on the machine only
    ever add time."""
    times = []
    with torch.inference_mode():
        encoder(ids)  # warm-up
        for _ in range(repeats):
            start = time.perf_counter()
            encoder(ids)
            times.append(time.perf_counter() - start)
    return min(times)


cpu_encoders = {name: copy.deepcopy(e).cpu().eval() for name, e in encoders.items()}
speed_ids = torch.randint(5, len(tokenizer), pick(quick=(4, 24), full=(32, 24)))
rounds = pick(quick=2, full=5)
timings = {name: [] for name in cpu_encoders}
# alternate teacher and student
for _ in range(rounds):
    for name, encoder in cpu_encoders.items():
        timings[name].append(
            seconds_per_batch(encoder, speed_ids, repeats=pick(quick=2, full=10))
        )
seconds = {name: min(ts) for name, ts in timings.items()}
for name, s in seconds.items():
    print(f"{name:<24} {s * 1e3:7.2f} ms per batch of {tuple(speed_ids.shape)}")

# %% [markdown]
# Our numbers beside Ozdemir's. DistilBERT's "60% faster" means that BERT-base took 60% longer:
# a speed ratio of 1.6 {cite}`sanh2019distilbert`; its "97% of the performance" is the GLUE score
# of DistilBERT divided by BERT-base's.

# %%
teacher_params = count_parameters(teacher.bert)
student_params = count_parameters(distilled.bert)
speedup = seconds["teacher (bert-mini)"] / seconds["student, distilled"]
kept = (
    accuracies["student, distilled"] / accuracies["teacher (bert-mini)"]
    if accuracies["teacher (bert-mini)"]
    else float("nan")
)
rows = [
    (
        "parameters",
        "40% fewer (66M vs 110M)",
        f"{1 - student_params / teacher_params:.0%} fewer "
        f"({student_params / 1e6:.1f}M vs {teacher_params / 1e6:.1f}M)",
    ),
    (
        "CPU inference",
        "60% faster (x1.6)",
        (f"{speedup - 1:.0%} faster (x{speedup:.2f})"),
    ),
    (
        "accuracy kept",
        "97% (GLUE)",
        f"{kept:.0%} (Banking77)",
    ),
]
print(f"{'':<15} {'DistilBERT (slides)':<26} {'ours: 2-layer student of bert-mini'}")
for row in rows:
    print(f"{row[0]:<15} {row[1]:<26} {row[2]}")
assert student_params < 0.75 * teacher_params  # half the layers, the same table
if not is_quick():
    assert speedup > 1.4  # half the layers: most of the time
    assert 0.75 < kept < 1.0  # most of the teacher's accuracy, not all of it

# %% [markdown]
# What the table shows, and the cell asserts. The parameter saving is smaller than DistilBERT's
# because our model's token table (about 7,000 rows of 256) is a larger share of a four-layer model
# than BERT-base's is of twelve layers; halving the layers removes only the layers' share. The
# speed-up is larger than the parameter saving for the opposite reason: the embedding lookup costs
# almost nothing, and nearly all the time goes into the layers. The student keeps most of its
# teacher's Banking77 accuracy, but not all of it. That ratio is the least comparable of the three
# with Ozdemir's: DistilBERT's 97% compares models each fine-tuned to convergence on GLUE's tens
# of thousands of examples, with one fine-tuning run each here, and a student inherits what its
# teacher knows, which for this teacher is two CPU hours of pretraining ({ref}`sec-ft-gain`).
# Whether the distillation steps also raise the fine-tuned student's accuracy, beyond what the
# copied layers give, is a comparison of two students that needs several seeds of each to settle;
# {ref}`the exercise <ex-distil-seeds>` sets it up. What the steps do is measured above: they
# make the student imitate its teacher. In quick mode all of these numbers are meaningless: the
# budgets are a few steps.
#
# (sec-distil-summary)=
# ## Summary
#
# - Knowledge distillation trains a student on a teacher's output distributions, softened by a
#   temperature $T$. The KL term is multiplied by $T^2$ because its gradient shrinks like $1/T^2$;
#   at high $T$ it amounts to matching logits {cite}`hinton2015distilling`.
# - DistilBERT's loss is $\alpha\,T^2\,\mathrm{KL} + \beta\,\mathrm{MLM} + \gamma\,(1 - \cos)$, with
#   $\alpha = 5, \beta = 2, \gamma = 1$ and $T = 2$ in the released script; `distillation_loss`
#   returns it with its parts and sends no gradient to the teacher.
# - The student is BERT with half the layers, no segment table and no pooler, built from BERT's
#   parts; it matches Hugging Face's DistilBERT to $10^{-5}$, and `distilbert-base-uncased` has
#   Hugging Face's exact parameter count, 39.4% fewer than BERT-base (the paper rounds to 40%).
# - `student_from_teacher` copies the teacher's embeddings, MLM head and every other layer; with
#   our folding of the segment-A vector into the positions, the student computes exactly those
#   layers of the teacher.
# - On a laptop, distilling `bert-mini` into two layers gives the parameter saving, speed-up and
#   accuracy ratio printed above; the layers' share of the parameters decides the saving. With
#   one fine-tuning run each and a teacher of two CPU hours, the accuracy ratio is not comparable
#   to DistilBERT's 97%.
#
# Later chapters import `DistilBertConfig`, `DistilBertModel` and `DistilBertForMaskedLM` from
# `tinybert.models.distilbert`, and `student_from_teacher` and `distillation_loss` from
# `tinybert.pretraining.distillation`.
#
# (sec-distil-exercises)=
# ## Exercises
#
# :::{exercise-start}
# :label: ex-distil-spread
# :difficulty: 1
# :minutes: 15
# :kind: coding
# :::
# **Which layers to keep.** Write `spread_layers(n_teacher, n_student)` that returns the indices
# of `n_student` teacher layers spread evenly from the first to the last: index $k$ is the integer
# nearest to $k\,(n_\text{teacher} - 1) / (n_\text{student} - 1)$, rounding halves up, for
# $k = 0, \dots, n_\text{student} - 1$. Raise `ValueError` unless $2 \le n_\text{student} \le
# n_\text{teacher}$. Check that it reproduces the layers of the released DistilBERT script for
# 12 → 6. Why might spreading the layers be better than taking the first six, or every other one
# from 0?
# :::{exercise-end}
# :::
#
# ::::{solution-start} ex-distil-spread
# :class: dropdown
# ::::
# For 12 → 6 the exact positions are 0, 2.2, 4.4, 6.6, 8.8, 11, which round to 0, 2, 4, 7, 9, 11.
# Rounding halves up is `floor(x + 0.5)`, which Python's `round` (halves to even) does not do.
# Spreading keeps the teacher's last layer, whose output the MLM head and the cosine loss were
# trained on, and samples the whole depth; the first six layers would leave the student without
# any of the top layers, and every other one from 0 ends one layer below the top.

# %% tags=["solution"]
import math


def spread_layers(n_teacher, n_student):
    ### BEGIN SOLUTION
    if not 2 <= n_student <= n_teacher:
        raise ValueError(
            f"need 2 <= n_student <= n_teacher, got n_student={n_student}, "
            f"n_teacher={n_teacher}"
        )
    return [
        math.floor(k * (n_teacher - 1) / (n_student - 1) + 0.5)
        for k in range(n_student)
    ]
    ### END SOLUTION


# %% [markdown]
# ::::{solution-end}
# ::::

# %% tags=["check"]
from tinybert.exercises.ch13 import check_spread_layers

check_spread_layers(spread_layers)

# %% [markdown]
# :::{exercise-start}
# :label: ex-distil-soft-ce
# :difficulty: 2
# :minutes: 25
# :kind: coding
# :::
# **Soft cross-entropy.** Hinton et al. write the distillation term as the cross-entropy with soft
# targets, $-\sum_v p^\text{teacher}_v(T) \log p^\text{student}_v(T)$, where `distillation_loss`
# uses the KL divergence. Write `soft_cross_entropy(student_logits, teacher_logits, temperature)`
# for logits of shape $(N, V)$ that returns $T^2$ times the soft cross-entropy averaged over the $N$
# positions, differentiable with respect to the student's logits only. The check compares its
# value with the KL term plus $T^2$ times the teacher's entropy, and its gradient with the KL
# term's. Why do the two losses train the student identically, and why does the KL version make
# a better number to *print*?
# :::{exercise-end}
# :::
#
# ::::{solution-start} ex-distil-soft-ce
# :class: dropdown
# ::::
# $\mathrm{CE}(p^t, p^s) = H(p^t) + \mathrm{KL}(p^t \| p^s)$, and the teacher's entropy $H(p^t)$ does
# not depend on the student, so the gradients are equal. The KL divergence is zero when the
# student matches the teacher exactly, so its value says how far the student is; the
# cross-entropy never goes below the teacher's entropy, which varies from batch to batch.

# %% tags=["solution"]
import torch
import torch.nn.functional as F


def soft_cross_entropy(student_logits, teacher_logits, temperature):
    ### BEGIN SOLUTION
    T = temperature
    targets = F.softmax(teacher_logits.detach() / T, dim=-1)  # (N, V)
    log_p_student = F.log_softmax(student_logits / T, dim=-1)  # (N, V)
    return -(targets * log_p_student).sum(dim=-1).mean() * T**2
    ### END SOLUTION


# %% [markdown]
# ::::{solution-end}
# ::::

# %% tags=["check"]
from tinybert.exercises.ch13 import check_soft_cross_entropy

check_soft_cross_entropy(soft_cross_entropy)

# %% [markdown]
# :::{exercise-start}
# :label: ex-distil-seeds
# :difficulty: 2
# :minutes: 30
# :kind: experiment
# :::
# **Does distillation help the fine-tuned student? (computation)** {ref}`sec-distil-results`
# fine-tunes the teacher and the distilled student once each. Compare the distilled student with
# the student that was only initialised from the teacher's layers (`truncated`) on Banking77: which
# sources of randomness do you vary, how many runs do you need, and when is a difference between
# the two students evidence? Run it with the chapter's settings and state your verdict in one
# sentence that the numbers support.
# :::{exercise-end}
# :::
#
# ::::{solution-start} ex-distil-seeds
# :class: dropdown
# ::::
# **Rubric** (what a full answer contains): several fine-tuning seeds per student (the head's
# initialisation, the batch order, dropout), with the data, budget and copy of each encoder fixed;
# means and spreads; a verdict that counts a gap only when it exceeds the spread of either
# student; the cost, about the chapter's fine-tuning time per run.
#
# ```python
# import statistics
#
# runs = {"not distilled": truncated.bert, "distilled": distilled.bert}
# scores = {name: [] for name in runs}
# for seed in (0, 1, 2, 3, 4):
#     for name, encoder in runs.items():
#         run = finetune_task(
#             "banking77", copy.deepcopy(encoder).to(device), tokenizer,
#             train_examples=10 * 77, eval_examples=5 * 77, epochs=8, lr=5e-4,
#             batch_size=32, pooling="mean", seed=seed,
#         )
#         scores[name].append(run.metrics["accuracy"])
# for name, values in scores.items():
#     print(name, statistics.mean(values), max(values) - min(values))
# ```
#
# A gap between the two means counts only when it is larger than the spread (max minus min) of
# either student over its seeds, the rule of chapter 10's transfer ladder. With 120 distillation
# steps the answer may well be "level": the steps make the student imitate its teacher on masked
# tokens (the chapter measures that), but the fine-tuning of both students starts from the same
# copied layers and reads the same few hundred examples, and a difference of a point or two on
# 385 validation examples is within the noise of one run (a binomial standard error of about 2.5
# points at 60%).
# ::::{solution-end}
# ::::
#
# :::{exercise-start}
# :label: ex-distil-limits
# :difficulty: 3
# :minutes: 30
# :kind: derivation
# :::
# **The two limits of the temperature (pen and paper).** (a) Show that the gradient of
# $T^2\,\mathrm{KL}(p^t(T) \| p^s(T))$ with respect to the student's logit $z^s_i$ is
# $T\,(p^s_i(T) - p^t_i(T))$. (b) Expand the softmax for large $T$ to show that, for logits of mean
# zero over the $V$ classes, this tends to $(z^s_i - z^t_i)/V$. (c) What does the loss become as
# $T \to 0$, and why is that a worse teacher signal?
# :::{exercise-end}
# :::
#
# ::::{solution-start} ex-distil-limits
# :class: dropdown
# ::::
# **Rubric** (what a full answer contains): (a) the gradient $T(p^s_i - p^t_i)$ derived from the
# KL divergence; (b) the large-$T$ expansion giving $(z^s_i - z^t_i)/V$ for logits of mean zero,
# that is logit matching; (c) as $T \to 0$ a cross-entropy on the teacher's top token, which loses
# what the small probabilities carried.
#
# (a) $\mathrm{KL} = \sum_v p^t_v \log p^t_v - \sum_v p^t_v \log p^s_v$, and
# $\partial \log p^s_v / \partial z^s_i = \frac1T(\delta_{vi} - p^s_i)$, so
# $\partial \mathrm{KL} / \partial z^s_i = -\frac1T \sum_v p^t_v (\delta_{vi} - p^s_i)
# = \frac1T (p^s_i - p^t_i)$; times $T^2$ gives $T(p^s_i - p^t_i)$.
# (b) For large $T$, $e^{z/T} \approx 1 + z/T$, so $p_i \approx (1 + z_i/T) / (V + \sum_j z_j / T)
# = (1 + z_i/T)/V$ when the logits have mean zero. Then $T(p^s_i - p^t_i) \approx (z^s_i - z^t_i)/V$:
# the loss becomes a squared distance between logits, the "logit matching" of earlier compression
# work, which Hinton et al. show to be a special case of distillation. The cell in
# {ref}`sec-distil-loss` measured this limit.
# (c) As $T \to 0$ the teacher's distribution becomes one-hot on its top token, and the term is a
# cross-entropy with the teacher's argmax as a hard label: every similarity between tokens that
# the small probabilities carried is lost, and the student learns only what a labelled data set
# would have taught it (labelled by the teacher rather than by the text).
# ::::{solution-end}
# ::::
#
# :::{exercise-start}
# :label: ex-distil-where
# :difficulty: 2
# :minutes: 25
# :kind: concept
# :::
# **Where the parameters are.** For BERT-base and for `bert-mini`, compute the share of the
# parameters of `BertModel` that sits in the embeddings and the share in the layers, and from it
# the parameter saving of a student with half the layers. Then compare two ways of making
# `bert-mini` about half as large: keeping its four layers and halving the width $D$ (and
# $d_\text{ff}$ with it), or keeping the width and removing layers. Which would you expect to run
# faster on a CPU at batch size 1, and why did DistilBERT choose depth?
# :::{exercise-end}
# :::
#
# ::::{solution-start} ex-distil-where
# :class: dropdown
# ::::
# **Rubric** (what a full answer contains): the embedding and layer shares of BERT-base and
# `bert-mini`, and the saving of half the layers; halving the width divides each layer by about
# four while removing layers keeps the embeddings; fewer layers run faster at batch size 1 because
# the sequential, per-layer costs dominate; DistilBERT's authors found depth mattered more for
# time.
#
# The cell counts them. Halving the width divides every layer's parameters by about four and the
# embeddings by two; removing layers leaves the embeddings whole. At batch size 1 on a CPU a
# forward pass is a chain of small matrix products, one layer after another, and each layer's
# fixed cost (launching operations, reading its weights from memory) does not shrink with the
# width as fast as the arithmetic does; fewer layers means fewer sequential steps. The DistilBERT
# authors observed the same: for a given parameter budget, the number of layers matters more for
# the time than the width.

# %%
for name in ("bert-base-uncased", "bert-mini"):
    c = BertConfig.preset(name)
    with torch.device("meta"):
        total = count_parameters(BertModel(c))
        layers = sum(count_parameters(layer) for layer in BertModel(c).encoder.layers)
        thin = count_parameters(
            BertModel(BertConfig.preset(name, d_model=c.d_model // 2, d_ff=c.d_ff // 2))
        )
    print(
        f"{name:<18} embeddings and pooler {1 - layers / total:.0%}, layers "
        f"{layers / total:.0%}; half the layers saves {layers / 2 / total:.0%}, half "
        f"the width saves {1 - thin / total:.0%}"
    )

# %% [markdown]
# ::::{solution-end}
# ::::
#
# (sec-distil-quiz)=
# ## Quiz
#
# Check what you took from this chapter. In a notebook, run the cell and answer with
# `quiz.check(question, answer)`, such as `quiz.check(1, "b")`; here, press *Check*.

# %% tags=["quiz", "remove-input"]
import inspect

from tinybert.pretraining.distillation import distillation_loss
from tinybert.exercises.quiz import Quiz, choice, number

defaults = inspect.signature(distillation_loss).parameters
quiz = Quiz(
    "ch13",
    [
        choice(
            "Why is the KL term multiplied by T²?",
            [
                "its gradient shrinks like 1/T²",
                "to make the loss positive",
                "because T is squared inside the softmax",
                "to give it the MLM's units",
            ],
            answer="a",
            explain="T² keeps its weight when T changes.",
        ),
        number(
            "Which temperature does distillation_loss use by default, as DistilBERT's "
            "released script does?",
            answer=defaults["temperature"].default,
            decimals=0,
            explain="With α = 5, β = 2, γ = 1.",
        ),
        choice(
            "What does the DistilBERT student lack, compared with BERT?",
            [
                "half the attention heads, the segment table and the pooler",
                "half the layers, the position table and the pooler",
                "half the layers, the segment table and the pooler",
                "half the width, the segment table and the MLM head",
            ],
            answer="c",
            explain="It is built from BERT's parts.",
        ),
        choice(
            "student_from_teacher initialises the student with",
            [
                "the teacher's embeddings only; its layers start at random",
                "the teacher's embeddings, MLM head and its layers averaged in pairs",
                "the teacher's embeddings, MLM head and first half of its layers",
                "the teacher's embeddings, MLM head and every other layer",
            ],
            answer="d",
            explain="It computes exactly those layers of the teacher.",
        ),
        number(
            "By what percentage has distilbert-base-uncased fewer parameters than "
            "BERT-base? (0 decimals)",
            answer=39,
            decimals=0,
            explain="Its layers are halved; its embeddings are not.",
        ),
        choice(
            "As T goes to 0, the distillation term becomes",
            [
                "logit matching",
                "a cross-entropy on the teacher's top token",
                "zero",
                "a distance between hidden states",
            ],
            answer="b",
            explain="High T is the limit that amounts to logit matching.",
        ),
    ],
)
quiz
