"""Licences: MIT for code, CC BY 4.0 for prose and figures, and the Project Gutenberg wrapper
never reaches anything the course derives from the books."""
from __future__ import annotations

import ast
import os
import re

import pytest

from book.tools.chapters import ROOT, chapters

HAS_DATA = bool(os.environ.get("TINYBERT_DATA_DIR", "").strip())


def test_code_is_mit_and_content_is_cc_by_4():
    assert (ROOT / "LICENSE").read_text().startswith("MIT License")
    content = (ROOT / "LICENSE-CONTENT").read_text()
    assert "Creative Commons Attribution 4.0" in content
    # the full legal code, not only a mention of it
    for part in ["Attribution 4.0 International", "Section 1 -- Definitions.",
                 "Section 3 -- License Conditions.", "Section 8 -- Interpretation."]:
        assert part in content, f"LICENSE-CONTENT lacks {part!r}"
    assert "LICENSE" in content.split("-----")[0] and "MIT" in content.split("-----")[0]


def test_readme_and_site_say_which_licence_covers_what():
    readme = (ROOT / "README.md").read_text()
    assert "LICENSE-CONTENT" in readme and "CC BY 4.0" in readme and "MIT" in readme
    assert "CC BY-SA" in readme
    config = (ROOT / "_config.yml").read_text()
    assert "MIT" in config and "CC BY 4.0" in config  # the footer of every page
    page = (ROOT / "book" / "licences.md").read_text()
    assert "{dataset-credits}" in page and "{chapter-citations}" in page


def _gutenberg_reads(source: str) -> list[str]:
    """Calls in ``source`` that read a Project Gutenberg file by its registry name or path."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            text = ast.unparse(node)
            if re.search(r"""(fetch|fetch_file|open|read_text)\(.*gutenberg/""", text) or \
                    "pretraining/gutenberg" in text:
                found.append(text)
    return found


def test_only_load_gutenberg_reads_the_books():
    """Every chapter and module reads a book through load_gutenberg, which strips the wrapper."""
    offenders = []
    for chapter in chapters():
        for cell in chapter.read().cells:
            if cell.cell_type != "code":
                continue
            try:
                reads = _gutenberg_reads(cell.source)
            except SyntaxError:
                continue
            if reads and "def load_gutenberg" not in cell.source:
                offenders.append(f"{chapter.relpath}: {reads}")
    for module in (ROOT / "tinybert").rglob("*.py"):
        if module.parent.name == "data":  # the registry itself names the files
            continue
        tree = ast.parse(module.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and node.name != "load_gutenberg":
                reads = _gutenberg_reads(ast.unparse(node))
                if reads and not any(isinstance(n, ast.FunctionDef) and n.name == "load_gutenberg"
                                     for n in ast.walk(node)):
                    offenders.append(f"{module.relative_to(ROOT)}:{node.name}: {reads}")
    assert not offenders, "read a Gutenberg file without load_gutenberg: " + "; ".join(offenders)


def test_the_check_catches_a_direct_read():
    assert _gutenberg_reads('text = fetch("gutenberg/1342").read_text()')
    assert _gutenberg_reads("text = open(root / 'pretraining/gutenberg/98-0.txt').read()")
    assert not _gutenberg_reads("text = load_gutenberg(1342)")


@pytest.mark.skipif(not HAS_DATA, reason="TINYBERT_DATA_DIR is not set: the books are not available offline")
def test_no_book_body_keeps_project_gutenbergs_wrapper():
    from tinybert.corpus import gutenberg_ebooks, load_gutenberg

    for ebook in gutenberg_ebooks():
        body = load_gutenberg(ebook)
        lowered = body.lower()
        assert "project gutenberg" not in lowered, f"eBook {ebook}: the body mentions Project Gutenberg"
        assert "*** start of" not in lowered and "*** end of" not in lowered
        assert not re.search(r"(?:^|\n\n)produced by ", lowered), f"eBook {ebook}: the volunteers' credit is left"
