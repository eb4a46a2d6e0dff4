"""The GitHub Actions workflows pass actionlint, which is shown to catch mistakes
planted in them (so the check cannot pass by reading nothing), and the publish workflow
pushes the notebooks to the branch that the launch buttons open."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from book.tools.chapters import ROOT

sys.path.insert(0, str(ROOT / "book" / "_ext"))
import tinybert_launch  # noqa: E402

WORKFLOWS = ROOT / ".github" / "workflows"
PUBLISH = WORKFLOWS / "publish.yml"


def actionlint(*paths: Path) -> subprocess.CompletedProcess:
    """The pinned actionlint (constraints.txt) on ``paths``. Its ShellCheck and pyflakes
    checks are switched off, so that the verdict does not depend on what else a machine
    happens to have installed."""
    here = Path(sys.executable).parent  # the virtual environment's bin folder
    binary = shutil.which("actionlint", path=str(here)) or shutil.which("actionlint")
    if binary is None:
        pytest.fail(
            "actionlint is not installed; install the test extra: "
            "pip install -c constraints.txt -e '.[test]'"
        )
    command = [binary, "-no-color", "-oneline", "-shellcheck=", "-pyflakes="]
    return subprocess.run(
        [*command, *map(str, paths)], capture_output=True, text=True, timeout=120
    )


def test_the_workflows_pass_actionlint():
    workflows = sorted(WORKFLOWS.glob("*.y*ml"))
    assert PUBLISH in workflows
    result = actionlint(*workflows)
    assert result.returncode == 0, f"actionlint:\n{result.stdout}{result.stderr}"


# Each planted mistake: the text it replaces (once), the mistake, and what actionlint
# must say about it.
MISTAKES = {
    "needs a missing job": ("needs: build", "needs: biuld", '"biuld"'),
    "undefined context": ("steps.deployment", "step.deployment", '"step"'),
    "unknown permission": ("pages: write", "page: write", '"page"'),
    "unknown action input": ("retention-days:", "retention-dayz:", '"retention-dayz"'),
    "deprecated runtime": ("actions/checkout@v5", "actions/checkout@v4", "node20"),
}


@pytest.mark.parametrize("mistake", MISTAKES)
def test_actionlint_catches_a_mistake_planted_in_the_workflow(mistake, tmp_path):
    original, planted, message = MISTAKES[mistake]
    text = PUBLISH.read_text()
    assert original in text, f"publish.yml no longer has {original!r} to plant into"
    broken = tmp_path / "publish.yml"
    broken.write_text(text.replace(original, planted, 1))
    result = actionlint(broken)
    output = result.stdout + result.stderr
    assert result.returncode == 1, f"actionlint missed {mistake}:\n{output}"
    assert message in output, output


def test_publish_pushes_the_notebooks_to_the_branch_the_launch_buttons_open():
    workflow = yaml.safe_load(PUBLISH.read_text())
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    on = workflow[True]  # YAML 1.1 reads the key `on` as true
    assert on["push"]["branches"] == [config["repository"]["branch"]]
    build, notebooks = workflow["jobs"]["build"], workflow["jobs"]["notebooks"]
    runs = [step.get("run") for step in build["steps"]]
    assert "make book" in runs and "make notebooks" in runs
    uploaded = {
        step["with"]["path"]
        for step in build["steps"]
        if step.get("uses", "").startswith("actions/upload-artifact@")
    }
    # `make notebooks` writes there (Makefile), and the notebooks job pushes it
    assert uploaded == {"_build/notebooks"}
    assert "--out _build/notebooks" in (ROOT / "Makefile").read_text()
    assert notebooks["env"]["BRANCH"] == tinybert_launch.NOTEBOOK_BRANCH
    assert notebooks["needs"] == "build"
    assert notebooks["permissions"] == {"contents": "write"}
    assert workflow["permissions"] == {"contents": "read"}
