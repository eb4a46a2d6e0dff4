"""Unit tests for BERT's pretraining data (chapters/09_pretraining.md): masking, NSP pairs, batches,
the course corpus, load_pretrained and the `tinybert pretrain` command line.

Synthetic vocabularies put the special tokens at unusual ids, so that a hard-coded 0 or 103 fails.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tinybert.models.registry import save_model
from tinybert.training.inputs import SpecialTokens
from tinybert.pretraining.objective import mask_tokens, seeded_generator
from tinybert.models.bert_heads import IGNORE_INDEX, BertForPreTraining
from tinybert.models.bert import BertConfig
from tinybert.pretraining.examples import (PretrainingBatches, PretrainingExample,
                                           collate, make_examples)
from tinybert.training.inputs import encode_pair
from tinybert.pretraining.pairs import sample_nsp_pairs
from tinybert.models.course_checkpoint import load_pretrained, shipped_checkpoint
from tinybert.pretraining.documents import (
    TRAIN_BOOKS,
    book_documents,
    course_documents,
    encode_sentence,
    make_segments,
    tokenize_documents,
    vocabulary_texts,
    wikitext_articles,
)
from tinybert.training.inputs import split_sentences
from tinybert.tokenizers.wordpiece import WordPieceTokenizer

ROOT = Path(__file__).resolve().parents[1]
HAS_DATA = bool(os.environ.get("TINYBERT_DATA_DIR", "").strip())
needs_data = pytest.mark.skipif(not HAS_DATA, reason="TINYBERT_DATA_DIR is not set: the course data is not available")

# 99 tokens; the special tokens sit at 7, 20, 3, 50 and 98 (not BERT's 0, 100, 101, 102, 103).
V = 99
SPECIAL_AT = {"[PAD]": 7, "[UNK]": 20, "[CLS]": 3, "[SEP]": 50, "[MASK]": 98}


def toy_vocab() -> dict[str, int]:
    names = iter(f"w{i}" for i in range(V))
    at = {i: t for t, i in SPECIAL_AT.items()}
    return {at.get(i) or next(names): i for i in range(V)}


SPECIAL = SpecialTokens.from_vocab(toy_vocab())
ORDINARY = [i for i in range(V) if i not in SPECIAL_AT.values()]


pytestmark = pytest.mark.usefixtures("one_thread")


def toy_batch(B: int = 13, T: int = 37, seed: int = 0) -> torch.Tensor:
    """[CLS] tokens [SEP] tokens [SEP] [PAD]...: ordinary ids with the special tokens in place."""
    g = torch.Generator().manual_seed(seed)
    ordinary = torch.tensor(ORDINARY)
    ids = ordinary[torch.randint(len(ordinary), (B, T), generator=g)]
    ids[:, 0], ids[:, 10], ids[:, 20] = SPECIAL.cls, SPECIAL.sep, SPECIAL.sep
    ids[torch.arange(B) % 3 == 0, 21:] = SPECIAL.pad                   # every third row is padded
    ids[1, 5] = SPECIAL.unk
    return ids


# --- special tokens and masking -----------------------------------------------------------------

def test_special_tokens_come_from_the_vocabulary():
    assert (SPECIAL.pad, SPECIAL.unk, SPECIAL.cls, SPECIAL.sep, SPECIAL.mask) == (7, 20, 3, 50, 98)
    assert SPECIAL.vocab_size == V
    vocab = toy_vocab()
    del vocab["[MASK]"]
    with pytest.raises(ValueError, match=r"\[MASK\]"):
        SpecialTokens.from_vocab(vocab)


def test_masking_rates_match_bert():
    ids = toy_batch(B=400, T=128)
    corrupted, labels = mask_tokens(ids, SPECIAL, torch.Generator().manual_seed(0))
    maskable = ~torch.isin(ids, torch.tensor(SPECIAL.ids))
    chosen = labels != IGNORE_INDEX
    rate = chosen.sum().item() / maskable.sum().item()
    assert abs(rate - 0.15) < 0.005, rate
    n = chosen.sum().item()
    as_mask = (corrupted[chosen] == SPECIAL.mask).sum().item() / n
    kept = (corrupted[chosen] == ids[chosen]).sum().item() / n
    random = ((corrupted[chosen] != SPECIAL.mask) & (corrupted[chosen] != ids[chosen])).sum().item() / n
    p_same = 1 / len(ORDINARY)                    # a random token can happen to be the original
    assert abs(as_mask - 0.8) < 0.01, as_mask
    assert abs(random - 0.1 * (1 - p_same)) < 0.01, random
    assert abs(kept - (0.1 + 0.1 * p_same)) < 0.01, kept


def test_masking_labels_and_untouched_positions():
    ids = toy_batch()
    corrupted, labels = mask_tokens(ids, SPECIAL, torch.Generator().manual_seed(1), mlm_probability=0.5)
    chosen = labels != IGNORE_INDEX
    assert chosen.any()
    assert torch.equal(labels[chosen], ids[chosen])                      # the original token is the label
    assert (labels[~chosen] == IGNORE_INDEX).all()                       # -100 everywhere else
    assert torch.equal(corrupted[~chosen], ids[~chosen])                 # and nothing else changes
    special = torch.isin(ids, torch.tensor(SPECIAL.ids))
    assert not chosen[special].any()                                     # never [CLS], [SEP], [PAD], [UNK]
    replaced = chosen & (corrupted != SPECIAL.mask)
    assert not torch.isin(corrupted[replaced], torch.tensor(SPECIAL.ids)).any()   # random ids are ordinary
    assert corrupted.dtype == ids.dtype and corrupted.shape == ids.shape
    assert torch.equal(ids, toy_batch())                                 # the input is not modified in place


def test_masking_is_deterministic_under_a_generator():
    ids = toy_batch()
    a = mask_tokens(ids, SPECIAL, torch.Generator().manual_seed(5))
    b = mask_tokens(ids, SPECIAL, torch.Generator().manual_seed(5))
    c = mask_tokens(ids, SPECIAL, torch.Generator().manual_seed(6))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert not torch.equal(a[1], c[1])


def test_masking_extremes_and_errors():
    ids = toy_batch()
    corrupted, labels = mask_tokens(ids, SPECIAL, torch.Generator().manual_seed(0), mlm_probability=0.0)
    assert torch.equal(corrupted, ids) and (labels == IGNORE_INDEX).all()
    corrupted, labels = mask_tokens(ids, SPECIAL, torch.Generator().manual_seed(0), mlm_probability=1.0,
                                    mask_fraction=1.0, random_fraction=0.0)
    maskable = ~torch.isin(ids, torch.tensor(SPECIAL.ids))
    assert (corrupted[maskable] == SPECIAL.mask).all() and torch.equal(labels[maskable], ids[maskable])
    with pytest.raises(ValueError, match="integer"):
        mask_tokens(ids.float(), SPECIAL)
    with pytest.raises(ValueError, match="at most 1"):
        mask_tokens(ids, SPECIAL, mask_fraction=0.8, random_fraction=0.3)
    with pytest.raises(ValueError, match="probability"):
        mask_tokens(ids, SPECIAL, mlm_probability=1.5)


def test_seeded_generator_depends_on_every_key():
    draw = lambda *keys: torch.rand(3, generator=seeded_generator(*keys))      # noqa: E731
    assert torch.equal(draw(0, "mask", 5, 0), draw(0, "mask", 5, 0))
    assert not torch.equal(draw(0, "mask", 5, 0), draw(0, "mask", 5, 1))
    assert not torch.equal(draw(0, "mask", 5, 0), draw(1, "mask", 5, 0))


# --- documents, sentences, segments ---------------------------------------------------------------

def test_split_sentences():
    text = ('Mr. Darcy bowed.  "Are you ill?" she asked. He said: "No!" It was 1813. H. americanus '
            "is a lobster. the end")
    assert split_sentences(text) == ["Mr. Darcy bowed.", '"Are you ill?" she asked.', 'He said: "No!"',
                                     "It was 1813.", "H. americanus is a lobster. the end"]
    assert split_sentences("   ") == []


def test_wikitext_articles():
    text = (" \n = First = \n \n Alpha is 1 @,@ 000 m high . It is big . \n \n = = Section = = \n"
            " Beta @-@ gamma exists . \n = Second = \n A <unk> thing . \n")
    articles = wikitext_articles(text)
    assert articles == [["Alpha is 1,000 m high .", "It is big .", "Beta-gamma exists ."],
                        ["A <unk> thing ."]]


def test_book_documents_are_windows_of_sentences():
    text = "\n\n".join(f"Sentence _number_ {i} is here." for i in range(10))
    docs = book_documents(text, sentences_per_document=4)
    assert [len(d) for d in docs] == [4, 4, 2]
    assert docs[0][1] == "Sentence number 1 is here."
    with pytest.raises(ValueError):
        book_documents(text, sentences_per_document=1)


def test_encode_sentence_maps_unk_marker():
    vocab = {t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "cat", "."])}
    tokenizer = WordPieceTokenizer(vocab)
    assert encode_sentence(tokenizer, "A <unk> cat .") == [5, 1, 6, 7]
    assert encode_sentence(tokenizer, "<unk>") == [1]
    assert tokenize_documents([["A cat .", ""], ["cat"]], tokenizer) == [[[5, 6, 7]], [[6]]]
    assert vocabulary_texts([["A <unk> cat .", "x"]]) == ["A   cat . x"]


def test_make_segments_packs_and_cuts():
    doc = [[1, 2, 3], [4, 5], [6, 7, 8, 9], list(range(10, 25)), [30]]
    segments = make_segments(doc, max_tokens=6)
    assert segments == [[1, 2, 3, 4, 5], [6, 7, 8, 9], [10, 11, 12, 13, 14, 15], [30]]
    assert all(len(s) <= 6 for s in segments)
    short = [[1], [2], [3]]
    assert make_segments(short, 10) == [[1, 2, 3]]
    with pytest.raises(ValueError):
        make_segments(doc, 0)


def _toy_documents(n_docs: int = 40, seed: int = 0) -> list[list[list[int]]]:
    """Documents of segments whose first token says (document, segment): 1000 d + i."""
    g = torch.Generator().manual_seed(seed)
    return [[[1000 * d + i, 11, 12] for i in range(int(torch.randint(1, 9, (1,), generator=g)))]
            for d in range(n_docs)]


def test_nsp_pairs_are_half_true_half_random():
    docs = _toy_documents(400)
    pairs = sample_nsp_pairs(docs, torch.Generator().manual_seed(0))
    assert len(pairs) == sum(len(d) - 1 for d in docs)
    is_next = sum(p.pair_label == 0 for p in pairs) / len(pairs)
    assert abs(is_next - 0.5) < 0.03, is_next
    for p in pairs:
        da, ia = divmod(p.a[0], 1000)
        db, ib = divmod(p.b[0], 1000)
        if p.pair_label == 0:
            assert (db, ib) == (da, ia + 1)          # the true next segment
        else:
            assert db != da                          # a segment of another document


def test_nsp_pairs_are_deterministic_and_need_two_documents():
    docs = _toy_documents()
    a = sample_nsp_pairs(docs, torch.Generator().manual_seed(3))
    b = sample_nsp_pairs(docs, torch.Generator().manual_seed(3))
    c = sample_nsp_pairs(docs, torch.Generator().manual_seed(4))
    assert a == b and a != c
    with pytest.raises(ValueError, match="two"):
        sample_nsp_pairs([[[1], [2], [3]], []], torch.Generator())


def test_encode_pair_layout_and_truncation():
    ids, types = encode_pair([10, 11, 12], [20, 21], SPECIAL, max_len=16)
    assert ids == [SPECIAL.cls, 10, 11, 12, SPECIAL.sep, 20, 21, SPECIAL.sep]
    assert types == [0, 0, 0, 0, 0, 1, 1, 1]
    ids, types = encode_pair(list(range(100, 120)), [20, 21, 22], SPECIAL, max_len=11)
    assert len(ids) == 11 and ids[:6] == [SPECIAL.cls, 100, 101, 102, 103, 104]   # the longer one is trimmed
    assert ids[-4:] == [20, 21, 22, SPECIAL.sep] and types.count(1) == 4
    ids, _ = encode_pair(list(range(100, 120)), list(range(200, 220)), SPECIAL, max_len=9)
    assert ids == [SPECIAL.cls, 100, 101, 102, SPECIAL.sep, 200, 201, 202, SPECIAL.sep]
    with pytest.raises(ValueError, match="at least 5; got 4"):
        encode_pair([1], [2], SPECIAL, max_len=4)


def test_encode_pair_one_segment():
    assert encode_pair([10, 11], None, SPECIAL, max_len=8) == (
        [SPECIAL.cls, 10, 11, SPECIAL.sep], [0, 0, 0, 0])
    assert encode_pair(list(range(100, 120)), None, SPECIAL, max_len=5)[0] == [
        SPECIAL.cls, 100, 101, 102, SPECIAL.sep]
    assert encode_pair([], None, SPECIAL, max_len=3) == ([SPECIAL.cls, SPECIAL.sep], [0, 0])
    assert encode_pair([], [], SPECIAL, max_len=5) == (
        [SPECIAL.cls, SPECIAL.sep, SPECIAL.sep], [0, 0, 1])
    with pytest.raises(ValueError, match="at least 3; got 2"):
        encode_pair([1], None, SPECIAL, max_len=2)


def test_collate_pads_and_masks():
    examples = [PretrainingExample([3, 10, 50, 20, 50], [0, 0, 0, 1, 1], 0),
                PretrainingExample([3, 10, 11, 50, 20, 21, 50], [0, 0, 0, 0, 1, 1, 1], 1)]
    batch = collate(examples, SPECIAL)
    assert batch["input_ids"].shape == (2, 7) and batch["input_ids"][0, 5:].tolist() == [SPECIAL.pad] * 2
    assert batch["attention_mask"].dtype == torch.bool and batch["attention_mask"].sum(1).tolist() == [5, 7]
    assert batch["token_type_ids"][0].tolist() == [0, 0, 0, 1, 1, 0, 0]
    assert batch["pair_labels"].tolist() == [0, 1] and "mlm_labels" not in batch
    masked = [PretrainingExample(e.input_ids, e.token_type_ids, e.pair_label, [-100] * len(e.input_ids))
              for e in examples]
    assert (collate(masked, SPECIAL)["mlm_labels"] == IGNORE_INDEX).all()


def _examples(n: int = 50) -> list[PretrainingExample]:
    g = torch.Generator().manual_seed(0)
    out = []
    for i in range(n):
        a = torch.tensor(ORDINARY)[torch.randint(len(ORDINARY), (int(torch.randint(2, 9, (1,), generator=g)),),
                                                 generator=g)].tolist()
        ids, types = encode_pair(a, [ORDINARY[i % len(ORDINARY)], ORDINARY[i // len(ORDINARY)]], SPECIAL,
                                 max_len=16)
        out.append(PretrainingExample(ids, types, i % 2))
    return out


def test_batches_are_a_function_of_the_step():
    batches = PretrainingBatches(_examples(), SPECIAL, batch_size=4, seed=1)
    again = PretrainingBatches(_examples(), SPECIAL, batch_size=4, seed=1)
    later, first = batches(17), batches(0)
    for step, batch in ((17, later), (0, first)):
        expected = again(step)
        assert all(torch.equal(batch[k], expected[k]) for k in expected)
    assert set(first) == {"input_ids", "token_type_ids", "attention_mask", "pair_labels", "mlm_labels"}
    assert not torch.equal(batches(0)["mlm_labels"], batches(batches.steps_per_epoch)["mlm_labels"])


def _original(batch: dict[str, torch.Tensor]) -> list[tuple[int, ...]]:
    """The uncorrupted rows of a masked batch: the label where there is one, else the input."""
    ids = torch.where(batch["mlm_labels"] != IGNORE_INDEX, batch["mlm_labels"], batch["input_ids"])
    return [tuple(row[m].tolist()) for row, m in zip(ids, batch["attention_mask"])]


@pytest.mark.parametrize("dynamic", [True, False])
def test_each_epoch_visits_every_example_once_across_processes(dynamic):
    examples = _examples(48)
    assert len({tuple(e.input_ids) for e in examples}) == 48
    shards = [PretrainingBatches(examples, SPECIAL, batch_size=4, seed=2, rank=r, world_size=3,
                                 dynamic_masking=dynamic) for r in range(3)]
    assert shards[0].steps_per_epoch == 4
    for epoch in range(2):
        seen = [row for step in range(4 * epoch, 4 * epoch + 4) for shard in shards for row in _original(shard(step))]
        assert sorted(seen) == sorted(tuple(e.input_ids) for e in examples)
    with pytest.raises(ValueError, match="rank"):
        PretrainingBatches(examples, SPECIAL, batch_size=4, rank=3, world_size=3)
    with pytest.raises(ValueError, match="cannot fill"):
        PretrainingBatches(examples[:5], SPECIAL, batch_size=4, world_size=2)


def test_sharding_matches_distributed_sampler():
    """Each global batch is split the way torch's DistributedSampler splits a list: rank::world_size."""
    from torch.utils.data.distributed import DistributedSampler

    examples = _examples(48)
    full = PretrainingBatches(examples, SPECIAL, batch_size=12, seed=4)
    global_batch = _original(full(0))
    for rank in range(3):
        shard = PretrainingBatches(examples, SPECIAL, batch_size=4, seed=4, rank=rank, world_size=3)
        sampler = DistributedSampler(global_batch, num_replicas=3, rank=rank, shuffle=False)
        assert _original(shard(0)) == [global_batch[i] for i in sampler]


