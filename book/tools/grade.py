"""Hand-written: run the exercises' automatic checks on students' notebooks.

Usage::

    python -m book.tools.grade submissions/*/01_feedforward.ipynb
    python -m book.tools.grade submissions/**/*.ipynb --csv grades.csv

A submission is a student notebook from ``make student``
(``_build/student/notebooks``) with the answers filled in. For every coding exercise
of the chapter, the student's answer (the code cell tagged ``solution`` after the
exercise's ``exercise-start``, with any code cells the student added before the
exercise's checks) is run in a fresh namespace, followed by the *course's own* check
cells for that exercise, never the ones in the submission, so editing a check does not
change a grade. The chapter is recognised by its file name (``NN_name.ipynb``) or by
the notebook's ``tinybert`` metadata.

Each submission runs in its own Python process, in quick mode, in a temporary folder,
with a time limit per exercise. One bad notebook never stops the run: an answer that
crashes the process or will not stop fails its own exercise and the others are graded
in a new process; a file that is not a notebook, or whose chapter cannot be told, gets
a row that says so. This is still the students' code running on your machine: run it
in a container or as a user that can touch nothing else. The grader does not defend
against deliberate tampering.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import nbformat

from book.tools.chapters import Chapter, cell_tags, chapters
from book.tools.course import exercises
from book.tools.editions import DIRECTIVE, coding_exercises

LABEL = re.compile(r"\{exercise-start\}[^\n]*\n:label:\s*(\S+)")
SOLUTION_LABEL = re.compile(r"\{solution-start\}\s+(\S+)")
GRACE = 10  # seconds the watchdog allows beyond an exercise's own time limit

# Runs in the grading process. Each exercise gets a fresh namespace and a time limit,
# and its outcome is appended to the results file at once, so that whatever happens to
# the process later (a student's os._exit, a crash in native code, the watchdog's kill)
# the exercises already graded keep their results and the grader knows which one was
# running.
RUNNER = r"""
import contextlib, io, json, signal, sys
with open(sys.argv[1]) as handle:
    jobs = json.load(handle)
log = open(sys.argv[2], "a", buffering=1)

def report(**event):
    log.write(json.dumps(event) + "\n")
    log.flush()

def timeout(signum, frame):
    raise TimeoutError("the exercise ran longer than the time limit")

# The heavy imports happen once, before any time limit starts: a limit that fired inside
# `import torch` (a slow or busy machine) would leave torch half-imported, and every later
# exercise would fail with a circular-import error that is not the student's.
with contextlib.suppress(ImportError):
    import torch, tinybert.exercises._assertions  # noqa: F401, E401

def fresh_state():
    # What an answer may change for its checks or the next exercise: the course's checks
    # (an answer could replace them in their module), torch's default dtype and grad
    # mode.
    for name in [n for n in sys.modules if n.startswith("tinybert.exercises")]:
        del sys.modules[name]
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_default_dtype(torch.float32)
        torch.set_grad_enabled(True)

for job in jobs:
    fresh_state()
    namespace = {"__name__": "__exercise__"}
    report(start=job["label"])
    signal.signal(signal.SIGALRM, timeout)
    signal.alarm(job["timeout"])
    stage = "your answer"
    try:
        quiet = contextlib.redirect_stdout(io.StringIO())
        with quiet, contextlib.redirect_stderr(io.StringIO()):
            for index, source in enumerate(job["answer"]):
                exec(compile(source, f"<answer cell {index + 1}>", "exec"), namespace)
            stage = "the check"
            fresh_state()
            for index, source in enumerate(job["checks"]):
                exec(compile(source, f"<check cell {index + 1}>", "exec"), namespace)
        passed, message = True, ""
    except BaseException as error:
        if isinstance(error, KeyboardInterrupt):
            raise
        passed, message = False, f"{type(error).__name__}: {error}".strip()
        if not isinstance(error, (AssertionError, NotImplementedError, TimeoutError)):
            message += f" (raised in {stage})"
    finally:
        signal.alarm(0)
    report(label=job["label"], passed=passed, message=message)
