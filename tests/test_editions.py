"""The notebooks for Colab/Binder/nbval and the student edition are made from the chapters."""
import ast
from pathlib import Path

import nbformat
import pytest

from book.tools import editions
from book.tools.chapters import chapters

CHAPTERS = chapters()


def run_install_cell(source, monkeypatch, torch_version):
    """Execute the install cell as Colab would (google.colab imported, pip faked) with
    ``torch_version`` installed; return the pip commands it ran."""
    import importlib.metadata
    import subprocess
    import sys
    import types

    commands = []
    monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
    monkeypatch.setattr(subprocess, "run", lambda cmd, **kw: commands.append(cmd))
    real_version = importlib.metadata.version
    monkeypatch.setattr(importlib.metadata, "version",
                        lambda name: torch_version if name == "torch" else real_version(name))
    exec(compile(source, "install-cell", "exec"), {})
    return commands


def test_colab_notebooks_install_tinybert_at_this_commit_but_not_torch(tmp_path, monkeypatch):
    written = editions.write_notebooks(tmp_path, colab=True)
    assert len(written) == len(CHAPTERS)
    commit = editions.source_commit()
    assert len(commit) == 40
    for path, chapter in zip(written, CHAPTERS):
        notebook = nbformat.read(str(path), as_version=4)
        nbformat.validate(notebook)
        first = notebook.cells[0]
        assert "colab-install" in first.metadata["tags"]
        assert first.source.count(editions.INSTALL_SPEC) == 1  # what the rehearsal swaps
        assert len(notebook.cells) == len(chapter.read().cells) + 1
    source = nbformat.read(str(written[0]), as_version=4).cells[0].source
    # Colab's torch is new enough: one pip install of tinybert at this commit, nothing else
    [pip] = run_install_cell(source, monkeypatch, "2.14.1+cu126")
    assert pip[1:5] == ["-m", "pip", "install", "--quiet"]
    assert pip[5] == f"tinybert @ git+{editions.repository_url()}@{commit}"
    assert len(pip) == 6
    requirements = (tmp_path / "requirements.txt").read_text()
    assert f"tinybert @ git+{editions.repository_url()}@{commit}" in requirements


def test_the_install_cell_refuses_a_torch_below_the_floor(monkeypatch):
    source = editions.install_cell("0" * 40).source
    floor = editions.torch_floor()
    major, minor = map(int, floor.split("."))
    below = f"{major}.{minor - 1}.3" if minor else f"{major - 1}.99.0"
    with pytest.raises(RuntimeError, match=f"needs torch >= {floor}.*has {below}"):
        run_install_cell(source, monkeypatch, below)
    assert run_install_cell(source, monkeypatch, f"{floor}.0")  # the floor itself is fine
    # outside Colab the cell does nothing
    import subprocess
    commands = []
    monkeypatch.setattr(subprocess, "run", lambda cmd, **kw: commands.append(cmd))
    monkeypatch.delitem(__import__("sys").modules, "google.colab", raising=False)
    exec(compile(source, "install-cell", "exec"), {})
    assert commands == []


def test_nbval_notebooks_are_the_chapters(tmp_path):
    written = editions.write_notebooks(tmp_path, colab=False)
    for path, chapter in zip(written, CHAPTERS):
        notebook = nbformat.read(str(path), as_version=4)
        assert [c.source for c in notebook.cells] == [c.source for c in chapter.read().cells]


def test_student_markdown_loses_solution_prose_only():
    source = ("Before.\n\n::::{solution-start} ex-1\n:class: dropdown\n::::\n"
              "The answer is 42.\n::::{solution-end}\n::::\n\nAfter.")
    text, inside = editions._strip_solution_markdown(source, False)
    assert "42" not in text and "Before." in text and "After." in text and not inside
    text, inside = editions._strip_solution_markdown("::::{solution-start} ex\n::::\nx", False)
    assert text == "" and inside


@pytest.mark.site
def test_student_site_has_no_solutions(tmp_path):
    """Build the student edition's website (without executing it) and look for solutions."""
    import subprocess
    import sys

    import yaml

    out = tmp_path / "student"
    editions.write_student(out)
    config_path = out / "src" / "_config.yml"
    config = yaml.safe_load(config_path.read_text())
    config["execute"]["execute_notebooks"] = "off"
    # without execution the diagrams (figures drawn by code cells) are not made, so the
    # prose's {numref} to them has nothing to point at; make student executes them
    sphinx = config["sphinx"]["config"]
    sphinx["suppress_warnings"] = [*sphinx.get("suppress_warnings", []), "ref.numref"]
    config_path.write_text(yaml.safe_dump(config))
    jupyter_book = Path(sys.executable).parent / "jupyter-book"
    result = subprocess.run([str(jupyter_book), "build", str(out / "src"), "--path-output", str(out), "-W", "-n",
                             "--keep-going"], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    html = "\n".join(p.read_text() for p in (out / "_build" / "html" / "chapters").glob("*.html"))
    assert "exercise" in html
    assert "BEGIN SOLUTION" not in html and 'class="solution' not in html
    assert "NotImplementedError" in html
    assert len(list((out / "notebooks").glob("*.ipynb"))) == len(CHAPTERS)
