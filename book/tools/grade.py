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

Each submission's answers run in a Python process of their own (``grade_worker.py``),
in quick mode, in a temporary folder, inside bubblewrap where it is installed
(``--sandbox``), with a time limit per exercise. The course's checks run in the
grader's own process, which never runs a student's code: they call the answer's
functions through a pipe and get back what they return as data only (read with
``torch.load(weights_only=True)``), so an answer cannot patch a check or torch, or forge
a verdict. The exercises in ``JUDGED_BESIDE_THE_ANSWER`` are the exception. One bad
notebook never stops the run: an answer that crashes its process or will not stop fails
its own exercise and the others are graded in a new process; a file that is not a
notebook, or whose chapter cannot be told, gets a row that says so.
"""
from __future__ import annotations

import argparse
import builtins
import contextlib
import csv
import importlib
import io
import os
import re
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import nbformat
import torch

from book.tools import grade_worker
from book.tools.chapters import Chapter, cell_tags, chapters
from book.tools.course import exercises
from book.tools.editions import DIRECTIVE, coding_exercises
from tinybert.checkpoint.atomic import write_atomically

LABEL = re.compile(r"\{exercise-start\}[^\n]*\n:label:\s*(\S+)")
SOLUTION_LABEL = re.compile(r"\{solution-start\}\s+(\S+)")

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

    The answers run in an answer process (``grade_worker.py``, in ``sandbox``), one
    exercise after another; the checks run here and reach the answer's functions
    through ``AnswerProcess.call``. When the answer process dies, hangs past an
    exercise's time limit or sends what is not data, that exercise fails with the
    reason and a new process takes the next one. The verdicts never leave this process.
    """
    outcomes: dict[str, tuple[bool, str]] = {}
    with tempfile.TemporaryDirectory(prefix="tinybert-grade-",
                                     ignore_cleanup_errors=True) as folder:
        answers = AnswerProcess(Path(folder), env=env, sandbox=sandbox, limit=timeout)
        try:
            for job in jobs:
                outcomes[job["label"]] = judge(job, answers)
        finally:
            answers.stop()
    return outcomes


def judge(job: dict, answers: AnswerProcess) -> tuple[bool, str]:
    """Run one exercise: the answer over there, the course's checks here."""
    stage = "your answer"
    try:
        answers.start()
        deadline = time.monotonic() + answers.limit  # start-up is not the answer's time
        names = answers.request(("answer", job["answer"]), deadline)[1]
        stage = "the check"
        if job["label"] in JUDGED_BESIDE_THE_ANSWER:
            _, passed, message = answers.request(("check", job["checks"]), deadline,
                                                 kinds=("verdict",))
            return bool(passed), str(message)
        namespace = answer_namespace(names, answers, deadline)
        fresh_torch_state()
        quiet = io.StringIO()
        with contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):
            for index, source in enumerate(job["checks"]):
                exec(compile(source, f"<check cell {index + 1}>", "exec"), namespace)
        return True, ""
    except Stopped as stop:
        return False, str(stop)
    except Exception as error:
        message = f"{type(error).__name__}: {error}".strip()
        if not isinstance(error, (AssertionError, NotImplementedError)):
            where = "your answer" if getattr(error, "from_answer", False) else stage
            message += f" (raised in {where})"
        return False, message
    finally:
        fresh_torch_state()


# Checks that hand the answer a live model and a function of their own (which must
# change the model), or that build objects of the student's class: they cannot take the
# answer's results as data, so they run beside the answer, in the answer process, and
# that process reports their verdict. bubblewrap still keeps the machine safe from them.
JUDGED_BESIDE_THE_ANSWER = frozenset({"ex-roberta-accumulation",
                                      "ex-albert-shared-layers"})
WORKER = Path(__file__).with_name("grade_worker.py")
STARTUP = 120  # seconds the answer process may take to start (imports, a busy machine)
MAX_MESSAGE = 1 << 30  # bytes: a bigger reply is refused
SAFE_MODULES = {"torch", "math", "numpy", "tinybert", "collections", "itertools",
                "functools", "re", "random", "copy", "string", "typing", "dataclasses"}


class Stopped(BaseException):
    """The answer process ran out of time, ended or broke the protocol: the exercise
    fails with this message. A BaseException, so that no check can catch it."""


def fresh_torch_state() -> None:
    torch.set_default_dtype(torch.float32)
    torch.set_grad_enabled(True)


