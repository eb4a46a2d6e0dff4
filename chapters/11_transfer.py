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
#     module: finetuning.ladder
# ---

# %% [markdown]
# (sec-tr)=
# # Does pretraining pay off?
#
# {doc}`09_pretraining` spent under two CPU hours teaching `bert-mini` to fill in masked words,
# and {doc}`10_finetuning` built what it takes to fine-tune it on a task. This chapter asks
# what the pretraining was worth. The test is a ladder: three encoders of increasing
# pretraining, one fine-tuning recipe, several seeds each, and beside them baselines that need no
# neural network. It climbs the ladder on intents and part-of-speech tags, then on named
# entities and on sentence pairs, a new kind of input. It then tries the other way to use a
# pretrained encoder, reading its frozen vectors layer by layer, and ends on two tasks whose
# text the course checkpoint never read, which is where the evidence turns against it.
#
# **What you will learn**
#
# - how to compare encoders fairly: each arm's own learning rate chosen on validation data, the
#   same data and head, several seeds, the test split, and a gap counted only when it is larger
#   than the spread of the seeds;
# - by measurement, what the course's two-hour checkpoint and a real pretrained encoder
#   (all-MiniLM-L6-v2) gain over random initialisation, and what trivial baselines already
#   reach;
# - how BERT reads a *pair* of texts, `[CLS] A [SEP] B [SEP]` with segment ids, and why
#   counting shared words is the baseline a pair task must be read against;
# - what {term}`task-adaptive pretraining` is, what it bought the course checkpoint on the
#   tasks whose text it read, and what the checkpoint does on text it never read;
# - how to use a pretrained encoder without fine-tuning it (the *feature-based* approach), and
#   why the best layer depends on how the encoder was trained.
#
# **Uses**: from {doc}`10_finetuning`: `finetune_task` and `task_data`
# (`tinybert.finetuning.recipes`), the heads `SequenceClassifier` and `TokenClassifier`, the
# loop (`finetune`, `predict`), the data readers and subsets (`read_iob2`, `NER_TAGS`,
# `load_squad_dev_split`, `split_squad`, `evenly_spaced`, `per_label`), `encode_tagged` and the
# metrics (`accuracy`, `entity_scores`, `entity_spans`); from {doc}`09_pretraining`:
# `load_pretrained`, `split_sentences`, `SpecialTokens`, `encode_pair` and `pad_features`; from
# {doc}`08_bert`: `BertModel`, `IGNORE_INDEX` and `load_minilm`.
#
# (sec-tr-setup)=
# ## Setup
#
# The chapter writes `tinybert.finetuning.ladder` (the ladder's arms and runs),
# `tinybert.finetuning.sentence_pairs` and `tinybert.finetuning.feature_based`. The cell loads
# the course checkpoint once, for the experiments that use it directly.

# %%
import time
from collections import Counter
from dataclasses import asdict

import matplotlib.pyplot as plt
import torch

from tinybert.models.course_checkpoint import load_pretrained
from tinybert.data import fetch
from tinybert.finetuning.metrics import accuracy, entity_scores, entity_spans
from tinybert.finetuning.squad import load_squad_dev_split
from tinybert.finetuning.tagging_tasks import read_iob2
from tinybert.finetuning.text_tasks import evenly_spaced, per_label
from tinybert.training.inputs import SpecialTokens  # chapter 9
from tinybert.training.inputs import encode_pair  # chapter 9
from tinybert.runtime import get_device, is_quick, pick
from tinybert.shipped import load_result

device = get_device()
pretrained = load_pretrained()  # the course's bert-mini (chapter 9)
tokenizer, config = pretrained.tokenizer, pretrained.config
special = SpecialTokens.from_vocab(tokenizer.vocab)
# chapter 10's named entities (UNER) and SQuAD split
ner_train_all = read_iob2(fetch("uner_ewt/dev"))
ner_test_all = read_iob2(fetch("uner_ewt/test"))
squad_train_data, squad_eval_data = load_squad_dev_split()
print(f"device: {device}, quick mode: {is_quick()}")

# %% [markdown]
# (sec-tr-arms)=
# ## The ladder's arms
#
# The ladder's code goes to `tinybert.finetuning.ladder`, with these imports:

# %% tags=["export:finetuning.ladder"]
from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import torch
from torch import nn

from tinybert.finetuning.features import encode_tagged
from tinybert.finetuning.heads import TokenClassifier
from tinybert.finetuning.finetune_loop import finetune, predict
from tinybert.finetuning.recipes import finetune_task
from tinybert.finetuning.tagging_tasks import NER_TAGS
from tinybert.models.bert import BertModel
from tinybert.models.bert_heads import IGNORE_INDEX
from tinybert.runtime import get_device, pick


# %% [markdown]
# The ladder fine-tunes three encoders with one recipe per task: the course's architecture
# from random weights, the course's own checkpoint (chapter 9), and a real pretrained encoder,
# all-MiniLM-L6-v2 (chapter 8). Each *arm* makes a fresh encoder for every
# run, with dropout 0.1 as in BERT's fine-tuning, and names the sentence summary its encoder
# suits. The settings of each task are fixed here, so that the learning-rate sweep
# (`experiments/transfer_sweep.py`, run once outside the book) and the chapter use the same ones.

# %% tags=["export:finetuning.ladder"]
@dataclass(frozen=True)
class LadderTask:
    # evenly spread over the training split (None: per_label decides)
    train_examples: int | None
    eval_examples: int  # evenly spread over the validation or test split
    epochs: int  # enough passes for few-shot data
    per_label: int | None = None  # few-shot: this many training examples of every label
    batch_size: int = 16


LADDER = {
    "banking77": LadderTask(
        None,
        pick(quick=16, full=500),
        pick(quick=1, full=16),
        per_label=pick(quick=1, full=2),
    ),
    "ud_pos": LadderTask(
        pick(quick=8, full=150), pick(quick=8, full=300), pick(quick=1, full=12)
    ),
}
# one grid for every arm; each picks its best on validation
LADDER_LRS = (1e-4, 3e-4, 1e-3, 3e-3)


@dataclass
class LadderArm:
    make_encoder: Callable[[int], nn.Module]  # seed -> a fresh encoder
    tokenizer: object
    pooling: str  # SequenceClassifier's summary


def ladder_arms(checkpoint: str | Path | None = None) -> dict[str, LadderArm]:
    """The three encoders of the ladder. The course checkpoint was trained by MLM alone
    (no NSP), like all-MiniLM-L6-v2, so both (and the random start) summarise a sentence
    by the mean."""
    # chapter 8: the real encoder, offline
    from tinybert.models.pretrained_encoder import load_minilm

    # chapter 9: the course's checkpoint
    from tinybert.models.course_checkpoint import load_pretrained

    course = load_pretrained(checkpoint)
    config = replace(course.config, dropout=0.1, attention_dropout=0.1)
    weights = course.model.bert.state_dict()
    real = load_minilm()

    def random_init(seed: int) -> nn.Module:
        # a stream apart from the head's (finetune_task seeds the head with seed)
        torch.manual_seed(10_000 + seed)
        return BertModel(config)

    def course_checkpoint(seed: int) -> nn.Module:
        encoder = BertModel(config)
        encoder.load_state_dict(weights)
        return encoder

    return {
        "random init": LadderArm(random_init, course.tokenizer, "mean"),
        "course checkpoint": LadderArm(course_checkpoint, course.tokenizer, "mean"),
        "all-MiniLM-L6-v2": LadderArm(
            lambda seed: copy.deepcopy(real.model), real.tokenizer, "mean"
        ),
    }


def ladder_score(
    task: str,
    arm: LadderArm,
    *,
    lr: float,
    seed: int,
    split: str = "validation",
    pooling: str | None = None,
    settings: LadderTask | None = None,
) -> float:
    """Fine-tune arm's fresh encoder on ``task`` with ``settings`` (default: the
    ladder's, LADDER[task]); the accuracy."""
    settings = settings or LADDER[task]
    run = finetune_task(
        task,
        arm.make_encoder(seed).to(get_device()),
        arm.tokenizer,
        train_examples=settings.train_examples,
        eval_examples=settings.eval_examples,
        eval_split=split,
        epochs=settings.epochs,
        lr=lr,
        batch_size=settings.batch_size,
        seed=seed,
        pooling=pooling or arm.pooling,
        train_per_label=settings.per_label,
    )
    return run.metrics["accuracy"]


# %% [markdown]
# Each arm's learning rate comes from the sweep of {ref}`sec-ft-lr`, which ran with exactly
# these settings (the cell checks that they still agree):

# %%
sweep = load_result("transfer_sweep")
if not is_quick():  # the sweep ran with the ladder's settings above
    ladder_settings = {task: asdict(s) for task, s in LADDER.items()}
    assert sweep["settings"] == ladder_settings, sweep["settings"]
best_rates = {
    task: {arm: float(max(by_lr, key=by_lr.get)) for arm, by_lr in sweep[task].items()}
    for task in LADDER
}
for task, rates in best_rates.items():
    print(task + ": " + ", ".join(f"{arm} {lr:.0e}" for arm, lr in rates.items()))

