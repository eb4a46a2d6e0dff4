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
#     module: finetuning.features
# ---

# %% [markdown]
# (sec-ft)=
# # Fine-tuning BERT
#
# Pretraining taught our small BERT what words tend to appear where, on unlabelled text and with
# no particular task in mind. Fine-tuning is how that knowledge is put to work: put a small,
# task-specific layer on top of the pretrained encoder, then keep training the whole thing, for a
# few epochs and with a small learning rate, on a labelled data set that is tiny compared with the
# pretraining corpus. The same pretrained weights start every task; only the head and the data
# change {cite}`devlin2019bert`. The idea of fine-tuning a pretrained language model for
# classification, rather than training from scratch, was made to work well by ULMFiT
# {cite}`howard2018universal`, and how best to fine-tune BERT in particular has been studied
# since {cite}`sun2019fine`.
#
# This chapter fine-tunes the course's own pretrained `bert-mini` on the three kinds of task of
# {ref}`Ozdemir's lecture slides <sources-decks>`: classifying whole sentences, labelling every word,
# and extracting an answer span from a paragraph. It measures what the three ways of fine-tuning
# cost and gain and how sensitive the result is to the learning rate; what the pretraining itself
# was worth is the question of {doc}`11_transfer`.
#
# **What you will learn**
#
# - how one input format, `[CLS] A [SEP] B [SEP]` with segment ids, serves every task, and how a
#   head of one linear layer turns the encoder's vectors into class scores, per-token
#   tags or answer spans;
# - how to fine-tune on intent classification (Banking77), part-of-speech tagging (Universal
#   Dependencies), named-entity recognition (Universal NER) and
#   {term}`extractive question answering` (SQuAD), including the details that make or
#   break the last three: {term}`labelling only the first word piece of each word <first-piece labelling>`, cutting long paragraphs
#   into overlapping windows, and mapping a predicted span back to characters;
# - how the metrics are computed: accuracy overall and per class, {term}`confusion matrices <confusion matrix>`, entity-level
#   precision, recall and F1 for named entities, and SQuAD's
#   {term}`exact match` and {term}`F1 <F1 score>` exactly as the official script computes them;
# - by measurement, on this model: what {term}`freezing` all or part of the encoder costs, and
#   how the BERT paper's learning rates suit a model this small;
# - how far a 4-layer model pretrained on a few megabytes is from BERT-base, and why.
#
# **Uses**: `check_positive_int` from {doc}`01_feedforward`; `BertModel`, `BertConfig`,
# `init_bert_weights` and `IGNORE_INDEX` from {doc}`08_bert`,
# with `from_hf` and `bert_config_to_hf` for a check against Hugging Face; the pretrained checkpoint
# (`load_pretrained`), the input builder (`encode_pair`, `SpecialTokens`, `pad_features`), the
# sentence splitter (`split_sentences`) and the
# optimiser and schedule (`make_optimizer`, `linear_warmup_decay`) from {doc}`09_pretraining`; the WordPiece tokenizer and its character offsets from
# {doc}`07_tokenization`; `load_minilm`, the real pretrained encoder, from {doc}`08_bert`; and
# `fetch` from `tinybert.data` for the data sets.
#
# (sec-ft-setup)=
# ## Setup
#
# The chapter writes the subpackage `tinybert.finetuning`: `features` (inputs and batches),
# `finetune_loop` (the training loop and prediction), `heads` (the task heads), `text_tasks`
# (the sentence data sets), `tagging_tasks` (the word-tagging ones),
# `qa` (windows and answer spans), `metrics`, and `recipes` (one call per task, for
# the command line). Every experiment starts from the same
# pretrained encoder, so the cell below loads it once (loading never trains: a missing
# checkpoint is an error that says how to make one) and `fresh_encoder()` hands out copies.

# %%
import copy
import tempfile
import time
from pathlib import Path

import matplotlib.pyplot as plt
import torch

import tinybert
from tinybert.data import fetch
from tinybert.models.bert import BertModel
from tinybert.models.course_checkpoint import load_pretrained
from tinybert.runtime import get_device, is_quick, pick, seed_everything

device = get_device()
pretrained = load_pretrained()  # the course's bert-mini (chapter 09)
tokenizer, config = pretrained.tokenizer, pretrained.config
PAD = tokenizer.vocab["[PAD]"]


def fresh_encoder() -> BertModel:
    """A copy of the pretrained encoder (no MLM/NSP heads): every run starts from the
    same weights."""
    return copy.deepcopy(pretrained.model.bert).to(device)


n_encoder = sum(p.numel() for p in pretrained.model.bert.parameters())
print(f"device: {device}, quick mode: {is_quick()}")
print(
    f"checkpoint {pretrained.directory.name}: {config.n_layers} layers, d_model "
    f"{config.d_model}, {config.n_heads} heads, vocabulary {config.vocab_size:,}, "
    f"max_len {config.max_len}, {n_encoder / 1e6:.1f}M encoder parameters"
)

# %% [markdown]
# (sec-ft-transfer)=
# ## From pretraining to fine-tuning
#
# Ozdemir's slides call this *{term}`transfer learning`*: a model is first pretrained on an unlabelled
# corpus, on objectives (masked language modelling, next sentence prediction) that are not useful in
# themselves, and then fine-tuned, that is, updated, on a labelled "downstream" data set that is
# usually much smaller. Trained on the small data set alone, say his slides, the same
# architecture would never reach the same results; {ref}`sec-ft-gain`, in the next chapter,
# measures the difference for our model.
#
# The BERT paper shows four kinds of {term}`downstream task`, each with the same encoder and a different
# way of reading its output {cite}`devlin2019bert` (its Figure 4):
#
# | kind of task | input | what the head reads | examples in the paper | in this chapter |
# |---|---|---|---|---|
# | {term}`single-sentence classification <sentence classification>` | `[CLS] A [SEP]` | the `[CLS]` vector | SST-2, CoLA | Banking77, Poem Sentiment |
# | {term}`sentence-pair classification` | `[CLS] A [SEP] B [SEP]` | the `[CLS]` vector | MNLI, QQP, QNLI, MRPC, ... | does a sentence answer a question? ({ref}`sec-ft-pairs`) |
# | extractive question answering | `[CLS] question [SEP] paragraph [SEP]` | every paragraph token: start and end scores | SQuAD v1.1 | SQuAD v1.1 |
# | single-sentence tagging | `[CLS] A [SEP]` | every token's vector | CoNLL-2003 NER | UD part-of-speech tags, Universal NER entities |
#
# Each kind has its figure in its section, drawn for the course's encoder and an example of the
# task: {numref}`fig-ft-sentence` (a sentence), {numref}`fig-ft-pair` (a pair),
# {numref}`fig-ft-span` (an answer span) and {numref}`fig-ft-tokens` (a tag per word).
#
# There are three approaches to fine-tuning, in Ozdemir's words: update the whole model (all
# encoder layers and the new layers on top); update only a subset of the encoder layers, to save
# computation; or freeze the encoder and train only the new layers. The paper fine-tunes
# everything, with dropout 0.1, for 2 to 4 epochs, and picks the learning rate (with Adam) from
# 5e-5, 3e-5 and 2e-5 (and the batch size from 16 and 32) on the development set. We will try all
# three approaches and that learning-rate grid, on a model with about a twentieth of BERT-base's
# parameters.
#
# (sec-ft-inputs)=
# ## One input format for every task
#
# Every task feeds the encoder the same kind of sequence: `[CLS]`, the tokens of the first
# segment, `[SEP]`, and for pair tasks the tokens of the second segment and another `[SEP]`. The
# segment (token type) ids say which segment each position belongs to: 0 for `[CLS] A [SEP]`,
# 1 for `B [SEP]`. This is the layout of pretraining, so chapter 9's `encode_pair` builds it,
# with the special tokens' ids read from the vocabulary (`SpecialTokens.from_vocab`), never from
# constants: one builder for pretraining and fine-tuning, so the two cannot drift apart.

# %% tags=["export", "export:finetuning.finetune_loop"]
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import torch
from torch import nn

from tinybert.models.bert_heads import IGNORE_INDEX
from tinybert.runtime import progress
from tinybert.training.inputs import pad_features  # chapter 9
from tinybert.training.inputs import encode_pair  # chapter 9
from tinybert.training.inputs import SpecialTokens
from tinybert.training.optim import linear_warmup_decay, make_optimizer

# %% [markdown]
# Ozdemir's question-answering demo asks "Where does Matt live?" of one sentence. Packed as a
# pair, it looks like this (token / segment):

# %%
question, context = (
    "Where does Matt live?",
    ("Matt lives in Canada and Sinan lives in California"),
)
special = SpecialTokens.from_vocab(tokenizer.vocab)
q, c = tokenizer.encode(question), tokenizer.encode(context)
input_ids, token_type_ids = encode_pair(q.ids, c.ids, special, max_len=128)
tokens = [tokenizer.id_to_token[i] for i in input_ids]
print(" ".join(f"{token}/{segment}" for token, segment in zip(tokens, token_type_ids)))
assert tokens[0] == "[CLS]" and tokens[len(q) + 1] == "[SEP]" and tokens[-1] == "[SEP]"
assert token_type_ids == [0] * (len(q) + 2) + [1] * (len(c) + 1)


# %% [markdown]
# (sec-ft-features)=
# ### Features and batches
#
# A *feature* is one example ready for the model: a dictionary with `input_ids`,
# `token_type_ids` and the labels, as plain lists. Chapter 9's `pad_features` pads a list of
# features into tensors of shape (B, T), with the boolean `attention_mask` (True = a real token)
# that the encoder expects, padding per-token labels with -100 so that padded positions carry no
# loss. `encode_sentences` makes sentence-classification features; a text longer than `max_len`
# tokens is cut (with our tokenizer, the longest Banking77 question has fewer than 128).
# For training, `batches` shuffles the features but puts features of similar length in the same
# batch, which saves most of the padding ({ref}`sec-ft-banking-run` measures how much).

# %% tags=["export"]
def encode_sentences(tokenizer, examples, *, max_len: int = 128) -> list[dict]:
    """Features for sentence classification: [CLS] text [SEP] (cut to max_len) and
    the label."""
    special = SpecialTokens.from_vocab(tokenizer.vocab)
    features = []
    for example in examples:
        ids = tokenizer.encode(example.text).ids
        input_ids, token_type_ids = encode_pair(ids, None, special, max_len)
        features.append(
            {
                "input_ids": input_ids,
                "token_type_ids": token_type_ids,
                "labels": example.label,
            }
        )
    return features


def batches(
    features: list[dict],
    batch_size: int,
    pad_id: int,
    *,
    shuffle: bool = False,
    generator: torch.Generator | None = None,
):
    """Yield padded batches: in order, or in a random order drawn from ``generator``
    that puts features of similar length together (shuffle, sort each pool of 16 batches
    by length, cut into batches, shuffle the batches), so that little of each batch
    is padding."""
    if not features:
        raise ValueError("no features to batch")
    order = list(range(len(features)))
    if shuffle:
        order = torch.randperm(len(features), generator=generator).tolist()
        pool = 16 * batch_size
        order = [
            i
            for start in range(0, len(order), pool)
            for i in sorted(
                order[start : start + pool], key=lambda i: len(features[i]["input_ids"])
            )
        ]
    chunks = [
        order[start : start + batch_size] for start in range(0, len(order), batch_size)
    ]
    if shuffle:
        chunks = [
            chunks[i] for i in torch.randperm(len(chunks), generator=generator).tolist()
        ]
    for chunk in chunks:
        yield pad_features([features[i] for i in chunk], pad_id)


# %% [markdown]
# (sec-ft-heads)=
# ## Heads: a small module over any encoder
#
# A head is a module that holds the {term}`encoder` and adds one linear layer, whose outputs are
# {term}`logits <logit>`:
#
# - **sequence classification** reads one vector per sequence: BERT's pooler output,
#   $\tanh(W\mathbf h_\text{[CLS]} + \mathbf b)$, which pretraining trained for next sentence
#   prediction, or the `[CLS]` vector itself for an encoder without a pooler. Dropout, then a
#   linear layer to $C$ class scores;
# - **{term}`token classification`** applies dropout and a linear layer to every position's vector:
#   $C$ scores per token;
# - **question answering** gives every position two scores, from one linear layer
#   $D \to 2$: how likely the answer *starts* there and how likely it *ends* there. A
#   {term}`softmax` over the positions turns each row of scores into a distribution, and the
#   loss is the mean of the start and end cross-entropies.
#
# The heads need nothing from the encoder but `encoder(input_ids, token_type_ids,
# attention_mask)` returning `.last_hidden_state` of shape (B, T, D), and `encoder.config.d_model`:
# the later chapters' RoBERTa, DistilBERT and ALBERT fit them unchanged. New layers are
# initialised as BERT initialises every layer (`init_bert_weights`: normal weights with standard
# deviation 0.02, zero biases). Labels outside the label set are a `ValueError` naming the bad
# values, rather than the index error deep inside `cross_entropy` that they would otherwise cause.

# %% tags=["export:finetuning.heads"]
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from tinybert.blocks.checks import check_positive_int  # chapter 1
from tinybert.models.bert_heads import IGNORE_INDEX
from tinybert.models.bert import init_bert_weights


# %% tags=["export:finetuning.heads"]
@dataclass
class ClassifierOutput:
    # mean cross-entropy over the labelled positions, given labels
    loss: torch.Tensor | None
    logits: torch.Tensor  # (B, C) for sequences, (B, T, C) for tokens


@dataclass
class SpanOutput:
    # (start loss + end loss) / 2, given the answer positions
    loss: torch.Tensor | None
    # (B, T) how likely the answer starts at each position
    start_logits: torch.Tensor
    end_logits: torch.Tensor  # (B, T) how likely it ends there


def _check_class_labels(name: str, labels: torch.Tensor, n_classes: int) -> None:
    if labels.is_floating_point() or labels.dtype == torch.bool:
        raise ValueError(
            f"{name}: expected integer class ids (torch.long), got {labels.dtype}; "
            f"use .long() on labels that hold whole numbers"
        )
    bad = (labels != IGNORE_INDEX) & ((labels < 0) | (labels >= n_classes))
    if bool(bad.any()):
        raise ValueError(
            f"{name} must be in 0..{n_classes - 1} (or {IGNORE_INDEX} to "
            f"ignore a position), got "
            f"{sorted(set(labels[bad].tolist()))[:5]}"
        )


def _new_linear(encoder: nn.Module, n_out: int) -> nn.Linear:
    layer = nn.Linear(encoder.config.d_model, check_positive_int("n_labels", n_out))
    init_bert_weights(layer, getattr(encoder.config, "initializer_range", 0.02))
    return layer


POOLINGS = ("pooler", "mean")


