"""Hand-written Sphinx extension: point the Colab and Binder launch buttons at notebooks.

The chapters are MyST Markdown, which Colab cannot open. ``make notebooks`` writes one
``.ipynb`` per chapter (with a first cell that installs tinybert on Colab), and those are
published at the root of the repository's ``notebooks`` branch (see
book/how-this-book-is-made.md). This extension runs after sphinx-book-theme has built its
launch buttons and rewrites their addresses to those notebooks.
"""
from __future__ import annotations

from urllib.parse import quote

from sphinx.application import Sphinx

NOTEBOOK_BRANCH = "notebooks"


def _repo_parts(app: Sphinx) -> tuple[str, str] | None:
    url = app.config.html_theme_options.get("repository_url", "")
    parts = url.rstrip("/").split("/")
    if "github.com" not in url or len(parts) < 2:
        return None
    return parts[-2], parts[-1]


def _rewrite_launch_buttons(app: Sphinx, pagename: str, templatename: str, context: dict,
                            doctree) -> None:
    repo = _repo_parts(app)
    if repo is None or not pagename.startswith("chapters/"):
        return
    org, name = repo
    notebook = f"{pagename}.ipynb"
    for group in context.get("header_buttons", []):
        if group.get("label") != "launch-buttons":
            continue
        for button in group.get("buttons", []):
            if button.get("text") == "Colab":
                button["url"] = (f"https://colab.research.google.com/github/{org}/{name}"
                                 f"/blob/{NOTEBOOK_BRANCH}/{notebook}")
            elif button.get("text") == "Binder":
                button["url"] = (f"https://mybinder.org/v2/gh/{org}/{name}/{NOTEBOOK_BRANCH}"
                                 f"?urlpath={quote('tree/' + notebook)}")


def setup(app: Sphinx) -> dict:
    # sphinx-book-theme adds its launch buttons at priority 501; run after it.
    app.connect("html-page-context", _rewrite_launch_buttons, priority=510)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
