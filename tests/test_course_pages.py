"""The facts the course pages read from the chapters (book/tools/course.py), and the notes the
chapters keep about themselves: each chapter's "Uses" note names exactly what it imports from
earlier chapters, and every glossary term the chapters use is defined."""
from __future__ import annotations

import importlib
import re
import sys

import pytest
import yaml

from book.tools import course
from book.tools.chapters import ROOT, chapters

sys.path.insert(0, str(ROOT / "book" / "_ext"))
import course_pages  # noqa: E402

BOOK = course.book_chapters()
BIB_KEYS = set(re.findall(r"^@\w+\{([^,]+),", (ROOT / "book" / "references.bib").read_text(),
                          flags=re.MULTILINE))
GLOSSARY = (ROOT / "book" / "glossary.md").read_text()


def test_book_chapters_follow_the_table_of_contents():
    toc = (ROOT / "_toc.yml").read_text()
    listed = re.findall(r"^\s*- file: (chapters/\S+)", toc, flags=re.MULTILINE)
    assert [course.docname(c) for c in BOOK] == listed
    assert BOOK, "no chapter in _toc.yml"


@pytest.mark.parametrize("chapter", BOOK, ids=lambda c: c.stem)
def test_uses_note_names_every_earlier_export_the_chapter_imports(chapter):
    note = course.uses_note(chapter)
    assert note, f"{chapter.relpath}: no paragraph starting with **Uses** after the introduction"
    imported = course.imports(chapter)
    if not imported:
        assert re.search(r"\bnothing\b|\bno\b", note, flags=re.IGNORECASE), (
            f"{chapter.relpath} imports nothing from earlier chapters; its Uses note should say so:"
            f" {note!r}")
    for stem, names in imported.items():
        assert f"{{doc}}`{stem}`" in note or f"<{stem}>`" in note, (
            f"{chapter.relpath} imports from {stem} but its Uses note does not link to it")
        for name in names:
            assert f"`{name}`" in note, (
                f"{chapter.relpath} imports {name} (from {stem}) but its Uses note does not name it")


def test_imports_are_traced_to_the_chapter_that_exports_them():
    by_stem = {c.stem: c for c in BOOK}
    if "06_transformer" in by_stem:
        imported = course.imports(by_stem["06_transformer"])
        assert "PositionwiseFeedForward" in imported["01_feedforward"]
        assert "MultiHeadAttention" in imported["04_multihead_attention"]
        assert "06_transformer" not in imported, "a chapter's own exports are not 'earlier'"
    for chapter in BOOK:
        assert chapter.stem not in course.imports(chapter)


@pytest.mark.parametrize("chapter", BOOK, ids=lambda c: c.stem)
def test_chapter_has_learning_goals_exercises_and_known_citations(chapter):
    goals = course.learning_goals(chapter)
    assert len(goals) >= 3 and all(goal.strip() for goal in goals)
    exercises = course.exercises(chapter)
    labels = re.findall(r"\{exercise-start\}[^\n]*\n:label:\s*(\S+)", chapter.path.read_text())
    assert [e.label for e in exercises] == labels
    module = importlib.import_module(f"tinybert.exercises.ch{chapter.number:02d}")
    for exercise in exercises:
        for check in exercise.checks:
            assert callable(getattr(module, check)), f"{exercise.label}: no {check} in {module.__name__}"
    assert sum(e.auto_checked for e in exercises) >= 2
    unknown = [key for key in course.citations(chapter) if key not in BIB_KEYS]
    assert not unknown, f"{chapter.relpath} cites keys missing from references.bib: {unknown}"


def test_learning_goals_parse_multi_line_bullets():
    goals = course.learning_goals(BOOK[0])
    assert all("\n" not in goal for goal in goals)
    assert not any(goal.startswith("-") for goal in goals)


def test_chapter_relative_doc_links_become_absolute_on_other_pages():
    text = "see {doc}`03_attention`, {doc}`the notation <../book/notation>` and {doc}`x <04_y>`"
    assert course_pages._absolute_docs(text) == (
        "see {doc}`/chapters/03_attention`, {doc}`the notation <../book/notation>` and "
        "{doc}`x </chapters/04_y>`")


def test_exercise_titles_lose_their_markup_in_links():
    assert course_pages._plain("Why $D_h = D/H$ (pen *and* paper) `x`") == "Why Dh = D/H (pen and paper) x"


def test_every_registered_dataset_and_licence_has_a_name_and_a_known_citation():
    from tinybert.data import REGISTRY

    for entry in REGISTRY.values():
        assert entry.licence in course_pages.LICENCES, f"{entry.name}: licence {entry.licence} has no name"
        assert entry.name.split("/")[0] in course_pages.DATASETS, f"{entry.name}: dataset has no name"
    for name, key in course_pages.DATASETS.values():
        assert not key or key in BIB_KEYS, f"{name}: bibliography key {key} is not in references.bib"