"""


@dataclass
class Result:
    submission: str
    chapter: str
    exercise: str
    passed: bool
    message: str
    max_points: float = 0  # the exercise's points (chapter metadata); 0 if unknown

    @property
    def points(self) -> float:
        return self.max_points if self.passed else 0


def chapter_of(path: Path, notebook, found: list[Chapter] | None = None) -> Chapter:
    """The chapter of a submission: by file name, else by its ``tinybert`` metadata."""
    found = found if found is not None else chapters()
    by_name = _chapter_by_name(path, found)
    if by_name is not None:
        return by_name
    module = notebook.metadata.get("tinybert", {}).get("module")
    matches = [c for c in found
               if c.read().metadata.get("tinybert", {}).get("module") == module]
    if module and len(matches) == 1:
        return matches[0]
    raise ValueError(f"{path}: cannot tell which chapter this is; name the file like "
                     f"the chapter (e.g. {found[0].stem}.ipynb)")


def _chapter_by_name(path: Path, found: list[Chapter]) -> Chapter | None:
    return next((chapter for chapter in found if chapter.stem in path.stem), None)


def submitted_answers(notebook) -> dict[str, list[str]]:
    """label -> the sources of the code cells a student wrote for that exercise.

    They are the cell tagged ``solution`` and any other code cell the student added
    between the exercise's statement and its first check cell: a student may split an
    answer over several cells, or delete the stub cell (and with it the tag) and write a
    new one. Code that belongs to a worked solution (inside ``solution-start``/``-end``,
    present only in the full edition) is not part of an answer.
    """
    answers: dict[str, list[str]] = {}
    label, inside, open_label = None, False, None
    for cell in notebook.cells:
        tags = cell_tags(cell)
        if cell.cell_type == "markdown":
            match = LABEL.search(cell.source)
            if match:
                label = open_label = match.group(1)
            for line in cell.source.splitlines():
                directive = DIRECTIVE.match(line)
                if directive:
                    inside = directive.group(2) == "solution-start"
                    found = SOLUTION_LABEL.search(line)
                    label = found.group(1) if found else label
            continue
        if cell.cell_type != "code" or open_label is None:
            continue
        if "check" in tags:
            open_label = None  # the checks close the exercise; no answers after them
        elif "solution" in tags or not inside:
            answers.setdefault(label, []).append(cell.source)
    return answers


def grade(path: Path, *, timeout: int = 300, quick: bool = True,
          sandbox: tuple[str, ...] = ()) -> list[Result]:
    """Run each coding exercise of the submission's chapter against the course's checks.

    Raises when the notebook cannot be read or its chapter cannot be told
    (``grade_or_report`` turns that into rows of the grade table).
    """
    notebook = nbformat.read(str(path), as_version=4)
    chapter = chapter_of(path, notebook)
    answers = submitted_answers(notebook)
    jobs, results = [], []
    for exercise in coding_exercises(chapter):
        if not answers.get(exercise.label):
            results.append(Result(str(path), chapter.stem, exercise.label, False,
                                  "no solution cell found (a code cell tagged "
                                  "'solution' after the exercise)"))
            continue
        jobs.append({"label": exercise.label, "timeout": timeout,
                     "answer": answers[exercise.label], "checks": exercise.checks})
    env = dict(os.environ, TINYBERT_QUICK="1" if quick else "0", MPLBACKEND="Agg")
    outcomes = run_jobs(jobs, env=env, timeout=timeout, sandbox=sandbox)
    for label, (passed, message) in outcomes.items():
        results.append(Result(str(path), chapter.stem, label, passed, message))
    return _in_order(results, chapter)


def _in_order(results: list[Result], chapter: Chapter) -> list[Result]:
    """The results in the chapter's order, each with its exercise's points."""
    worth = {e.label: e.points for e in exercises(chapter)}
    for result in results:
        result.max_points = worth.get(result.exercise, 0)
    order = [e.label for e in coding_exercises(chapter)]
    return sorted(results, key=lambda r: order.index(r.exercise))


def run_jobs(jobs: list[dict], *, env: dict, timeout: int,
             sandbox: tuple[str, ...] = ()) -> dict[str, tuple[bool, str]]:
    """label -> (passed, message) for every job, whatever the students' code does.

    The jobs run in one Python process after another. When the process dies or hangs
    (the watchdog kills it ``GRACE`` seconds after an exercise's time limit), the
    exercise that was running fails with the reason and a new process takes the rest.
    """
    outcomes: dict[str, tuple[bool, str]] = {}
    pending = list(jobs)
    with tempfile.TemporaryDirectory(prefix="tinybert-grade-") as folder:
        for attempt in range(len(jobs)):
            if not pending:
                break
            work = Path(folder) / f"run{attempt}"
            work.mkdir()
            (work / "jobs.json").write_text(json.dumps(pending))
            events, ended = _run_once(work, env, timeout, sandbox)
            started = None
            for event in events:
                if "start" in event:
                    started = event["start"]
                elif event.get("label") in {job["label"] for job in pending}:
                    outcomes[event["label"]] = (bool(event["passed"]),
                                                str(event["message"]))
                    started = None
            if started is None and not any(job["label"] in outcomes for job in pending):
                # The process died before it could start an exercise: a second try would
                # end the same way, so every exercise left gets the reason.
                for job in pending:
                    outcomes[job["label"]] = (False, ended)
            elif started is not None:
                outcomes[started] = (False, ended)
            pending = [job for job in pending if job["label"] not in outcomes]
    for job in pending:  # not reached unless every attempt failed
        outcomes[job["label"]] = (False, "not run")
    return outcomes


def _run_once(work: Path, env: dict, timeout: int,
              sandbox: tuple[str, ...] = ()) -> tuple[list[dict], str]:
    """Run the runner on work/jobs.json (inside ``sandbox``, a command prefix such as
    BWRAP, with ``work`` the one folder it may write); return its events and why the
    process ended."""
    results, stderr = work / "results.jsonl", work / "stderr.txt"
    results.touch()
    with open(stderr, "w") as err:
        process = subprocess.Popen(
            [*_sandboxed(sandbox, work), sys.executable, "-c", RUNNER,
             str(work / "jobs.json"), str(results)],
            cwd=work, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=err, start_new_session=True)
        seen, deadline, killed = 0, None, False
        while process.poll() is None:
            lines = results.read_text().splitlines()
            if len(lines) != seen:  # an exercise started or ended: the clock restarts
                seen, deadline = len(lines), time.monotonic() + timeout + GRACE
            elif deadline is None:
                deadline = time.monotonic() + timeout + GRACE + 60  # start-up, imports
            if time.monotonic() > deadline:
                _kill(process)
                killed = True
                break
            time.sleep(0.05)
        process.wait()
    events = []
    for line in results.read_text().splitlines():
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError:
            pass  # a line cut short when the process died
    if killed:
        return events, (f"TimeoutError: the exercise ran longer than the time limit "
                        f"({timeout} s) and did not stop; the grader ended it")
    last = (stderr.read_text(errors="replace").strip().splitlines() or [""])[-1]
    return events, (f"the grading process ended during this exercise (exit status "
                    f"{process.returncode})" + (f": {last}" if last else ""))


# Real isolation where bubblewrap is installed (Debian: apt-get install bubblewrap): the
# students' code sees the machine read-only, has no network, and may write only its own
# temporary folder (its TMPDIR too). Other submissions, the instructor's files and the
# course's checks cannot be changed from it.
BWRAP = ("bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
         "--unshare-net", "--unshare-ipc", "--die-with-parent")


def _sandboxed(sandbox: tuple[str, ...], work: Path) -> list[str]:
    if not sandbox:
        return []
    return [*sandbox, "--bind", str(work), str(work), "--chdir", str(work),
            "--setenv", "MPLCONFIGDIR", str(work),
            "--setenv", "TMPDIR", str(work), "--"]


def sandbox_prefix(choice: str) -> tuple[str, ...]:
    """The sandbox for ``--sandbox`` auto / bwrap / none: bubblewrap when it is
    installed and works here (auto), or an error when bwrap is asked for and cannot."""
    if choice == "none":
        return ()
    works = shutil.which("bwrap") is not None and subprocess.run(
        [*BWRAP, "true"], capture_output=True).returncode == 0
    if works:
        return BWRAP
    if choice == "bwrap":
        raise SystemExit("grade: --sandbox bwrap: bubblewrap is not installed or "
                         "cannot run here (apt-get install bubblewrap)")
    print("note: no sandbox (bubblewrap is not installed or cannot run here): the "
          "students' code runs with your rights", file=sys.stderr)
    return ()


def _kill(process: subprocess.Popen) -> None:
    """End the process and everything it started (its session)."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def grade_or_report(path: Path, *, timeout: int = 300, quick: bool = True,
                    sandbox: tuple[str, ...] = ()) -> list[Result]:
    """``grade``, except that a notebook that cannot be graded gives rows that say why.

    When the chapter is known from the file name, every coding exercise of it gets a
    failing row; otherwise the submission gets a single row with no exercise.
    """
    try:
        return grade(path, timeout=timeout, quick=quick, sandbox=sandbox)
    except Exception as error:  # one bad notebook never stops the run
        message = f"not graded: {type(error).__name__}: {error}"
        chapter = _chapter_by_name(path, chapters())
        if chapter is None:
            return [Result(str(path), "", "", False, message)]
        failed = [Result(str(path), chapter.stem, exercise.label, False, message)
                  for exercise in coding_exercises(chapter)]
        return _in_order(failed, chapter)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("submissions", nargs="+", type=Path,
                        help="students' .ipynb files")
    parser.add_argument("--csv", type=Path,
                        help="also write the results to this CSV file (a new file)")
    parser.add_argument("--overwrite", action="store_true",
                        help="let --csv replace an existing CSV file")
    parser.add_argument("--timeout", type=int, default=300, help="seconds per exercise")
    parser.add_argument("--sandbox", choices=["auto", "bwrap", "none"], default="auto",
                        help="run the students' code in bubblewrap (auto: when it is "
                        "installed and works)")
    parser.add_argument("--normal", action="store_true",
                        help="run in normal mode (default: quick mode, "
                        "TINYBERT_QUICK=1)")
    args = parser.parse_args(argv)
    if args.csv:  # checked before grading, so that a mistake costs nothing
        problem = csv_problem(args.csv, args.submissions, overwrite=args.overwrite)
        if problem:
            parser.error(f"--csv {args.csv}: {problem}")
    sandbox = sandbox_prefix(args.sandbox)
    results: list[Result] = []
    for path in args.submissions:
        graded = grade_or_report(path, timeout=args.timeout, quick=not args.normal,
                                 sandbox=sandbox)
        for r in graded:
            status = "pass" if r.passed else "FAIL"
            print(f"{status}  {r.submission}  {r.exercise or '-'}"
                  + (f"  {r.message[:160]}" if r.message else ""))
        results += graded
    passed = sum(r.passed for r in results)
    print(f"{passed} of {len(results)} exercise checks passed in "
          f"{len(args.submissions)} notebook(s)")
    for submission in dict.fromkeys(r.submission for r in results):
        mine = [r for r in results if r.submission == submission]
        print(f"{sum(r.points for r in mine):g} of {sum(r.max_points for r in mine):g} "
              f"points  {submission}")
    if args.csv:
        write_csv(results, args.csv)
        print(f"wrote {args.csv}")
    not_graded = sorted({r.submission for r in results if not_graded_row(r)})
    if not_graded:
        print(f"error: {len(not_graded)} of {len(args.submissions)} notebook(s) could "
              f"not be graded (their rows say why): {', '.join(not_graded)}",
              file=sys.stderr)
        return 1
    return 0


