"""Hand-written tests (issue 34): every plot that a chapter's code draws has alt text
that says what it shows. A code cell's image output gets its alt text from the cell's
metadata, ``mystnb: {image: {alt: ...}}`` (myst-nb's render_image_options); without it,
myst-nb writes the image's file path, a hash, into the page, and a screen reader reads
that out.

A plot cell is a code cell that calls ``plt.show()``, or calls a function that the same
chapter defines and that calls ``plt.show()`` (chapter 8's ``show``). The cells tagged
``diagram`` draw with tinybert.diagrams and are checked in tests/test_diagrams.py.
tests/test_site_alt_text.py checks the same on the built website.
"""
from __future__ import annotations

import ast
import re

import pytest

from book.tools.chapters import Chapter, chapters

SHOW = "plt.show"
MIN_WORDS = 8
MAX_CHARS = 400  # a sentence or two, not a paragraph


def looks_like_a_file_name(text: str) -> bool:
    """A path, a file name or a hash: what myst-nb writes when a cell has no alt."""
    one_word = re.fullmatch(r"\S*[/\\.]\S*", text)  # a path or a file
    named = r"\.(png|jpe?g|svg|gif|pdf)\b|_images/|[0-9a-f]{16,}"
    return bool(one_word or re.search(named, text, re.IGNORECASE))


def _calls(tree: ast.AST) -> set[str]:
    """The names called in this code, outside the functions it defines: "plt.show",
    "draw", ..."""
    names = set()
    for statement in getattr(tree, "body", []):
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for node in ast.walk(statement):
            if isinstance(node, ast.Call):
                names.add(ast.unparse(node.func))
    return names


def plot_cells(chapter: Chapter) -> list:
    """The chapter's code cells that draw a plot, in order (diagram cells left out):
    they call plt.show(), or a function of the chapter's own that calls it."""
    code = [cell for cell in chapter.read().cells if cell.cell_type == "code"]
    trees = [ast.parse(cell.source) for cell in code]
    showing = {node.name for tree in trees for node in ast.walk(tree)
               if isinstance(node, ast.FunctionDef)
               and SHOW in _calls(ast.Module(body=node.body, type_ignores=[]))}
    return [cell for cell, tree in zip(code, trees)
            if "diagram" not in cell.metadata.get("tags", [])
            and (SHOW in _calls(tree) or showing & _calls(tree))]


def alt_text_problems(chapter: Chapter) -> list[str]:
    """One line for every plot cell of the chapter whose alt text is missing or poor."""
    found = []
    for cell in plot_cells(chapter):
        where = f"{chapter.relpath}: the cell ending {cell.source.splitlines()[-1]!r}"
        alt = cell.metadata.get("mystnb", {}).get("image", {}).get("alt", "")
        alt = alt.strip() if isinstance(alt, str) else ""
        if not alt:
            found.append(f"{where} has no alt text (mystnb: image: alt)")
        elif len(alt.split()) < MIN_WORDS:
            found.append(f"{where}: alt text of fewer than {MIN_WORDS} words: {alt!r}")
        elif len(alt) > MAX_CHARS:
            found.append(f"{where}: alt text over {MAX_CHARS} characters")
        elif looks_like_a_file_name(alt):
            found.append(f"{where}: alt text that looks like a file name: {alt!r}")
    return found


CHAPTERS = chapters()


@pytest.mark.parametrize("chapter", CHAPTERS, ids=[c.stem for c in CHAPTERS])
def test_every_plot_a_chapter_draws_has_alt_text(chapter):
    assert alt_text_problems(chapter) == []


def test_the_chapters_draw_plots_that_the_check_finds():
    """Guards the detection: if it stopped finding the plots, the test above would pass
    on nothing."""
    counts = {chapter.stem: len(plot_cells(chapter)) for chapter in CHAPTERS}
    assert sum(counts.values()) >= 45, counts
    assert all(counts.values()), f"a chapter without a plot: {counts}"


def test_the_check_finds_what_it_looks_for(tmp_path):
    head = ("---\nkernelspec:\n  display_name: Python 3\n  language: python\n"
            "  name: python3\n---\n# Tiny\n")

    def cell(source: str, alt: str | None = None) -> str:
        options = "" if alt is None else (
            f"---\nmystnb:\n  image:\n    alt: '{alt}'\n---\n")
        return f"\n```{{code-cell}} ipython3\n{options}{source}\n```\n"

    helper = "def draw(x):\n    plt.plot(x)\n    plt.show()"
    good = "A line plot of the loss against the step; it falls and then levels off."
    path = tmp_path / "01_tiny.md"
    hashed = ("../_images/3a77afaac9cd7053a8e09ab6480b4945.png with words enough to "
              "pass the count")
    path.write_text(head + cell("x = 1") + cell(helper, good) + cell("draw([1, 2])")
                    + cell("plt.plot([1]); plt.show()", "a plot")
                    + cell("plt.show()", hashed) + cell("plt.show()", good))
    chapter = Chapter(path)
    assert len(plot_cells(chapter)) == 4  # not "x = 1", nor the cell that defines draw
    problems = alt_text_problems(chapter)
    assert len(problems) == 3, problems
    assert "ending 'draw([1, 2])' has no alt text" in problems[0]
    assert "fewer than 8 words: 'a plot'" in problems[1]
    assert "looks like a file name" in problems[2]
