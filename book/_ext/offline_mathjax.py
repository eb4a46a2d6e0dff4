"""Hand-written Sphinx extension: serve MathJax 3 from the built site itself, so math is
typeset with no network.

MathJax comes from the npm package pinned in ``book/_vendor/package.json`` (``make mathjax``
installs it). Its ``es5`` tree is copied to ``_static/mathjax/`` in the output — whole, minus
the combined bundles we do not load, because MathJax fetches its ``input/`` extensions,
``output/`` fonts and menu components on demand. It is copied straight into the output (not
into a source ``_static`` folder) because Jupyter Book adds every ``.js`` file found in a
source ``_static`` folder to every page.
"""
from __future__ import annotations

import shutil
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.errors import ExtensionError

ENTRY = "tex-mml-chtml.js"  # the same bundle Sphinx loads from its default CDN address
UNUSED_BUNDLES = ["tex-chtml-full-speech.js", "tex-chtml-full.js", "tex-chtml.js",
                  "tex-svg-full.js", "tex-svg.js", "tex-mml-svg.js", "mml-chtml.js",
                  "mml-svg.js", "node-main.js"]


def _mathjax_source(app: Sphinx) -> Path:
    root = Path(app.confdir)
    source = root / "book" / "_vendor" / "node_modules" / "mathjax" / "es5"
    if not (source / ENTRY).is_file():
        raise ExtensionError(
            f"MathJax is not installed: expected {source / ENTRY}. "
            "Run `make mathjax` (it runs `npm ci` in book/_vendor) and build again.")
    return source


def _use_local_mathjax(app: Sphinx, config) -> None:
    # A relative mathjax_path is resolved against the site's _static folder by Sphinx.
    config.mathjax_path = f"mathjax/{ENTRY}"


def _copy_mathjax(app: Sphinx) -> None:
    if app.builder.format != "html":
        return
    source = _mathjax_source(app)
    target = Path(app.outdir) / "_static" / "mathjax"
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(source, target, ignore=shutil.ignore_patterns(*UNUSED_BUNDLES))


def setup(app: Sphinx) -> dict:
    app.connect("config-inited", _use_local_mathjax)
    app.connect("builder-inited", _copy_mathjax)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
