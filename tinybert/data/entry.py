"""Hand-written: one registered data file (`DataFile`) and the helper that lists the
files of one upstream folder (`group`). The registry is `tinybert.data.REGISTRY`."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DataFile", "GH", "group"]


@dataclass(frozen=True)
class DataFile:
    """One original data file: where it lives locally, where it came from, how to
    credit it."""

    name: str  # registry name, e.g. "wikitext2/valid"
    # path inside the data folder, e.g. "pretraining/wikitext-2/valid.txt"
    relpath: str
    # upstream URL (pinned commit) serving exactly these bytes
    url: str
    sha256: str  # hex digest of the file
    size: int | None  # bytes; None where no size was recorded
    licence: str  # short SPDX-like identifier, e.g. "CC-BY-SA-4.0"
    citation: str  # who (year). Title.
    title: str = ""  # books only
    author: str = ""  # books only
    note: str = ""  # licence flags and caveats to print next to the credit
    # False: not in the course's offline data folder, download only
    offline_copy: bool = True


# GitHub's raw files; every URL pins a commit
GH = "https://raw.githubusercontent.com/"


def group(
    prefix, folder, base_url, licence, citation, files, **extra
) -> list[DataFile]:
    """The entries of files that share a folder, an upstream directory, a licence and
    a citation; ``files`` holds (short name, file name, size, sha256) rows."""
    return [
        DataFile(
            f"{prefix}/{short}",
            f"{folder}/{filename}",
            base_url + filename,
            sha256,
            size,
            licence,
            citation,
            **extra,
        )
        for short, filename, size, sha256 in files
    ]
