"""Hand-written (not generated): the check for chapter 08's attention-probing exercise,
``check_offset_baseline`` (the fixed-offset baseline that a syntax head must beat), with
the random dependency trees it is checked on.

Imported from ``tinybert.exercises.ch08``, the module the chapter's check cells use.
"""

from __future__ import annotations

import torch

from tinybert.exercises._assertions import answers_required

__all__ = ["check_offset_baseline"]


# --- ex-bert-offset-baseline -----------------------------------------------------


def _random_trees(g: torch.Generator, n: int, relations: list[str]):
    """n random trees of 1 to 12 words: a root, and random heads for the others."""
    from tinybert.models.attention_analysis import DependencyTree

    def draw(low: int, high: int) -> int:
        return int(torch.randint(low, high, (1,), generator=g))

    trees = []
    for _ in range(n):
        W = draw(1, 13)
        root = draw(0, W)
        heads, labels = [], []
        for i in range(W):
            if i == root:
                heads.append(-1)
                labels.append("root")
                continue
            near, far = i + draw(-3, 4), draw(0, W)  # mostly nearby heads
            nearby = 0 <= near < W and near != i and torch.rand(1, generator=g) < 0.7
            head = near if nearby else far
            heads.append(root if head == i else head)
            labels.append(relations[draw(0, len(relations))])
        trees.append(DependencyTree([f"w{i}" for i in range(W)], heads, labels))
    return trees


def _expected_offset_baseline(trees, relation, offsets):
    """The chapter's offset_predictions and count_correct; a tie: the first listed."""
    from tinybert.models.attention_analysis import count_correct, offset_predictions

    right, total = torch.zeros(len(offsets), dtype=torch.long), 0
    for tree in trees:
        guesses = offset_predictions(len(tree.words), list(offsets))
        hits, count = count_correct(guesses, tree, [relation])
        right += hits[:, 0]
        total += int(count[0])
    best = int(right.argmax())  # the first of equal maxima
    return offsets[best], int(right[best]) / total


@answers_required
def check_offset_baseline(offset_baseline) -> None:
    """Check ``offset_baseline(trees, relation, offsets)`` on hand and random trees."""
    import copy

    from tinybert.models.attention_analysis import DependencyTree

    words = "Sinan ate the cereal and then he had a stomach ache".split()
    sinan = DependencyTree(
        words,
        heads=[1, -1, 3, 1, 7, 7, 7, 1, 10, 10, 7],
        relations=[
            "nsubj",
            "root",
            "det",
            "obj",
            "cc",
            "advmod",
            "nsubj",
            "conj",
            "det",
            "compound",
            "obj",
        ],
    )
    offsets = (-3, -2, -1, 1, 2, 3)
    cases = [
        ("det", offsets, (1, 0.5), "the -> cereal at +1, a -> ache at +2"),
        ("det", (2, 1), (2, 0.5), "the same tie with +2 listed first"),
        ("obj", offsets, (-3, 0.5), "-3 and -2 find one object each: -3 first"),
        ("obj", (3, 2, 1, -1, -2, -3), (-2, 0.5), "the same tie, -2 first"),
        ("nsubj", offsets, (1, 1.0), "Sinan -> ate and he -> had: both at +1"),
        ("compound", offsets, (1, 1.0), "stomach -> ache"),
        ("root", offsets, (-3, 0.0), "the root's head -1 is no word: never right"),
    ]
    for relation, order, expected, why in cases:
        saved = copy.deepcopy(sinan)
        got = offset_baseline([sinan], relation, order)
        assert isinstance(got, tuple) and len(got) == 2, (
            f"offset_baseline: expected a tuple (offset, accuracy), got {got!r}"
        )
        assert got[0] == expected[0] and abs(got[1] - expected[1]) < 1e-9, (
            f"offset_baseline([the Sinan tree], {relation!r}, offsets={order}): "
            f"expected {expected}, got {got} ({why})"
        )
        assert sinan == saved, "offset_baseline: the trees were modified"
    try:
        offset_baseline([sinan], "iobj", offsets)
    except ValueError:
        pass
    else:
        raise AssertionError(
            "offset_baseline with a relation that no word has: expected a ValueError"
        )

    g = torch.Generator().manual_seed(804)
    for trial in range(30):
        n = int(torch.randint(1, 15, (1,), generator=g))
        trees = _random_trees(g, n, ["nsubj", "obj", "det"])
        order = offsets if trial % 2 == 0 else (2, -1, 3, -3, 1, -2)
        for relation in sorted({r for t in trees for r in t.relations if r != "root"}):
            expected = _expected_offset_baseline(trees, relation, order)
            got = offset_baseline(trees, relation, order)
            assert got[0] == expected[0] and abs(got[1] - expected[1]) < 1e-9, (
                f"offset_baseline on {n} random trees, relation {relation!r}, offsets "
                f"{order}: expected {expected}, got {got}"
            )
    print(
        "✓ offset_baseline finds the best offset and its accuracy (a hand tree, "
        "ties, the root, a missing relation, 30 sets of random trees)"
    )
