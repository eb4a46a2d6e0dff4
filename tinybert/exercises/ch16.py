"""Hand-written (not generated): the checks for chapter 16's exercises (ELECTRA).

Each ``check_*`` function calls the student's code on several inputs, including odd
sizes and edge cases, raises ``AssertionError`` saying what was expected and what came
back, and prints a line starting with ✓ when everything passes.
"""

from __future__ import annotations

import torch

from tinybert.exercises._assertions import answers_required
from tinybert.pretraining.electra import replaced_token_inputs

__all__ = ["check_discriminator_inputs", "check_gumbel_max"]


# --- ex-electra-inputs ----------------------------------------------------------------


def _masked_batch(seed: int, B: int, T: int, V: int, p: float):
    """A masked batch (ids with [MASK] = 4 at the chosen positions, labels) and
    samples for the chosen positions, some equal to the original."""
    g = torch.Generator().manual_seed(seed)
    text = torch.randint(5, V, (B, T), generator=g)
    chosen = torch.rand(B, T, generator=g) < p
    labels = torch.where(chosen, text, -100)
    ids = torch.where(chosen, 4, text)
    sampled = torch.randint(5, V, (int(chosen.sum()),), generator=g)
    keep = torch.rand(len(sampled), generator=g) < 0.4  # samples that equal the text
    sampled[keep] = text[chosen][keep]
    return ids, labels, sampled


@answers_required
def check_discriminator_inputs(discriminator_inputs) -> None:
    """Check ``discriminator_inputs(input_ids, mlm_labels, sampled)`` against the
    course's replaced_token_inputs, on batches with and without masked positions."""
    cases = [
        (0, 3, 7, 11, 0.3),
        (1, 13, 5, 99, 0.5),
        (2, 1, 1, 6, 1.0),
        (3, 2, 9, 50, 0.0),
        (4, 4, 6, 8, 0.9),
    ]
    for seed, B, T, V, p in cases:
        ids, labels, sampled = _masked_batch(seed, B, T, V, p)
        saved = (ids.clone(), labels.clone(), sampled.clone())
        got = discriminator_inputs(ids, labels, sampled)
        where = f"a ({B}, {T}) batch with {len(sampled)} masked positions (seed {seed})"
        assert all(torch.equal(a, b) for a, b in zip((ids, labels, sampled), saved)), (
            f"discriminator_inputs on {where}: the inputs were modified"
        )
        assert isinstance(got, tuple) and len(got) == 2, (
            f"discriminator_inputs must return a tuple (input, labels), got "
            f"{type(got).__name__}"
        )
        expected = replaced_token_inputs(ids, labels, sampled)
        for name, g, e in zip(("input", "labels"), got, expected):
            assert isinstance(g, torch.Tensor) and not g.is_floating_point(), (
                f"discriminator_inputs on {where}: the {name} must be an integer "
                f"tensor, got {g!r:.80}"
            )
            assert tuple(g.shape) == (B, T), (
                f"discriminator_inputs on {where}: the {name} must have shape "
                f"{(B, T)}, got {tuple(g.shape)}"
            )
            if not torch.equal(g.long(), e):
                raise AssertionError(
                    f"discriminator_inputs on {where}: wrong {name}\n"
                    f"  input_ids\n{ids}\n  mlm_labels\n{labels}\n  sampled {sampled}\n"
                    f"  expected {name}\n{e}\n  got\n{g}"
                )
    print(
        "✓ discriminator_inputs: samples at the masked positions, the text elsewhere; "
        "a sample equal to the original is labelled original"
    )


# --- ex-electra-gumbel ----------------------------------------------------------------


@answers_required
def check_gumbel_max(gumbel_max) -> None:
    """Check ``gumbel_max(logits, uniforms)`` against the formula, then its
    frequencies against the softmax."""
    g = torch.Generator().manual_seed(0)
    for N, V in ((1, 1), (3, 7), (13, 99)):
        logits = 3 * torch.randn(N, V, generator=g)
        uniforms = torch.rand(N, V, generator=g).clamp(1e-6, 1 - 1e-6)
        got = gumbel_max(logits.clone(), uniforms.clone())
        expected = (logits - torch.log(-torch.log(uniforms))).argmax(dim=-1)
        assert isinstance(got, torch.Tensor) and not got.is_floating_point(), (
            f"gumbel_max must return an integer tensor of indices, got {got!r:.80}"
        )
        assert tuple(got.shape) == (N,), (
            f"gumbel_max on ({N}, {V}) logits: expected shape ({N},), got "
            f"{tuple(got.shape)}"
        )
        if not torch.equal(got.long(), expected):
            raise AssertionError(
                f"gumbel_max on ({N}, {V}) logits: expected the indices {expected}, "
                f"got {got}"
            )
    logits = torch.tensor([1.5, 0.0, -1.0, 0.5])
    n = 40_000
    uniforms = torch.rand(n, 4, generator=g).clamp(1e-7, 1 - 1e-7)
    counts = torch.bincount(
        gumbel_max(logits.expand(n, 4), uniforms).long(), minlength=4
    )
    frequencies, softmax = counts / n, logits.softmax(0)
    assert (frequencies - softmax).abs().max() < 0.01, (
        f"gumbel_max: over {n:,} rows its indices should follow the softmax "
        f"{softmax.tolist()}, got the frequencies {frequencies.tolist()}"
    )
    print("✓ gumbel_max: the formula, and samples that follow the softmax")
