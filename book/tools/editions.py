"""Hand-written: the editions made from the chapters — notebooks for Colab and nbval, and the
student edition (solutions replaced by stubs, solution prose removed).

Usage::

    python -m book.tools.editions notebooks --out _build/notebooks  # make notebooks
    python -m book.tools.editions nbval --out _build/nbval          # for pytest --nbval-lax
    python -m book.tools.editions student --out _build/student      # make student

Solutions follow nbgrader's convention: in a code cell tagged ``solution``, the lines between
``### BEGIN SOLUTION`` and ``### END SOLUTION`` are the reference answer. The student edition
replaces them with ``raise NotImplementedError(...)``, so the exercise's check (the cells
tagged ``check`` that follow) fails until the student writes an answer. The quiz cell at the
end of each chapter (tagged ``quiz``) keeps only fingerprints of its answers.
"""
from __future__ import annotations

import argparse
import copy
import re
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import jupytext
import nbformat
import yaml

from book.tools.chapters import ROOT, Chapter, cell_tags, chapters

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
DIRECTIVE = re.compile(r"^\s*(:{3,}|`{3,})\{(solution-start|solution-end)\}")


# --- solutions and stubs ------------------------------------------------------------------

def stub_solution(source: str, label: str = "this exercise") -> str:
    """Replace every BEGIN/END SOLUTION block by a stub that raises NotImplementedError."""
    out, inside = [], False
    for line in source.splitlines():
        if line.strip() == BEGIN:
            if inside:
                raise ValueError(f"{label}: nested {BEGIN}")
            inside = True
            indent = line[: len(line) - len(line.lstrip())]
            out.append(f"{indent}# YOUR CODE HERE")
            out.append(f'{indent}raise NotImplementedError("{label}: write your answer here")')
        elif line.strip() == END:
            if not inside:
                raise ValueError(f"{label}: {END} without {BEGIN}")
            inside = False
        elif not inside:
            out.append(line)
    if inside:
        raise ValueError(f"{label}: {BEGIN} without {END}")
    return "\n".join(out)


@dataclass
class CodingExercise:
    chapter: Chapter
    label: str
    solution: str  # source of the solution cell
    checks: list[str]  # sources of the check cells that follow it

    @property
    def stub(self) -> str:
        return stub_solution(self.solution, self.label)


def coding_exercises(chapter: Chapter) -> list[CodingExercise]:
    """Each solution cell with the check cells that follow it."""
    cells = chapter.read().cells
    found, label = [], None
    for index, cell in enumerate(cells):
        if cell.cell_type == "markdown":
            match = re.search(r"\{solution-start\}\s+(\S+)", cell.source)
            label = match.group(1) if match else label
        elif "solution" in cell_tags(cell):
            checks = []
            for later in cells[index + 1:]:
                if later.cell_type == "code" and "check" in cell_tags(later):
                    checks.append(later.source)
                elif later.cell_type == "code":
                    break
            found.append(CodingExercise(chapter, label or f"cell {index}", cell.source, checks))
    return found


# --- quizzes --------------------------------------------------------------------------

def hide_quiz_answers(source: str) -> str:
    """A quiz cell with each literal answer replaced by its fingerprint, and no
    explanations.

    ``choice(..., answer="b", explain="...")`` inside ``Quiz("ch03", [...])`` becomes
    ``choice(..., digest="1a2b3c4d", explain="")`` (tinybert.exercises.quiz): the quiz
    still says whether an answer is right, but the cell no longer shows it. Answers
    computed from the chapter's code (not literals) stay: they say where to look.
    """
    import ast

    from tinybert.exercises.quiz import _canonical_number, fingerprint

    data = source.encode("utf-8")
    starts = [0]
    for line in data.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))

    def span(node) -> tuple[int, int]:  # ast offsets count UTF-8 bytes
        return (starts[node.lineno - 1] + node.col_offset,
                starts[node.end_lineno - 1] + node.end_col_offset)

    edits = []
    for call in ast.walk(ast.parse(source)):
        if not (isinstance(call, ast.Call) and getattr(call.func, "id", None) == "Quiz"
                and len(call.args) == 2 and isinstance(call.args[0], ast.Constant)
                and isinstance(call.args[1], ast.List)):
            continue
        for index, question in enumerate(call.args[1].elts, start=1):
            kind = getattr(getattr(question, "func", None), "id", None)
            if kind not in ("choice", "number"):
                continue
            keywords = {k.arg: k for k in question.keywords}
            answer = keywords.get("answer")
            try:
                value = ast.literal_eval(answer.value) if answer else None
            except ValueError:
                value = None  # computed from the chapter's code: kept
            if value is not None:
                decimals = ast.literal_eval(keywords["decimals"].value) \
                    if "decimals" in keywords else 0
                canonical = (str(value) if kind == "choice"
                             else _canonical_number(value, decimals))
                digest = fingerprint(call.args[0].value, index, canonical)
                edits.append((*span(answer), f'digest="{digest}"'))
            if "explain" in keywords:
                edits.append((*span(keywords["explain"]), 'explain=""'))
    for start, end, text in sorted(edits, reverse=True):
        data = data[:start] + text.encode("utf-8") + data[end:]
    return data.decode("utf-8")


