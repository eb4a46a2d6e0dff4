"""Hand-written: ``tinybert doctor`` (``python -m tinybert doctor``): what a student
pastes into a question.

Prints the versions that matter, the device the chapters will use, quick mode, and which
data files are available locally (and where, checksums checked), without downloading
anything. Exit code 1 ("status check: ...") when something the chapters need is missing
or broken, so that a script can stop on it.
"""

from __future__ import annotations

import argparse
import os
import platform
from importlib import metadata


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """doctor takes no options."""


def run(args: argparse.Namespace) -> int:
    return doctor()


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def _local_copy(entry) -> tuple[str | None, str | None]:
    """(where a data file is found without downloading: data dir, then cache, or
    None; the path of a copy whose SHA-256 is not the registry's, or None). A bad copy
    is not found: the chapters would refuse it (data dir) or download it again
    (cache)."""
    from tinybert.data import cache_dir, data_dir, sha256_of

    for root in (data_dir(), cache_dir()):
        if root is not None and (root / entry.relpath).is_file():
            path = root / entry.relpath
            try:
                good = sha256_of(path) == entry.sha256
            except OSError:  # unreadable
                good = False
            return (str(root), None) if good else (None, str(path))
    return None, None


def _data_dir_problem(root) -> str | None:
    """Why the folder named by TINYBERT_DATA_DIR cannot be used, or None when it can."""
    if root is None:
        return None
    if not root.exists():
        return f"TINYBERT_DATA_DIR={root} does not exist"
    if not root.is_dir():
        return f"TINYBERT_DATA_DIR={root} is a file, not a folder"
    if not os.access(root, os.R_OK | os.X_OK):
        return f"TINYBERT_DATA_DIR={root} cannot be read (permissions)"
    return None


def doctor() -> int:
    """Print the report; return 0 when everything the chapters need is in
    place, else 1."""
    import torch

    from tinybert import __version__
    from tinybert.data import REGISTRY, cache_dir, data_dir
    from tinybert.runtime import get_device, is_quick

    problems = []
    print(f"tinybert {__version__} (python -m tinybert doctor)")
    print(f"python   {platform.python_version()} on {platform.platform()}")
    for package in [
        "torch",
        "numpy",
        "matplotlib",
        "einops",
        "jupyter-book",
        "jupytext",
        "transformers",
        "tokenizers",
    ]:
        print(f"{package:12s} {_version(package)}")
    try:
        device = get_device()
    except RuntimeError as error:  # e.g. TINYBERT_DEVICE=cuda on a machine without CUDA
        device, problems = f"error: {error}", problems + ["device"]
    cuda = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no CUDA"
    print(f"device   {device} ({cuda}); torch threads {torch.get_num_threads()}")
    try:
        print(f"quick mode {'on' if is_quick() else 'off'} (TINYBERT_QUICK)")
    except ValueError as error:  # e.g. TINYBERT_QUICK=maybe
        print(f"quick mode error: {error}")
        problems.append("TINYBERT_QUICK")
    print(
        f"data dir {data_dir() or '(TINYBERT_DATA_DIR not set)'}; cache {cache_dir()}"
    )
    unusable = _data_dir_problem(data_dir())
    if unusable is not None:
        print(f"data dir error: {unusable}")
        problems.append("TINYBERT_DATA_DIR")
    copies = {name: _local_copy(entry) for name, entry in REGISTRY.items()}
    local = {name for name, (root, _) in copies.items() if root is not None}
    bad = {name: path for name, (_, path) in copies.items() if path is not None}
    missing = [e for e in REGISTRY.values() if e.name not in local]
    print(
        f"data     {len(local)} of {len(REGISTRY)} registered files found locally, "
        "checksums checked (the others are downloaded, and checked, on first use)"
    )
    for entry in missing:
        where = (
            f"  (corrupt: its SHA-256 is not the registry's: {bad[entry.name]})"
            if entry.name in bad
            else ""
            if entry.offline_copy
            else ("  (download only: not in the offline data folder)")
        )
        print(f"  missing {entry.name:24s} {entry.relpath}{where}")
    root = data_dir()
    if (
        unusable is None
        and root is not None
        and not any(copies[name][0] == str(root) for name in REGISTRY)
    ):
        print(
            f"data dir error: TINYBERT_DATA_DIR={root} holds none of the course's "
            "data files; expected the course's data folder (the one with SOURCES.md)"
        )
    if bad or any(e.offline_copy for e in missing):  # a chapter would stop or download
        problems.append("data")
    print("status   " + ("ok" if not problems else "check: " + ", ".join(problems)))
    return 1 if problems else 0
