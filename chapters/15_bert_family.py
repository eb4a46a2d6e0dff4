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
# ---

# %% [markdown]
# (sec-family)=
# # The BERT family side by side
#
# Chapters 8 to 14 built four models: BERT, and three answers to the question "what would you
# change?". RoBERTa kept the architecture and changed the training; DistilBERT kept the training
# data and made the model smaller by imitation; ALBERT kept the depth and width and shared the
# weights. {ref}`Ozdemir's lecture slides <sources-decks>` end with a table that puts the four side by
# side: parameters, sizes, training time, downstream performance, pretraining data and method. This
# chapter reproduces that table twice. First as published, with the parameter counts recomputed from
# our own implementations; then at miniature scale, for four tiny members of the family built here
# with the same data, tokenizer and sizes, and measured on this machine: what they cost, not how well
# they would learn.
#
# It ends where the course ends: with the other half of the Transformer family, the decoders, and
# with pointers to what came after BERT.
#
# **What you will learn**
#
# - to read the published comparison: which numbers are facts about the architecture (parameters,
#   layers, widths) and which are claims about a training run (time, data, benchmark scores);
# - how to compare pretraining recipes fairly: the same corpus, tokenizer, model width, batch,
#   optimiser and seed, with only the recipe changed, and what such a comparison can measure on a
#   laptop (parameters, the cost and the text of a training step, inference speed) and what it
#   cannot (quality);
# - what separates encoders (BERT) from decoders (GPT) and encoder-decoders (T5): the attention
#   mask, the objective, and what each can be asked to do;
# - what multilingual BERT transfers across languages, and why language-specific models such as
#   the Swedish KB-BERT exist, measured in word pieces per word;
# - where the family went next.
#
# **Uses.** From {doc}`08_bert`: `BertConfig`, `BertModel`, `BertForPreTraining`,
# `PreTrainingOutput` and `IGNORE_INDEX` from `tinybert.models.bert`; `load_minilm` from
# `tinybert.models.convert`. From {doc}`09_pretraining`: `PretrainingBatches` and
# `make_examples` from `tinybert.pretraining.examples`; `shipped_checkpoint` and
# `load_pretrained` from `tinybert.models.course_checkpoint`;
# `SpecialTokens` from `tinybert.training.inputs`; `seeded_generator` from
# `tinybert.pretraining.objective`; `course_documents` and
# `tokenize_documents` from `tinybert.pretraining.documents`; `make_optimizer` from
# `tinybert.training.optim`.
# From {doc}`12_roberta`: `RobertaConfig`, `RobertaModel` and `RobertaForMaskedLM` from
# `tinybert.models.roberta`; `full_sentence_examples` from `tinybert.pretraining.roberta_data`. From
# {doc}`13_distilbert`: `DistilBertConfig` and `DistilBertModel` from `tinybert.models.distilbert`;
# `distillation_loss` and `student_from_teacher` from `tinybert.pretraining.distillation`. From
# {doc}`14_albert`: `AlbertConfig` and `AlbertModel` from `tinybert.models.albert`,
# `AlbertForPreTraining` from `tinybert.models.albert_heads`; `sample_sop_pairs` from `tinybert.pretraining.sentence_order`. From
# {doc}`07_tokenization`: `WordPieceTokenizer`. From {doc}`03_attention`: `causal_mask` from
# `tinybert.blocks.attention`. From {doc}`01_feedforward`: `count_parameters`.
# This chapter exports nothing: it only uses what the earlier chapters built.
#
# (sec-family-setup)=
# ## Setup

# %%
import copy
import re
import statistics
import time

import matplotlib.pyplot as plt
import torch
from torch import nn

from tinybert.blocks.attention import causal_mask
from tinybert.models.pretrained_encoder import load_minilm
from tinybert.pretraining.distillation import distillation_loss, student_from_teacher
from tinybert.blocks.feedforward import count_parameters
from tinybert.training.inputs import SpecialTokens
from tinybert.pretraining.objective import seeded_generator
from tinybert.models.albert import AlbertConfig, AlbertModel
from tinybert.models.albert_heads import AlbertForPreTraining
from tinybert.models.bert_heads import (
    IGNORE_INDEX,
    BertForPreTraining,
    PreTrainingOutput,
)
from tinybert.models.bert import BertConfig, BertModel
from tinybert.models.distilbert import DistilBertConfig, DistilBertModel
from tinybert.models.roberta import RobertaConfig, RobertaForMaskedLM, RobertaModel
from tinybert.pretraining.examples import PretrainingBatches, make_examples
from tinybert.models.course_checkpoint import load_pretrained, shipped_checkpoint
from tinybert.pretraining.documents import course_documents, tokenize_documents
from tinybert.pretraining.roberta_data import full_sentence_examples
from tinybert.runtime import get_device, is_quick, pick
from tinybert.pretraining.sentence_order import sample_sop_pairs
from tinybert.tokenizers.wordpiece import WordPieceTokenizer
from tinybert.training.optim import make_optimizer

device = get_device()
print(
    f"device: {device}, quick mode: {is_quick()}, torch threads: "
    f"{torch.get_num_threads()}"
)

# %% [markdown]
# (sec-family-published)=
# ## The published table
#
# Ozdemir's comparison, with the training times replaced by the papers' own. His slides give the
# GPU figures of a blog comparison instead (BERT-base 8 V100 × 12 days, BERT-large 280 V100 × 1
# day, DistilBERT 8 V100 × 3.5 days), but BERT was trained on Google's TPU chips:
#
# | | BERT (Oct 2018) | RoBERTa (Jul 2019) | DistilBERT (Oct 2019) | ALBERT (Sep 2019) |
# |---|---|---|---|---|
# | parameters | base 110M, large 340M | base 125M, large 355M | base 66M | base 12M, large 18M |
# | layers / hidden / heads | base 12 / 768 / 12, large 24 / 1024 / 16 | as BERT | base 6 / 768 / 12 | as BERT |
# | training time | base 16 TPU chips × 4 days, large 64 chips × 4 days {cite}`devlin2019bert` | 1024 × V100 × about 1 day for a 100K-step run; the released model ran 500K steps {cite}`liu2019roberta` | 8 × V100 × about 90 hours {cite}`sanh2019distilbert` | not given; large 1.7 × BERT-large's training throughput {cite}`lan2020albert` |
# | performance | state of the art in October 2018 | 88.5 on GLUE | 97% of BERT-base's GLUE score | 89.4 on GLUE |
# | pretraining data | BooksCorpus + English Wikipedia, 16 GB | BERT's + CC-News + OpenWebText + Stories, 160 GB | as BERT | as BERT |
# | method | bidirectional Transformer, MLM + NSP | BERT without NSP, dynamic masking | distillation of BERT | fewer parameters, SOP instead of NSP |
#
# The first two rows are facts about architectures, and our implementations can check them: each
# model of chapters 8, 12, 13 and 14 has a preset under its released name, and a test proves that
# each preset has exactly as many parameters as Hugging Face's model. Building the large models
# would take over a gigabyte of memory each, so the cell builds them on PyTorch's `meta` device,
# which records shapes and allocates nothing:

# %%
# (family, preset, encoder class, config class, the slides' figure in millions)
published = [
    ("BERT", "bert-base-uncased", BertModel, BertConfig, 110),
    ("BERT", "bert-large-uncased", BertModel, BertConfig, 340),
    ("RoBERTa", "roberta-base", RobertaModel, RobertaConfig, 125),
    ("RoBERTa", "roberta-large", RobertaModel, RobertaConfig, 355),
    ("DistilBERT", "distilbert-base-uncased", DistilBertModel, DistilBertConfig, 66),
    ("ALBERT", "albert-base-v2", AlbertModel, AlbertConfig, 12),
    ("ALBERT", "albert-large-v2", AlbertModel, AlbertConfig, 18),
]
published_counts = {}
print(
    f"{'preset':<24}{'N / D / H':>14}{'E':>6}{'parameters':>14}{'slides':>9}"
    f"{'vs BERT-base':>14}"
)
for family, preset, model_class, config_class, slides in published:
    config = config_class.preset(preset)
    with torch.device("meta"):  # shapes only, no memory
        published_counts[preset] = count_parameters(model_class(config))
    E = getattr(config, "embedding_size", config.d_model)
    ratio = published_counts[preset] / published_counts["bert-base-uncased"]
    shape = f"{config.n_layers} / {config.d_model} / {config.n_heads}"
    print(
        f"{preset:<24}{shape:>14}{E:>6}"
        f"{published_counts[preset]:>14,}{slides:>8}M{ratio:>13.2f}x"
    )

# %% [markdown]
# Ozdemir's slides round the counts to millions and agree with ours. Three differences stand out.
# RoBERTa-base has about 15M parameters more than BERT-base, all in the token table: its byte-level
# vocabulary has 50,265 entries against 30,522, times a width of 768. DistilBERT has half of
# BERT's layers but not half of its parameters, because the token table does not shrink with depth.
# ALBERT-base has about a tenth of BERT-base's parameters with the same depth, width and number of
# heads, and so the same arithmetic per token ({ref}`sec-albert`): a parameter count is not a
# measure of speed.
#
# {numref}`fig-family` draws the four base models side by side from their presets, with the
# parameter counts just computed: the same encoder four times, with its token table, its
# number of distinct layers and its pretraining objective changed.

# %% mystnb={"figure": {"caption": "The four base models of the family, drawn from their presets, with the parameter counts computed above. Bottom: the token table ($V \\times D$, or ALBERT's $V \\times E$ then $E \\times D$). Middle: the layers, the box's height growing with the number of distinct layers (DistilBERT has half of BERT's, ALBERT one set of weights for all). Top: the pretraining objective.", "name": "fig-family"}, "image": {"alt": "Four columns, BERT, RoBERTa, DistilBERT and ALBERT, each with its parameter count and three stacked boxes. Bottom, the token table: V by D for BERT, RoBERTa (a larger vocabulary) and DistilBERT; V by E then E by D for ALBERT. Middle, the layers with D, H and F: a tall box of 12 layers for BERT and RoBERTa, a shorter one of 6 layers for DistilBERT, and the shortest for ALBERT, 12 layers with one set of weights. Top, the objective: masked LM plus next sentence; masked LM only with dynamic masks; distillation from BERT; masked LM plus sentence order."}} tags=["diagram", "hide-input"]
from tinybert.diagrams import family_diagram

objectives = {
    "bert-base-uncased": "masked LM +\nnext sentence",
    "roberta-base": "masked LM only,\ndynamic masks",
    "distilbert-base-uncased": "distilled from BERT:\nKL + masked LM + cosine",
    "albert-base-v2": "masked LM +\nsentence order",
}
family_diagram(
    [
        (family, config.preset(preset), published_counts[preset], objectives[preset])
        for family, preset, _, config, _ in published
        if preset in objectives
    ]
)

# %% [markdown]
# The other rows describe training runs that nobody can repeat on a laptop: 16 to 160 GB of text,
# and days on eight to a thousand accelerators. The training time of ALBERT is left blank on
# Ozdemir's slides and only a relative speed is given. The performance row mixes a claim (the
# state of the art of its day) with GLUE averages measured on different versions of the
# benchmark's test server, and a ratio. At miniature scale we can do something the table cannot:
# give the four recipes exactly the same data and the same budget, and measure every column on the
# same machine.
#
# (sec-family-tiny)=
# ## Four tiny models: what each costs
#
# The published table mixes two kinds of numbers. Parameters, layers and widths are facts about an
# architecture; training time, data and benchmark scores are claims about a training run, which
# a laptop cannot repeat. How far a run on this CPU gets is the lesson of {doc}`09_pretraining`
# and {doc}`10_finetuning`: the course's `bert-mini` needed under two hours of pretraining to beat
# random weights on a few-shot task, and a run of a few minutes does not get past the token
# frequencies. Four such runs, one per recipe, do not fit a chapter, and a comparison of runs that
# learned nothing would compare noise. So this chapter measures, for four tiny members of the
# family, what does not depend on how long they are trained: their parameters, what one training
# step of each recipe costs and how much text it reads, and how fast each encoder runs. The
# exercise {ref}`ex-family-seeds` designs the quality comparison that a larger budget would allow.
#
# The four share everything except what makes each family what it is:
#
# - **the same data**: chapter 9's corpus (WikiText-2's validation articles and eight Gutenberg
#   novels), cut at the same places;
# - **the same tokenizer**: the WordPiece vocabulary of the course's `bert-mini` checkpoint, for all
#   four, so that every model predicts the same tokens. RoBERTa's byte-level BPE is left out here;
#   chapter 7 compared the two tokenizers;
# - **the same width and depth**: $D = 128$, 4 layers (4 applications of one layer for ALBERT),
#   4 heads, $F = 512$, inputs of at most 64 tokens, batches of 32;
# - **the same optimiser**: chapter 9's AdamW (`make_optimizer`), and the same initial seed.
#
# And what differs is each family's recipe:
#
# | | input | objective | masking | architecture |
# |---|---|---|---|---|
# | BERT | segment pairs, half with a random B | MLM + NSP | static: one mask per sequence for the whole run | chapter 8's `BertForPreTraining` |
# | RoBERTa | FULL-SENTENCES: one segment filled to 64 tokens | MLM | dynamic: a new mask every time | no token types, positions after the padding index |
# | ALBERT | two consecutive segments, half swapped | MLM + SOP | dynamic | $E = 64$ factorised embeddings, one shared layer |
# | DistilBERT | FULL-SENTENCES | distillation from the tiny BERT above, + MLM + cosine | dynamic | 2 layers, from BERT's layers 0 and 2 |
#
# DistilBERT is not pretrained from scratch: it starts from a BERT and spends its steps imitating
# it, so its cost is a BERT's pretraining plus its own, and the table shows both. RoBERTa's larger
# batches and ten times more data are the parts of its recipe that a per-step comparison leaves
# out; chapter 12 discussed batch size at equal compute.