def answer_namespace(names: dict, answers: AnswerProcess, deadline: float) -> dict:
    """The checks' namespace: the answer's functions as proxies, its data as data."""
    namespace: dict = {"__name__": "__exercise__"}
    for name, (kind, value) in names.items():
        if kind == "callable":
            namespace[name] = _proxy(answers, name, deadline)
        elif kind == "data":
            namespace[name] = from_answer(value)
        elif kind == "module" and str(value).split(".")[0] in SAFE_MODULES:
            with contextlib.suppress(ImportError):
                namespace[name] = importlib.import_module(str(value))
    return namespace


def _proxy(answers: AnswerProcess, name: str, deadline: float):
    def call(*args, **kwargs):
        return answers.call(name, args, kwargs, deadline)

    call.__name__ = call.__qualname__ = name
    return call


class AnswerProcess:
    """The process that runs one submission's answers (``grade_worker.py``)."""

    def __init__(self, root: Path, *, env: dict, sandbox: tuple[str, ...], limit: int):
        self.root, self.env, self.sandbox, self.limit = root, env, sandbox, limit
        self.process: subprocess.Popen | None = None
        # Kept by the grader, outside the folder the answer may write: an answer that
        # deletes its folder cannot take the grader's records with it.
        self.errors = tempfile.TemporaryFile()

    def start(self) -> None:
        if self.process is not None:
            return
        work = self.root / "work"
        work.mkdir(parents=True, exist_ok=True)  # again, if an answer deleted it
        self.errors.seek(0)
        self.errors.truncate()
        self.process = subprocess.Popen(
            [*_sandboxed(self.sandbox, work), sys.executable, str(WORKER)],
            cwd=work, env=self.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=self.errors, start_new_session=True)
        os.set_blocking(self.process.stdin.fileno(), False)
        self.receive(time.monotonic() + STARTUP, kinds=("ready",))

    def stop(self) -> None:
        if self.process is not None:
            _kill(self.process)
            self.process.wait()
            for pipe in (self.process.stdin, self.process.stdout):
                with contextlib.suppress(OSError):
                    pipe.close()
            self.process = None

    def request(self, message, deadline: float, *, kinds=("names",)) -> tuple:
        self._send(grade_worker.encode(message), deadline)
        return self.receive(deadline, kinds=kinds)

    def call(self, name: str, args: tuple, kwargs: dict, deadline: float):
        """``name(*args, **kwargs)`` run by the answer; what it returns, as data, with
        its changes to the arguments copied back and its gradient, if any, reaching the
        arguments here through the answer process."""
        local = [list(args), kwargs]
        inputs = grade_worker.gradient_inputs(local)
        _, data, after, needs, call = self.request(
            ("call", name, *to_answer(local)), deadline, kinds=("return",))
        copy_back(local[0], after[0])
        copy_back(kwargs, after[1])
        outputs = _tensors(data)
        if len(outputs) != len(needs):
            self._broken("its reply does not list its tensors")
        if inputs and any(needs) and torch.is_grad_enabled():
            def backward(grads):
                return self.backward(call, grads, inputs, deadline)

            linked = iter(_AnswerGradient.apply(backward, len(inputs), needs,
                                                *inputs, *outputs))
            data = _map_tensors(data, lambda _: next(linked))
        return from_answer(data)

    def backward(self, call: int, grads, inputs: list, deadline: float) -> list:
        grads = [grade_worker.to_data(g) for g in grads]
        reply = self.request(("backward", call, grads), deadline, kinds=("grads",))
        got = list(reply[1]) + [None] * (len(inputs) - len(reply[1]))
        for grad, tensor in zip(got, inputs):
            if grad is not None and (not isinstance(grad, torch.Tensor)
                                     or grad.shape != tensor.shape):
                self._broken("it sent a gradient of the wrong shape")
        return [None if g is None else g.to(t.dtype) for g, t in zip(got, inputs)]

    def receive(self, deadline: float, *, kinds) -> tuple:
        (size,) = struct.unpack(">Q", self._read(8, deadline))
        if size > MAX_MESSAGE:
            self._broken(f"it sent {size:,} bytes at once")
        try:
            message = grade_worker.decode(self._read(size, deadline), trusted=False)
        except Exception as error:  # not data: weights_only refused it
            self._broken(f"it sent what is not data ({type(error).__name__})")
        if not isinstance(message, tuple) or not message or (
                message[0] not in (*kinds, "raise")):
            self._broken("it sent an unexpected message")
        if message[0] == "raise":
            raise answer_error(message[1], message[2])
        return message

    def _send(self, data: bytes, deadline: float) -> None:
        fd, view = self.process.stdin.fileno(), memoryview(data)
        while view:
            self._wait(fd, deadline, write=True)
            try:
                view = view[os.write(fd, view):]
            except BlockingIOError:
                continue
            except OSError:  # the answer process has ended
                self._ended()

    def _read(self, size: int, deadline: float) -> bytes:
        fd, chunks = self.process.stdout.fileno(), []
        while size:
            self._wait(fd, deadline)
            chunk = os.read(fd, min(size, 1 << 20))
            if not chunk:
                self._ended()
            chunks.append(chunk)
            size -= len(chunk)
        return b"".join(chunks)

    def _wait(self, fd: int, deadline: float, *, write: bool = False) -> None:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                self.stop()
                raise Stopped(f"TimeoutError: the exercise ran longer than the time "
                              f"limit ({self.limit} s) and did not stop; the grader "
                              f"ended it")
            ready = select.select([], [fd], [], left)[1] if write else (
                select.select([fd], [], [], left)[0])
            if ready:
                return

    def _ended(self):
        try:
            status = self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            status = "unknown"
        self.errors.seek(0)
        last = (self.errors.read().decode(errors="replace").strip().splitlines()
                or [""])[-1]
        self.stop()
        raise Stopped(f"the process running the answer ended during this exercise "
                      f"(exit status {status})" + (f": {last}" if last else ""))

    def _broken(self, why: str):
        self.stop()
        raise Stopped(f"the process running the answer broke off: {why}")