class SequenceClassifier(nn.Module):
    """One label per sequence, from one summary vector: (B, T) ids -> (B, C) logits.

    ``pooling="pooler"``: BERT's pooled [CLS] vector (the final [CLS] state for encoders
    without a pooler), which next-sentence prediction trains. ``"mean"``: the mean of
    the final states over the real tokens, the summary of encoders trained without NSP
    (RoBERTa, sentence encoders).
    """

    def __init__(
        self,
        encoder: nn.Module,
        n_labels: int,
        dropout: float = 0.1,
        pooling: str = "pooler",
    ):
        super().__init__()
        if pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
        self.encoder, self.n_labels, self.pooling = encoder, n_labels, pooling
        self.dropout = nn.Dropout(dropout)
        self.classifier = _new_linear(encoder, n_labels)

    def forward(self, input_ids, token_type_ids=None, attention_mask=None, labels=None):
        out = self.encoder(
            input_ids, token_type_ids=token_type_ids, attention_mask=attention_mask
        )
        if self.pooling == "mean":
            real = (
                torch.ones_like(input_ids) if attention_mask is None else attention_mask
            )
            real = real[..., None].to(out.last_hidden_state.dtype)  # (B, T, 1)
            empty = (real.sum(1)[:, 0] == 0).nonzero().flatten().tolist()
            if empty:  # a mean over no token would be NaN
                raise ValueError(
                    "attention_mask: mean pooling needs a real token in every "
                    f"sequence, got none in rows {empty[:5]}"
                )
            summary = (out.last_hidden_state * real).sum(1) / real.sum(1)  # (B, D)
        else:
            # (B, D) tanh(W h_[CLS] + b)
            summary = getattr(out, "pooler_output", None)
            if summary is None:
                # (B, D) encoders without a pooler
                summary = out.last_hidden_state[:, 0]
        logits = self.classifier(self.dropout(summary))  # (B, C)
        loss = None
        if labels is not None:
            _check_class_labels("labels", labels, self.n_labels)
            if (labels != IGNORE_INDEX).any():
                loss = F.cross_entropy(logits, labels, ignore_index=IGNORE_INDEX)
            else:  # no labelled sequence: 0, not NaN
                loss = logits.sum() * 0.0
        return ClassifierOutput(loss, logits)


class TokenClassifier(nn.Module):
    """One label per token: (B, T) ids -> (B, T, C) logits; labels of -100
    carry no loss."""

    def __init__(self, encoder: nn.Module, n_labels: int, dropout: float = 0.1):
        super().__init__()
        self.encoder, self.n_labels = encoder, n_labels
        self.dropout = nn.Dropout(dropout)
        self.classifier = _new_linear(encoder, n_labels)

    def forward(self, input_ids, token_type_ids=None, attention_mask=None, labels=None):
        hidden = self.encoder(
            input_ids,
            token_type_ids=token_type_ids,
            # (B, T, D)
            attention_mask=attention_mask,
        ).last_hidden_state
        # (B, T, C)
        logits = self.classifier(self.dropout(hidden))
        loss = None
        if labels is not None:
            _check_class_labels("labels", labels, self.n_labels)
            if (labels != IGNORE_INDEX).any():
                loss = F.cross_entropy(
                    logits.flatten(0, 1), labels.flatten(), ignore_index=IGNORE_INDEX
                )
            else:  # no labelled token: 0, not NaN
                loss = logits.sum() * 0.0
        return ClassifierOutput(loss, logits)


class QuestionAnswerer(nn.Module):
    """Extractive QA: a start score and an end score for every position, (B, T) -> 2
    x (B, T)."""

    def __init__(self, encoder: nn.Module):
        super().__init__()
        self.encoder = encoder
        self.span = _new_linear(encoder, 2)

    def forward(
        self,
        input_ids,
        token_type_ids=None,
        attention_mask=None,
        start_positions=None,
        end_positions=None,
    ):
        hidden = self.encoder(
            input_ids,
            token_type_ids=token_type_ids,
            # (B, T, D)
            attention_mask=attention_mask,
        ).last_hidden_state
        # (B, T) each
        start_logits, end_logits = self.span(hidden).unbind(dim=-1)
        loss = None
        if start_positions is not None and end_positions is not None:
            T = input_ids.shape[1]
            _check_class_labels("start_positions", start_positions, T)
            _check_class_labels("end_positions", end_positions, T)
            loss = (
                F.cross_entropy(start_logits, start_positions)
                + F.cross_entropy(end_logits, end_positions)
            ) / 2
        return SpanOutput(loss, start_logits, end_logits)


# %% [markdown]
# On a batch of two sentences of different lengths, padded, the three heads give the shapes
# their docstrings promise, and each adds a tiny number of parameters to the encoder's:

# %%
sentences = ["I am still waiting on my card?", "How do I top up?"]
packed = [encode_pair(tokenizer.encode(s).ids, None, special, 128) for s in sentences]
demo = pad_features(
    [{"input_ids": ids, "token_type_ids": types} for ids, types in packed], PAD
)
for head in [
    SequenceClassifier(fresh_encoder(), 77),
    TokenClassifier(fresh_encoder(), 17),
    QuestionAnswerer(fresh_encoder()),
]:
    head.to(device).eval()  # the new layers join the encoder on the device
    with torch.no_grad():
        out = head(**{k: v.to(device) for k, v in demo.items()})
    shapes = {k: tuple(v.shape) for k, v in vars(out).items() if v is not None}
    own = sum(
        p.numel()
        for name, p in head.named_parameters()
        if not name.startswith("encoder.")
    )
    print(
        f"{type(head).__name__:<19} input {tuple(demo['input_ids'].shape)} -> "
        f"{shapes}; head parameters {own:,} ({own / n_encoder:.2%} of the encoder's)"
    )

# %% [markdown]
# **Parity with Hugging Face.** `transformers` has the same three heads for BERT
# (`BertForSequenceClassification`, `BertForTokenClassification`, `BertForQuestionAnswering`).
# Built from a small random configuration, with the encoder converted by chapter 8's `from_hf`
# and the head's linear layer copied, ours must give the same logits and the same loss, on a
# padded batch:

# %%
import transformers

from tinybert.models.convert import from_hf
from tinybert.models.convert_names import bert_config_to_hf
from tinybert.models.bert import BertConfig

small = BertConfig(
    vocab_size=99, d_model=32, n_layers=2, n_heads=4, d_ff=37, max_len=64
)
g = torch.Generator().manual_seed(0)
ids = torch.randint(5, 99, (13, 7), generator=g)
# (13, 7) padded
mask = torch.arange(7)[None, :] < torch.randint(2, 8, (13, 1), generator=g)
types = (torch.arange(7)[None, :] >= 3).long() * mask
cases = [
    (
        lambda encoder: SequenceClassifier(encoder, 5),
        transformers.BertForSequenceClassification,
        "classifier",
        "classifier",
        {"labels": torch.randint(0, 5, (13,), generator=g)},
    ),
    (
        lambda encoder: TokenClassifier(encoder, 5),
        transformers.BertForTokenClassification,
        "classifier",
        "classifier",
        {"labels": torch.randint(0, 5, (13, 7), generator=g).masked_fill(~mask, -100)},
    ),
    (
        QuestionAnswerer,
        transformers.BertForQuestionAnswering,
        "qa_outputs",
        "span",
        {
            "start_positions": torch.randint(0, 7, (13,), generator=g),
            "end_positions": torch.randint(0, 7, (13,), generator=g),
        },
    ),
]
for make_head, hf_class, hf_layer, our_layer, labels in cases:
    hf_config = bert_config_to_hf(small)
    # QA: start, end
    hf_config.num_labels = 2 if hf_class is transformers.BertForQuestionAnswering else 5
    torch.manual_seed(1)
    hf_model = hf_class(hf_config).eval()
    ours = make_head(from_hf(hf_model.bert)).eval()
    getattr(ours, our_layer).load_state_dict(getattr(hf_model, hf_layer).state_dict())
    with torch.no_grad():
        theirs = hf_model(
            input_ids=ids, token_type_ids=types, attention_mask=mask.long(), **labels
        )
        mine = ours(ids, types, mask, **labels)
    names = (
        ["start_logits", "end_logits"] if isinstance(mine, SpanOutput) else ["logits"]
    )
    differences = [getattr(mine, name) - getattr(theirs, name) for name in names]
    # real tokens only
    per_token = [d[mask] if d.shape[:2] == mask.shape else d for d in differences]
    logit_error = max(d.abs().max().item() for d in per_token)
    loss_error = (mine.loss - theirs.loss).abs().item()
    print(
        f"{type(ours).__name__:<19} vs {hf_class.__name__:<30} max |logit "
        f"difference| {logit_error:.1e}, |loss difference| {loss_error:.1e}"
    )
    assert logit_error < 1e-5 and loss_error < 1e-5


# %% [markdown]
# Per-token logits are compared at the real tokens only: neither model masks the scores of
# padded positions, and nothing reads them. The losses agree too, so the padded positions'
# labels (-100) are ignored alike.
#
# (sec-ft-loop)=
# ## The fine-tuning loop
#
# Ozdemir's three approaches differ only in which parameters receive gradients.
# `set_trainable_layers(model, k)` leaves everything trainable for `k=None`; for a number `k` it
# freezes the encoder except its top `k` layers (and the pooler, which sits on top of them), and
# `k=0` trains the head alone. A frozen parameter costs no gradient and no optimiser state, and
# autograd stops at the lowest trainable layer, so the backward pass gets cheaper too.

# %% tags=["export:finetuning.heads"]
def set_trainable_layers(model: nn.Module, n_layers: int | None) -> int:
    """Choose what fine-tuning updates: everything (None), or the head, the pooler and
    the top ``n_layers`` encoder layers (0 = the head alone). Returns the number of
    trainable parameters. For n_layers other than None the encoder must keep its layers
    in ``.encoder.layers``, as BertModel does."""
    encoder = model.encoder
    # check everything before changing anything
    if n_layers is not None:
        layers = getattr(getattr(encoder, "encoder", None), "layers", None)
        if not isinstance(layers, nn.ModuleList):
            raise ValueError(
                f"n_layers = {n_layers} needs an encoder whose layers are "
                f"in .encoder.layers (a BertModel), got "
                f"{type(encoder).__name__}; use n_layers=None to "
                f"train everything"
            )
        if not 0 <= n_layers <= len(layers):
            raise ValueError(
                f"n_layers must be None (train everything) or "
                f"0..{len(layers)}, got {n_layers}"
            )
    for p in model.parameters():
        p.requires_grad_(n_layers is None)
    if n_layers is not None:
        top = list(layers)[len(layers) - n_layers :]
        pooler = (
            [encoder.pooler]
            if n_layers > 0 and getattr(encoder, "pooler", None)
            else []
        )
        head = [m for m in model.children() if m is not encoder]
        for module in head + top + pooler:
            module.requires_grad_(True)
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


# %% [markdown]
# The loop itself is the pretraining loop of chapter 9 with BERT's fine-tuning settings: AdamW
# with weight decay 0.01 (not on biases and LayerNorm weights: `make_optimizer`), the learning
# rate warmed up linearly over the first 10% of the steps and then decayed linearly to zero
# (`linear_warmup_decay`), gradients clipped to norm 1.0, and a fresh random order of the
# training features every epoch. A loss that is no longer finite (a learning rate far too large)
# stops the loop with an error before it updates the weights, rather than training on NaN. `predict`
# returns the logits of every feature with its padding removed, in the order of the features (it
# batches them by length, to pad less).

# %% tags=["export:finetuning.finetune_loop"]
from tinybert.finetuning.features import batches  # built above


@dataclass
class FinetuneResult:
    # training loss of every step
    losses: list[float] = field(default_factory=list)
    # learning rate of every step
    learning_rates: list[float] = field(default_factory=list)
    # wall-clock time of the training
    seconds: float = 0.0
    trainable_parameters: int = 0


def finetune(
    model: nn.Module,
    features: list[dict],
    *,
    pad_id: int,
    epochs: int = 3,
    batch_size: int = 32,
    lr: float,
    weight_decay: float = 0.01,
    warmup_fraction: float = 0.1,
    max_grad_norm: float = 1.0,
    seed: int = 0,
    desc: str | None = None,
) -> FinetuneResult:
    """Train ``model`` (a head over an encoder) on ``features``; a progress bar when
    ``desc``. The learning rate has no default: each task picks its own from a grid.
    A NaN or infinite loss raises FloatingPointError before the update."""
    for name, count in (("epochs", epochs), ("batch_size", batch_size)):
        if not isinstance(count, int) or count < 1:
            raise ValueError(f"{name}: expected an integer >= 1, got {count!r}")
    for name, number in (("lr", lr), ("max_grad_norm", max_grad_norm)):
        if not 0 < number < math.inf:
            raise ValueError(
                f"{name}: expected a positive finite number, got {number!r}"
            )
    if not 0 <= warmup_fraction < 1:
        raise ValueError(
            f"warmup_fraction: expected a number in [0, 1), got {warmup_fraction!r}"
        )
    device = next(model.parameters()).device
    total_steps = epochs * math.ceil(len(features) / batch_size)
    optimizer = make_optimizer(model, lr=lr, weight_decay=weight_decay)
    scheduler = linear_warmup_decay(
        optimizer,
        warmup_steps=round(warmup_fraction * total_steps),
        total_steps=total_steps,
    )
    trainable = [p for p in model.parameters() if p.requires_grad]
    result = FinetuneResult(trainable_parameters=sum(p.numel() for p in trainable))
    generator = torch.Generator().manual_seed(seed)
    bar = progress(total=total_steps, desc=desc, updates=2) if desc else None
    start = time.perf_counter()
    model.train()
    for _ in range(epochs):
        for batch in batches(
            features, batch_size, pad_id, shuffle=True, generator=generator
        ):
            loss = model(**{key: value.to(device) for key, value in batch.items()}).loss
            result.losses.append(loss.item())
            if not math.isfinite(result.losses[-1]):  # diverged: stop, do not update
                raise FloatingPointError(
                    f"step {len(result.losses)} of {total_steps}: the training loss is "
                    f"{result.losses[-1]} with lr = {lr:g}; lower the learning rate"
                )
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            nn.utils.clip_grad_norm_(trainable, max_grad_norm)
            result.learning_rates.append(optimizer.param_groups[0]["lr"])
            optimizer.step()
            scheduler.step()
            if bar is not None:
                bar.update()
    if bar is not None:
        bar.close()
    model.eval()
    result.seconds = time.perf_counter() - start
    return result


@torch.no_grad()
def predict(
    model: nn.Module, features: list[dict], *, pad_id: int, batch_size: int = 64
) -> list[torch.Tensor]:
    """The logits of every feature, padding removed: (C,) for a sequence, (T, C) for
    tokens, (T, 2) start and end scores for a question-answering window."""
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size: expected an integer >= 1, got {batch_size!r}")
    device = next(model.parameters()).device
    model.eval()
    # less padding
    by_length = sorted(
        range(len(features)), key=lambda i: len(features[i]["input_ids"])
    )
    outputs: list[torch.Tensor | None] = [None] * len(features)
    for start in range(0, len(features), batch_size):
        chunk = by_length[start : start + batch_size]
        batch = pad_features([features[i] for i in chunk], pad_id)
        mask = batch["attention_mask"]
        out = model(
            batch["input_ids"].to(device),
            batch["token_type_ids"].to(device),
            mask.to(device),
        )
        if hasattr(out, "logits"):
            # (B, C) or (B, T, C)
            logits = out.logits
        else:
            # (B, T, 2)
            logits = torch.stack([out.start_logits, out.end_logits], dim=-1)
        logits = logits.float().cpu()
        for i, row, length in zip(chunk, logits, mask.sum(dim=1).tolist()):
            outputs[i] = row if row.dim() == 1 else row[:length]
    return outputs


# %% [markdown]
# (sec-ft-banking)=
# ## Sentence classification: Banking77
#
# Banking77 {cite}`casanueva2020efficient` holds 13,083 short customer questions to an online bank,
# each labelled with one of 77 fine-grained intents (`card_arrival`, `exchange_rate`,
# `lost_or_stolen_card`, ...). It comes as a training and a test file and no validation set, so
# we hold one out of the training file, deterministically and in every intent alike: of each
# intent's examples, in file order, every tenth.

