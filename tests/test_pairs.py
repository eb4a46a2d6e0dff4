"""Every chapter's .md and .py are the same notebook (jupytext's comparison, not --diff)."""
import shutil

import pytest

from book.tools.chapters import Chapter, chapters
from book.tools.pairs import orphans, pair_problems

CHAPTERS = chapters()


def test_there_are_chapters():
    assert CHAPTERS, "no chapters found in chapters/"


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda c: c.stem)
def test_pair_in_sync(chapter):
    assert pair_problems(chapter) == []


def test_no_orphan_py_files():
    assert orphans() == []


def test_a_changed_py_is_detected(tmp_path):
    chapter = CHAPTERS[0]
    md = tmp_path / chapter.path.name
    shutil.copy(chapter.path, md)
    py_text = chapter.paired_py.read_text()
    marker = "# %%\n"
    index = py_text.index(marker, py_text.index(marker) + 1)  # second cell
    md.with_suffix(".py").write_text(py_text[:index] + "# %%\nx = 'edited'\n\n" + py_text[index:])
    problems = pair_problems(Chapter(md))
    assert problems and "differ" in problems[0]


def test_a_missing_py_is_detected(tmp_path):
    md = tmp_path / CHAPTERS[0].path.name
    shutil.copy(CHAPTERS[0].path, md)
    assert "no paired" in pair_problems(Chapter(md))[0]
