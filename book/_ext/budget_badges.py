"""Hand-written Sphinx extension: the compute budget of each chapter, from measurements.

``make budget`` (``book/tools/budget.py``) executes every chapter in quick and in normal mode
and writes the wall-clock times, with the machine they were measured on, to
``book/budgets.json``. This extension turns that file into

- a badge under the title of every chapter page: how long it runs in quick and in normal mode,
  on what, and whether it needs a GPU. A chapter with no measurement says "not measured yet";
- the ``{budget-table}`` directive, the instructor guide's table of every chapter's budget.

Chapter files need no edits: a chapter gets its badge as soon as the JSON has it. Whether a
chapter needs a GPU is decided from its normal-mode CPU time against the build's own time limit
per chapter (``execute.timeout`` in _config.yml).
"""
from __future__ import annotations

import sys
from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import Directive
from docutils.statemachine import StringList
from sphinx import addnodes
from sphinx.application import Sphinx

STATIC = Path(__file__).parent / "static"


def _tools(app: Sphinx):
    """book.tools.budget, importable from the book's root (the Sphinx confdir)."""
    root = str(Path(app.confdir).resolve())
    if root not in sys.path:
        sys.path.insert(0, root)
    from book.tools import budget

    return budget


def _budgets_path(app: Sphinx) -> Path:
    return Path(app.confdir) / app.config.tinybert_budgets


def _limit(app: Sphinx) -> int:
    return int(getattr(app.config, "nb_execution_timeout", 0) or 1800)


def _chapter(app: Sphinx, docname: str):
    from book.tools.chapters import Chapter

    path = Path(app.confdir) / f"{docname}.md"
    return Chapter(path) if path.is_file() else None


def badge_words(budget, data: dict, stem: str, limit: int, stale: bool = False) -> list[tuple[str, str]]:
    """The badge as (style, text) pieces; style is '' (plain), 'strong' or 'emphasis'.

    "Compute budget on a 2-core CPU: quick mode 22 s, normal mode 2 min 10 s; no GPU needed
    (on a GPU: not measured yet). Measured 2026-11-21."
    """
    quick = budget.lookup(data, stem, "quick", "cpu")
    normal = budget.lookup(data, stem, "normal", "cpu")
    gpu = budget.lookup(data, stem, "normal", "cuda")
    if not (quick or normal or gpu):
        return [("strong", "Compute budget:"), ("", " not measured yet.")]
    cpu = quick or normal
    parts = [("strong", "Compute budget"), ("", f" on {budget.where(cpu)}: " if cpu else ": ")]
    parts += [("", "quick mode "), ("strong", budget.duration(quick["seconds"]) if quick else "not measured yet")]
    parts += [("", ", normal mode "), ("strong", budget.duration(normal["seconds"]) if normal else "not measured yet")]
    needs = budget.needs_gpu(data, stem, limit)
    if needs is None:
        parts.append(("", "; whether it needs a GPU is not known yet"))
    elif needs:
        parts += [("", "; "), ("strong", "needs a GPU"),
                  ("", f" (normal mode takes over {budget.duration(limit)} on a CPU)")]
    else:
        parts += [("", "; "), ("strong", "no GPU needed")]
    parts.append(("", f" (on a GPU, normal mode: {budget.duration(gpu['seconds'])}, {gpu.get('gpu') or 'CUDA'})"
                  if gpu else " (on a GPU: not measured yet)"))
    dates = sorted(e["measured"][:10] for e in (quick, normal, gpu) if e)
    parts.append(("", f". Measured {dates[-1]}"))
    if stale:
        parts.append(("emphasis", ", before the chapter's code last changed"))
    parts.append(("", "."))
    return parts


def _add_badge(app: Sphinx, doctree: nodes.document) -> None:
    docname = app.env.docname
    if not docname.startswith("chapters/"):
        return
    budget = _tools(app)
    path = _budgets_path(app)
    app.env.note_dependency(str(path))
    data = budget.load(path)
    stem = docname.split("/", 1)[1]
    chapter = _chapter(app, docname)
    entries = [budget.lookup(data, stem, m, d) for m in budget.MODES for d in ("cpu", "cuda")]
    stale = (app.config.tinybert_budget_stale_check and chapter is not None
             and any(e and budget.is_stale(e, chapter) for e in entries))
    paragraph = nodes.paragraph()
    for style, text in badge_words(budget, data, stem, _limit(app), stale):
        node = {"strong": nodes.strong, "emphasis": nodes.emphasis}.get(style)
        paragraph += node(text, text) if node else nodes.Text(text)
    target = app.config.tinybert_budget_target
    if target:
        paragraph += nodes.Text(" ")
        ref = addnodes.pending_xref("", refdomain="std", reftype="ref", reftarget=target,
                                    refexplicit=True, refwarn=True, refdoc=docname)
        ref += nodes.inline("How these are measured", "How these are measured")
        paragraph += ref
    box = nodes.container("", paragraph, classes=["tinybert-budget"])
    for section in doctree.findall(nodes.section):
        titles = [i for i, child in enumerate(section.children) if isinstance(child, nodes.title)]
        if titles:
            section.insert(titles[0] + 1, box)
            return


