"""Hand-written: facts about the course read from the chapters themselves, for the pages that
describe the course (the instructor guide, the credits) and for the tests that keep the
chapters' own notes honest.

Everything here is computed from the chapter files and ``_toc.yml``: the chapters in the book,
their titles, their "What you will learn" lists, their exercises and automatic checks, the
papers they cite, the datasets they read, and what they import from earlier chapters.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import yaml

from book.tools.chapters import ROOT, Chapter, cell_tags, chapters, headings
from book.tools.editions import coding_exercises

TINYBERT = "tinybert."


def book_chapters(root: Path = ROOT) -> list[Chapter]:
    """The chapters listed in ``_toc.yml``, in the book's order (drafts not yet listed are left out)."""
    toc = yaml.safe_load((root / "_toc.yml").read_text())
    files: list[str] = []

    def walk(node):
        if isinstance(node, dict):
            if isinstance(node.get("file"), str):
                files.append(node["file"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(toc)
    by_doc = {f"chapters/{c.stem}": c for c in chapters(root)}
    return [by_doc[f.removesuffix(".md")] for f in files if f.removesuffix(".md") in by_doc]


def docname(chapter: Chapter) -> str:
    return f"chapters/{chapter.stem}"


def _markdown(chapter: Chapter) -> list[str]:
    return [c.source for c in chapter.read().cells if c.cell_type == "markdown"]


def title(chapter: Chapter) -> str:
    for source in _markdown(chapter):
        for level, text in headings(source):
            if level == 1:
                return text
    return chapter.stem


def learning_goals(chapter: Chapter) -> list[str]:
    """The bullets of the chapter's "What you will learn" list, as MyST Markdown."""
    for source in _markdown(chapter):
        if "**What you will learn**" in source:
            lines = source.splitlines()
            start = next(i for i, ln in enumerate(lines) if ln.strip() == "**What you will learn**")
            goals: list[str] = []
            for line in lines[start + 1:]:
                if line.startswith("- "):
                    goals.append(line[2:].strip())
                elif line.startswith("  ") and goals and line.strip():
                    goals[-1] += " " + line.strip()
                elif line.strip() and goals:
                    break
            return goals
    return []


def uses_note(chapter: Chapter) -> str:
    """The paragraph that starts with **Uses** (the chapter's list of what it imports), or ''."""
    for source in _markdown(chapter):
        for paragraph in re.split(r"\n\s*\n", source):
            if paragraph.lstrip().startswith("**Uses"):
                return paragraph.strip()
    return ""


KINDS = ("concept", "derivation", "coding", "experiment")
RUBRIC = "**Rubric** (what a full answer contains):"


@dataclass(frozen=True)
class Exercise:
    label: str
    title: str             # the bold first sentence, without its final full stop
    checks: tuple[str, ...]  # the check functions that test it automatically (empty: none)
    difficulty: int | None = None  # 1 (routine) to 3 (hard), ``:difficulty:``
    minutes: int | None = None     # estimated time for a student, ``:minutes:``
    kind: str | None = None        # one of KINDS, ``:kind:``
    rubric: str = ""               # what a full answer contains (open answers)

    @property
    def auto_checked(self) -> bool:
        return bool(self.checks)

    @property
    def points(self) -> int:
        """What the exercise is worth in the nbgrader edition and the grade table."""
        return self.difficulty or 1

    def problems(self) -> list[str]:
        """What is missing or wrong in the exercise's metadata (empty: nothing)."""
        found = []
        if self.difficulty not in (1, 2, 3):
            found.append(f":difficulty: must be 1, 2 or 3, got {self.difficulty!r}")
        if not isinstance(self.minutes, int) or not 1 <= self.minutes <= 240:
            found.append(f":minutes: must be a whole number of minutes, "
                         f"got {self.minutes!r}")
        if self.kind not in KINDS:
            found.append(f":kind: must be one of {', '.join(KINDS)}, got {self.kind!r}")
        if not self.auto_checked and not self.rubric:
            found.append(f"an open answer needs a rubric: a paragraph starting "
                         f"{RUBRIC!r} at the start of its solution")
        return found


def _options(block: str) -> dict[str, str]:
    return dict(re.findall(r"^:([\w-]+):[ \t]*(.*?)\s*$", block, flags=re.MULTILINE))


def _number(value: str | None) -> int | None:
    return int(value) if value is not None and value.strip().isdigit() else None


def exercises(chapter: Chapter) -> list[Exercise]:
    """Every exercise, in order, with its metadata and the ``check_...`` functions of
    the coding ones.

    The metadata are options of the ``exercise-start`` directive (``:difficulty:``,
    ``:minutes:``, ``:kind:``), which every edition keeps because they are part of the
    exercise's statement, and the rubric is the first paragraph of the solution, which
    the student edition removes with it.
    """
    return exercises_in(chapter.read(), coding_exercises(chapter))


def exercises_in(notebook, coding=()) -> list[Exercise]:
    """``exercises`` of a notebook (an edition); ``coding`` gives the checks."""
    text = "\n\n".join(c.source for c in notebook.cells if c.cell_type == "markdown")
    checks = {}
    for exercise in coding:
        names = re.findall(r"\b(check_\w+)\s*\(", "\n".join(exercise.checks))
        checks[exercise.label] = tuple(dict.fromkeys(names))
    rubrics = {}
    for match in re.finditer(r"\{solution-start\}\s+(\S+)\s*\n(?::[^\n]*\n)*:{3,}\s*\n"
                             r"(.*?)(?:\n\s*\n|$)", text, re.S):
        if match.group(2).startswith(RUBRIC):
            rubrics[match.group(1)] = " ".join(match.group(2)[len(RUBRIC):].split())
    found = []
    pattern = re.compile(r"\{exercise-start\}[^\n]*\n((?::[^\n]*\n)*):{3,}\s*\n"
                         r"\s*(?:\*\*(.+?)\*\*)?", re.S)
    for match in pattern.finditer(text):
        options, heading = _options(match.group(1)), (match.group(2) or "").strip()
        label = options.get("label", "")
        title = heading.rstrip(".") or label
        found.append(Exercise(label, title, checks.get(label, ()),
                              _number(options.get("difficulty")),
                              _number(options.get("minutes")), options.get("kind"),
                              rubrics.get(label, "")))
    return found


def citations(chapter: Chapter) -> list[str]:
    """Bibliography keys the chapter cites, in order of first citation."""
    keys: list[str] = []
    for source in _markdown(chapter):
        for group in re.findall(r"\{cite(?::\w+)?\}`([^`]+)`", source):
            for key in group.split(","):
                if key.strip() and key.strip() not in keys:
                    keys.append(key.strip())
    return keys


def _code(chapter: Chapter) -> list[tuple[str, list[str]]]:
    return [(c.source, cell_tags(c)) for c in chapter.read().cells if c.cell_type == "code"]


def datasets_used(chapter: Chapter) -> list[str]:
    """Registry datasets (name prefixes such as 'gutenberg', 'wikitext2') the chapter reads."""
    from tinybert.data import REGISTRY

    prefixes = list(dict.fromkeys(name.split("/")[0] for name in REGISTRY))
    code = "\n".join(source for source, _ in _code(chapter))
    used = []
    for prefix in prefixes:
        direct = re.search(r"""fetch\(\s*f?["']""" + re.escape(prefix) + "/", code) or \
            re.search(r"""fetch_group\(\s*["']""" + re.escape(prefix) + """["']""", code)
        books = prefix == "gutenberg" and re.search(r"\bload_gutenberg\(", code)
        model = prefix == "minilm" and re.search(r"\bload_minilm\(", code)
        if direct or books or model:
            used.append(prefix)
    return used


@lru_cache(maxsize=1)
def _exported_by() -> dict[tuple[str, str], str]:
    """(module, name) -> stem of the chapter whose exported cell defines it."""
    from book.tools.export import _with_backlinks, collect

    owners = {}
    for module, pieces in collect(chapters()).items():
        for piece in pieces:
            _, names, _ = _with_backlinks(piece)
            for name in names:
                owners.setdefault((TINYBERT + module, name), piece.chapter.stem)
    return owners


def imports(chapter: Chapter) -> dict[str, list[str]]:
    """What the chapter imports from the package, by the chapter that built it.

    ``{"01_feedforward": ["MLP", "count_parameters"], ...}``; names from hand-written modules
    (data, runtime, exercises) and from the chapter itself are left out.
    """
    owners = _exported_by()
    found: dict[str, list[str]] = {}
    for source, _tags in _code(chapter):
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            module = node.module if isinstance(node, ast.ImportFrom) else None
            if module == "tinybert" or (module or "").startswith(TINYBERT):
                for alias in node.names:
                    if module == "tinybert":  # a name the package re-exports at its top level
                        found_in = {o for (m, n), o in owners.items() if n == alias.name}
                        owner = found_in.pop() if len(found_in) == 1 else None
                    else:
                        owner = owners.get((module, alias.name))
                    if owner and owner != chapter.stem:
                        names = found.setdefault(owner, [])
                        if alias.name not in names:
                            names.append(alias.name)
    return {stem: sorted(names, key=str.lower) for stem, names in sorted(found.items())}


def exported_modules(chapter: Chapter) -> list[str]:
    """The package modules that the chapter's exported cells are written to."""
    notebook = chapter.read()
    default = notebook.metadata.get("tinybert", {}).get("module")
    modules = []
    for cell in notebook.cells:
        for tag in cell_tags(cell):
            if tag == "export" or tag.startswith("export:"):
                module = TINYBERT + (default if tag == "export" else tag.split(":", 1)[1])
                if module not in modules:
                    modules.append(module)
    return modules
