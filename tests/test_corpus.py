"""Unit tests for tinybert.corpus (generated from chapters/02_word_vectors.md).

Synthetic files test every rule of gutenberg_body; the tests on the twelve real books need
$TINYBERT_DATA_DIR (CI sets it to ../shared/data) and are skipped without it.
"""
from __future__ import annotations

import os
from collections import Counter

import pytest

from tinybert import data
from tinybert.corpus import Vocabulary, gutenberg_body, gutenberg_ebooks, load_gutenberg, words

HAS_DATA = bool(os.environ.get("TINYBERT_DATA_DIR", "").strip())
needs_data = pytest.mark.skipif(not HAS_DATA, reason="TINYBERT_DATA_DIR is not set: the Gutenberg files are not available offline")

# First words of each body (title page) and its last words: nothing of Project Gutenberg's is left.
BOOKS = {
    1342: ("PRIDE AND PREJUDICE", "had been the means of uniting them."),
    158: ("EMMA", "in the perfect happiness of the union.\n\nFINIS"),
    105: ("Persuasion", "national importance.\n\nFinis"),
    98: ("A TALE OF TWO CITIES", "than I have ever known.”"),
    1400: ("GREAT EXPECTATIONS", "I saw no shadow of another parting from her."),
    730: ("OLIVER TWIST", "and she was weak and erring."),
    76: ("ADVENTURES\n\nOF\n\nHUCKLEBERRY FINN", "THE END. YOURS TRULY, _HUCK FINN_."),
    74: ("THE ADVENTURES OF TOM SAWYER", "part of their lives at present."),
    86: ("A CONNECTICUT YANKEE IN KING ARTHUR'S COURT", "but he never finished it."),
    1661: ("THE ADVENTURES OF SHERLOCK HOLMES", "she has met with considerable success."),
    2852: ("THE HOUND OF THE BASKERVILLES", "for a little dinner on the way?”"),
    2097: ("The Sign of the Four", "And he stretched his long white hand up for it."),
}


def make_file(body: str, *, start="*** START OF THIS PROJECT GUTENBERG EBOOK A BOOK ***",
              end="*** END OF THIS PROJECT GUTENBERG EBOOK A BOOK ***", newline="\r\n", bom=True) -> str:
    """A small Project Gutenberg style file around ``body`` (written with \\n line breaks)."""
    header = ("The Project Gutenberg EBook of A Book, by Someone\n\nThis eBook is for the use of anyone "
              "anywhere at no cost.\n\nTitle: A Book\n\n")
    footer = "\n\n*** START: FULL LICENSE ***\n\nTHE FULL PROJECT GUTENBERG LICENSE\nSection 1.\n"
    text = header + start + "\n\n\n\nProduced by A Volunteer and\nAnother Volunteer\n\n\n" + body
    text += "\n\n\n\nEnd of the Project Gutenberg EBook of A Book, by Someone\n\n" + end + footer
    return ("\ufeff" if bom else "") + text.replace("\n", newline)


SIMPLE_BODY = "A BOOK\n\nChapter 1\n\nIt was a dark night.\nThe end came soon.\n\n\n\nTHE END"


# --- gutenberg_body -------------------------------------------------------------------------------

@pytest.mark.parametrize("newline", ["\r\n", "\n", "\r"])
@pytest.mark.parametrize("bom", [True, False])
def test_body_is_the_text_between_the_markers(newline, bom):
    body = gutenberg_body(make_file(SIMPLE_BODY, newline=newline, bom=bom))
    assert body == "A BOOK\n\nChapter 1\n\nIt was a dark night.\nThe end came soon.\n\nTHE END\n"
    assert "\r" not in body and "\ufeff" not in body


def test_bom_before_a_start_marker_on_the_first_line():
    text = "\ufeff*** START OF THIS PROJECT GUTENBERG EBOOK X ***\r\nBody.\r\n*** END OF THIS PROJECT GUTENBERG EBOOK X ***"
    assert gutenberg_body(text) == "Body.\n"


def test_header_credit_footer_and_licence_are_removed():
    body = gutenberg_body(make_file(SIMPLE_BODY))
    for leftover in ["Project Gutenberg", "Produced by", "Volunteer", "LICENSE", "Title:", "***"]:
        assert leftover not in body


