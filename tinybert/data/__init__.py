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

The entries themselves are in ``tinybert.data.corpora`` (text), ``tinybert.data.tasks``
(labelled data) and ``tinybert.data.models`` (the pretrained model); this package
fetches and verifies them.
"""

from __future__ import annotations

import contextlib
import difflib
import hashlib
import http.client
import os
import shutil
import tempfile
import time
import urllib.error
import urllib.request
import warnings
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
]


from tinybert.data import corpora, models, tasks
from tinybert.data.entry import DataFile

_ENTRIES = [*corpora.ENTRIES, *tasks.ENTRIES, *models.ENTRIES]

#: Every registered file, by name, in the order above. Read-only: build a DataFile
#: to try others.
REGISTRY = MappingProxyType({entry.name: entry for entry in _ENTRIES})
assert len(REGISTRY) == len(_ENTRIES), "two registry entries share a name"


class ChecksumError(ValueError):
    """A file's bytes are not the ones the registry pins: corrupt, truncated or
    another version."""


class DataUnavailableError(FileNotFoundError):
    """A registered file is not on this machine and could not be downloaded."""


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


def data_dir() -> Path | None:
    """The offline data folder named by ``$TINYBERT_DATA_DIR``, or None when it
    is not set."""
    value = os.environ.get("TINYBERT_DATA_DIR", "").strip()
    return Path(value).expanduser().absolute() if value else None


def cache_dir() -> Path:
    """Where downloads go: ``$TINYBERT_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/tinybert/data``, else ``~/.cache/tinybert/data``."""
    if os.environ.get("TINYBERT_CACHE_DIR", "").strip():
        return Path(os.environ["TINYBERT_CACHE_DIR"].strip()).expanduser().absolute()
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip() or Path.home() / ".cache"
    return Path(xdg).expanduser().absolute() / "tinybert" / "data"


# (path, mtime_ns, size) -> sha256 already computed
_DIGESTS: dict[tuple[str, int, int], str] = {}


def _stat_key(path: Path) -> tuple[str, int, int]:
    stat = path.stat()
    return str(path.resolve()), stat.st_mtime_ns, stat.st_size


def sha256_of(path: Path) -> str:
    """SHA-256 of a file, remembered per (path, mtime, size): a second fetch does not
    re-read it."""
    key = _stat_key(Path(path))
    if key not in _DIGESTS:
        digest = hashlib.sha256()
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        _DIGESTS[key] = digest.hexdigest()
    return _DIGESTS[key]


def _verify(entry: DataFile, path: Path, what_to_do: str) -> None:
    """Raise ChecksumError unless ``path`` holds exactly the bytes that
    ``entry`` pins."""
    actual = sha256_of(path)
    if actual != entry.sha256:
        raise ChecksumError(
            f"{entry.name!r} at {path} is not the expected file: sha256 expected "
            f"{entry.sha256}, got {actual} (size expected {entry.size}, got "
            f"{path.stat().st_size}). The original is {entry.url}. {what_to_do}"
        )


def _download(entry: DataFile, target: Path, timeout: float) -> None:
    """Download ``entry.url`` to a temporary file beside ``target``, check it,
    then rename it.

    The temporary file sits in the target's own folder so that ``os.replace`` is an
    atomic rename: nobody ever sees a half-written file under the final name. A failure
    leaves nothing behind, not even the folders made for the file.
    """
    created = [
        folder
        for folder in (target.parent, *target.parent.parents)
        if not folder.exists()
    ]
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(
        dir=target.parent, prefix=f".{target.name}.", suffix=".part"
    )
    try:
        digest = hashlib.sha256()
        with (
            os.fdopen(handle, "wb") as out,
            urllib.request.urlopen(entry.url, timeout=timeout) as response,
        ):
            for block in iter(lambda: response.read(1 << 20), b""):
                digest.update(block)
                out.write(block)
        if digest.hexdigest() != entry.sha256:
            raise ChecksumError(
                f"downloaded {entry.name!r} ({entry.relpath}) from {entry.url}, but "
                f"its sha256 is {digest.hexdigest()}, expected {entry.sha256}. The "
                f"download was discarded."
            )
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        # deepest first; rmdir refuses any folder that is not empty
        for folder in created:
            with contextlib.suppress(OSError):
                folder.rmdir()
        raise
    _DIGESTS[_stat_key(target)] = entry.sha256


OFFLINE_RETRY_SECONDS = 120.0
# after a download fails for want of a network: {"since": monotonic time, "error": text}
_offline: dict = {}


class _StillOffline(ConnectionError):
    """Raised instead of a download while a recent network failure says there is
    no network."""


def _is_network_failure(error: BaseException) -> bool:
    """True when ``error`` says the network is unreachable (no DNS, refused, timed out),
    not that the server answered badly (an HTTP status) or that a local file could not
    be written."""
    if isinstance(error, (urllib.error.HTTPError, _StillOffline)):
        return False
    return isinstance(error, (urllib.error.URLError, TimeoutError, ConnectionError))


def _check_network(url: str) -> None:
    """Fail at once, without waiting for another timeout, if a download failed for want
    of a network less than OFFLINE_RETRY_SECONDS ago; local (file:) URLs are
    always tried."""
    if not url.startswith(("http:", "https:")) or not _offline:
        return
    waited = time.monotonic() - _offline["since"]
    if waited < OFFLINE_RETRY_SECONDS:
        raise _StillOffline(
            f"not tried: a download {waited:.0f} s ago failed "
            f"({_offline['error']}), so the network looks unreachable; "
            f"tinybert tries again "
            f"{OFFLINE_RETRY_SECONDS - waited:.0f} s from now"
        )
    _offline.clear()


def fetch_file(entry: DataFile, *, timeout: float = 60.0) -> Path:
    """Path of a verified local copy of ``entry``: data folder, then cache,
    then download.

    Takes a DataFile rather than a name so that any entry can be fetched, including one
    made up for a test. A bad file in ``$TINYBERT_DATA_DIR`` is the user's to fix, so it
    is reported, never deleted; a bad file in the cache is tinybert's own, so it is
    replaced. After a download fails for want of a network, later downloads fail at once
    for OFFLINE_RETRY_SECONDS instead of each waiting ``timeout`` seconds again.
    """
    root = data_dir()
    # a typo must not turn into a download
    if root is not None and not root.is_dir():
        what = "is a file" if root.exists() else "does not exist"
        raise DataUnavailableError(
            f"TINYBERT_DATA_DIR is {os.environ['TINYBERT_DATA_DIR'].strip()!r}, which "
            f"{what}; expected the course's data folder (the one with SOURCES.md), "
            f"which holds {entry.relpath}. Fix the variable, or unset it to use the "
            f"cache ({cache_dir()}) and downloads."
        )
    if root is not None and (root / entry.relpath).is_file():
        path = root / entry.relpath
        _verify(
            entry,
            path,
            f"Replace it with the original, or delete it to use the "
            f"cache ({path} is in TINYBERT_DATA_DIR, which tinybert "
            f"never modifies).",
        )
        return path
    cached = cache_dir() / entry.relpath
    if cached.is_file():
        try:
            _verify(entry, cached, "Deleting the cached copy and downloading it again.")
            return cached
        except ChecksumError as error:
            warnings.warn(str(error), stacklevel=2)
            cached.unlink()
    try:
        _check_network(entry.url)
        _download(entry, cached, timeout)
    except (OSError, http.client.HTTPException) as error:
        if _is_network_failure(error) and entry.url.startswith(("http:", "https:")):
            _offline.update(since=time.monotonic(), error=str(error))
        looked = f"{root / entry.relpath}" if root else "TINYBERT_DATA_DIR (not set)"
        offline = (
            ""
            if entry.offline_copy
            else (" This file is not in the course's offline data folder.")
        )
        raise DataUnavailableError(
            f"data file {entry.name!r} ({entry.relpath}) is not on this machine and "
            f"could not be downloaded from {entry.url} ({error}). Looked in {looked} "
            f"and {cached}.{offline} Set TINYBERT_DATA_DIR to a folder that contains "
            f"{entry.relpath}, or go online and try again."
        ) from error
    return cached


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
            handle, temporary = tempfile.mkstemp(
                dir=target.parent, prefix=f".{target.name}."
            )
            os.close(handle)
            try:
                shutil.copyfile(path, temporary)
                os.replace(temporary, target)  # atomic, as for a download
            except BaseException:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(temporary)
                raise
    return cache_dir() / folder