def not_graded_row(result: Result) -> bool:
    """True for a row that records a notebook the grader could not grade at all."""
    return result.message.startswith("not graded:")


def csv_problem(target: Path, submissions: list[Path], *,
                overwrite: bool) -> str | None:
    """Why ``target`` cannot take the grades, or None: a folder, a missing folder, one
    of the submissions, a notebook, or (without ``overwrite``) an existing file."""
    resolved = target.resolve()
    if target.is_dir():
        return "is a folder; name a file, e.g. grades.csv"
    if not resolved.parent.is_dir():
        return f"its folder {resolved.parent} does not exist"
    if any(resolved == path.resolve() for path in submissions):
        return "is one of the submissions; it would be overwritten by the grades"
    if target.suffix == ".ipynb":
        return "is a notebook; the grades go to a .csv file"
    if target.exists() and not overwrite:
        return "exists; choose a new file, or pass --overwrite to replace it"
    return None


def write_csv(results: list[Result], target: Path) -> None:
    """The grades as CSV, written to a temporary file beside ``target`` and then
    renamed, so that an interrupted run never leaves half a file."""
    temporary = target.with_name(f".{target.name}.part")
    with open(temporary, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["submission", "chapter", "exercise", "passed", "points",
                         "max_points", "message"])
        for r in results:
            writer.writerow([r.submission, r.chapter, r.exercise, int(r.passed),
                             f"{r.points:g}", f"{r.max_points:g}", r.message])
    os.replace(temporary, target)


if __name__ == "__main__":
    sys.exit(main())
