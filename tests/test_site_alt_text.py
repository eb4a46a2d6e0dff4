"""Hand-written test of the built website (issue 34): every image on a chapter page has
alt text, and none is a file name or a hash, which is what myst-nb writes for a cell's
image output when the cell gives no ``mystnb: {image: {alt: ...}}``
(tests/test_alt_text.py checks the chapters' metadata). The plots and diagrams that the
chapters' code draws (images under _images/) say in a sentence what they show.

Reads the HTML files only, no browser. Runs on the site `make site` builds (quick
mode), or the one in $TINYBERT_SITE_DIR.
"""
from __future__ import annotations

import os
from html.parser import HTMLParser
from pathlib import Path

import pytest

from test_alt_text import looks_like_a_file_name

pytestmark = pytest.mark.site

ROOT = Path(__file__).resolve().parents[1]
SITE = Path(os.environ.get("TINYBERT_SITE_DIR",
                           ROOT / "_build" / "quick" / "_build" / "html"))
CHAPTER_PAGES = sorted((SITE / "chapters").glob("*.html"))
MIN_WORDS = 8  # for a drawn figure; a logo's "Colab logo" may be shorter


class _Images(HTMLParser):
    def __init__(self):
        super().__init__()
        self.found: list[dict[str, str | None]] = []

    def handle_starttag(self, tag, attrs):
        if tag == "img":
            self.found.append(dict(attrs))


def images(page: Path) -> list[dict[str, str | None]]:
    """The attributes of every <img> of an HTML page."""
    parser = _Images()
    parser.feed(page.read_text(encoding="utf-8"))
    return parser.found


def alt_problems(page: Path) -> list[str]:
    found = []
    for image in images(page):
        src, alt = image.get("src") or "", (image.get("alt") or "").strip()
        drawn = "_images/" in src
        if not alt:
            found.append(f"{src}: no alt text")
        elif looks_like_a_file_name(alt):
            found.append(f"{src}: alt text that looks like a file name: {alt!r}")
        elif drawn and len(alt.split()) < MIN_WORDS:
            found.append(f"{src}: alt text of fewer than {MIN_WORDS} words: {alt!r}")
    return found


def test_the_website_has_chapter_pages():
    assert CHAPTER_PAGES, (f"no chapter pages in {SITE}: run `make site` (or `make "
                           "book` and set TINYBERT_SITE_DIR=_build/html) first")


@pytest.mark.parametrize("page", CHAPTER_PAGES, ids=[p.stem for p in CHAPTER_PAGES])
def test_every_image_of_a_chapter_page_has_alt_text(page):
    assert alt_problems(page) == []


def test_the_check_finds_what_it_looks_for(tmp_path):
    page = tmp_path / "page.html"
    page.write_text(
        '<img alt="Colab logo" src="../_static/images/logo_colab.png">'
        '<img src="../_images/a.png">'
        '<img alt="../_images/a9cfe11cb5dbe954b7d77d466c7036f2.png" '
        'src="../_images/b.png">'
        '<img alt="A plot" src="../_images/c.png" />'
        '<img alt="A line plot of the loss against the step, falling." '
        'src="../_images/d.png">')
    assert [problem.split(":")[0] for problem in alt_problems(page)] == [
        "../_images/a.png", "../_images/b.png", "../_images/c.png"]
