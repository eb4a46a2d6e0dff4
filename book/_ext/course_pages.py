"""Hand-written Sphinx extension: directives that describe the course from its own files.

The instructor guide and the credits page list facts that live in the chapters and in the
package: each chapter's learning goals, exercises and automatic checks, what it imports from
earlier chapters, the papers it cites and the datasets it reads. Typed by hand they would drift
from the chapters; these directives read them at build time (``book/tools/course.py``) and only
list chapters that are in the table of contents.

- ``{syllabus}``: a week-by-week plan; each content line is ``week | chapter numbers | focus``.
  Chapters that are not in the book yet are named from the plan and marked "in preparation".
- ``{chapter-goals}``: each chapter's "What you will learn" list.
- ``{exercise-table}``: every exercise with its kind, difficulty, time and points, and
  the ``check_...`` function of those checked automatically; ``{exercise-rubrics}``: the
  rubric of every open answer. The chapters give the metadata as options of
  ``exercise-start`` (``:difficulty:``, ``:minutes:``, ``:kind:``), which this extension
  adds to sphinx-exercise's directive and shows at the top of each exercise.
- ``{chapter-imports}``: what each chapter imports from earlier chapters, and what it exports.
- ``{dataset-credits}``: every dataset in ``tinybert.data.REGISTRY`` with its licence, citation,
  source and the chapters that read it.
- ``{chapter-citations}``: the papers each chapter cites.
- ``{colab-install-cell}``: the install cell that ``make notebooks`` puts first in each Colab notebook.
- ``{doctor-output}``: the output of ``python -m tinybert doctor`` on the machine that builds the site.
- ``static/quiz.js``, added to every page: makes the quiz at the end of each chapter
  (the output of a cell tagged ``quiz``, from ``tinybert.exercises.quiz``) answer in the
  browser.
- ``{recorded}`` (a role): a number read from a result file the repository keeps (an
  experiment's JSON, a checkpoint's metrics), so that prose quoting a measurement cannot
  drift from it: ``{recorded}`tinybert/shipped/results/transfer_sweep.json#banking77/random init/0.001```
  gives ``31.6%``. After the ``#`` come the keys (list indices are numbers), then
  optional steps separated by ``|``: ``mean``, ``min``, ``max`` of a list, ``minutes``
  (seconds / 60), and a format: ``%`` (the default for a number between 0 and 1) or a
  Python format spec.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import Directive
from docutils.statemachine import StringList
from sphinx.application import Sphinx
from sphinx.errors import ExtensionError

# The course plan (DESIGN.md §2), used only to name chapters that are not written yet.
PLANNED = {1: "Feed-forward networks", 2: "Words as vectors", 3: "Attention",
           4: "Multi-head attention", 5: "Positional encoding", 6: "The Transformer",
           7: "Tokenization", 8: "BERT", 9: "Pretraining BERT", 10: "Fine-tuning",
           11: "Does pretraining pay off?", 12: "RoBERTa", 13: "DistilBERT", 14: "ALBERT",
           15: "The BERT family side by side", 16: "ELECTRA"}

LICENCES = {
    "CC-BY-4.0": ("CC BY 4.0", "https://creativecommons.org/licenses/by/4.0/"),
    "CC-BY-SA-3.0": ("CC BY-SA 3.0", "https://creativecommons.org/licenses/by-sa/3.0/"),
    "CC-BY-SA-4.0": ("CC BY-SA 4.0", "https://creativecommons.org/licenses/by-sa/4.0/"),
    "BSD-3-Clause": ("BSD 3-Clause", "https://opensource.org/license/bsd-3-clause"),
    "Apache-2.0": ("Apache 2.0", "https://www.apache.org/licenses/LICENSE-2.0"),
    "public-domain": ("public domain", ""),
}
DATASETS = {  # registry prefix -> (name, bibliography key or "")
    "wikitext2": ("WikiText-2", "merity2016pointer"),
    "tinyshakespeare": ("Tiny Shakespeare", ""),
    "gutenberg": ("Project Gutenberg books", ""),
    "banking77": ("Banking77", "casanueva2020efficient"),
    "poem_sentiment": ("Poem Sentiment", "sheng2020investigating"),
    "sentence_polarity": ("Sentence Polarity v1.0", "pang2005seeing"),
    "ud_ewt": ("Universal Dependencies English Web Treebank (EWT)", "silveira2014gold"),
    "uner_ewt": ("Universal NER English-EWT", "mayhew2024universal"),
    "squad1.1": ("SQuAD v1.1", "rajpurkar2016squad"),
    "minilm": ("all-MiniLM-L6-v2 (pretrained weights)", "reimers2019sentence"),
}


def _course(app: Sphinx):
    root = str(Path(app.confdir).resolve())
    if root not in sys.path:
        sys.path.insert(0, root)
    from book.tools import course

    return course


class _CourseDirective(Directive):
    """Writes MyST Markdown and parses it in place, so roles such as {doc} and {term} work."""

    has_content = False

    @property
    def app(self) -> Sphinx:
        return self.state.document.settings.env.app

    def chapters(self):
        course = _course(self.app)
        found = course.book_chapters(Path(self.app.confdir))
        for chapter in found:
            self.state.document.settings.env.note_dependency(str(chapter.path))
        return course, found

    def markdown(self) -> list[str]:
        raise NotImplementedError

    def run(self):
        container = nodes.container(classes=["tinybert-" + self.name])
        self.state.nested_parse(StringList(self.markdown(), source=self.name),
                                self.content_offset, container)
        return [container]


def _link(course, chapter) -> str:
    return f"{{doc}}`{chapter.number}. {_escape(course.title(chapter))} </{course.docname(chapter)}>`"


def _escape(text: str) -> str:
    return text.replace("<", "\\<").replace("`", "")


_DOC = re.compile(r"\{doc\}`(?:([^`<]*?)\s*<([^>`]+)>|([^`<>]+))`")


def _absolute_docs(markdown: str) -> str:
    """Chapter-relative {doc} targets (``03_attention``) made absolute, for use on other pages."""
    def fix(match: re.Match) -> str:
        text, target = (match.group(1), match.group(2)) if match.group(2) else (None, match.group(3))
        if target.startswith(("/", "..")):
            return match.group(0)
        target = f"/chapters/{target}"
        return f"{{doc}}`{text} <{target}>`" if text else f"{{doc}}`{target}`"

    return _DOC.sub(fix, markdown)


def _plain(text: str) -> str:
    """Markup-free text for a link title: no math dollars, emphasis stars or backticks."""
    text = re.sub(r"\$([^$]+)\$", lambda m: m.group(1).replace("_", "").replace("\\", ""), text)
    return text.replace("*", "").replace("`", "").replace("|", "\\|").replace("<", "\\<")


class Syllabus(_CourseDirective):
    has_content = True

    def markdown(self):
        course, found = self.chapters()
        by_number = {c.number: c for c in found}
        lines = ["| Week | Chapters | Focus |", "|---|---|---|"]
        for number, line in enumerate(self.content, 1):
            parts = [p.strip() for p in line.split("|")]
            if len(parts) != 3:
                raise self.error(f"syllabus line {number}: expected 'week | chapters | focus', "
                                 f"got {line!r}")
            week, numbers, focus = parts
            cells = []
            for item in numbers.split():
                if not item.isdigit() or int(item) not in PLANNED:
                    raise self.error(f"syllabus line {number}: {item!r} is not a chapter number "
                                     f"of the plan (1 to {max(PLANNED)})")
                chapter = by_number.get(int(item))
                cells.append(_link(course, chapter) if chapter else
                             f"{int(item)}. {PLANNED[int(item)]} *(in preparation)*")
            lines.append(f"| {week} | {'<br>'.join(cells) or '—'} | {focus} |")
        return lines


class ChapterGoals(_CourseDirective):
    def markdown(self):
        course, found = self.chapters()
        lines = []
        for chapter in found:
            lines += [f"**{_link(course, chapter)}**", ""]
            goals = course.learning_goals(chapter)
            if not goals:
                raise ExtensionError(f"{chapter.relpath} has no '**What you will learn**' list")
            lines += [f"- {_absolute_docs(goal)}" for goal in goals] + [""]
        return lines


class ExerciseTable(_CourseDirective):
    def markdown(self):
        course, found = self.chapters()
        lines = ["| Chapter | Exercise | Kind | Difficulty | Time | Points | Checked "
                 "automatically by |", "|---|---|---|---|---|---|---|"]
        count = checked = minutes = 0
        for chapter in found:
            listed = course.exercises(chapter)
            for index, exercise in enumerate(listed):
                problems = exercise.problems()
                if getattr(self.app.config, "hide_solutions", False):
                    # the student edition removes solutions, and the rubrics with them
                    problems = [p for p in problems if "rubric" not in p]
                if problems:
                    raise ExtensionError(f"{chapter.relpath}, {exercise.label}: "
                                         + "; ".join(problems))
                first = _link(course, chapter) if index == 0 else ""
                check = ", ".join(f"`{name}`" for name in exercise.checks) or "—"
                lines.append(f"| {first} | {{ref}}`{_plain(exercise.title)} "
                             f"<{exercise.label}>` | {exercise.kind} | "
                             f"{_stars(exercise.difficulty)} | "
                             f"{exercise.minutes} min | {exercise.points} | {check} |")
            count += len(listed)
            checked += sum(e.auto_checked for e in listed)
            minutes += sum(e.minutes for e in listed)
        lines += ["", f"{count} exercises in {len(found)} chapters; {checked} of them "
                      f"are checked automatically. Doing all of them takes a student "
                      f"about {round(minutes / 60)} hours by these estimates."]
        return lines


def _stars(difficulty: int) -> str:
    return "★" * difficulty + "☆" * (3 - difficulty)


class ExerciseRubrics(_CourseDirective):
    """``{exercise-rubrics}``: the rubric of every exercise with an open answer."""

    def markdown(self):
        course, found = self.chapters()
        lines = []
        for chapter in found:
            open_answers = [e for e in course.exercises(chapter) if e.rubric]
            if open_answers:
                lines += [f"**{_link(course, chapter)}**", ""]
                lines += [f"- {{ref}}`{_plain(e.title)} <{e.label}>` ({e.points} "
                          f"point{'s' if e.points > 1 else ''}): {e.rubric}"
                          for e in open_answers] + [""]
        return lines


def _exercise_start_with_metadata():
    """sphinx-exercise's ``exercise-start`` with the course's metadata options.

    ``:difficulty:`` (1 to 3), ``:minutes:`` and ``:kind:`` are shown in a line at the
    top of the exercise; book/tools/course.py reads the same options for the instructor
    guide and the editions.
    """
    from docutils.parsers.rst import directives
    from sphinx_exercise.directive import ExerciseStartDirective

    class ExerciseStart(ExerciseStartDirective):
        option_spec = {**ExerciseStartDirective.option_spec,
                       "difficulty": lambda v: directives.choice(v, ("1", "2", "3")),
                       "minutes": directives.positive_int,
                       "kind": lambda v: directives.choice(v, ("concept", "derivation",
                                                               "coding", "experiment"))}

        def run(self):
            result = super().run()
            wanted = ("difficulty", "minutes", "kind")
            if result and all(key in self.options for key in wanted):
                level = int(self.options["difficulty"])
                text = (f"{_stars(level)} difficulty {level} of 3 · about "
                        f"{self.options['minutes']} min · {self.options['kind']}")
                line = nodes.paragraph(text, text, classes=["tinybert-exercise-meta"])
                result[0].children[-1].insert(0, line)  # content, before the statement
            return result

    return ExerciseStart


class ChapterImports(_CourseDirective):
    def markdown(self):
        course, found = self.chapters()
        by_stem = {c.stem: c for c in found}
        lines = ["| Chapter | Imports from earlier chapters | Writes |", "|---|---|---|"]
        for chapter in found:
            imported = course.imports(chapter)
            uses = "; ".join(
                f"chapter {by_stem[stem].number if stem in by_stem else stem}: "
                + ", ".join(f"`{name}`" for name in names)
                for stem, names in imported.items()) or "nothing"
            writes = ", ".join(f"`{m}`" for m in course.exported_modules(chapter)) or "—"
            lines.append(f"| {_link(course, chapter)} | {uses} | {writes} |")
        return lines


class DatasetCredits(_CourseDirective):
    def markdown(self):
        course, found = self.chapters()
        from tinybert.data import REGISTRY

        readers: dict[str, list] = {}
        for chapter in found:
            for prefix in course.datasets_used(chapter):
                readers.setdefault(prefix, []).append(chapter)
        groups: dict[str, list] = {}
        for entry in REGISTRY.values():
            groups.setdefault(entry.name.split("/")[0], []).append(entry)
        lines = []
        for prefix, entries in groups.items():
            name, key = DATASETS.get(prefix, (prefix, ""))
            licences = list(dict.fromkeys(e.licence for e in entries))
            lines += [f"**{name}**", ""]
            lines.append("- Licence: " + ", ".join(_licence(lic) for lic in licences)
                         + (" (see the note)" if len(licences) > 1 else ""))
            citations = list(dict.fromkeys(e.citation for e in entries if not e.title))
            if prefix == "gutenberg":
                lines.append("- The books, all in the public domain, each from its own "
                             "GITenberg mirror of Project Gutenberg:")
                for e in entries:
                    lines.append(f"  - {e.author}, *{e.title}*: Project Gutenberg eBook "
                                 f"#{e.name.split('/')[1]} ({_source(e.url)})")
            for citation in citations:
                lines.append(f"- Cite: {citation}" + (f" {{cite:p}}`{key}`" if key else ""))
            if prefix != "gutenberg":
                folders = sorted({e.url.rsplit("/", 1)[0] + "/" for e in entries})
                lines.append("- Source (byte-identical copies at a pinned commit): "
                             + ", ".join(_source(folder) for folder in folders))
            lines.append("- Files: " + ", ".join(f"`{e.name}`" for e in entries))
            for note in dict.fromkeys(e.note for e in entries if e.note):
                lines.append(f"- Note: {note}")
            chapters = readers.get(prefix, [])
            lines.append("- Read by: " + (", ".join(_link(course, c) for c in chapters)
                                          if chapters else "no chapter yet"))
            lines.append("")
        return lines


def _source(url: str) -> str:
    """A link with short text: 'owner/repo at 1a2b3c4, path/' for a raw GitHub address."""
    match = re.match(r"https://raw\.githubusercontent\.com/([^/]+)/([^/]+)/([0-9a-f]{40})/(.*)$", url)
    if not match:
        return f"<{url}>"
    owner, repo, commit, path = match.groups()
    return f"[{owner}/{repo} at {commit[:7]}, `{path or '/'}`]({url})"


def _licence(identifier: str) -> str:
    name, url = LICENCES.get(identifier, (identifier, ""))
    return f"[{name}]({url})" if url else name


class ChapterCitations(_CourseDirective):
    def markdown(self):
        course, found = self.chapters()
        titles = _bib_titles(self.app)
        lines = []
        for chapter in found:
            keys = course.citations(chapter)
            lines.append(f"- {_link(course, chapter)}" + ("" if keys else ": no papers."))
            for key in keys:
                title = titles.get(key, "")
                lines.append(f"  - {{cite:t}}`{key}`" + (f": *{title}*" if title else ""))
        return lines


def _bib_titles(app: Sphinx) -> dict[str, str]:
    """Bibliography key -> title, from the book's .bib files (braces and TeX quotes removed)."""
    from pybtex.database import parse_file

    titles = {}
    for name in app.config.bibtex_bibfiles:
        path = Path(app.confdir) / name
        app.env.note_dependency(str(path))
        for key, entry in parse_file(str(path)).entries.items():
            title = entry.fields.get("title", "")
            title = re.sub(r"[{}]", "", title).replace("``", "\u201c").replace("''", "\u201d")
            titles[key] = _plain(re.sub(r"\s+", " ", title)).replace("\\|", "|")
    return titles


