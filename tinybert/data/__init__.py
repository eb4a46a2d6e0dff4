"""Hand-written module (not generated from a chapter): the course's data files, by name.

Every dataset in the course is an *original* file whose bytes can be downloaded
unchanged from a pinned upstream URL. This package is the one place that names those
files: where each one lives in the course's data folder, where it came from, its SHA-256
and size, its licence and how to cite it (the book's attribution page is generated from
``REGISTRY``). ``fetch(name)`` returns the path of a verified local copy. It looks in
``$TINYBERT_DATA_DIR`` first, then in the user cache, and only then downloads into the
cache. Files that tinybert derives from these (splits, subsets) are made by its own
code, so they are not listed here. The one pretrained model the course borrows,
all-MiniLM-L6-v2, is registered the same way, and ``fetch_group("minilm")``
returns its folder.

The entries themselves are in ``tinybert.data.corpus_files`` (text, with the Project
Gutenberg books in ``tinybert.data.gutenberg``), ``tinybert.data.task_files`` (labelled
data) and ``tinybert.data.model_files`` (the pretrained model). Finding, downloading and
verifying one file is ``tinybert.data.fetching``; this package holds the registry, looks
names up and fetches by name or by group.

Two classification tasks are derived from registered files by tinybert's own code, so
that they need nothing but the registry: ``read_sentence_polarity(split)`` splits the
Sentence Polarity zip (``tinybert.data.sentence_polarity``) and
``read_authorship(split)`` cuts the Gutenberg books into passages labelled by author
(``tinybert.data.authorship``). Both return ``(text, label)`` pairs.
"""

from __future__ import annotations

import difflib
import functools
import os
import shutil
from pathlib import Path
from types import MappingProxyType

__all__ = [
    "DataFile",
    "REGISTRY",
    "ChecksumError",
    "DataUnavailableError",
    "UnknownDataError",
    "names",
    "info",
    "fetch",
    "fetch_file",
    "fetch_group",
    "data_dir",
    "cache_dir",
    "sha256_of",
    "OFFLINE_RETRY_SECONDS",
    "read_sentence_polarity",
    "POLARITY_LABELS",
    "read_authorship",
    "AUTHORS",
]


from tinybert.checkpoint.atomic import write_atomically
from tinybert.data import corpus_files, model_files, task_files
from tinybert.data.authorship import AUTHORS, read_authorship
from tinybert.data.entry import DataFile
from tinybert.data.fetching import (
    OFFLINE_RETRY_SECONDS,
    ChecksumError,
    DataUnavailableError,
    cache_dir,
    data_dir,
    fetch_file,
    sha256_of,
)
from tinybert.data.sentence_polarity import POLARITY_LABELS, read_sentence_polarity

_ENTRIES = [*corpus_files.ENTRIES, *task_files.ENTRIES, *model_files.ENTRIES]

#: Every registered file, by name, in the order above. Read-only: build a DataFile
#: to try others.
REGISTRY = MappingProxyType({entry.name: entry for entry in _ENTRIES})
assert len(REGISTRY) == len(_ENTRIES), "two registry entries share a name"


class UnknownDataError(KeyError):
    """No registry entry has the name that was asked for."""

    def __str__(self) -> str:  # KeyError would print the message inside quotes
        return str(self.args[0])


def names(prefix: str = "") -> list[str]:
    """Registered names in registry order; ``names("gutenberg/")`` lists one
    dataset's files."""
    return [name for name in REGISTRY if name.startswith(prefix)]


def info(name: str) -> DataFile:
    """The registry entry for ``name``, with a did-you-mean hint when there is none."""
    if name in REGISTRY:
        return REGISTRY[name]
    close = [entry.name for entry in REGISTRY.values() if entry.relpath == str(name)]
    close = close or difflib.get_close_matches(
        str(name), list(REGISTRY), n=5, cutoff=0.6
    )
    hint = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
    raise UnknownDataError(
        f"no data file is registered under the name {name!r}.{hint} "
        "List the registered names with tinybert.data.names()."
    )


def fetch(name: str, *, timeout: float = 60.0) -> Path:
    """Path of a verified local copy of the registered file ``name``, e.g.
    ``fetch("squad1.1/dev")``."""
    return fetch_file(info(name), timeout=timeout)


def fetch_group(prefix: str, *, timeout: float = 60.0) -> Path:
    """Fetch every file registered under ``prefix/`` and return the one folder that
    holds them all.

    For files that only make sense together, such as a model's weights, config and
    vocabulary: ``fetch_group("minilm")`` is the all-MiniLM-L6-v2 folder, ready for a
    loader that reads ``folder / "config.json"``. When some files are in
    ``$TINYBERT_DATA_DIR`` and the others had to be downloaded into the cache, the
    verified data-folder files are copied into the cache too, so that the folder
    returned is complete.
    """
    entries = [info(name) for name in names(f"{prefix}/")]
    if not entries:
        raise UnknownDataError(
            f"no data files are registered under "
            f"{prefix!r}/; registered "
            f"groups: {', '.join(dict.fromkeys(n.split('/')[0] for n in REGISTRY))}"
        )
    folder = Path(os.path.commonpath([entry.relpath for entry in entries]))
    paths = [fetch_file(entry, timeout=timeout) for entry in entries]
    roots = {
        path.parents[len(Path(entry.relpath).parts) - 1]
        for entry, path in zip(entries, paths)
    }
    if len(roots) == 1:
        return roots.pop() / folder
    # mixed: complete the copy in the cache
    for entry, path in zip(entries, paths):
        target = cache_dir() / entry.relpath
        if path != target:
            target.parent.mkdir(parents=True, exist_ok=True)
            copy = functools.partial(shutil.copyfile, path)  # copy(temporary path)
            write_atomically(target, copy)  # as for a download
    return cache_dir() / folder