# %%
tokenizer = WordPieceTokenizer.from_file(
    shipped_checkpoint() / "vocab.txt", lowercase=True
)
special = SpecialTokens.from_vocab(tokenizer.vocab)
MAX_LEN = pick(quick=32, full=64)
BATCH = pick(quick=8, full=32)

start = time.perf_counter()
train_documents = tokenize_documents(
    course_documents("train", max_documents=pick(quick=3, full=40)), tokenizer
)
train_sets = {
    "pairs": make_examples(
        train_documents, special, MAX_LEN, seeded_generator(0, "nsp pairs")
    ),
    "full": full_sentence_examples(train_documents, special, MAX_LEN),
    "sop": make_examples(
        train_documents,
        special,
        MAX_LEN,
        seeded_generator(0, "sop pairs"),
        sample_pairs=sample_sop_pairs,
    ),
}
print(
    f"{len(train_documents)} documents ({time.perf_counter() - start:.1f} s to "
    f"tokenize); inputs: "
    + ", ".join(f"{len(examples):,} {name}" for name, examples in train_sets.items())
)

# %% [markdown]
# The three input formats cut the same text differently. Segment pairs hold two segments of at most
# 30 tokens each, and there is one pair for every two consecutive segments of a document, so each
# segment is the B of one pair and the A of the next (unless a random B replaces it): the pairs read
# most of the text twice, which is why there are more pair inputs than full ones. A FULL-SENTENCES
# input reads the text once, packing whole sentences until the next one does not fit in 64
# positions. A step of the same number of sequences therefore does not read the same number of
# tokens, and the table counts them.
#
# The four models, from the same seed; the student is built from the BERT, as in
# {ref}`sec-distil-init`, and its teacher is a frozen copy:

# %%
size = dict(
    vocab_size=len(tokenizer),
    pad_token_id=special.pad,
    **pick(
        quick=dict(d_model=32, n_layers=2, n_heads=2, d_ff=64),
        full=dict(d_model=128, n_layers=4, n_heads=4, d_ff=512),
    ),
)
torch.manual_seed(0)
bert = BertForPreTraining(BertConfig(max_len=MAX_LEN, **size))
torch.manual_seed(0)
roberta = RobertaForMaskedLM(
    RobertaConfig(max_len=MAX_LEN + special.pad + 1, type_vocab_size=1, **size)
)
torch.manual_seed(0)
albert = AlbertForPreTraining(
    AlbertConfig(max_len=MAX_LEN, embedding_size=size["d_model"] // 2, **size)
)
student = student_from_teacher(
    bert, layers=[0, 2] if bert.config.n_layers == 4 else [0]
)
encoders = {
    "BERT": bert.bert,
    "RoBERTa": roberta.bert,
    "ALBERT": albert.bert,
    "DistilBERT": student.bert,
}
for name, encoder in encoders.items():
    print(f"{name:<11} encoder: {count_parameters(encoder):>9,} parameters")


# %% [markdown]
# (sec-family-objectives)=
# ### One loop for four objectives
#
# Chapter 9's `pretrain` trains any module that takes a batch's `input_ids`, `token_type_ids`,
# `attention_mask`, `mlm_labels` and `pair_labels` and returns a `PreTrainingOutput` with `loss`,
# `mlm_loss` and `pair_loss`. The four recipes fit behind that interface with one small adapter:
#
# - for BERT it is the model itself;
# - for RoBERTa it drops the segment ids and the pair labels (FULL-SENTENCES inputs carry none);
# - for ALBERT it is the model too, with its output renamed: `make_examples` with
#   `sample_pairs=sample_sop_pairs` stores sentence-order labels where it stores NSP labels, and
#   both heads take theirs as `pair_labels`;
# - for DistilBERT it runs the frozen teacher and returns chapter 13's triple loss; the teacher's
#   parameters do not require gradients, so `make_optimizer` leaves them out, and `train()` keeps
#   the teacher in evaluation mode (no dropout) whatever mode `pretrain` sets.

# %%
class Objective(nn.Module):
    """A family's pretraining objective behind chapter 9's interface: objective(**batch)
    -> PreTrainingOutput.

    kind "nsp": BERT, MLM + next sentence; "mlm": RoBERTa, MLM alone on one segment;
    "sop": ALBERT, MLM + sentence order (labels in pair_labels); "distil": DistilBERT's
    triple loss against ``teacher``.
    """

    KINDS = ("nsp", "mlm", "sop", "distil")

    def __init__(self, model: nn.Module, kind: str, teacher: nn.Module | None = None):
        super().__init__()
        if kind not in self.KINDS:
            raise ValueError(f"kind: expected one of {self.KINDS}, got {kind!r}")
        if (kind == "distil") != (teacher is not None):
            raise ValueError(
                f"a teacher is needed for kind 'distil' and only for it; "
                f"got kind {kind!r} and teacher {type(teacher).__name__}"
            )
        self.model, self.kind, self.teacher = model, kind, teacher
        if teacher is not None:
            # make_optimizer skips frozen parameters
            teacher.requires_grad_(False)

    def train(self, mode: bool = True) -> "Objective":
        super().train(mode)
        if self.teacher is not None:
            # the teacher never uses dropout
            self.teacher.eval()
        return self

    def forward(
        self,
        input_ids,
        token_type_ids=None,
        attention_mask=None,
        mlm_labels=None,
        pair_labels=None,
    ):
        if self.kind in ("nsp", "sop"):  # the pair head asks its own question
            out = self.model(
                input_ids,
                token_type_ids,
                attention_mask,
                mlm_labels=mlm_labels,
                pair_labels=pair_labels,
            )
            return PreTrainingOutput(
                out.loss, out.mlm_loss, out.pair_loss, out.mlm_logits, out.pair_logits
            )
        # (B, 2): no pair head
        no_pairs = input_ids.new_zeros((input_ids.shape[0], 2), dtype=torch.float)
        zero = input_ids.new_zeros((), dtype=torch.float)
        if self.kind == "mlm":
            out = self.model(
                input_ids, attention_mask=attention_mask, labels=mlm_labels
            )
            return PreTrainingOutput(out.loss, out.loss, zero, out.logits, no_pairs)
        # (B, T) each
        masked, real = mlm_labels != IGNORE_INDEX, attention_mask.bool()
        with torch.no_grad():
            t_hidden = self.teacher.bert(
                input_ids, attention_mask=attention_mask
            ).last_hidden_state  # (B, T, D)
            # (N, V)
            t_logits = self.teacher.mlm_head(t_hidden[masked])
        s_hidden = self.model.bert(
            input_ids, attention_mask=attention_mask
        ).last_hidden_state  # (B, T, D)
        # (N, V)
        s_logits = self.model.mlm_head(s_hidden[masked])
        out = distillation_loss(
            s_logits,
            t_logits,
            temperature=2.0,
            labels=mlm_labels[masked],
            student_hidden=s_hidden[real],
            teacher_hidden=t_hidden[real],
        )
        return PreTrainingOutput(out.loss, out.mlm, zero, s_logits, no_pairs)


# %% [markdown]
# (sec-family-training)=
# ### The cost of a training step
#
# Wall-clock times of steps run one model after the other depend on whatever else the machine was
# doing meanwhile. So the cost of a step is measured the fair way: one training step of each model
# (forward, backward and AdamW, on a copy, with its own kind of batch), in rotation, several times,
# and the median of each, so that all four share the same load. The same cell counts the real
# (non-padding) tokens in each model's batches.

# %%
objectives = {
    "BERT": Objective(bert, "nsp"),
    "RoBERTa": Objective(roberta, "mlm"),
    "ALBERT": Objective(albert, "sop"),
    "DistilBERT": Objective(student, "distil", teacher=copy.deepcopy(bert)),
}
inputs = {
    "BERT": PretrainingBatches(
        train_sets["pairs"], special, BATCH, seed=0, dynamic_masking=False
    ),
    "RoBERTa": PretrainingBatches(train_sets["full"], special, BATCH, seed=0),
    "ALBERT": PretrainingBatches(train_sets["sop"], special, BATCH, seed=0),
    "DistilBERT": PretrainingBatches(train_sets["full"], special, BATCH, seed=0),
}


def step_seconds(objectives: dict, inputs: dict, repeats: int) -> dict:
    """Median seconds of one training step (forward, backward, AdamW) of each objective,
    timed in rotation."""
    copies = {}
    for name, objective in objectives.items():
        model = copy.deepcopy(objective).to(device).train()
        batch = inputs[name](0)
        copies[name] = (
            model,
            make_optimizer(model, 1e-3),
            {k: v.to(device) for k, v in batch.items()},
        )
    times = {name: [] for name in copies}
    for repeat in range(repeats + 1):
        for name, (model, optimizer, batch) in copies.items():
            start = time.perf_counter()
            model(**batch).loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            # the first round warms up
            if repeat > 0:
                times[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in times.items()}


step_time = step_seconds(objectives, inputs, repeats=pick(quick=1, full=5))
tokens_per_step = {
    name: statistics.mean(
        int(batches(i)["attention_mask"].sum()) for i in range(pick(quick=2, full=20))
    )
    for name, batches in inputs.items()
}
for name, value in step_time.items():
    print(
        f"{name:<11} {value * 1000:6.0f} ms per training step, "
        f"{tokens_per_step[name]:,.0f} real tokens per step"
    )

# %% [markdown]
# (sec-family-speed)=
# ### Inference speed
#
# Last, the speed of each encoder on this CPU: the same batch of FULL-SENTENCES inputs, every
# encoder in turn, repeated, and the median time of each, so that all four see the same load on
# the machine.

# %%
speed_batch = {
    k: v
    for k, v in inputs["RoBERTa"](0).items()
    if k in ("input_ids", "attention_mask")
}
cpu_encoders = {
    name: copy.deepcopy(encoder).cpu().eval() for name, encoder in encoders.items()
}
times = {name: [] for name in cpu_encoders}
with torch.inference_mode():
    for repeat in range(pick(quick=2, full=7)):
        for name, encoder in cpu_encoders.items():
            start = time.perf_counter()
            encoder(
                speed_batch["input_ids"], attention_mask=speed_batch["attention_mask"]
            )
            # the first pass warms up the kernels
            if repeat > 0:
                times[name].append(time.perf_counter() - start)
seconds = {name: statistics.median(values) for name, values in times.items()}
for name, value in seconds.items():
    print(
        f"{name:<11} {value * 1000:7.1f} ms per batch of "
        f"{len(speed_batch['input_ids'])}, {seconds['BERT'] / value:4.2f}x "
        f"BERT's speed"
    )

# %% [markdown]
# (sec-family-measured)=
# ## The table, measured here

# %% mystnb={"image": {"alt": "Three bar charts for BERT, RoBERTa, ALBERT and DistilBERT as built here: parameters, time per training step and inference speed relative to BERT; ALBERT has the fewest parameters but is barely faster, DistilBERT is clearly the fastest."}}
names = list(encoders)
parameters = {n: count_parameters(encoders[n]) for n in names}
rows = {
    "parameters (encoder)": {n: f"{parameters[n]:,}" for n in names},
    "layers / hidden / heads": {
        n: f"{encoders[n].config.n_layers} / "
        f"{encoders[n].config.d_model} / "
        f"{encoders[n].config.n_heads}"
        for n in names
    },
    "training step": {n: f"{step_time[n] * 1000:.0f} ms" for n in names},
    "real tokens per step": {n: f"{tokens_per_step[n]:,.0f}" for n in names},
    "CPU inference speed": {n: f"{seconds['BERT'] / seconds[n]:.2f}x" for n in names},
    "method": {
        "BERT": "MLM+NSP, static",
        "RoBERTa": "MLM, full, dynamic",
        "ALBERT": "shared, SOP",
        "DistilBERT": "distilled",
    },
}
rows["training step"]["DistilBERT"] += " + BERT's"
print(f"{'':<23}" + "".join(f"{name:>19}" for name in names))
for row, values in rows.items():
    print(f"{row:<23}" + "".join(f"{values[name]:>19}" for name in names))
print("DistilBERT's step also runs its teacher; its pretraining comes on top of BERT's")

fig, axes = plt.subplots(1, 3, figsize=(11, 3.2))
colours = ["C0", "C1", "C2", "C3"]
axes[0].bar(names, [parameters[n] / 1e6 for n in names], color=colours)
axes[0].set(title="parameters (millions)")
axes[1].bar(names, [step_time[n] * 1000 for n in names], color=colours)
axes[1].set(title="training step (ms)")
axes[2].bar(names, [seconds["BERT"] / seconds[n] for n in names], color=colours)
axes[2].set(title="inference speed (x BERT's)")
for ax in axes:
    ax.tick_params(axis="x", labelrotation=30, labelsize=8)
fig.tight_layout()
plt.show()

assert min(parameters, key=parameters.get) == "ALBERT"  # sharing: the fewest
assert parameters["DistilBERT"] < parameters["BERT"]  # half the layers
if not is_quick():  # the full-size run; timings are medians in rotation
    # pairs: two nearly full segments per input, but the text twice over
    assert tokens_per_step["BERT"] > tokens_per_step["RoBERTa"]
    assert len(train_sets["pairs"]) > 1.2 * len(train_sets["full"])
    assert seconds["BERT"] / seconds["DistilBERT"] > 1.4  # half the layers: faster
    assert seconds["BERT"] / seconds["ALBERT"] < 1.25  # sharing is not speed

# %% [markdown]
# What the table shows, and the cell asserts:
#
# - **Parameters and speed are properties of the architecture**, and they reproduce the pattern of
#   Ozdemir's table at any scale. ALBERT has the fewest parameters but runs inference not much
#   faster than BERT (less than 1.25 times its speed, asserted), because every token still goes
#   through four layers of the same width (plus its $E \to D$ projection). DistilBERT, with half
#   the layers, is the only one of the four that is clearly faster.
# - **A step is not a unit of text.** A step of BERT's segment pairs reads more real tokens than a
#   step of RoBERTa's FULL-SENTENCES inputs, whose last whole sentence rarely ends at position 64;
#   but the pairs read most of the text twice, so an epoch of pairs takes more steps, and NSP spends
#   half of them on a B from another document. RoBERTa's headline gains came from scale (ten times
#   the data, larger batches, more steps), which a per-step comparison leaves out.
# - **DistilBERT's step runs two models**: the student's forward and backward and the teacher's
#   forward, and its pretraining comes on top of its teacher's. What it buys is the cheaper model
#   afterwards.
# - **What this table cannot show is quality**, the published table's last rows. That needs each
#   recipe trained far past the token frequencies, several times over ({ref}`ex-family-seeds`).
#
# (sec-family-decoders)=
# ## Encoders, decoders and encoder-decoders
#
# Every model of this course after chapter 6 is an *encoder*: each token attends to every other
# token, on both sides, and the model is trained to reconstruct hidden tokens. That makes it good at
# representing text (classifying it, tagging it, finding a span in it) and unable to generate text
# left to right, since at every position it expects to see the future. Chapter 6 built the other two
# arrangements of the original Transformer {cite}`vaswani2017attention`:
#
# - a {term}`decoder-only <decoder-only model>` model (GPT {cite}`radford2019language`, LLaMA {cite}`touvron2023llama`)
#   applies a {term}`causal mask`, so that position $t$ sees only positions $1..t$, and is trained to predict
#   the next token; it generates text one token at a time, and a task becomes a prompt;
# - an {term}`encoder-decoder <encoder-decoder model>` (the original Transformer; T5 {cite}`raffel2020exploring`) encodes the
#   input with full attention and generates the output with a causal decoder that also attends to
#   the encoder's states ({term}`cross-attention`).
#
# The difference is visible in the attention masks alone:

# %% mystnb={"image": {"alt": "Three attention masks, dark where a query may attend: the encoder's full square, the decoder's causal lower triangle, and the encoder-decoder's full rectangle of cross-attention from the target to the source positions."}}
T, S = 6, 5
patterns = {
    "encoder (BERT): self-attention": torch.ones(T, T, dtype=torch.bool),
    "decoder (GPT): causal self-attention": causal_mask(T),
    "encoder-decoder (T5): cross-attention": torch.ones(T, S, dtype=torch.bool),
}
fig, axes = plt.subplots(1, 3, figsize=(11, 3.2))
for ax, (title, mask) in zip(axes, patterns.items()):
    ax.imshow(mask.numpy(), cmap="Blues", vmin=0, vmax=1.4)
    ax.set(
        title=title,
        xlabel="key position",
        ylabel="query position",
        xticks=range(mask.shape[1]),
        yticks=range(mask.shape[0]),
    )
    ax.title.set_fontsize(9)
fig.tight_layout()
plt.show()
for title, mask in patterns.items():
    print(f"{title:<40} {int(mask.sum()):>3} of {mask.numel()} query-key pairs allowed")

# %% [markdown]
# (Dark: may attend. A T5 decoder uses the causal pattern for its own tokens and the full
# cross-attention pattern for the source.) The mask decides what the training signal can be. A
# causal model gets a prediction at *every* position of every sequence, while BERT learns from the
# 15% of positions it masked; in exchange, BERT's predictions use both sides of the gap.
#
# | | encoder (BERT family) | decoder (GPT family) | encoder-decoder (T5) |
# |---|---|---|---|
# | self-attention | full | causal | full (encoder), causal (decoder) |
# | pretraining objective | reconstruct masked tokens | predict the next token | reconstruct masked spans of the input, as output text |
# | predictions per sequence | the masked positions (15%) | every position | every position of the output |
# | natural uses | classification, tagging, span extraction, embeddings for search | generation, prompting, chat | translation, summarisation, any text-to-text task |
#
# (sec-family-languages)=
# ## Other languages: multilingual BERT and language-specific models
#
# Every model in this course reads English. The BERT authors also released **multilingual
# BERT** (mBERT): BERT-base, trained with the same two objectives on the Wikipedias of the
# largest hundred or so languages (104 in the cased version, 102 in the uncased one), with one
# WordPiece vocabulary of about 110,000 pieces shared by all of them. Large Wikipedias were
# sampled less often and small ones more often, so that English would not drown the rest. As
# for English, there are two versions: the *cased* one keeps upper case and diacritics, the
# *uncased* one lower-cases the text and strips the diacritics, so that the Swedish *får*
# (sheep; also gets) and *far* (father) become the same word.
#
# Nothing in mBERT's training says which language a sentence is in, and no sentence comes with
# its translation. Yet its representations turned out to be shared enough across languages for
# **cross-lingual transfer**: fine-tune on a task in English, then run the model on the same
# task in another language, with no training example in that language. MLQA
# {cite}`lewis2020mlqa` measures this for extractive question answering (the SQuAD task of
# {doc}`10_finetuning`), with the questions and paragraphs in seven languages; its Table 5, on
# {ref}`Straka's lecture slides <sources-decks>` (Charles University, 2023), gives F1 / exact match
# for models fine-tuned on English SQuAD:
#
# | F1 / EM | en | es | de | ar | hi | vi | zh |
# |---|---|---|---|---|---|---|---|
# | BERT-large (English only) | 80.2 / 67.4 | | | | | | |
# | multilingual BERT | 77.7 / 65.2 | 64.3 / 46.6 | 57.9 / 44.3 | 45.7 / 29.8 | 43.8 / 29.7 | 57.1 / 38.6 | 57.5 / 37.3 |
# | XLM | 74.9 / 62.4 | 68.0 / 49.8 | 62.2 / 47.6 | 54.8 / 36.3 | 48.8 / 27.3 | 61.4 / 41.8 | 61.1 / 39.6 |
# | translate test, BERT-large | | 65.4 / 44.0 | 57.9 / 41.8 | 33.6 / 20.4 | 23.8 / 18.9 | 58.2 / 33.2 | 44.2 / 20.3 |
# | translate train, mBERT | | 53.9 / 37.4 | 62.0 / 47.5 | 51.8 / 33.2 | 55.0 / 40.0 | 62.0 / 43.1 | 61.4 / 39.5 |
#
# *Translate test* machine-translates each question and paragraph into English, answers with the
# English BERT-large and maps the answer back; *translate train* machine-translates SQuAD into
# the target language and fine-tunes mBERT on it. The cell compares mBERT's zero-shot transfer
# with both:

# %%
languages = ["es", "de", "ar", "hi", "vi", "zh"]
mlqa_f1 = {
    "mBERT, English only": [64.3, 57.9, 45.7, 43.8, 57.1, 57.5],
    "translate test": [65.4, 57.9, 33.6, 23.8, 58.2, 44.2],
    "translate train": [53.9, 62.0, 51.8, 55.0, 62.0, 61.4],
}
mbert_english = 77.7
zero_shot = mlqa_f1["mBERT, English only"]
for name, scores in mlqa_f1.items():
    cells = [f"{lang} {f1:4.1f}" for lang, f1 in zip(languages, scores)]
    print(f"{name:<20}", "  ".join(cells))
gap = mbert_english - statistics.mean(zero_shot)
print(
    f"mBERT: English F1 {mbert_english}, the other six "
    f"{statistics.mean(zero_shot):.1f} on average ({gap:.1f} points lower)"
)
assert all(f1 < mbert_english for f1 in zero_shot) and 20 < gap < 25
lead = [round(t - z, 1) for z, t in zip(zero_shot, mlqa_f1["translate test"])]
print(
    "translate test minus zero-shot mBERT:",
    ", ".join(f"{lang} {d:+.1f}" for lang, d in zip(languages, lead)),
)
assert max(lead) <= 1.1  # mBERT never more than 1.1 points behind
assert all(d < -10 for lang, d in zip(languages, lead) if lang in {"ar", "hi", "zh"})
helped = [
    lang
    for lang, z, t in zip(languages, zero_shot, mlqa_f1["translate train"])
    if t > z
]
print("translate train beats zero-shot mBERT on:", ", ".join(helped))
assert helped == ["de", "ar", "hi", "vi", "zh"]

# %% [markdown]
# Zero-shot mBERT loses more than 20 points of F1 against its own English score, but it stays
# within 1.1 points of the translation pipeline on the three languages written in the Latin
# alphabet (Spanish, German, Vietnamese) and beats it by more than ten points on Arabic, Hindi
# and Chinese, where machine translation and the mapping of answers back to the original text
# are harder. Translating the training data instead helps on five of the six languages, all but
# Spanish.
#
# A shared vocabulary has a price, though. About 110,000 pieces for a hundred languages leaves
# each smaller language few pieces of its own, so its words are cut into many short pieces: the
# sequences get longer, the 512 positions hold less text, and each piece says less about the
# word. That is one reason for **language-specific models**.
# {ref}`Magnusson's lecture slides <sources-decks>` (Uppsala University, 2022 and 2024) mention
# the one the National Library of Sweden trained: KB-BERT {cite}`malmsten2020playing`, a cased
# BERT-base with its own Swedish vocabulary, pretrained on about 15–20 GB of Swedish text (books,
# news, government publications, Swedish Wikipedia and internet forums) from the library's
# collections. In its authors' evaluation it did better than mBERT on Swedish named-entity
# recognition and part-of-speech tagging.
#
# We cannot load a Swedish vocabulary offline, but we can measure the other side of the
# argument: what an English vocabulary does to Swedish. The measure is the **fertility**, the
# number of word pieces per word. The Swedish sentences below are ours, written for this page,
# each with an English translation; we tokenize them with two English WordPiece vocabularies,
# the 30,522 pieces of `bert-base-uncased` (which the real encoder all-MiniLM-L6-v2 uses) and
# the course checkpoint's much smaller one:

# %%
sentence_pairs = [  # (English, Swedish): the Swedish sentences are this course's own
    (
        "My sister likes to read books in the evenings, and this weekend she will "
        "borrow some new ones at the library.",
        "Min syster läser gärna böcker på kvällarna, och i helgen ska hon låna några "
        "nya på biblioteket.",
    ),
    (
        "It rained all day, so we stayed inside and drank hot chocolate.",
        "Det regnade hela dagen, så vi stannade inne och drack varm choklad.",
    ),
    (
        "The train to Gothenburg was late because it had snowed during the night.",
        "Tåget till Göteborg var försenat eftersom det hade snöat under natten.",
    ),
]
english_vocabularies = {
    "bert-base-uncased": load_minilm().tokenizer,
    "course checkpoint": load_pretrained().tokenizer,
}
assert len(english_vocabularies["bert-base-uncased"]) == 30_522
assert len(english_vocabularies["course checkpoint"]) < 10_000


def fertility(tokenizer, sentences: list[str]) -> float:
    """Word pieces per word, with words as runs of letters and digits."""
    words = [w for sentence in sentences for w in re.findall(r"\w+", sentence)]
    return sum(len(tokenizer.encode(w).tokens) for w in words) / len(words)


ratios = {}
for name, tokenizer in english_vocabularies.items():
    english = fertility(tokenizer, [en for en, sv in sentence_pairs])
    swedish = fertility(tokenizer, [sv for en, sv in sentence_pairs])
    ratios[name] = swedish / english
    print(
        f"{name:<18} ({len(tokenizer):>6,} pieces) pieces per word: English "
        f"{english:.2f}, Swedish {swedish:.2f} ({swedish / english:.1f} x)"
    )
    assert swedish > 1.4 * english
    if name == "bert-base-uncased":
        assert english < 1.05  # almost every word is one piece
tokenizer = english_vocabularies["bert-base-uncased"]
print("\n" + " ".join(tokenizer.encode(sentence_pairs[0][1]).tokens))
assert tokenizer.encode("läser").tokens == tokenizer.encode("laser").tokens
assert tokenizer.encode("får").tokens == tokenizer.encode("far").tokens
assert 1.7 < ratios["bert-base-uncased"] < 1.9
assert 1.7 < ratios["course checkpoint"] < 2.0

# %% [markdown]
# With the large English vocabulary almost every English word is a single piece, while the Swedish
# words need about 1.8 times as many pieces; the small course vocabulary splits English words a
# little more often, and its Swedish words need nearly twice as many pieces as its English ones
# (the ratios are printed above). The printed pieces show a second loss: the uncased English
# tokenizer, like uncased mBERT, strips the diacritics, so *läser* (reads) comes out as the
# English word *laser*, and *får* as *far*. A Swedish vocabulary, as in the cased KB-BERT, keeps
# common Swedish words whole and keeps *å*, *ä* and *ö*, so the same 512 positions hold more
# Swedish text, in pieces that mean more. The choice between the two kinds of model is a trade:
# one multilingual model that transfers across a hundred languages, or one model per language that
# reads its language better.
#
# (sec-family-next)=
# ## Where to go next
#
# - **Better encoders.** ELECTRA {cite}`clark2020electra` replaces MLM by
#   {term}`replaced token detection`: a small generator fills the masked positions, and the encoder learns to tell, at
#   every position, whether the token is original, so that all positions give a training signal.
#   DeBERTa {cite}`he2021deberta` keeps separate content and position vectors in attention (an idea
#   close to chapter 5's relative positions). XLNet {cite}`yang2019xlnet` predicts tokens in random
#   orders to get bidirectional context from an autoregressive model.
# - **Sentence embeddings.** A fine-tuned BERT compares two sentences by reading them together;
#   Sentence-BERT {cite}`reimers2019sentence` trains the encoder so that its pooled vectors of
#   separate sentences can be compared by cosine similarity, which is what search systems index.
# - **Longer inputs and faster attention.** Chapter 3 measured attention's $O(T^2)$ cost. ALiBi
#   {cite}`press2022train` and rotary positions with interpolation {cite}`chen2023extending`
#   (chapter 5) extend the usable length; FlashAttention {cite}`dao2022flashattention` computes exact
#   attention without materialising the $T \times T$ matrix.
# - **Decoders and scale.** GPT-2 {cite}`radford2019language` and LLaMA {cite}`touvron2023llama`
#   are chapter 6's decoder-only model, scaled up; how to split a compute budget between model size
#   and data is itself measured {cite}`hoffmann2022training`. The course's code runs the same
#   blocks at any size: the presets of chapters 8 and 12 to 14 load the released weights through
#   `tinybert.models.convert.from_hf`.
#
# (sec-family-summary)=
# ## Summary
#
# - The published table's parameter counts are facts about the architectures, and this course's
#   implementations reproduce them exactly. Parameters are not compute: ALBERT shares weights but
#   not arithmetic, and only DistilBERT's fewer layers make it faster.
# - A fair comparison of pretraining recipes fixes the data, tokenizer, size, batch and optimiser.
#   For four tiny models the chapter measures what a laptop can: parameters, the cost of a
#   training step and the real tokens it reads (BERT's segment pairs read more per step, but read
#   most of the text twice), and inference speed. Comparing their quality needs runs far longer
#   than a chapter, several seeds each, and a check against the token frequencies first.
# - Encoders read both sides and learn from the masked positions; decoders read the left side and
#   learn from every position; the mask is the difference.
# - Multilingual BERT shares one model and one vocabulary among about a hundred languages and
#   transfers a task learned in English to the others; a language-specific model such as KB-BERT
#   gives its language a vocabulary of its own, which an English vocabulary's extra pieces per
#   Swedish word show the need for.
#
# (sec-family-exercises)=
# ## Exercises
#
# :::{exercise-start}
# :label: ex-family-prefix-mask
# :difficulty: 1
# :minutes: 15
# :kind: coding
# :::
# **A prefix language model's mask.** Between BERT's full mask and GPT's causal mask lies the
# {term}`prefix LM <prefix language model>` (UniLM, T5's prefix variant): the first `prefix` positions attend to each other in
# both directions, and every later position attends causally (to itself, to everything before it,
# and so to the whole prefix). Write `prefix_lm_mask(T, prefix)` that returns this bool `(T, T)`
# mask (True = may attend, the course's convention), and raises `ValueError` unless
# `0 <= prefix <= T`. What do `prefix = 0` and `prefix = T` give?
# :::{exercise-end}
# :::
#
# ::::{solution-start} ex-family-prefix-mask
# :class: dropdown
# ::::
# Start from the causal mask and open the prefix block. `prefix = 0` is the causal mask of a
# decoder, and `prefix = T` the full mask of an encoder.

# %% tags=["solution"]
from tinybert.blocks.attention import causal_mask
from tinybert.models.pretrained_encoder import load_minilm


def prefix_lm_mask(T, prefix):
    ### BEGIN SOLUTION
    if not 0 <= prefix <= T:
        raise ValueError(f"prefix must be in [0, T] = [0, {T}], got {prefix}")
    # (T, T) True on and below the diagonal
    mask = causal_mask(T)
    # the prefix sees itself in both directions
    mask[:prefix, :prefix] = True
    return mask
    ### END SOLUTION


# %% [markdown]
# ::::{solution-end}
# ::::

# %% tags=["check"]
from tinybert.exercises.ch15 import check_prefix_lm_mask

check_prefix_lm_mask(prefix_lm_mask)


# %% [markdown]
# :::{exercise-start}
# :label: ex-family-flops
# :difficulty: 3
# :minutes: 40
# :kind: coding
# :::
# **Arithmetic, not parameters.** Write `encoder_flops(n_layers, d_model, d_ff, batch_size,
# seq_len, pooler=True, embedding_size=None)` that returns the floating-point operations of one
# forward pass through a BERT-family encoder, counting each multiply-add of a matrix product as 2
# operations and ignoring everything else (embedding lookups, additions, softmax, LayerNorm). Count
# the four attention projections, the two products of attention itself ($QK^\top$ and the weights
# times $V$), the two feed-forward matrices, the pooler when there is one (on the `[CLS]` vector
# only), and ALBERT's $E \to D$ projection when `embedding_size` is given. The check compares your
# count with PyTorch's `torch.utils.flop_counter.FlopCounterMode` on real BERT, DistilBERT and
# ALBERT models. Then use it to compare the four tiny models of this chapter per token.
# :::{exercise-end}
# :::
#
# ::::{solution-start} ex-family-flops
# :class: dropdown
# ::::
# Per layer and per token: $4D^2$ multiply-adds for $W^Q, W^K, W^V, W^O$, $2TD$ for the two
# attention products (each token meets $T$ others in each of $H$ heads of width $D/H$), and $2DF$
# for the feed-forward block. The pooler adds $D^2$ per sequence and the ALBERT projection $ED$ per
# token. ALBERT's count differs from BERT's only by that projection: sharing saves parameters, not
# arithmetic; DistilBERT's is about half of BERT's.

# %% tags=["solution"]
def encoder_flops(
    n_layers, d_model, d_ff, batch_size, seq_len, pooler=True, embedding_size=None
):
    ### BEGIN SOLUTION
    B, T, D, F_ = batch_size, seq_len, d_model, d_ff
    # multiply-adds
    per_layer = 4 * B * T * D * D + 2 * B * T * T * D + 2 * B * T * D * F_
    total = n_layers * per_layer
    if pooler:
        total += B * D * D
    if embedding_size is not None:
        total += B * T * embedding_size * D
    return 2 * total
    ### END SOLUTION


# %% [markdown]
# ::::{solution-end}
# ::::

# %% tags=["check"]
from tinybert.exercises.ch15 import check_encoder_flops

check_encoder_flops(encoder_flops)

# %% [markdown]
# :::{exercise-start}
# :label: ex-family-seeds
# :difficulty: 2
# :minutes: 20
# :kind: experiment
# :::
# **Is the difference real? (computation)** The chapter measures what each recipe costs, not how
# well it learns. Design the quality comparison: pretrain two of the four tiny models with chapter
# 9's `pretrain` (the `Objective` adapter above fits them to it), fine-tune each on Banking77 with
# chapter 10's `finetune_task`, and tell whether their accuracies differ by more than chance.
# Which sources of randomness would you vary, and which must stay fixed? What must each run reach
# before the comparison means anything, and what would it cost, from the step times the chapter
# printed?
# :::{exercise-end}
# :::
#
# ::::{solution-start} ex-family-seeds
# :class: dropdown
# ::::
# **Rubric** (what a full answer contains): several seeds per model for pretraining and
# fine-tuning, with data, budget and evaluation set fixed; means compared with spreads; a first
# check that each pretrained model's held-out MLM loss is below the token frequencies' and that
# each fine-tuned model beats one without pretraining; a cost of about $k$ times the steps times
# the printed step time; a binomial standard error (about 2 points on 385 examples) as a first
# check.
#
# Repeat each pretraining run and each fine-tuning run with several seeds (the initial weights, the
# order of the batches, the masks and the dropout all come from the seed), keeping the data, the
# budget and the evaluation set fixed, and compare the means of the two models with their spread.
# Before that, check that the runs learned anything: a model whose held-out masked-token loss is
# not below what the token frequencies alone give (a {term}`unigram model`) has only learned
# which tokens are common, and a fine-tuned model that does not beat the same architecture with
# random weights has gained nothing from pretraining; chapter 9's `bert-mini` needed under two
# hours of this kind of CPU to get there. With $k$ seeds per model and $S$ steps per run, the
# pretraining costs about $k S$ times the printed step time, per model, plus the fine-tuning. Even one fixed pretrained model gives a useful first answer: the
# evaluation set has 385 examples, so an accuracy $p$ has a binomial standard error of
# $\sqrt{p(1-p)/385}$, about 2 points at $p = 0.2$; differences smaller than about twice that are
# not evidence of anything. Chapter 14 computed such an error for its SOP experiment.
# ::::{solution-end}
# ::::
#
# :::{exercise-start}
# :label: ex-family-choose
# :difficulty: 1
# :minutes: 15
# :kind: concept
# :::
# **Choosing a family member (discussion).** For each situation, which of the four would you start
# from, and why? (a) A phone app that classifies support messages offline, with 50 ms per message on
# a mobile CPU. (b) A research group that wants the best accuracy on a reading-comprehension
# benchmark and has many GPUs. (c) A model that must be shipped to thousands of devices over a slow
# network, where the download size matters more than the speed. (d) A system that must write
# replies, not classify them.
# :::{exercise-end}
# :::
#
# ::::{solution-start} ex-family-choose
# :class: dropdown
# ::::
# **Rubric** (what a full answer contains): (a) DistilBERT, the only one faster per token; (b)
# RoBERTa or a successor, for accuracy with large compute; (c) ALBERT, for its download size
# though not its speed; (d) none of them: generation needs a decoder-only or encoder-decoder
# model; each choice with its reason.
#
# (a) DistilBERT: it is the only one of the four that is faster per token, because it has fewer
# layers, and it keeps most of its teacher's accuracy when the teacher is well trained. (b) RoBERTa
# (or its successors): its gains came from more data and longer training, which a group with many
# GPUs can also afford for fine-tuning large models. (c) ALBERT: its download is about a tenth of
# BERT's for the same depth and width, though it runs hardly faster. (d) None of them: an encoder does
# not generate left to right; a decoder-only model (chapter 6) or an encoder-decoder is the right
# family.
# ::::{solution-end}
# ::::
#
# (sec-family-quiz)=
# ## Quiz
#
# Check what you took from this chapter. In a notebook, run the cell and answer with
# `quiz.check(question, answer)`, such as `quiz.check(1, "b")`; here, press *Check*.

# %% tags=["quiz", "remove-input"]
from tinybert.blocks.attention import causal_mask
from tinybert.exercises.quiz import Quiz, choice, number

quiz = Quiz(
    "ch15",
    [
        choice(
            "Which family member is faster per token than BERT of the same width?",
            ["RoBERTa", "ALBERT", "DistilBERT", "none of them"],
            answer="c",
            explain="Only fewer layers means less arithmetic per token.",
        ),
        choice(
            "Which of these does ALBERT's cross-layer sharing not reduce?",
            [
                "the arithmetic per token",
                "the number of parameters",
                "the size of its checkpoint",
                "the memory its weights take",
            ],
            answer="a",
            explain="Every layer still computes.",
        ),
        choice(
            "What separates an encoder from a decoder, in this chapter's terms?",
            [
                "the attention mask",
                "the vocabulary",
                "the number of layers",
                "the optimizer",
            ],
            answer="a",
            explain="Both sides, or the left side only.",
        ),
        choice(
            "Before comparing two pretrained models' masked-token losses, compare each "
            "with",
            [
                "the published loss of the full-size model",
                "the token frequencies on the same masked tokens",
                "its own training loss on the last batch",
                "a decoder-only model of the same size",
            ],
            answer="b",
            explain="A baseline that needs no model.",
        ),
        number(
            "How many entries of a causal mask for T = 5 tokens are True?",
            answer=int(causal_mask(5).sum()),
            decimals=0,
            explain="1 + 2 + 3 + 4 + 5.",
        ),
        choice(
            "Which would you start from to write replies rather than classify them?",
            [
                "BERT, with its MLM head predicting each next word",
                "DistilBERT, since replies must come fast",
                "ALBERT, since it has the smallest download",
                "a decoder-only or encoder-decoder model",
            ],
            answer="d",
            explain="Encoders do not generate left to right.",
        ),
    ],
)
quiz
