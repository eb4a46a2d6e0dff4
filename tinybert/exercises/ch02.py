"""Hand-written (not generated): the checks for chapter 02's exercises (words as
vectors, recurrence).

Each ``check_*`` function calls the student's code on several inputs, including odd
sizes and edge cases, raises ``AssertionError`` saying what was expected and what came
back, and prints a line starting with ✓ when everything passes. This module holds the
word-vector checks; the recurrence check, ``check_gru_cell``, lives in
``tinybert.exercises.ch02_recurrence`` and is re-exported here, the module the chapter's
check cells import from.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from tinybert.exercises._assertions import answers_required
from tinybert.exercises._assertions import assert_close as _assert_close
from tinybert.exercises.ch02_recurrence import check_gru_cell

__all__ = ["check_nearest_neighbours", "check_analogy", "check_gru_cell"]


def _assert_ids(name: str, got, expected) -> None:
    """Assert that ``got`` is an integer tensor equal to ``expected``."""
    assert isinstance(got, torch.Tensor), (
        f"{name}: expected a torch.Tensor, got {type(got).__name__}"
    )
    assert got.dtype == torch.long, (
        f"{name}: expected ids of dtype torch.long, got {got.dtype}"
    )
    assert got.shape == expected.shape, (
        f"{name}: expected shape {tuple(expected.shape)}, got {tuple(got.shape)}"
    )
    if not torch.equal(got, expected):
        raise AssertionError(
            f"{name}: wrong ids\n  expected {expected.tolist()}\n"
            f"  got      {got.tolist()}"
        )


# --- ex-wv-nearest --------------------------------------------------------------------


def _reference_neighbours(vectors, queries, k):
    unit = F.normalize(vectors, dim=1)
    scores = unit[queries] @ unit.T
    scores[torch.arange(len(queries)), queries] = -torch.inf
    top = scores.topk(k, dim=1)
    return top.indices, top.values


@answers_required
def check_nearest_neighbours(nearest_neighbours) -> None:
    """Check ``nearest_neighbours(vectors (V, E), queries (Q,), k) -> (ids (Q, k),
    cosines (Q, k))``."""
    g = torch.Generator().manual_seed(201)
    cases = []
    for V, E, Q, k in [(37, 5, 13, 4), (11, 3, 1, 1), (9, 7, 9, 8), (50, 16, 6, 10)]:
        # varied lengths
        vectors = (
            torch.randn(V, E, generator=g) * torch.rand(V, 1, generator=g).add(0.1) * 5
        )
        queries = torch.randint(0, V, (Q,), generator=g)
        cases.append((f"V={V}, E={E}, {Q} queries, k={k}", vectors, queries, k))
    # A repeated query, and the query word given twice in a row.
    cases.append(("a repeated query id", cases[0][1], torch.tensor([3, 3, 0]), 5))
    for description, vectors, queries, k in cases:
        expected_ids, expected_sims = _reference_neighbours(vectors, queries, k)
        got = nearest_neighbours(vectors.clone(), queries.clone(), k)
        assert isinstance(got, tuple) and len(got) == 2, (
            f"nearest_neighbours on {description}: expected a tuple (ids, "
            f"similarities), got {type(got).__name__}"
        )
        _assert_ids(f"nearest_neighbours ids on {description}", got[0], expected_ids)
        _assert_close(
            f"nearest_neighbours similarities on {description}",
            got[1],
            expected_sims,
            atol=1e-5,
        )

    # Cosine, not the dot product: a long vector at a wide angle must lose to a short
    # aligned one.
    vectors = torch.tensor([[1.0, 0.0], [0.1, 0.01], [10.0, 10.0], [-1.0, 0.5]])
    ids, sims = nearest_neighbours(vectors, torch.tensor([0]), 1)
    assert ids.tolist() == [[1]], (
        f"nearest_neighbours must rank by cosine similarity, not by dot product: for "
        f"the query [1, 0], the neighbour [0.1, 0.01] (cosine 0.995) beats [10, 10] "
        f"(cosine 0.707); got id {ids.tolist()}"
    )
    # The query word itself never appears, even when another word has an
    # identical direction.
    vectors = torch.tensor([[1.0, 0.0], [2.0, 0.0], [0.0, 1.0]])
    ids, sims = nearest_neighbours(vectors, torch.tensor([0, 1]), 2)
    assert ids.tolist() == [[1, 2], [0, 2]], (
        f"nearest_neighbours must leave out the query word itself: expected [[1, 2], "
        f"[0, 2]], got {ids.tolist()}"
    )
    _assert_close(
        "cosines of parallel and orthogonal vectors",
        sims,
        torch.tensor([[1.0, 0.0], [1.0, 0.0]]),
    )

    for bad_k in (0, 4):
        try:
            result = nearest_neighbours(
                torch.randn(4, 3, generator=g), torch.tensor([0]), bad_k
            )
        except ValueError:
            continue
        raise AssertionError(
            f"nearest_neighbours with V=4 and k={bad_k}: expected a ValueError, "
            f"got {result!r}"
        )
    print(
        f"✓ nearest_neighbours agrees with the reference on {len(cases)} random "
        f"cases, ranks by cosine, leaves out the query word and rejects k "
        f"outside 1..V-1"
    )


# --- ex-wv-analogy --------------------------------------------------------------------


def _reference_analogy(vectors, a, b, c, k):
    unit = F.normalize(vectors, dim=1)
    scores = F.normalize(unit[b] - unit[a] + unit[c], dim=1) @ unit.T
    scores.scatter_(1, torch.stack([a, b, c], dim=1), -torch.inf)
    return scores.topk(k, dim=1).indices


@answers_required
def check_analogy(analogy) -> None:
    """Check ``analogy(vectors (V, E), a (Q,), b (Q,), c (Q,), k) -> ids (Q, k)``."""
    # A hand-made world: a "royal" and a "gender" axis, plus noise axes. man:king ::
    # woman:queen.
    words = ["man", "woman", "king", "queen", "apple", "pear", "river"]
    base = {
        "man": (0, 0),
        "woman": (0, 1),
        "king": (1, 0),
        "queen": (1, 1),
        "apple": (0, 0),
        "pear": (0, 0),
        "river": (0, 0),
    }
    g = torch.Generator().manual_seed(202)
    vectors = torch.zeros(len(words), 5)
    for i, w in enumerate(words):
        vectors[i, 0], vectors[i, 1] = base[w]
        vectors[i, 2:] = 0.3 * torch.randn(3, generator=g)
    # keep every vector away from the origin
    vectors[:, 0] += 1.0
    # distractors along other axes
    for i, fruit in enumerate(["apple", "pear", "river"]):
        vectors[words.index(fruit)] = torch.eye(5)[2 + i]
    idx = {w: torch.tensor([i]) for i, w in enumerate(words)}
    got = analogy(vectors.clone(), idx["man"], idx["king"], idx["woman"], 1)
    _assert_ids(
        "analogy(man : king :: woman : ?) in a hand-made space (the answer is "
        "queen, id 3)",
        got,
        torch.tensor([[words.index("queen")]]),
    )

    # Random spaces with several questions at once, vectors of very different lengths.
    for V, E, Q, k in [(41, 6, 13, 3), (12, 4, 1, 1), (30, 9, 7, 5)]:
        vectors = (
            torch.randn(V, E, generator=g)
            * torch.rand(V, 1, generator=g).add(0.05)
            * 10
        )
        a, b, c = (torch.randint(0, V, (Q,), generator=g) for _ in range(3))
        expected = _reference_analogy(vectors, a, b, c, k)
        got = analogy(vectors.clone(), a.clone(), b.clone(), c.clone(), k)
        _assert_ids(f"analogy on V={V}, E={E}, {Q} questions, k={k}", got, expected)

    # Without the exclusion the answer would be b itself: b - a + c with c == a
    # is exactly b.
    vectors = torch.randn(10, 4, generator=g)
    got = analogy(
        vectors.clone(), torch.tensor([2]), torch.tensor([5]), torch.tensor([2]), 3
    )
    assert isinstance(got, torch.Tensor) and got.shape == (1, 3), (
        f"analogy with k=3 and one question: expected ids of shape (1, 3), got "
        f"{getattr(got, 'shape', got)}"
    )
    assert not set(got.flatten().tolist()) & {2, 5}, (
        f"analogy must leave out the query words a=2, b=5, c=2; got {got.tolist()}"
    )

    # Unit-normalising first matters: scaling a word vector must not change any answer.
    vectors = torch.randn(25, 6, generator=g)
    scaled = vectors * torch.rand(25, 1, generator=g).add(0.01) * 100
    a, b, c = (torch.randint(0, 25, (9,), generator=g) for _ in range(3))
    _assert_ids(
        "analogy on rescaled vectors (answers must depend on directions only)",
        analogy(scaled, a, b, c, 2),
        _reference_analogy(vectors, a, b, c, 2),
    )
    print(
        "✓ analogy finds queen in the hand-made space, agrees with the reference on "
        "random spaces, leaves out the query words and uses directions only"
    )
