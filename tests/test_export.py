"""The package is what the chapters export: no drift, headers, back-links, __all__."""
import shutil
import textwrap

import pytest

from book.tools import export
from book.tools.chapters import Chapter, chapters

CHAPTER = textwrap.dedent('''\
    ---
    jupytext:
      text_representation:
        extension: .md
        format_name: myst
    kernelspec:
      display_name: Python 3
      language: python
      name: python3
    tinybert:
      module: toy
    ---

    # A toy chapter

    ## Imports

    ```{code-cell} ipython3
    :tags: [export]
    from __future__ import annotations
    import math
    ```

    ## The square block

    ```{code-cell} ipython3
    :tags: [export]
    SCALE = 2.0


    def square(x):
        return SCALE * x * x
    ```

    ```{code-cell} ipython3
    assert square(3) == 18  # a teaching cell: not exported
    ```

    ## Elsewhere

    ```{code-cell} ipython3
    :tags: ["export:extras.more"]
    def _helper():
        return math.pi
    ```
    ''')


def test_package_matches_chapters():
    problems = export.drift()
    assert problems == [], "\n".join(problems)


def test_every_chapter_module_is_generated():
    for path in export.expected_files():
        text = path.read_text()
        head = "".join(text.splitlines(keepends=True)[:2])
        assert text.startswith(export.MARKER) and "not this file" in head


def test_render_adds_header_backlinks_and_all(tmp_path, monkeypatch):
    monkeypatch.setitem(export.MODULES, "toy", "A toy module: one square block.")
    (tmp_path / "chapters").mkdir()
    md = tmp_path / "chapters" / "99_toy.md"
    md.write_text(CHAPTER)
    pieces = export.collect([Chapter(md)])
    assert set(pieces) == {"toy", "extras.more"}
    text = export.render("toy", pieces["toy"])
    lines = text.splitlines()
    assert lines[0].startswith(export.MARKER) and "chapters/99_toy.md" in lines[0]
    assert text.count("from __future__ import annotations") == 1
    assert "__all__ = ['SCALE', 'square']" in text
    assert '"""A toy module: one square block.' in text     # the docstring from the map
    link = ['# Built in chapter 99, section "The square block":',
            "# chapters/99_toy.html#the-square-block"]
    at = lines.index("def square(x):")
    assert lines[at - 2:at] == link
    assert max(map(len, lines)) <= 88
    assert "not exported" not in text
    namespace = {}
    exec(compile(text, "toy.py", "exec"), namespace)
    assert namespace["square"](3) == 18


def test_an_unmapped_module_is_refused(tmp_path):
    (tmp_path / "chapters").mkdir()
    md = tmp_path / "chapters" / "99_toy.md"
    md.write_text(CHAPTER)
    pieces = export.collect([Chapter(md)])
    with pytest.raises(ValueError, match="add it to MODULES"):
        export.render("toy", pieces["toy"])


def test_package_init_reexports_lazily_and_refuses_a_clash(monkeypatch):
    monkeypatch.setitem(export.PACKAGES, "extras", "Extras.")
    one = "__all__ = ['alpha', 'beta']\nalpha = 1\nbeta = 2\n"
    two = "__all__ = ['gamma']\ngamma = 3\n"
    text = export.render_package("extras", {"extras.one": one, "extras.two": two})
    assert "'one': ['alpha', 'beta']," in text and "'two': ['gamma']," in text
    namespace = {"lazy_reexports": lambda package, modules: (None, None)}
    exec(text.replace("from tinybert.reexport import lazy_reexports", ""), namespace)
    assert namespace["__all__"] == ["alpha", "beta", "gamma"]
    assert "\nimport extras" not in text and "from extras" not in text   # lazy
    with pytest.raises(ValueError, match="public in both"):
        export.render_package("extras", {"extras.one": one, "extras.two": one})


def test_a_hand_edit_is_detected(tmp_path, monkeypatch):
    package = tmp_path / "tinybert"
    shutil.copytree(export.PACKAGE, package)
    monkeypatch.setattr(export, "PACKAGE", package)
    assert export.drift() == []
    target = next(iter(export.expected_files()))
    target.write_text(target.read_text() + "\nHAND_EDIT = 1\n")
    problems = export.drift()
    assert len(problems) == 1 and "differs from its chapter" in problems[0]


def test_a_stale_generated_module_is_detected(tmp_path, monkeypatch):
    package = tmp_path / "tinybert"
    shutil.copytree(export.PACKAGE, package)
    monkeypatch.setattr(export, "PACKAGE", package)
    (package / "orphan.py").write_text(f"{export.MARKER} from chapters/00_gone.md\n")
    problems = export.drift()
    assert len(problems) == 1 and "no chapter exports it" in problems[0]


def test_chapters_import_rather_than_redefine():
    """A name exported by one chapter is not defined again by a later chapter's cells."""
    owner = {}
    for module, pieces in export.collect(chapters()).items():
        for piece in pieces:
            for name in export._with_backlinks(piece)[1]:
                assert name not in owner, f"{name} exported by {owner.get(name)} and {module}"
                owner[name] = module


def test_later_chapters_do_not_redefine_earlier_exports():
    """Later chapters import what earlier chapters exported; they never define it again."""
    import ast

    exported_by = {}  # name -> chapter number
    for chapter in chapters():
        pieces = export.collect([chapter])
        for cell in chapter.read().cells:
            if cell.cell_type != "code" or cell.source.lstrip().startswith(("%", "!")):
                continue
            for node in ast.parse(cell.source).body:
                if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                    earlier = exported_by.get(node.name)
                    assert earlier is None or earlier == chapter.number, (
                        f"{chapter.relpath} defines {node.name}, which chapter {earlier} "
                        "exports: import it from tinybert instead")
        for module_pieces in pieces.values():
            for piece in module_pieces:
                for name in export._with_backlinks(piece)[1]:
                    exported_by.setdefault(name, chapter.number)


def test_a_generated_module_imports_exactly_what_it_uses():
    from book.tools.export import prune_imports

    source = "\n".join([
        "from __future__ import annotations",
        "import json",
        "import torch",
        "from torch import nn",
        "from pathlib import Path, PurePath  # a comment",
        "from typing import TYPE_CHECKING",
        "import torch",
        "",
        "def f(x: 'nn.Module') -> Path:",
        "    import shutil",
        "    return torch.zeros(1)",
    ])
    pruned = prune_imports(source)
    assert "import json" not in pruned  # unused
    assert "TYPE_CHECKING" not in pruned  # unused
    assert "from torch import nn" in pruned  # used in a string annotation
    assert "from pathlib import Path\n" in pruned and "PurePath" not in pruned
    assert pruned.count("import torch\n") == 1  # the second import of torch goes
    assert "    import shutil" in pruned  # imports inside functions are left alone
    assert pruned.startswith("from __future__ import annotations")


def test_every_generated_module_passes_the_unused_import_check():
    """ruff's F401 over the package (pyproject.toml selects it), generated modules
    included."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--select", "F401", "tinybert"],
        cwd=export.ROOT, capture_output=True, text=True,
    )
    assert done.returncode == 0, done.stdout[-2000:]