class _AnswerGradient(torch.autograd.Function):
    """Links outputs computed by the answer process to the inputs they came from here:
    their backward asks the answer process for the inputs' gradients."""

    @staticmethod
    def forward(ctx, backward, n_inputs, needs, *tensors):
        ctx.remote, ctx.n_outputs = backward, len(tensors) - n_inputs
        outputs = tuple(t.clone() for t in tensors[n_inputs:])
        ctx.mark_non_differentiable(*(o for o, need in zip(outputs, needs) if not need))
        return outputs

    @staticmethod
    def backward(ctx, *grads):
        return (None, None, None, *ctx.remote(grads), *(None,) * ctx.n_outputs)


def answer_error(names: list, text: str) -> Exception:
    """The answer's exception, raised here as one of the same built-in kind (so that
    ``except ValueError`` in a check works) and the same name, marked as the answer's.
    An answer's SystemExit becomes an ordinary exception: it ends nothing here."""
    base = Exception
    for name in names:
        found = getattr(builtins, str(name), None)
        if isinstance(found, type) and issubclass(found, Exception):
            base = found
            break
    kind = type(str(names[0]) if names else "Exception", (base,), {})
    error = kind(str(text))
    error.from_answer = True
    return error


def to_answer(value):
    """The checks' arguments as the answer process receives them: generators by
    their state, tensors that are part of a graph as new leaves."""
    if isinstance(value, torch.Tensor):
        if value.requires_grad and not value.is_leaf:
            return value.detach().requires_grad_()
        return value
    if isinstance(value, torch.Generator):
        return {grade_worker.GENERATOR: value.get_state()}
    if isinstance(value, (list, tuple)):
        items = [to_answer(v) for v in value]
        return items if isinstance(value, list) else tuple(items)
    if isinstance(value, dict):
        return {k: to_answer(v) for k, v in value.items()}
    if callable(value) and not isinstance(value, (type, torch.nn.Module)):
        raise RuntimeError("the grader cannot hand a function to the answer process; "
                           "list this exercise in grade.JUDGED_BESIDE_THE_ANSWER")
    return value


def from_answer(value):
    """Data from the answer process as the checks see it: a set as a set, a value
    that could not come as data as a stand-in with its type's name and its repr."""
    if isinstance(value, dict):
        if grade_worker.OPAQUE in value:
            shown = str(value.get("repr", ""))
            kind = type(str(value[grade_worker.OPAQUE]), (),
                        {"__repr__": lambda self: shown})
            return kind()
        if grade_worker.SET in value:
            items = [from_answer(v) for v in value[grade_worker.SET]]
            return frozenset(items) if value.get("frozen") else set(items)
        if grade_worker.GENERATOR in value:
            return torch.Generator().set_state(value[grade_worker.GENERATOR])
        return {k: from_answer(v) for k, v in value.items()}
    if isinstance(value, list):
        return [from_answer(v) for v in value]
    if isinstance(value, tuple):
        return tuple(from_answer(v) for v in value)
    return value


