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
#     module: models.roberta
# ---

# %% [markdown]
# (sec-roberta)=
# # RoBERTa
#
# A year after BERT, a team at Facebook AI retrained it with more care and reported that BERT had
# been "significantly undertrained" {cite}`liu2019roberta`. Their model, RoBERTa (a *Robustly
# optimized BERT approach*), has BERT's architecture, layer for layer. What changed is the recipe:
# the masks are drawn anew every time a sequence is used, the next-sentence task is gone and the
# inputs are long runs of consecutive sentences instead of pairs, the batches are much larger
# (with a larger learning rate), the vocabulary is byte-level BPE, and there is ten times more
# text, seen for longer. With those changes alone, the same network matched or beat every model
# published after BERT on GLUE, SQuAD and RACE.
#
# For this course that is good news: a new model that needs almost no new code. This chapter
# shows each change as a small difference from {doc}`08_bert` and {doc}`09_pretraining`, and then
# measures on our own corpus what dynamic masking guards against.
#
# **What you will learn**
#
# - what RoBERTa changes and what it keeps, with the paper's evidence for each change;
# - the three small differences in the model itself (positions counted past the padding index,
#   one segment, $\varepsilon = 10^{-5}$), and a `RobertaModel` built from BERT's parts that
#   matches Hugging Face's to $10^{-5}$ and has its exact parameter count;
# - {term}`FULL-SENTENCES` packing, which replaces segment pairs, and dynamic masking, which replaces
#   masks fixed once when the data is written;
# - why larger batches go with larger learning rates, and how to get a large batch on a small
#   machine;
# - what byte-level BPE buys: no unknown tokens, for the price of a larger embedding table;
# - what static masks do to a model that sees its data many times, measured: it learns its own
#   blanks by heart, and a new mask every time prevents it.
#
# **Uses.** From {doc}`08_bert`: `BertConfig` and its `BERT_PRESETS`, `BertEmbeddings`, `BertModel`, `BertForMaskedLM`,
# and `BertForPreTraining`; `register_family`, `from_hf` and `to_hf` from
# `tinybert.models.convert`; `bert_encoder_names`, the config converters `bert_config_from_hf` and
# `bert_config_to_hf` and their table of field names `BERT_CONFIG_NAMES` from
# `tinybert.models.convert_names`; `parity_report` and `round_trip_tensors` from
# `tinybert.models.parity`;
# the ignored-label value `IGNORE_INDEX`. From {doc}`09_pretraining`: `mask_tokens` and
# `seeded_generator` (`tinybert.pretraining.objective`), `SpecialTokens` (`tinybert.training.inputs`), `PretrainingExample`,
# `PretrainingBatches` and `make_examples` (`tinybert.pretraining.examples`), the course
# checkpoint's vocabulary (`shipped_path` from `tinybert.shipped`), the
# course corpus (`course_documents`, `tokenize_documents` and `vocabulary_texts` from
# `tinybert.pretraining.documents`), and
# `make_optimizer` and `linear_warmup_decay` (`tinybert.training.optim`). From {doc}`07_tokenization`: `WordPieceTokenizer` and
# `train_byte_level_bpe`. From {doc}`01_feedforward`: `count_parameters`.
# The model goes to `tinybert.models.roberta`, the data functions to `tinybert.pretraining.roberta_data`.
#
# (sec-roberta-setup)=
# ## Setup
#
# The first cell holds the imports of `tinybert.models.roberta`; the second, those of
# `tinybert.pretraining.roberta_data`; the third, those of the teaching code (`transformers` is needed only for
# the comparisons with Hugging Face's models).

# %% tags=["export"]
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from tinybert.models.convert import register_family
from tinybert.models.convert_names import (
    BERT_CONFIG_NAMES,
    bert_config_from_hf,
    bert_config_to_hf,
    bert_encoder_names,
)
from tinybert.models.bert import BERT_PRESETS, BertConfig, BertModel
from tinybert.models.bert_layers import BertEmbeddings
from tinybert.models.bert_heads import BertForMaskedLM

# %% tags=["export:pretraining.roberta_data"]
from __future__ import annotations

from collections.abc import Sequence

import torch

from tinybert.training.inputs import SpecialTokens
from tinybert.pretraining.objective import mask_tokens, seeded_generator
from tinybert.models.bert_heads import IGNORE_INDEX
from tinybert.pretraining.examples import PretrainingExample

# %%
import math
import time
import warnings
from dataclasses import fields

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
# (sec-roberta-changes)=
# ## What RoBERTa changes
#
# The RoBERTa paper {cite}`liu2019roberta` is a careful replication study. It retrains BERT-base
# with one change at a time, keeps what helps, and then combines everything in a large run.
# {ref}`Magnusson's lecture slides <sources-decks>` (Uppsala University, 2024) summarise the
# outcome in five points: dynamic instead of static masking, longer
# sequences, no next-sentence prediction, a larger vocabulary, and more data, seen for longer and in
# larger batches. In full:
#
# | | BERT {cite}`devlin2019bert` | RoBERTa {cite}`liu2019roberta` |
# |---|---|---|
# | masking | static: each sequence masked when the data is written (10 copies) | dynamic: a new mask every time a sequence is used |
# | input | two segments A and B, with NSP; 90% of steps at 128 tokens | one segment of consecutive sentences, up to 512 tokens, no NSP |
# | batch size, peak learning rate | 256 sequences, $10^{-4}$ | 8,000 sequences, a larger rate tuned with the batch size |
# | vocabulary | WordPiece, 30k (with `[UNK]`) | byte-level BPE, 50k (never an unknown token) |
# | data | 16 GB (BooksCorpus and Wikipedia) | 160 GB (adds news, web text and stories) |
# | model | 12 layers, $D = 768$, 12 heads (base) | the same, with small changes to embeddings and LayerNorm |
#
# The last row is why the model part of this chapter is short: a few changed defaults and one new
# rule for positions. Everything else RoBERTa changes is in the data and the training loop,
# and most of it, {doc}`09_pretraining` can already do. {numref}`fig-roberta`, after the
# configuration below, draws the same comparison from the two models' configurations.
#
# (sec-roberta-model)=
# ## The model: three small differences
#
# (sec-roberta-config)=
# ### The configuration
#
# A RoBERTa is a BERT with other defaults, so its configuration is a subclass of `BertConfig` that
# changes five of them, the values of the released `roberta-base`: a vocabulary of 50,265 tokens
# (GPT-2's byte-level BPE and RoBERTa's special tokens); 514 rows in the position table (why two more than 512 is the subject of the next
# section); one segment instead of two, since without NSP there is no sentence B; LayerNorm
# $\varepsilon = 10^{-5}$, PyTorch's default, which the fairseq library RoBERTa was trained with
# kept, instead of Google's $10^{-12}$; and the padding token at id 1, because fairseq's vocabulary starts with
# `<s>` (0), `<pad>` (1), `</s>` (2) and `<unk>` (3).

# %% tags=["export"]
ROBERTA_PRESETS = {
    # BERT's two published sizes, with RoBERTa's defaults for everything else
    "roberta-base": BERT_PRESETS["bert-base-uncased"],  # N=12, D=768, H=12
    "roberta-large": BERT_PRESETS["bert-large-uncased"],  # N=24, D=1024, H=16
}


@dataclass
class RobertaConfig(BertConfig):
    """BERT's configuration with the released roberta-base as defaults; every field
    means the same."""

    presets = ROBERTA_PRESETS
    model_name = "RoBERTa"

    # byte-level BPE: GPT-2's tokens and RoBERTa's special tokens
    vocab_size: int = 50265
    # position rows: 512 usable ones + pad_token_id + 1 that real tokens skip
    max_len: int = 514
    type_vocab_size: int = 1  # one segment: without NSP there is no sentence B
    layer_norm_eps: float = 1e-5  # fairseq's default (Google's BERT: 1e-12)
    # <s> = 0, <pad> = 1, </s> = 2, <unk> = 3 in fairseq's vocabulary
    pad_token_id: int = 1

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.max_len < self.pad_token_id + 2:
            raise ValueError(
                f"RobertaConfig: max_len = {self.max_len} leaves no "
                f"position for a real token (positions start at "
                f"pad_token_id + 1 = {self.pad_token_id + 1})"
            )

    @property
    def max_tokens(self) -> int:
        """The longest input: rows 0 .. pad_token_id of the position table are never
        used by real tokens."""
        return self.max_len - self.pad_token_id - 1


# %% [markdown]
# The whole difference between the two base models, field by field:

# %%
bert_base, roberta_base = (
    BertConfig.preset("bert-base-uncased"),
    RobertaConfig.preset("roberta-base"),
)
print(f"{'field':<16} {'bert-base-uncased':>18} {'roberta-base':>14}")
changed = []
for field in fields(BertConfig):
    a, b = getattr(bert_base, field.name), getattr(roberta_base, field.name)
    if a != b:
        changed.append(field.name)
        print(f"{field.name:<16} {a!s:>18} {b!s:>14}")
assert changed == [
    "vocab_size",
    "max_len",
    "type_vocab_size",
    "layer_norm_eps",
    "pad_token_id",
]
assert isinstance(roberta_base, BertConfig) and roberta_base.max_tokens == 512

# %% [markdown]
# {numref}`fig-roberta` puts the two side by side: the rows that come from the configurations
# are read from `bert_base` and `roberta_base`, and the filled boxes mark what RoBERTa changes.

# %% mystnb={"figure": {"caption": "BERT-base against RoBERTa-base, row by row; a filled box marks a change. The model rows (layers, vocabulary, segment table, positions, LayerNorm \u03b5) are read from `bert_base` and `roberta_base`; the last rows are the training recipe of {ref}`sec-roberta-changes`. The layers themselves are the same.", "name": "fig-roberta"}, "image": {"alt": "A two-column comparison, BERT on the left and RoBERTa on the right, one row per property. Layers: N = 12, D = 768, H = 12 in both. Vocabulary: WordPiece with V = 30,522 against byte-level BPE with V = 50,265. Input: [CLS] A [SEP] B [SEP] against <s> consecutive sentences </s>. Segment table: 2 rows against 1 row. Positions: 512 rows counted from 0 against 514 rows counted from 2, with the padding at 1. LayerNorm epsilon: 1e-12 against 1e-05. Objective: masked LM plus next sentence against masked LM only. Masking: static, once when the data is written, against dynamic, new at every use. Every RoBERTa box but the layers is filled, marking a change."}} tags=["diagram", "hide-input"]
from tinybert.diagrams import roberta_bert_diagram

roberta_bert_diagram(bert_base, roberta_base)


# %% [markdown]
# (sec-roberta-positions)=
# ### Positions that skip the padding
#
# BERT gives position $t$ to the $t$-th column of the batch, padding or not. RoBERTa inherits
# fairseq's rule: positions count the *real* tokens of each sequence, starting right after the
# padding id, and every padding token gets the padding id itself as its position,
#
# $$p_t = \begin{cases} \text{pad} + \#\{s \le t : w_s \ne \text{pad}\} & \text{if } w_t \ne \text{pad}, \\
# \text{pad} & \text{if } w_t = \text{pad}. \end{cases}$$
#
# With the padding id 1, the first real token has position 2, and row 1 of the position table is
# the padding row: it starts at zero and, as the `padding_idx` of the embedding, never receives a
# gradient. Row 0 is never used at all. That is why the table has 514 rows for inputs of at most
# 512 tokens. The rule is one line of cumulative sums; the embedding layer is BERT's, with that line
# in place of `torch.arange`:

# %% tags=["export"]
def roberta_position_ids(input_ids: torch.Tensor, pad_token_id: int) -> torch.Tensor:
    """Position of every token, counting real tokens only and starting at pad_token_id +
    1; padding gets pad_token_id. (B, T) -> (B, T); with pad 1: [[<s>, a, b, </s>,
    <pad>]] -> [[2, 3, 4, 5, 1]]."""
    real = (input_ids != pad_token_id).long()  # (B, T) 1 at real tokens
    return torch.cumsum(real, dim=1) * real + pad_token_id  # (B, T)


class RobertaEmbeddings(BertEmbeddings):
    """BertEmbeddings with roberta_position_ids in place of 0, 1, ..., T - 1 (the only
    difference)."""

    def __init__(self, config: RobertaConfig):
        super().__init__(config)
        self.pad_token_id = config.pad_token_id
        # the padding row: zero, never trained
        self.position_embeddings.padding_idx = config.pad_token_id

    def forward(
        self, input_ids: torch.Tensor, token_type_ids: torch.Tensor
    ) -> torch.Tensor:
        B, T = input_ids.shape
        usable = self.position_embeddings.num_embeddings - self.pad_token_id - 1
        if T > usable:
            raise ValueError(
                f"input_ids: RoBERTa reads at most max_len - pad_token_id "
                f"- 1 = {usable} tokens, got length {T}"
            )
        # (B, T)
        positions = roberta_position_ids(input_ids, self.pad_token_id)
        # (B, T, D)
        x = self.token_embeddings(input_ids) + self.segment_embeddings(token_type_ids)
        # (B, T, D), per row
        x = x + self.position_embeddings(positions)
        # (B, T, D)
        return self.dropout(self.norm(x))


# %% [markdown]
# A batch with one short sequence padded on the right and the same sequence padded on the *left*:

# %%
pad = 1
# <s> a b c </s> <pad> <pad>
right = torch.tensor([[0, 31, 32, 33, 2, pad, pad]])
# <pad> <pad> <s> a b c </s>
left = torch.tensor([[pad, pad, 0, 31, 32, 33, 2]])
for name, ids in [("right-padded", right), ("left-padded", left)]:
    print(
        f"{name:<13} ids {ids[0].tolist()}  positions "
        f"{roberta_position_ids(ids, pad)[0].tolist()}"
    )
assert roberta_position_ids(right, pad)[0].tolist() == [2, 3, 4, 5, 6, 1, 1]
assert roberta_position_ids(left, pad)[0].tolist() == [1, 1, 2, 3, 4, 5, 6]


# %% [markdown]
# Every real token keeps its position wherever the padding goes. In BERT, left padding shifts every
# position by the number of padding tokens and changes the output; in RoBERTa it changes nothing
# (padding is masked out of attention in both). Left padding is rare for encoders, but the same
# rule also makes a model's output independent of how much padding a batch happens to need. The
# check below uses the models of the next section.
#
# (sec-roberta-classes)=
# ### The models
#
# `RobertaModel` is `BertModel` with the new embedding layer. Chapter 8 left one place for such
# changes, the class attributes `config_class`, `embeddings_class` and `encoder_class`, which
# `BertModel`'s constructor builds from; a variant sets the ones that differ, and everything else
# (the input checks, the encoder, the pooler, the outputs) is inherited. `RobertaForMaskedLM` sets
# `model_class`, so BERT's MLM head goes over a `RobertaModel`, tied to the token table as in
# BERT, and it inherits the constructor and `forward`. RoBERTa has no NSP head, so there is no `ForPreTraining`
# class. The encoder keeps the attribute name `bert`, so that code written for
# `BertForMaskedLM` (the training loops and evaluations of {doc}`09_pretraining`, the heads of
# {doc}`10_finetuning`) works unchanged; only the converter uses Hugging Face's name, `roberta`.
# Both classes are in chapter 8's table of saved classes, `MODEL_CLASS_MODULES`, so `save_model`
# and `load_model` handle them with nothing to register.

# %% tags=["export"]
class RobertaModel(BertModel):
    """BertModel with RobertaEmbeddings; layers, pooler, input checks and outputs
    are BERT's."""

    config_class = RobertaConfig
    embeddings_class = RobertaEmbeddings


class RobertaForMaskedLM(BertForMaskedLM):
    """BertForMaskedLM over a RobertaModel: the same tied head and the same forward."""

    config_class = RobertaConfig
    # built as self.bert, so code for BertForMaskedLM works as is
    model_class = RobertaModel


# %% [markdown]
# The padding check promised above, on a small random model with a batch that pads the same
# sequence to the right and to the left. RoBERTa gives the same vectors at the real tokens; BERT
# with the same weights does not:

# %%
seed_everything(0)
tiny_config = RobertaConfig(
    vocab_size=99, d_model=32, n_layers=2, n_heads=4, d_ff=37, max_len=20
)
tiny_roberta = RobertaModel(tiny_config).eval()
tiny_bert = BertModel(BertConfig(**{**tiny_config.to_dict(), "max_len": 20})).eval()
# the very same weights
tiny_bert.load_state_dict(tiny_roberta.state_dict())
both = torch.cat([right, left])  # (2, 7)
# (2, 7) True at real tokens
mask = both != pad
with torch.no_grad():
    for name, model in [("RoBERTa", tiny_roberta), ("BERT", tiny_bert)]:
        h = model(both, attention_mask=mask).last_hidden_state  # (2, 7, D)
        gap = (h[0][mask[0]] - h[1][mask[1]]).abs().max().item()
        print(f"{name:<8} right- vs left-padded, real tokens: max difference {gap:.1e}")
        assert (gap < 1e-5) == (name == "RoBERTa")

# %% [markdown]
# (sec-roberta-sizes)=
# ### Sizes
#
# RoBERTa-base has the parameters of BERT-base plus a larger token table, two more position rows,
# and one fewer segment row. {ref}`Ozdemir's lecture slides <sources-decks>` put it at "15% more
# parameters". Counting on the `meta`
# device, ours against Hugging Face's `RobertaModel` built from the released configuration:

# %%
with torch.device("meta"):
    for name in ROBERTA_PRESETS:
        config = RobertaConfig.preset(name)
        ours_count = count_parameters(RobertaModel(config))
        hf_count = count_parameters(
            transformers.RobertaModel(
                transformers.RobertaConfig(
                    vocab_size=config.vocab_size,
                    hidden_size=config.d_model,
                    num_hidden_layers=config.n_layers,
                    num_attention_heads=config.n_heads,
                    intermediate_size=config.d_ff,
                    max_position_embeddings=514,
                    type_vocab_size=1,
                    layer_norm_eps=1e-5,
                )
            )
        )
        bert_name = name.replace("roberta", "bert") + "-uncased"
        bert_count = count_parameters(BertModel(BertConfig.preset(bert_name)))
        print(
            f"{name:<14} ours {ours_count:>12,}  Hugging Face {hf_count:>12,}  "
            f"{bert_name} {bert_count:>12,}  ({ours_count / bert_count - 1:+.1%})"
        )
        assert ours_count == hf_count
extra = (roberta_base.vocab_size - bert_base.vocab_size) * bert_base.d_model
print(
    f"the larger vocabulary alone: "
    f"{roberta_base.vocab_size - bert_base.vocab_size:,} more rows of "
    f"{bert_base.d_model} = {extra:,} parameters"
)


# %% [markdown]
# The slides' 15% is rounded: the count gives about 14% more for the base model (and about 6% for
# the large one, whose layers weigh more). The difference is almost entirely the vocabulary: 20
# thousand more rows of 768 numbers. The layers, where the computation happens, are identical, so
# RoBERTa-base costs BERT-base's time per token (apart from the larger output layer of the MLM
# head during pretraining).
#
# (sec-roberta-convert)=
# ### Converting to and from Hugging Face
#
# Hugging Face's RoBERTa has BERT's tensor names under the prefix `roberta.` and calls the MLM head
# `lm_head` (`lm_head.layer_norm`, `lm_head.bias`). The converter reuses chapter 8's table of
# encoder names, and chapter 8's `register_family` registers our two classes (copying through
# `load_renamed`, which refuses any tensor left over on either side), so that
# `tinybert.models.convert.from_hf` and `to_hf` handle them as soon as this module is imported. Its configuration is Hugging Face's `BertConfig` with the same fields,
# so we convert through chapter 8's functions.

# %% tags=["export"]
def roberta_config_from_hf(hf_config) -> RobertaConfig:
    """transformers.RobertaConfig -> ours (the same fields as BERT's, read by
    bert_config_from_hf)."""
    return RobertaConfig(**bert_config_from_hf(hf_config).to_dict())


def roberta_config_to_hf(config: RobertaConfig):
    """Our RobertaConfig -> transformers.RobertaConfig."""
    import transformers

    bert = bert_config_to_hf(config)  # checked, and in Hugging Face's names
    names = (*BERT_CONFIG_NAMES.values(), "hidden_act")
    return transformers.RobertaConfig(**{name: getattr(bert, name) for name in names})


def roberta_weight_names(model: nn.Module) -> dict[str, str]:
    """Every tensor name of our RobertaModel / RobertaForMaskedLM -> Hugging Face's."""
    if isinstance(model, RobertaModel):
        return bert_encoder_names(
            model.config.n_layers, pooler=model.pooler is not None
        )
    names = bert_encoder_names(model.config.n_layers, "bert.", "roberta.", pooler=False)
    names.update(
        {
            "mlm_head.dense.weight": "lm_head.dense.weight",
            "mlm_head.dense.bias": "lm_head.dense.bias",
            "mlm_head.norm.weight": "lm_head.layer_norm.weight",
            "mlm_head.norm.bias": "lm_head.layer_norm.bias",
            # decoder.weight: tied to the token table
            "mlm_head.decoder.bias": "lm_head.bias",
        }
    )
    return names


register_family(
    (RobertaModel, RobertaForMaskedLM),
    roberta_config_from_hf,
    roberta_config_to_hf,
    roberta_weight_names,
    pooled=RobertaModel,
)

# %% [markdown]
# The parity check follows chapter 8's: a small Hugging Face `RobertaForMaskedLM` with odd sizes,
# built from a configuration (nothing is downloaded), with noise added to every parameter so that
# no bias or LayerNorm sits at a value that would hide a mistake, and a batch with padding whose
# padded positions hold the padding id, as a RoBERTa tokenizer writes them.

# %%
from tinybert.models.convert import from_hf, to_hf
from tinybert.models.parity import parity_report, round_trip_tensors

seed_everything(1)
hf_config = transformers.RobertaConfig(
    vocab_size=99,
    hidden_size=32,
    num_attention_heads=4,
    num_hidden_layers=3,
    intermediate_size=37,
    max_position_embeddings=12,
    type_vocab_size=1,
    layer_norm_eps=1e-5,
)
hf_model = transformers.RobertaForMaskedLM(hf_config).eval()
with torch.no_grad():
    for p in hf_model.parameters():
        p.add_(0.1 * torch.randn_like(p))
ours = from_hf(hf_model)
B_, T_ = 13, 7
lengths = torch.randint(2, T_ + 1, (B_,))
# (B, T) True at real tokens
real = torch.arange(T_)[None, :] < lengths[:, None]
# padding holds <pad> = 1
ids = torch.randint(3, 99, (B_, T_)).masked_fill(~real, 1)
labels = torch.where((torch.rand(B_, T_) < 0.3) & real, ids, -100)
labels[0, 0] = ids[0, 0]
with torch.no_grad():
    theirs = hf_model(input_ids=ids, attention_mask=real.long(), labels=labels)
    mine = ours(ids, attention_mask=real)
    mine_loss = ours(ids, attention_mask=real, labels=labels).loss
    theirs_base = hf_model.roberta(
        input_ids=ids, attention_mask=real.long()
    ).last_hidden_state
    mine_base = ours.bert(ids, attention_mask=real).last_hidden_state
parity = {
    "last hidden state": (mine_base[real] - theirs_base[real]).abs().max(),
    "MLM logits": (mine.logits[real] - theirs.logits[real]).abs().max(),
    "MLM loss": (mine_loss - theirs.loss).abs(),
}
parity_report(parity)
n_tensors = round_trip_tensors(hf_model, ours)
print(f"to_hf(from_hf(model)): all {n_tensors} tensors reproduced exactly")

# %% [markdown]
# (sec-roberta-real)=
# ### Running the real roberta-base
#
# With an internet connection and `transformers` installed, the released weights and tokenizer
# files load into our classes. RoBERTa's special tokens are `<s>` (its `[CLS]`), `</s>` (its
# `[SEP]`), `<pad>` and `<mask>`; a single text is `<s> text </s>` and a pair is
# `<s> A </s></s> B </s>`. The book does not run this cell.
#
# ```python
# import torch
# from huggingface_hub import hf_hub_download
# from transformers import RobertaForMaskedLM as HFRobertaForMaskedLM
#
# import tinybert.models.roberta  # noqa: F401  (registers the converters)
# from tinybert.models.convert import from_hf
# from tinybert.tokenizers.byte_level import ByteLevelBPETokenizer
#
# model = from_hf(HFRobertaForMaskedLM.from_pretrained("roberta-base")).eval()   # about 500 MB
# tokenizer = ByteLevelBPETokenizer.from_files(hf_hub_download("roberta-base", "vocab.json"),
#                                              hf_hub_download("roberta-base", "merges.txt"))
# left, right = tokenizer.encode("Paris is the"), tokenizer.encode(" of France.")
# v = tokenizer.vocab
# ids = [v["<s>"], *left.ids, v["<mask>"], *right.ids, v["</s>"]]
# with torch.no_grad():
#     scores = model(torch.tensor([ids])).logits[0, 1 + len(left.ids)]          # (V,) at the <mask>
# print([tokenizer.decode([i]) for i in scores.topk(5).indices.tolist()])
# ```
#
# (sec-roberta-bpe)=
# ## Byte-level BPE
#
# BERT's WordPiece vocabulary is built over *characters*: a character it has never seen becomes
# `[UNK]`, and so does every word that contains one. RoBERTa uses GPT-2's {term}`byte-level BPE`
# {cite}`radford2019language` ({doc}`07_tokenization`): the base alphabet is the 256 possible
# bytes of UTF-8, and BPE merges are learned on top of them. Every string is a sequence of bytes,
# so every string can be encoded, and decoded back exactly. The cost is a larger vocabulary (50,000
# merges, so that common words are still single tokens), which we counted in {ref}`sec-roberta-sizes`.
# The paper found byte-level BPE slightly *worse* than a character-level vocabulary on some tasks,
# and kept it for its universality.
#
# The cell compares chapter 9's WordPiece vocabulary with a small byte-level BPE trained on a slice
# of the same corpus, on text that neither saw in training:

# %%
from tinybert.pretraining.documents import (
    course_documents,
    tokenize_documents,
    vocabulary_texts,
)
from tinybert.tokenizers.byte_level import train_byte_level_bpe
from tinybert.shipped import shipped_path
from tinybert.tokenizers.wordpiece import WordPieceTokenizer

# the first WikiText-2 validation articles
n_documents = pick(quick=4, full=30)
documents = course_documents("train", max_documents=n_documents)
# chapter 9's bert-mini vocabulary (an error naming the file if it is missing)
vocab_file = shipped_path("bert-mini", "vocab.txt")
wordpiece = WordPieceTokenizer.from_file(vocab_file, lowercase=True)
texts = vocabulary_texts(documents)[: pick(quick=2, full=8)]
byte_level = train_byte_level_bpe(texts, vocab_size=pick(quick=400, full=1000))
sample = "Zoë's café served crème brûlée 😋 for €5 — naïve, but ∑ delicious."
wp = wordpiece.encode(sample).tokens
bl = byte_level.encode(sample)
print(
    f"WordPiece ({len(wordpiece):,} tokens):      {len(wp)} pieces, "
    f"{wp.count('[UNK]')} [UNK]:",
    " ".join(wp),
)
print(
    f"byte-level BPE ({len(byte_level):,} tokens): {len(bl.ids)} pieces, decoded "
    f"back exactly: {byte_level.decode(bl.ids) == sample}"
)
print("  ", " ".join(bl.tokens))
assert byte_level.decode(bl.ids) == sample and "[UNK]" in wp


# %% [markdown]
# The byte-level pieces print in GPT-2's alphabet, which shows a space as `Ġ` and every byte as a
# visible character; a character outside ASCII takes two to four bytes, and an emoji that was never
# merged stays as its four bytes. Nothing is lost, where WordPiece lost whole words.
#
# (sec-roberta-full-sentences)=
# ## FULL-SENTENCES: one long segment, no NSP
#
# BERT's inputs are pairs of segments for next-sentence prediction. The RoBERTa authors compared
# four input formats, each at about 512 tokens per input except the second {cite}`liu2019roberta`:
#
# - SEGMENT-PAIR (with NSP): BERT's own format, a pair of segments, each possibly several sentences;
# - SENTENCE-PAIR (with NSP): a pair of single natural sentences, so much shorter inputs;
# - FULL-SENTENCES (no NSP): consecutive sentences from one or more documents, up to 512 tokens,
#   crossing into the next document when one ends, with an extra separator between documents;
# - DOC-SENTENCES (no NSP): the same, but an input never crosses a document boundary.
#
# Their Table 2, from {ref}`Straka's lecture slides <sources-decks>` (Charles University, 2023;
# BERT-base-sized models; SQuAD F1, MNLI-m, SST-2 and RACE accuracy):
#
# | input format | NSP | SQuAD 1.1/2.0 | MNLI-m | SST-2 | RACE |
# |---|---|---|---|---|---|
# | SEGMENT-PAIR | yes | 90.4/78.7 | 84.0 | 92.9 | 64.2 |
# | SENTENCE-PAIR | yes | 88.7/76.2 | 82.9 | 92.1 | 63.0 |
# | FULL-SENTENCES | no | 90.4/79.1 | 84.7 | 92.5 | 64.8 |
# | DOC-SENTENCES | no | 90.6/79.7 | 84.7 | 92.7 | 65.6 |
#
# Single sentences hurt, which the authors attribute to the model not learning long-range
# dependencies. Dropping NSP matched or slightly improved the scores, unlike BERT's own
# ablation, where removing NSP hurt; the RoBERTa authors suggest that BERT's ablation may have
# removed only the NSP loss while keeping the pair format, but they could not check it. DOC-SENTENCES was best by a little, but it
# makes batch sizes vary (inputs near the end of a document are short), so RoBERTa uses
# FULL-SENTENCES. It is a simple greedy packing:

# %% tags=["export:pretraining.roberta_data"]
def pack_full_sentences(
    documents: Sequence[Sequence[list[int]]], max_tokens: int, separator: int
) -> list[list[int]]:
    """RoBERTa's FULL-SENTENCES inputs: consecutive sentences packed up to
    ``max_tokens`` tokens, crossing from one document into the next with ``separator``
    between them.

    ``documents`` are lists of sentences, each a list of token ids. A sentence that does
    not fit starts the next input; a sentence longer than ``max_tokens`` is cut into
    pieces. Nothing is dropped: the inputs, joined, are the documents joined with
    separators at the crossings.
    """
    if (
        isinstance(max_tokens, bool)
        or not isinstance(max_tokens, int)
        or max_tokens < 2
    ):
        raise ValueError(f"max_tokens must be an int of at least 2, got {max_tokens!r}")
    inputs, current = [], []
    for document in documents:
        sentences = [s for s in document if len(s) > 0]
        if not sentences:
            continue
        if current and len(current) < max_tokens:
            # the input runs on into a new document
            current.append(separator)
        for sentence in sentences:
            for start in range(0, len(sentence), max_tokens):
                piece = list(sentence[start : start + max_tokens])
                if len(current) + len(piece) > max_tokens:
                    inputs.append(current)
                    current = []
                current += piece
    if current:
        inputs.append(current)
    return [x for x in inputs if x]


def full_sentence_examples(
    documents: Sequence[Sequence[list[int]]], special: SpecialTokens, max_len: int
) -> list[PretrainingExample]:
    """FULL-SENTENCES inputs as chapter 9's examples: [CLS] sentences [SEP], one
    segment, no NSP label.

    The documents are separated by [SEP] (RoBERTa's </s>); ``pair_label`` is
    -100 (ignored).
    """
    return [
        PretrainingExample(
            [special.cls, *ids, special.sep], [0] * (len(ids) + 2), IGNORE_INDEX
        )
        for ids in pack_full_sentences(documents, max_len - 2, special.sep)
    ]


# %% [markdown]
# A toy corpus makes the rule visible: three documents of "sentences" whose token ids tell which
# document and sentence they come from, packed into inputs of at most 8 tokens with `0` as the
# separator:

# %%
toy = [
    [[11, 11, 11], [12, 12], [13, 13, 13, 13]],
    [[21, 21, 21, 21, 21]],
    [[31, 31], [32, 32, 32]],
]
for x in pack_full_sentences(toy, max_tokens=8, separator=0):
    print(x)
assert pack_full_sentences(toy, 8, 0) == [
    [11, 11, 11, 12, 12],
    [13, 13, 13, 13, 0],
    [21, 21, 21, 21, 21, 0, 31, 31],
    [32, 32, 32],
]

# %% [markdown]
# On the course corpus with the WordPiece vocabulary, the two formats side by side. NSP pairs are
# built by chapter 9's `make_examples`: one pair per segment of at most $(T_\text{max} - 3)/2$
# tokens, cut to fit when the two segments together are too long. FULL-SENTENCES inputs end where
# the next whole sentence would not fit, so how full they are depends on the length of a sentence
# compared with the length of an input; the cell also packs the corpus at RoBERTa's 512 tokens:

# %%
from tinybert.training.inputs import SpecialTokens
from tinybert.pretraining.objective import seeded_generator
from tinybert.pretraining.examples import make_examples

max_len = pick(quick=32, full=64)
special = SpecialTokens.from_vocab(wordpiece.vocab)
start = time.perf_counter()
token_documents = tokenize_documents(documents, wordpiece)
n_tokens = sum(len(s) for d in token_documents for s in d)
pair_examples = make_examples(
    token_documents, special, max_len, seeded_generator(0, "pairs")
)
full_examples = full_sentence_examples(token_documents, special, max_len)
print(
    f"{len(documents)} documents, {n_tokens:,} tokens (tokenized in "
    f"{time.perf_counter() - start:.1f} s)"
)
for name, examples in [
    ("SEGMENT-PAIR", pair_examples),
    ("FULL-SENTENCES", full_examples),
]:
    lengths = torch.tensor([len(e.input_ids) for e in examples], dtype=torch.float)
    print(
        f"{name:<15} {len(examples):>6,} inputs, mean length {lengths.mean():5.1f} "
        f"of {max_len} ({lengths.mean() / max_len:.0%} full), {lengths.sum():>9,.0f} "
        f"tokens in all"
    )
