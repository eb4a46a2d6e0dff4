"""Hand-written (not generated): the checks for chapter 09's exercises
(pretraining BERT).

Each ``check_*`` function calls the student's code on several inputs, including edge
cases, raises ``AssertionError`` saying what was expected and what came back, and prints
a line starting with ✓ when everything passes. The special tokens sit at unusual ids
(not 0 or 103), so an answer that hard-codes BERT's ids fails.
"""

from __future__ import annotations

import torch

from tinybert.exercises._assertions import answers_required
from tinybert.exercises._assertions import checked_pairs, origin
from tinybert.training.inputs import SpecialTokens
from tinybert.training.optim import linear_warmup_decay

__all__ = ["check_bert_mask", "check_nsp_pairs", "check_warmup_decay_lr"]

_SPECIAL = SpecialTokens(pad=7, unk=20, cls=3, sep=50, mask=98, vocab_size=99)


def _batch(B: int, T: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    ordinary = torch.tensor(
        [i for i in range(_SPECIAL.vocab_size) if i not in _SPECIAL.ids]
    )
    ids = ordinary[torch.randint(len(ordinary), (B, T), generator=g)]
    ids[:, 0] = _SPECIAL.cls
    ids[:, T // 2] = ids[:, -1] = _SPECIAL.sep
    ids[::3, -4:] = _SPECIAL.pad
    ids[1, 2] = _SPECIAL.unk
    return ids


# --- ex-pretrain-mask -----------------------------------------------------------------


@answers_required
def check_bert_mask(bert_mask) -> None:
    """Check ``bert_mask(input_ids, special, generator) -> (corrupted, labels)``."""
    ids = _batch(300, 64, seed=0)
    original = ids.clone()
    got = bert_mask(ids, _SPECIAL, torch.Generator().manual_seed(0))
    assert isinstance(got, tuple) and len(got) == 2, (
        f"expected a tuple (corrupted, labels), got {type(got)}"
    )
    corrupted, labels = got
    assert torch.equal(ids, original), (
        "bert_mask modified input_ids in place; work on new tensors"
    )
    for name, t in (("corrupted", corrupted), ("labels", labels)):
        assert isinstance(t, torch.Tensor) and t.shape == ids.shape, (
            f"{name}: expected a tensor of shape {tuple(ids.shape)}, got "
            f"{getattr(t, 'shape', t)}"
        )
        assert not t.is_floating_point(), f"{name}: expected integer ids, got {t.dtype}"
    special = torch.isin(ids, torch.tensor(_SPECIAL.ids))
    chosen = labels != -100
    assert not chosen[special].any(), (
        f"special tokens ([CLS], [SEP], [PAD], [UNK], [MASK]) must never be chosen; "
        f"got labels at {chosen[special].sum().item()} of them"
    )
    assert torch.equal(labels[chosen], ids[chosen]), (
        "labels must hold the original token at chosen positions"
    )
    assert torch.equal(corrupted[~chosen], ids[~chosen]), (
        "tokens that were not chosen must stay unchanged"
    )
    rate = chosen.sum().item() / (~special).sum().item()
    assert abs(rate - 0.15) < 0.01, (
        f"expected 15% of the ordinary tokens to be chosen, got {rate:.1%}"
    )
    n = chosen.sum().item()
    as_mask = (corrupted[chosen] == _SPECIAL.mask).sum().item() / n
    same = (corrupted[chosen] == ids[chosen]).sum().item() / n
    other = 1 - as_mask - same
    assert abs(as_mask - 0.8) < 0.025, (
        f"expected 80% of the chosen tokens to become [MASK], got {as_mask:.1%}"
    )
    assert abs(other - 0.1) < 0.02, (
        f"expected about 10% of the chosen tokens to become random tokens, "
        f"got {other:.1%}"
    )
    assert abs(same - 0.1) < 0.02, (
        f"expected about 10% of the chosen tokens to stay unchanged, got {same:.1%}"
    )
    replaced = chosen & (corrupted != _SPECIAL.mask) & (corrupted != ids)
    assert not torch.isin(corrupted[replaced], torch.tensor(_SPECIAL.ids)).any(), (
        "a random replacement must be an ordinary token, never a special one"
    )
    assert (corrupted < _SPECIAL.vocab_size).all() and (corrupted >= 0).all(), (
        "ids outside the vocabulary"
    )
    small = _batch(5, 9, seed=1)
    a = bert_mask(small, _SPECIAL, torch.Generator().manual_seed(3))
    b = bert_mask(small, _SPECIAL, torch.Generator().manual_seed(3))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]), (
        "the same generator seed must give the same masks: draw every random number "
        "from `generator`"
    )
    c = bert_mask(ids, _SPECIAL, torch.Generator().manual_seed(1))
    assert not torch.equal(c[1], labels), (
        "a different generator seed should give different masks"
    )
    only_special = torch.tensor(
        [[_SPECIAL.cls, _SPECIAL.sep, _SPECIAL.pad, _SPECIAL.pad]]
    )
    corrupted, labels = bert_mask(
        only_special, _SPECIAL, torch.Generator().manual_seed(0)
    )
    assert (labels == -100).all() and torch.equal(corrupted, only_special), (
        "a row of special tokens only must come back unchanged, with no labels"
    )
    print(
        "✓ bert_mask chooses 15% of the ordinary tokens, masks 80% / randomises 10% "
        "/ keeps 10%, labels only the chosen positions, and is reproducible from "
        "its generator"
    )