# --- the student edition ------------------------------------------------------------------

def _strip_solution_markdown(source: str, inside: bool) -> tuple[str, bool]:
    """Drop solution directives and the prose between them; return (text, still inside)."""
    kept, fence = [], None
    for line in source.splitlines():
        if fence is not None:  # the options block of a start/end directive
            if line.strip() == fence:
                fence = None
            continue
        match = DIRECTIVE.match(line)
        if match:
            fence = match.group(1)
            inside = match.group(2) == "solution-start"
            continue
        if not inside:
            kept.append(line)
    return "\n".join(kept).strip("\n"), inside


def student_notebook(notebook):
    """A copy of the chapter with solutions stubbed and solution prose removed."""
    student = copy.deepcopy(notebook)
    cells, inside, label = [], False, "exercise"
    for cell in student.cells:
        if cell.cell_type == "markdown":
            match = re.search(r"\{solution-start\}\s+(\S+)", cell.source)
            label = match.group(1) if match else label
            cell.source, inside = _strip_solution_markdown(cell.source, inside)
            if cell.source:
                cells.append(cell)
            continue
        tags = cell_tags(cell)
        if "solution" in tags:
            cell.source = stub_solution(cell.source, label)
            cells.append(cell)
        elif "quiz" in tags:
            cell.source = hide_quiz_answers(cell.source)
            cells.append(cell)
        elif inside:
            continue  # demonstration code that belongs to a solution
        else:
            if "check" in tags:  # expected to fail until the exercise is done
                cell.metadata["tags"] = tags + ["raises-exception"]
            cells.append(cell)
    student.cells = cells
    return student


# --- notebooks for Colab, Binder and nbval ------------------------------------------------

def repository_url() -> str:
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    return config["repository"]["url"].rstrip("/")


def source_commit() -> str:
    """The commit the notebooks are made from (the install cell pins tinybert to it)."""
    run = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True,
                         text=True)
    if run.returncode != 0:
        raise RuntimeError(f"notebooks: cannot read the commit of {ROOT} (git rev-parse "
                           f"HEAD: {run.stderr.strip()}); make them from a git checkout")
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                           cwd=ROOT, capture_output=True, text=True).stdout.strip()
    if dirty:
        print(f"notebooks: warning: uncommitted changes; the install cell pins commit "
              f"{run.stdout.strip()[:12]}, which does not hold them", file=sys.stderr)
    return run.stdout.strip()


def package_spec(commit: str | None = None) -> str:
    """pip's requirement for tinybert at ``commit`` (default: this checkout's)."""
    return f"tinybert @ git+{repository_url()}@{commit or source_commit()}"


# how the install cell names tinybert (the Colab rehearsal swaps it for a wheel)
INSTALL_SPEC = 'f"tinybert @ git+{REPOSITORY}@{COMMIT}"'


