"""Hand-written (not generated): the check for chapter 14's sentence-order exercise,
``check_sop_pairs`` (ALBERT's sentence-order prediction pairs), with the random
documents it is checked on.

Imported from ``tinybert.exercises.ch14``, the module the chapter's check cells use.
"""

from __future__ import annotations

import torch

from tinybert.exercises._assertions import answers_required
from tinybert.exercises._assertions import checked_pairs, origin

__all__ = ["check_sop_pairs"]


# --- ex-albert-sop-pairs --------------------------------------------------------------


def _documents(n: int, seed: int) -> list[list[list[int]]]:
    """Documents whose segment j of document d is [1000 d + j, d] (the id says where it
    came from)."""
    g = torch.Generator().manual_seed(seed)
    sizes = torch.randint(0, 9, (n,), generator=g).tolist()
    return [[[1000 * d + j, d] for j in range(size)] for d, size in enumerate(sizes)]


def _key(pairs) -> list:
    return [(tuple(a), tuple(b), label) for a, b, label in pairs]


@answers_required
def check_sop_pairs(sop_pairs) -> None:
    """Check ``sop_pairs(documents, generator) -> [(a, b, label), ...]``."""
    docs = _documents(600, seed=0)
    pairs = checked_pairs(
        sop_pairs,
        docs,
        "two consecutive segments of a document",
        "0 (in order) or 1 (swapped)",
    )
    neighbours = []
    for a, b, label in pairs:
        (da, ia), (db, ib) = origin(a), origin(b)
        assert da == db, (
            f"both segments of a pair must come from the same document, got {a} and {b}"
        )
        if label == 0:
            assert ib == ia + 1, (
                f"an in-order pair must be (segment i, segment i+1), got {a} -> {b} "
                f"with label 0"
            )
            neighbours.append((da, ia))
        else:
            assert ia == ib + 1, (
                f"a swapped pair must be (segment i+1, segment i), got {a} -> {b} "
                f"with label 1"
            )
            neighbours.append((db, ib))
    assert sorted(neighbours) == sorted(
        (d, i) for d, s in enumerate(docs) for i in range(len(s) - 1)
    ), "every two consecutive segments must make exactly one pair"
    share = sum(label for _, _, label in pairs) / len(pairs)
    assert abs(share - 0.5) < 0.04, (
        f"expected about 50% swapped pairs, got {share:.1%} of {len(pairs)}"
    )
    again = sop_pairs(docs, torch.Generator().manual_seed(0))
    assert _key(again) == _key(pairs), (
        "the same generator seed must give the same pairs"
    )
    other = sop_pairs(docs, torch.Generator().manual_seed(1))
    assert _key(other) != _key(pairs), (
        "a different generator seed should give different pairs"
    )
    single = [[[1], [2], [3]]]  # one document is enough for SOP
    got = sop_pairs(single, torch.Generator().manual_seed(2))
    assert sorted(_key(got)) in (
        [((1,), (2,), 0), ((2,), (3,), 0)],
        [((1,), (2,), 0), ((3,), (2,), 1)],
        [((2,), (1,), 1), ((2,), (3,), 0)],
        [((2,), (1,), 1), ((3,), (2,), 1)],
    ), (
        f"one document [[1], [2], [3]] must give the pairs of (1, 2) and of (2, "
        f"3), got {got}"
    )
    for bad in ([], [[[1]], [], [[2]]]):
        try:
            sop_pairs(bad, torch.Generator())
        except ValueError:
            continue
        raise AssertionError(
            f"expected ValueError when no document has two segments: {bad}"
        )
    print(
        "✓ sop_pairs gives one pair per two neighbouring segments, in order or "
        "swapped about half of the time, reproducibly"
    )