# --- ex-pretrain-nsp ------------------------------------------------------------------


def _documents(n_docs: int, seed: int) -> list[list[list[int]]]:
    """Segment j of document d starts with the id 1000 d + j, so every pair can be
    traced back."""
    g = torch.Generator().manual_seed(seed)
    sizes = torch.randint(0, 7, (n_docs,), generator=g).tolist()
    return [[[1000 * d + j, 5, 6] for j in range(k)] for d, k in enumerate(sizes)]


@answers_required
def check_nsp_pairs(nsp_pairs) -> None:
    """Check ``nsp_pairs(documents, generator) -> [(a, b, label), ...]``."""
    docs = _documents(500, seed=0)
    pairs = checked_pairs(
        nsp_pairs, docs, "segment that has a successor", "0 (IsNext) or 1 (NotNext)"
    )
    firsts = []
    for a, b, label in pairs:
        (da, ia), (db, ib) = origin(a), origin(b)
        assert ia + 1 < len(docs[da]), f"segment A {a} has no successor in its document"
        if label == 0:
            assert (db, ib) == (da, ia + 1), (
                f"an IsNext pair must be (segment i, segment i+1), got {a} -> {b}"
            )
        else:
            assert db != da, (
                f"a NotNext segment B must come from another document, got {a} -> {b}"
            )
        firsts.append((da, ia))
    assert sorted(firsts) == sorted(
        (d, i) for d, s in enumerate(docs) for i in range(len(s) - 1)
    ), "every segment with a successor must be segment A of exactly one pair"
    share = sum(label == 0 for _, _, label in pairs) / len(pairs)
    assert abs(share - 0.5) < 0.04, f"expected about 50% IsNext pairs, got {share:.1%}"
    random_docs = {origin(b)[0] for _, b, label in pairs if label == 1}
    assert len(random_docs) > 100, (
        "random segments should come from many different documents"
    )
    again = nsp_pairs(docs, torch.Generator().manual_seed(0))
    assert [tuple(map(tuple, p[:2])) + (p[2],) for p in again] == [
        tuple(map(tuple, p[:2])) + (p[2],) for p in pairs
    ], "the same generator seed must give the same pairs"
    two = [[[1, 0], [2, 0]], [], [[3000, 0]]]
    got = nsp_pairs(two, torch.Generator().manual_seed(1))
    assert len(got) == 1 and got[0][1] in ([2, 0], [3000, 0]), (
        f"with documents [[1],[2]], [] and [[3000]], expected one pair whose B is [2] "
        f"or [3000], got {got}"
    )
    for bad in ([[[1], [2], [3]]], [[[1], [2]], []]):
        try:
            nsp_pairs(bad, torch.Generator())
        except ValueError:
            continue
        raise AssertionError(
            f"expected ValueError for fewer than two non-empty documents: {bad}"
        )
    print(
        "✓ nsp_pairs gives one pair per segment with a successor, half of them true "
        "neighbours and half random segments of other documents, reproducibly"
    )


# --- ex-pretrain-schedule -------------------------------------------------------------


@answers_required
def check_warmup_decay_lr(warmup_decay_lr) -> None:
    """Check ``warmup_decay_lr(step, peak, warmup_steps, total_steps)`` against
    linear_warmup_decay."""
    for peak, warmup, total in [
        (1.0, 4, 10),
        (1e-3, 0, 7),
        (2.0, 5, 5),
        (5e-4, 1, 3),
        (1e-4, 100, 1000),
    ]:
        optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=peak)
        scheduler = linear_warmup_decay(optimizer, warmup, total)
        for step in range(total + 3):
            expected = optimizer.param_groups[0]["lr"]
            got = warmup_decay_lr(step, peak, warmup, total)
            assert abs(float(got) - expected) <= 1e-12 + 1e-9 * peak, (
                f"warmup_decay_lr(step={step}, peak={peak}, warmup_steps={warmup}, "
                f"total_steps={total}): expected {expected}, got {got}"
            )
            optimizer.step()
            scheduler.step()
    print(
        "✓ warmup_decay_lr rises linearly to the peak, falls linearly to 0 at "
        "total_steps, and stays at 0"
    )