long_inputs = pack_full_sentences(token_documents, 510, special.sep)
print(
    f"FULL-SENTENCES at 512 tokens: {len(long_inputs):,} inputs, "
    f"{sum(map(len, long_inputs)) / (510 * len(long_inputs)):.0%} full"
)
packed = [t for e in full_examples for t in e.input_ids[1:-1] if t != special.sep]
# nothing lost
assert packed == [t for d in token_documents for s in d for t in s if t != special.sep]


# %% [markdown]
# The two formats do not contain the same text. FULL-SENTENCES holds every token of the corpus
# exactly once, in order (the assertion checks it), with room left at the end of most inputs,
# room that shrinks as inputs grow longer than sentences. SEGMENT-PAIR holds some tokens twice
# (every segment is an A once, and the B of its predecessor in the pairs labelled IsNext, or a
# random B elsewhere) and loses others when a pair is cut to fit; its total can exceed the corpus.
#
# (sec-roberta-dynamic)=
# ## Dynamic masking
#
# {doc}`09_pretraining` explained static and dynamic masking and its batches support both. Here
# is the idea as a function of the epoch. BERT's data pipeline wrote the training data 10 times,
# each copy with its own masks, and trained for 40 epochs, so every sequence was seen with each of
# its 10 masks 4 times. RoBERTa draws a new mask every time a sequence is used. Both are one rule,
# "epoch $e$ uses mask number $e \bmod k$": BERT has $k = 10$ copies, a fully static pipeline has
# $k = 1$, and dynamic masking has $k = \infty$. The mask itself is chapter 9's `mask_tokens`; only
# the seed of its random numbers changes.

