"""Hand-written: read the chapters, the one place that knows how they are laid out.

A chapter is ``chapters/NN_name.md`` (MyST Markdown notebook, the source the book builds)
paired with ``chapters/NN_name.py`` (py:percent) by jupytext.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import jupytext
from docutils.nodes import make_id

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = ROOT / "chapters"
CHAPTER_NAME = re.compile(r"^(\d\d)_[a-z0-9_]+$")
HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*$")


@dataclass(frozen=True)
class Chapter:
    path: Path  # the .md file

    @property
    def number(self) -> int:
        return int(self.path.stem[:2])

    @property
    def stem(self) -> str:
        return self.path.stem

    @property
    def paired_py(self) -> Path:
        return self.path.with_suffix(".py")

    @property
    def relpath(self) -> str:
        """The chapter's path as the repository names it, e.g. chapters/01_feedforward.md."""
        return f"chapters/{self.path.name}"

    @property
    def page(self) -> str:
        """The page of the built website, relative to the site root."""
        return f"chapters/{self.stem}.html"

    def read(self):
        return jupytext.read(self.path)


def chapters(root: Path = ROOT) -> list[Chapter]:
    """Every chapter, in order. A badly named ``.md`` file in chapters/ is an error."""
    found = []
    for path in sorted((root / "chapters").glob("*.md")):
        if not CHAPTER_NAME.match(path.stem):
            raise ValueError(f"{path}: chapter files are named NN_name.md "
                             "(two digits, lower-case letters, digits and underscores)")
        found.append(Chapter(path))
    return found


def headings(markdown: str) -> list[tuple[int, str]]:
    """(level, title) of every Markdown heading in a cell, skipping fenced code blocks."""
    result, fence = [], None
    for line in markdown.splitlines():
        stripped = line.strip()
        marker = re.match(r"^(`{3,}|~{3,})", stripped)
        if marker:
            if fence is None:
                fence = marker.group(1)[0] * len(marker.group(1))
            elif stripped.startswith(fence) and stripped.strip("`~") == "":
                fence = None
            continue
        if fence is None and (match := HEADING.match(line)):
            result.append((len(match.group(1)), match.group(2)))
    return result


def anchor(title: str) -> str:
    """The HTML id Sphinx gives a section with this title."""
    plain = re.sub(r"[`*_$]", "", title)
    return make_id(plain)


def cell_tags(cell) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))