# %% [markdown]
# (sec-ft-gain)=
# ## The transfer ladder
#
# The central claim of Ozdemir's slides is that a model pretrained once on unlabelled text and then
# fine-tuned beats the same architecture trained on the labelled data alone. We test it on two
# tasks with three encoders, each a rung of a ladder:
#
# - **random init**: the course's architecture (chapter 9's `bert-mini`, 4 layers, 256 wide) with
#   random weights, so fine-tuning is all the training it gets;
# - **course checkpoint**: the same architecture after the course's own pretraining, under two
#   hours on a two-core CPU ({ref}`sec-pretrain-recipe`), on the course corpus *and* the
#   unlabelled training text of this chapter's tasks (task-adaptive pretraining): a gain on
#   these tasks says what pretraining on their kind of text gives, not how the checkpoint does on
#   text it never read;
# - **all-MiniLM-L6-v2**: a real pretrained encoder (chapter 8), 6 layers and 384 wide: every
#   second layer of Microsoft's MiniLM-L12-H384, itself distilled from a BERT-base-sized teacher,
#   then trained on about a billion sentence pairs.
#
# The comparison is fair in the ways that matter. Every arm gets the same data, epochs and batch
# size, the same head, dropout 0.1, and its own learning rate, the best of the sweep in
# {ref}`sec-ft-lr` on the validation split. Each arm summarises a sentence by the mean of its final
# vectors, the summary of encoders trained without next-sentence prediction (the course
# checkpoint learned MLM alone, and all-MiniLM-L6-v2 was trained on mean-pooled vectors). Every
# arm runs with several seeds (the head's initialisation, the order of the batches, dropout and,
# for random init, the encoder's weights), and the final scores are on the *test* split, which
# the learning-rate choice never saw. Beside the encoders stand baselines that need no neural
# network: the majority class; for Banking77, the nearest intent centroid of bag-of-words vectors;
# for part-of-speech tagging, each word's most frequent tag in the training sentences.
#
# The tasks are few-shot on purpose, where pretraining should matter most: two questions per
# intent for Banking77 (154 in all), and 150 tagged sentences of UD English-EWT.

# %%
import re
from collections import Counter, defaultdict

import torch.nn.functional as F

from tinybert.finetuning.ladder import LADDER, ladder_arms, ladder_score, ner_tags
from tinybert.finetuning.recipes import task_data
from tinybert.finetuning.text_tasks import per_label

SEEDS = pick(quick=[0], full=[0, 1, 2])


def ladder_data(task: str):
    """The training and test examples every arm of the ladder sees for ``task``."""
    settings = LADDER[task]
    train, labels = task_data(task, "train")
    test, _ = task_data(task, "test")
    train = evenly_spaced(train, settings.train_examples)
    if settings.per_label is not None:
        train = per_label(train, settings.per_label)
    return train, evenly_spaced(test, settings.eval_examples), labels


def bag_of_words_centroids(train, test, n_labels: int) -> float:
    """Accuracy of the nearest centroid of L2-normalised word-count vectors (cosine)."""

    def words(text: str) -> list[str]:
        return re.findall(r"[a-z0-9']+", text.lower())

    vocab = {
        w: i for i, w in enumerate(sorted({w for e in train for w in words(e.text)}))
    }

    def vectors(examples) -> torch.Tensor:
        x = torch.zeros(len(examples), len(vocab))
        for i, e in enumerate(examples):
            for w in words(e.text):
                if w in vocab:
                    x[i, vocab[w]] += 1
        return F.normalize(x, dim=1)

    train_x, labels = vectors(train), torch.tensor([e.label for e in train])
    centroids = F.normalize(
        torch.stack([train_x[labels == c].mean(0) for c in range(n_labels)]), dim=1
    )
    predictions = (vectors(test) @ centroids.T).argmax(dim=1)
    return accuracy(predictions, torch.tensor([e.label for e in test]))


def most_frequent_tag(train, test) -> float:
    """Accuracy of tagging each word with its most frequent training tag (unknown words:
    the most frequent tag overall)."""
    by_word = defaultdict(Counter)
    for sentence in train:
        for word, tag in zip(sentence.words, sentence.tags):
            by_word[word.lower()][tag] += 1
    overall = Counter(t for s in train for t in s.tags).most_common(1)[0][0]
    guesses = [
        by_word[w.lower()].most_common(1)[0][0] if w.lower() in by_word else overall
        for s in test
        for w in s.words
    ]
    gold = [t for s in test for t in s.tags]
    return sum(g == t for g, t in zip(guesses, gold)) / len(gold)


baselines = {}
for task in LADDER:
    train, test, labels = ladder_data(task)
    if task == "ud_pos":
        gold = [t for s in test for t in s.tags]
        majority = Counter(t for s in train for t in s.tags).most_common(1)[0][0]
        baselines[task] = {
            "majority tag": gold.count(majority) / len(gold),
            "most frequent tag per word": most_frequent_tag(train, test),
        }
    else:
        majority = Counter(e.label for e in train).most_common(1)[0][0]
        gold = torch.tensor([e.label for e in test])
        baselines[task] = {
            "majority class": accuracy(torch.full_like(gold, majority), gold),
            "bag-of-words centroids": bag_of_words_centroids(train, test, len(labels)),
        }
    print(
        f"{task}: {len(train)} training and {len(test)} test examples; "
        + ", ".join(f"{name} {value:.1%}" for name, value in baselines[task].items())
    )

# %% [markdown]
# Now the nine fine-tuning runs per task. Each prints nothing; the table follows.

# %%
arms = ladder_arms()
ladder = {}
start = time.perf_counter()
for task in LADDER:
    for arm_name, arm in arms.items():
        lr = best_rates[task][arm_name]
        ladder[task, arm_name] = [
            ladder_score(task, arm, lr=lr, seed=seed, split="test") for seed in SEEDS
        ]
print(
    f"{len(ladder) * len(SEEDS)} fine-tuning runs in "
    f"{time.perf_counter() - start:.0f} s; test accuracy over seeds {SEEDS}:"
)
print(f"{'':<20}" + "".join(f"{arm:>30}" for arm in arms))
for task in LADDER:
    cells = []
    for arm in arms:
        runs = torch.tensor(ladder[task, arm])
        cells.append(f"{runs.mean():.1%} [{runs.min():.1%}, {runs.max():.1%}]")
    print(f"{task:<20}" + "".join(f"{cell:>30}" for cell in cells))

# %% mystnb={"image": {"alt": "Two horizontal bar charts of test accuracy, Banking77 and part-of-speech tags: grey baselines without a model, then random init, the course checkpoint and all-MiniLM-L6-v2 with their seeds' range; both pretrained encoders beat random init."}}
ARM_COLOURS = {"random init": "C3", "course checkpoint": "C1", "all-MiniLM-L6-v2": "C2"}


def ladder_bars(ax, baselines: dict, runs: dict, title: str) -> None:
    """One bar per baseline (grey, a single number) and per arm (its mean over seeds,
    with a line from the worst seed to the best)."""
    names = list(baselines) + list(runs)
    for i, value in enumerate(baselines.values()):
        ax.barh(i, 100 * value, color="0.75")
    for i, (arm, scores) in enumerate(runs.items(), start=len(baselines)):
        scores = 100 * torch.tensor(scores)
        mean = scores.mean().item()
        spread = [[mean - scores.min().item()], [scores.max().item() - mean]]
        ax.barh(i, mean, xerr=spread, color=ARM_COLOURS[arm], capsize=3)
    ax.set_yticks(range(len(names)), names, fontsize=8)
    ax.set(xlabel="test accuracy (%): arms' mean and range over seeds", title=title)


fig, axes = plt.subplots(1, len(LADDER), figsize=(10, 3.4))
for ax, task in zip(axes, LADDER):
    ladder_bars(ax, baselines[task], {a: ladder[task, a] for a in arms}, task)
plt.tight_layout()
plt.show()


# %% [markdown]
# The claims, read off the runs above. A gap between two rungs counts only when it is larger than
# the spread of either rung over its seeds (max minus min), so that a lucky seed cannot make it.
# The cell prints every gap, then states and asserts what the runs show:

# %%
def score_gap(scores: dict, upper: str, lower: str) -> tuple[float, float]:
    """Mean score (over seeds) of arm ``upper`` minus that of ``lower``, in points, and
    the larger of the two arms' spreads over seeds."""
    runs = {arm: 100 * torch.tensor(scores[arm]) for arm in (upper, lower)}
    spread = max((r.max() - r.min()).item() for r in runs.values())
    return (runs[upper].mean() - runs[lower].mean()).item(), spread


def gap(task: str, upper: str, lower: str) -> tuple[float, float]:
    """score_gap for a task of the ladder."""
    return score_gap({arm: ladder[task, arm] for arm in (upper, lower)}, upper, lower)


REAL, COURSE, RANDOM = "all-MiniLM-L6-v2", "course checkpoint", "random init"
for task in LADDER:
    for upper, lower in [(COURSE, RANDOM), (REAL, COURSE), (REAL, RANDOM)]:
        points, spread = gap(task, upper, lower)
        print(
            f"{task}: {upper} vs {lower}: {points:+.1f} points "
            f"(seeds' spread {spread:.1f})"
        )
    best_baseline = 100 * max(baselines[task].values())
    print(f"{task}: best baseline without a model {best_baseline:.1f}%")


def verdict(task: str) -> str:
    points, spread = gap(task, COURSE, RANDOM)
    if points > spread:
        return f"beats random init by {points:.1f} points"
    if points < -spread:
        return f"falls {-points:.1f} points behind random init"
    return (
        f"is level with random init ({points:+.1f} points, within the seeds' "
        f"spread of {spread:.1f})"
    )


print()
for task in LADDER:
    real_lead = gap(task, REAL, RANDOM)[0]
    print(
        f"{task}: the real encoder beats random init by {real_lead:.1f} points and "
        f"every baseline; the course checkpoint {verdict(task)}."
    )
if not is_quick():
    for task in LADDER:
        real = torch.tensor(ladder[task, REAL])
        for arm in (RANDOM, COURSE):  # the real encoder leads
            assert real.min() > max(ladder[task, arm]), (task, arm)  # past every seed,
        assert real.min() > max(baselines[task].values()), task  # and every baseline
    assert gap("ud_pos", COURSE, RANDOM)[0] > gap("ud_pos", COURSE, RANDOM)[1]
    for task in LADDER:  # the course checkpoint: every seed ahead
        assert min(ladder[task, COURSE]) > max(ladder[task, RANDOM]), task


