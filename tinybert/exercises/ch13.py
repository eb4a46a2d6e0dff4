"""Hand-written (not generated): the checks for chapter 13's exercises (DistilBERT).

Each ``check_*`` function calls the student's code on several inputs, including odd
sizes and edge cases, raises ``AssertionError`` saying what was expected and what came
back, and prints a line starting with ✓ when everything passes.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from tinybert.exercises._assertions import answers_required
from tinybert.exercises._assertions import assert_close as _assert_close

__all__ = ["check_spread_layers", "check_soft_cross_entropy"]


# --- ex-distil-spread -----------------------------------------------------------------


@answers_required
def check_spread_layers(spread_layers) -> None:
    """Check ``spread_layers(n_teacher, n_student) -> list of layer indices``."""
    known = {
        (12, 6): [0, 2, 4, 7, 9, 11],  # the released DistilBERT script
        (4, 2): [0, 3],
        (12, 12): list(range(12)),
        (2, 2): [0, 1],
        (24, 6): [0, 5, 9, 14, 18, 23],
        (4, 3): [0, 2, 3],
        (6, 4): [0, 2, 3, 5],
        (5, 3): [0, 2, 4],
    }
    for (n_teacher, n_student), expected in known.items():
        got = spread_layers(n_teacher, n_student)
        assert list(got) == expected, (
            f"spread_layers({n_teacher}, {n_student}): expected {expected}, got {got}"
            + (
                " (round halves up: floor(x + 0.5))"
                if (n_teacher, n_student) in [(4, 3), (6, 4)]
                else ""
            )
        )
    for n_teacher in range(2, 30):
        for n_student in range(2, n_teacher + 1):
            got = list(spread_layers(n_teacher, n_student))
            assert len(got) == n_student and got[0] == 0 and got[-1] == n_teacher - 1, (
                f"spread_layers({n_teacher}, {n_student}): expected {n_student} "
                f"indices from 0 to {n_teacher - 1}, got {got}"
            )
            assert all(a < b for a, b in zip(got, got[1:])), (
                f"spread_layers({n_teacher}, {n_student}): indices must increase "
                f"strictly, got {got}"
            )
    for bad in [(12, 1), (12, 13), (3, 0)]:
        try:
            spread_layers(*bad)
        except ValueError:
            continue
        raise AssertionError(
            f"spread_layers{bad}: expected a ValueError (need 2 <= n_student "
            f"<= n_teacher)"
        )
    print(
        "✓ spread_layers spreads the layers evenly (12 -> 6 gives 0, 2, 4, 7, 9, 11) "
        "and rejects bad sizes"
    )


# --- ex-distil-soft-ce ----------------------------------------------------------------


@answers_required
def check_soft_cross_entropy(soft_cross_entropy) -> None:
    """Check ``soft_cross_entropy(student_logits, teacher_logits, temperature)`` (T² ·
    soft cross-entropy)."""
    g = torch.Generator().manual_seed(1201)
    for n, v, T, scale in [
        (13, 7, 2.0, 1.0),
        (1, 5, 1.0, 3.0),
        (6, 37, 4.0, 10.0),
        (9, 2, 0.5, 1.0),
        (4, 99, 8.0, 5.0),
    ]:
        student = (scale * torch.randn(n, v, generator=g)).requires_grad_(True)
        teacher = (scale * torch.randn(n, v, generator=g)).requires_grad_(True)
        got = soft_cross_entropy(student, teacher, T)
        p_teacher = F.softmax(teacher.detach() / T, dim=-1)
        entropy = (
            -(p_teacher * F.log_softmax(teacher.detach() / T, dim=-1)).sum(-1).mean()
        )
        kl = (
            F.kl_div(
                F.log_softmax(student / T, -1),
                F.log_softmax(teacher.detach() / T, -1),
                reduction="batchmean",
                log_target=True,
            )
            * T**2
        )
        where = f"logits of shape ({n}, {v}) at T={T}"
        _assert_close(
            f"soft_cross_entropy on {where} (expected T² KL + T² H(teacher))",
            got.detach(),
            (kl + T**2 * entropy).detach(),
            atol=1e-4,
            rtol=1e-4,
        )
        assert got.dim() == 0, (
            f"soft_cross_entropy on {where}: expected a scalar, got shape "
            f"{tuple(got.shape)}"
        )
        got.backward()
        assert teacher.grad is None or torch.count_nonzero(teacher.grad) == 0, (
            f"soft_cross_entropy on {where}: no gradient may reach the teacher's "
            f"logits (detach them)"
        )
        (expected_grad,) = torch.autograd.grad(kl, student)
        _assert_close(
            f"gradient of soft_cross_entropy w.r.t. the student's logits ({where})",
            student.grad,
            expected_grad,
            atol=1e-5,
            rtol=1e-4,
        )
    same = torch.randn(3, 11, generator=g)
    _assert_close(
        "soft_cross_entropy of identical uniform logits (T² log V)",
        soft_cross_entropy(torch.zeros(3, 11), torch.zeros(3, 11), 3.0).detach(),
        torch.tensor(9.0 * torch.log(torch.tensor(11.0)).item()),
        atol=1e-4,
    )
    big = soft_cross_entropy(same * 1000, same * 1000, 1.0)
    assert torch.isfinite(big), (
        "soft_cross_entropy must stay finite for logits of size 1000 (use log_softmax)"
    )
    print(
        "✓ soft_cross_entropy = T² (KL + teacher entropy), with the KL term's gradient "
        "and none for the teacher"
    )