def test_static_masking_repeats_and_dynamic_masking_changes():
    examples = _examples(8)
    static = PretrainingBatches(examples, SPECIAL, batch_size=8, seed=0, dynamic_masking=False)
    dynamic = PretrainingBatches(examples, SPECIAL, batch_size=8, seed=0, dynamic_masking=True)

    def masks_by_example(batches, step):
        batch = batches(step)
        order = batches._order[1].tolist()
        return {order[i]: batch["mlm_labels"][i][batch["attention_mask"][i]].tolist() for i in range(8)}

    assert masks_by_example(static, 0) == masks_by_example(static, 1)      # epoch 0 and epoch 1
    assert masks_by_example(dynamic, 0) != masks_by_example(dynamic, 1)


def test_make_examples_fit_max_len():
    docs = [[[ORDINARY[(d + i + j) % 90] for j in range(7)] for i in range(12)] for d in range(6)]
    examples = make_examples(docs, SPECIAL, max_len=20, generator=torch.Generator().manual_seed(0))
    assert examples and all(len(e.input_ids) <= 20 for e in examples)
    assert all(e.input_ids[0] == SPECIAL.cls and e.input_ids.count(SPECIAL.sep) == 2 for e in examples)


# --- the course corpus ----------------------------------------------------------------------------