# %% tags=["export:finetuning.text_tasks"]
from __future__ import annotations

import csv
import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from tinybert.data import fetch


# %% tags=["export:finetuning.text_tasks"]
@dataclass
class TextExample:
    """One example of sentence classification: a text and the index of its label."""

    text: str
    label: int


def read_labelled_csv(path: str | Path, label_names: list[str]) -> list[TextExample]:
    """A ``text,category`` CSV file (Banking77's format); every category must be a
    known label."""
    index = {name: i for i, name in enumerate(label_names)}
    examples = []
    with open(path, newline="", encoding="utf-8") as f:
        # texts may be quoted and contain commas or newlines
        reader = csv.reader(f)
        header = next(reader, None)
        if header != ["text", "category"]:
            raise ValueError(
                f"{path}: expected the header ['text', 'category'], got {header}"
            )
        for row in reader:
            if len(row) != 2:
                raise ValueError(
                    f"{path}, line {reader.line_num}: expected 2 columns, got {row}"
                )
            text, category = row
            if category not in index:
                raise ValueError(
                    f"{path}, line {reader.line_num}: the label "
                    f"{category!r} is not one of the {len(index)} known "
                    f"labels (such as {label_names[0]!r})"
                )
            examples.append(TextExample(text, index[category]))
    return examples


def read_banking77(split: str) -> tuple[list[TextExample], list[str]]:
    """Banking77's "train" or "test" examples and its 77 label names (from
    categories.json)."""
    if split not in ("train", "test"):
        raise ValueError(
            f"Banking77 has the splits 'train' and 'test' (hold a "
            f"validation set out of train with holdout_split), "
            f"got {split!r}"
        )
    label_names = json.loads(fetch("banking77/categories").read_text(encoding="utf-8"))
    return read_labelled_csv(fetch(f"banking77/{split}"), label_names), label_names


def holdout_split(examples: list[TextExample], every: int = 10) -> tuple[list, list]:
    """Hold out a validation set, deterministically and per label: the k-th example of
    each label (k = 0, 1, 2, ... in file order) goes to validation when k % every ==
    every - 1."""
    if every < 2:
        raise ValueError(
            f"every must be at least 2 (1 would hold out everything), got {every}"
        )
    seen, kept, held_out = Counter(), [], []
    for example in examples:
        (held_out if seen[example.label] % every == every - 1 else kept).append(example)
        seen[example.label] += 1
    return kept, held_out


