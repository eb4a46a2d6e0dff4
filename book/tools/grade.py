"""Hand-written: run the exercises' automatic checks on students' notebooks.

Usage::

    python -m book.tools.grade submissions/*/01_feedforward.ipynb
    python -m book.tools.grade submissions/**/*.ipynb --csv grades.csv

A submission is a student notebook from ``make student`` (``_build/student/notebooks``) with the
answers filled in. For every coding exercise of the chapter, the student's solution cell (the
code cell tagged ``solution`` after the exercise's ``exercise-start``) is run in a fresh
namespace, followed by the *course's own* check cells for that exercise, never the ones in the
submission, so editing a check does not change a grade. The chapter is recognised by its file
name (``NN_name.ipynb``) or by the notebook's ``tinybert`` metadata.

Each submission runs in its own Python process, in quick mode, in a temporary folder, with a
time limit per exercise. This is still the students' code running on your machine: run it in a
container or as a user that can touch nothing else.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import nbformat

from book.tools.chapters import Chapter, cell_tags, chapters
from book.tools.editions import coding_exercises

LABEL = re.compile(r"\{exercise-start\}[^\n]*\n:label:\s*(\S+)")

# Runs in the grading process: each exercise in a fresh namespace, under a time limit.
RUNNER = r'''
import contextlib, io, json, signal, sys, traceback
jobs = json.load(sys.stdin)
results = {}

def _timeout(signum, frame):
    raise TimeoutError("the exercise ran longer than the time limit")

signal.signal(signal.SIGALRM, _timeout)
for job in jobs:
    namespace = {"__name__": "__exercise__"}
    output = io.StringIO()
    signal.alarm(job["timeout"])
    try:
        with contextlib.redirect_stdout(output):
            for index, source in enumerate(job["sources"]):
                exec(compile(source, f"<{job['label']} cell {index}>", "exec"), namespace)
        results[job["label"]] = {"passed": True, "message": ""}
    except BaseException as error:
        if isinstance(error, KeyboardInterrupt):
            raise
        message = f"{type(error).__name__}: {error}".strip()
        results[job["label"]] = {"passed": False, "message": message}
    finally:
        signal.alarm(0)
print("\n@@results@@" + json.dumps(results))
'''


@dataclass
class Result:
    submission: str
    chapter: str
    exercise: str
    passed: bool
    message: str


def chapter_of(path: Path, notebook, found: list[Chapter] | None = None) -> Chapter:
    """The chapter a submission belongs to: by file name, else by its ``tinybert`` metadata."""
    found = found if found is not None else chapters()
    for chapter in found:
        if chapter.stem in path.stem:
            return chapter
    module = notebook.metadata.get("tinybert", {}).get("module")
    matches = [c for c in found if c.read().metadata.get("tinybert", {}).get("module") == module]
    if module and len(matches) == 1:
        return matches[0]
    raise ValueError(f"{path}: cannot tell which chapter this is; name the file like the "
                     f"chapter (e.g. {found[0].stem}.ipynb)")


def submitted_solutions(notebook) -> dict[str, str]:
    """label -> source of the student's solution cell for that exercise."""
    answers, label = {}, None
    for cell in notebook.cells:
        if cell.cell_type == "markdown":
            match = LABEL.search(cell.source)
            label = match.group(1) if match else label
        elif cell.cell_type == "code" and "solution" in cell_tags(cell) and label:
            answers.setdefault(label, cell.source)
    return answers


def grade(path: Path, *, timeout: int = 300, quick: bool = True) -> list[Result]:
    """Run every coding exercise of the submission's chapter against the course's checks."""
    notebook = nbformat.read(str(path), as_version=4)
    chapter = chapter_of(path, notebook)
    answers = submitted_solutions(notebook)
    jobs, results = [], []
    for exercise in coding_exercises(chapter):
        if exercise.label not in answers:
            results.append(Result(str(path), chapter.stem, exercise.label, False,
                                  "no solution cell found (a code cell tagged 'solution' after "
                                  "the exercise)"))
            continue
        jobs.append({"label": exercise.label, "timeout": timeout,
                     "sources": [answers[exercise.label], *exercise.checks]})
    if jobs:
        env = dict(os.environ, TINYBERT_QUICK="1" if quick else "0", MPLBACKEND="Agg")
        ran, reason = {}, "not run"
        with tempfile.TemporaryDirectory(prefix="tinybert-grade-") as folder:
            try:
                done = subprocess.run([sys.executable, "-c", RUNNER], input=json.dumps(jobs),
                                      capture_output=True, text=True, cwd=folder, env=env,
                                      timeout=timeout * len(jobs) + 60)
            except subprocess.TimeoutExpired:
                done, reason = None, "the submission ran longer than the time limit"
        if done is not None:
            marker = done.stdout.rfind("@@results@@")
            if marker >= 0:
                ran = json.loads(done.stdout[marker + len("@@results@@"):])
            else:
                reason = (done.stderr.strip().splitlines() or ["the grading process died"])[-1]
        for job in jobs:
            outcome = ran.get(job["label"], {"passed": False, "message": reason})
            results.append(Result(str(path), chapter.stem, job["label"], outcome["passed"],
                                  outcome["message"]))
    order = [e.label for e in coding_exercises(chapter)]
    return sorted(results, key=lambda r: order.index(r.exercise))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("submissions", nargs="+", type=Path, help="students' .ipynb files")
    parser.add_argument("--csv", type=Path, help="also write the results to this CSV file")
    parser.add_argument("--timeout", type=int, default=300, help="seconds per exercise")
    parser.add_argument("--normal", action="store_true",
                        help="run in normal mode (default: quick mode, TINYBERT_QUICK=1)")
    args = parser.parse_args(argv)
    results: list[Result] = []
    for path in args.submissions:
        try:
            results += grade(path, timeout=args.timeout, quick=not args.normal)
        except (ValueError, OSError, nbformat.reader.NotJSONError) as error:
            print(f"{path}: not graded: {error}", file=sys.stderr)
    for r in results:
        status = "pass" if r.passed else "FAIL"
        print(f"{status}  {r.submission}  {r.exercise}" + (f"  {r.message[:160]}" if r.message else ""))
    passed = sum(r.passed for r in results)
    print(f"{passed} of {len(results)} exercise checks passed in {len(args.submissions)} notebook(s)")
    if args.csv:
        with open(args.csv, "w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(["submission", "chapter", "exercise", "passed", "message"])
            for r in results:
                writer.writerow([r.submission, r.chapter, r.exercise, int(r.passed), r.message])
        print(f"wrote {args.csv}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