def torch_floor() -> str:
    """The lowest torch that pyproject.toml allows, e.g. '2.11'."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    floors = [re.fullmatch(r"torch\s*>=\s*([0-9.]+)", d.split(";")[0].strip())
              for d in project["dependencies"]]
    found = [m.group(1) for m in floors if m]
    if len(found) != 1:
        raise RuntimeError("pyproject.toml: expected one dependency 'torch>=X.Y'")
    return found[0]


def install_cell(commit: str | None = None) -> nbformat.NotebookNode:
    commit, floor = commit or source_commit(), torch_floor()
    source = f'''# On Colab, install tinybert at the commit these notebooks were made from. Colab's own
# torch, numpy, transformers... stay as they are: pip adds only what is missing.
import subprocess
import sys

REPOSITORY = "{repository_url()}"
COMMIT = "{commit}"

if "google.colab" in sys.modules:
    from importlib.metadata import version

    TORCH_FLOOR = ({", ".join(floor.split("."))})  # pyproject.toml: torch>={floor}
    found = version("torch").split("+")[0]
    if tuple(int(part) for part in found.split(".")[:2]) < TORCH_FLOOR:
        raise RuntimeError(
            f"this course needs torch >= {floor}, and this Colab runtime has {{found}}. "
            "Choose Runtime > Change runtime type > the latest runtime version, "
            "or run `pip install 'torch>={floor}'` in a cell, then Runtime > "
            "Restart session."
        )
    package = {INSTALL_SPEC}
    pip = [sys.executable, "-m", "pip", "install", "--quiet", package]
    subprocess.run(pip, check=True)'''
    return nbformat.v4.new_code_cell(source, metadata={"tags": ["colab-install"]})


def to_ipynb(notebook, path: Path) -> None:
    notebook = copy.deepcopy(notebook)
    notebook.metadata.pop("jupytext", None)
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, str(path))


def write_notebooks(out: Path, *, colab: bool) -> list[Path]:
    written = []
    commit = source_commit() if colab else None
    for chapter in chapters():
        notebook = chapter.read()
        if colab:
            notebook.cells.insert(0, install_cell(commit))
        target = out / "chapters" / f"{chapter.stem}.ipynb"
        to_ipynb(notebook, target)
        written.append(target)
    if colab:  # Binder builds its environment from this file on the notebooks branch
        # Binder has no GPU: torch's CPU build (hundreds of MB) rather than the CUDA one
        (out / "requirements.txt").write_text(
            "--index-url https://download.pytorch.org/whl/cpu\n"
            "--extra-index-url https://pypi.org/simple\n"
            f"{package_spec(commit)}\n"
        )
    return written


def write_student(out: Path) -> None:
    """Student notebooks in out/notebooks and a book source tree in out/src."""
    if out.exists():
        shutil.rmtree(out)
    src = out / "src"
    shutil.copytree(ROOT / "book", src / "book",
                    ignore=shutil.ignore_patterns("_vendor", "__pycache__"))
    (src / "book" / "_vendor").symlink_to(ROOT / "book" / "_vendor")
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    config["title"] += " (student edition)"
    config["sphinx"]["config"]["hide_solutions"] = True
    # The budgets were measured on the chapters; the stubs change their code but not their cost.
    config["sphinx"]["config"]["tinybert_budget_stale_check"] = False
    (src / "_config.yml").write_text(yaml.safe_dump(config, sort_keys=False))
    shutil.copy2(ROOT / "_toc.yml", src / "_toc.yml")
    shutil.copy2(ROOT / "pyproject.toml", src / "pyproject.toml")  # the install cell's floor
    # the result files that pages quote with the {recorded} role (the project briefs)
    # (those inside the package, tinybert/shipped/, are read from the importable package)
    for result in [*ROOT.glob("experiments/*.json"), *ROOT.glob("benchmarks/results/*.json")]:
        target = src / result.relative_to(ROOT)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(result, target)
    for chapter in chapters():
        student = student_notebook(chapter.read())
        to_ipynb(student, out / "notebooks" / f"{chapter.stem}.ipynb")
        (src / "chapters").mkdir(parents=True, exist_ok=True)
        jupytext.write(student, src / "chapters" / chapter.path.name, fmt="md:myst")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("edition", choices=["notebooks", "nbval", "student"])
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.edition == "student":
        write_student(args.out)
        print(f"student edition: notebooks in {args.out / 'notebooks'}, "
              f"book sources in {args.out / 'src'}")
    else:
        written = write_notebooks(args.out, colab=args.edition == "notebooks")
        print(f"wrote {len(written)} notebook(s) to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