@pytest.mark.parametrize("start, end", [
    ("*** START OF THE PROJECT GUTENBERG EBOOK A BOOK ***", "*** END OF THE PROJECT GUTENBERG EBOOK A BOOK ***"),
    ("***START OF THIS PROJECT GUTENBERG EBOOK A BOOK***", "***END OF THIS PROJECT GUTENBERG EBOOK A BOOK***"),
    ("*** start of this project gutenberg ebook a book ***", "*** End of this Project Gutenberg EBook a book ***"),
])
def test_marker_variants(start, end):
    assert gutenberg_body(make_file(SIMPLE_BODY, start=start, end=end)).startswith("A BOOK\n\nChapter 1")


def test_other_closing_lines_and_editor_notes_are_removed():
    body = ("TITLE\n\n[Project Gutenberg Editor's Note: There is also another version of\nthis work]\n\n"
            "Text with the word Gutenberg inside a sentence.\n\n"
            "End of Project Gutenberg's A Book, by Someone\n\nEnd of Project Gutenberg’s A Book, by Someone")
    result = gutenberg_body(make_file(body))
    assert result == "TITLE\n\nText with the word Gutenberg inside a sentence.\n"


def test_indentation_inside_the_body_is_kept():
    result = gutenberg_body(make_file("TITLE\n\n   I. A Scandal in Bohemia\n  II. The Red-headed League"))
    assert "\n   I. A Scandal in Bohemia\n  II. The Red-headed League\n" in result


def test_missing_or_misplaced_markers_raise():
    with pytest.raises(ValueError, match="START OF THIS PROJECT GUTENBERG"):
        gutenberg_body("just some text\n*** END OF THIS PROJECT GUTENBERG EBOOK X ***\n")
    with pytest.raises(ValueError, match="END OF THIS PROJECT GUTENBERG"):
        gutenberg_body("*** START OF THIS PROJECT GUTENBERG EBOOK X ***\nthe book, cut off")
    with pytest.raises(ValueError, match="END OF THIS PROJECT GUTENBERG"):   # END before START only
        gutenberg_body("*** END OF THIS PROJECT GUTENBERG EBOOK X ***\n*** START OF THIS PROJECT GUTENBERG EBOOK X ***\n")
    with pytest.raises(ValueError, match="START"):
        gutenberg_body("A marker in the middle of a line: *** START OF THIS PROJECT GUTENBERG EBOOK X ***")
    with pytest.raises(ValueError, match="expects the file's text as a str"):
        gutenberg_body(b"*** START OF THIS PROJECT GUTENBERG EBOOK X ***")


# --- the twelve books -----------------------------------------------------------------------------

def test_registry_lists_the_twelve_books():
    assert sorted(gutenberg_ebooks()) == sorted(BOOKS)
    assert all(isinstance(ebook, int) for ebook in gutenberg_ebooks())


@needs_data
@pytest.mark.parametrize("ebook", list(BOOKS))
def test_every_book_has_a_clean_body(ebook):
    raw = data.fetch(f"gutenberg/{ebook}").read_text(encoding="utf-8")
    body = gutenberg_body(raw)
    first, last = BOOKS[ebook]
    assert body.startswith(first), body[:80]
    assert body.endswith(last + "\n"), body[-80:]
    assert "project gutenberg" not in body.lower()      # header, credit, notes and footer are all gone
    assert "gutenberg" not in body.lower() and "*** " not in body
    assert "\r" not in body and "\ufeff" not in body and "\n\n\n" not in body
    assert 0.85 * len(raw) < len(body) < len(raw)       # the licence is a small part of each file
    assert load_gutenberg(ebook) == body == load_gutenberg(str(ebook))


@needs_data
def test_a_passage_inside_a_book_survives_unchanged():
    body = load_gutenberg(1342)
    assert ("It is a truth universally acknowledged, that a single man in possession\n"
            "of a good fortune, must be in want of a wife.") in body


