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
#     module: models.albert
# ---

# %% [markdown]
# (sec-albert)=
# # ALBERT
#
# BERT-large has 24 layers of width 1024 and about 340M parameters, three times BERT-base, and it
# is better on almost every benchmark {cite}`devlin2019bert`. Growing further runs into memory:
# every parameter needs its gradient and two Adam moments beside it on the accelerator. ALBERT,
# *A Lite BERT* {cite}`lan2020albert`, asks how many of those parameters BERT actually needs, and
# answers with two changes to the architecture and one to the training:
#
# 1. **{term}`Factorised embeddings <factorised embedding>`.** The token table does not need to be as wide as the layers: ALBERT
#    keeps its $V$ token vectors at a small width $E$ and maps them to the layers' width $D$ with
#    one shared matrix.
# 2. **{term}`Cross-layer parameter sharing <cross-layer parameter sharing>`.** All $N$ layers use the same weights: one layer, applied
#    $N$ times.
# 3. **{term}`Sentence-order prediction <sentence-order prediction>` (SOP)** replaces next sentence prediction: instead of telling a
#    real continuation from a random segment of another document, the model must tell two
#    consecutive segments in their order from the same two segments swapped.
#
# {ref}`Ozdemir's lecture slides <sources-decks>` sum up the result as "90% fewer parameters": 12M for
# ALBERT-base and 18M for ALBERT-large, against BERT's 110M and 340M. This chapter builds ALBERT from
# BERT's parts, writes only what differs, proves that it computes what Hugging Face's ALBERT computes,
# counts the parameters part by part to see where the 90% comes from, and measures on real text the
# cue that SOP takes away from NSP.
#
# **What you will learn**
#
# - why the token table may be narrower than the model, and how a $V \times E$ table followed by an
#   $E \times D$ projection replaces BERT's $V \times D$ table;
# - cross-layer parameter sharing: one layer applied $N$ times, groups of layers in general, and
#   why it saves parameters and memory but not computation;
# - ALBERT assembled from chapter 8's embeddings, layer, pooler and heads, converted to and from
#   Hugging Face `transformers` with outputs equal to $10^{-5}$;
# - where the "90% fewer parameters" come from, part by part, for the published sizes and for
#   this course's tiny ones;
# - why next sentence prediction can be solved from the topic alone, measured with a word-overlap
#   rule on real pairs, and how sentence-order pairs are made to remove that cue.
#
# **Uses.** From {doc}`08_bert`: `BertConfig`, `BertModel` (its `forward`) and
# `init_bert_weights` from `tinybert.models.bert`; `BertEmbeddings`, `BertEncoder` and
# `BertLayer` from `tinybert.models.bert_layers`; `BertForMaskedLM`, `BertForPreTraining`,
# `BertMLMHead`, `MaskedLMOutput`, `PreTrainingOutput`, `masked_lm_logits_and_loss` and `check_labels` from
# `tinybert.models.bert_heads`; `register_family`, `from_hf` and `to_hf` from
# `tinybert.models.convert`; `ACTIVATIONS_TO_HF`, `BERT_CONFIG_NAMES`, `bert_config_from_hf` and
# `bert_encoder_names` from `tinybert.models.convert_names`; `parity_report` and
# `round_trip_tensors` from `tinybert.models.parity`; `save_model` and `load_model` from
# `tinybert.models.registry`. From {doc}`09_pretraining`: `SegmentPair` from
# `tinybert.pretraining.pairs`; `make_examples` (which takes the pair sampler as an argument) from
# `tinybert.pretraining.examples`;
# `shipped_checkpoint` from `tinybert.models.course_checkpoint`;
# `SpecialTokens` from `tinybert.training.inputs`; `seeded_generator` from
# `tinybert.pretraining.objective`; `make_segments`,
# `course_documents` and `tokenize_documents` from `tinybert.pretraining.documents`. From
# {doc}`10_finetuning`: `SequenceClassifier` from `tinybert.finetuning.heads`. From {doc}`07_tokenization`:
# `WordPieceTokenizer`. From {doc}`01_feedforward`: `count_parameters`, and the argument checks
# `check_positive_int` and `check_probability`.
# The model goes to `tinybert.models.albert`, its heads to `tinybert.models.albert_heads`, its converters to `tinybert.models.convert_albert`, the
# sentence-order pairs to `tinybert.pretraining.sentence_order`.
#
# (sec-albert-setup)=
# ## Setup
#
# The first cell holds the imports of `tinybert.models.albert`; the second, those of
# `tinybert.models.albert_heads`; the third, those of the teaching code.

# %% tags=["export"]
from __future__ import annotations

from dataclasses import dataclass, fields

import torch
from torch import nn

from tinybert.blocks.checks import check_positive_int, check_probability
from tinybert.models.bert import BertConfig, BertModel
from tinybert.models.bert_heads import MaskedLMOutput
from tinybert.models.bert_layers import BertEmbeddings, BertEncoder, BertLayer

# %% tags=["export:models.albert_heads"]
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from tinybert.models.albert import AlbertConfig, AlbertModel
from tinybert.models.bert_heads import (
    BertForMaskedLM,
    BertForPreTraining,
    BertMLMHead,
    check_labels,
    masked_lm_logits_and_loss,
)
from tinybert.models.bert import init_bert_weights

# %%
import statistics
import tempfile
import time
import warnings

import matplotlib.pyplot as plt

from tinybert.blocks.feedforward import count_parameters
from tinybert.runtime import get_device, is_quick, pick, seed_everything

# transformers' progress bars warn about widgets
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import transformers

device = get_device()
print(f"device: {device}, quick mode: {is_quick()}")

# %% [markdown]
# (sec-albert-config)=
# ## The configuration
#
# An ALBERT is a BERT with four more numbers, so its configuration *is* a `BertConfig` with those
# four fields added: the embedding width $E$ (`embedding_size`), the number of distinct sets of
# layer weights $G$ (`n_groups`), the number of layers inside each set (`inner_group_num`, 1 in
# every released ALBERT), and the dropout before the sentence-order head. Everything else keeps
# BERT's name and meaning: `d_model` is still the width $D$ of the layers (Hugging Face's
# `hidden_size`; the ALBERT paper writes $H$ for it, a letter this course keeps for the number of
# heads), `n_layers` still the depth $N$.
#
# Some defaults change. They are those of `albert-base-v2`: a SentencePiece vocabulary of 30,000
# tokens, $E = 128$, no dropout (the second version of the released models was trained without
# it), and the tanh approximation of GELU from {doc}`01_feedforward`, which is what Google's ALBERT
# code calls `gelu` and Hugging Face calls `gelu_new`. The presets are three of the four published sizes
# {cite}`lan2020albert` (base, large and xxlarge) and `albert-mini`, which has `bert-mini`'s sizes
# with $E = 128$.

# %% tags=["export"]
ALBERT_PRESETS = {
    # N=12, D=768, H=12, E=128
    "albert-base-v2": dict(),
    # N=24, D=1024, H=16
    "albert-large-v2": dict(d_model=1024, n_layers=24, n_heads=16, d_ff=4096),
    # N=12, D=4096, H=64
    "albert-xxlarge-v2": dict(d_model=4096, n_layers=12, n_heads=64, d_ff=16384),
    # this course's
    "albert-mini": dict(
        vocab_size=8192, d_model=256, n_layers=4, n_heads=4, d_ff=1024, max_len=128
    ),
}


@dataclass
class AlbertConfig(BertConfig):
    """BERT's configuration with ALBERT's defaults (albert-base-v2) and four
    more fields.

    d_model is the width D of the layers; embedding_size the width E of the embedding
    tables. Hugging Face's names are in tinybert.models.convert_albert.
    """

    presets = ALBERT_PRESETS
    model_name = "ALBERT"

    vocab_size: int = 30000  # V, ALBERT's SentencePiece vocabulary
    dropout: float = 0.0  # the v2 models were trained without dropout
    attention_dropout: float = 0.0
    # the tanh GELU: "gelu" in Google's ALBERT code, "gelu_new" in HF's
    activation: str = "gelu_tanh"
    # E, width of the token, segment and position tables
    embedding_size: int = 128
    # G, distinct sets of layer weights; depth i uses set i·G // N
    n_groups: int = 1
    # layers inside one set, applied one after the other
    inner_group_num: int = 1
    # before the sentence-order head (HF classifier_dropout_prob)
    classifier_dropout: float = 0.1

    def __post_init__(self) -> None:
        super().__post_init__()  # BERT's checks
        for name in ("embedding_size", "n_groups", "inner_group_num"):
            check_positive_int(f"AlbertConfig.{name}", getattr(self, name))
        if self.n_groups > self.n_layers:
            raise ValueError(
                f"AlbertConfig: n_groups = {self.n_groups} exceeds "
                f"n_layers = {self.n_layers}; a group that no depth uses "
                f"would never be trained"
            )
        check_probability("AlbertConfig.classifier_dropout", self.classifier_dropout)

    def embedding_config(self) -> BertConfig:
        """The BertConfig of ALBERT's embedding block: BERT's block at width E (heads
        play no part there)."""
        shared = {f.name: getattr(self, f.name) for f in fields(BertConfig)}
        return BertConfig(**{**shared, "d_model": self.embedding_size, "n_heads": 1})