# %% [markdown]
# On these two tasks both kinds of pretraining pay off, by different amounts. Tagging a word's
# part of speech depends on the word's form and its neighbours, the local statistics that masked
# language modelling picks up first; the course checkpoint carries them to the tagger, far beyond
# the seeds' spread. Telling 77 banking intents apart from two questions each depends on what
# sentences *mean*, on knowing that "top up" and "add money" say the same thing. There the course
# checkpoint starts ahead too (every one of its seeds scores above every seed of random init, as
# the cell asserts), by the margin the verdict above gives against the seeds' spread; the real
# encoder, trained on billions of words and then on a billion sentence pairs, leads on both tasks
# by a wide margin. Pretraining pays off in proportion to what it had time to learn, and for the
# course checkpoint partly because it read these tasks' unlabelled text: on tasks whose text it
# never read, {ref}`sec-tr-unseen` finds out how much. An earlier course checkpoint, trained with the
# rest of the same recipe but on a vocabulary learned by chapter 7's ratio score, which left "the"
# and "have" in pieces (chapter 9), fell *behind* random init on Banking77 (an earlier run, not
# repeated here): what a model can learn depends on the units it reads.
#
# (sec-ft-ner-ladder)=
# ### Named entities on the ladder
#
# The same three encoders, now on the entities of {ref}`sec-ft-ner`: each fine-tunes a token
# classifier on 300 sentences of UNER's development file for 4 epochs and is scored on 600 test
# sentences with entity-level F1, over the same seeds. UNER's training file is not part of the
# course data, so the development file serves for training and for choosing: each arm takes the
# learning rate from the ladder's grid that scored best on 300 *other* development sentences
# (`experiments/ner_sweep.py`, run once outside the book, like the sweep above). The baseline
# tags every word with its most frequent tag in the 300 training sentences (an unseen word gets
# `O`): it finds the names that recur, and nothing else.
#
# `ner_tags` is one run: fine-tune a token classifier over an arm's fresh encoder, then read
# the tag of each word's first piece.

# %% tags=["export:finetuning.ladder"]
def ner_tags(
    arm: LadderArm,
    train: list,
    test: list,
    *,
    lr: float,
    seed: int,
    epochs: int = 4,
    max_len: int = 128,
) -> list[list[str]]:
    """Fine-tune a token classifier (NER_TAGS) over ``arm``'s fresh encoder on the
    tagged ``train`` sentences; the predicted tags of every ``test`` sentence. Inputs
    are cut to ``max_len`` pieces (or the encoder's maximum); a word cut off gets O."""
    encoder = arm.make_encoder(seed)
    max_len = min(max_len, encoder.config.max_len)
    pad = arm.tokenizer.vocab["[PAD]"]
    features, _ = encode_tagged(arm.tokenizer, train, max_len=max_len)
    test_features, _ = encode_tagged(arm.tokenizer, test, max_len=max_len)
    torch.manual_seed(seed)  # the head's weights, dropout
    model = TokenClassifier(encoder, len(NER_TAGS)).to(get_device())
    finetune(
        model, features, pad_id=pad, epochs=epochs, batch_size=16, lr=lr, seed=seed
    )
    predicted = []
    logits = predict(model, test_features, pad_id=pad)
    for sentence, feature, scores in zip(test, test_features, logits):
        # each word's first piece
        first = torch.tensor(feature["labels"]) != IGNORE_INDEX
        tags = [NER_TAGS[i] for i in scores.argmax(-1)[first].tolist()]
        predicted.append(tags + ["O"] * (len(sentence.words) - len(tags)))
    return predicted


# %%
ner_train = evenly_spaced(ner_train_all, pick(quick=16, full=300))
ner_test = evenly_spaced(ner_test_all, pick(quick=16, full=600))
NER_EPOCHS = pick(quick=1, full=4)
gold_tags = [[NER_TAGS[t] for t in s.tags] for s in ner_test]

seen = defaultdict(Counter)
for s in ner_train:
    for word, tag in zip(s.words, s.tags):
        seen[word][tag] += 1
memorised = [
    [NER_TAGS[seen[w].most_common(1)[0][0]] if w in seen else "O" for w in s.words]
    for s in ner_test
]
ner_baseline = entity_scores(gold_tags, memorised)["overall"]["f1"]


ner_sweep = load_result("ner_sweep")["validation"]
ner_rates = {arm: float(max(f1, key=f1.get)) for arm, f1 in ner_sweep.items()}
print("learning rates chosen on validation sentences:", ner_rates)


start = time.perf_counter()
ner_predictions, ner_f1 = {}, {}
for arm_name, arm in arms.items():
    for seed in SEEDS:
        lr = ner_rates[arm_name]
        predicted = ner_tags(
            arm, ner_train, ner_test, lr=lr, seed=seed, epochs=NER_EPOCHS
        )
        ner_predictions[arm_name, seed] = predicted
        scores = entity_scores(gold_tags, predicted)
        ner_f1.setdefault(arm_name, []).append(scores["overall"]["f1"])
print(
    f"{len(arms) * len(SEEDS)} runs in {time.perf_counter() - start:.0f} s; "
    f"{len(ner_train)} training, {len(ner_test)} test sentences"
)
print(f"memorised names (baseline): entity F1 {ner_baseline:.1%}")
for arm_name, runs in ner_f1.items():
    runs = torch.tensor(runs)
    per_type = entity_scores(gold_tags, ner_predictions[arm_name, SEEDS[0]])
    kinds = ", ".join(
        f"{k} {v['f1']:.0%}" for k, v in per_type.items() if k != "overall"
    )
    print(
        f"{arm_name:>18}: entity F1 {runs.mean():.1%} [{runs.min():.1%}, "
        f"{runs.max():.1%}]  (seed {SEEDS[0]}: {kinds})"
    )


# %%
def ner_gap(upper: str, lower: str) -> tuple[float, float]:
    return score_gap(ner_f1, upper, lower)


for upper, lower in [(COURSE, RANDOM), (REAL, COURSE), (REAL, RANDOM)]:
    points, spread = ner_gap(upper, lower)
    print(
        f"named entities: {upper} vs {lower}: {points:+.1f} points "
        f"(seeds' spread {spread:.1f})"
    )
points, spread = ner_gap(COURSE, RANDOM)
course_verdict = (
    "beats random init"
    if points > spread
    else "falls behind random init"
    if points < -spread
    else "is level with random init, within the seeds' spread"
)
print(
    f"The real encoder leads by {ner_gap(REAL, RANDOM)[0]:.1f} points over random "
    f"init and is {100 * (min(ner_f1[REAL]) - ner_baseline):.1f} points above the "
    f"baseline on its worst seed; the course checkpoint {course_verdict}."
)
if not is_quick():
    for arm in (RANDOM, COURSE):
        assert min(ner_f1[REAL]) > max(ner_f1[arm]), arm  # past every seed
    assert min(ner_f1[REAL]) > ner_baseline + 0.1  # and the baseline
for arm in (RANDOM, COURSE):
    reached = "reaches" if min(ner_f1[arm]) > ner_baseline else "does not reach"
    print(f"{arm} {reached} the baseline that memorises names on every seed")


# %% [markdown]
# What goes wrong? Every predicted entity that is not correct, and every gold entity that no
# prediction touches, falls in one of four kinds: the right words with the **wrong type**, an
# overlapping entity with **wrong boundaries**, a **spurious** entity where there is none, and a
# **missed** one. The counts and an example of each, for the real encoder's first seed:

# %%
def error_kinds(gold: list[str], predicted: list[str]) -> list[tuple[str, tuple]]:
    """Each mistake of one sentence: (kind, (type, first word, last word + 1))."""
    gold_spans, predicted_spans = entity_spans(gold), entity_spans(predicted)

    def overlaps(a, b) -> bool:
        return a[1] < b[2] and b[1] < a[2]

    errors = []
    for p in predicted_spans - gold_spans:
        if any(g[1:] == p[1:] for g in gold_spans):
            errors.append(("wrong type", p))
        elif any(overlaps(g, p) for g in gold_spans):
            errors.append(("wrong boundaries", p))
        else:
            errors.append(("spurious", p))
    errors += [
        ("missed", g)
        for g in gold_spans - predicted_spans
        if not any(overlaps(g, p) for p in predicted_spans)
    ]
    return errors


real_predictions = ner_predictions[REAL, SEEDS[0]]
by_kind = Counter(
    kind for g, p in zip(gold_tags, real_predictions) for kind, _ in error_kinds(g, p)
)
print(dict(by_kind.most_common()))
shown = set()
for sentence, g, p in zip(ner_test, gold_tags, real_predictions):
    for kind, (label, first, last) in error_kinds(g, p):
        if kind not in shown and len(sentence.words) <= 20:
            shown.add(kind)
            gold_here = sorted(
                e for e in entity_spans(g) if e[1] < last and first < e[2]
            )
            print(
                f"{kind:>16}: {' '.join(sentence.words[first:last])!r} as {label}; "
                f"gold "
                f"{[(t, ' '.join(sentence.words[a:b])) for t, a, b in gold_here]}\n"
                f"{'':>18}{' '.join(sentence.words)}"
            )

# %% [markdown]
# Entities in web text are hard in ways that newswire (CoNLL-2003) is not: lower-cased names
# ("tampa bay"), products and web sites that annotators may or may not call organisations, and
# names that are also common words. With 300 training sentences the two small encoders stay far
# behind the real encoder (the lines above say whether they even pass the baseline that memorises
# names), while the real encoder, which met these names and their contexts in pretraining, reads
# the context around a word it has never seen with a label. Pretraining pays off on the
# task where its knowledge of the world matters most.
#
# (sec-ft-pairs)=
# ### Sentence pairs on the ladder
#
# The first row of the task table, a *pair* of texts, is how BERT reads entailment, paraphrase
# and similarity: both texts go into one input, `[CLS] A [SEP] B [SEP]`, with segment id 0 on
# the first and 1 on the second, and the classifier reads one summary of the pair. Every word of
# one text attends to every word of the other, in every layer. GLUE's QNLI is such a task, and it
# was made from SQuAD {cite}`wang2018glue`: pair a question with a sentence of its paragraph, and
# label the pair by whether the sentence holds the answer. The BERT paper's Table 1 lists 108k
# training pairs for it and 90.5% test accuracy for BERT-base {cite}`devlin2019bert`.
# {numref}`fig-ft-pair` draws such a pair, Ozdemir's question with a sentence that answers it.