class ColabInstallCell(Directive):
    """``{colab-install-cell}``: the first cell of every Colab notebook, as ``make notebooks`` writes it."""

    def run(self):
        app = self.state.document.settings.env.app
        _course(app)  # puts the book's root on sys.path
        from book.tools.editions import install_cell, source_commit

        try:
            commit = source_commit()
        except RuntimeError:  # a copy of the sources outside git (the student edition)
            commit = "the commit the notebooks were made from"
        source = install_cell(commit).source
        return [nodes.literal_block(source, source, language="python")]


class DoctorOutput(Directive):
    """``{doctor-output}``: what ``python -m tinybert doctor`` printed on the machine that built this page."""

    def run(self):
        import subprocess

        app = self.state.document.settings.env.app
        result = subprocess.run([sys.executable, "-m", "tinybert", "doctor"], capture_output=True,
                                text=True, cwd=app.confdir, timeout=300)
        text = (result.stdout + result.stderr).rstrip() + f"\n(exit status {result.returncode})"
        return [nodes.literal_block(text, text, language="text")]


def recorded_value(root: Path, reference: str) -> str:
    """The formatted value a ``{recorded}`` reference names (see the module docstring)."""
    import json

    path, _, rest = reference.partition("#")
    keys, *steps = rest.split("|")
    value = json.loads((root / path.strip()).read_text())
    for key in filter(None, keys.split("/")):
        value = value[int(key)] if isinstance(value, list) else value[key]
    fmt = None
    for step in steps:
        if step in ("mean", "min", "max"):
            value = {"mean": sum(value) / len(value), "min": min(value),
                     "max": max(value)}[step]
        elif step == "minutes":
            value = value / 60
        else:
            fmt = step
    if fmt is None:
        fmt = "%" if isinstance(value, float) and 0 <= value <= 1 else ","
    if fmt == "%":
        return f"{100 * value:.1f}%"
    if fmt == "," and isinstance(value, float):
        return f"{value:,.0f}"
    return format(value, fmt)