# %%
print(
    f"{'preset':<18} {'V':>6} {'E':>4} {'D':>5} {'N':>3} {'G':>2} {'H':>3} {'F':>6} "
    f"{'activation':>10}"
)
for name in ALBERT_PRESETS:
    c = AlbertConfig.preset(name)
    print(
        f"{name:<18} {c.vocab_size:>6} {c.embedding_size:>4} {c.d_model:>5} "
        f"{c.n_layers:>3} {c.n_groups:>2} {c.n_heads:>3} {c.d_ff:>6} "
        f"{c.activation:>10}"
    )
assert (
    isinstance(AlbertConfig(), BertConfig)
    and AlbertConfig.from_dict(AlbertConfig().to_dict()) == AlbertConfig()
)


# %% [markdown]
# (sec-albert-factorised)=
# ## Factorised embeddings
#
# In BERT the token table has one row of width $D$ per vocabulary entry, $V \times D$ numbers,
# because the embedding is added to the segment and position vectors and fed straight into the
# first layer. ALBERT's argument {cite}`lan2020albert` is that the two widths serve different
# purposes. A row of the token table is a *context-independent* vector: it only has to say which
# token this is. The layers produce *context-dependent* vectors, which have to hold everything the
# model has worked out about the token in its sentence. The second needs a large $D$; the first can
# be much smaller. Keeping the two widths equal is also costly: the table has $V D$ numbers, so
# every increase of $D$ is paid $V$ times over.
#
# So ALBERT keeps the tables at width $E$ and maps every position's sum to width $D$ with one
# learned matrix $\mathbf P \in \mathbb R^{E \times D}$ (and a bias):
#
# $$\mathbf x_t = \operatorname{LayerNorm}\bigl(\mathbf E^\text{token}_{w_t} + \mathbf E^\text{segment}_{s_t}
# + \mathbf E^\text{position}_{t}\bigr)\,\mathbf P + \mathbf b_P, \qquad
# \mathbf E^\text{token} \in \mathbb R^{V \times E}.$$
#
# The token table shrinks from $V D$ to $V E + E D$ parameters (plus $D$ for the bias), a large
# saving whenever $E \ll D$: with $V = 30{,}000$, $D = 768$ and $E = 128$, from 23.0M to 3.9M, as
# a cell after the next one prints. The product $\mathbf E^\text{token}\mathbf P$ is a $V \times D$ matrix of
# rank at most $E$: the factorisation is a low-rank approximation of BERT's table.
#
# Everything before the projection is BERT's embedding block at width $E$, so ALBERT's embeddings
# are chapter 8's `BertEmbeddings`, built from `embedding_config()` (a `BertConfig` whose
# `d_model` is $E$), plus the projection. Hugging Face's code puts the projection at the start of
# its encoder under the name `embedding_hidden_mapping_in`; it computes the same thing.

# %% tags=["export"]
class AlbertEmbeddings(BertEmbeddings):
    """BERT's embeddings at width E, then one linear map to width D: (B, T) ids
    -> (B, T, D).

    The three tables are (V, E), (2, E) and (max_len, E); the projection adds E·D +
    D parameters.
    """

    def __init__(self, config: AlbertConfig):
        # tables, LayerNorm(E), dropout
        super().__init__(config.embedding_config())
        # E -> D, shared by every token
        self.projection = nn.Linear(config.embedding_size, config.d_model)

    def forward(
        self, input_ids: torch.Tensor, token_type_ids: torch.Tensor
    ) -> torch.Tensor:
        x = super().forward(input_ids, token_type_ids)  # (B, T, E)
        return self.projection(x)  # (B, T, D)


# %% [markdown]
# The token table of `albert-base-v2` against BERT-base's, and the projection that makes up the
# difference in width:

# %%
albert_base, bert_base = (
    AlbertConfig.preset("albert-base-v2"),
    BertConfig.preset("bert-base-uncased"),
)
with torch.device("meta"):
    embeddings = AlbertEmbeddings(albert_base)
    bert_embeddings = BertModel(bert_base).embeddings
for name, module in [
    ("token table", embeddings.token_embeddings),
    ("projection", embeddings.projection),
    ("all ALBERT embeddings", embeddings),
    ("all BERT-base embeddings", bert_embeddings),
]:
    shapes = ", ".join(str(tuple(p.shape)) for p in module.parameters())
    print(f"{name:<25} {count_parameters(module):>11,}  {shapes}")
V, E, D = albert_base.vocab_size, albert_base.embedding_size, albert_base.d_model
print(f"V·D = {V * D:,} against V·E + E·D + D = {V * E + E * D + D:,}")
assert (
    count_parameters(embeddings.token_embeddings)
    + count_parameters(embeddings.projection)
    == V * E + E * D + D
)

# %% [markdown]
# {numref}`fig-albert-embeddings` draws the two tables of `albert_base` to scale, with the
# counts just printed.

# %% mystnb={"figure": {"caption": "Factorised embeddings at the sizes of `albert_base`. Left: one token table of width $D$, as BERT has. Right: ALBERT's table of width $E$, drawn to the same scale, followed by the projection $\\mathbf P$ from $E$ to $D$ that every token shares; the parameter counts are computed from the configuration.", "name": "fig-albert-embeddings"}, "image": {"alt": "Two rectangles of the same height, one per token table. Left, \"one table of width D, as in BERT\": a wide box, V by D, 30,000 by 768, 23.0M numbers. Right, \"ALBERT: a narrow table, then a projection\": a narrow box, V by E, 30,000 by 128, 3.84M numbers, with an arrow to a small box P of size E by D, 128 by 768, 0.10M with its bias. Notes say that the product has rank at most E and that the count falls from 23.0M to 3.94M parameters."}} tags=["diagram", "hide-input"]
from tinybert.diagrams import albert_embeddings_diagram

albert_embeddings_diagram(albert_base)


# %% [markdown]
# (sec-albert-sharing)=
# ## Cross-layer parameter sharing
#
# The second change goes further: all $N$ layers of ALBERT use *the same* weights. The encoder
# holds one {term}`post-LN` layer, exactly chapter 8's `BertLayer`, and applies it $N$ times:
#
# $$\mathbf h^{(i)} = \operatorname{Layer}_{\boldsymbol\theta}\bigl(\mathbf h^{(i-1)}\bigr), \quad i = 1, \dots, N,$$
#
# with one $\boldsymbol\theta$ for every depth. The paper tried sharing only the attention or only
# the feed-forward block and found that sharing everything cost some accuracy at the base size
# but saved the most parameters; sharing everything is ALBERT's default {cite}`lan2020albert`. The
# paper also found that with sharing, the input and output of each layer change more smoothly
# with depth than in BERT: the same function, applied again and again, refines its own output.
#
# Google's code allows a middle ground, which Hugging Face keeps: $G$ groups of weights, where
# depth $i$ (counting from 0) uses group $\lfloor iG/N \rfloor$, so with $N = 12$ and $G = 3$ depths
# 0 to 3 share the first group, 4 to 7 the second, 8 to 11 the third. $G = N$ is BERT; $G = 1$ is
# ALBERT. Each group can hold several different layers (`inner_group_num`), run in order every
# time the group is used. The released models all use $G = 1$ with one layer per group.
# ALBERT's encoder is chapter 8's `BertEncoder` with two methods replaced: `add_layers` creates
# the $G$ groups, and `depths` lists the layers in the order they run, the same modules at
# several depths. The loop, with its hidden states and attention weights, is BERT's.