# %% mystnb={"figure": {"caption": "Sentence-pair classification, drawn for the course's encoder and the pair \"Where does Matt live?\" / \"Matt lives in Canada and Sinan lives in California\" (cut, \"\u2026\", before its last token). The two texts share one input, segment A then segment B; the classifier reads the pooled `[CLS]` vector only and gives two scores: the sentence holds the answer, or it does not.", "name": "fig-ft-pair"}, "image": {"alt": "Diagram drawn bottom to top. [CLS], the question tokens and [SEP] (segment A, blue), then the sentence tokens and [SEP] (segment B, yellow) go into the pretrained encoder, which gives one vector h per token. Only the vector of [CLS] is used: the pooler (tanh of W h plus b) and a linear layer from D to 2 give two scores, one per class of the pair; here the sentence holds the answer. The other vectors are dashed."}} tags=["diagram", "hide-input"]
from tinybert.diagrams import sentence_pair_diagram

matt_ids, matt_types = encode_pair(
    tokenizer.encode("Where does Matt live?").ids,
    tokenizer.encode("Matt lives in Canada and Sinan lives in California").ids,
    special,
    config.max_len,
)
sentence_pair_diagram(
    config,
    [tokenizer.id_to_token[i] for i in matt_ids],
    matt_types,
    n_labels=2,
    label="1, the sentence holds the answer",
)

# %% [markdown]
# We make the same kind of task from the course's SQuAD split of {ref}`sec-ft-qa`, with two
# pairs per question so that the classes are balanced: the sentence that holds the first
# reference answer (label 1), and another sentence of the same paragraph that holds none of the
# reference answers (label 0), drawn at random with the question's id as the seed. Sentences
# are cut by chapter 9's `split_sentences`; a question whose answer crosses a sentence boundary,
# or whose paragraph has no sentence without an answer, is skipped and counted. The articles keep
# the split of the SQuAD section (8 for evaluation, 40 for training), and a validation split for
# choosing learning rates is cut from the 40 training articles in the same way: every fifth, 8
# articles, for validation, the other 32 to train. No article, and so no paragraph, is on two
# sides.

# %% tags=["export:finetuning.sentence_pairs"]
from __future__ import annotations

import random
import re
from collections import Counter
from dataclasses import dataclass

import torch

from tinybert.finetuning.heads import SequenceClassifier
from tinybert.finetuning.ladder import LadderArm
from tinybert.finetuning.finetune_loop import finetune, predict
from tinybert.finetuning.metrics import accuracy
from tinybert.finetuning.squad import load_squad_dev_split, split_squad
from tinybert.finetuning.text_tasks import evenly_spaced
from tinybert.training.inputs import split_sentences  # chapter 9
from tinybert.training.inputs import SpecialTokens  # chapter 9
from tinybert.training.inputs import encode_pair  # chapter 9
from tinybert.runtime import get_device, pick


# %% tags=["export:finetuning.sentence_pairs"]
@dataclass
class SentencePair:
    """A question and one sentence of its paragraph; label 1 if it holds the answer."""

    question: str
    sentence: str
    label: int
    title: str = ""  # the article, to check that splits never share one


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """The (start, end) character offsets in ``text`` of the sentences that
    split_sentences finds (it joins runs of white space, so each word is looked up in
    the original)."""
    spans, cursor = [], 0
    for sentence in split_sentences(text):
        words = sentence.split()
        start = end = text.index(words[0], cursor)
        for word in words:
            end = text.index(word, end) + len(word)
        spans.append((start, end))
        cursor = end
    return spans


def question_sentence_pairs(squad: dict) -> tuple[list[SentencePair], Counter]:
    """QNLI-style pairs from a SQuAD object, two per question: the sentence of the
    paragraph that holds the first reference answer (label 1) and, drawn with the
    question's id as the seed, one that holds no reference answer (label 0). A question
    is skipped, and counted, when its answer crosses a sentence boundary or every
    sentence holds an answer."""
    pairs, skipped = [], Counter()
    for article in squad["data"]:
        for paragraph in article["paragraphs"]:
            context = paragraph["context"]
            spans = sentence_spans(context)
            for qa in paragraph["qas"]:
                answers = [
                    (a["answer_start"], a["answer_start"] + len(a["text"]))
                    for a in qa["answers"]
                ]
                start, end = answers[0]
                holding = [(s, e) for s, e in spans if s <= start and end <= e]
                free = [
                    (s, e)
                    for s, e in spans
                    if not any(a < e and s < b for a, b in answers)
                ]
                if not holding:
                    skipped["answer across sentences"] += 1
                    continue
                if not free:
                    skipped["no sentence without an answer"] += 1
                    continue
                negative = random.Random(qa["id"]).choice(free)
                for (s, e), label in ((holding[0], 1), (negative, 0)):
                    question, title = qa["question"], article["title"]
                    pairs.append(SentencePair(question, context[s:e], label, title))
    return pairs, skipped


# %% tags=["export:finetuning.sentence_pairs"]
@dataclass(frozen=True)
class PairTask:
    train_pairs: int  # of evenly spread questions of the training articles
    eval_pairs: int  # likewise of the validation or test articles
    epochs: int
    batch_size: int = 8
    max_len: int = 64


PAIR_TASK = PairTask(
    pick(quick=16, full=256), pick(quick=16, full=400), pick(quick=1, full=3)
)


def pair_splits() -> dict[str, list[SentencePair]]:
    """The pairs of the course's SQuAD split: "test" from its 8 evaluation articles;
    "validation" from every fifth of its 40 training articles, "train" from the other
    32."""
    train_articles, eval_articles = load_squad_dev_split()
    fit, validation = split_squad(train_articles, every=5)
    named = (("train", fit), ("validation", validation), ("test", eval_articles))
    return {name: question_sentence_pairs(data)[0] for name, data in named}