class BudgetTable(Directive):
    """``{budget-table}``: every chapter of the book with its measured budget."""

    has_content = False

    def run(self):
        app = self.state.document.settings.env.app
        env = app.env
        budget = _tools(app)
        from book.tools import course

        path = _budgets_path(app)
        env.note_dependency(str(path))
        data = budget.load(path)
        limit = _limit(app)
        rows = ["| Chapter | Quick mode, CPU | Normal mode, CPU | Normal mode, GPU | GPU needed? "
                "| Measured |", "|---|---|---|---|---|---|"]
        machines, notes, stale = {}, {}, []
        for chapter in course.book_chapters(Path(app.confdir)):
            stem = chapter.stem
            env.note_dependency(str(chapter.path))
            cells = []
            for mode, device in (("quick", "cpu"), ("normal", "cpu"), ("normal", "cuda")):
                entry = budget.lookup(data, stem, mode, device)
                cells.append(budget.duration(entry["seconds"]) if entry else "not measured yet")
                if entry:
                    machines.setdefault(_machine(budget, entry), []).append(f"{chapter.number:02d} {mode}")
                    if entry.get("note"):
                        notes.setdefault(entry["note"], []).append(f"{chapter.number:02d} {mode}")
                    if app.config.tinybert_budget_stale_check and budget.is_stale(entry, chapter):
                        stale.append(f"{chapter.number:02d} {mode}")
            needs = budget.needs_gpu(data, stem, limit)
            cells.append("not known yet" if needs is None else ("yes" if needs else "no"))
            dates = sorted(e["measured"][:10] for m in budget.MODES for d in ("cpu", "cuda")
                           if (e := budget.lookup(data, stem, m, d)))
            cells.append(dates[-1] if dates else "—")
            rows.append(f"| {{doc}}`{chapter.number:02d} {course.title(chapter)} </{course.docname(chapter)}>` | "
                        + " | ".join(cells) + " |")
        lines = rows + [""]
        for machine, which in machines.items():
            lines.append(f"- **Machine** for {_ranges(which)}: a {machine}.")
        for note, which in notes.items():
            lines.append(f"- **Note** on {_ranges(which)}: {note.rstrip('.')}.")
        if stale:
            lines.append(f"- **Measured before the chapter's code last changed**: {_ranges(stale)} "
                         "(run `make budget` again).")
        lines.append(f"- A chapter *needs a GPU* when normal mode takes longer on a CPU than the "
                     f"book build allows each chapter ({budget.duration(limit)}).")
        container = nodes.container(classes=["tinybert-budget-table"])
        self.state.nested_parse(StringList(lines, source="budgets.json"), self.content_offset, container)
        return [container]


def _machine(budget, entry: dict) -> str:
    cpu = f"{entry['cpu_count']}-core CPU ({entry['cpu_model']}, {entry['torch_threads']} torch threads)"
    device = f"{entry.get('gpu') or 'CUDA'} GPU with a {cpu}" if entry["device"] == "cuda" else (
        f"Apple GPU (MPS) with a {cpu}" if entry["device"] == "mps" else cpu)
    return (f"{device}, PyTorch {entry['torch']}, Python {entry['python']}, "
            f"tinybert {entry['tinybert']}")


def _ranges(which: list[str]) -> str:
    """["01 quick", "02 quick", "03 quick", "01 normal"] -> "chapters 01–03 in quick mode, 01 in normal mode"."""
    by_mode: dict[str, list[int]] = {}
    for item in which:
        number, mode = item.split(" ", 1)
        by_mode.setdefault(mode, []).append(int(number))
    parts = []
    for mode, numbers in by_mode.items():
        numbers, runs = sorted(set(numbers)), []
        for n in numbers:
            if runs and n == runs[-1][1] + 1:
                runs[-1][1] = n
            else:
                runs.append([n, n])
        spans = ", ".join(f"{a:02d}" if a == b else f"{a:02d}–{b:02d}" for a, b in runs)
        parts.append(f"{spans} in {mode} mode")
    return "chapters " + "; ".join(parts)


def _add_static(app: Sphinx, config) -> None:
    config.html_static_path.append(str(STATIC))


def setup(app: Sphinx) -> dict:
    app.add_config_value("tinybert_budgets", "book/budgets.json", "env")
    app.add_config_value("tinybert_budget_target", "instructors-budgets", "env")
    # Off in the student edition, whose chapters differ from the measured ones only by their stubs.
    app.add_config_value("tinybert_budget_stale_check", True, "env")
    app.connect("config-inited", _add_static)
    app.add_css_file("tinybert.css")
    app.connect("doctree-read", _add_badge)
    app.add_directive("budget-table", BudgetTable)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
