"""The provenance footer (book/_ext/provenance.py): each executed chapter page says when and with
what it was executed. The last test builds a one-page Sphinx site that executes a notebook."""
from __future__ import annotations

import os
import platform
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import tinybert
from book.tools.chapters import ROOT

sys.path.insert(0, str(ROOT / "book" / "_ext"))
import provenance  # noqa: E402

REPORT = {"tinybert": "0.1.0", "torch": "2.13.0+cpu", "python": "3.11.7", "device": "cpu",
          "gpu": None, "cpu_count": 2, "quick": False}


def test_footer_of_an_executed_page():
    executed = {"mtime": 1_790_000_000.0, "runtime": 42.4, "method": "force", "succeeded": True}
    text = provenance.footer_text(executed, REPORT)
    assert text.startswith("This page was executed on 2026-09-21 ")  # the UTC date of that time
    assert " UTC in 42 s, in normal mode, with tinybert 0.1.0, PyTorch 2.13.0+cpu and Python " \
           "3.11.7, on the CPU (2 cores)." in text
    quick = provenance.footer_text(executed, {**REPORT, "quick": True})
    assert "in quick mode (TINYBERT_QUICK=1)" in quick
    gpu = provenance.footer_text(executed, {**REPORT, "device": "cuda", "gpu": "NVIDIA H100"})
    assert "on a GPU (NVIDIA H100)" in gpu
    cached = provenance.footer_text({**executed, "method": "cache"}, REPORT)
    assert "(outputs from the cache execution record)" in cached


def test_footer_of_a_page_that_was_not_executed_claims_no_run():
    for executed in (None, {}):
        text = provenance.footer_text(executed, REPORT)
        assert text.startswith("The code on this page was not executed when this page was built")
        assert "executed on" not in text


def test_probe_reports_this_environment():
    report = provenance.probe(sys.executable)
    assert report["tinybert"] == tinybert.__version__
    assert report["torch"] == torch.__version__
    assert report["python"] == platform.python_version()
    assert report["device"] in {"cpu", "cuda", "mps"}
    assert isinstance(report["quick"], bool)


def test_probe_follows_quick_mode(monkeypatch):
    monkeypatch.setenv("TINYBERT_QUICK", "1")
    assert provenance.probe(sys.executable)["quick"] is True


def test_probe_failure_is_an_error_that_names_the_interpreter(tmp_path):
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\necho broken >&2\nexit 3\n")
    fake.chmod(0o755)
    with pytest.raises(RuntimeError, match="provenance probe failed"):
        provenance.probe(str(fake))


def test_the_book_kernel_runs_an_interpreter_that_exists():
    python = provenance.kernel_python("python3")
    assert Path(python).exists()


def test_a_built_page_carries_its_footer(tmp_path):
    """Build a tiny site with myst-nb executing one notebook page, with the extension on."""
    source = tmp_path / "src"
    (source / "chapters").mkdir(parents=True)
    (source / "conf.py").write_text(textwrap.dedent(f"""\
        import sys
        sys.path.insert(0, {str(ROOT / "book" / "_ext")!r})
        extensions = ["myst_nb", "provenance"]
        nb_execution_mode = "force"
        exclude_patterns = ["_build"]
        """))
    (source / "index.md").write_text("# Home\n\n```{toctree}\nchapters/01_demo\nother\n```\n")
    (source / "other.md").write_text("# Not a chapter\n\nNo footer here.\n")
    (source / "chapters" / "01_demo.md").write_text(textwrap.dedent("""\
        ---
        jupytext:
          text_representation:
            extension: .md
            format_name: myst
        kernelspec:
          display_name: Python 3
          language: python
          name: python3
        ---
        # Demo

        ```{code-cell} ipython3
        print(6 * 7)
        ```
        """))
    out = tmp_path / "html"
    result = subprocess.run([sys.executable, "-m", "sphinx", "-b", "html", "-W", "-q", str(source),
                             str(out)], capture_output=True, text=True,
                            env={**os.environ, "TINYBERT_QUICK": "1"})
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    page = (out / "chapters" / "01_demo.html").read_text()
    assert "42" in page, "the notebook was not executed"
    assert 'class="tinybert-provenance' in page
    assert "This page was executed on " in page and "in quick mode" in page
    assert f"PyTorch {torch.__version__}" in page and f"tinybert {tinybert.__version__}" in page
    assert f"Python {platform.python_version()}" in page
    assert "tinybert-provenance" not in (out / "other.html").read_text()