@pytest.mark.parametrize("bad", [99999, "99999", 1.5, True, None, "gutenberg/1342", -1342, "12a"])
def test_load_gutenberg_rejects_unknown_or_malformed_ebooks(bad):
    with pytest.raises(ValueError, match="ebook|eBook"):
        load_gutenberg(bad)


# --- words ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    ("", []),
    ("Hello, World!", ["hello", "world"]),
    ("Don't STOP--it's Tellson’s bank-note.", ["don't", "stop", "it's", "tellson's", "bank", "note"]),
    ("in 1775, 3rd of _May_", ["in", "rd", "of", "may"]),
    ("'Tis goin' to rain'", ["tis", "goin", "to", "rain"]),
    ("café naïve Æsop", ["café", "naïve", "æsop"]),
    ("rock'n'roll o'clock", ["rock'n'roll", "o'clock"]),
    ("a''b x'", ["a", "b", "x"]),
    ("   \n\t ", []),
])
def test_words(text, expected):
    assert words(text) == expected


def test_words_rejects_non_strings():
    with pytest.raises(ValueError, match="expects a str"):
        words(["a", "list"])


@needs_data
def test_words_on_a_book_are_lower_case_letters_and_apostrophes():
    tokens = words(load_gutenberg(2097))
    assert len(tokens) > 40_000
    assert all(t == t.lower() and t.replace("'", "").isalpha() and not t.startswith("'") for t in tokens)
    assert Counter(tokens).most_common(1)[0][0] == "the"


# --- Vocabulary -----------------------------------------------------------------------------------

def test_vocabulary_orders_by_count_then_word_and_reserves_unk():
    vocab = Vocabulary.from_words("e d a b a d b a c".split())
    assert vocab.itos == ["<unk>", "a", "b", "d", "c", "e"]      # ties (d, b) and (e, c) in word order
    assert vocab.unk_id == 0 and vocab.stoi["a"] == 1
    assert vocab.counts == [0, 3, 2, 2, 1, 1]
    assert len(vocab) == 6 and "a" in vocab and "<unk>" not in vocab and "z" not in vocab


def test_vocabulary_min_count_sends_rare_words_to_unk():
    tokens = "b a c a b a d d e".split()
    vocab = Vocabulary.from_words(tokens, min_count=2)
    assert vocab.itos == ["<unk>", "a", "b", "d"]
    assert vocab.counts == [2, 3, 2, 2] and sum(vocab.counts) == len(tokens)
    assert vocab.encode(["a", "c", "zebra", "d"]) == [1, 0, 0, 3]
    assert vocab.decode(vocab.encode(tokens)) == [t if t in vocab else "<unk>" for t in tokens]


def test_vocabulary_treats_the_unk_string_as_unknown():
    vocab = Vocabulary(Counter({"<unk>": 5, "x": 2, "y": 1}), min_count=2)
    assert vocab.itos == ["<unk>", "x"] and vocab.counts == [6, 2]
    assert vocab.encode(["<unk>", "x"]) == [0, 1]


def test_vocabulary_decode_accepts_tensors_and_checks_range():
    import torch

    vocab = Vocabulary.from_words(["a", "b", "a"])
    assert vocab.decode(torch.tensor([1, 2, 0])) == ["a", "b", "<unk>"]
    with pytest.raises(ValueError, match=r"\[0, 3\)"):
        vocab.decode([1, 3])
    with pytest.raises(ValueError, match=r"\[0, 3\)"):
        vocab.decode([-1])


@pytest.mark.parametrize("min_count", [0, -3, 1.5, True, "2"])
def test_vocabulary_rejects_bad_min_count(min_count):
    with pytest.raises(ValueError, match="min_count"):
        Vocabulary.from_words(["a"], min_count=min_count)


def test_vocabulary_rejects_bad_counts():
    with pytest.raises(ValueError, match="non-negative"):
        Vocabulary({"a": -1})
    with pytest.raises(ValueError, match="non-negative"):
        Vocabulary({"a": 2.5})


def test_empty_vocabulary_has_only_unk():
    vocab = Vocabulary.from_words([])
    assert vocab.itos == ["<unk>"] and vocab.counts == [0] and vocab.encode(["a"]) == [0]