def test_train_books_exclude_chapter_10_test_books():
    assert len(TRAIN_BOOKS) == 8 and not set(TRAIN_BOOKS) & {105, 730, 86, 2097}
    with pytest.raises(ValueError, match="split"):
        course_documents("test")


@needs_data
def test_course_documents():
    heldout = course_documents("heldout")
    train = course_documents("train", max_documents=70)
    assert len(train) == 70 and len(heldout) > 50
    assert all(doc and all(isinstance(s, str) and s for s in doc) for doc in train + heldout)
    train_text = {s for doc in course_documents("train") for s in doc}
    held_text = [s for doc in heldout for s in doc if len(s) > 80]
    overlap = sum(s in train_text for s in held_text) / len(held_text)
    assert overlap < 0.01, overlap


# --- load_pretrained and the command line ---------------------------------------------------------

def _tiny_checkpoint(directory: Path, vocab_size: int = 40) -> None:
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"t{i}" for i in range(vocab_size - 5)]
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "vocab.txt").write_text("".join(t + "\n" for t in tokens))
    config = BertConfig(vocab_size=vocab_size, d_model=32, n_layers=1, n_heads=4, d_ff=37, max_len=23)
    save_model(BertForPreTraining(config), directory)


def test_load_pretrained_from_a_directory(tmp_path):
    _tiny_checkpoint(tmp_path)
    pretrained = load_pretrained(tmp_path)
    assert isinstance(pretrained.model, BertForPreTraining) and not pretrained.model.training
    assert len(pretrained.tokenizer) == pretrained.config.vocab_size == 40
    assert pretrained.directory == tmp_path