# %% tags=["export"]
class AlbertEncoder(BertEncoder):
    """N layers deep with only G sets of weights: depth i runs group i·G // N. (B, T, D)
    -> (B, T, D).

    With G = 1, ALBERT's default, one BertLayer is applied N times. A group may hold
    several layers (inner_group_num), applied one after the other each time
    the group runs.
    """

    def add_layers(self, config: AlbertConfig) -> None:
        self.n_layers = config.n_layers
        self.groups = nn.ModuleList(
            nn.ModuleList(BertLayer(config) for _ in range(config.inner_group_num))
            for _ in range(config.n_groups)
        )

    def depths(self) -> list[nn.Module]:
        G = len(self.groups)
        # the same modules at several depths
        return [
            layer
            for depth in range(self.n_layers)
            for layer in self.groups[depth * G // self.n_layers]
        ]


# %% [markdown]
# Is chapter 8's layer really the layer Hugging Face's `AlbertLayer` computes? Written out, the
# latter is: attention, dropout, add and LayerNorm; then the feed-forward block (dense,
# activation, dense), add and LayerNorm. That is `BertLayer` with other names (`attention.dense`
# for `attention.output`, `ffn` and `ffn_output` for `feed_forward.expand` and
# `feed_forward.contract`, `full_layer_layer_norm` for `feed_forward_norm`), with one difference:
# Hugging Face's layer applies no dropout to the feed-forward output, while `BertLayer` and Google's
# ALBERT code do. In evaluation mode dropout does nothing, and the released ALBERTs have a dropout
# of 0, so the two compute the same function; the parity test below checks it.
#
# Sharing is visible in the model: the module at depth 0 and the module at depth 11 are the same
# Python object, and a 12-layer ALBERT encoder has the parameters of one layer.

# %%
with torch.device("meta"):
    shared = AlbertEncoder(albert_base)
    grouped = AlbertEncoder(AlbertConfig.preset("albert-base-v2", n_groups=3))
    unshared = BertModel(bert_base).encoder
depth_to_group = [depth * 3 // 12 for depth in range(12)]
print(f"group used at each depth with G = 3: {depth_to_group}")
for name, encoder in [
    ("ALBERT-base encoder, G = 1", shared),
    ("ALBERT-base encoder, G = 3", grouped),
    ("BERT-base encoder (G = N)", unshared),
]:
    print(f"{name:<28} {count_parameters(encoder):>12,} parameters")
assert count_parameters(shared) * 12 == count_parameters(unshared)

# %% [markdown]
# {numref}`fig-albert-sharing` draws the same three encoders as depths and sets of weights,
# from their configurations.

# %% mystnb={"figure": {"caption": "Which weights each depth runs, for ALBERT-base with $G = 1$ (ALBERT's default), with $G = 3$ groups, and with $G = N$, which is BERT: depth $i$ runs set $\\lfloor iG/N \\rfloor$. Computed from the configurations, as `AlbertEncoder.depths` computes it.", "name": "fig-albert-sharing"}, "image": {"alt": "Three panels, each a column of twelve boxes labelled depth 0 to depth 11 with an arrow from every depth to the set of weights it runs. Left, G = 1: all twelve arrows meet one box, weights 1. Middle, G = 3: depths 0 to 3 point to weights 1, 4 to 7 to weights 2, 8 to 11 to weights 3. Right, G = 12, as BERT: each depth has its own box, weights 1 to 12."}} tags=["diagram", "hide-input"]
from tinybert.diagrams import albert_sharing_diagram

albert_sharing_diagram(
    albert_base,
    AlbertConfig.preset("albert-base-v2", n_groups=3),
    AlbertConfig.preset("albert-base-v2", n_groups=albert_base.n_layers),
)


# %% [markdown]
# (sec-albert-model)=
# ## The model
#
# The rest is BERT. `AlbertModel` holds the factorised embeddings, the shared encoder and BERT's
# pooler ($\tanh$ of a dense layer on `[CLS]`), and its `forward` *is* `BertModel.forward`: check
# the inputs, build the padding mask, embed, encode, pool. Nothing in those steps depends on how
# the embeddings and the encoder are made, so, like RoBERTa and DistilBERT, `AlbertModel` is a
# `BertModel` that names only what differs, in the three class attributes that chapter 8 left for
# the variants: its configuration, its embeddings and its encoder.
# Weights start as in BERT (`init_bert_weights`); a shared layer is initialised once.

# %% tags=["export"]
class AlbertModel(BertModel):
    """ALBERT's encoder: factorised embeddings, N applications of shared layers, BERT's
    pooler on [CLS]. Everything else is BertModel's (checks, mask, forward, outputs):
    last_hidden_state (B, T, D), pooler_output (B, D) or None.
    """

    config_class = AlbertConfig
    embeddings_class = AlbertEmbeddings
    encoder_class = AlbertEncoder


# %% [markdown]
# The masked-language-model head changes in one place. BERT's head transforms the final vector
# with a $D \times D$ layer, then scores it against every row of the token table
# ({term}`weight tying`, {doc}`08_bert`). ALBERT's token rows have width $E$, so its head maps the
# vector down to $E$ first: dense $D \to E$, activation, LayerNorm over $E$, then the $(V, E)$
# token table transposed, plus a bias. That is chapter 8's head built at width $E$ with its first layer replaced. The
# head's decoder is $V \times E$ and tied, so it costs no parameters of its own beyond the bias.
# The masked-language model is then chapter 8's `BertForMaskedLM` with ALBERT's encoder and head.
# As for RoBERTa, the encoder keeps BERT's attribute name, `bert`; the converter below maps it to
# Hugging Face's `albert.`. The heads and the models that carry them go to
# `tinybert.models.albert_heads`, as BERT's went to `tinybert.models.bert_heads`.

# %% tags=["export:models.albert_heads"]
class AlbertMLMHead(BertMLMHead):
    """BERT's MLM head at width E: dense D -> E, activation, LayerNorm(E), then the (V,
    E) token table + bias."""

    def __init__(self, config: AlbertConfig, token_embeddings: nn.Embedding):
        # LayerNorm(E), decoder tied to (V, E)
        super().__init__(config.embedding_config(), token_embeddings)
        # the one change: D -> E instead of E -> E
        self.dense = nn.Linear(config.d_model, config.embedding_size)
        init_bert_weights(self.dense, config.initializer_range)


class AlbertForMaskedLM(BertForMaskedLM):
    """ALBERT with the masked-language-model head (no pooler): chapter 8's model with
    ALBERT's encoder and head."""

    config_class = AlbertConfig
    model_class = AlbertModel
    mlm_head_class = AlbertMLMHead


# %% [markdown]
# For pretraining, ALBERT replaces BERT's next-sentence head by a sentence-order head of the same
# shape, a linear layer from the pooled `[CLS]` vector to two classes, with dropout in front as in
# Hugging Face's `AlbertSOPHead`. The classes follow Hugging Face: 0 means the two segments are in
# their original order, 1 that they were swapped. Class 0 means "B follows A" in both tasks, which
# is what lets us try each head on the other's task in {ref}`sec-albert-experiment`.
# `AlbertForPreTraining` is chapter 8's `BertForPreTraining` with ALBERT's parts in its class
# attributes; it overrides only the two methods that make and read the pair head. Its `forward`
# is BERT's: the sentence-order labels go in as `pair_labels`, the name chapter 8 gave the
# labels of whatever the pair head asks.

# %% tags=["export:models.albert_heads"]
@dataclass
class AlbertPreTrainingOutput:
    # mlm_loss + sop_loss, the sum of those whose labels were given
    loss: torch.Tensor | None
    mlm_loss: torch.Tensor | None
    sop_loss: torch.Tensor | None
    # (B, T, V); with mlm_labels only the labelled positions, (N, V)
    mlm_logits: torch.Tensor
    # (B, 2); class 0 = segments in order, 1 = swapped
    sop_logits: torch.Tensor

    @property
    def pair_loss(self) -> torch.Tensor | None:  # what chapter 9's loop reads
        return self.sop_loss

    @property
    def pair_logits(self) -> torch.Tensor:
        return self.sop_logits


class AlbertForPreTraining(BertForPreTraining):
    """ALBERT with both pretraining heads: masked language model and sentence-order
    prediction; chapter 8's model with ALBERT's encoder, MLM head, pair head and
    output."""

    config_class = AlbertConfig
    model_class = AlbertModel
    mlm_head_class = AlbertMLMHead
    output_class = AlbertPreTrainingOutput

    def add_pair_head(self, config: AlbertConfig) -> None:
        self.sop_dropout = nn.Dropout(config.classifier_dropout)
        self.sop_head = nn.Linear(config.d_model, 2)  # reads the pooled [CLS] vector
        init_bert_weights(self.sop_head, config.initializer_range)

    def pair_logits(self, pooled: torch.Tensor) -> torch.Tensor:
        return self.sop_head(self.sop_dropout(pooled))  # (B, D) -> (B, 2)


# %% [markdown]
# A forward pass through a small random ALBERT, with padding and both segments, and the usual
# checks: the shapes, the tied decoder, and that padding changes nothing at the real positions.

# %%
seed_everything(0)
small = AlbertConfig(
    vocab_size=99,
    embedding_size=16,
    d_model=32,
    n_layers=3,
    n_heads=4,
    d_ff=37,
    max_len=23,
)
model = AlbertForPreTraining(small).eval()
ids = torch.randint(5, 99, (2, 7))
segments = torch.tensor([[0, 0, 0, 0, 1, 1, 1], [0, 0, 0, 1, 1, 1, 1]])
# 3 [PAD] at the end
padded_ids = torch.cat([ids, torch.zeros(2, 3, dtype=torch.long)], dim=1)
padded_segments = torch.cat([segments, torch.ones(2, 3, dtype=torch.long)], dim=1)
mask = torch.cat([torch.ones(2, 7), torch.zeros(2, 3)], dim=1).long()
with torch.no_grad():
    out = model(ids, segments)
    out_padded = model(padded_ids, padded_segments, mask)
print(
    f"mlm_logits {tuple(out.mlm_logits.shape)}, sop_logits "
    f"{tuple(out.sop_logits.shape)}; {count_parameters(model):,} parameters"
)
# (V, E), tied
assert model.mlm_head.decoder.weight is model.bert.embeddings.token_embeddings.weight
assert out.mlm_logits.shape == (2, 7, 99) and out.sop_logits.shape == (2, 2)
assert torch.allclose(out.mlm_logits, out_padded.mlm_logits[:, :7], atol=1e-5)
assert torch.allclose(out.sop_logits, out_padded.sop_logits, atol=1e-5)

# %% [markdown]
# Saving and loading go through chapter 8's `save_model` and `load_model`, which find ALBERT's
# classes by name in chapter 8's table `MODEL_CLASS_MODULES` and build them from
# `tinybert.models.albert_heads`. This page defined the same classes a second time, outside the
# package, and `save_model` refuses a class that `load_model` would not rebuild, so the cell copies
# the weights into the package's `AlbertForPreTraining` first. The shared layer is stored once.

# %%
from tinybert.models.registry import load_model, save_model
from tinybert.models import albert, albert_heads

# the package's class, which load_model builds for "AlbertForPreTraining", with the
# weights of the model above
packaged = albert_heads.AlbertForPreTraining(albert.AlbertConfig(**small.to_dict()))
packaged.load_state_dict(model.state_dict())
with tempfile.TemporaryDirectory() as directory:
    save_model(packaged, directory)
    loaded = load_model(directory)
assert type(loaded) is albert_heads.AlbertForPreTraining
with torch.no_grad():
    assert torch.equal(loaded(ids, segments).mlm_logits, out.mlm_logits)
print(
    f"reloaded a {type(loaded).__name__} with "
    f"{type(loaded.config).__name__}(embedding_size={loaded.config.embedding_size}, "
    f"d_model={loaded.config.d_model}); same logits"
)

# %% [markdown]
# Fine-tuning needs nothing new either. The heads of {doc}`10_finetuning` read only an encoder's
# `last_hidden_state`, its `pooler_output` and `config.d_model`, and an `AlbertModel` has all three:

# %%
from tinybert.finetuning.heads import SequenceClassifier

classifier = SequenceClassifier(AlbertModel(small), n_labels=3).eval()
with torch.no_grad():
    print(
        "sentence classifier on ALBERT:",
        tuple(classifier(ids, segments).logits.shape),
        "logits",
    )

# %% [markdown]
# (sec-albert-convert)=
# ## Converting to and from Hugging Face
#
# Hugging Face's ALBERT has its own names for everything: `hidden_size`, `num_hidden_groups`,
# `albert_layer_groups.0.albert_layers.0.ffn` and so on. The converter reuses chapter 8's machinery:
# `bert_config_from_hf` reads the fields ALBERT shares with BERT (Hugging Face names them the same
# way in both configurations), `bert_encoder_names` gives the names of the three tables and their
# LayerNorm, and `register_family` teaches `from_hf` and `to_hf` the three classes, copying the
# tensors with `load_renamed`, which refuses any conversion that leaves a tensor out. The
# converter lives in its own small module, `tinybert.models.convert_albert`, as chapter 8's lives in
# `tinybert.models.convert`; import it once before converting an ALBERT.

# %% tags=["export:models.convert_albert"]
from __future__ import annotations

from torch import nn

from tinybert.models.convert import register_family
from tinybert.models.convert_names import (
    ACTIVATIONS_TO_HF,
    BERT_CONFIG_NAMES,
    bert_config_from_hf,
    bert_encoder_names,
)
from tinybert.models.albert import AlbertConfig, AlbertModel
from tinybert.models.albert_heads import AlbertForMaskedLM, AlbertForPreTraining


# ALBERT's four fields -> Hugging Face's (BERT's: BERT_CONFIG_NAMES)
_ALBERT_CONFIG_NAMES = {
    "embedding_size": "embedding_size",
    "n_groups": "num_hidden_groups",
    "inner_group_num": "inner_group_num",
    "classifier_dropout": "classifier_dropout_prob",
}


def albert_config_from_hf(hf_config) -> AlbertConfig:
    """Hugging Face's AlbertConfig -> ours: BERT's fields (same names in HF) plus
    ALBERT's four."""
    shared = bert_config_from_hf(hf_config).to_dict()
    own = {ours: getattr(hf_config, hf) for ours, hf in _ALBERT_CONFIG_NAMES.items()}
    return AlbertConfig(**shared, **own)


def albert_config_to_hf(config: AlbertConfig):
    """Our AlbertConfig -> transformers.AlbertConfig."""
    import transformers

    if config.activation not in ACTIVATIONS_TO_HF:
        raise ValueError(
            f"Hugging Face's ALBERT has no activation {config.activation!r}"
        )
    hidden_act = (
        "gelu_new"
        if config.activation == "gelu_tanh"
        else ACTIVATIONS_TO_HF[config.activation]
    )
    names = {**BERT_CONFIG_NAMES, **_ALBERT_CONFIG_NAMES}
    fields = {hf: getattr(config, ours) for ours, hf in names.items()}
    return transformers.AlbertConfig(**fields, hidden_act=hidden_act)


_LAYER_NAMES = [
    ("attention.query", "attention.query"),
    ("attention.key", "attention.key"),
    ("attention.value", "attention.value"),
    ("attention.output", "attention.dense"),
    ("attention_norm", "attention.LayerNorm"),
    ("feed_forward.expand", "ffn"),
    ("feed_forward.contract", "ffn_output"),
    ("feed_forward_norm", "full_layer_layer_norm"),
]


def albert_weight_names(model: nn.Module) -> dict[str, str]:
    """Every tensor name of our AlbertModel / AlbertForMaskedLM / AlbertForPreTraining
    -> Hugging Face's."""
    base = model if isinstance(model, AlbertModel) else model.bert
    # our encoder is .bert (as in BERT), Hugging Face's .albert
    ours, theirs = ("", "") if base is model else ("bert.", "albert.")
    c = model.config
    # the three tables and their LayerNorm
    names = bert_encoder_names(0, ours, theirs, pooler=False)
    pairs = [("embeddings.projection", "encoder.embedding_hidden_mapping_in")]
    for g in range(c.n_groups):
        for i in range(c.inner_group_num):
            pairs += [
                (
                    f"encoder.groups.{g}.{i}.{ours}",
                    (f"encoder.albert_layer_groups.{g}.albert_layers.{i}.{theirs}"),
                )
                for ours, theirs in _LAYER_NAMES
            ]
    if base.pooler is not None:
        pairs.append(("pooler.dense", "pooler"))
    names |= {
        f"{ours}{mine}.{w}": f"{theirs}{hf}.{w}"
        for mine, hf in pairs
        for w in ("weight", "bias")
    }
    # the MLM head; its decoder weight is tied
    if base is not model:
        names |= {
            f"mlm_head.{ours}.{w}": f"predictions.{theirs}.{w}"
            for ours, theirs in [("dense", "dense"), ("norm", "LayerNorm")]
            for w in ("weight", "bias")
        }
        names["mlm_head.decoder.bias"] = "predictions.bias"
    if isinstance(model, AlbertForPreTraining):
        names |= {
            f"sop_head.{w}": f"sop_classifier.classifier.{w}"
            for w in ("weight", "bias")
        }
    return names


register_family(
    (AlbertModel, AlbertForMaskedLM, AlbertForPreTraining),
    albert_config_from_hf,
    albert_config_to_hf,
    albert_weight_names,
    pooled=AlbertModel,
)

# %% [markdown]
# The parity check follows chapter 8's: a Hugging Face `AlbertForPreTraining` built from a tiny
# configuration with odd sizes and $E \ne D$ (nothing is downloaded), every parameter moved off
# its initial value so that a misplaced bias or LayerNorm cannot hide, a batch with padding and
# both segments, and the comparison at the real positions.

# %%
from tinybert.models.convert import from_hf, to_hf
from tinybert.models.parity import parity_report, round_trip_tensors

seed_everything(5)
hf_config = transformers.AlbertConfig(
    vocab_size=99,
    embedding_size=24,
    hidden_size=32,
    num_attention_heads=4,
    num_hidden_layers=3,
    intermediate_size=37,
    max_position_embeddings=23,
)
hf_model = transformers.AlbertForPreTraining(hf_config).eval()
with torch.no_grad():
    for p in hf_model.parameters():
        p.add_(0.1 * torch.randn_like(p))
tiny = from_hf(hf_model)
print(
    f"{type(hf_model).__name__} ({hf_config.hidden_act}) -> "
    f"{type(tiny).__module__}.{type(tiny).__name__} (activation "
    f"{tiny.config.activation!r}, E={tiny.config.embedding_size}, "
    f"D={tiny.config.d_model})"
)

B_, T_ = 13, 7
tiny_ids = torch.randint(1, 99, (B_, T_))
# A A A A B B B
tiny_segments = (torch.arange(T_) >= 4).long().expand(B_, T_)
lengths = torch.randint(2, T_ + 1, (B_,))
# (B, T) 1 = real token
tiny_mask = (torch.arange(T_)[None, :] < lengths[:, None]).long()
tiny_labels = torch.where((torch.rand(B_, T_) < 0.3) & (tiny_mask == 1), tiny_ids, -100)
# at least one label
tiny_labels[0, 0] = tiny_ids[0, 0]
tiny_sop = torch.randint(0, 2, (B_,))
with torch.no_grad():
    theirs_base = hf_model.albert(
        input_ids=tiny_ids, token_type_ids=tiny_segments, attention_mask=tiny_mask
    )
    theirs = hf_model(
        input_ids=tiny_ids,
        token_type_ids=tiny_segments,
        attention_mask=tiny_mask,
        labels=tiny_labels,
        sentence_order_label=tiny_sop,
    )
    mine_base = tiny.bert(tiny_ids, tiny_segments, tiny_mask)
    mine = tiny(tiny_ids, tiny_segments, tiny_mask)
    mine_loss = tiny(
        tiny_ids, tiny_segments, tiny_mask, mlm_labels=tiny_labels, pair_labels=tiny_sop
    ).loss
real = tiny_mask.bool()
parity = {
    "last hidden state": (
        mine_base.last_hidden_state[real] - theirs_base.last_hidden_state[real]
    )
    .abs()
    .max(),
    "pooler output": (mine_base.pooler_output - theirs_base.pooler_output).abs().max(),
    "MLM logits": (mine.mlm_logits[real] - theirs.prediction_logits[real]).abs().max(),
    "SOP logits": (mine.sop_logits - theirs.sop_logits).abs().max(),
    "loss (MLM + SOP)": (mine_loss - theirs.loss).abs(),
}
parity_report(parity)

# %% [markdown]
# Back again, every tensor must come out bit for bit, and both sides must keep the decoder tied to
# the token table:

# %%
n_tensors = round_trip_tensors(hf_model, tiny)
back = to_hf(tiny)
assert back.predictions.decoder.weight is back.albert.embeddings.word_embeddings.weight
names = albert_weight_names(tiny)
print(
    f"{n_tensors} Hugging Face tensors reproduced exactly; {len(names)} names in "
    f"the table, e.g."
)
for ours_name in [
    "bert.embeddings.projection.weight",
    "bert.encoder.groups.0.0.attention.output.weight",
    "bert.encoder.groups.0.0.feed_forward_norm.weight",
    "mlm_head.dense.weight",
    "sop_head.weight",
]:
    print(f"  {ours_name:<50} <-> {names[ours_name]}")


# %% [markdown]
# With an internet connection, `transformers.AlbertForMaskedLM.from_pretrained("albert/albert-base-v2")`
# downloads the released weights (the whole model has fewer parameters than BERT-base's embedding
# tables alone, as the next section counts) and `from_hf` turns them into our `AlbertForMaskedLM`. ALBERT's tokenizer is a SentencePiece
# unigram model, the kind {ref}`sec-tok-unigram` builds and trains from scratch (ALBERT's own also
# lower-cases and normalises the text first); Hugging Face's `AlbertTokenizer` produces the ids.
#
# (sec-albert-sizes)=
# ## Where the 90% comes from
#
# Now the claim of Ozdemir's slides. The cell builds BERT and ALBERT of the same published sizes on
# the `meta` device (shapes without memory) and counts the parameters of each part: the embeddings
# (for ALBERT including the projection), the encoder, and the pooler. It also builds Hugging Face's
# `AlbertModel` from the same configurations and checks that the totals agree to the last
# parameter. The course's `bert-mini` and `albert-mini` come last.

# %%
def parts(model: nn.Module) -> dict[str, int]:
    return {
        "embeddings": count_parameters(model.embeddings),
        "encoder": count_parameters(model.encoder),
        "pooler": count_parameters(model.pooler),
    }


pairs_to_compare = [
    ("bert-base-uncased", "albert-base-v2"),
    ("bert-large-uncased", "albert-large-v2"),
    ("bert-mini", "albert-mini"),
]
counts = {}
with torch.device("meta"):
    for bert_name, albert_name in pairs_to_compare:
        albert_config = AlbertConfig.preset(albert_name)
        ours = AlbertModel(albert_config)
        hf_count = count_parameters(
            transformers.AlbertModel(albert_config_to_hf(albert_config))
        )
        assert count_parameters(ours) == hf_count, (
            albert_name,
            count_parameters(ours),
            hf_count,
        )
        counts[bert_name, albert_name] = (
            parts(BertModel(BertConfig.preset(bert_name))),
            parts(ours),
        )
    xxlarge = count_parameters(AlbertModel(AlbertConfig.preset("albert-xxlarge-v2")))

print(f"{'BERT vs ALBERT':<34} {'part':<11} {'BERT':>12} {'ALBERT':>12} {'fewer':>7}")
for (bert_name, albert_name), (bert_parts, albert_parts) in counts.items():
    for i, part in enumerate([*bert_parts, "total"]):
        b_ = sum(bert_parts.values()) if part == "total" else bert_parts[part]
        a_ = sum(albert_parts.values()) if part == "total" else albert_parts[part]
        label = f"{bert_name} vs {albert_name}" if i == 0 else ""
        print(f"{label:<34} {part:<11} {b_:>12,} {a_:>12,} {1 - a_ / b_:>7.1%}")
print(f"albert-xxlarge-v2 (D = 4096): {xxlarge:,} parameters")

totals = {key: (sum(b.values()), sum(a.values())) for key, (b, a) in counts.items()}
reduction = {key: 1 - a / b for key, (b, a) in totals.items()}
base_key, large_key, mini_key = list(counts)
# the slides' 12M, 18M
assert (
    round(totals[base_key][1] / 1e6) == 12 and round(totals[large_key][1] / 1e6) == 18
)
assert (
    0.85 < reduction[base_key] < 0.95
    and reduction[large_key] > reduction[base_key] > reduction[mini_key]
)
# the encoder saves more than the embeddings
for b, a in counts.values():
    assert b["encoder"] - a["encoder"] > b["embeddings"] - a["embeddings"]
# albert-xxlarge-v2 is bigger than BERT-base
assert xxlarge > totals[base_key][0]

# %% [markdown]
# The totals of the released configurations round to Ozdemir's 12M and 18M, and Hugging Face's
# `AlbertModel` has exactly as many. The reduction is about 90% for the base size and larger for
# the large one, and the table shows that the two changes do different work. The encoder shrinks by
# a factor of $N$, since $N$ layers become one: that is most of the saving, and it grows with depth.
# The embeddings shrink by the ratio of widths, most of it in the token table; the vocabulary also
# differs a little (30,000 SentencePiece tokens against 30,522 WordPiece ones), which accounts for a
# small part. The pooler is the same $D \times D$ layer in both.
#
# At the course's scale the picture changes. `bert-mini` has only 4 layers, so sharing saves a
# factor of 4 in the encoder, not 12 or 24, and $E = 128$ is half of $D = 256$, so the factorised
# table saves about half. The reduction in the last row is correspondingly smaller: ALBERT's
# savings are a property of *large* models.
#
# Two cautions keep the 90% in proportion. First, parameters are not accuracy: in the paper
# ALBERT-base and ALBERT-large score *below* BERT-base and BERT-large of the same widths. Only the
# wider configurations overtake BERT-large: ALBERT-xlarge ($D = 2048$) narrowly, on the average of
# the paper's tasks, and ALBERT-xxlarge ($D = 4096$) clearly, on every task, with the parameter
# count printed above for `albert-xxlarge-v2`, more than BERT-base {cite}`lan2020albert`. (The
# paper reports its first release of the models; the `-v2` checkpoints, with the same sizes,
# were released later.) Second, parameters are not computation,
# which the next section measures.
#
# (sec-albert-speed)=
# ### Fewer parameters, the same computation
#
# A shared layer applied $N$ times costs $N$ layers of arithmetic: sharing saves memory for
# weights, gradients and optimizer state, and makes the model cheaper to store and to send between
# machines, but it makes no forward pass faster. The factorised embeddings add an $E \times D$
# product per token, and the MLM head's decoder gets cheaper ($V \times E$ instead of $V \times D$).
# The cell times the forward pass of `bert-mini` and `albert-mini` (which has the same $D$, $N$,
# $H$ and $F$), alternating so that both see the same machine load. In quick mode the batch is
# tiny and the timings mostly measure overhead.

# %%
seed_everything(1)
bert_mini = BertModel(BertConfig.preset("bert-mini")).eval()
albert_mini = AlbertModel(AlbertConfig.preset("albert-mini")).eval()
batch_size, seq_len = pick(quick=(1, 16), full=(16, 128))
speed_ids = torch.randint(5, 8192, (batch_size, seq_len))
times = {"bert-mini": [], "albert-mini": []}
with torch.inference_mode():
    # the first round warms up
    for _ in range(pick(quick=2, full=6)):
        for name, m in [("bert-mini", bert_mini), ("albert-mini", albert_mini)]:
            start = time.perf_counter()
            m(speed_ids)
            times[name].append(time.perf_counter() - start)
median = {name: statistics.median(ts[1:]) for name, ts in times.items()}
for name, m in [("bert-mini", bert_mini), ("albert-mini", albert_mini)]:
    print(
        f"{name:<12} {count_parameters(m):>10,} parameters, forward "
        f"{median[name] * 1e3:7.1f} ms for a ({batch_size}, {seq_len}) batch"
    )
print(
    f"ALBERT / BERT: "
    f"{count_parameters(albert_mini) / count_parameters(bert_mini):.2f} of the "
    f"parameters, {median['albert-mini'] / median['bert-mini']:.2f} of the time"
)

# %% [markdown]
# The parameters drop by the factor in the table, while the time should stay close to BERT's; on
# a busy machine or a tiny batch the measured ratio scatters around 1. Ozdemir's "1.7x faster"
# for ALBERT-large is the paper's *training throughput* against BERT-large on many accelerators,
# where fewer parameters also mean less data to move between them {cite}`lan2020albert`; per
# token, a shared layer costs as much arithmetic as an unshared one (an exercise at the end of
# the chapter counts it).
#
# (sec-albert-sop)=
# ## Sentence-order prediction
#
# {doc}`09_pretraining` trained BERT's pooled `[CLS]` vector to tell whether segment B followed
# segment A, with negatives taken from *other documents*. Later work found the task of little use:
# RoBERTa {cite}`liu2019roberta` dropped it without loss. ALBERT's explanation {cite}`lan2020albert`
# is that the task mixes two questions, *are A and B about the same thing?* (topic) and *does B
# continue A?* (coherence), and that the first is much easier and already learned by the masked
# language model: a random segment from another article is usually about something else, so
# word overlap alone gives most NotNext pairs away, as {ref}`sec-albert-experiment` measures.
#
# Sentence-order prediction removes the topic cue. Both classes are built from *two consecutive
# segments of the same document*; a positive keeps their order, a negative swaps them. Ozdemir's
# slides put it as: "take two consecutive parts from the same document as a positive class; swap the
# order and use that as a negative example". Topic and vocabulary are the same in both classes; only
# discourse (what is introduced first, what refers back to what) tells them apart.
#
# The sampler plugs into chapter 9's pipeline: it returns chapter 9's `SegmentPair`s, so
# `make_examples(documents, special, max_len, generator, sample_pairs=sample_sop_pairs)` packs the
# documents into segments, samples sentence-order pairs instead of NSP's, and encodes each as
# `[CLS] A [SEP] B [SEP]` in a `PretrainingExample` that `PretrainingBatches` can batch and mask. The pair's label sits in the field chapter 9 calls `pair_label`: 0 means B follows A
# in the text in both tasks.

# %% tags=["export:pretraining.sentence_order"]
from __future__ import annotations

from collections.abc import Sequence

import torch

from tinybert.pretraining.pairs import SegmentPair


def sample_sop_pairs(
    documents: Sequence[Sequence[list[int]]],
    generator: torch.Generator,
    *,
    p_in_order: float = 0.5,
) -> list[SegmentPair]:
    """One pair for every two consecutive segments of a document, for
    sentence-order prediction.

    With probability ``p_in_order`` the pair keeps the text's order (label 0, as NSP's
    IsNext); otherwise the same two segments are swapped (label 1). Both come from one
    document, so topic and vocabulary cannot tell the classes apart. Every draw comes
    from ``generator``.
    """
    if not 0.0 <= p_in_order <= 1.0:
        raise ValueError(
            f"p_in_order: expected a probability in [0, 1], got {p_in_order!r}"
        )
    if not any(len(segments) >= 2 for segments in documents):
        raise ValueError(
            f"sentence-order prediction needs a document with at least "
            f"two segments; got {len(documents)} documents "
            f"with at most one"
        )
    pairs = []
    for segments in documents:
        # consecutive segments (i, i + 1)
        for first, second in zip(segments, segments[1:]):
            if float(torch.rand(1, generator=generator)) < p_in_order:
                pairs.append(SegmentPair(first, second, 0))  # in order
            else:
                pairs.append(SegmentPair(second, first, 1))  # swapped
    return pairs


# %% [markdown]
# The pairs of a toy document of four one-token segments, and the balance of the classes on many:

# %%
from tinybert.pretraining.objective import seeded_generator

# the middle document has one segment
toy = [[[10], [11], [12], [13]], [[20]], [[30], [31]]]
for pair in sample_sop_pairs(toy, seeded_generator(4, "toy")):
    print(
        f"A = {pair.a}, B = {pair.b}, label {pair.pair_label} "
        f"({'in order' if pair.pair_label == 0 else 'swapped'})"
    )
many = sample_sop_pairs([[[i] for i in range(1000)]] * 5, seeded_generator(0, "many"))
print(f"{len(many)} pairs, {sum(p.pair_label for p in many) / len(many):.1%} swapped")
assert abs(sum(p.pair_label for p in many) / len(many) - 0.5) < 0.03

# %% [markdown]
# {numref}`fig-sop-nsp` sets the two tasks side by side: the same head, the same input layout,
# and negatives made in two different ways.

# %% mystnb={"figure": {"caption": "Next-sentence prediction (left) against sentence-order prediction (right). Both read `[CLS] A [SEP] B [SEP]` and classify the pooled `[CLS]` vector with one linear layer (the width is that of `albert_base`). NSP's negative takes B from another document, which its topic gives away; SOP's negative is the same two consecutive segments in swapped order, so only their order tells the classes apart.", "name": "fig-sop-nsp"}, "image": {"alt": "Two panels. Left, next-sentence prediction (BERT): a document with segments 1 to 4 and another document with segments 1 to 3; the input [CLS] segment 2 [SEP] segment 3 [SEP] has label 0, IsNext; the input [CLS] segment 2 [SEP] a segment of the other document [SEP] has label 1, NotNext; a note says the random segment's topic gives it away. Right, sentence-order prediction (ALBERT): one document with segments 1 to 4; [CLS] segment 2 [SEP] segment 3 [SEP] has label 0, in order; [CLS] segment 3 [SEP] segment 2 [SEP] has label 1, swapped; only the order tells them apart. At the bottom: both use the pooled [CLS] vector and a linear layer from D to 2."}} tags=["diagram", "hide-input"]
from tinybert.diagrams import sop_nsp_diagram

sop_nsp_diagram(albert_base)

# %% [markdown]
# (sec-albert-experiment)=
# ## What gives NSP away, and what SOP leaves
#
# The paper's ablation {cite}`lan2020albert` (its Table 5) pretrained the same ALBERT-base three
# ways and tested each model's sentence-pair head on both tasks. The NSP-trained head solved NSP
# (90.5%) but scored at chance on SOP (52.0%); the SOP-trained head solved SOP (86.5%) and did
# fairly on NSP as well (78.9%). Training heads like these takes far more than a chapter's budget:
# a tiny ALBERT pretrained here for a few CPU minutes does not get past the word frequencies, and
# its pair heads stay at chance on both tasks, whichever objective trained them. What we *can*
# measure on real pairs is the claim that explains the paper's table: NSP can be solved from the
# topic alone, and SOP cannot. We test it with two rules that read no model at all.
#
# The data is chapter 9's corpus (WikiText-2 articles and Gutenberg novels) tokenized with the
# vocabulary of the course's `bert-mini` checkpoint, in sequences of at most 64 tokens, so that
# segments hold up to 30 tokens (one or two sentences). The test pairs come from WikiText-2's test
# articles, every pair of consecutive segments once for each task; the pairs of the training
# articles only fit the rules' settings.

# %%
from collections import Counter

from tinybert.training.inputs import SpecialTokens
from tinybert.pretraining.examples import make_examples
from tinybert.models.course_checkpoint import shipped_checkpoint
from tinybert.pretraining.documents import course_documents, tokenize_documents
from tinybert.tokenizers.wordpiece import WordPieceTokenizer

tokenizer = WordPieceTokenizer.from_file(
    shipped_checkpoint() / "vocab.txt", lowercase=True
)
special = SpecialTokens.from_vocab(tokenizer.vocab)
max_len = 64
start = time.perf_counter()
documents = {
    "training": tokenize_documents(
        course_documents("train", max_documents=pick(quick=3, full=60)), tokenizer
    ),
    "test": tokenize_documents(
        course_documents("heldout", max_documents=pick(quick=2, full=None)), tokenizer
    ),
}
pair_sets = {}
for split, docs in documents.items():
    pair_sets[split] = {
        "NSP": make_examples(docs, special, max_len, seeded_generator(0, split, "nsp")),
        "SOP": make_examples(
            docs,
            special,
            max_len,
            seeded_generator(0, split, "sop"),
            sample_pairs=sample_sop_pairs,
        ),
    }
    print(
        f"{split}: {len(docs)} documents, {len(pair_sets[split]['NSP']):,} pairs per "
        f"task ({time.perf_counter() - start:.1f} s)"
    )
for task in ("NSP", "SOP"):
    e = pair_sets["test"][task][0]
    print(
        f"{task} example, label {e.pair_label}: "
        f"{' '.join(tokenizer.id_to_token[i] for i in e.input_ids)[:150]} ..."
    )
assert len(pair_sets["test"]["NSP"]) == len(pair_sets["test"]["SOP"])


# %% [markdown]
# The first rule looks at **topic**: how many of the rarer word pieces of the shorter segment
# also occur in the other (the 100 most frequent pieces of the training pairs, such as "the" and
# ",", are left out). A NotNext pair mixes two articles and should share fewer; the rule answers
# class 1 (NotNext, or swapped) when the overlap is below a threshold, the one that is most
# accurate on the training pairs of NSP. The second rule looks at **length**. `make_segments`
# packs sentences greedily, so every segment but the last of a document is nearly full, and the
# last one is often short; in a swapped pair the short segment comes first. The rule answers
# class 1 when A is shorter than B. A model could learn either shortcut, so each is a baseline
# that a model must beat before we may say it learned anything about order.

# %% mystnb={"image": {"alt": "Grouped bar chart of the test accuracy of two rules that read no model, word overlap and A shorter than B, on NSP and SOP pairs, with chance dotted; the overlap rule is well above chance on NSP and at chance on SOP, the length rule near chance."}}
def segments(example) -> tuple[list[int], list[int]]:
    """The ids of A and of B, without [CLS] and [SEP]."""
    a, b = [], []
    for i, segment in zip(example.input_ids, example.token_type_ids):
        if i not in (special.cls, special.sep):
            (b if segment else a).append(i)
    return a, b


counts = Counter(i for e in pair_sets["training"]["NSP"] for i in e.input_ids)
frequent = {i for i, _ in counts.most_common(100)}


def overlap(example) -> float:
    """Share of the shorter segment's rarer pieces that the other segment has too."""
    a, b = (set(ids) - frequent for ids in segments(example))
    return len(a & b) / max(1, min(len(a), len(b)))


def accuracy_of(rule, examples) -> float:
    """Accuracy of a rule that answers True for class 1 (NotNext / swapped)."""
    return sum(rule(e) == (e.pair_label == 1) for e in examples) / len(examples)


scores = [overlap(e) for e in pair_sets["training"]["NSP"]]
threshold = max(
    set(scores),
    key=lambda t: accuracy_of(lambda e: overlap(e) < t, pair_sets["training"]["NSP"]),
)
rules = {
    "topic (word overlap)": lambda e: overlap(e) < threshold,
    "length (A shorter)": lambda e: len(segments(e)[0]) < len(segments(e)[1]),
}
rule_accuracy = {
    (rule, task): accuracy_of(fn, pair_sets["test"][task])
    for rule, fn in rules.items()
    for task in ("NSP", "SOP")
}
n_test = len(pair_sets["test"]["NSP"])
print(f"overlap threshold {threshold:.3f}; test accuracy on {n_test:,} pairs per task:")
print(f"{'rule':<22}{'NSP':>8}{'SOP':>8}")
for rule in rules:
    print(
        f"{rule:<22}{rule_accuracy[rule, 'NSP']:>8.1%}"
        f"{rule_accuracy[rule, 'SOP']:>8.1%}"
    )

fig, ax = plt.subplots(figsize=(6, 2.8))
for offset, task in ((-0.2, "NSP"), (0.2, "SOP")):
    ax.bar(
        [i + offset for i in range(len(rules))],
        [100 * rule_accuracy[rule, task] for rule in rules],
        width=0.4,
        label=f"{task} pairs",
    )
ax.axhline(50, color="0.5", linestyle=":", label="chance")
ax.set_xticks(range(len(rules)), list(rules))
ax.set(ylabel="test accuracy (%)", ylim=(0, 100), title="Rules that read no model")
ax.legend(fontsize=8)
plt.show()


# %% [markdown]
# An accuracy on a few thousand pairs is uncertain by a point or so, so the next cell states each
# comparison with its standard error instead of leaving it to the eye, and asserts what the text
# below says:

# %%
def versus(label: str, p: float, q: float, n: int) -> bool:
    """Is accuracy p (on n pairs) above q by more than two standard errors of the
    difference? Prints the comparison and returns the verdict."""
    se = (p * (1 - p) / n + q * (1 - q) / n) ** 0.5
    clear = p - q > 2 * se
    print(
        f"{label:<38} {p:6.1%} vs {q:6.1%} (±{se:.1%}): clearly above? "
        f"{'yes' if clear else 'no'}"
    )
    return clear


topic_nsp = rule_accuracy["topic (word overlap)", "NSP"]
topic_sop = rule_accuracy["topic (word overlap)", "SOP"]
verdicts = {
    "topic on NSP": versus("topic rule on NSP, above chance", topic_nsp, 0.5, n_test),
    "topic on SOP": versus("topic rule on SOP, above chance", topic_sop, 0.5, n_test),
    "length on SOP": versus(
        "length rule on SOP, above chance",
        rule_accuracy["length (A shorter)", "SOP"],
        0.5,
        n_test,
    ),
}
if not is_quick():
    assert verdicts["topic on NSP"] and topic_nsp > 0.65  # topic gives NSP away
    assert abs(topic_sop - 0.5) < 0.03  # and says nothing about order
    # nor, on these pairs, does length
    assert abs(rule_accuracy["length (A shorter)", "SOP"] - 0.5) < 0.03


# %% [markdown]
# The topic rule, one threshold on one number, answers most NSP pairs correctly, clearly above
# chance, and on SOP pairs it is within three points of a coin: the two segments of a sentence-order pair
# share their vocabulary whichever comes first. (It is not exactly a coin, because a pair that is
# too long is truncated at its end, so a swapped pair loses other pieces than the same pair in
# order.) This is ALBERT's argument in numbers. A model trained on NSP can reach most of its
# accuracy by learning which words go together, which the masked language model learns anyway,
# and has no reason to learn how a text goes on; that is why the paper's NSP head is at chance on
# SOP. A model trained on SOP must learn order, and order also tells a continuation from a
# random segment, which is why its head does fairly on NSP too. The length rule finds no
# shortcut in these pairs either: it is within three points of chance, as the cell asserts, since
# the short last segment of a document is one segment among many, and which of two full segments
# is shorter says nothing about their order. A model trained on these pairs could get beyond
# chance only by learning how a text goes on.
#
# (sec-albert-summary)=
# ## Summary
#
# - ALBERT {cite}`lan2020albert` is BERT with two architectural changes and one change of
#   objective. Here it is built from chapter 8's parts, with only the differences written out: an
#   `AlbertConfig` that extends `BertConfig`, `BertEmbeddings` at width $E$ plus a projection,
#   one `BertLayer` applied $N$ times, `BertModel.forward`, and `BertMLMHead` with its first
#   layer mapping $D \to E$.
# - **Factorised embeddings**: a $V \times E$ table and an $E \times D$ projection instead of a
#   $V \times D$ table, a rank-$E$ approximation that saves most of the embedding parameters.
# - **Cross-layer sharing**: one set of layer weights for all depths (more generally $G$ groups),
#   dividing the encoder's parameters by $N$ but not its computation.
# - Our ALBERT and Hugging Face's compute the same function to $10^{-5}$, convert both ways bit
#   for bit, and have the same parameter counts: the released base and large sizes round to the
#   12M and 18M of Ozdemir's slides, about 90% and 95% fewer than BERT-base and BERT-large, most of it
#   from sharing. At the course's tiny scale the reduction is much smaller.
# - **Sentence-order prediction** takes two consecutive segments of one document and swaps them
#   half of the time, so that topic cannot give the answer away; `tinybert.pretraining.sentence_order` builds
#   such pairs on chapter 9's pipeline. On held-out pairs, a word-overlap rule that knows only
#   the topic answers most NSP pairs correctly and SOP pairs no better than chance.
#
# (sec-albert-exercises)=
# ## Exercises
#
# :::{exercise-start}
# :label: ex-albert-embedding-count
# :difficulty: 2
# :minutes: 20
# :kind: coding
# :::
# **Counting factorised embeddings.** Write `albert_embedding_parameters(vocab_size,
# embedding_size, d_model, max_len, type_vocab_size=2)` that returns the number of parameters of
# `AlbertEmbeddings` with that configuration, from a formula (do not build a model). Then find,
# for $V = 30{,}000$ and $D = 768$, the largest $E$ for which the token table and the projection
# together have fewer parameters than BERT's $V \times D$ table.
# :::{exercise-end}
# :::
#
# ::::{solution-start} ex-albert-embedding-count
# :class: dropdown
# ::::
# The three tables have $(V + P + S)E$ parameters, their LayerNorm $2E$ (a scale and a shift per
# feature), and the projection $ED + D$ with its bias. The factorisation pays off while
# $VE + ED + D < VD$, that is $E < D(V - 1)/(V + D)$: for $V = 30{,}000$ and $D = 768$,
# $E \le 748$. In practice $E$ is far smaller, since the point is a small table.

# %% tags=["solution"]
def albert_embedding_parameters(
    vocab_size, embedding_size, d_model, max_len, type_vocab_size=2
):
    ### BEGIN SOLUTION
    V, E, D = vocab_size, embedding_size, d_model
    tables = (V + max_len + type_vocab_size) * E
    norm = 2 * E
    projection = E * D + D
    return tables + norm + projection
    ### END SOLUTION


# %% [markdown]
# ::::{solution-end}
# ::::

# %% tags=["check"]
from tinybert.exercises.ch14 import check_albert_embedding_parameters

check_albert_embedding_parameters(albert_embedding_parameters)

# %% [markdown]
# :::{exercise-start}
# :label: ex-albert-shared-layers
# :difficulty: 2
# :minutes: 25
# :kind: coding
# :::
# **Cross-layer sharing.** Write a module `SharedLayers(layer, n_layers)` whose `forward(x,
# mask=None)` applies the one module `layer` (for instance a chapter 8 `BertLayer`) `n_layers` times,
# `x = layer(x, mask)`, and returns the result. Its parameters must be those of `layer` alone.
# Raise `ValueError` when `n_layers` is not a positive integer. The check also compares the gradient
# of the shared weights with the sum of the gradients of $N$ separate copies: why must they be equal?
# :::{exercise-end}
# :::
#
# ::::{solution-start} ex-albert-shared-layers
# :class: dropdown
# ::::
# Store the layer once (as a submodule, so that its parameters are registered) and loop. The
# gradient of a weight used at $N$ depths is the sum of the gradients it would receive as $N$
# separate copies, evaluated at the same values: the chain rule adds one term per use. That is
# why one update of a shared layer moves it by the sum of what the $N$ layers of an unshared model
# would each have moved.

# %% tags=["solution"]
from torch import nn


class SharedLayers(nn.Module):
    ### BEGIN SOLUTION
    def __init__(self, layer: nn.Module, n_layers: int):
        super().__init__()
        if isinstance(n_layers, bool) or not isinstance(n_layers, int) or n_layers < 1:
            raise ValueError(f"n_layers: expected a positive int, got {n_layers!r}")
        self.layer = layer
        self.n_layers = n_layers

    def forward(self, x, mask=None):
        for _ in range(self.n_layers):
            x = self.layer(x, mask)
        return x

    ### END SOLUTION


# %% [markdown]
# ::::{solution-end}
# ::::

# %% tags=["check"]
from tinybert.exercises.ch14 import check_shared_layers

check_shared_layers(SharedLayers)

# %% [markdown]
# :::{exercise-start}
# :label: ex-albert-sop-pairs
# :difficulty: 2
# :minutes: 25
# :kind: coding
# :::
# **Sentence-order pairs.** Write `sop_pairs(documents, generator)`. `documents` is a list of
# documents, each a list of segments (lists of token ids). For every two consecutive segments
# $s_i, s_{i+1}$ of a document, return a tuple `(a, b, label)`: with probability one half
# `(s_i, s_{i+1}, 0)`, otherwise `(s_{i+1}, s_i, 1)`. Draw every random number from `generator`,
# and raise `ValueError` when no document has two segments. Do not use `sample_sop_pairs`.
# :::{exercise-end}
# :::
#
# ::::{solution-start} ex-albert-sop-pairs
# :class: dropdown
# ::::
# One uniform draw per pair of neighbours decides the order. Unlike NSP, no other document is
# ever read, so a document with a single segment contributes nothing and a corpus of one long
# document is fine.

# %% tags=["solution"]
import torch


def sop_pairs(documents, generator):
    ### BEGIN SOLUTION
    if not any(len(segments) >= 2 for segments in documents):
        raise ValueError("need a document with at least two segments")
    pairs = []
    for segments in documents:
        for i in range(len(segments) - 1):
            if torch.rand(1, generator=generator).item() < 0.5:
                pairs.append((segments[i], segments[i + 1], 0))
            else:
                pairs.append((segments[i + 1], segments[i], 1))
    return pairs
    ### END SOLUTION


# %% [markdown]
# ::::{solution-end}
# ::::

# %% tags=["check"]
from tinybert.exercises.ch14 import check_sop_pairs

check_sop_pairs(sop_pairs)

# %% [markdown]
# :::{exercise-start}
# :label: ex-albert-flops
# :difficulty: 2
# :minutes: 25
# :kind: derivation
# :::
# **Parameters against arithmetic (pen and paper).** Count the multiply-adds per token of a
# forward pass through the layers of BERT-large ($N = 24$, $D = 1024$, $F = 4096$) and of
# ALBERT-large (the same, shared), ignoring the attention scores (they grow with the length) and
# the embeddings. Add the MLM head at one position: $D^2 + DV$ for BERT, $DE + EV$ for ALBERT
# ($V \approx 30{,}000$, $E = 128$). ALBERT-large has about 5% of BERT-large's parameters: what
# fraction of its arithmetic does it need? What *does* sharing make cheaper?
# :::{exercise-end}
# :::
#
# ::::{solution-start} ex-albert-flops
# :class: dropdown
# ::::
# **Rubric** (what a full answer contains): $4D^2 + 2DF$, about 12.6M multiply-adds per token and
# layer, about 302M for 24 layers in both models; about 32M against 4M for the MLM head; so the
# same arithmetic with about 5% of the parameters; sharing saves memory (weights, gradients,
# optimizer state) and communication.
#
# A layer costs $4D^2$ multiply-adds for the four attention projections and $2DF$ for the
# feed-forward block, about 12.6M per token per layer here, whether or not its weights are shared,
# and about 302M for the 24 layers of either model. The MLM head adds about 32M for BERT and 4M
# for ALBERT at each predicted position. Per token, ALBERT-large needs about the same arithmetic
# as BERT-large, in training and in inference alike. Sharing makes *memory* cheaper (the weights,
# their gradients and Adam's two moments: 4 numbers per parameter, 16 bytes in float32), and
# communication: in data-parallel training every step sends every gradient between machines, and
# ALBERT-large has about 19 times fewer to send. The cell computes the numbers.

# %%
N_, D_, F_, V_, E_ = 24, 1024, 4096, 30000, 128
per_layer = 4 * D_ * D_ + 2 * D_ * F_
print(
    f"one layer: {per_layer / 1e6:.1f}M multiply-adds per token; {N_} layers: "
    f"{N_ * per_layer / 1e6:.0f}M in both models"
)
print(
    f"MLM head per predicted token: BERT {(D_ * D_ + D_ * V_) / 1e6:.1f}M, ALBERT "
    f"{(D_ * E_ + E_ * V_) / 1e6:.1f}M"
)
with torch.device("meta"):
    sizes = {
        "BERT-large": count_parameters(
            BertModel(BertConfig.preset("bert-large-uncased"))
        ),
        "ALBERT-large": count_parameters(
            AlbertModel(AlbertConfig.preset("albert-large-v2"))
        ),
    }
for name, n in sizes.items():
    print(
        f"{name:<13} {n * 16 / 2**30:5.2f} GiB for weights, gradients and "
        f"Adam's moments"
    )
print(
    f"gradients to exchange per step: "
    f"{sizes['BERT-large'] / sizes['ALBERT-large']:.1f} times fewer for ALBERT-large"
)

# %% [markdown]
# ::::{solution-end}
# ::::
#
# :::{exercise-start}
# :label: ex-albert-shortcuts
# :difficulty: 3
# :minutes: 25
# :kind: concept
# :::
# **Shortcuts in pair tasks (pen and paper).** (a) An NSP-trained head reaches high accuracy on
# NSP pairs. Explain why it can still score about 50% on SOP pairs. (b) The chapter's length rule
# found no shortcut in our SOP pairs, but pairs built this way can have one. Where does it come
# from, and when would it show? Propose a change to how pairs are built that removes it, and say
# what the change costs. (c) Could a model solve SOP pairs from the segment embeddings
# alone, without reading the words?
# :::{exercise-end}
# :::
#
# ::::{solution-start} ex-albert-shortcuts
# :class: dropdown
# ::::
# **Rubric** (what a full answer contains): (a) an NSP head relies on topic, which both SOP
# classes share, so it predicts one class and scores about 50%; (b) the length shortcut from the
# shorter last segment, which shows when documents have few segments, a fix (drop it, or cut at a
# random sentence boundary) and what it costs;
# (c) no: the segment ids mark the order in the input, not in the text.
#
# (a) On NSP pairs the cheapest signal is topic: NotNext pairs mix two articles. On SOP pairs both
# segments always come from the same document, so the topic signal says "IsNext" for both classes;
# a head that relies on it predicts class 0 for nearly everything and is right half of the time.
#
# (b) It comes from the greedy packing: only the last segment of a document is cut short by the
# end of the text, and it is B in an in-order pair but A in a swapped one. How much that helps
# depends on how many pairs hold a last segment and on how much the other segments' lengths vary,
# which is why the chapter measures it rather than assuming it: in the chapter's pairs, documents
# of many segments, it does not help at all, but a corpus of short documents (two or three
# segments each) would hand the rule a large share of the pairs. To remove it, build segments whose lengths do not depend on their
# place in the document, for example by dropping a document's last, shorter segment before
# pairing, or by cutting a block of text at a random sentence boundary into A and B as ALBERT's
# own data pipeline does. The first wastes some text; the second makes A and B vary in length in
# both classes alike. The check is the one the chapter ran: the length rule's accuracy should be
# 50% up to sampling noise.
#
# (c) No. The segment ids are 0 for the first segment and 1 for the second in *both* classes; they
# say which segment is first in the input, not which came first in the text. Only the content, or
# a side channel such as length, can tell the order.
# ::::{solution-end}
# ::::
#
# (sec-albert-quiz)=
# ## Quiz
#
# Check what you took from this chapter. In a notebook, run the cell and answer with
# `quiz.check(question, answer)`, such as `quiz.check(1, "b")`; here, press *Check*.

# %% tags=["quiz", "remove-input"]
from tinybert.exercises.quiz import Quiz, choice, number

quiz = Quiz(
    "ch14",
    [
        choice(
            "ALBERT's factorised embedding replaces the V × D table by",
            [
                "a V × D table shared with the MLM head",
                "a V × E table, padded with zeros to width D",
                "a V × E table and an E × E projection",
                "a V × E table and an E × D projection",
            ],
            answer="d",
            explain="A rank-E approximation of the table.",
        ),
        number(
            "For V = 30,000, E = 128 and D = 768, the parameters of the table and the "
            "projection's weights, in millions? (2 decimals)",
            answer=(30_000 * 128 + 128 * 768) / 1e6,
            decimals=2,
            explain="Against 23.04 million for a V × D table.",
        ),
        choice(
            "Sharing one layer across N layers divides the encoder's parameters by N, "
            "and its computation by",
            ["N", "N²", "1", "√N"],
            answer="c",
            explain="1: the layer still runs N times.",
        ),
        choice(
            "Sentence-order prediction's negative examples are",
            [
                "segments of other documents",
                "two consecutive segments, swapped",
                "masked segments",
                "a segment paired with itself",
            ],
            answer="b",
            explain="Both segments share a topic, so topic cannot decide.",
        ),
        choice(
            "Why can a head trained on NSP score about 50% on SOP pairs?",
            [
                "it relies on topic, which both SOP classes share",
                "it guesses at random on pairs it has never seen",
                "SOP's negatives come from other documents, as NSP's do",
                "NSP and SOP number their two classes the other way round",
            ],
            answer="a",
            explain="Topic says 'IsNext' for both orders.",
        ),
        choice(
            "About how many parameters does the released ALBERT-base have?",
            ["18M", "110M", "12M", "235M"],
            answer="c",
            explain="18M is ALBERT-large.",
        ),
    ],
)
quiz