def test_syllabus_directive_names_planned_chapters():
    numbers = [chapter.number for chapter in chapters()]
    assert sorted(course_pages.PLANNED) == numbers
    text = (ROOT / "book" / "instructors.md").read_text()
    for block in re.findall(r":::\{syllabus\}\n(.*?)\n:::", text, flags=re.DOTALL):
        covered = sorted(int(n) for line in block.splitlines() for n in line.split("|")[1].split())
        assert set(covered) == set(numbers), "a syllabus leaves out a chapter of the plan"


# --- the glossary ----------------------------------------------------------------------------

def glossary_terms() -> list[str]:
    body = GLOSSARY.split("```{glossary}", 1)[1].split("```", 1)[0]
    return [line.strip() for line in body.splitlines() if line and not line.startswith((" ", ":"))]


def test_glossary_is_sorted_with_a_blank_line_between_entries():
    body = GLOSSARY.split("```{glossary}", 1)[1].split("```", 1)[0]
    assert ":sorted:" in body
    lines = body.splitlines()
    for index, line in enumerate(lines):
        if line and not line.startswith((" ", ":")) and index > 1:
            assert lines[index - 1] == "", f"no blank line before the glossary entry {line!r}"
    terms = [t.lower() for t in glossary_terms()]
    assert len(terms) == len(set(terms)), "a glossary term is defined twice"


def test_every_term_the_book_uses_is_defined():
    terms = {t.lower() for t in glossary_terms()}
    used = set()
    for path in [*(c.path for c in BOOK), *ROOT.glob("book/*.md")]:
        for role in re.findall(r"\{term\}`([^`]+)`", path.read_text()):
            target = re.search(r"<([^>]+)>$", role)
            used.add((target.group(1) if target else role).strip().lower())
    assert not used - terms, f"{{term}} used but not in the glossary: {sorted(used - terms)}"


def test_config_loads_the_local_extensions():
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    local = config["sphinx"]["local_extensions"]
    for name in ["budget_badges", "provenance", "course_pages"]:
        assert local.get(name) == "book/_ext"
        assert (ROOT / "book" / "_ext" / f"{name}.py").is_file()


# --- the project briefs ----------------------------------------------------------------------

PROJECTS = (ROOT / "book" / "projects.md").read_text()


def test_project_briefs_each_have_data_baseline_success_and_budget():
    briefs = re.split(r"^## \d+\. ", PROJECTS, flags=re.MULTILINE)[1:]
    assert len(briefs) >= 4
    for brief in briefs:
        for part in ("**Data.**", "**Baseline.**", "**Success.**", "**Budget.**"):
            assert part in brief, f"{brief.splitlines()[0]!r} has no {part}"
        baseline = brief.split("**Baseline.**")[1]
        assert "{recorded}" in baseline or "project 1" in baseline, (
            f"{brief.splitlines()[0]!r}: the baseline quotes no recorded number")
    assert "- file: book/projects" in (ROOT / "_toc.yml").read_text()


def test_every_recorded_number_resolves_and_is_read_not_typed(tmp_path):
    references = re.findall(r"\{recorded\}`([^`]+)`", PROJECTS)
    assert len(references) >= 10
    for reference in references:
        assert re.fullmatch(r"[\d.,]+%?", course_pages.recorded_value(ROOT, reference))
    (tmp_path / "r.json").write_text('{"a": {"b": [0.25, 0.75]}, "s": 90}')
    assert course_pages.recorded_value(tmp_path, "r.json#a/b/1") == "75.0%"
    assert course_pages.recorded_value(tmp_path, "r.json#a/b|mean") == "50.0%"
    assert course_pages.recorded_value(tmp_path, "r.json#s|minutes|.1f") == "1.5"
    with pytest.raises(KeyError):
        course_pages.recorded_value(tmp_path, "r.json#a/c")


def test_the_project_baselines_file_is_what_its_script_computes():
    import json

    sys.path.insert(0, str(ROOT / "experiments"))
    import project_baselines

    from tinybert.data import DataUnavailableError

    recorded = json.loads((ROOT / "experiments" / "project_baselines.json").read_text())
    baselines = project_baselines
    try:
        ner = baselines.ner_baseline()
    except DataUnavailableError as error:       # offline without TINYBERT_DATA_DIR
        pytest.skip(str(error))
    assert recorded["uner_ewt"] == ner
    assert recorded["squad_answer_sentence"] == baselines.answer_sentence_baseline()
    tags = ["B-PER", "I-PER", "O", "I-LOC", "B-ORG", "I-PER"]  # a stray I- starts a span
    assert baselines.spans(tags) == {(0, 2, "PER"), (3, 4, "LOC"), (4, 5, "ORG"),
                                     (5, 6, "PER")}
