"""Hand-written tests for the tasks that tinybert.data derives from registered files
(tinybert.data.sentence_polarity and tinybert.data.authorship): each step on small
hand-made text, and parity with the course data's derived/ files (SOURCES.md section 9),
row for row, when the data folder is available.

The parity tests read the originals through the registry with TINYBERT_DATA_DIR set to
the data folder ($TINYBERT_DATA_DIR, else ../shared/data beside the repository), and
compare with that folder's derived/*.tsv, which the registry never serves.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tinybert import data
from tinybert.data import AUTHORS, read_authorship, read_sentence_polarity
from tinybert.data.authorship import (
    TEST_BOOKS,
    body_lines,
    book_passages,
    cut,
    is_prose,
    paragraphs,
)

_DATA_DIR_VALUE = os.environ.get("TINYBERT_DATA_DIR", "").strip()
SIBLING_DATA_DIR = Path(__file__).resolve().parents[2] / "shared" / "data"
DATA_FOLDER = (
    Path(_DATA_DIR_VALUE).expanduser().absolute()
    if _DATA_DIR_VALUE
    else SIBLING_DATA_DIR
)
FILE_SPLIT = {"train": "train", "validation": "dev", "test": "test"}


@pytest.fixture
def course_data(monkeypatch):
    """The data folder, set as TINYBERT_DATA_DIR so that nothing is downloaded; skip
    without one."""
    if not (DATA_FOLDER / "derived" / "authorship_test.tsv").is_file():
        pytest.skip(
            f"no course data folder with derived/ files at {DATA_FOLDER}: "
            "set TINYBERT_DATA_DIR to the course's data folder"
        )
    monkeypatch.setenv("TINYBERT_DATA_DIR", str(DATA_FOLDER))
    return DATA_FOLDER


def derived_rows(folder: Path, name: str, header: list[str]) -> list[list[str]]:
    """The rows of a derived TSV file (no quoting: cells hold no tab or newline)."""
    lines = (folder / "derived" / name).read_text(encoding="utf-8").split("\n")
    assert lines[0].split("\t") == header and lines[-1] == ""
    rows = [line.split("\t") for line in lines[1:-1]]
    assert all(len(row) == len(header) for row in rows)
    return rows


# --- parity with the derived files ---


@pytest.mark.parametrize("split", ["train", "validation", "test"])
def test_sentence_polarity_is_the_derived_file_row_for_row(course_data, split):
    rows = derived_rows(
        course_data, f"sentence_polarity_{FILE_SPLIT[split]}.tsv", ["label", "text"]
    )
    expected = [(text, int(label)) for label, text in rows]
    got = read_sentence_polarity(split)
    assert len(got) == {"train": 8530, "validation": 1066, "test": 1066}[split]
    assert got == expected
    assert [label for _, label in got[:4]] == [
        1,
        0,
        1,
        0,
    ]  # positive first, for each line


@pytest.mark.parametrize("split", ["train", "validation", "test"])
def test_authorship_is_the_derived_file_row_for_row(course_data, split):
    rows = derived_rows(
        course_data, f"authorship_{FILE_SPLIT[split]}.tsv", ["label", "book", "text"]
    )
    expected = [(text, AUTHORS.index(label)) for label, _, text in rows]
    got = read_authorship(split)
    per_author = {"train": 2617, "validation": 290, "test": 750}[split]
    assert len(got) == 4 * per_author
    assert got == expected
    # the book column too: every passage is one of its book's, and that book is the
    # author's (the test split only from the held-out books, the others never)
    for label, book, text in rows[:: max(1, len(rows) // 500)]:
        ebook = int(book)
        assert text in book_passages(ebook)
        assert data.info(f"gutenberg/{ebook}").author.lower().endswith(label)
        assert (ebook in TEST_BOOKS) == (split == "test")


def test_no_passage_keeps_project_gutenbergs_text(course_data):
    for ebook in (1342, 105):
        passages = book_passages(ebook)
        assert len(passages) > 1000
        assert not any(
            "gutenberg" in p.lower() or "_" in p or "\u201c" in p for p in passages
        )
        assert all(15 <= len(p.split()) <= 100 for p in passages)


# --- each step on hand-made text ---


def test_body_lines_are_strictly_between_the_markers():
    text = (
        "\ufeffTitle: A Book\r\n"
        "*** START OF THIS PROJECT GUTENBERG EBOOK A BOOK ***\r\n"
        "First line.\r\n\r\nLast line.\r\n"
        "End of the Project Gutenberg EBook of A Book\r\n"
        "*** END OF THIS PROJECT GUTENBERG EBOOK A BOOK ***\r\nlicence\r\n"
    )
    assert body_lines(text) == ["First line.", "", "Last line."]
    other = (
        "***START OF THE PROJECT GUTENBERG EBOOK X***\nx\n"
        "*** end of the project gutenberg ebook\n"
    )
    assert body_lines(other) == ["x"]


@pytest.mark.parametrize(
    "text, message",
    [
        ("no markers at all\n", "START"),
        ("*** START OF THIS PROJECT GUTENBERG EBOOK X ***\nthe book, cut off\n", "END"),
        ("a line that says *** START OF THIS PROJECT GUTENBERG EBOOK X ***\n", "START"),
    ],
)
def test_body_lines_without_markers_is_an_error(text, message):
    with pytest.raises(ValueError, match=message):
        body_lines(text)


def test_paragraphs_join_lines_and_normalise_typography():
    lines = [
        "  \u201cIt is _not_ so,\u201d",
        "she said\u2014and\u00a0left\u2026",
        " ",
        "",
        "\u2018Page 3\u20134\u2019",
        "",
        "",
    ]
    assert paragraphs(lines) == ['"It is not so," she said--and left...', "'Page 3-4'"]
    assert paragraphs([]) == [] and paragraphs(["", "  "]) == []


@pytest.mark.parametrize(
    "paragraph, prose",
    [
        ("It was the best of times, it was the worst of times.", True),
        ("[Illustration: the house]", False),
        ("Produced by a volunteer.", False),
        ("This eBook is for the use of anyone, from Project GUTENBERG.", False),
        ("CHAPTER XII. In which nothing happens at all, for once.", False),
        ("Chapter 3 begins here.", False),
        ("Part ii of the story.", False),
        ("Chapters are long; this one, which has no chapter number, is fine.", True),
        ("See chapter one and then chapter two for the details.", False),
        ("I. The start. II. The middle. III. The end.", False),
        ("I. The start. II. The end.", True),
        ("THE END OF the book", False),  # 8 of its 15 letters are capitals
        ("THE END of the book here", True),
    ],
)
def test_is_prose(paragraph, prose):
    assert is_prose(paragraph) == prose


def test_cut_into_near_equal_chunks_of_at_most_100_words():
    def sizes(n_words):
        return [len(p.split()) for p in cut(" ".join(f"w{i}" for i in range(n_words)))]

    assert sizes(14) == [] and sizes(15) == [15] and sizes(100) == [100]
    assert (
        sizes(101) == [51, 50]
        and sizes(250) == [84, 84, 82]
        and sizes(205) == [69, 69, 67]
    )
    words = [f"w{i}" for i in range(250)]
    assert " ".join(cut(" ".join(words))).split() == words  # in order, nothing lost


# --- bad input ---


@pytest.mark.parametrize("reader", [read_sentence_polarity, read_authorship])
@pytest.mark.parametrize("split", ["dev", "Train", "", None])
def test_a_bad_split_is_a_clear_error(reader, split):
    with pytest.raises(
        ValueError, match="split must be one of 'train', 'validation', 'test'"
    ):
        reader(split)


def test_an_unregistered_book_is_a_clear_error():
    with pytest.raises(ValueError, match="eBook 11 is not registered; known: .*1342"):
        book_passages(11)
