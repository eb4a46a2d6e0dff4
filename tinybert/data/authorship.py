"""Hand-written: the authorship task, which of four novelists wrote a passage, derived
from the registry's twelve Project Gutenberg books.

The procedure is the course data's (SOURCES.md section 9; ``make_subsets.py`` is its
specification), so ``read_authorship(split)`` returns the rows of
``derived/authorship_{train,dev,test}.tsv`` in their order, from the registered books
alone. Each book becomes passages:

1. the text strictly between the "*** START OF THIS PROJECT GUTENBERG" line and the
   first "*** END OF ..." or "End of the Project Gutenberg" line after it;
2. straight quotes, "--" for an em dash, "-" for an en dash, "..." for an ellipsis, no
   italic underscores, spaces for no-break spaces: the editions' typography must not
   give the author away;
3. paragraphs (separated by blank lines), whitespace collapsed, without notes, credits,
   headings, tables of contents, shouting and paragraphs of under 15 words;
4. a paragraph of over 100 words cut into ``ceil(words / 100)`` near-equal chunks, each
   kept if it has at least 15 words.

One book per author is the test split (the four that the course's pretraining leaves
out); of the other eight, passage ``j`` of a book goes to validation when ``j % 10 ==
9``. Each split keeps as many passages per author as its smallest author has, evenly
spaced through the author's passages.
"""

from __future__ import annotations

import math
import re
from functools import lru_cache
from itertools import groupby

from tinybert.data.fetching import fetch_file
from tinybert.data.gutenberg import ENTRIES
from tinybert.data.sentence_polarity import check_split

__all__ = ["AUTHORS", "TEST_BOOKS", "book_passages", "read_authorship"]

#: label i is AUTHORS[i]: each author's surname, lower-cased
AUTHORS = ("austen", "dickens", "twain", "doyle")

#: Persuasion, Oliver Twist, A Connecticut Yankee, The Sign of the Four
TEST_BOOKS = (105, 730, 86, 2097)

MIN_WORDS, MAX_WORDS = 15, 100

_BOOKS = {int(entry.name.split("/")[1]): entry for entry in ENTRIES}
_START = re.compile(r"\*\*\* ?START OF TH(?:E|IS) PROJECT GUTENBERG", re.I)
_END = re.compile(
    r"\*\*\* ?END OF TH(?:E|IS) PROJECT GUTENBERG|End of (?:the )?Project Gutenberg",
    re.I,
)
_TYPOGRAPHY = str.maketrans(
    {
        "\u201c": '"',  # “
        "\u201d": '"',  # ”
        "\u2018": "'",  # ‘
        "\u2019": "'",  # ’
        "\u2014": "--",  # em dash
        "\u2013": "-",  # en dash
        "\u2026": "...",  # ellipsis
        "\u00a0": " ",  # no-break space
        "_": None,  # _italics_
    }
)
_HEADING = re.compile(r"(?:chapter|book|volume|part)\s+(?:[ivxlc]+|\d+)\b", re.I)
_CHAPTER = re.compile(r"\bchapter\b", re.I)
_ROMAN_NUMBER = re.compile(r"\b[IVXLC]+\. ")  # "IV. " in a table of contents


def body_lines(text: str) -> list[str]:
    """The lines strictly between a Project Gutenberg file's START line and the first
    END line after it."""
    lines = text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
    lines = lines.split("\n")
    start = next((i for i, line in enumerate(lines) if _START.match(line)), None)
    if start is None:
        raise ValueError("no '*** START OF THIS PROJECT GUTENBERG' line")
    for end in range(start + 1, len(lines)):
        if _END.match(lines[end]):
            return lines[start + 1 : end]
    raise ValueError("no Project Gutenberg END line after the START line")


def paragraphs(lines: list[str]) -> list[str]:
    """Blocks of non-blank lines, joined, typography normalised, whitespace
    collapsed."""
    return [
        " ".join(" ".join(block).translate(_TYPOGRAPHY).split())
        for blank, block in groupby(lines, key=lambda line: not line.strip())
        if not blank
    ]


def is_prose(paragraph: str) -> bool:
    """False for notes, credits, headings, tables of contents and capitals."""
    letters = [c for c in paragraph if c.isalpha()]
    shouting = sum(c.isupper() for c in letters) > len(letters) / 2
    return not (
        paragraph.startswith(("[", "Produced by"))
        or "gutenberg" in paragraph.lower()
        or shouting
        or _HEADING.match(paragraph)
        or len(_CHAPTER.findall(paragraph)) >= 2
        or len(_ROMAN_NUMBER.findall(paragraph)) >= 3
    )


def cut(paragraph: str) -> list[str]:
    """A paragraph as passages: of over MAX_WORDS words, ``ceil(words / MAX_WORDS)``
    near-equal chunks; each kept if it has at least MIN_WORDS words."""
    words = paragraph.split()
    if len(words) < MIN_WORDS:
        return []
    size = math.ceil(len(words) / math.ceil(len(words) / MAX_WORDS))
    chunks = (words[i : i + size] for i in range(0, len(words), size))
    return [" ".join(chunk) for chunk in chunks if len(chunk) >= MIN_WORDS]


@lru_cache(maxsize=None)
def book_passages(ebook: int) -> tuple[str, ...]:
    """The passages of one registered book, in order: ``book_passages(1342)``."""
    if ebook not in _BOOKS:
        raise ValueError(f"eBook {ebook!r} is not registered; known: {list(_BOOKS)}")
    entry = _BOOKS[ebook]
    try:
        lines = body_lines(fetch_file(entry).read_text(encoding="utf-8"))
    except ValueError as error:
        raise ValueError(f"{entry.relpath}: {error}") from None
    return tuple(
        passage
        for paragraph in paragraphs(lines)
        if is_prose(paragraph)
        for passage in cut(paragraph)
    )


def read_authorship(split: str) -> list[tuple[str, int]]:
    """The ``(text, label)`` pairs of one split ("train", "validation" or "test"),
    label indexing AUTHORS, grouped by author in that order.

    10,468 training pairs (2,617 per author), 1,160 for validation (290) and 3,000
    for test (750, from the TEST_BOOKS).
    """
    check_split(split)
    by_author = {author: [] for author in AUTHORS}
    for ebook, entry in _BOOKS.items():
        if (ebook in TEST_BOOKS) != (split == "test"):
            continue
        author = entry.author.split()[-1].lower()  # "Arthur Conan Doyle": doyle
        for j, passage in enumerate(book_passages(ebook)):
            # of the eight other books, every tenth passage is for validation
            if split == "test" or (j % 10 == 9) == (split == "validation"):
                by_author[author].append(passage)
    m = min(map(len, by_author.values()))  # every author keeps m, evenly spaced
    return [
        (passages[k * len(passages) // m], label)
        for label, passages in enumerate(by_author.values())
        for k in range(m)
    ]