def evenly_spaced(items: list, n: int | None) -> list:
    """``n`` items spread evenly through the list, first included, in order
    (all for None).

    A subset of a file sorted by label keeps every label this way, without any
    randomness."""
    if n is None or n >= len(items):
        return list(items)
    if n < 0:
        raise ValueError(f"n must be None or at least 0, got {n}")
    return [items[i * len(items) // n] for i in range(n)]


def per_label(examples: list, k: int) -> list:
    """``k`` examples of every label (evenly spread through that label's examples), in
    file order: the few-shot training sets of the transfer ladder. Labels with fewer
    keep all."""
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    by_label: dict[int, list[int]] = {}
    for i, example in enumerate(examples):
        by_label.setdefault(example.label, []).append(i)
    return [
        examples[i]
        for i in sorted(j for ids in by_label.values() for j in evenly_spaced(ids, k))
    ]


# %%
banking_train_all, intents = read_banking77("train")
banking_test, _ = read_banking77("test")
banking_train, banking_valid = holdout_split(banking_train_all)
per_intent = torch.bincount(
    torch.tensor([e.label for e in banking_train]), minlength=len(intents)
)
print(
    f"{len(intents)} intents; train {len(banking_train):,}, validation "
    f"{len(banking_valid):,}, test {len(banking_test):,}; training examples per "
    f"intent: {per_intent.min()} to {per_intent.max()}"
)
for example in banking_train[:3]:
    print(f"  {intents[example.label]:<14} {example.text}")
assert len(banking_train) + len(banking_valid) == len(banking_train_all) == 10_003
assert len(intents) == 77 and len(banking_test) == 3_080

# %% [markdown]
# {numref}`fig-ft-sentence` shows the set-up for the first training question: the encoder reads
# `[CLS] text [SEP]`, and a new layer on the pooled `[CLS]` vector gives one score per intent.

# %% mystnb={"figure": {"caption": "Sentence classification on Banking77, drawn for the course's pretrained encoder and the first training question, tokenized by its tokenizer. Only the `[CLS]` position is read (the other vectors, dashed, are not): the pooler and one new linear layer give one score per intent.", "name": "fig-ft-sentence"}, "image": {"alt": "Diagram drawn bottom to top. The tokens of a Banking77 question, between [CLS] and [SEP], go into the pretrained encoder (its N layers, D and H are given); it gives one vector h per token. Only the vector of [CLS] is used: it goes into the pooler (tanh of W h plus b) and a linear layer from D to 77, giving one score per class; the label of the example, an intent name, is written beside it. The other vectors are drawn dashed."}} tags=["diagram", "hide-input"]
from tinybert.diagrams import sentence_classification_diagram

banking_shown = banking_train[0]
banking_ids, banking_types = encode_pair(
    tokenizer.encode(banking_shown.text).ids, None, special, config.max_len
)
sentence_classification_diagram(
    config,
    [tokenizer.id_to_token[i] for i in banking_ids],
    banking_types,
    n_labels=len(intents),
    label=intents[banking_shown.label],
)

# %% [markdown]
# A label that is not one of the 77 is an error that names the file, the line and the label,
# instead of a silent new class or a crash later in the loss:

# %%
with tempfile.TemporaryDirectory() as folder:
    bad_file = Path(folder) / "bad.csv"
    bad_file.write_text(
        'text,category\nWhere is my card?,card_arrival\n"Pizza, please",order_pizza\n'
    )
    try:
        read_labelled_csv(bad_file, intents)
    except ValueError as error:
        print(f"ValueError: {error}")

# %% [markdown]
# (sec-ft-metrics)=
# ### Metrics: accuracy and the confusion matrix
#
# Accuracy is the fraction of examples whose most likely class is the true one. It says how
# often the model is right, not where it is wrong; for that, the **confusion matrix** counts,
# for every pair of classes $(i, j)$, how many examples of true class $i$ were predicted as
# class $j$. Its diagonal holds the correct predictions, each row sums to the number of examples
# of that class, and the diagonal divided by the row sums is the accuracy *per class* (its
# recall). The same functions serve token classification: positions labelled -100 are skipped.

# %% tags=["export:finetuning.metrics"]
from __future__ import annotations

import re
import string
from collections import Counter

import torch

from tinybert.models.bert_heads import IGNORE_INDEX


# %% tags=["export:finetuning.metrics"]
def _labelled(predictions, labels) -> tuple[torch.Tensor, torch.Tensor]:
    """The predictions and labels at the positions whose label is not IGNORE_INDEX,
    flattened."""
    predictions, labels = torch.as_tensor(predictions), torch.as_tensor(labels)
    if predictions.shape != labels.shape:
        raise ValueError(
            f"predictions and labels must have the same shape, got "
            f"{tuple(predictions.shape)} and {tuple(labels.shape)}"
        )
    keep = labels != IGNORE_INDEX
    return predictions[keep], labels[keep]


def accuracy(predictions, labels) -> float:
    """The fraction of labelled positions that are predicted correctly (-100 labels are
    skipped)."""
    predictions, labels = _labelled(predictions, labels)
    if labels.numel() == 0:
        raise ValueError("accuracy of nothing: there are no labels other than -100")
    return (predictions == labels).double().mean().item()


def confusion_matrix(predictions, labels, n_classes: int) -> torch.Tensor:
    """counts[i, j] = how many positions of true class i were predicted as class j."""
    predictions, labels = _labelled(predictions, labels)
    for name, values in (("predictions", predictions), ("labels", labels)):
        if values.numel() and (values.min() < 0 or values.max() >= n_classes):
            raise ValueError(
                f"{name} must be class indices in 0..{n_classes - 1} "
                f"(labels may also be -100), got values from "
                f"{values.min().item()} to {values.max().item()}"
            )
    # (N,) row-major cell index
    flat = labels.long() * n_classes + predictions.long()
    return torch.bincount(flat, minlength=n_classes * n_classes).view(
        n_classes, n_classes
    )


def per_class_accuracy(confusion: torch.Tensor) -> torch.Tensor:
    """For each true class, the fraction predicted correctly (its recall); NaN for an
    absent class."""
    return confusion.diagonal().double() / confusion.sum(dim=1).double()  # 0 / 0 = nan


# %%
predictions, labels = (
    torch.tensor([0, 2, 1, 1, 0, 2]),
    torch.tensor([0, 1, 1, 1, 2, -100]),
)
counts = confusion_matrix(predictions, labels, 3)
print(
    counts.tolist(),
    f"accuracy {accuracy(predictions, labels):.2f}",
    "per class",
    per_class_accuracy(counts).tolist(),
)
assert counts.tolist() == [[1, 0, 0], [0, 2, 1], [1, 0, 0]]
assert accuracy(predictions, labels) == 3 / 5
assert per_class_accuracy(counts).tolist() == [1.0, 2 / 3, 0.0]

# %% [markdown]
# (sec-ft-banking-run)=
# ### Fine-tuning on Banking77
#
# To keep the chapter's run time to minutes on a laptop CPU, the experiments train on an evenly
# spread subset of the training set (the same number of examples from every intent) and compare
# settings on a subset of the validation set; the final model is also scored on the whole test
# set. `evenly_spaced` takes the subsets without randomness. With so few examples per intent,
# the 2 to 4 epochs that suit BERT-base on thousands of examples are too few passes for a small
# model, so we train for more, with the smaller of the paper's batch sizes, 16.

# %%
# 4 per intent; the full set has about 117
N_TRAIN = pick(quick=16, full=4 * len(intents))
N_VALID = pick(quick=16, full=6 * len(intents))  # to compare settings
N_TEST = pick(quick=16, full=None)  # None = the whole test set
EPOCHS, BATCH_SIZE, LR = pick(quick=1, full=8), pick(quick=8, full=16), 3e-4
# the checkpoint learned MLM alone: its pooler was never trained (chapter 9)
POOLING = "mean"

banking_subset = evenly_spaced(banking_train, N_TRAIN)
valid_subset = evenly_spaced(banking_valid, N_VALID)
test_subset = evenly_spaced(banking_test, N_TEST)
train_features = encode_sentences(tokenizer, banking_subset)
valid_features = encode_sentences(tokenizer, valid_subset)
test_features = encode_sentences(tokenizer, test_subset)
valid_labels = torch.tensor([e.label for e in valid_subset])
test_labels = torch.tensor([e.label for e in test_subset])
lengths = torch.tensor([len(f["input_ids"]) for f in train_features]).float()
print(
    f"training on {len(train_features):,} examples "
    f"({len(train_features) / len(intents):.1f} per intent) for {EPOCHS} epoch(s); "
    f"{len(valid_features):,} validation and {len(test_features):,} test examples; "
    f"{lengths.mean():.1f} tokens per example on average, at most "
    f"{lengths.max():.0f}"
)


def padding_share(batch_list) -> float:
    return sum((~b["attention_mask"]).sum().item() for b in batch_list) / sum(
        b["attention_mask"].numel() for b in batch_list
    )


in_random_order = [
    pad_features([train_features[i] for i in chunk.tolist()], PAD)
    for chunk in torch.randperm(
        len(train_features), generator=torch.Generator().manual_seed(0)
    ).split(BATCH_SIZE)
]
grouped = list(
    batches(
        train_features,
        BATCH_SIZE,
        PAD,
        shuffle=True,
        generator=torch.Generator().manual_seed(0),
    )
)
print(
    f"share of padding: {padding_share(in_random_order):.0%} in random batches, "
    f"{padding_share(grouped):.0%} in length-grouped ones"
)


def banking_run(
    encoder: torch.nn.Module,
    *,
    n_layers: int | None = None,
    lr: float = LR,
    desc: str | None = None,
):
    """Fine-tune a new classifier over ``encoder`` on the training subset; score it on
    validation."""
    seed_everything(0)
    model = SequenceClassifier(encoder, len(intents), pooling=POOLING).to(device)
    set_trainable_layers(model, n_layers)
    result = finetune(
        model,
        train_features,
        pad_id=PAD,
        epochs=EPOCHS,
        batch_size=BATCH_SIZE,
        lr=lr,
        desc=desc,
    )
    predictions = torch.stack(predict(model, valid_features, pad_id=PAD)).argmax(dim=-1)
    return model, result, accuracy(predictions, valid_labels)


banking_model, banking_result, banking_accuracy = banking_run(
    fresh_encoder(), desc="Banking77"
)
# (N, 77)
test_logits = torch.stack(predict(banking_model, test_features, pad_id=PAD))
test_accuracy = accuracy(test_logits.argmax(dim=-1), test_labels)
print(
    f"{banking_result.seconds:.0f} s of training; validation accuracy "
    f"{banking_accuracy:.1%}, test accuracy {test_accuracy:.1%} (guessing: "
    f"{1 / len(intents):.1%})"
)

# %% [markdown]
# Grouping features of similar length into the same batch (see `batches`) is free accuracy-wise
# and saves most of the padding, which would otherwise cost as much computation as real tokens.
# The loss curve and the learning-rate schedule of the run:

# %% mystnb={"image": {"alt": "Two line plots of the Banking77 fine-tuning run against the step: left, the training loss, falling; right, the learning rate, rising linearly through the warm-up and then decaying linearly to zero."}}
fig, (ax_loss, ax_lr) = plt.subplots(1, 2, figsize=(9, 3))
ax_loss.plot(banking_result.losses, lw=1)
ax_loss.set(
    xlabel="step", ylabel="training loss", title="Banking77, pretrained bert-mini"
)
ax_lr.plot(banking_result.learning_rates)
ax_lr.set(xlabel="step", ylabel="learning rate", title="linear warm-up and decay")
plt.tight_layout()
plt.show()

# %% [markdown]
# **Where it goes wrong.** The cell lists the largest off-diagonal cells of the confusion matrix
# over the 77 intents (the pairs confused most often), the intents with the lowest accuracy, and
# the mistakes made with the most confidence. Look for near-synonyms among the confused pairs:
# several intents differ by one detail (a card that has not arrived, and when a card will be
# delivered), which is exactly what a weak model blurs.

# %% mystnb={"image": {"alt": "Grey-scale heat map of the row-normalised Banking77 test confusion matrix, true intent down and predicted intent across; the dark diagonal is the correct answers, dark cells off it the intents the model confuses."}}
test_predictions = test_logits.argmax(dim=-1)
confusion = confusion_matrix(test_predictions, test_labels, len(intents))
mistakes = confusion.clone().fill_diagonal_(0)
top = mistakes.flatten().topk(5)
print("most frequent confusions (true -> predicted):")
for count, index in zip(top.values.tolist(), top.indices.tolist()):
    true, predicted = divmod(index, len(intents))
    print(f"  {count:3d} x {intents[true]} -> {intents[predicted]}")
per_intent_accuracy = per_class_accuracy(confusion)
# intents absent from the subset last
order = per_intent_accuracy.nan_to_num(2.0).argsort()
print(
    "lowest accuracy:",
    ", ".join(f"{intents[i]} {per_intent_accuracy[i]:.0%}" for i in order[:4].tolist()),
)
probabilities = test_logits.softmax(dim=-1)
confidence = probabilities.max(dim=-1).values.masked_fill(
    test_predictions == test_labels, -1.0
)
print("most confident mistakes:")
for i in confidence.topk(min(3, len(confidence))).indices.tolist():
    print(
        f"  {probabilities[i].max():.0%} {intents[test_predictions[i]]!r} for "
        f"{test_subset[i].text!r} (true: {intents[test_labels[i]]!r})"
    )

plt.figure(figsize=(4.5, 4))
plt.imshow(confusion / confusion.sum(dim=1, keepdim=True).clamp(min=1), cmap="Greys")
plt.xlabel("predicted intent")
plt.ylabel("true intent")
plt.title("Banking77 test confusions (row-normalised)")
plt.colorbar()
plt.show()

# %% [markdown]
# (sec-ft-approaches)=
# ### Full, partial or frozen
#
# Ozdemir's three approaches, with the same data, epochs and seed: update everything; update
# the top two of the four encoder layers (and the pooler); freeze the encoder and train the
# linear head alone. A frozen encoder is a fixed feature extractor, and a linear layer on fixed
# features wants a larger learning rate than fine-tuning, so the head alone gets ten times the
# rate.

# %%
approach_rows = [
    ("update everything", LR, banking_model, banking_result, banking_accuracy)
]
for name, n_layers, lr in [("top 2 layers + head", 2, LR), ("head only", 0, 10 * LR)]:
    model, result, valid_accuracy = banking_run(
        fresh_encoder(), n_layers=n_layers, lr=lr
    )
    approach_rows.append((name, lr, model, result, valid_accuracy))

# The cost of one training step (forward and backward on the same batch), timed
# in interleaved
# rounds so that a slow moment of the machine does not favour one approach.
step_batch = {
    k: v.to(device) for k, v in pad_features(train_features[:BATCH_SIZE], PAD).items()
}
step_seconds = {name: [] for name, *_ in approach_rows}
for _ in range(pick(quick=2, full=10)):
    for name, _, model, _, _ in approach_rows:
        model.train()
        start = time.perf_counter()
        model(**step_batch).loss.backward()
        step_seconds[name].append(time.perf_counter() - start)
        model.zero_grad(set_to_none=True)
step_time = {
    name: torch.tensor(times).median().item() for name, times in step_seconds.items()
}

print(
    f"{'approach':<22}{'lr':>7}{'trainable':>12}{'time per step':>15}{'accuracy':>10}"
)
for name, lr, model, result, valid_accuracy in approach_rows:
    print(
        f"{name:<22}{lr:>7.0e}{result.trainable_parameters:>12,}"
        f"{step_time[name] / step_time['update everything']:>14.2f}x"
        f"{valid_accuracy:>10.1%}"
    )

# %% [markdown]
# Time per step is relative to updating everything, measured in the same run. Freezing saves the
# backward pass through the frozen layers (and their optimiser updates, not timed here), but the
# forward pass through the whole encoder remains; a frozen model could go further and compute the
# encoder's vectors once and reuse them every epoch, since they never change. What freezing costs in accuracy depends
# on how good the frozen features are: the head alone can only separate the intents as well as
# the means of the pretrained encoder's final vectors (the chapter's `POOLING`) do.
#
# (sec-ft-lr)=
# ### Learning rates
#
# The BERT paper's grid, 5e-5, 3e-5 and 2e-5, was chosen for BERT-base and BERT-large fine-tuned
# for 2 to 4 epochs on up to hundreds of thousands of examples. Our models are smaller and see a
# few hundred steps, so the grid goes higher. A sweep over learning rates costs one fine-tuning
# run per rate, per encoder and per task, more than this chapter's time budget, so
# `experiments/transfer_sweep.py` ran it once (the command is in its output file) for the three
# encoders of the next chapter's transfer ladder ({ref}`sec-ft-gain`), with one seed, scoring
# each run on the validation split. The cell reads its results. The course checkpoint's tagger below uses the rate it prefers on
# part-of-speech tags, and the other tasks of this chapter the rate it prefers on Banking77.

# %% mystnb={"image": {"alt": "Two line plots of validation accuracy against the peak learning rate, Banking77 and part-of-speech tags, one line per encoder, the BERT paper's grid shaded; the two small encoders do best near 1e-3, far above that grid."}}
import json

from tinybert.shipped import load_result

# the sweep's output ships inside the package (tinybert/shipped/results/);
# chapter 11 checks that it ran with the ladder's settings
sweep = load_result("transfer_sweep")
print("\n".join(sweep["commands"]))
fig, axes = plt.subplots(1, 2, figsize=(9, 3), sharey=False)
for ax, task in zip(axes, ["banking77", "ud_pos"]):
    for arm, by_lr in sweep[task].items():
        rates = sorted(by_lr, key=float)
        ax.semilogx(
            [float(r) for r in rates], [100 * by_lr[r] for r in rates], "o-", label=arm
        )
    ax.axvspan(2e-5, 5e-5, color="0.9", label="the BERT paper's grid")
    ax.set(xlabel="peak learning rate", ylabel="validation accuracy (%)", title=task)
axes[0].legend(fontsize=8)
plt.tight_layout()
plt.show()
best_rates = {
    task: {arm: float(max(by_lr, key=by_lr.get)) for arm, by_lr in sweep[task].items()}
    for task in ["banking77", "ud_pos"]
}
best_lr = best_rates["banking77"]["course checkpoint"]
for task, rates in best_rates.items():
    print(task + ": " + ", ".join(f"{arm} {lr:.0e}" for arm, lr in rates.items()))

# %% [markdown]
# A rate is not a property of the method but of the model, the data and the number of steps:
# tune it on a validation set, as the paper did, rather than copying it. Too small a rate moves
# the weights too little in a short run; too large a rate destroys what pretraining put in them.
# {cite}`sun2019fine` saw the second with BERT-base on text classification, which failed to
# converge at 4e-4 while 2e-5 worked. The two small encoders, whose weights start small and
# which see few steps, want rates near 1e-3.
#
# (sec-ft-pos)=
# ## Token classification: part-of-speech tags
#
# The English Web Treebank {cite}`silveira2014gold`, in its Universal Dependencies version
# {cite}`nivre2020universal`, tags every word of 16,622 sentences from blogs, newsgroups, emails,
# reviews and question-answer sites with one of 17 universal part-of-speech (UPOS) tags. It comes
# in the CoNLL-U format: one line per word with ten tab-separated columns (ID, FORM, LEMMA,
# UPOS, ...), comment lines starting with `#`, and a blank line after each sentence. Two kinds of
# line are not words of the text: a *multiword token* such as "don't", written once with an ID
# range (`3-4`) and then as its two syntactic words "do" and "n't", and *empty nodes* (ID `8.1`)
# that annotators added for elided words. We keep the syntactic words and skip both. The
# readers of word-tagging files go to `tinybert.finetuning.tagging_tasks`. The named-entity
# files {ref}`below <sec-ft-ner>` are laid out the same way, so one function,
# `_read_tagged_lines`, walks both kinds of file (skipping comments, ending a sentence at each
# blank line, naming the file and line in every error) and each reader passes it a `read_word`
# that says only what one word line holds.

# %% tags=["export:finetuning.tagging_tasks"]
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

# %% tags=["export:finetuning.tagging_tasks"]
# the 17 universal POS tags
UPOS_TAGS = tuple(
    "ADJ ADP ADV AUX CCONJ DET INTJ NOUN NUM PART PRON PROPN PUNCT "
    "SCONJ SYM VERB X".split()
)


@dataclass
class TaggedSentence:
    """A sentence as words, and for each word the index of its tag in the task's tag
    list (UPOS_TAGS for parts of speech, NER_TAGS for named entities)."""

    words: list[str]
    tags: list[int]


def _read_tagged_lines(
    path: str | Path, read_word, limit: int | None = None
) -> list[TaggedSentence]:
    """The sentences of a file of one word per line (the first ``limit``, or all): lines
    starting with # are comments, and a blank line ends a sentence.

    ``read_word(line)`` returns a word line's word and tag index, or None for a line
    that is no word; the file and line number are put in front of its ValueErrors.
    """
    sentences, words, tags = [], [], []
    with open(path, encoding="utf-8") as f:
        for line_number, line in enumerate(f, start=1):
            line = line.rstrip("\n")
            # sent_id, text, newdoc ...
            if line.startswith("#"):
                continue
            # a blank line ends a sentence
            if not line:
                if words:
                    sentences.append(TaggedSentence(words, tags))
                    words, tags = [], []
                if limit is not None and len(sentences) >= limit:
                    return sentences
                continue
            try:
                word = read_word(line)
            except ValueError as error:
                raise ValueError(f"{path}, line {line_number}: {error}") from None
            if word is not None:
                words.append(word[0])
                tags.append(word[1])
    # no blank line at the end
    if words:
        sentences.append(TaggedSentence(words, tags))
    return sentences[:limit]


def read_conllu(path: str | Path, limit: int | None = None) -> list[TaggedSentence]:
    """The words and UPOS tags of a CoNLL-U file (the first ``limit``
    sentences, or all).

    Multiword-token lines (ID ``3-4``: "don't" written once, split into do + n't) and
    empty nodes (ID ``8.1``: words the annotators restored) carry no UPOS of a written
    word: skipped.
    """
    index = {tag: i for i, tag in enumerate(UPOS_TAGS)}

    def read_word(line: str) -> tuple[str, int] | None:
        columns = line.split("\t")
        if len(columns) != 10:
            raise ValueError(
                f"a CoNLL-U word line has 10 tab-separated columns, got {len(columns)}"
            )
        token_id, form, upos = columns[0], columns[1], columns[3]
        if "-" in token_id or "." in token_id:
            return None
        if upos not in index:
            raise ValueError(f"{upos!r} is not a UPOS tag")
        return form, index[upos]

    return _read_tagged_lines(path, read_word, limit)


# %%
pos_train_all = read_conllu(fetch("ud_ewt/train"))
pos_dev_all = read_conllu(fetch("ud_ewt/dev"))
print(
    f"train {len(pos_train_all):,} sentences, "
    f"{sum(len(s.words) for s in pos_train_all):,} words; dev {len(pos_dev_all):,} "
    f"sentences, {sum(len(s.words) for s in pos_dev_all):,} words"
)
sentence = next(s for s in pos_train_all if "n't" in s.words and len(s.words) < 12)
print(" ".join(f"{w}/{UPOS_TAGS[t]}" for w, t in zip(sentence.words, sentence.tags)))
assert (
    len(pos_train_all) == 12_544 and sum(len(s.words) for s in pos_train_all) == 204_577
)


# %% [markdown]
# **One label per word, many pieces per word.** The tokenizer cuts a rare word into several word
# pieces, but the tag belongs to the word. The usual rule, and the BERT paper's for named
# entities, is to put the word's label on its **first** piece and label the other pieces -100,
# so that they carry no loss and are not scored; the prediction for a word is read from its first
# piece. Each word is tokenized on its own, which keeps the word boundaries exact; a word that
# normalises to nothing (a stray control character) becomes `[UNK]` so that it keeps its tag. A
# sentence longer than the model's `max_len` pieces loses its last words, and `encode_tagged`
# says how many.

# %% tags=["export"]
def first_piece_labels(
    word_pieces: list[list[int]], word_labels: list[int]
) -> tuple[list[int], list[int]]:
    """Flatten the pieces of every word; each word's label goes on its first piece, -100
    on the others."""
    if len(word_pieces) != len(word_labels):
        raise ValueError(
            f"one label per word: got {len(word_pieces)} words and "
            f"{len(word_labels)} labels"
        )
    ids, labels = [], []
    for pieces, label in zip(word_pieces, word_labels):
        if not pieces:
            raise ValueError(
                "every word needs at least one piece (use [UNK] for a "
                "word that tokenizes to nothing)"
            )
        ids += pieces
        labels += [label] + [IGNORE_INDEX] * (len(pieces) - 1)
    return ids, labels


def encode_tagged(
    tokenizer, sentences, *, max_len: int = 128
) -> tuple[list[dict], int]:
    """Features for token classification, and how many words were cut because their
    sentence had more than max_len - 2 pieces (they get no label)."""
    special = SpecialTokens.from_vocab(tokenizer.vocab)
    features, words_cut = [], 0
    for sentence in sentences:
        word_pieces = [
            tokenizer.encode(word).ids or [special.unk] for word in sentence.words
        ]
        ids, labels = first_piece_labels(word_pieces, sentence.tags)
        if len(ids) > max_len - 2:
            words_cut += sum(label != IGNORE_INDEX for label in labels[max_len - 2 :])
            ids, labels = ids[: max_len - 2], labels[: max_len - 2]
        input_ids, token_type_ids = encode_pair(ids, None, special, max_len)
        features.append(
            {
                "input_ids": input_ids,
                "token_type_ids": token_type_ids,
                # none on [CLS], [SEP]
                "labels": [IGNORE_INDEX, *labels, IGNORE_INDEX],
            }
        )
    return features, words_cut


# %%
long_word = max(sentence.words, key=lambda w: len(tokenizer.encode(w)))
(feature,), _ = encode_tagged(tokenizer, [sentence])
pieces = [tokenizer.id_to_token[i] for i in feature["input_ids"]]
print(
    " ".join(
        f"{p}/{UPOS_TAGS[l] if l >= 0 else '-'}"
        for p, l in zip(pieces, feature["labels"])
    )
)
assert sum(l != -100 for l in feature["labels"]) == len(sentence.words)

# %% [markdown]
# {numref}`fig-ft-tokens` draws the same sentence going through a tagger: every position gets 17
# scores from one shared layer, and each word's tag is read from its first piece.

# %% mystnb={"figure": {"caption": "Token classification for part-of-speech tags, drawn for the course's encoder and the sentence above (a long one is cut, \"\u2026\", before its last token). One linear layer, the same at every position, gives each token one score per tag; a word's label and prediction sit on its first piece, and the vectors of `[CLS]`, `[SEP]` and later pieces (dashed) carry no label.", "name": "fig-ft-tokens"}, "image": {"alt": "Diagram drawn bottom to top. The word pieces of the sentence, between [CLS] and [SEP], go into the pretrained encoder, which gives one vector h per piece. A wide box, the same linear layer from D to 17 at every token, is fed by the vectors of the first piece of each word; above each of those pieces an arrow leads to the word's tag, such as PRON, AUX or VERB. The vectors of [CLS], [SEP] and of later pieces of a word are dashed and carry no tag."}} tags=["diagram", "hide-input"]
from tinybert.diagrams import token_classification_diagram

token_classification_diagram(
    config,
    pieces,
    feature["token_type_ids"],
    n_labels=len(UPOS_TAGS),
    labels=[UPOS_TAGS[l] if l >= 0 else None for l in feature["labels"]],
)

# %% [markdown]
# Before fine-tuning, a baseline that needs no model at all: tag every word with the tag it had
# most often in the training sentences, and words never seen there with the most frequent tag
# overall. Both the baseline and the model learn from the same training subset.

# %%
pos_train = evenly_spaced(pos_train_all, pick(quick=16, full=400))
pos_dev = evenly_spaced(pos_dev_all, pick(quick=8, full=500))
pos_train_features, cut_train = encode_tagged(
    tokenizer, pos_train, max_len=config.max_len
)
pos_dev_features, cut_dev = encode_tagged(tokenizer, pos_dev, max_len=config.max_len)
dev_labels = torch.tensor([t for s in pos_dev for t in s.tags])

tag_counts = {}
for s in pos_train:
    for word, tag in zip(s.words, s.tags):
        tag_counts.setdefault(word.lower(), Counter())[tag] += 1
overall = Counter(t for s in pos_train for t in s.tags).most_common(1)[0][0]
baseline = torch.tensor(
    [
        tag_counts[w.lower()].most_common(1)[0][0]
        if w.lower() in tag_counts
        else overall
        for s in pos_dev
        for w in s.words
    ]
)
baseline_accuracy = accuracy(baseline, dev_labels)
print(
    f"{len(pos_train)} training sentences ({cut_train} words cut), {len(pos_dev)} "
    f"dev sentences ({cut_dev} cut); most-frequent-tag baseline: "
    f"{baseline_accuracy:.1%} on dev"
)

# %% mystnb={"image": {"alt": "Bar chart of part-of-speech accuracy per tag, the most-frequent-tag baseline in grey beside the fine-tuned bert-mini, each tag with its number of words; closed-class tags are easy for both, open and rare tags show what context adds."}}
seed_everything(0)
tagger = TokenClassifier(fresh_encoder(), len(UPOS_TAGS)).to(device)
pos_lr = best_rates["ud_pos"]["course checkpoint"]  # chosen on validation
tagger_result = finetune(
    tagger,
    pos_train_features,
    pad_id=PAD,
    epochs=pick(quick=1, full=6),
    batch_size=BATCH_SIZE,
    lr=pos_lr,
    desc="UD POS",
)
# (T_i, 17) each
dev_logits = predict(tagger, pos_dev_features, pad_id=PAD)
first_pieces = [torch.tensor(f["labels"]) != -100 for f in pos_dev_features]
word_predictions = torch.cat(
    [logits.argmax(dim=-1)[keep] for logits, keep in zip(dev_logits, first_pieces)]
)
kept_labels = torch.cat(
    [torch.tensor(f["labels"])[keep] for f, keep in zip(pos_dev_features, first_pieces)]
)
pos_accuracy = accuracy(word_predictions, kept_labels)
print(
    f"{tagger_result.seconds:.0f} s of training at lr {pos_lr:.0e}; "
    f"dev accuracy {pos_accuracy:.1%} (baseline {baseline_accuracy:.1%})"
)

pos_confusion = confusion_matrix(word_predictions, kept_labels, len(UPOS_TAGS))
per_tag = per_class_accuracy(pos_confusion).nan_to_num(0)
baseline_per_tag = per_class_accuracy(
    confusion_matrix(baseline, dev_labels, len(UPOS_TAGS))
).nan_to_num(0)
support = pos_confusion.sum(dim=1).tolist()
x = torch.arange(len(UPOS_TAGS)).float()
plt.figure(figsize=(9, 3))
plt.bar(
    x - 0.2, 100 * baseline_per_tag, width=0.4, label="most frequent tag", color="0.7"
)
plt.bar(x + 0.2, 100 * per_tag, width=0.4, label="fine-tuned bert-mini")
plt.xticks(x, [f"{tag}\n{n}" for tag, n in zip(UPOS_TAGS, support)], fontsize=7)
plt.ylabel("accuracy (%)")
plt.title("UD EWT dev: accuracy per tag (under each tag, its number of words)")
plt.legend(fontsize=8)
plt.show()

# %% [markdown]
# Closed-class tags (determiners, punctuation, pronouns, adpositions) are easy even for the
# baseline, since most of their words nearly always take the same tag. Open classes and rare tags
# (proper nouns, symbols, `X`, words that are a noun here and a verb there) depend on context,
# which is what a well-pretrained contextual encoder should bring; the plot shows, tag by tag,
# how far ours gets.
#
# (sec-ft-ner)=
# ## Named entities: BIO tags and entity-level scores
#
# Named-entity recognition is the token-classification task of the BERT paper (CoNLL-2003): find
# the names in a sentence and say what they name. A name can span several words ("Tampa Bay",
# "the European Union"), so the tags mark where an entity *begins* and where it *continues*:
# in the **BIO** scheme (also called IOB2) a word is `B-X` if it starts an entity of type X,
# `I-X` if it continues one, and `O` if it is outside every entity. "where can I get morcillas in
# tampa bay" is tagged `O O O O O O B-LOC I-LOC`.
#
# Universal NER {cite}`mayhew2024universal` annotates the same English Web Treebank sentences as
# the part-of-speech section with three types: persons (PER), organisations (ORG) and locations
# (LOC). The course's offline data holds its development and test files only (the training file
# is not redistributed with it), so here the development file is the **training** data and the
# test file the evaluation data; nothing is tuned on the test file, and each encoder's learning
# rate is the one that scored best on other sentences of the development file
# ({ref}`sec-ft-ner-ladder`). The files have the layout of the POS data, with a word and its
# BIO tag on each line, so the reader walks them with the same `_read_tagged_lines` and gives
# the same `TaggedSentence`.

# %% tags=["export:finetuning.tagging_tasks"]
NER_TAGS = ("O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC")  # Universal NER


def read_iob2(
    path: str | Path, tags: tuple[str, ...] = NER_TAGS
) -> list[TaggedSentence]:
    """The words and entity tags (indices into ``tags``) of an IOB2 file such as
    Universal NER's: comment lines start with #, each word line holds tab-separated
    columns (index, word, tag, then annotator columns), and a blank line ends a
    sentence."""
    index = {tag: i for i, tag in enumerate(tags)}

    def read_word(line: str) -> tuple[str, int]:
        columns = line.split("\t")
        if len(columns) < 3:
            raise ValueError(
                f"expected index, word and tag separated by tabs, got {line!r}"
            )
        if columns[2] not in index:
            raise ValueError(f"{columns[2]!r} is not one of the tags {', '.join(tags)}")
        return columns[1], index[columns[2]]

    return _read_tagged_lines(path, read_word)


# %%
# UNER's dev file: our training data
ner_train_all = read_iob2(fetch("uner_ewt/dev"))
ner_test_all = read_iob2(fetch("uner_ewt/test"))
example = next(s for s in ner_train_all if "B-LOC" in [NER_TAGS[t] for t in s.tags])
print(
    " ".join(
        w if t == 0 else f"{w}/{NER_TAGS[t]}"
        for w, t in zip(example.words, example.tags)
    )
)
for name, data in (("training (UNER dev)", ner_train_all), ("test", ner_test_all)):
    begins = Counter(
        NER_TAGS[t][2:] for s in data for t in s.tags if NER_TAGS[t][0] == "B"
    )
    print(
        f"{name}: {len(data):,} sentences, {sum(begins.values())} entities "
        f"({', '.join(f'{k} {v}' for k, v in sorted(begins.items()))})"
    )
assert len(ner_train_all) == 2_001 and len(ner_test_all) == 2_077


# %% [markdown]
# **Scoring entities, not tags.** Most words are `O`, so tag accuracy is high even for a model
# that finds no entity at all. The CoNLL shared task therefore scores whole entities: an entity
# of the prediction is correct only if a gold entity has the same type and the same first and
# last word. Precision is the share of predicted entities that are correct, recall the share of
# gold entities that are found, and F1 their harmonic mean, per type and over all entities
# pooled. A sequence that breaks the scheme, such as `O I-PER`, is read the way the CoNLL
# evaluation script reads it: an `I-X` that does not continue an X starts a new entity.

# %% tags=["export:finetuning.metrics"]
def entity_spans(tags: list[str]) -> set[tuple[str, int, int]]:
    """The entities in one sentence's IOB2 tags, as (type, first word, last word + 1).

    An entity starts at B-X, or at an I-X that does not continue an X (as the CoNLL
    script reads it), and takes in the I-X that follow."""
    spans, start, kind = set(), None, None
    # the final O ends the last entity
    for i, tag in enumerate([*tags, "O"]):
        prefix, _, label = tag.partition("-")
        if tag != "O" and (prefix not in ("B", "I") or not label):
            raise ValueError(
                f"IOB2 tags are 'O', 'B-TYPE' or 'I-TYPE', got {tag!r} at position {i}"
            )
        if start is not None and (prefix != "I" or label != kind):
            spans.add((kind, start, i))
            start = None
        if prefix == "B" or (prefix == "I" and start is None):
            start, kind = i, label
    return spans


def _prf(correct: int, predicted: int, gold: int) -> dict[str, float]:
    precision = correct / predicted if predicted else 0.0
    recall = correct / gold if gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if correct else 0.0
    return {"precision": precision, "recall": recall, "f1": f1, "support": gold}


def entity_scores(
    gold: list[list[str]], predicted: list[list[str]]
) -> dict[str, dict[str, float]]:
    """Entity-level precision, recall, F1 and support (gold entities) for every entity
    type, and pooled over all types under "overall" (micro-averaged)."""
    if len(gold) != len(predicted):
        raise ValueError(
            f"one predicted sequence per gold one: got {len(gold)} gold "
            f"and {len(predicted)} predicted"
        )
    # type -> [correct, predicted, gold]
    counts: dict[str, list[int]] = {}
    for i, (gold_tags, predicted_tags) in enumerate(zip(gold, predicted)):
        if len(gold_tags) != len(predicted_tags):
            raise ValueError(
                f"sentence {i}: {len(gold_tags)} gold tags but "
                f"{len(predicted_tags)} predicted"
            )
        gold_spans, predicted_spans = (
            entity_spans(gold_tags),
            entity_spans(predicted_tags),
        )
        for column, spans in enumerate(
            (gold_spans & predicted_spans, predicted_spans, gold_spans)
        ):
            for kind, _, _ in spans:
                counts.setdefault(kind, [0, 0, 0])[column] += 1
    overall = [sum(c[column] for c in counts.values()) for column in range(3)]
    return {
        **{kind: _prf(*counts[kind]) for kind in sorted(counts)},
        "overall": _prf(*overall),
    }


# %%
gold = [["B-PER", "I-PER", "O", "B-LOC"], ["O", "B-ORG", "I-ORG", "O"]]
predicted = [["B-PER", "I-PER", "O", "B-ORG"], ["O", "I-ORG", "I-ORG", "O"]]
scores = entity_scores(gold, predicted)
print(
    sorted(entity_spans(predicted[1])),
    {k: round(v["f1"], 2) for k, v in scores.items()},
)
# a leading I- starts an entity
assert entity_spans(predicted[1]) == {("ORG", 1, 3)}
assert scores["overall"] == {
    "precision": 2 / 3,
    "recall": 2 / 3,
    "f1": 2 / 3,
    "support": 3,
}
assert scores["LOC"]["recall"] == 0.0 and scores["ORG"]["precision"] == 0.5

# %% [markdown]
# The test suite checks `entity_scores` against `seqeval`, the library most fine-tuning scripts
# use, on random tag sequences, broken ones included.
#
# Which encoder finds the entities best, and whether the course's pretraining helps here too, is
# measured with the three encoders of the next chapter's transfer ladder, in
# {ref}`sec-ft-ner-ladder`.
#
# (sec-ft-qa)=
# ## Extractive question answering: SQuAD
#
# In SQuAD {cite}`rajpurkar2016squad` each question is asked of one paragraph of a Wikipedia
# article, and its answer is a span of that paragraph, given as text and as a character offset.
# The official training set (87,599 questions) is not among the course's data files, so we split
# the development set (48 articles, 10,570 questions) by article: articles 5, 11, ..., 47 (every
# sixth, counting from 0) for evaluation, the other 40 for training. Splitting by article keeps
# every paragraph on one side, so the model is never evaluated on a paragraph it has read. The
# split is written exactly as the original file is serialised (`json.dumps`), so its SHA-256
# can be checked against the published values. The SQuAD reader goes to `tinybert.finetuning.squad`.

# %% tags=["export:finetuning.squad"]
from __future__ import annotations

import json
from dataclasses import dataclass

from tinybert.data import fetch


# %% tags=["export:finetuning.squad"]
@dataclass
class QAExample:
    """One SQuAD question with its paragraph and reference answers."""

    id: str
    question: str
    context: str
    answers: list[str]  # reference answer texts (dev questions have 1 to 6)
    answer_starts: list[int]  # character offset of each answer in the context
    title: str = ""


def split_squad(squad: dict, every: int = 6) -> tuple[dict, dict]:
    """Split a SQuAD file by article: article i (file order) goes to eval when
    i % every == every - 1, the others to train. Both keep the original schema."""
    if not isinstance(squad, dict) or not isinstance(squad.get("data"), list):
        raise ValueError("expected a SQuAD object {'data': [articles], 'version': ...}")
    articles = squad["data"]
    train = [article for i, article in enumerate(articles) if i % every != every - 1]
    evaluation = [
        article for i, article in enumerate(articles) if i % every == every - 1
    ]
    return (
        {"data": train, "version": squad.get("version")},
        {"data": evaluation, "version": squad.get("version")},
    )


def load_squad_dev_split() -> tuple[dict, dict]:
    """The course's SQuAD v1.1 split: the official dev file, 40 articles to train,
    8 to eval."""
    return split_squad(json.loads(fetch("squad1.1/dev").read_text(encoding="utf-8")))


def read_squad(squad: dict) -> list[QAExample]:
    """Every question of a SQuAD object, in file order."""
    examples = []
    for article in squad["data"]:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                if not qa["answers"]:
                    raise ValueError(
                        f"question {qa['id']} has no answer; SQuAD v1.1 "
                        f"questions all have one (v2.0 files add "
                        "unanswerable questions)"
                    )
                examples.append(
                    QAExample(
                        qa["id"],
                        qa["question"],
                        paragraph["context"],
                        [answer["text"] for answer in qa["answers"]],
                        [answer["answer_start"] for answer in qa["answers"]],
                        article["title"],
                    )
                )
    return examples


# %%
import hashlib
import json

squad_train_data, squad_eval_data = load_squad_dev_split()
for data, published in [
    (
        squad_train_data,
        ("f556449b475a70374155ad55a3c5ef9298c985325b78d2c519ead0fa42fd7024"),
    ),
    (
        squad_eval_data,
        "3153e6e45edf6fdd9dc3087fcf8f8285a49973dfcc84427784575aa550231c72",
    ),
]:
    assert hashlib.sha256(json.dumps(data).encode("utf-8")).hexdigest() == published
squad_train, squad_eval = read_squad(squad_train_data), read_squad(squad_eval_data)
print(
    f"train: {len(squad_train_data['data'])} articles, {len(squad_train):,} "
    f"questions; eval: {len(squad_eval_data['data'])} articles "
    f"({', '.join(a['title'] for a in squad_eval_data['data'])}), "
    f"{len(squad_eval):,} questions; both identical to the published split"
)
example = squad_eval[0]
print(
    f"{example.question!r} -> {example.answers} in a "
    f"{len(example.context)}-character paragraph"
)

# %% [markdown]
# {numref}`fig-ft-span` shows the question-answering head on Ozdemir's question of
# {ref}`sec-ft-inputs`, whose answer is one token of the paragraph.

# %% mystnb={"figure": {"caption": "Extractive question answering, drawn for the course's encoder and the pair \"Where does Matt live?\" / \"Matt lives in Canada and Sinan lives in California\" (cut, \"\u2026\", before its last token). One linear layer gives every paragraph token a start score and an end score; a softmax over the positions turns each row into a distribution, and the answer here, \"canada\", starts and ends at the same token.", "name": "fig-ft-span"}, "image": {"alt": "Diagram drawn bottom to top. The question tokens (segment A) and the paragraph tokens (segment B) between [CLS] and [SEP] go into the pretrained encoder, which gives one vector h per token. The vectors of the paragraph tokens feed a box: a linear layer from D to 2 at each paragraph token, a start and an end score, with a softmax over the positions. Above the token canada, an arrow is labelled start and end. The question's vectors are dashed: the head does not score them."}} tags=["diagram", "hide-input"]
from tinybert.diagrams import span_diagram

matt_ids, matt_types = encode_pair(
    tokenizer.encode("Where does Matt live?").ids,
    tokenizer.encode("Matt lives in Canada and Sinan lives in California").ids,
    special,
    config.max_len,
)
matt_tokens = [tokenizer.id_to_token[i] for i in matt_ids]
canada = matt_tokens.index("canada")
span_diagram(config, matt_tokens, matt_types, start=canada, end=canada)

# %% [markdown]
# (sec-ft-windows)=
# ### Windows over long paragraphs
#
# The input is `[CLS] question [SEP] paragraph [SEP]`, and it must fit in the model's 128
# positions. A paragraph that does not fit is read through **overlapping windows**: each holds as
# many paragraph tokens as the question leaves room for, and the next window starts
# `doc_stride` tokens later, so that every token appears in some window with context on both
# sides (BERT used 384 positions, a {term}`stride <document stride>` of 128 and questions of at most 64 tokens). Questions longer than `max_query_len`
# tokens are cut.
#
# For training, the answer's characters are mapped to the first and last tokens that overlap
# them, through the tokenizer's offsets. A window that contains the whole answer is labelled
# with its positions; a window that does not is labelled with position 0, the `[CLS]` token, as
# BERT did for SQuAD v1.1, so the model also learns to give such windows low span scores. Two
# kinds of example cannot be labelled and are skipped, with a count: an answer whose text is not
# at its offset in the paragraph, and an answer too long to fit in any window (so truncation
# would always cut it off).

# %% tags=["export:finetuning.qa"]
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import torch

from tinybert.training.inputs import encode_pair  # chapter 9
from tinybert.training.inputs import SpecialTokens
from tinybert.finetuning.finetune_loop import predict
from tinybert.finetuning.squad import QAExample


# %% tags=["export:finetuning.qa"]
def window_starts(n_tokens: int, window: int, stride: int) -> list[int]:
    """Where each window of ``window`` tokens starts, ``stride`` apart, until one
    reaches the end."""
    if not 1 <= stride <= window:
        raise ValueError(
            f"the stride must be in 1..window = {window} (a larger one "
            f"would skip tokens), got {stride}"
        )
    starts = [0]
    while starts[-1] + window < n_tokens:
        starts.append(starts[-1] + stride)
    return starts


def answer_token_span(
    offsets: list[tuple[int, int]], start_char: int, end_char: int
) -> tuple[int, int] | None:
    """The first and last token overlapping the characters [start_char,
    end_char), or None."""
    inside = [
        i
        for i, (start, end) in enumerate(offsets)
        if start < end_char and end > start_char
    ]
    return (inside[0], inside[-1]) if inside else None


def make_qa_features(
    tokenizer,
    examples: list[QAExample],
    *,
    max_len: int = 128,
    doc_stride: int = 64,
    max_query_len: int = 32,
    with_answers: bool = True,
) -> tuple[list[dict], Counter]:
    """One feature per window: [CLS] question [SEP] paragraph window [SEP]; its offsets
    (None outside the paragraph); where an answer may start (first piece of a paragraph
    word) and end (last piece); the index of its example; and, with_answers, its labels.
    Returns the features and a Counter of what was cut, skipped or labelled [CLS]."""
    special = SpecialTokens.from_vocab(tokenizer.vocab)
    stats = Counter()
    features = []
    for example_index, example in enumerate(examples):
        question = tokenizer.encode(example.question).ids
        if len(question) > max_query_len:
            stats["questions cut to max_query_len"] += 1
            question = question[:max_query_len]
        # room for [CLS], [SEP] and [SEP]
        window = max_len - len(question) - 3
        if window < 1:
            raise ValueError(
                f"max_len = {max_len} leaves no room for the paragraph "
                f"after a question of {len(question)} tokens"
            )
        context = tokenizer.encode(example.context)
        n = len(context.ids)
        word_start = [
            not t.startswith(tokenizer.continuing_prefix) for t in context.tokens
        ]
        word_end = [i + 1 == n or word_start[i + 1] for i in range(n)]
        if with_answers:
            start_char, text = example.answer_starts[0], example.answers[0]
            end_char = start_char + len(text)
            span = None
            if example.context[start_char:end_char] == text:
                span = answer_token_span(context.offsets, start_char, end_char)
            if span is None:
                stats["skipped: answer not found at its offset"] += 1
                continue
            if span[1] - span[0] + 1 > window:
                stats["skipped: answer longer than a window"] += 1
                continue
        for start in window_starts(n, window, doc_stride):
            piece = context.ids[start : start + window]
            input_ids, token_type_ids = encode_pair(question, piece, special, max_len)
            # position of the first paragraph token
            first = len(question) + 2
            # [CLS] question [SEP] and the last [SEP]
            outside = [None] * first, [None]
            inside = slice(start, start + len(piece))
            feature = {
                "input_ids": input_ids,
                "token_type_ids": token_type_ids,
                "offsets": outside[0] + context.offsets[inside] + outside[1],
                "can_start": [False] * first + word_start[inside] + [False],
                "can_end": [False] * first + word_end[inside] + [False],
                "example_index": example_index,
            }
            if with_answers:
                if start <= span[0] and span[1] < start + len(piece):
                    feature["start_positions"] = first + span[0] - start
                    feature["end_positions"] = first + span[1] - start
                else:
                    feature["start_positions"] = feature["end_positions"] = 0  # [CLS]
                    stats["windows without the answer, labelled [CLS]"] += 1
            features.append(feature)
    stats["windows"] = len(features)
    return features, stats


# %% [markdown]
# A paragraph of a few hundred tokens, with its answer near the end, needs several windows
# (questions cut at 32 tokens, a stride of 64):

# %%
QA_LEN, DOC_STRIDE, MAX_QUERY_LEN = config.max_len, 64, 32
long_example = next(
    e for e in squad_eval if 1000 < len(e.context) < 1300 and e.answer_starts[0] > 700
)
windows, stats = make_qa_features(
    tokenizer,
    [long_example],
    max_len=QA_LEN,
    doc_stride=DOC_STRIDE,
    max_query_len=MAX_QUERY_LEN,
)
n_context = len(tokenizer.encode(long_example.context))
print(
    f"{n_context} paragraph tokens; question {long_example.question!r}; "
    f"{len(windows)} windows:"
)
for w in windows:
    spans = [o for o in w["offsets"] if o is not None]
    label = (
        (f"answer at positions {w['start_positions']}-{w['end_positions']}")
        if w["start_positions"]
        else "[CLS]"
    )
    print(f"  characters {spans[0][0]:4d} to {spans[-1][1]:4d}: {label}")
labelled = next(w for w in windows if w["start_positions"])
first, last = (
    labelled["offsets"][labelled["start_positions"]][0],
    labelled["offsets"][labelled["end_positions"]][1],
)
print(
    f"the labelled span is {long_example.context[first:last]!r}; the reference "
    f"{long_example.answers[0]!r}"
)
assert long_example.context[first:last] == long_example.answers[0]


# %% [markdown]
# (sec-ft-spans)=
# ### From scores to an answer
#
# The model gives every position of a window a start score $s_i$ and an end score $e_j$. The
# answer is the span $(i, j)$ with the largest $s_i + e_j$ among those that make sense: both
# positions in the paragraph (not the question, not a special token), $i \le j$, at most
# `max_answer_len` tokens long (BERT used 30), and whole words: $i$ the first piece of a word and
# $j$ the last piece of one, so that an answer never ends in the middle of "Can ##ad ##a" (BERT's
# code gets the same effect by mapping the pieces back to the words they came from). A window has at most 128 positions, so all
# $128^2$ pairs can be scored at once as the outer sum of the two score vectors. Over the windows
# of one paragraph the best-scoring span wins, and the offsets of its first and last tokens cut
# the answer out of the original paragraph, with its original case and punctuation.

# %% tags=["export:finetuning.qa"]
def best_span(
    start_logits: torch.Tensor,
    end_logits: torch.Tensor,
    can_start: torch.Tensor,
    can_end: torch.Tensor,
    max_answer_len: int = 30,
) -> tuple[int, int, float]:
    """The (start, end) maximising start_logits[start] + end_logits[end] with start <=
    end < start + max_answer_len, can_start[start] and can_end[end]; and its score.
    Inputs are (T,)."""
    T = start_logits.shape[0]
    # (T, T) row start, column end
    scores = start_logits[:, None] + end_logits[None, :]
    position = torch.arange(T)
    # (T, T) end - start + 1
    length = position[None, :] - position[:, None] + 1
    valid = (
        (length >= 1)
        & (length <= max_answer_len)
        & can_start[:, None]
        & can_end[None, :]
    )
    if not bool(valid.any()):
        raise ValueError("no span to choose from: no position is allowed")
    # argmax never picks these
    scores = scores.masked_fill(~valid, float("-inf"))
    start, end = divmod(int(scores.argmax()), T)
    return start, end, scores[start, end].item()


@dataclass
class Answer:
    text: str  # the answer as it is written in the paragraph
    start: int  # character offsets: text == context[start:end]
    end: int
    score: float  # start score + end score of its span


def predict_answers(
    logits: list[torch.Tensor],
    features: list[dict],
    examples: list[QAExample],
    *,
    max_answer_len: int = 30,
) -> list[Answer | None]:
    """The best answer of every example over all its windows; logits as ``predict``
    returns them, (T, 2) per window."""
    best: dict[int, Answer] = {}
    for window_logits, feature in zip(logits, features, strict=True):
        offsets = feature["offsets"]
        start, end, score = best_span(
            window_logits[:, 0],
            window_logits[:, 1],
            torch.tensor(feature["can_start"]),
            torch.tensor(feature["can_end"]),
            max_answer_len,
        )
        index = feature["example_index"]
        if index not in best or score > best[index].score:
            first, last = offsets[start][0], offsets[end][1]
            best[index] = Answer(
                examples[index].context[first:last], first, last, score
            )
    return [best.get(i) for i in range(len(examples))]


def answer_question(
    model,
    tokenizer,
    question: str,
    context: str,
    *,
    max_len: int = 128,
    doc_stride: int = 64,
    max_answer_len: int = 30,
) -> Answer:
    """Ask one question of one paragraph."""
    example = QAExample("question", question, context, [], [])
    features, _ = make_qa_features(
        tokenizer, [example], max_len=max_len, doc_stride=doc_stride, with_answers=False
    )
    pad_id = SpecialTokens.from_vocab(tokenizer.vocab).pad
    logits = predict(model, features, pad_id=pad_id)
    return predict_answers(logits, features, [example], max_answer_len=max_answer_len)[
        0
    ]


# %% [markdown]
# A hand-made check: with the highest start score on position 2 and the highest end score on
# position 1, the best *valid* span cannot be (2, 1); it is the best pair with start before end.
# And when position 1 cannot end a word, the best one-token answer moves:

# %%
start_scores = torch.tensor([9.0, 1.0, 5.0, 0.0, 2.0])
end_scores = torch.tensor([9.0, 6.0, 0.0, 3.0, 1.0])
allowed = torch.tensor([False, True, True, True, True])  # position 0 is [CLS]
print(
    best_span(start_scores, end_scores, allowed, allowed),
    best_span(start_scores, end_scores, allowed, allowed, max_answer_len=1),
)
# 5 + 3 beats 1 + 6
assert best_span(start_scores, end_scores, allowed, allowed)[:2] == (2, 3)
# 1 + 6 beats 5 + 0
assert best_span(start_scores, end_scores, allowed, allowed, max_answer_len=1)[:2] == (
    1,
    1,
)
# as if position 1 were "can" of "can ##ad ##a"
ends_word = torch.tensor([False, False, True, True, True])
assert best_span(start_scores, end_scores, allowed, ends_word, max_answer_len=1)[
    :2
] == (2, 2)

# %% [markdown]
# (sec-ft-squad-metrics)=
# ### Exact match and F1
#
# SQuAD scores a predicted answer against each reference answer of the question and keeps the
# best {cite}`rajpurkar2016squad`. Both scores compare *normalised* answers: lower-cased, ASCII
# punctuation removed, the articles "a", "an" and "the" removed, and whitespace collapsed (in
# that order, as in the official evaluation script). **Exact match** is 1 when the normalised
# strings are equal. **F1** treats each as a bag of words: with $c$ the number of words they
# share (counted with multiplicity), precision is $c$ over the prediction's length, recall $c$
# over the reference's, and F1 their harmonic mean. The data set's scores are the means over all
# questions, in percent; a question with no prediction counts as 0.

# %% tags=["export:finetuning.metrics"]
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = frozenset(string.punctuation)


def normalize_answer(text: str) -> str:
    """SQuAD v1.1's normalisation, in the official script's order: lower-case, remove
    ASCII punctuation, remove the articles a/an/the, collapse runs of whitespace."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def _check_references(references: list[str]) -> None:
    if isinstance(references, str) or len(references) == 0:
        raise ValueError(
            "references must be a non-empty list of answer strings "
            f"(SQuAD v1.1 gives every question at least one), got "
            f"{references!r}"
        )


def squad_exact_match(prediction: str, references: list[str]) -> float:
    """1.0 when the normalised prediction equals one of the normalised references,
    else 0.0."""
    _check_references(references)
    return max(
        float(normalize_answer(prediction) == normalize_answer(r)) for r in references
    )


def _bag_of_words_f1(prediction: str, reference: str) -> float:
    predicted, gold = (
        normalize_answer(prediction).split(),
        normalize_answer(reference).split(),
    )
    # words in both, with multiplicity
    common = sum((Counter(predicted) & Counter(gold)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(predicted), common / len(gold)
    return 2 * precision * recall / (precision + recall)


def squad_f1(prediction: str, references: list[str]) -> float:
    """The best F1, over the references, between the bags of normalised words."""
    _check_references(references)
    return max(_bag_of_words_f1(prediction, r) for r in references)


def squad_evaluate(
    predictions: dict[str, str], references: dict[str, list[str]]
) -> dict:
    """Exact match and F1 in percent over every question of ``references``, as the
    official v1.1 script computes them: a question without a prediction counts as 0."""
    if not references:
        raise ValueError("no questions to evaluate")
    exact = f1 = 0.0
    for question_id, answers in references.items():
        if question_id in predictions:
            exact += squad_exact_match(predictions[question_id], answers)
            f1 += squad_f1(predictions[question_id], answers)
    unanswered = sum(question_id not in predictions for question_id in references)
    n = len(references)
    return {
        "exact_match": 100 * exact / n,
        "f1": 100 * f1 / n,
        "questions": n,
        "unanswered": unanswered,
    }


# %% [markdown]
# Worked by hand: "in Paris, France" against the reference "Paris" shares one word of three, so
# precision is 1/3, recall 1, and F1 = 2·(1/3)·1/(1/3 + 1) = 0.5; "new new york" against
# "New York" shares two words (one "new" is extra): precision 2/3, recall 1, F1 0.8.

# %%
# case, hyphen, article, spaces
cases = [
    ("The  Eiffel-Tower!", ["eiffeltower"], 1.0, 1.0),
    ("in Paris, France", ["Paris"], 0.0, 0.5),
    ("new new york", ["New York"], 0.0, 0.8),
    # best reference
    ("Denver Broncos", ["Broncos", "the Denver Broncos", "Denver"], 1.0, 1.0),
    ("Carolina Panthers", ["Denver Broncos"], 0.0, 0.0),
    # "the" only as a whole word
    ("theatre", ["the atre"], 0.0, 0.0),
]
for prediction, references, exact, f1 in cases:
    got = squad_exact_match(prediction, references), squad_f1(prediction, references)
    print(f"{prediction!r:<22} vs {references}: EM {got[0]:.0f}, F1 {got[1]:.2f}")
    assert got[0] == exact and abs(got[1] - f1) < 1e-12
scores = squad_evaluate(
    {"q1": "Paris", "q2": "in Paris, France"},
    {"q1": ["Paris"], "q2": ["Paris"], "q3": ["x"]},
)
print(scores)
assert scores == {"exact_match": 100 / 3, "f1": 50.0, "questions": 3, "unanswered": 1}

# %% [markdown]
# (sec-ft-qa-run)=
# ### Fine-tuning on SQuAD
#
# Every window costs a forward and backward pass over the full 128 positions, so question
# answering is the most expensive task of the chapter; it trains on an evenly spread subset of
# the training questions and is scored on a subset of the evaluation questions.

# %%
qa_train = evenly_spaced(squad_train, pick(quick=4, full=200))
qa_eval = evenly_spaced(squad_eval, pick(quick=4, full=200))
qa_train_features, train_stats = make_qa_features(
    tokenizer,
    qa_train,
    max_len=QA_LEN,
    doc_stride=DOC_STRIDE,
    max_query_len=MAX_QUERY_LEN,
)
qa_eval_features, eval_stats = make_qa_features(
    tokenizer,
    qa_eval,
    max_len=QA_LEN,
    doc_stride=DOC_STRIDE,
    max_query_len=MAX_QUERY_LEN,
    with_answers=False,
)
print(f"train: {len(qa_train)} questions -> {dict(train_stats)}")
print(f"eval: {len(qa_eval)} questions -> {dict(eval_stats)}")

seed_everything(0)
qa_model = QuestionAnswerer(fresh_encoder()).to(device)
qa_result = finetune(
    qa_model,
    qa_train_features,
    pad_id=PAD,
    epochs=pick(quick=1, full=2),
    batch_size=BATCH_SIZE,
    lr=best_lr,
    desc="SQuAD",
)
qa_logits = predict(qa_model, qa_eval_features, pad_id=PAD)
qa_answers = predict_answers(qa_logits, qa_eval_features, qa_eval)
qa_scores = squad_evaluate(
    {e.id: a.text for e, a in zip(qa_eval, qa_answers)},
    {e.id: e.answers for e in qa_eval},
)
print(
    f"{qa_result.seconds:.0f} s of training; exact match "
    f"{qa_scores['exact_match']:.1f}, F1 {qa_scores['f1']:.1f} on "
    f"{qa_scores['questions']} evaluation questions"
)

# %% [markdown]
# Ozdemir's demo, asked of our model (whatever it answers):

# %%
matt = answer_question(
    qa_model,
    tokenizer,
    "Where does Matt live?",
    "Matt lives in Canada and Sinan lives in California",
)
print(f"Where does Matt live? -> {matt.text!r} (score {matt.score:.2f})")

# %% [markdown]
# And the evaluation questions it got most confidently and completely wrong (F1 = 0):

# %%
wrong = [
    (a.score, e, a)
    for e, a in zip(qa_eval, qa_answers)
    if squad_f1(a.text, e.answers) == 0
]
for score, e, a in sorted(wrong, key=lambda item: -item[0])[:3]:
    print(
        f"{e.question!r}\n    predicted {a.text!r}, references {sorted(set(e.answers))}"
    )

# %% [markdown]
# (sec-ft-scale)=
# ## How far from BERT-base
#
# Our numbers are far from the BERT paper's, and they should be. BERT-base has about 110 million
# parameters and was pretrained on 3.3 billion words for a million steps; BERT-large has 340
# million {cite}`devlin2019bert`. Our encoder has a few million parameters, pretrained on a CPU
# for far fewer and far smaller steps, on megabytes rather than gigabytes of text (chapter 9), and fine-tuned
# here on a fraction of the labelled data for a few hundred steps. The SQuAD comparison is also not like for like: the
# paper trains on the 87,599 questions of the official training set and scores the whole
# development set; we train on part of 40 development articles and score 8 others.

# %%
n_params = n_encoder + sum(p.numel() for p in qa_model.span.parameters())
rows = [
    ("BERT-base (paper, full SQuAD train)", "110M", "80.8", "88.5"),
    ("BERT-large (paper, full SQuAD train)", "340M", "84.1", "90.9"),
    (
        f"our bert-mini ({len(qa_train):,} questions)",
        f"{n_params / 1e6:.1f}M",
        f"{qa_scores['exact_match']:.1f}",
        f"{qa_scores['f1']:.1f}",
    ),
]
print(f"{'SQuAD v1.1, single model':<40}{'parameters':>11}{'EM':>7}{'F1':>7}")
for name, size, em, f1 in rows:
    print(f"{name:<40}{size:>11}{em:>7}{f1:>7}")

# %% [markdown]
# The first two rows are the paper's development-set results (its Table 2); the last is measured
# above. On GLUE, BERT-base reached 93.5% on SST-2 sentiment and 84.6% on MNLI entailment (the
# paper's Table 1). The gap is the point of the last chapters: model size, pretraining data and
# pretraining compute are what buy those numbers, and chapters 12 to 14 are about getting more of
# them for less.
#
# (sec-ft-recipes)=
# ## Engineering: one call per task, and the command line
#
# The pieces above, assembled: `finetune_task` reads a task's data, encodes it, puts the right
# head on an encoder, fine-tunes it and scores it on the validation (or test) split, in one
# call. The command line runs it on the course's checkpoint.

# %% tags=["export:finetuning.recipes"]
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from tinybert.data import (
    AUTHORS,
    POLARITY_LABELS,
    fetch,
    read_authorship,
    read_sentence_polarity,
)
from tinybert.finetuning.finetune_loop import FinetuneResult, finetune, predict
from tinybert.finetuning.features import encode_sentences, encode_tagged
from tinybert.training.inputs import SpecialTokens
from tinybert.finetuning.heads import (
    QuestionAnswerer,
    SequenceClassifier,
    TokenClassifier,
    set_trainable_layers,
)
from tinybert.finetuning.metrics import accuracy, squad_evaluate
from tinybert.finetuning.qa import make_qa_features, predict_answers
from tinybert.finetuning.squad import load_squad_dev_split, read_squad
from tinybert.finetuning.tagging_tasks import UPOS_TAGS, read_conllu
from tinybert.finetuning.text_tasks import (
    POEM_LABELS,
    TextExample,
    evenly_spaced,
    holdout_split,
    per_label,
    read_banking77,
    read_poem_sentiment,
)

# %% tags=["export:finetuning.recipes"]
# the last two are in no chapter's pretraining text: chapter 11's unseen tasks
TASKS = (
    "banking77",
    "poem_sentiment",
    "ud_pos",
    "squad",
    "sentence_polarity",
    "authorship",
)


def task_data(task: str, split: str) -> tuple[list, list[str] | None]:
    """A task's examples for split "train", "validation" or "test", and its label names
    (None for SQuAD, whose validation and test are both the evaluation articles)."""
    if split not in ("train", "validation", "test"):
        raise ValueError(
            f"split must be 'train', 'validation' or 'test', got {split!r}"
        )
    file_split = "dev" if split == "validation" else split
    if task == "banking77":
        if split == "test":
            return read_banking77("test")
        train, intents = read_banking77("train")
        kept, held_out = holdout_split(train)
        return (held_out if split == "validation" else kept), intents
    if task == "poem_sentiment":
        return read_poem_sentiment(file_split), list(POEM_LABELS[:3])
    if task == "ud_pos":
        return read_conllu(fetch(f"ud_ewt/{file_split}")), list(UPOS_TAGS)
    if task == "squad":
        train, evaluation = load_squad_dev_split()
        return read_squad(train if split == "train" else evaluation), None
    if task == "sentence_polarity":
        # every positive snippet, then every negative one, each in file order
        rows = sorted(read_sentence_polarity(split), key=lambda row: -row[1])
        return [TextExample(*row) for row in rows], list(POLARITY_LABELS)
    if task == "authorship":
        rows = read_authorship(split)
        return [TextExample(*row) for row in rows], list(AUTHORS)
    raise ValueError(f"unknown task {task!r}; the tasks are {', '.join(TASKS)}")


@dataclass
class TaskRun:
    task: str
    metrics: dict[str, float]  # on the evaluation split
    # losses, learning rates, seconds, trainable parameters
    result: FinetuneResult
    model: nn.Module  # the fine-tuned head with its encoder


def finetune_task(
    task: str,
    encoder: nn.Module,
    tokenizer,
    *,
    train_examples: int | None = None,
    eval_examples: int | None = None,
    eval_split: str = "validation",
    epochs: int = 3,
    lr: float = 1e-4,
    batch_size: int = 32,
    trainable_layers: int | None = None,
    seed: int = 0,
    pooling: str = "mean",
    train_per_label: int | None = None,
    desc: str | None = None,
) -> TaskRun:
    """Fine-tune a new head over ``encoder`` on ``task`` and score it. The example
    counts pick evenly spread subsets (None = everything; more than the split holds is
    an error); ``train_per_label`` instead takes that many training examples of every
    label (sentence tasks); ``pooling`` is the sentence classifiers' summary (see
    SequenceClassifier): the mean by default, since the course's checkpoint learned
    MLM alone and its pooler was never trained (BERT's own pooler: "pooler")."""
    train, labels = task_data(task, "train")
    evaluation, _ = task_data(task, eval_split)
    for name, wanted, examples, split in (
        ("train_examples", train_examples, train, "train"),
        ("eval_examples", eval_examples, evaluation, eval_split),
    ):
        if wanted is not None and wanted > len(examples):
            raise ValueError(
                f"{name}: expected at most {len(examples):,}, the {split} examples "
                f"of {task}; got {wanted:,}"
            )
    train, evaluation = (
        evenly_spaced(train, train_examples),
        evenly_spaced(evaluation, eval_examples),
    )
    if train_per_label is not None:
        train = per_label(train, train_per_label)
    pad = SpecialTokens.from_vocab(tokenizer.vocab).pad
    # RoBERTa reads max_len - pad - 1
    max_len = getattr(encoder.config, "max_tokens", encoder.config.max_len)
    # the seed fixes everything random from here: the new head's weights, dropout
    torch.manual_seed(seed)
    if task == "squad":
        model, (features, _) = (
            QuestionAnswerer(encoder),
            make_qa_features(tokenizer, train, max_len=max_len),
        )
        eval_features, _ = make_qa_features(
            tokenizer, evaluation, max_len=max_len, with_answers=False
        )
    elif task == "ud_pos":
        model, (features, _) = (
            TokenClassifier(encoder, len(labels)),
            encode_tagged(tokenizer, train, max_len=max_len),
        )
        eval_features, _ = encode_tagged(tokenizer, evaluation, max_len=max_len)
    else:
        model = SequenceClassifier(encoder, len(labels), pooling=pooling)
        features = encode_sentences(tokenizer, train, max_len=max_len)
        eval_features = encode_sentences(tokenizer, evaluation, max_len=max_len)
    model = model.to(next(encoder.parameters()).device)
    set_trainable_layers(model, trainable_layers)
    result = finetune(
        model,
        features,
        pad_id=pad,
        epochs=epochs,
        batch_size=batch_size,
        lr=lr,
        seed=seed,
        desc=desc,
    )
    logits = predict(model, eval_features, pad_id=pad)
    if task == "squad":
        answers = predict_answers(logits, eval_features, evaluation)
        metrics = squad_evaluate(
            {e.id: a.text for e, a in zip(evaluation, answers)},
            {e.id: e.answers for e in evaluation},
        )
    elif task == "ud_pos":
        gold = [torch.tensor(f["labels"]) for f in eval_features]
        metrics = {
            "accuracy": accuracy(
                torch.cat([x.argmax(-1) for x in logits]), torch.cat(gold)
            )
        }
    else:
        metrics = {
            "accuracy": accuracy(
                torch.stack(logits).argmax(-1),
                torch.tensor([e.label for e in evaluation]),
            )
        }
    return TaskRun(task, metrics, result, model)


# %% [markdown]
# **A second, small task.** Poem Sentiment {cite}`sheng2020investigating` labels 892 training
# verses from public-domain poems as negative, positive, no impact or mixed. The 49 "mixed"
# verses appear only in the training file, so we drop them and classify three ways. One call
# fine-tunes and scores it on the development verses; the baseline is to predict the most
# frequent training label every time.

# %% tags=["export:finetuning.text_tasks"]
# the file's labels -1, 0, 1, 2
POEM_LABELS = ("negative", "no_impact", "positive", "mixed")


def read_poem_sentiment(split: str, *, keep_mixed: bool = False) -> list[TextExample]:
    """Poem Sentiment's "train", "dev" or "test" verses, labels indexing POEM_LABELS.
    The "mixed" verses are dropped unless asked for: only train has any, so no split
    could evaluate them."""
    if split not in ("train", "dev", "test"):
        raise ValueError(
            f"Poem Sentiment has the splits 'train', 'dev' and 'test', got {split!r}"
        )
    path = fetch(f"poem_sentiment/{split}")
    examples = []
    for line_number, line in enumerate(
        path.read_text(encoding="utf-8").splitlines(), start=1
    ):
        fields = line.split("\t")
        if len(fields) != 3 or fields[2] not in ("-1", "0", "1", "2"):
            raise ValueError(
                f"{path}, line {line_number}: expected "
                f"id<TAB>verse<TAB>label with a label in -1, 0, 1, 2, "
                f"got {line!r}"
            )
        # -1, 0, 1, 2 -> 0, 1, 2, 3
        label = int(fields[2]) + 1
        if keep_mixed or POEM_LABELS[label] != "mixed":
            examples.append(TextExample(fields[1], label))
    return examples


# %%
poem_train = read_poem_sentiment("train")
poem_dev = read_poem_sentiment("dev")
dropped = len(read_poem_sentiment("train", keep_mixed=True)) - len(poem_train)
majority = Counter(e.label for e in poem_train).most_common(1)[0][0]
majority_accuracy = accuracy(
    torch.full((len(poem_dev),), majority), torch.tensor([e.label for e in poem_dev])
)
poem = finetune_task(
    "poem_sentiment",
    fresh_encoder(),
    tokenizer,
    train_examples=pick(quick=16, full=None),
    eval_examples=pick(quick=16, full=None),
    epochs=pick(quick=1, full=3),
    lr=best_lr,
    batch_size=BATCH_SIZE,
)
print(
    f"{len(poem_train)} training verses ({dropped} 'mixed' dropped), {len(poem_dev)} "
    f"dev verses; {poem.result.seconds:.0f} s of training; dev accuracy "
    f"{poem.metrics['accuracy']:.1%} (always {POEM_LABELS[majority]!r}: "
    f"{majority_accuracy:.1%})"
)

# %% [markdown]
# On the command line, `tinybert finetune TASK` does the same with the shipped checkpoint, for
# example `tinybert finetune banking77 --epochs 3 --lr 1e-4 --train-examples 2000`, or
# `--random-init` for the baseline without pretraining and `--trainable-layers 0` to train the
# head alone. Its options:

# %%
import argparse

from tinybert.commands import finetune as finetune_command

parser = argparse.ArgumentParser(prog="tinybert finetune")
finetune_command.add_arguments(parser)
print(parser.format_help())


# %% [markdown]
# (sec-ft-summary)=
# ## Summary
#
# - Fine-tuning puts a small head on the pretrained encoder and trains both on labelled data.
#   Every task uses the same input, `[CLS] A [SEP] (B [SEP])` with segment ids; a sentence label
#   is read from one summary vector (BERT's pooled `[CLS]` vector, or the mean of the final
#   vectors for encoders trained without NSP, as in this chapter's runs), a token label from each
#   token's vector, and an answer span from a start and an end score per token. Our heads match
#   Hugging Face's to float precision.
# - BERT's recipe: AdamW with weight decay, linear warm-up over 10% of the steps and linear
#   decay, dropout 0.1, 2 to 4 epochs, a learning rate chosen on the validation set (the paper's
#   grid is 5e-5, 3e-5, 2e-5). A small model on a short run needs more passes and, as
#   {ref}`sec-ft-lr` measured, a different rate: tune it, do not copy it.
# - Freezing the encoder saves time; what it costs depends on how good the frozen features are
#   ({ref}`sec-ft-approaches`).
# - Token classification labels the first word piece of every word and ignores the others
#   (-100); question answering reads long paragraphs in overlapping windows, labels windows
#   without the answer with `[CLS]`, picks the best valid span over all windows, and maps it back
#   to characters through the tokenizer's offsets. SQuAD's exact match and F1 normalise answers
#   before comparing and take the best reference.
# - Named entities are tagged B-X, I-X and O and scored as whole entities: a predicted entity
#   counts only if its type and both ends match ({ref}`sec-ft-ner`).
# - Inspect the predictions, not only the score: the confusion matrix and the most confident
#   mistakes show which distinctions the model has not learned.
#
# From `tinybert.finetuning.features`, `tinybert.finetuning.heads`, `tinybert.finetuning.text_tasks`
# (with `tagging_tasks` and `squad`), `tinybert.finetuning.qa`, `tinybert.finetuning.metrics`,
# and `tinybert.finetuning.recipes` later chapters import the heads, the loop, the data readers
# and the metrics to fine-tune their own encoders; {doc}`11_transfer` uses them to measure what
# pretraining is worth.
#
# (sec-ft-exercises)=
# ## Exercises
#
# :::{exercise-start}
# :label: ex-ft-word-ids
# :difficulty: 1
# :minutes: 15
# :kind: coding
# :::
# **Labels from word ids.** Hugging Face's fast tokenizers tokenize a sentence given as a list of
# words and report, for every token, the index of the word it came from, with `None` for special
# tokens: `word_ids = [None, 0, 1, 1, 1, 2, None]` means `[CLS]`, word 0, three pieces of word 1,
# word 2, `[SEP]`. Write `labels_from_word_ids(word_ids, word_labels)` that returns one label per
# token: the word's label on the first token of each word, -100 on its other tokens and on
# special tokens. A word may be missing from `word_ids` altogether (cut by truncation). Do not use
# `first_piece_labels`.
# :::{exercise-end}
# :::
#
# ::::{solution-start} ex-ft-word-ids
# :class: dropdown
# ::::
# A token starts a word when its word id differs from the previous token's; special tokens
# (`None`) and continuation tokens get -100.

# %% tags=["solution"]
def labels_from_word_ids(
    word_ids: list[int | None], word_labels: list[int]
) -> list[int]:
    ### BEGIN SOLUTION
    labels, previous = [], None
    for word in word_ids:
        if word is None or word == previous:
            labels.append(-100)
        else:
            labels.append(word_labels[word])
        previous = word
    return labels
    ### END SOLUTION


# %% [markdown]
# ::::{solution-end}
# ::::

# %% tags=["check"]
from tinybert.exercises.ch10 import check_labels_from_word_ids

check_labels_from_word_ids(labels_from_word_ids)

# %% [markdown]
# :::{exercise-start}
# :label: ex-ft-squad-f1
# :difficulty: 2
# :minutes: 25
# :kind: coding
# :::
# **SQuAD's F1 from its description.** Write `token_f1(prediction, references)` returning the
# official SQuAD v1.1 F1 of one predicted answer against a non-empty list of reference answers,
# as a float between 0 and 1: normalise both strings (lower-case; remove every character of
# `string.punctuation`; replace each whole word "a", "an" or "the" with a space; split on
# whitespace), compute precision, recall and F1 of the shared words counted with multiplicity
# (0 when nothing is shared), and return the best F1 over the references. Do not use
# `tinybert.finetuning.metrics`.
# :::{exercise-end}
# :::
#
# ::::{solution-start} ex-ft-squad-f1
# :class: dropdown
# ::::
# `Counter & Counter` keeps the minimum count of every word, which is exactly the overlap
# counted with multiplicity. The order of the normalisation steps matters: punctuation goes
# before articles, so "the-end" becomes "theend" and keeps its "the".

# %% tags=["solution"]
import re
import string
from collections import Counter


def token_f1(prediction: str, references: list[str]) -> float:
    ### BEGIN SOLUTION
    def words(text):
        text = "".join(ch for ch in text.lower() if ch not in string.punctuation)
        return re.sub(r"\b(a|an|the)\b", " ", text).split()

    def f1(predicted, gold):
        common = sum((Counter(predicted) & Counter(gold)).values())
        if common == 0:
            return 0.0
        precision, recall = common / len(predicted), common / len(gold)
        return 2 * precision * recall / (precision + recall)

    return max(f1(words(prediction), words(reference)) for reference in references)
    ### END SOLUTION


# %% [markdown]
# ::::{solution-end}
# ::::

# %% tags=["check"]
from tinybert.exercises.ch10 import check_token_f1

check_token_f1(token_f1)


# %% [markdown]
# :::{exercise-start}
# :label: ex-ft-entity-f1
# :difficulty: 2
# :minutes: 30
# :kind: coding
# :::
# **Entity-level F1 from BIO tags.** Write `entity_f1(gold, predicted)` for two lists of tag
# sequences (one list of IOB2 tags such as `"B-PER"`, `"I-PER"`, `"O"` per sentence) that returns
# the micro-averaged entity-level F1 of {ref}`sec-ft-ner` as a float between 0 and 1. An entity
# starts at `B-X`, or at an `I-X` that does not continue an entity of type X (the CoNLL script's
# reading), and takes in the `I-X` tags that follow; a predicted entity is correct only when its
# type, first word and last word all match a gold entity of the same sentence. F1 is 0 when no
# entity is correct. Do not use `tinybert.finetuning.metrics`.
# :::{exercise-end}
# :::
#
# ::::{solution-start} ex-ft-entity-f1
# :class: dropdown
# ::::
# Reading the tags once, left to right, is enough: an entity in progress ends at any tag that is
# not an `I-` of its own type, and a new one starts at every `B-` and at every `I-` that finds no
# entity in progress. Keeping the sentence's index in each span stops an entity of one sentence
# from matching the same positions in another.

# %% tags=["solution"]
def entity_f1(gold: list[list[str]], predicted: list[list[str]]) -> float:
    ### BEGIN SOLUTION
    def spans(sentences):
        found = set()
        for n, tags in enumerate(sentences):
            start = kind = None
            for i, tag in enumerate([*tags, "O"]):
                prefix, _, label = tag.partition("-")
                if start is not None and (prefix != "I" or label != kind):
                    found.add((n, kind, start, i))
                    start = None
                if prefix == "B" or (prefix == "I" and start is None):
                    start, kind = i, label
        return found

    gold_spans, predicted_spans = spans(gold), spans(predicted)
    correct = len(gold_spans & predicted_spans)
    if correct == 0:
        return 0.0
    return 2 * correct / (len(gold_spans) + len(predicted_spans))
    ### END SOLUTION


# %% [markdown]
# ::::{solution-end}
# ::::

# %% tags=["check"]
from tinybert.exercises.ch10 import check_entity_f1

check_entity_f1(entity_f1)

# %% [markdown]
# :::{exercise-start}
# :label: ex-ft-trainable
# :difficulty: 2
# :minutes: 20
# :kind: derivation
# :::
# **What each approach trains (pen and paper).** One BERT layer has
# $4D^2 + 4D + 2DF + F + D + 4D$ parameters (attention projections with biases, the feed-forward
# block, two LayerNorms). For BERT-base ($D = 768$, $F = 3072$, 12 layers, about 110M parameters
# in all, pooler included) with a Banking77 head (77 classes), how many parameters does each
# approach train: everything, the top 2 layers with the pooler and the head, and the head
# alone? What fraction of the model is each?
# :::{exercise-end}
# :::
#
# ::::{solution-start} ex-ft-trainable
# :class: dropdown
# ::::
# **Rubric** (what a full answer contains): 7,087,872 parameters per layer, 590,592 in the pooler,
# 59,213 in the head; about 110M trained in full fine-tuning, 14,825,549 (about 13.5%) for the top
# two layers with pooler and head, and about 0.05% for the head alone.
#
# One layer: $4\cdot768^2 + 4\cdot768 + 2\cdot768\cdot3072 + 3072 + 768 + 4\cdot768 = 7{,}087{,}872$.
# The pooler is $768^2 + 768 = 590{,}592$ and the head $768\cdot77 + 77 = 59{,}213$. So the top-2
# approach trains $2\cdot7{,}087{,}872 + 590{,}592 + 59{,}213 = 14{,}825{,}549$ parameters, about
# 13.5% of the model, and the head alone about 0.05%. The cell builds BERT-base on the `meta`
# device (shapes without memory) and counts with `set_trainable_layers`:

# %%
from tinybert.models.bert import BertConfig

with torch.device("meta"):
    bert_base = SequenceClassifier(
        BertModel(BertConfig.preset("bert-base-uncased")), 77
    )
layer = 4 * 768**2 + 4 * 768 + 2 * 768 * 3072 + 3072 + 768 + 4 * 768
total = set_trainable_layers(bert_base, None)
for name, n_layers, expected in [
    ("everything", None, total),
    ("top 2 + pooler + head", 2, 2 * layer + 768**2 + 768 + 768 * 77 + 77),
    ("head only", 0, 768 * 77 + 77),
]:
    got = set_trainable_layers(bert_base, n_layers)
    print(f"{name:<22} {got:>12,} ({got / total:.2%})")
    assert got == expected

# %% [markdown]
# ::::{solution-end}
# ::::
#
# :::{exercise-start}
# :label: ex-ft-windows
# :difficulty: 2
# :minutes: 15
# :kind: derivation
# :::
# **Counting windows (pen and paper).** A paragraph of $n$ tokens is read in windows of $w$
# tokens whose starts are $s$ apart ($1 \le s \le w$), the last window being the first that
# reaches the end. Give the number of windows as a formula. How many windows, and how many
# forward passes in all, does BERT's setting ($w = 384 - q - 3$ for a question of $q$ tokens,
# $s = 128$) need for $n = 1000$ and $q = 13$? How many does ours ($w = 128 - q - 3$, $s = 64$)?
# :::{exercise-end}
# :::
#
# ::::{solution-start} ex-ft-windows
# :class: dropdown
# ::::
# **Rubric** (what a full answer contains): $1 + \lceil \max(0, n - w)/s \rceil$ windows, with the
# reasoning; 6 windows for BERT's setting and 15 for the course's; the remark that short windows
# need more passes, each cheaper.
#
# The $k$-th window ($k = 0, 1, \dots$) starts at $ks$ and reaches the end when
# $ks + w \ge n$, so the number of windows is $1 + \lceil \max(0, n - w) / s \rceil$. BERT:
# $w = 368$, $1 + \lceil 632/128 \rceil = 6$ windows of 384 positions. Ours: $w = 112$,
# $1 + \lceil 888/64 \rceil = 15$ windows of 128 positions. Short windows need many more passes,
# though each is cheaper (and attention's cost grows with the square of the length).

# %%
from tinybert.finetuning.qa import window_starts

for n, w, s in [
    (1000, 368, 128),
    (1000, 112, 64),
    (50, 112, 64),
    (112, 112, 64),
    (113, 112, 64),
]:
    formula = 1 + -(-max(0, n - w) // s)
    print(f"n={n:5d} w={w} s={s}: {formula} windows")
    assert len(window_starts(n, w, s)) == formula

# %% [markdown]
# ::::{solution-end}
# ::::
#
# :::{exercise-start}
# :label: ex-ft-cls-windows
# :difficulty: 2
# :minutes: 15
# :kind: concept
# :::
# **Why label answerless windows with `[CLS]`?** `make_qa_features` keeps windows that do not
# contain the answer and points both their labels at position 0 instead of dropping them. What
# would the model learn, and how would `predict_answers` behave, if those windows were dropped
# from training? Could you use the `[CLS]` scores at prediction time?
# :::{exercise-end}
# :::
#
# ::::{solution-start} ex-ft-cls-windows
# :class: dropdown
# ::::
# **Rubric** (what a full answer contains): without answerless windows the model never learns to
# score them low, so a confident wrong span elsewhere can win in `predict_answers`; the `[CLS]`
# labels push probability away from paragraph tokens there; at prediction time the `[CLS]` score
# against a tuned threshold gives a no-answer decision, as for SQuAD 2.0.
#
# Trained only on windows that contain the answer, the model learns that every window has one
# and is never taught to give low span scores to a window without it. At prediction time
# `predict_answers` compares the best span of each window by score, so a confident but wrong span
# in an answerless window can beat the right span in another window. With the `[CLS]` labels,
# the softmax over positions pushes probability towards position 0 in such windows, and away
# from every paragraph token, which lowers their span scores. SQuAD v2.0, which has unanswerable
# questions, turns this into a decision: BERT predicts "no answer" when the `[CLS]` score
# $s_0 + e_0$ beats the best span's score by more than a threshold tuned on the development set.
# ::::{solution-end}
# ::::
#
# (sec-ft-quiz)=
# ## Quiz
#
# Check what you took from this chapter. In a notebook, run the cell and answer with
# `quiz.check(question, answer)`, such as `quiz.check(1, "b")`; here, press *Check*.

# %% tags=["quiz", "remove-input"]
from tinybert.exercises.quiz import Quiz, choice, number
from tinybert.finetuning.qa import window_starts

quiz = Quiz(
    "ch10",
    [
        choice(
            "In this chapter's token classification, which word piece carries the "
            "word's label?",
            [
                "the first; the others get -100",
                "every piece, each with the word's label",
                "the last; the others get -100",
                "the longest; the others get -100",
            ],
            answer="a",
            explain="The loss ignores the label -100.",
        ),
        choice(
            "A window of a long paragraph that does not contain the answer is labelled",
            [
                "with the nearest span",
                "with a random span",
                "not at all: dropped",
                "at position 0, [CLS]",
            ],
            answer="d",
            explain="The model learns to score such windows low.",
        ),
        number(
            "How many windows does a 1000-token paragraph need with windows of 112 "
            "tokens whose starts are 48 apart?",
            answer=len(window_starts(1000, 112, 48)),
            decimals=0,
            explain="1 + ⌈(1000 − 112) / 48⌉.",
        ),
        choice(
            "SQuAD's F1 compares",
            [
                "characters, against the first reference",
                "word pieces, averaged over the references",
                "normalised words, best over the references",
                "normalised words, averaged over the references",
            ],
            answer="c",
            explain="Lower case, no punctuation or articles, shared words.",
        ),
        choice(
            "BERT's fine-tuning recipe chooses the learning rate",
            [
                "by copying the paper's",
                "on the validation split",
                "on the test split",
                "as the largest that does not diverge",
            ],
            answer="b",
            explain="The test split is for the final score only.",
        ),
    ],
)
quiz
