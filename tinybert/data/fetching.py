"""Hand-written module (not generated from a chapter): finding one data file on this
machine, by its registry entry (a ``DataFile``).

``fetch_file(entry)`` looks in the data folder ``$TINYBERT_DATA_DIR`` (``data_dir()``),
then in the user cache (``cache_dir()``), and only then downloads into the cache; every
copy is checked against the SHA-256 that the entry pins (``sha256_of``), and a failed
download leaves nothing behind. After a download fails for want of a network, later
downloads fail at once for ``OFFLINE_RETRY_SECONDS``. The registry itself, and
``fetch(name)`` and ``fetch_group(prefix)`` on top of this, are in ``tinybert.data``,
which re-exports everything public here.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import os
import time
import urllib.error
import urllib.request
import warnings
from pathlib import Path

from tinybert.checkpoint.atomic import write_atomically
from tinybert.data.entry import DataFile

__all__ = [
    "ChecksumError",
    "DataUnavailableError",
    "OFFLINE_RETRY_SECONDS",
    "cache_dir",
    "data_dir",
    "fetch_file",
    "sha256_of",
]


class ChecksumError(ValueError):
    """A file's bytes are not the ones the registry pins: corrupt, truncated or
    another version."""


class DataUnavailableError(FileNotFoundError):
    """A registered file is not on this machine and could not be downloaded."""


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
    then rename it (``write_atomically``).

    Nobody ever sees a half-written file under the final name. A failure leaves
    nothing behind, not even the folders made for the file.
    """
    created = [
        folder
        for folder in (target.parent, *target.parent.parents)
        if not folder.exists()
    ]
    target.parent.mkdir(parents=True, exist_ok=True)

    def download(temporary: str) -> None:
        digest = hashlib.sha256()
        with (
            open(temporary, "wb") as out,
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

    try:
        write_atomically(target, download)
    except BaseException:
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
