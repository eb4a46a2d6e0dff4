"""The repository's address is written once, as repository.url in _config.yml, and
everything else reads it from there: the pages (the `repository_url` substitution), the
notebooks' install cell and the launch buttons, which open the `notebooks` branch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import quote, urlsplit

import pytest
import yaml

from book.tools import editions
from book.tools.chapters import ROOT

sys.path.insert(0, str(ROOT / "book" / "_ext"))
import tinybert_launch  # noqa: E402

CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())

# Files that must write the address themselves, and why.
MAY_NAME_IT = {
    "_config.yml": "the one place it is written",
    "LICENSE-CONTENT": "a plain-text licence, read where nothing computes it; its "
    "credit line names where the original course is published, which a fork keeps, "
    "as CC BY asks for credit to the original",
}


def repository_url() -> str:
    url = (CONFIG.get("repository") or {}).get("url")
    if not url:
        pytest.fail("_config.yml lacks repository.url, the course repository's address")
    return url.rstrip("/")


def owner_and_name() -> str:
    """'owner/name' of the repository: found in any address that names it (the
    repository's, Colab's, Binder's), in any letter case."""
    return urlsplit(repository_url()).path.strip("/")


def project_files() -> list[str]:
    """Tracked files, and new ones that git does not ignore."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return sorted(set(filter(None, listed.stdout.split("\0"))))


def files_naming(needle: str, root: Path, names: list[str]) -> list[str]:
    """The files among ``names`` (relative to ``root``) that contain ``needle``."""
    needle_bytes = needle.lower().encode()
    found = []
    for name in names:
        path = root / name
        if path.is_file() and needle_bytes in path.read_bytes().lower():
            found.append(name)
    return found


def test_the_address_is_written_only_in_config():
    found = files_naming(owner_and_name(), ROOT, project_files())
    others = [name for name in found if name not in MAY_NAME_IT]
    assert not others, (
        f"{others} write the repository's address ({repository_url()}): read it from "
        "repository.url in _config.yml (pages: {{ repository_url }})"
    )
    # each exception is still needed, and _config.yml writes it once
    assert sorted(found) == sorted(MAY_NAME_IT)
    config_text = (ROOT / "_config.yml").read_text().lower()
    assert config_text.count(owner_and_name().lower()) == 1


def test_the_search_finds_a_planted_address(tmp_path):
    (tmp_path / "page.md").write_text(f"Clone {repository_url().upper()}/ to start.")
    (tmp_path / "other.md").write_text("Nothing to see here.")
    names = ["page.md", "other.md", "deleted.md"]
    assert files_naming(owner_and_name(), tmp_path, names) == ["page.md"]


def test_pages_and_notebooks_read_the_address_from_config():
    substitutions = CONFIG["sphinx"]["config"]["myst_substitutions"]
    assert substitutions["repository_url"] == CONFIG["repository"]["url"]
    for page in ["setup.md", "licences.md"]:
        assert "repository_url" in (ROOT / "book" / page).read_text(), page
    assert editions.repository_url() == repository_url()


def launch_urls(pagename: str) -> dict[str, str]:
    """The launch buttons of ``pagename`` after book/_ext/tinybert_launch.py ran."""
    app = SimpleNamespace(
        config=SimpleNamespace(html_theme_options={"repository_url": repository_url()})
    )
    buttons = [{"text": name, "url": "theme's"} for name in ("Colab", "Binder")]
    context = {"header_buttons": [{"label": "launch-buttons", "buttons": buttons}]}
    tinybert_launch._rewrite_launch_buttons(app, pagename, "page.html", context, None)
    return {button["text"]: button["url"] for button in buttons}


def test_launch_buttons_open_the_notebooks_that_the_branch_holds(tmp_path):
    """`make notebooks` writes chapters/NN_name.ipynb, which the publish workflow pushes
    to the root of the notebooks branch; each chapter's buttons open its own."""
    repo = owner_and_name()
    branch = tinybert_launch.NOTEBOOK_BRANCH
    written = editions.write_notebooks(tmp_path, colab=True)
    assert written
    for path in written:
        notebook = path.relative_to(tmp_path).as_posix()  # chapters/NN_name.ipynb
        urls = launch_urls(notebook.removesuffix(".ipynb"))
        colab = (
            f"https://colab.research.google.com/github/{repo}/blob/{branch}/{notebook}"
        )
        assert urls["Colab"] == colab
        binder = f"https://mybinder.org/v2/gh/{repo}/{branch}?urlpath="
        assert urls["Binder"] == binder + quote(f"tree/{notebook}")
    assert launch_urls("book/setup") == {"Colab": "theme's", "Binder": "theme's"}
