"""Hand-written module (not generated from a chapter): quick mode, device choice
and seeding.

Every chapter starts with the same three questions: how much compute may I spend, on
which device, and how do I make the run reproducible? The answers live here so that each
chapter asks them in one line.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import random
import sys

import numpy as np
import torch
from tqdm.std import tqdm

__all__ = [
    "is_quick",
    "pick",
    "get_device",
    "seed_everything",
    "progress",
    "fix_malloc_threshold",
]

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"", "0", "false", "no", "off"}


def is_quick() -> bool:
    """True when ``TINYBERT_QUICK`` asks for quick mode (tests and CI set
    ``TINYBERT_QUICK=1``)."""
    value = os.environ.get("TINYBERT_QUICK", "").strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ValueError(
        f"TINYBERT_QUICK must be one of 1/0/true/false/yes/no/on/off, got {value!r}"
    )


def pick(*, quick, full, gpu=None):
    """Return ``quick`` in quick mode and ``full`` otherwise:
    ``steps = pick(quick=50, full=3000)``.

    ``gpu``, where a chapter gives one, replaces ``full`` in normal mode when the
    chapters' device (get_device()) is a CUDA GPU: a bigger budget that a GPU runs in
    the time the CPU needs for ``full``. The chapter's page states it.
    """
    if is_quick():
        return quick
    if gpu is not None and get_device().type == "cuda":
        return gpu
    return full


def get_device(prefer: str | None = None) -> torch.device:
    """Choose the device: ``prefer``, else ``$TINYBERT_DEVICE``, else cuda → mps → cpu.

    A device that is asked for but not available is an error, not a silent fallback.
    """
    wanted = prefer or os.environ.get("TINYBERT_DEVICE") or None
    if wanted is None:
        if torch.cuda.is_available():
            return torch.device("cuda")
        if (
            getattr(torch.backends, "mps", None) is not None
            and torch.backends.mps.is_available()
        ):
            return torch.device("mps")
        return torch.device("cpu")
    device = torch.device(wanted)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(
            f"device {wanted!r} was asked for, but CUDA is not "
            f"available here; use 'cpu' or unset TINYBERT_DEVICE"
        )
    if device.type == "mps" and not torch.backends.mps.is_available():
        raise RuntimeError(
            f"device {wanted!r} was asked for, but MPS is not available "
            f"here; use 'cpu' or unset TINYBERT_DEVICE"
        )
    return device


def seed_everything(seed: int = 0) -> torch.Generator:
    """Seed Python, NumPy and torch (all devices); return a torch.Generator seeded
    the same way.

    Passing the returned generator to samplers and ``torch.randn(..., generator=g)``
    keeps a run reproducible even when other code draws random numbers in between.
    """
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**64:
        raise ValueError(
            f"seed: expected a non-negative int below 2**64 (what torch takes), "
            f"got {seed!r}"
        )
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed)


def progress(
    iterable=None,
    *,
    total: int | None = None,
    desc: str | None = None,
    updates: int = 10,
) -> tqdm:
    """A text progress bar that also reads well in the executed book.

    In a live notebook or terminal it redraws in place. In the website the outputs are
    frozen and every redraw becomes a line, so the bar redraws at most ``updates``
    times. It writes plain text to stdout (no notebook widgets: those need JavaScript
    from a CDN).
    """
    if total is None and iterable is not None and hasattr(iterable, "__len__"):
        total = len(iterable)
    every = max(1, (total or 0) // max(1, updates))
    return tqdm(
        iterable,
        total=total,
        desc=desc,
        file=sys.stdout,
        ascii=True,
        ncols=80,
        mininterval=0.0,
        miniters=every,
        # else tqdm's monitor thread resets miniters to 1 on slow steps
        maxinterval=float("inf"),
    )


_M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter number (malloc.h)


def fix_malloc_threshold(threshold: int = 1 << 20) -> bool:
    """Stop glibc's heap from growing without bound in long training runs; True
    if it applied.

    glibc raises its mmap threshold each time a large block is freed, so that later
    large blocks (activations, logits of a size that changes every batch) come from the
    heap, which then fragments: a pretraining run measured here grew by about 25 MB a
    step until the machine ran out of memory. Fixing the threshold (which also disables
    its adjustment), as ``MALLOC_MMAP_THRESHOLD_`` does, keeps the memory flat.
    Elsewhere than glibc it does nothing.
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return bool(libc.mallopt(_M_MMAP_THRESHOLD, int(threshold)))
    except (OSError, AttributeError):  # not glibc (musl has no mallopt)
        return False