def test_load_pretrained_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="tinybert pretrain"):
        load_pretrained(tmp_path / "nothing")
    _tiny_checkpoint(tmp_path)
    (tmp_path / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n")  # 5
    with pytest.raises(ValueError, match="different runs"):
        load_pretrained(tmp_path)


@pytest.mark.skipif(not (shipped_checkpoint() / "model.safetensors").is_file(), reason="no shipped checkpoint yet")
def test_shipped_checkpoint_loads():
    pretrained = load_pretrained()
    c = pretrained.config
    assert (c.d_model, c.n_layers, c.n_heads, c.d_ff, c.max_len) == (256, 4, 4, 1024, 128)
    assert pretrained.directory == ROOT / "tinybert" / "shipped" / "bert-mini"
    assert (pretrained.directory / "model.safetensors").stat().st_size < 25e6
    metrics = json.loads((pretrained.directory / "metrics.json").read_text())
    assert metrics["eval"] and 0 < metrics["eval"][-1]["mlm_accuracy"] < 1
    assert not any(p.suffix in {".pt", ".bin", ".pkl"} for p in pretrained.directory.iterdir())


def _cli(*args: str, timeout: int = 240) -> subprocess.CompletedProcess:
    env = {**os.environ, "TINYBERT_QUICK": "1"}
    return subprocess.run([sys.executable, "-m", "tinybert", *args], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=ROOT)


def test_cli_help():
    result = _cli("pretrain", "--help")
    assert result.returncode == 0, result.stderr
    for flag in ("--out", "--steps", "--batch-size", "--resume", "--stop-after", "--set"):
        assert flag in result.stdout



def test_cli_arguments(capsys):
    import argparse

    from tinybert.commands.pretrain import add_arguments

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["--out", "o", "--set", "n_layers=2", "--set", "activation=gelu",
                              "--no-dynamic-masking", "--warmup", "0.1"])
    assert dict(args.overrides) == {"n_layers": 2, "activation": "gelu"}
    assert args.dynamic_masking is False and args.warmup_fraction == 0.1
    assert (args.steps, args.batch_size, args.vocab_size, args.resume) == (1000, 32, 8192, False)
    with pytest.raises(SystemExit):
        parser.parse_args(["--out", "o", "--set", "oops"])
    assert "KEY=VALUE" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parser.parse_args([])                      # --out is required


@needs_data
def test_cli_tiny_end_to_end(tmp_path):
    out = tmp_path / "run"
    args = ["pretrain", "--out", str(out), "--steps", "4", "--batch-size", "4", "--vocab-size", "300",
            "--vocab-min-count", "2", "--max-documents", "6", "--eval-every", "2", "--eval-batches", "1",
            "--set", "d_model=32", "--set", "n_layers=1", "--set", "n_heads=4", "--set", "d_ff=37",
            "--threads", "1", "--device", "cpu"]
    result = _cli(*args)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    for name in ("vocab.txt", "model.safetensors", "config.json", "metrics.json", "loss_curves.png",
                 "training_state/training_state.json"):
        assert (out / name).is_file(), name
    metrics = json.loads((out / "metrics.json").read_text())
    assert [r["step"] for r in metrics["eval"]] == [2, 4]
    pretrained = load_pretrained(out)
    assert pretrained.config.d_model == 32 and len(pretrained.tokenizer) == pretrained.config.vocab_size
    assert "held-out mlm_accuracy" in result.stdout
