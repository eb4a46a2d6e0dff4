"""The notebooks for Colab/Binder/nbval and the student edition are made from the chapters."""
import ast
from pathlib import Path

import nbformat
import pytest

from book.tools import editions
from book.tools.chapters import chapters

CHAPTERS = chapters()


def test_colab_notebooks_install_tinybert_but_not_torch(tmp_path):
    written = editions.write_notebooks(tmp_path, colab=True)
    assert len(written) == len(CHAPTERS)
    for path, chapter in zip(written, CHAPTERS):
        notebook = nbformat.read(str(path), as_version=4)
        nbformat.validate(notebook)
        first = notebook.cells[0]
        assert "colab-install" in first.metadata["tags"]
        assert 'if "google.colab" in sys.modules:' in first.source
        installs = [node for node in ast.walk(ast.parse(first.source))
                    if isinstance(node, ast.List)]
        packages = [elt.value for lst in installs for elt in lst.elts
                    if isinstance(elt, ast.Constant)]
        assert any(p.startswith("tinybert @ git+") for p in packages)
        assert not any(p.split("=")[0].split("<")[0].split(">")[0].strip() in
                       {"torch", "numpy", "matplotlib"} for p in packages), packages
        assert "-U" not in packages and "--upgrade" not in packages
        assert len(notebook.cells) == len(chapter.read().cells) + 1
    assert "tinybert @ git+" in (tmp_path / "requirements.txt").read_text()


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