# %% tags=["export:pretraining.roberta_data"]
def mask_for_epoch(
    input_ids: torch.Tensor,
    special: SpecialTokens,
    *,
    seed: int,
    epoch: int,
    index: int,
    copies: int | None = None,
    **mask_options,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The MLM corruption of sequence ``index`` (or a batch) in ``epoch``: (corrupted
    ids, labels).

    ``copies`` None is dynamic masking (RoBERTa): a new mask in every epoch. ``copies``
    k is static masking with k copies of the data (BERT wrote 10): epoch e reuses mask e
    mod k; k = 1 never changes the mask. The mask is chapter 9's mask_tokens;
    ``mask_options`` go to it.
    """
    if copies is not None and (
        isinstance(copies, bool) or not isinstance(copies, int) or copies < 1
    ):
        raise ValueError(
            f"copies must be None (dynamic masking) or a positive int, got {copies!r}"
        )
    if epoch < 0 or index < 0:
        raise ValueError(
            f"epoch and index must be non-negative, got epoch={epoch}, index={index}"
        )
    version = epoch if copies is None else epoch % copies
    return mask_tokens(
        input_ids,
        special,
        seeded_generator(seed, "mask", index, version),
        **mask_options,
    )


# %% [markdown]
# Forty epochs of one sequence under the three rules: how many different masks it sees, and how
# often each position ends up as a prediction target.

# %%
# (1, T) one FULL-SENTENCES input
sequence = torch.tensor([full_examples[0].input_ids])
epochs = 40
print(f"one sequence of {sequence.shape[1]} tokens, {epochs} epochs:")
for name, copies in [
    ("static, 1 copy", 1),
    ("BERT, 10 copies", 10),
    ("dynamic (RoBERTa)", None),
]:
    masks = [
        mask_for_epoch(sequence, special, seed=0, epoch=e, index=0, copies=copies)[1]
        != -100
        for e in range(epochs)
    ]
    distinct = len({tuple(m[0].tolist()) for m in masks})
    # share of positions ever predicted
    targeted = torch.stack(masks).any(dim=0).float().mean()
    print(
        f"  {name:<18} {distinct:>2} distinct masks; {targeted:.0%} of the positions "
        f"are a target at least once"
    )

# %% [markdown]
# With one fixed mask, the model is asked about the same positions every time (15% of the ordinary
# tokens on average; one sequence's share, printed above, varies around that), and the rest of the
# sequence never teaches it anything as a target. Ten copies raise that share; dynamic
# masking asks about nearly every token over the run. The masks themselves follow BERT's rates; over
# many sequences, the 15% / 80% / 10% / 10% of {doc}`09_pretraining`:

# %%
# (N, T)
batch_ids = torch.tensor(
    [e.input_ids for e in full_examples if len(e.input_ids) == max_len][:200]
)
corrupted, labels = mask_for_epoch(batch_ids, special, seed=0, epoch=3, index=0)
chosen = labels != -100
maskable = ~torch.isin(batch_ids, torch.tensor(special.ids))
rates = {
    "chosen / maskable": chosen.sum() / maskable.sum(),
    "[MASK] / chosen": (corrupted[chosen] == special.mask).float().mean(),
    "random / chosen": (
        (corrupted[chosen] != special.mask) & (corrupted[chosen] != batch_ids[chosen])
    )
    .float()
    .mean(),
    "unchanged / chosen": (corrupted[chosen] == batch_ids[chosen]).float().mean(),
}
print(
    ", ".join(f"{name} {rate:.3f}" for name, rate in rates.items()),
    f"over {int(chosen.sum()):,} targets",
)
assert (
    abs(rates["chosen / maskable"] - 0.15) < 0.02
    and abs(rates["[MASK] / chosen"] - 0.8) < 0.04
)

# %% [markdown]
# In the paper, dynamic masking did about as well as static masking with 10 copies (slightly
# better on two of three tasks, by a few tenths of a point) and needs no copies of the data
# {cite}`liu2019roberta`. Its real advantage shows with more data and longer training, where
# copies become impractical and a small number of fixed masks would be seen many times.
#
# (sec-roberta-batches)=
# ## Larger batches, larger learning rates
#
# BERT-base trained for 1M steps with batches of 256 sequences and a peak learning rate of
# $10^{-4}$. RoBERTa's authors kept the number of sequences processed fixed and traded steps for
# batch size, tuning the learning rate for each batch size (their Table 3, on Straka's slides; *ppl*
# is the MLM {term}`perplexity` on held-out data):
#
# | batch size | steps | peak learning rate | ppl | MNLI-m | SST-2 |
# |---|---|---|---|---|---|
# | 256 | 1M | $1 \times 10^{-4}$ | 3.99 | 84.7 | 92.7 |
# | 2K | 125K | $7 \times 10^{-4}$ | 3.68 | 85.2 | 92.9 |
# | 8K | 31K | $1 \times 10^{-3}$ | 3.77 | 84.6 | 92.8 |

# %%
# The paper's Table 3: batch size, steps, peak learning rate, ppl, MNLI-m, SST-2
# (2K and 8K are 2,048 and 8,192, the sizes that keep batch x steps nearly equal).
batch_table = [
    (256, 1_000_000, 1e-4, 3.99, 84.7, 92.7),
    (2_048, 125_000, 7e-4, 3.68, 85.2, 92.9),
    (8_192, 31_000, 1e-3, 3.77, 84.6, 92.8),
]
bert_batch, bert_steps, bert_lr = batch_table[0][:3]  # BERT's recipe
for batch, steps, lr, ppl, mnli, sst2 in batch_table:
    sequences = batch * steps
    k = batch / bert_batch  # how many times BERT's batch
    print(
        f"batch {batch:>5} x {steps:>9,} steps = {sequences / 1e6:3.0f}M sequences; "
        f"lr {lr / bert_lr:4.1f} x BERT's for {k:2.0f} x the batch "
        f"(square-root rule {math.sqrt(k):3.1f}, linear rule {k:2.0f})"
    )
    assert abs(sequences / (bert_batch * bert_steps) - 1) < 0.01  # the same data
    assert math.sqrt(k) <= lr / bert_lr <= k  # between sqrt and linear
base, mid, large = batch_table
print(
    f"2K against 256: ppl {mid[3] - base[3]:+.2f}, MNLI-m {mid[4] - base[4]:+.1f}, "
    f"SST-2 {mid[5] - base[5]:+.1f}"
)
print(
    f"8K against 2K:  ppl {large[3] - mid[3]:+.2f}, MNLI-m {large[4] - mid[4]:+.1f}, "
    f"SST-2 {large[5] - mid[5]:+.1f}"
)
assert mid[3] < base[3] and mid[4] > base[4] and mid[5] > base[5]  # 2K beats 256
assert large[3] > mid[3] and large[4] < mid[4] and large[5] < mid[5]  # 8K trails 2K
assert large[3] < base[3]  # but its perplexity still beats 256's
print(f"one step of the final RoBERTa: 8K x 512 = {8_192 * 512 / 1e6:.1f}M tokens")

# %% [markdown]
# All three settings see the same number of sequences (8K × 31K falls short of the others by less
# than 1%), in 8 to 32 times fewer steps. A larger batch averages the gradient over more
# examples, so each step's direction is less noisy and a larger step is safe; with far fewer
# steps, a larger step is also necessary to get as far. Two rules of thumb say how the rate
# should follow a batch $k$ times larger: multiply it by $\sqrt k$, which keeps the noise of the
# update the same, or by $k$ ("linear scaling"), which makes $k$ small steps and one large step
# move the weights about as far. The tuned rates grew more slowly than the batch, between the two
# rules at both sizes: close to linear at 2K ($7 \times 10^{-4}$ for a batch 8 times larger) and
# far from it at 8K (10 times BERT's rate for 32 times the batch). The second batch size, 2K,
# improved on BERT's 256 in all three columns. Going on to 8K lost a little of that everywhere,
# though its perplexity stayed below BERT's. The paper nevertheless trained its final models with
# 8K batches: large batches are easier to spread over many GPUs, since each computes part of the
# batch ({doc}`09_pretraining`), and the differences are a few tenths of a point. The final
# RoBERTa used 8K sequences of up to 512 tokens: 4 million tokens per step. On a single machine,
# a batch too large for its memory is obtained by *{term}`gradient accumulation`*: run several
# small batches, add up their gradients, and take one step ({ref}`an exercise
# <ex-roberta-accumulation>`).
#
# (sec-roberta-data)=
# ## More data, trained for longer
#
# The last ingredient is the text. BERT was pretrained on BooksCorpus and English Wikipedia,
# 16 GB of uncompressed text by the RoBERTa paper's count; its authors added three collections
# of news, web text and stories, 160 GB in all. Their Table 4 (on Straka's
# slides) adds one change per row to a RoBERTa trained with 8K batches, each row keeping the
# changes above it, and sets BERT-large and XLNet-large beside it:
#
# | model | data | batch | steps | SQuAD 1.1 / 2.0 | MNLI-m | SST-2 |
# |---|---|---|---|---|---|---|
# | RoBERTa, BooksCorpus + Wikipedia | 16 GB | 8K | 100K | 93.6 / 87.3 | 89.0 | 95.3 |
# | + additional data | 160 GB | 8K | 100K | 94.0 / 87.7 | 89.3 | 95.6 |
# | + pretrain longer | 160 GB | 8K | 300K | 94.4 / 88.7 | 90.0 | 96.1 |
# | + pretrain even longer | 160 GB | 8K | 500K | 94.6 / 89.4 | 90.2 | 96.4 |
# | BERT-large, BooksCorpus + Wikipedia | 13 GB | 256 | 1M | 90.9 / 81.8 | 86.6 | 93.7 |
# | XLNet-large, BooksCorpus + Wikipedia | 13 GB | 256 | 1M | 94.0 / 87.8 | 88.4 | 94.4 |
# | + additional data | 126 GB | 2K | 500K | 94.5 / 88.8 | 89.8 | 95.6 |
#
# All rows are large models (24 layers, $D = 1024$), scored on the development sets. The cell
# computes what each RoBERTa row adds to the one above it, and how many sequences each run
# processed compared with BERT-large:

# %%
# The paper's Table 4: (name, GB, batch, steps, SQuAD 1.1, SQuAD 2.0, MNLI-m, SST-2).
data_table = [
    ("RoBERTa, books + wiki", 16, 8_192, 100_000, 93.6, 87.3, 89.0, 95.3),
    ("+ additional data", 160, 8_192, 100_000, 94.0, 87.7, 89.3, 95.6),
    ("+ pretrain longer", 160, 8_192, 300_000, 94.4, 88.7, 90.0, 96.1),
    ("+ pretrain even longer", 160, 8_192, 500_000, 94.6, 89.4, 90.2, 96.4),
    ("BERT-large", 13, 256, 1_000_000, 90.9, 81.8, 86.6, 93.7),
    ("XLNet-large", 13, 256, 1_000_000, 94.0, 87.8, 88.4, 94.4),
    ("XLNet-large + data", 126, 2_048, 500_000, 94.5, 88.8, 89.8, 95.6),
]
tasks = ["SQuAD 1.1", "SQuAD 2.0", "MNLI-m", "SST-2"]
rows = {row[0]: row for row in data_table}
bert_sequences = 256 * 1_000_000


def gains(after, before):
    """Score differences, task by task, rounded to the table's one decimal."""
    return [round(a - b, 1) for a, b in zip(after[4:], before[4:])]


def show(label, diffs):
    print(f"{label:<24}", ", ".join(f"{t} {d:+.1f}" for t, d in zip(tasks, diffs)))


print(f"{'':<24}{'sequences':>10} " + "".join(f"{t:>10}" for t in tasks))
for name, gb, batch, steps, *scores in data_table:
    print(
        f"{name:<24}{batch * steps / bert_sequences:>9.1f}x "
        + "".join(f"{s:>10.1f}" for s in scores)
    )
print()
roberta = data_table[:4]
added = [gains(after, before) for before, after in zip(roberta, roberta[1:])]
for row, gain in zip(roberta[1:], added):
    show(row[0], gain)
    assert all(g > 0 for g in gain)  # each change helps each task
more_data, longer = added[0], added[1]
assert all(g_long >= g_data for g_long, g_data in zip(longer, more_data))
first, final = roberta[0], roberta[-1]
assert min(gains(first, rows["BERT-large"])) > 0  # beats BERT-large everywhere...
assert first[2] * first[3] / bert_sequences > 3  # ...on 3 x BERT's sequences
margins = gains(final, rows["XLNet-large + data"])
show("final against XLNet+data", margins)
assert min(margins) == 0.1 and max(margins) == 0.8

# %% [markdown]
# Each change helps every task, and tripling the steps on the large corpus helps at least as
# much as the tenfold data did (compare the gains of the second and third rows, task by task).
# Already the first RoBERTa row, on the same two sources as BERT, beats BERT-large everywhere;
# but it has processed more than three times as many sequences (and longer ones: BERT spent
# 90% of its steps on 128 tokens), so the comparison mixes the recipe with the compute. The
# final row beats XLNet-large trained on additional data on all four tasks, by margins of a
# tenth of a point (SQuAD 1.1) to eight tenths (SST-2). Note that for the same two sources,
# books and Wikipedia, the table gives 13 GB in the rows of BERT and XLNet and 16 GB in
# RoBERTa's.
#
# (sec-roberta-experiment)=
# ## An experiment: static masks are memorised
#
# The paper compared the two masking schemes on BERT-base {cite}`liu2019roberta` (its Table 1):
# BERT's static masking, with every sequence written 10 times with different masks and each copy
# seen 4 times over 40 epochs, against a new mask every time, and found them comparable, dynamic
# slightly better on two of three tasks. What dynamic masking guards against shows best when it is
# exaggerated: a model that meets the same sequence with the same blanks over and over can learn
# the answers to those blanks rather than the language. Here the same small BERT (2 layers,
# $D = 64$), from the same initial weights, is trained twice for 300 steps of 32 inputs on only
# 128 FULL-SENTENCES inputs of our corpus, 75 epochs: once with one mask per input fixed for the
# whole run (static), once with a new mask every time (dynamic, chapter 9's `PretrainingBatches`).
# Each model is then scored three ways, always on masks fixed for the occasion: the training inputs
# with exactly the masks the static run saw, the same inputs with new masks, and held-out articles.

# %% mystnb={"image": {"alt": "Grouped bar chart of MLM loss for the static and dynamic runs on the masks the static run trained on, new masks of the same text and held-out text; the static run is far lower on its own masks only, the dynamic run level and better on held-out text."}}
import matplotlib.pyplot as plt

from tinybert.models.bert_heads import IGNORE_INDEX
from tinybert.pretraining.examples import PretrainingBatches
from tinybert.training.optim import linear_warmup_decay, make_optimizer

STEPS, BATCH, N_INPUTS = pick(quick=6, full=300), pick(quick=8, full=32), 128
small = BertConfig(
    vocab_size=len(wordpiece),
    max_len=max_len,
    pad_token_id=special.pad,
    **pick(
        quick=dict(d_model=32, n_layers=1, n_heads=2, d_ff=64),
        full=dict(d_model=64, n_layers=2, n_heads=2, d_ff=256),
    ),
)
few_inputs = full_examples[:N_INPUTS]
heldout_docs = tokenize_documents(
    course_documents("heldout", max_documents=pick(quick=2, full=10)), wordpiece
)
heldout_inputs = full_sentence_examples(heldout_docs, special, max_len)


def fixed_batches(examples, seed: int) -> list[dict]:
    """Up to 8 batches of ``examples``, with masks drawn once from ``seed``."""
    fixed = PretrainingBatches(
        examples, special, BATCH, seed=seed, dynamic_masking=False
    )
    return [fixed(i) for i in range(min(fixed.steps_per_epoch, 8))]


@torch.no_grad()
def mlm_loss(model: nn.Module, batches: list[dict]) -> float:
    """Mean cross-entropy over the masked tokens of ``batches``."""
    model.eval()
    total, count = 0.0, 0
    for batch in batches:
        batch = {k: v.to(device) for k, v in batch.items()}
        out = model(
            batch["input_ids"],
            batch["token_type_ids"],
            batch["attention_mask"],
            mlm_labels=batch["mlm_labels"],
        )
        n = int((batch["mlm_labels"] != IGNORE_INDEX).sum())
        total, count = total + out.mlm_loss.item() * n, count + n
    return total / count


# the static run's own masks (seed 0), new masks of the same text, held-out text
tests = {
    "masks it trained on": fixed_batches(few_inputs, seed=0),
    "same text, new masks": fixed_batches(few_inputs, seed=7),
    "held-out text": fixed_batches(heldout_inputs, seed=1),
}
memorisation = {}
for masking in ("static", "dynamic"):
    seed_everything(0)
    model = BertForPreTraining(small).to(device).train()
    batches = PretrainingBatches(
        few_inputs, special, BATCH, seed=0, dynamic_masking=masking == "dynamic"
    )
    optimizer = make_optimizer(model, 1e-3)
    scheduler = linear_warmup_decay(
        optimizer, warmup_steps=STEPS // 20, total_steps=STEPS
    )
    start = time.perf_counter()
    for step in range(STEPS):
        batch = {k: v.to(device) for k, v in batches(step).items()}
        out = model(
            batch["input_ids"],
            batch["token_type_ids"],
            batch["attention_mask"],
            mlm_labels=batch["mlm_labels"],
        )
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        scheduler.step()
    memorisation[masking] = {name: mlm_loss(model, b) for name, b in tests.items()}
    print(
        f"{masking:<8} {STEPS / batches.steps_per_epoch:.0f} epochs in "
        f"{time.perf_counter() - start:.0f} s; MLM loss: "
        + ", ".join(f"{name} {v:.3f}" for name, v in memorisation[masking].items())
    )
gap = {
    masking: losses["same text, new masks"] - losses["masks it trained on"]
    for masking, losses in memorisation.items()
}
print(
    f"new masks minus trained masks: static {gap['static']:+.2f}, dynamic "
    f"{gap['dynamic']:+.2f} nats (uniform guess ln V = {math.log(len(wordpiece)):.2f})"
)

fig, ax = plt.subplots(figsize=(7, 3))
for offset, masking in ((-0.2, "static"), (0.2, "dynamic")):
    ax.bar(
        [i + offset for i in range(len(tests))],
        list(memorisation[masking].values()),
        width=0.4,
        label=f"{masking} masks",
    )
ax.set_xticks(range(len(tests)), list(tests))
ax.set(
    ylabel="MLM cross-entropy (nats)", title="What each run learned (lower is better)"
)
ax.legend(fontsize=8)
plt.show()
if not is_quick():
    assert gap["static"] > 1.0  # the static run answers its own blanks by heart
    assert abs(gap["dynamic"]) < 0.3  # the dynamic run has no blanks of its own
    # and what the static run memorised is not language: worse on new text
    heldout = {m: losses["held-out text"] for m, losses in memorisation.items()}
    assert heldout["dynamic"] < heldout["static"] - 0.1


# %% [markdown]
# The static run has learned its blanks by heart: on the masks it trained on, its loss is more
# than a nat lower than on new masks of the very same text, as the cell asserts. That difference
# is not knowledge of the language, since the text is the same; it is the answers to particular
# questions, remembered. The dynamic run, which never saw the same blanks twice, scores about the
# same on both, and it does better on the held-out articles, by more than a tenth of a nat, as the
# cell asserts: the effort the static run spent on its own blanks did not teach it the language. Real pretraining is far from this extreme, with millions of sequences each seen a
# few times; BERT's 10 copies of every mask were the cheap way to keep each mask's repeats to 4,
# and dynamic masking removes the question, at the cost of masking on the fly. The exercise
# {ref}`ex-roberta-seeds` measures how the gap shrinks as the data grows.
#
# (sec-roberta-summary)=
# ## Summary
#
# - RoBERTa is BERT's architecture with a better recipe: dynamic masking, FULL-SENTENCES inputs
#   without NSP, much larger batches with larger learning rates, a 50k byte-level BPE vocabulary,
#   ten times more data and longer training {cite}`liu2019roberta`.
# - In the model, three things differ: positions count real tokens from the padding id + 1 (so
#   the table has 514 rows for 512 tokens, and padding never moves a token's position), one segment,
#   and LayerNorm $\varepsilon = 10^{-5}$. `RobertaModel` is `BertModel` with one new embedding
#   layer, equal to Hugging Face's to $10^{-5}$ with the same parameter count.
# - RoBERTa-base's extra parameters over BERT-base are its larger token table.
# - FULL-SENTENCES packs consecutive sentences up to the maximum length across documents, with a
#   separator between documents; dynamic masking draws a new mask every time a sequence is used,
#   where BERT's pipeline cycled through 10 fixed masks.
# - Byte-level BPE encodes any string without an unknown token, at the cost of a larger vocabulary.
#
# Later chapters import `RobertaConfig`, `RobertaModel` and `RobertaForMaskedLM` from
# `tinybert.models.roberta`, and `pack_full_sentences`, `full_sentence_examples` and
# `mask_for_epoch` from `tinybert.pretraining.roberta_data`.
#
# (sec-roberta-exercises)=
# ## Exercises
#
# :::{exercise-start}
# :label: ex-roberta-doc-sentences
# :difficulty: 2
# :minutes: 30
# :kind: coding
# :::
# **DOC-SENTENCES.** Write `pack_doc_sentences(documents, max_tokens)`, the packing the RoBERTa
# paper found best by a little: like `pack_full_sentences`, greedy, with sentences longer than
# `max_tokens` cut into pieces of `max_tokens` (the last piece shorter), but an input never crosses
# a document boundary, so no separator is needed. It returns a list of inputs (lists of ids); empty
# sentences and documents produce nothing. The check compares it with a reference on random
# corpora and edge cases. Then compare the lengths of its inputs on the course corpus with those of
# `pack_full_sentences`: what would this do to the batch size, and how did the authors handle it?
# :::{exercise-end}
# :::
#
# ::::{solution-start} ex-roberta-doc-sentences
# :class: dropdown
# ::::
# Run the greedy packing once per document and collect the inputs. The last input of each document
# is usually short, so with a fixed number of inputs per batch the number of tokens per batch
# varies; the authors instead varied the batch size dynamically to keep the number of tokens
# roughly constant, and preferred FULL-SENTENCES for the simpler comparison.

# %% tags=["solution"]
def pack_doc_sentences(documents, max_tokens):
    ### BEGIN SOLUTION
    inputs = []
    for document in documents:
        current = []
        for sentence in document:
            for start in range(0, len(sentence), max_tokens):
                piece = list(sentence[start : start + max_tokens])
                if current and len(current) + len(piece) > max_tokens:
                    inputs.append(current)
                    current = []
                current += piece
        if current:
            inputs.append(current)
    return inputs
    ### END SOLUTION


# %% [markdown]
# ::::{solution-end}
# ::::

# %% tags=["check"]
from tinybert.exercises.ch12 import check_pack_doc_sentences

check_pack_doc_sentences(pack_doc_sentences)


# %% [markdown]
# :::{exercise-start}
# :label: ex-roberta-accumulation
# :difficulty: 3
# :minutes: 30
# :kind: coding
# :::
# **A large batch on a small machine.** Write `accumulate_gradients(model, loss_fn, batch,
# micro_batch_size)` that leaves in every parameter's `.grad` the gradient of `loss_fn(model,
# batch)`, the *mean* loss over the whole batch, while only ever calling `loss_fn` on slices of at
# most `micro_batch_size` examples. `batch` is a dict of tensors whose first dimension is the batch;
# `loss_fn(model, part)` returns the mean loss over the examples of `part`. Start from zero
# gradients, and get the weighting right when the last micro-batch is smaller than the others.
# Why does gradient accumulation give the same *gradient* as a large batch but not always the same
# *training run* as one (think of BatchNorm, dropout and the loss in chapter 9's MLM)?
# :::{exercise-end}
# :::
#
# ::::{solution-start} ex-roberta-accumulation
# :class: dropdown
# ::::
# The mean over the batch is the sum over micro-batches of (micro-batch mean × its size / batch
# size), so each micro-batch's loss is scaled by its share of the examples before `backward`, and
# the gradients add up in `.grad`. The function is the same; what can differ is everything that
# depends on which examples share a forward pass (BatchNorm statistics, which BERT does not use)
# and the random numbers drawn (dropout masks). And in MLM the mean is over *masked tokens*, not
# sequences: micro-batches with different numbers of masked tokens must be weighted by those
# counts, the same correction as for several GPUs in {doc}`09_pretraining`.

# %% tags=["solution"]
def accumulate_gradients(model, loss_fn, batch, micro_batch_size):
    ### BEGIN SOLUTION
    n = len(next(iter(batch.values())))
    model.zero_grad(set_to_none=True)
    for start in range(0, n, micro_batch_size):
        part = {
            key: value[start : start + micro_batch_size] for key, value in batch.items()
        }
        size = len(next(iter(part.values())))
        (loss_fn(model, part) * size / n).backward()
    ### END SOLUTION


# %% [markdown]
# ::::{solution-end}
# ::::

# %% tags=["check"]
from tinybert.exercises.ch12 import check_accumulate_gradients

check_accumulate_gradients(accumulate_gradients)

# %% [markdown]
# :::{exercise-start}
# :label: ex-roberta-positions
# :difficulty: 2
# :minutes: 20
# :kind: concept
# :::
# **Position rows (pen and paper).** (a) A RoBERTa with padding id 1 and 514 position rows receives
# a right-padded batch. Which rows of the position table are ever read, which one is read only by
# padding, and which one never? (b) Hugging Face's RoBERTa computes the positions from
# `input_ids`, not from the attention mask. What happens if a tokenizer pads with a token other than
# `<pad>`, or a real text contains the padding id? (c) Why does chapter 8's BERT give different
# outputs for a left-padded sequence, although the padded positions are masked out of attention?
# :::{exercise-end}
# :::
#
# ::::{solution-start} ex-roberta-positions
# :class: dropdown
# ::::
# **Rubric** (what a full answer contains): (a) rows 2 to 513 read by real tokens, row 1 only by
# padding, row 0 never; (b) positions computed from ids go wrong when padding uses another id or a
# real token equals the padding id; (c) left padding moves every real token to a later position,
# so the added position vectors change.
#
# (a) Real tokens read rows 2 to 513 (at most 512 of them); padding reads row 1, which is zero and
# never trained; row 0 is never read. (b) The positions would count the wrong tokens: padding
# written with another id gets real positions (harmless if it is masked out of attention, but a real
# token equal to the padding id would lose its position and every later token would shift by one).
# The rule trusts the ids, so the padding id must mean padding and nothing else. (c) The mask hides
# padding from attention, but every real token still gets position $t$ = its column, so left padding
# moves every real token to a later position, and the position vectors added to the tokens change.
# ::::{solution-end}
# ::::
#
# :::{exercise-start}
# :label: ex-roberta-masks
# :difficulty: 1
# :minutes: 15
# :kind: derivation
# :::
# **How many masks (pen and paper).** BERT trained for 40 epochs on data written with 10 different
# masks. (a) How often does the model see each masked version of a sequence? (b) With 15% of the
# tokens chosen independently in each copy, what fraction of a sequence's tokens is never chosen
# in any of the 10 copies, and in 40 epochs of dynamic masking? (c) Compare with the cell in
# {ref}`sec-roberta-dynamic`.
# :::{exercise-end}
# :::
#
# ::::{solution-start} ex-roberta-masks
# :class: dropdown
# ::::
# **Rubric** (what a full answer contains): 4 times each; $0.85^{10} \approx 20\%$ of the tokens
# never chosen with 10 copies and $0.85^{40} \approx 0.15\%$ with dynamic masking; a comparison
# with the chapter's measured shares (one random draw on one sequence, below the expected values;
# special tokens lower them a little).
#
# (a) 40 / 10 = 4 times each. (b) A token escapes one mask with probability 0.85, so it escapes all
# 10 copies with probability $0.85^{10} \approx 0.197$ (about 20% never targeted) and 40 dynamic
# masks with probability $0.85^{40} \approx 0.0015$. (c) The cell measured the share of positions
# targeted at least once in one sequence, a single random draw: its three shares rise with $k$ as
# $1 - 0.85^{k}$ does but lie several points below it, partly by chance (each position of one short
# sequence is chosen or not), and partly because the special tokens `[CLS]` and `[SEP]` are never
# chosen, which lowers all three numbers a little.

# %%
for k in (1, 10, 40):
    print(
        f"{k:>2} different masks: never chosen {0.85**k:.2%}, chosen at least once "
        f"{1 - 0.85**k:.2%}"
    )

# %% [markdown]
# ::::{solution-end}
# ::::
#
# :::{exercise-start}
# :label: ex-roberta-seeds
# :difficulty: 3
# :minutes: 60
# :kind: experiment
# :::
# **How much data stops the memorising?** Rerun the experiment of {ref}`sec-roberta-experiment`
# with two more seeds (for the initial weights, the order of the batches and the masks) and report
# the static and dynamic gaps with their spread. Then keep `STEPS` and raise `N_INPUTS` from 128 to
# 512 and to 2,048, so that each input is seen fewer times: how does the static run's gap change,
# and how many epochs does a static run stand before its gap is larger than the spread? Compare
# with BERT's 10 copies of each mask over 40 epochs.
# :::{exercise-end}
# :::
#
# ::::{solution-start} ex-roberta-seeds
# :class: dropdown
# ::::
# **Rubric** (what a full answer contains): the two gaps over three seeds with their spread; the
# static gap falling as the number of inputs grows (fewer epochs per input), with the numbers; the
# number of repeats at which memorising becomes measurable; the link to BERT's 4 repeats of each
# mask.
#
# Wrap the training loop of the experiment in a function of the seed and the inputs, and loop:
#
# ```python
# def gaps(inputs, seed):
#     tests_here = [fixed_batches(inputs, seed=seed), fixed_batches(inputs, seed=seed + 7)]
#     out = {}
#     for masking in ("static", "dynamic"):
#         seed_everything(seed)
#         model = BertForPreTraining(small).to(device).train()
#         batches = PretrainingBatches(
#             inputs, special, BATCH, seed=seed, dynamic_masking=masking == "dynamic"
#         )
#         ...  # the training loop of the experiment
#         out[masking] = mlm_loss(model, tests_here[1]) - mlm_loss(model, tests_here[0])
#     return out
#
#
# for n in (128, 512, 2048):
#     for seed in (0, 1, 2):
#         print(n, seed, gaps(full_examples[:n], seed))
# ```
#
# With 300 steps of 32 inputs, 128 inputs are seen 75 times each, 512 about 19 times and 2,048
# under 5 times. The static gap shrinks with the number of repeats, and the dynamic gap stays
# within its noise throughout; at a handful of repeats, BERT's regime, a small model cannot learn
# its blanks by heart, which is why the paper found the two schemes comparable. (Check the
# `full_examples` count first: with fewer inputs than asked, `[:n]` silently takes them all.)
# ::::{solution-end}
# ::::
#
# (sec-roberta-quiz)=
# ## Quiz
#
# Check what you took from this chapter. In a notebook, run the cell and answer with
# `quiz.check(question, answer)`, such as `quiz.check(1, "b")`; here, press *Check*.

# %% tags=["quiz", "remove-input"]
from tinybert.exercises.quiz import Quiz, choice, number

quiz = Quiz(
    "ch12",
    [
        choice(
            "Which of these is not part of RoBERTa's recipe?",
            [
                "dynamic masking",
                "byte-level BPE",
                "larger batches",
                "next-sentence prediction",
            ],
            answer="d",
            explain="RoBERTa drops NSP and packs FULL-SENTENCES.",
        ),
        number(
            "How many rows does RoBERTa's position table have for 512 tokens?",
            answer=514,
            decimals=0,
            explain="Positions start after the padding id, 1.",
        ),
        choice(
            "At which row of the position table does the first real token of a "
            "RoBERTa input read its position (padding id 1)?",
            ["0", "1", "2", "512"],
            answer="c",
            explain="The padding id + 1: padding never moves a token's position.",
        ),
        choice(
            "FULL-SENTENCES packs",
            [
                "consecutive sentences up to the maximum length, across documents",
                "a pair of segments, each possibly several sentences",
                "a pair of single natural sentences",
                "consecutive sentences up to the maximum length, within one document",
            ],
            answer="a",
            explain="With a separator between documents.",
        ),
        number(
            "With 10 static masks choosing 15% of tokens each, what percentage of a "
            "sequence's tokens is never chosen? (0 decimals)",
            answer=100 * 0.85**10,
            decimals=0,
            explain="0.85¹⁰; dynamic masking over 40 epochs: 0.85⁴⁰.",
        ),
        choice(
            "Why does RoBERTa-base have more parameters than BERT-base?",
            [
                "more layers",
                "a larger token table",
                "a wider feed-forward block",
                "two poolers",
            ],
            answer="b",
            explain="50k byte-level BPE tokens.",
        ),
    ],
)
quiz
