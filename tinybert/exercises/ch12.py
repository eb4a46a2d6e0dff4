"""Hand-written (not generated): the checks for chapter 12's exercises (RoBERTa).

Each ``check_*`` function calls the student's code on several inputs, including odd
sizes and edge cases, raises ``AssertionError`` saying what was expected and what came
back, and prints a line starting with ✓ when everything passes.
"""

from __future__ import annotations

import random

import torch
from torch import nn

from tinybert.exercises._assertions import answers_required
from tinybert.exercises._assertions import assert_close as _assert_close

__all__ = ["check_pack_doc_sentences", "check_accumulate_gradients"]


# --- ex-roberta-doc-sentences ---------------------------------------------------------


def _reference_doc_sentences(documents, max_tokens):
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


@answers_required
def check_pack_doc_sentences(pack_doc_sentences) -> None:
    """Check ``pack_doc_sentences(documents, max_tokens) -> list of inputs``
    (DOC-SENTENCES)."""
    toy = [
        [[11, 11, 11], [12, 12], [13, 13, 13, 13]],
        [[21, 21, 21, 21, 21]],
        [[31, 31], [32, 32, 32]],
    ]
    cases = [
        ("the toy corpus of the chapter, max_tokens=8", toy, 8),
        ("the toy corpus, max_tokens=4 (sentences longer than 4 are cut)", toy, 4),
        ("one sentence of 7 tokens, max_tokens=3", [[[1, 2, 3, 4, 5, 6, 7]]], 3),
        ("empty documents and empty sentences", [[], [[]], [[5], []], []], 4),
        ("no documents at all", [], 5),
    ]
    rng = random.Random(1101)
    for k in range(12):
        documents = [
            [
                [rng.randrange(10, 99) for _ in range(rng.randrange(0, 11))]
                for _ in range(rng.randrange(0, 7))
            ]
            for _ in range(rng.randrange(1, 8))
        ]
        cases.append(
            (
                f"random corpus {k} ({len(documents)} documents)",
                documents,
                rng.randrange(2, 15),
            )
        )
    for description, documents, max_tokens in cases:
        expected = _reference_doc_sentences(documents, max_tokens)
        got = pack_doc_sentences(documents, max_tokens)
        assert isinstance(got, list), (
            f"pack_doc_sentences on {description}: expected a list, got "
            f"{type(got).__name__}"
        )
        got = [list(x) for x in got]
        too_long = [x for x in got if len(x) > max_tokens]
        assert not too_long, (
            f"pack_doc_sentences on {description}: inputs must have "
            f"at most {max_tokens} tokens, got {too_long[:2]}"
        )
        assert [t for x in got for t in x] == [
            t for d in documents for s in d for t in s
        ], (
            f"pack_doc_sentences on {description}: the inputs, joined, must be the "
            f"corpus in order (no token lost, repeated or added, no "
            f"separator)\n  got {got}"
        )
        assert got == expected, (
            f"pack_doc_sentences on {description} "
            f"(max_tokens={max_tokens}):\n  expected {expected}\n"
            f"  got      {got}\n(is an input crossing a document "
            f"boundary, or not packed greedily?)"
        )
    print(
        "✓ pack_doc_sentences packs greedily within each document, cuts long "
        "sentences, loses nothing"
    )


# --- ex-roberta-accumulation ----------------------------------------------------------


class _Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = nn.Linear(5, 3)
        self.bias_only = nn.Parameter(torch.tensor([0.5, -0.2, 0.1]))

    def forward(self, x):
        return torch.tanh(self.layer(x)) + self.bias_only


def _mean_loss(model, batch):
    return nn.functional.cross_entropy(model(batch["x"]), batch["y"])


def _gradients(model):
    return {
        name: (None if p.grad is None else p.grad.clone())
        for name, p in model.named_parameters()
    }


@answers_required
def check_accumulate_gradients(accumulate_gradients) -> None:
    """Check that ``accumulate_gradients(model, loss_fn, batch, micro_batch_size)``
    leaves the full batch's gradient."""
    g = torch.Generator().manual_seed(1102)
    for n, micro in [(13, 4), (13, 13), (13, 1), (12, 5), (7, 20), (2, 1)]:
        torch.manual_seed(n * 100 + micro)
        model = _Tiny()
        batch = {
            "x": torch.randn(n, 5, generator=g),
            "y": torch.randint(0, 3, (n,), generator=g),
        }
        model.zero_grad()
        _mean_loss(model, batch).backward()
        expected = _gradients(model)
        # stale gradients must not leak in
        for p in model.parameters():
            p.grad = torch.full_like(p, 7.0)
        sizes = []

        def recording_loss(model_, part):
            sizes.append(len(part["y"]))
            assert len(part["x"]) == len(part["y"]), (
                "every tensor of a micro-batch must be sliced the same way"
            )
            return _mean_loss(model_, part)

        accumulate_gradients(model, recording_loss, batch, micro)
        assert sizes and max(sizes) <= micro, (
            f"accumulate_gradients(batch of {n}, micro_batch_size={micro}): loss_fn "
            f"must only see slices of at most {micro} examples, got sizes {sizes}"
        )
        assert sum(sizes) == n, (
            f"accumulate_gradients(batch of {n}, "
            f"micro_batch_size={micro}): every example must be "
            f"used exactly once, got micro-batch sizes {sizes}"
        )
        got = _gradients(model)
        for name, value in expected.items():
            assert got[name] is not None, (
                f"accumulate_gradients: parameter {name} has no gradient"
            )
            _assert_close(
                f"gradient of {name} (batch of {n}, micro-batches of {micro})",
                got[name],
                value,
                atol=1e-6,
            )
    print(
        "✓ accumulate_gradients gives the gradient of the whole batch's mean loss, "
        "uneven last micro-batch included"
    )