def pair_subset(pairs: list[SentencePair], n: int | None) -> list[SentencePair]:
    """The pairs of n // 2 evenly spread questions (both pairs of each: balanced)."""
    questions = [pairs[i : i + 2] for i in range(0, len(pairs), 2)]
    chosen = evenly_spaced(questions, None if n is None else n // 2)
    return [pair for both in chosen for pair in both]


# %%
pair_data = pair_splits()
for name, pairs in pair_data.items():
    positive = sum(p.label for p in pairs)
    print(
        f"{name:>10}: {len(pairs):,} pairs ({positive:,} with the answer) from "
        f"{len({p.title for p in pairs})} articles"
    )
    assert positive * 2 == len(pairs)  # balanced
print(
    "skipped in the evaluation articles:",
    dict(question_sentence_pairs(squad_eval_data)[1]),
)
titles = {name: {p.title for p in pairs} for name, pairs in pair_data.items()}
assert not titles["train"] & titles["validation"]
assert not titles["test"] & (titles["train"] | titles["validation"])
for pair in pair_data["test"][:2]:
    print(f"  {pair.label}  {pair.question!r}\n     {pair.sentence[:100]!r}")

# %% [markdown]
# **Two baselines that need no model.** Half the pairs hold the answer, so the majority class
# is right half of the time. A sharper baseline counts words: the share of the question's
# distinct words, lower-cased, that the sentence also has. The threshold above which a pair is
# called an answer is the one that is right most often on the training pairs.

# %% tags=["export:finetuning.sentence_pairs"]
_WORD = re.compile(r"\w+")


def question_overlap(question: str, sentence: str) -> float:
    """The share of the question's distinct lower-cased words that the sentence has."""
    asked = set(_WORD.findall(question.lower()))
    if not asked:
        raise ValueError(f"expected a question with a word, got {question!r}")
    return len(asked & set(_WORD.findall(sentence.lower()))) / len(asked)


def overlap_threshold(pairs: list[SentencePair]) -> tuple[float, float]:
    """The threshold t for "label 1 when question_overlap > t" that is right most often
    on ``pairs``, and that accuracy."""
    if not pairs:
        raise ValueError("expected at least one pair to fit the threshold on, got none")
    scored = sorted((question_overlap(p.question, p.sentence), p.label) for p in pairs)
    best_t, correct = -1.0, sum(label for _, label in scored)  # -1: every pair is 1
    best_correct = correct
    for i, (overlap, label) in enumerate(scored):
        correct += 1 if label == 0 else -1  # this pair is now called 0
        if i + 1 < len(scored) and scored[i + 1][0] == overlap:
            continue  # no threshold splits equal overlaps
        if correct > best_correct:
            best_t, best_correct = overlap, correct
    return best_t, best_correct / len(scored)


# %%
pair_train = pair_subset(pair_data["train"], PAIR_TASK.train_pairs)
pair_test = pair_subset(pair_data["test"], PAIR_TASK.eval_pairs)
pair_gold = torch.tensor([p.label for p in pair_test])
threshold, fitted = overlap_threshold(pair_train)
overlap_calls = [
    int(question_overlap(p.question, p.sentence) > threshold) for p in pair_test
]
pair_baselines = {
    "majority class": accuracy(torch.ones_like(pair_gold), pair_gold),
    "word overlap": accuracy(torch.tensor(overlap_calls), pair_gold),
}
print(
    f"{len(pair_train)} training and {len(pair_test)} test pairs; overlap > "
    f"{threshold:.2f} is right on {fitted:.1%} of the training pairs"
)
print(
    ", ".join(f"{name} {value:.1%}" for name, value in pair_baselines.items()),
    "on test",
)

# %% [markdown]
# `encode_pairs` packs a pair with chapter 9's `encode_pair`: the question cut to 24 pieces,
# then the longer segment cut until the whole fits 64 positions. For the ablation below it can
# also leave out what makes the input a pair: the segment ids (all 0), or the `[SEP]` between the
# two texts (one segment).

# %% tags=["export:finetuning.sentence_pairs"]
PAIR_FORMATS = ("pair", "no segment ids", "no [SEP]")


def encode_pairs(
    tokenizer,
    pairs: list[SentencePair],
    *,
    max_len: int = 64,
    pair_format: str = "pair",
) -> list[dict]:
    """Features for pair classification. "pair": [CLS] question [SEP] sentence [SEP],
    segment ids 0 then 1; "no segment ids": the same tokens, every id 0; "no [SEP]":
    [CLS] question sentence [SEP], one segment. The question is cut to 24 pieces."""
    if pair_format not in PAIR_FORMATS:
        raise ValueError(
            f"pair_format: expected one of {PAIR_FORMATS}, got {pair_format!r}"
        )
    special = SpecialTokens.from_vocab(tokenizer.vocab)
    features = []
    for pair in pairs:
        question = tokenizer.encode(pair.question).ids[:24]
        sentence = tokenizer.encode(pair.sentence).ids
        if pair_format == "no [SEP]":
            ids, segments = encode_pair(question + sentence, None, special, max_len)
        else:
            ids, segments = encode_pair(question, sentence, special, max_len)
        if pair_format == "no segment ids":
            segments = [0] * len(ids)
        features.append(
            {"input_ids": ids, "token_type_ids": segments, "labels": pair.label}
        )
    return features


# %%
for pair_format in PAIR_FORMATS:
    (feature,) = encode_pairs(
        arms[REAL].tokenizer, [pair_test[0]], pair_format=pair_format
    )
    shown = [
        f"{arms[REAL].tokenizer.id_to_token[i]}/{s}"
        for i, s in zip(feature["input_ids"], feature["token_type_ids"])
    ]
    print(f"{pair_format:>15}: {' '.join(shown[:16])} ...")


# %% [markdown]
# Each arm fine-tunes a sequence classifier over a fresh encoder (mean pooling, as on the
# ladder) on the training pairs, with its own learning rate from the ladder's grid, chosen on the
# validation articles by `experiments/pair_sweep.py` (run once, outside the book, like the other
# sweeps), and the same seeds. Each trained model is then scored on the test pairs in all three
# formats.

# %% tags=["export:finetuning.sentence_pairs"]
def pair_run(
    arm: LadderArm,
    splits: dict,
    *,
    lr: float,
    seed: int,
    split: str = "test",
    formats: tuple[str, ...] = PAIR_FORMATS,
) -> dict[str, float]:
    """Fine-tune a sequence classifier over ``arm``'s fresh encoder on PAIR_TASK's
    training pairs (pair format); its accuracy on ``split`` in each of ``formats``."""
    task, tokenizer = PAIR_TASK, arm.tokenizer
    pad = tokenizer.vocab["[PAD]"]
    train = pair_subset(splits["train"], task.train_pairs)
    features = encode_pairs(tokenizer, train, max_len=task.max_len)
    evaluation = pair_subset(splits[split], task.eval_pairs)
    gold = torch.tensor([p.label for p in evaluation])
    encoder = arm.make_encoder(seed)
    torch.manual_seed(seed)  # the head's weights and dropout
    model = SequenceClassifier(encoder, 2, pooling=arm.pooling).to(get_device())
    finetune(
        model,
        features,
        pad_id=pad,
        epochs=task.epochs,
        batch_size=task.batch_size,
        lr=lr,
        seed=seed,
    )
    scores = {}
    for pair_format in formats:
        inputs = encode_pairs(
            tokenizer, evaluation, max_len=task.max_len, pair_format=pair_format
        )
        predicted = torch.stack(predict(model, inputs, pad_id=pad)).argmax(-1)
        scores[pair_format] = accuracy(predicted, gold)
    return scores


# %%
pair_sweep = load_result("pair_sweep")["validation"]
pair_rates = {arm: float(max(acc, key=acc.get)) for arm, acc in pair_sweep.items()}
print("learning rates chosen on the validation articles:", pair_rates)

start = time.perf_counter()
pair_scores = {pair_format: {} for pair_format in PAIR_FORMATS}
for arm_name, arm in arms.items():
    for seed in SEEDS:
        scores = pair_run(arm, pair_data, lr=pair_rates[arm_name], seed=seed)
        for pair_format, value in scores.items():
            pair_scores[pair_format].setdefault(arm_name, []).append(value)
print(
    f"{len(arms) * len(SEEDS)} runs in {time.perf_counter() - start:.0f} s; test "
    f"accuracy (%), mean [min, max] over seeds {SEEDS}, by the input at test time:"
)
print(f"{'':<16}" + "".join(f"{arm:>22}" for arm in arms))
for pair_format, by_arm in pair_scores.items():
    cells = [
        f"{100 * sum(r) / len(r):.1f} [{100 * min(r):.1f}, {100 * max(r):.1f}]"
        for r in by_arm.values()
    ]
    print(f"{pair_format:<16}" + "".join(f"{cell:>22}" for cell in cells))

# %% [markdown]
# The claims, with the same rule as on the ladder: a gap counts when it is larger than the spread
# over seeds. The ablation compares each trained model with itself, on the same test pairs, so its
# measure is the drop of each seed.

# %%
paired = pair_scores["pair"]
for upper, lower in [(REAL, RANDOM), (COURSE, RANDOM), (REAL, COURSE)]:
    points, spread = score_gap(paired, upper, lower)
    print(
        f"pairs: {upper} vs {lower}: {points:+.1f} points (seeds' spread {spread:.1f})"
    )
# each run's loss of accuracy, in points, when tested in another format
drops = {
    (pair_format, arm): [
        100 * (whole - cut)
        for whole, cut in zip(paired[arm], pair_scores[pair_format][arm])
    ]
    for pair_format in PAIR_FORMATS[1:]
    for arm in arms
}
for (pair_format, arm), points in drops.items():
    shown = ", ".join(f"{-p:+.1f}" for p in points)
    print(f"{arm:>18} tested with {pair_format}: {shown} points (each seed)")
overlap_lead = 100 * (pair_baselines["word overlap"] - max(paired[REAL]))
print(
    f"word overlap {100 * pair_baselines['word overlap']:.1f}%, "
    f"{overlap_lead:+.1f} points against the real encoder's best seed"
)
if not is_quick():
    for arm in (RANDOM, COURSE):  # the real encoder leads past every seed
        assert min(paired[REAL]) > max(paired[arm]), arm
    # and is above the majority class by more than 2 standard errors on every seed
    assert min(paired[REAL]) > pair_baselines["majority class"] + 0.05
    for key, points in drops.items():  # every run loses points in either format
        assert min(points) > 0, key
    no_segments, no_sep = drops["no segment ids", REAL], drops["no [SEP]", REAL]
    assert all(sep > seg for seg, sep in zip(no_segments, no_sep))
    majority = pair_baselines["majority class"]
    for arm in (RANDOM, COURSE):  # the small encoders: a few points above chance,
        assert max(paired[arm]) < majority + 0.1, arm
        # at chance without segment ids
        assert max(pair_scores["no segment ids"][arm]) < majority + 0.03, arm
    assert overlap_lead > 5  # counting words still wins at this size

# %% [markdown]
# The real encoder learns the task from 256 pairs, on every seed past every seed of the two small
# encoders, which stay a few points above the majority class whether or not the course pretrained
# them. The ablation shows that the models read the input as two texts: every trained model, shown
# the test pairs without segment ids, loses points, and the small ones fall to the majority class
# (about 50%); the real encoder loses more, on every seed, when the `[SEP]` between question and
# sentence is gone as well.
#
# Counting words beats all of them. SQuAD's question writers read the paragraph and reused its
# words, so the sentence that holds the answer shares more of the question's words than another
# sentence of the same paragraph; 256 pairs are too few for a cross-encoder to learn more than
# that (BERT-base, fine-tuned on QNLI's 108k pairs, reaches 90.5%). GLUE made QNLI harder for
# this shortcut: it dropped the pairs whose sentence shares few words with the question
# {cite}`wang2018glue`, so that a wrong sentence shares words too. {numref}`ex-ft-word-overlap`
# builds the same baseline for paraphrases.
#
# (sec-ft-feature-based)=
# ## Feature-based BERT: which layer?
#
# Fine-tuning is not the only way to use a pretrained encoder. In the
# {term}`feature-based approach` the encoder stays frozen: it computes the vectors of every word once, and only a small model on
# top of them is trained, as with ELMo ({doc}`02_word_vectors`). It costs one forward pass over
# the data instead of a forward and a backward pass per step, and the same vectors can serve many
# tasks. The BERT paper tried it on the CoNLL-2003 named entities {cite}`devlin2019bert` (its
# Table 7): the vectors of one or more layers of a frozen BERT-base went into a two-layer BiLSTM,
# and the question was *which layer* gives the best features. Its dev-set F1:
#
# | BERT-base on CoNLL-2003 (the paper's Table 7) | dev F1 |
# |---|---|
# | fine-tuning | 96.4 |
# | feature-based: the embeddings | 91.0 |
# | feature-based: the second-to-last layer | 95.6 |
# | feature-based: the last layer | 94.9 |
# | feature-based: weighted sum of the last four layers | 95.9 |
# | feature-based: the last four layers, concatenated | 96.1 |
# | feature-based: weighted sum of all 12 layers | 95.5 |
#
# Concatenating the top four layers came within 0.3 F1 of fine-tuning. The table of masking
# strategies in {ref}`Straka's lecture slides <sources-decks>` (Charles University, 2023; the
# paper's Table 8) makes the same comparison for BERT's 80/10/10 masking:
# 95.4 fine-tuned, 94.9 feature-based.
#
# We repeat the experiment on the entities of {ref}`sec-ft-ner-ladder` with the real encoder,
# all-MiniLM-L6-v2, frozen. One forward pass over the same training and test sentences (with
# `output_hidden_states=True`) keeps the vector of every word's first piece from the embeddings
# and from each of the six layers. Then a linear classifier, a {term}`linear probe`, is trained
# on each layer's vectors, and on the last four layers concatenated. A probe is smaller than the
# paper's BiLSTM, so it shows more plainly what each layer's vectors hold by themselves. Its loss,
# cross-entropy plus a small penalty on the squared weights, is convex: L-BFGS reaches the same
# minimum from any start, so a probe needs no seeds.

# %% tags=["export:finetuning.feature_based"]
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from tinybert.models.bert_heads import IGNORE_INDEX
from tinybert.training.inputs import pad_features  # chapter 9


# %% tags=["export:finetuning.feature_based"]
@torch.no_grad()
def labelled_vectors(
    encoder: nn.Module, features: list[dict], *, pad_id: int, batch_size: int = 64
) -> tuple[torch.Tensor, torch.Tensor]:
    """One forward pass of the frozen ``encoder`` over tagged ``features``: the vectors
    of every labelled position (each word's first piece) from the embeddings and from
    every layer, (L + 1, N, D), and their N labels, in the order of the words."""
    device = next(encoder.parameters()).device
    encoder.eval()
    vectors, labels = [], []
    for start in range(0, len(features), batch_size):
        batch = pad_features(features[start : start + batch_size], pad_id)
        inputs = (batch[k].to(device) for k in ("input_ids", "token_type_ids"))
        mask = batch["attention_mask"].to(device)
        out = encoder(*inputs, mask, output_hidden_states=True)
        keep = batch["labels"] != IGNORE_INDEX  # (B, T)
        layers = torch.stack(out.hidden_states).cpu()  # (L + 1, B, T, D)
        vectors.append(layers[:, keep].float())  # (L + 1, n, D)
        labels.append(batch["labels"][keep])
    return torch.cat(vectors, dim=1), torch.cat(labels)


class LinearProbe(nn.Module):
    """A linear classifier on frozen vectors, standardised with the training vectors'
    mean and standard deviation: (N, D) -> (N, C) logits."""

    def __init__(self, x: torch.Tensor, n_labels: int):
        super().__init__()
        self.register_buffer("mean", x.mean(dim=0))
        self.register_buffer("std", x.std(dim=0) + 1e-6)
        self.linear = nn.Linear(x.shape[1], n_labels)
        nn.init.zeros_(self.linear.weight)  # convex: no random start needed
        nn.init.zeros_(self.linear.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear((x - self.mean) / self.std)


def train_probe(
    x: torch.Tensor,
    y: torch.Tensor,
    n_labels: int,
    *,
    l2: float = 1e-3,
    max_iter: int = 200,
) -> LinearProbe:
    """Multinomial logistic regression on (N, D) vectors: cross-entropy plus ``l2``
    times the squared weights, minimised by L-BFGS. The loss is convex, so the fit is
    the same from any start: the probe has no seed."""
    if x.ndim != 2 or x.shape[0] != y.shape[0]:
        raise ValueError(
            f"expected (N, D) vectors and N labels, got vectors of shape "
            f"{tuple(x.shape)} and {y.shape[0]} labels"
        )
    probe = LinearProbe(x, n_labels)
    optimizer = torch.optim.LBFGS(
        probe.linear.parameters(), max_iter=max_iter, line_search_fn="strong_wolfe"
    )
    standardised = (x - probe.mean) / probe.std

    def closure() -> torch.Tensor:
        optimizer.zero_grad()
        logits = probe.linear(standardised)
        loss = F.cross_entropy(logits, y) + l2 * probe.linear.weight.square().sum()
        loss.backward()
        return loss

    optimizer.step(closure)
    return probe.eval()


# %%
start = time.perf_counter()
real_arm = arms[REAL]
real_encoder = real_arm.make_encoder(0).to(device)
real_pad = real_arm.tokenizer.vocab["[PAD]"]
train_vectors, train_tags = labelled_vectors(
    real_encoder, encode_tagged(real_arm.tokenizer, ner_train)[0], pad_id=real_pad
)
probe_test_features, _ = encode_tagged(real_arm.tokenizer, ner_test)
test_vectors, _ = labelled_vectors(real_encoder, probe_test_features, pad_id=real_pad)
forward_seconds = time.perf_counter() - start
n_layers = len(train_vectors) - 1
probe_inputs = {
    "embeddings" if i == 0 else f"layer {i}": (train_vectors[i], test_vectors[i])
    for i in range(n_layers + 1)
}
probe_inputs["last four, concatenated"] = tuple(
    v[-4:].permute(1, 0, 2).flatten(1)  # (N, 4D)
    for v in (train_vectors, test_vectors)
)
# how many of each test sentence's words were kept (a long sentence may be cut)
kept_words = [sum(t != IGNORE_INDEX for t in f["labels"]) for f in probe_test_features]


def probe_tags(predictions: torch.Tensor) -> list[list[str]]:
    """All test words' predicted tags, split back into sentences (cut words: O)."""
    tags = []
    for sentence, chunk in zip(ner_test, predictions.split(kept_words)):
        tags.append([NER_TAGS[i] for i in chunk.tolist()])
        tags[-1] += ["O"] * (len(sentence.words) - len(tags[-1]))
    return tags


probe_f1 = {}
for name, (train_x, test_x) in probe_inputs.items():
    probe = train_probe(train_x, train_tags, len(NER_TAGS))
    with torch.no_grad():
        predicted = probe_tags(probe(test_x).argmax(dim=-1))
    probe_f1[name] = 100 * entity_scores(gold_tags, predicted)["overall"]["f1"]
print(
    f"{train_vectors.shape[1]:,} training and {test_vectors.shape[1]:,} test words, "
    f"{n_layers + 1} x {train_vectors.shape[2]} numbers each; one forward pass "
    f"{forward_seconds:.0f} s, all probes "
    f"{time.perf_counter() - start - forward_seconds:.0f} s"
)
fine_tuned = 100 * torch.tensor(ner_f1[REAL])
for name, f1 in probe_f1.items():
    print(f"{name:>24}: entity F1 {f1:.1f}")
print(
    f"{'fine-tuned (the ladder)':>24}: entity F1 {fine_tuned.mean():.1f} "
    f"[{fine_tuned.min():.1f}, {fine_tuned.max():.1f}]; "
    f"memorised names {100 * ner_baseline:.1f}"
)

# %% mystnb={"image": {"alt": "Bar chart of entity F1 of a linear probe on each layer of a frozen all-MiniLM-L6-v2, and on the last four concatenated, against a shaded band for fine-tuning and a dashed line for memorised names; the middle layers score best, the last far behind."}}
names = list(probe_f1)
plt.figure(figsize=(8, 3))
plt.bar(range(len(names)), [probe_f1[n] for n in names], color="C2")
plt.axhspan(
    fine_tuned.min().item(),
    fine_tuned.max().item(),
    color="C1",
    alpha=0.3,
    label="fine-tuned, range over seeds",
)
plt.axhline(100 * ner_baseline, color="0.5", ls="--", label="memorised names")
plt.xticks(range(len(names)), [n.replace(", ", "\n") for n in names], fontsize=8)
plt.ylabel("test entity F1 (%)")
plt.title("Frozen all-MiniLM-L6-v2 and a linear probe per layer (Universal NER EWT)")
plt.legend(fontsize=8)
plt.show()

# %%
single = {name: probe_f1[name] for name in list(probe_inputs)[: n_layers + 1]}
best_layer = max(single, key=single.get)
ends = max(single["embeddings"], single[f"layer {n_layers}"])
print(
    f"best single layer: {best_layer} ({single[best_layer]:.1f}); the embeddings "
    f"{single['embeddings']:.1f}, the last layer {single[f'layer {n_layers}']:.1f}, "
    f"the last four concatenated {probe_f1['last four, concatenated']:.1f}"
)
print(
    f"the probe on {best_layer} against fine-tuning the whole encoder: "
    f"{single[best_layer] - fine_tuned.max():+.1f} points from fine-tuning's best seed"
)
steps = -(-len(ner_train) // 16) * pick(quick=1, full=4)
probe_size = (train_vectors.shape[2] + 1) * len(NER_TAGS)
print(f"fine-tuning took {steps} steps; a probe has {probe_size:,} numbers")
if not is_quick():
    middle = [f"layer {i}" for i in range(1, n_layers)]
    assert best_layer in middle, best_layer  # neither end of the encoder
    assert single[best_layer] > ends + 5
    assert single[best_layer] > fine_tuned.max() + 5  # past fine-tuning's every seed

# %% [markdown]
# Two things differ from the paper. First, all-MiniLM-L6-v2's best features sit in the *middle*
# of the encoder, not at its top: the embeddings know only the word, and the last layer falls
# far behind the middle ones. Its last training stage explains it: it was tuned on a
# billion sentence pairs so that the *mean* of its final vectors is a good sentence embedding,
# which pulls every word's final vector towards the meaning of the whole sentence and away from
# what that word is. Concatenating the last four layers therefore mixes the best layers with the
# worst. Which layer gives the best features depends on how the encoder was trained.
#
# Second, the probe on the best layer beats fine-tuning the whole encoder, by the margin the
# cell prints. With 300 sentences the ladder's recipe fine-tunes 22.7 million parameters in the
# few steps printed above, starting from a new head; the probe fits a few thousand numbers
# exactly, on vectors that already separate the tags. The paper had about 200,000 training
# words, and fine-tuning won. Two cautions in reading the margin: the best layer is picked here
# on the test sentences themselves (the paper picked on its development set), and fine-tuning
# gets the ladder's short recipe, not a search over epochs. What the comparison does show is
# that with 300 labelled sentences a frozen middle layer and a linear probe are a strong, cheap
# start, and the first thing to try before fine-tuning.
#
#
# (sec-tr-unseen)=
# ## Text the checkpoint never read
#
# The course checkpoint did not come to the ladder cold. Its pretraining corpus held, beside
# books and Wikipedia articles, the unlabelled training text of the ladder's tasks: Banking77's
# questions, the sentences of UD English-EWT and SQuAD's training paragraphs
# ({ref}`sec-pretrain-recipe`, `--task-text`). That is {term}`task-adaptive pretraining`:
# Gururangan and colleagues continued the pretraining of RoBERTa on each task's own unlabelled
# text, and it helped on every task they tried {cite}`gururangan2020dont`. So the gains above
# measure two things at once: what pretraining teaches in general, and what reading the task's
# own kind of text beforehand buys. Two tasks of the course data pull them apart, since none of
# their text was in the checkpoint's corpus:
#
# - **Sentence Polarity** {cite}`pang2005seeing`: snippets of film reviews, positive or
#   negative. Neither these snippets nor any film review was in the corpus.
# - **Authorship**: which of four novelists, Austen, Dickens, Twain or Doyle, wrote a passage of
#   up to 100 words. The training passages come from eight of their novels that *were* in the
#   corpus; every test passage comes from one of the four novels, one per author, that chapter 9
#   keeps out of pretraining. The authors' styles were read, these books were not.
#
# Both are few-shot, 32 training examples per label, and every arm gets its learning rate the
# same way as on the ladder: a sweep on the validation split, one seed, run once outside the book
# (`experiments/unseen_task.py`; the chapter reads the shipped copy of its validation scores).
# all-MiniLM-L6-v2 joins on Sentence Polarity, to show that the test can see transfer where
# there is some. Beside the encoders stand the majority class and the nearest bag-of-words
# centroid of {ref}`sec-ft-gain`.

# %%
from tinybert.finetuning.recipes import task_data

unseen_sweep = load_result("unseen_sweep")
FEW_SHOT, UNSEEN_EPOCHS = pick(quick=2, full=32), pick(quick=1, full=16)
UNSEEN = {  # test examples: 500 of 1,066 snippets, 600 of 3,000 passages
    "sentence_polarity": LadderTask(
        None, pick(quick=16, full=500), UNSEEN_EPOCHS, per_label=FEW_SHOT
    ),
    "authorship": LadderTask(
        None, pick(quick=16, full=600), UNSEEN_EPOCHS, per_label=FEW_SHOT
    ),
}
UNSEEN_ARMS = {
    "sentence_polarity": ["random init", "course checkpoint", "all-MiniLM-L6-v2"],
    "authorship": ["random init", "course checkpoint"],
}
if not is_quick():  # the sweep trained as these runs do (it scored more examples)
    for task, settings in UNSEEN.items():
        swept = unseen_sweep["settings"][task]
        for field in ("train_examples", "epochs", "per_label", "batch_size"):
            assert swept[field] == getattr(settings, field), (task, field)
unseen_rates = {
    task: {arm: float(max(v, key=v.get)) for arm, v in unseen_sweep[task].items()}
    for task in UNSEEN
}
unseen_baselines, unseen = {}, {}
start = time.perf_counter()
for task, settings in UNSEEN.items():
    train, labels = task_data(task, "train")
    test = evenly_spaced(task_data(task, "test")[0], settings.eval_examples)
    few_shot = per_label(train, settings.per_label)
    majority = Counter(e.label for e in few_shot).most_common(1)[0][0]
    gold = torch.tensor([e.label for e in test])
    unseen_baselines[task] = {
        "majority class": accuracy(torch.full_like(gold, majority), gold),
        "bag-of-words centroids": bag_of_words_centroids(few_shot, test, len(labels)),
    }
    for arm_name in UNSEEN_ARMS[task]:
        unseen[task, arm_name] = [
            ladder_score(
                task,
                arms[arm_name],
                lr=unseen_rates[task][arm_name],
                seed=seed,
                split="test",
                settings=settings,
            )
            for seed in SEEDS
        ]
runs_done = sum(len(v) for v in unseen.values())
print(f"{runs_done} runs in {time.perf_counter() - start:.0f} s")
for task in UNSEEN:
    print(
        f"{task}: "
        + ", ".join(f"{n} {v:.1%}" for n, v in unseen_baselines[task].items())
    )
    for arm_name in UNSEEN_ARMS[task]:
        runs = torch.tensor(unseen[task, arm_name])
        print(
            f"  {arm_name:<20} lr {unseen_rates[task][arm_name]:.0e}: "
            f"{runs.mean():.1%} [{runs.min():.1%}, {runs.max():.1%}]"
        )

# %% mystnb={"image": {"alt": "Two horizontal bar charts of test accuracy on text the checkpoint never read, Sentence Polarity and authorship; on polarity the course checkpoint is level with random init and all-MiniLM-L6-v2 far ahead, on authorship the checkpoint leads random init."}}
fig, axes = plt.subplots(1, len(UNSEEN), figsize=(10, 3.0))
for ax, task in zip(axes, UNSEEN):
    runs = {a: unseen[task, a] for a in UNSEEN_ARMS[task]}
    ladder_bars(ax, unseen_baselines[task], runs, task)
plt.tight_layout()
plt.show()

# %% [markdown]
# The ladder's rule reads the runs: a gap counts only past the spread of the seeds.

# %%
unseen_gap = {
    task: score_gap(
        {a: unseen[task, a] for a in (COURSE, RANDOM)}, COURSE, RANDOM
    )
    for task in UNSEEN
}
read_gap = {task: gap(task, COURSE, RANDOM) for task in LADDER}
for task, (points, spread) in {**read_gap, **unseen_gap}.items():
    kind = "read its text" if task in LADDER else "text never read"
    print(
        f"{task:<18} ({kind}): course checkpoint - random init {points:+.1f} points, "
        f"seeds' spread {spread:.1f}"
    )
real_lead = score_gap(
    {a: unseen["sentence_polarity", a] for a in (REAL, RANDOM)}, REAL, RANDOM
)
print(f"sentence_polarity: all-MiniLM-L6-v2 - random init {real_lead[0]:+.1f} points")
if not is_quick():
    # film reviews, never read: the checkpoint does not beat random init
    points, spread = unseen_gap["sentence_polarity"]
    assert points <= spread, unseen_gap
    # ... while the real encoder is ahead on every seed
    polarity_real = min(unseen["sentence_polarity", REAL])
    assert polarity_real > max(unseen["sentence_polarity", RANDOM])
    assert polarity_real > max(unseen_baselines["sentence_polarity"].values())
    # unseen novels by authors it read: every seed of the checkpoint ahead
    assert min(unseen["authorship", COURSE]) > max(unseen["authorship", RANDOM])
    # the gain is largest where it read the task's own text
    assert min(read_gap["ud_pos"][0], read_gap["banking77"][0]) > (
        unseen_gap["sentence_polarity"][0]
    )


# %% [markdown]
# Both halves of the evidence, then. Where the checkpoint had read the task's text, it beats
# random initialisation on every seed. On film reviews, whose text and whose kind of text it never
# read, it does not: it is level with random initialisation, within the seeds' spread, while
# all-MiniLM-L6-v2 is far ahead of both, so the test can see transfer when there is some. On the
# four unseen novels it is ahead on every seed: it had read other books by the same authors, so it
# knew their vocabulary and their style, though not these passages. Task-adaptive pretraining is
# what two CPU hours bought: it carried the checkpoint to the tasks whose text, or whose kind of
# text, it read, and not beyond. General transfer, the kind all-MiniLM-L6-v2 shows, takes far more
# pretraining than this chapter's checkpoint had.
#
# (sec-tr-summary)=
# ## Summary
#
# - What pretraining is worth is measured, not assumed ({ref}`sec-ft-gain`): the same recipe,
#   each encoder's own learning rate from a sweep on validation data, several seeds, the test
#   split, and baselines that need no model; a gap counts only past the spread of the seeds. A
#   real pretrained encoder beats random initialisation on every task of the ladder beyond
#   that spread. The course's own checkpoint is ahead of random initialisation on every seed of
#   intents and tags: by far on part-of-speech tagging, which rests on the local statistics
#   that two CPU hours of masked language modelling learn, and by less on few-shot intent
#   classification, which rests on meaning.
# - The checkpoint had read those tasks' unlabelled text ({term}`task-adaptive pretraining`).
#   On film reviews, whose text it never read, it is level with random initialisation while
#   all-MiniLM-L6-v2 is far ahead; on novels it never read, by authors whose other books it
#   read, it is ahead on every seed ({ref}`sec-tr-unseen`). Two CPU hours buy transfer to the
#   text a model has read, not general transfer.
# - A sentence pair is one input, `[CLS] question [SEP] sentence [SEP]` with segment ids
#   ({ref}`sec-ft-pairs`): the real encoder learns from 256 pairs to tell the sentence that holds
#   the answer, and tested without the segment ids or the middle `[SEP]` it loses points on every
#   seed. Counting the question's words still beats it at that size: read a pair task's score
#   beside that baseline.
# - Frozen features are the cheap alternative to fine-tuning ({ref}`sec-ft-feature-based`):
#   one forward pass, then a linear probe per layer. Which layer is best depends on how the
#   encoder was trained: the upper layers of BERT-base (best, the last four concatenated), the
#   middle of a sentence-embedding model.
#
# From `tinybert.finetuning.ladder` later chapters take the arms and the runs of the ladder
# (`ladder_arms`, `ladder_score`) to put their own encoders on it.
#
# (sec-tr-exercises)=
# ## Exercises
#
# :::{exercise-start}
# :label: ex-ft-ladder-verdict
# :difficulty: 1
# :minutes: 15
# :kind: coding
# :::
# **When does a rung beat another?** {ref}`sec-ft-gain` counts a gap between two arms of the
# ladder only when it is larger than the spread (max minus min over seeds) of either arm. Write
# `compare_rungs(upper, lower)` for two lists of scores, one per seed, that returns `"ahead"` when the
# mean of `upper` exceeds the mean of `lower` by more than the larger of the two spreads,
# `"behind"` when it falls short of it by more than that, and `"level"` otherwise. Then try it on
# the ladder's own runs: `compare_rungs(ladder["banking77", COURSE], ladder["banking77", RANDOM])`.
# :::{exercise-end}
# :::
#
# ::::{solution-start} ex-ft-ladder-verdict
# :class: dropdown
# ::::
# The rule compares the mean gap with the worst spread, so one lucky seed in either arm cannot
# make a gap count, and a single seed (spread 0) makes any gap count: run several.

# %% tags=["solution"]
def compare_rungs(upper: list[float], lower: list[float]) -> str:
    ### BEGIN SOLUTION
    spread = max(max(upper) - min(upper), max(lower) - min(lower))
    gap = sum(upper) / len(upper) - sum(lower) / len(lower)
    if gap > spread:
        return "ahead"
    if gap < -spread:
        return "behind"
    return "level"
    ### END SOLUTION


# %% [markdown]
# ::::{solution-end}
# ::::

# %% tags=["check"]
from tinybert.exercises.ch11 import check_compare_rungs

check_compare_rungs(compare_rungs)


# %% [markdown]
# :::{exercise-start}
# :label: ex-ft-truncate-pair
# :difficulty: 2
# :minutes: 20
# :kind: coding
# :::
# **Truncating a pair.** A sentence-pair task (entailment, paraphrase) packs
# `[CLS] A [SEP] B [SEP]`, which must fit in `max_len` positions. BERT's own code truncates the
# pair *longest first*: while the three special tokens and both segments do not fit, remove the
# last token of the longer segment (of B when they are equally long). Write
# `truncate_pair(a, b, max_len)` returning the two truncated lists (new lists; the inputs stay
# unchanged). Raise `ValueError` when `max_len` is less than 3. Why is this fairer than cutting
# the end of the packed sequence?
# :::{exercise-end}
# :::
#
# ::::{solution-start} ex-ft-truncate-pair
# :class: dropdown
# ::::
# Cutting the packed sequence would remove all of B before touching A, and B may carry half of
# the meaning (the hypothesis of an entailment pair); longest-first keeps as much of both as
# possible and cuts where there is most to spare.

# %% tags=["solution"]
def truncate_pair(
    a: list[int], b: list[int], max_len: int
) -> tuple[list[int], list[int]]:
    ### BEGIN SOLUTION
    if max_len < 3:
        raise ValueError(
            f"max_len must leave room for [CLS] and two [SEP], got {max_len}"
        )
    a, b = list(a), list(b)
    while len(a) + len(b) + 3 > max_len:
        if len(a) > len(b):
            a.pop()
        else:
            b.pop()
    return a, b
    ### END SOLUTION


# %% [markdown]
# ::::{solution-end}
# ::::

# %% tags=["check"]
from tinybert.exercises.ch11 import check_truncate_pair

check_truncate_pair(truncate_pair)

# %% [markdown]
# :::{exercise-start}
# :label: ex-ft-word-overlap
# :difficulty: 2
# :minutes: 25
# :kind: coding
# :::
# **A baseline for sentence pairs.** Before fine-tuning an encoder on a pair task such as
# paraphrase detection (do A and B say the same thing?), measure what needs no model at all: how
# many words the two sentences share. For a question and a sentence, {ref}`sec-ft-pairs` counts
# the share of the question's words; two paraphrases play symmetric roles, so write `word_overlap(a, b)`, the Jaccard similarity
# $|W_a \cap W_b| / |W_a \cup W_b|$ of the two sets of lowercased words (a word is a run of letters,
# digits and apostrophes), 0.0 when neither sentence has a word; and
# `fit_threshold(pairs, labels)`, which learns the baseline from training pairs: among the
# training pairs' overlaps, and infinity (never say 1), the threshold $t$ for which predicting
# label 1 when the overlap is at least $t$ gets the most training pairs right, the smallest such
# $t$ on ties. Raise `ValueError` when there are no pairs or when `labels` is not as long as
# `pairs`. Why must an encoder's score on a pair task be read beside this number?
# :::{exercise-end}
# :::
#
# ::::{solution-start} ex-ft-word-overlap
# :class: dropdown
# ::::
# Paraphrases share words, and so do most entailed pairs: a word-overlap threshold often scores
# far above the majority class on such tasks, so an encoder that fine-tunes to a score near it
# has learned little beyond counting shared words. A pair task's ladder needs this rung beside
# the majority class.

# %% tags=["solution"]
import math
import re


def word_overlap(a: str, b: str) -> float:
    ### BEGIN SOLUTION
    words_a = set(re.findall(r"[a-z0-9']+", a.lower()))
    words_b = set(re.findall(r"[a-z0-9']+", b.lower()))
    union = words_a | words_b
    return len(words_a & words_b) / len(union) if union else 0.0
    ### END SOLUTION


def fit_threshold(pairs: list[tuple[str, str]], labels: list[int]) -> float:
    ### BEGIN SOLUTION
    if not pairs or len(pairs) != len(labels):
        raise ValueError(
            f"expected as many labels as pairs (at least one), got {len(pairs)} "
            f"pairs and {len(labels)} labels"
        )
    scores = [word_overlap(a, b) for a, b in pairs]
    best_correct, best = -1, math.inf
    for t in sorted(set(scores)) + [math.inf]:
        correct = sum(
            (score >= t) == (label == 1) for score, label in zip(scores, labels)
        )
        if correct > best_correct:
            best_correct, best = correct, t
    return best
    ### END SOLUTION


# %% [markdown]
# ::::{solution-end}
# ::::

# %% tags=["check"]
from tinybert.exercises.ch11 import check_word_overlap

check_word_overlap(word_overlap, fit_threshold)

# %% [markdown]
# :::{exercise-start}
# :label: ex-tr-unseen-size
# :difficulty: 2
# :minutes: 45
# :kind: experiment
# :::
# **More labels, same verdict? (experiment).** {ref}`sec-tr-unseen` found the course checkpoint
# level with random initialisation on Sentence Polarity with 32 snippets per label. Does more
# labelled data change the verdict? Run the comparison at 256 snippets per label (8 epochs, each
# arm's rate chosen again on the validation split from `LADDER_LRS`), on the whole test split,
# with five seeds. Report every seed's accuracy, the gap and the seeds' spread, and a
# bag-of-words baseline trained on the same snippets. Then say what would have to change in
# chapter 9's recipe for the checkpoint to help here.
# :::{exercise-end}
# :::
#
# ::::{solution-start} ex-tr-unseen-size
# :class: dropdown
# ::::
# **Rubric** (what a full answer contains): the validation sweep of both arms and the rate each
# chose; five test accuracies per arm; the gap and the larger spread, read with the ladder's
# rule; the baseline beside them; a proposal tied to what the checkpoint read (film reviews or
# other general text in the corpus, more pretraining, a larger model), not a guess at a better
# fine-tuning recipe.
#
# Pass a `LadderTask(None, 1066, 8, per_label=256)` as `settings` to `ladder_score`, first with
# `split="validation"` for every rate of `LADDER_LRS` and seed 0, then with `split="test"` and
# the best rate for seeds 0 to 4. A recorded run of exactly this
# (`experiments/unseen_task_256_full.json`) gave random initialisation
# {recorded}`experiments/unseen_task_256_full.json#test/random init/scores|mean`
# [{recorded}`experiments/unseen_task_256_full.json#test/random init/scores|min`, {recorded}`experiments/unseen_task_256_full.json#test/random init/scores|max`]
# and the course checkpoint {recorded}`experiments/unseen_task_256_full.json#test/course checkpoint/scores|mean`
# [{recorded}`experiments/unseen_task_256_full.json#test/course checkpoint/scores|min`,
# {recorded}`experiments/unseen_task_256_full.json#test/course checkpoint/scores|max`]: the checkpoint is not ahead beyond the
# spread, and naive Bayes on the same 512 snippets scored {recorded}`experiments/unseen_task_256_full.json#naive Bayes`. More
# labels lift both arms; they do not make the pretraining transfer. What the checkpoint lacks
# is the text: nothing in its corpus reads like a film review.
# ::::{solution-end}
# ::::
#
# (sec-tr-quiz)=
# ## Quiz
#
# Check what you took from this chapter. In a notebook, run the cell and answer with
# `quiz.check(question, answer)`, such as `quiz.check(1, "b")`; here, press *Check*.

# %% tags=["quiz", "remove-input"]
from tinybert.exercises.quiz import Quiz, choice, number
from tinybert.training.inputs import SpecialTokens
from tinybert.training.inputs import encode_pair

specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
vocab = {token: i for i, token in enumerate(specials)}
_, pair_types = encode_pair(
    list(range(10, 15)), list(range(20, 29)), SpecialTokens.from_vocab(vocab), 64
)
quiz = Quiz(
    "ch11",
    [
        number(
            "A question of 5 word pieces and a sentence of 9 are encoded as one pair. "
            "How many tokens of the input have segment id 1?",
            answer=sum(pair_types),
            decimals=0,
            explain="The sentence and the [SEP] that ends it.",
        ),
        choice(
            "In the transfer ladder, on which tasks does every seed of the course "
            "checkpoint beat every seed of random initialisation?",
            ["Banking77 intents", "part-of-speech tags", "both", "neither"],
            answer="c",
            explain="The chapter asserts it for both; the lead is largest on tags.",
        ),
        choice(
            "Two arms score 61% and 64% on average over three seeds; their seeds range "
            "over 5 points. What does the ladder conclude?",
            [
                "they are level: the gap is inside the seeds' spread",
                "the second arm is better by 3 points",
                "the first arm is better, since its seeds vary less than the other's",
                "nothing until a fourth seed is run",
            ],
            answer="a",
            explain="A gap counts only when it is larger than either arm's spread.",
        ),
        choice(
            "What did task-adaptive pretraining add to the course checkpoint's corpus?",
            [
                "the labelled test sets of the ladder's tasks, to choose the rates",
                "a billion sentence pairs",
                "film reviews and four held-out novels",
                "the unlabelled training text of the ladder's tasks",
            ],
            answer="d",
            explain="No label, and no validation or test text, was read.",
        ),
        choice(
            "On Sentence Polarity, whose text the checkpoint never read, the course "
            "checkpoint compared with random initialisation is",
            [
                "ahead on every seed",
                "level, within the seeds' spread",
                "behind random initialisation on every one of its seeds",
                "not measured",
            ],
            answer="b",
            explain="all-MiniLM-L6-v2 is far ahead of both: the test can see transfer.",
        ),
        choice(
            "For a question-and-sentence pair, BERT's input is",
            [
                "two passes, one per text, with their two [CLS] vectors concatenated",
                "the question alone, the sentence as the label",
                "[CLS] question [SEP] sentence [SEP], segment ids 0 then 1",
                "[CLS] sentence [SEP], the question added to the head",
            ],
            answer="c",
            explain="One input: each word of one text attends to each of the other.",
        ),
        choice(
            "Which layer of all-MiniLM-L6-v2 gave the best frozen features for tagging "
            "named entities?",
            [
                "the embeddings",
                "the last layer",
                "the last four, concatenated",
                "a middle layer",
            ],
            answer="d",
            explain="Its final vectors were trained towards the sentence's meaning.",
        ),
    ],
)
quiz