def _is_tag(value) -> bool:
    return isinstance(value, dict) and any(
        tag in value for tag in (grade_worker.OPAQUE, grade_worker.SET,
                                 grade_worker.GENERATOR, grade_worker.MODULE))


def _tensors(value) -> list:
    """The tensors of data from the answer, in the order ``to_data`` listed them."""
    found: list = []
    _map_tensors(value, lambda t: found.append(t) or t)
    return found


def _map_tensors(value, change):
    if isinstance(value, torch.Tensor):
        return change(value)
    if isinstance(value, (list, tuple)):
        items = [_map_tensors(v, change) for v in value]
        return items if isinstance(value, list) else tuple(items)
    if isinstance(value, dict) and not _is_tag(value):
        return {k: _map_tensors(v, change) for k, v in value.items()}
    return value


def copy_back(local, after) -> None:
    """Make the checks' argument ``local`` what the answer left of it (``after``), so
    that a check sees an answer that changes its inputs, as it would in one process."""
    if isinstance(local, torch.Tensor):
        if isinstance(after, torch.Tensor) and not (
                local.shape == after.shape and torch.equal(local.detach(),
                                                           after.to(local.dtype))):
            with torch.no_grad():
                if local.shape == after.shape:
                    local.copy_(after)
                else:
                    local.data = after
    elif isinstance(local, torch.Generator):
        if isinstance(after, dict) and grade_worker.GENERATOR in after:
            local.set_state(after[grade_worker.GENERATOR])
    elif isinstance(local, torch.nn.Module):
        if isinstance(after, dict) and after.get(grade_worker.MODULE):
            _copy_back_module(local, after)
    elif isinstance(local, list) and isinstance(after, list):
        if len(local) != len(after):
            local[:] = [from_answer(v) for v in after]
        for index, (mine, theirs) in enumerate(zip(local, after)):
            _copy_item(local, index, mine, theirs)
    elif isinstance(local, tuple) and isinstance(after, (list, tuple)):
        for mine, theirs in zip(local, after):
            copy_back(mine, theirs)
    elif isinstance(local, dict) and isinstance(after, dict) and not _is_tag(after):
        for key in [k for k in local if k not in after]:
            del local[key]
        for key, theirs in after.items():
            _copy_item(local, key, local.get(key), theirs)


def _copy_item(container, key, mine, theirs) -> None:
    if isinstance(mine, (torch.Tensor, torch.Generator, torch.nn.Module, list, tuple,
                         dict)):
        copy_back(mine, theirs)
    elif isinstance(theirs, dict) and grade_worker.OPAQUE in theirs:
        pass  # it did not come as data: the check's own value stays
    elif not (type(mine) is type(theirs) and mine == theirs):
        container[key] = from_answer(theirs)


def _copy_back_module(module: torch.nn.Module, after: dict) -> None:
    with torch.no_grad():
        for name, tensor in module.state_dict(keep_vars=True).items():
            new = after["tensors"].get(name)
            if isinstance(new, torch.Tensor) and new.shape == tensor.shape:
                tensor.copy_(new)
    for name, parameter in module.named_parameters():
        grad = after["grads"].get(name)
        if isinstance(grad, torch.Tensor) and grad.shape == parameter.shape:
            parameter.grad = grad.to(parameter.dtype)
    for name, part in module.named_modules():
        for key, value in after["settings"].get(name, {}).items():
            if key in vars(part) and type(value) in grade_worker.SIMPLE:
                setattr(part, key, value)


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
    renamed (write_atomically), so that an interrupted run never leaves half a file."""
    def write(temporary: str) -> None:
        with open(temporary, "w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(["submission", "chapter", "exercise", "passed", "points",
                             "max_points", "message"])
            for r in results:
                writer.writerow([r.submission, r.chapter, r.exercise, int(r.passed),
                                 f"{r.points:g}", f"{r.max_points:g}", r.message])

    write_atomically(target, write)


if __name__ == "__main__":
    sys.exit(main())