def recorded_root(confdir: Path, reference: str) -> Path:
    """Where a ``{recorded}`` path starts: the book's folder, or, for the results that
    ship inside the package (``tinybert/shipped/...``), the folder holding the importable
    package (the student edition's copy of the sources has no tinybert/)."""
    if reference.startswith("tinybert/"):
        import importlib.util

        return Path(importlib.util.find_spec("tinybert").origin).resolve().parents[1]
    return confdir


def recorded_role(name, rawtext, text, lineno, inliner, options=None, content=None):
    env = inliner.document.settings.env
    root = recorded_root(Path(env.app.confdir), text)
    try:
        value = recorded_value(root, text)
    except (OSError, KeyError, IndexError, ValueError, TypeError) as error:
        message = inliner.reporter.error(f"{{recorded}}`{text}`: {error!r}",
                                         line=lineno)
        return [inliner.problematic(rawtext, rawtext, message)], [message]
    env.note_dependency(str(root / text.partition("#")[0].strip()))
    return [nodes.inline(rawtext, value, classes=["tinybert-recorded"])], []


STATIC = Path(__file__).parent / "static"


def _add_static(app: Sphinx, config) -> None:
    if str(STATIC) not in map(str, config.html_static_path):
        config.html_static_path.append(str(STATIC))


def setup(app: Sphinx) -> dict:
    app.connect("config-inited", _add_static)
    app.add_js_file("quiz.js")  # the chapters' quizzes answer in the browser, offline
    app.setup_extension("sphinx_exercise")  # first, so that exercise-start is replaced
    app.add_directive("exercise-start", _exercise_start_with_metadata(), override=True)
    app.add_directive("exercise-rubrics", ExerciseRubrics)
    app.add_role("recorded", recorded_role)
    app.add_directive("syllabus", Syllabus)
    app.add_directive("chapter-goals", ChapterGoals)
    app.add_directive("exercise-table", ExerciseTable)
    app.add_directive("chapter-imports", ChapterImports)
    app.add_directive("dataset-credits", DatasetCredits)
    app.add_directive("chapter-citations", ChapterCitations)
    app.add_directive("colab-install-cell", ColabInstallCell)
    app.add_directive("doctor-output", DoctorOutput)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
