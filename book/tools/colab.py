"""Hand-written: the Colab rehearsal. Every chapter is executed as a Colab user
runs it: from the wheel, installed by the notebook's own install cell, with the newest
torch, in a folder outside the repository.

Usage (``make colab``; CI runs it)::

    python -m book.tools.colab --work /tmp/tinybert-colab [--torch 2.14.1] [--only 01]

What it does, in order:

1. builds the wheel of this checkout (``pip wheel``), as pip does for
   ``git+<repository>``;
2. makes a fresh virtual environment in WORK with the newest torch installable here
   (the CUDA build, as on Colab; it runs on the CPU), what a Colab runtime already
   holds (COLAB_HAS) and the machinery that runs notebooks (ipykernel, nbclient): no
   test or book extras, and no tinybert;
3. writes the Colab edition of the notebooks (``make notebooks``) into WORK, with the
   install cell's ``git+<repository>@<commit>`` swapped for the wheel;
4. executes every chapter in quick mode with ``google.colab`` imported (so the install
   cell runs, and installs tinybert with pip, leaving torch alone), under an audit hook
   that refuses to open any path inside the repository: a chapter that reaches for a
   file beside the source tree fails here as it would on Colab.

It prints a table of the chapters and their times, writes it to WORK/report.json, and
exits 1 if any chapter failed or if the install cell changed torch.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nbformat

from book.tools.chapters import ROOT
from book.tools.editions import INSTALL_SPEC, write_notebooks

KERNEL = "tinybert-colab"
# what a Colab runtime already holds, of what the chapters use (the newest
# of each here);
# tinybert's other needs are the install cell's to bring
COLAB_HAS = [
    "numpy",
    "matplotlib",
    "tqdm",
    "regex",
    "safetensors",
    "einops",
    "transformers",
    "tokenizers",
]
# Colab imports google.colab before the first cell; the rehearsal's kernels do the same,
# and refuse to open anything inside the repository (the hook runs in every process
# started with TINYBERT_REHEARSAL_REPO set: the notebook runner, the kernel, pip).
STARTUP = '''"""Hand-written by book/tools/colab.py: the rehearsal's start-up code."""
import os
import sys

_REPO = os.environ.get("TINYBERT_REHEARSAL_REPO")
if _REPO:
    import google.colab  # noqa: F401  (the stub below: Colab has the real one imported)

    _REPO = os.path.realpath(_REPO)

    def _refuse_repository(event, args):
        if event != "open" or not args or isinstance(args[0], int):
            return
        try:
            path = os.path.realpath(os.fsdecode(args[0]))
        except (TypeError, ValueError):
            return
        if path == _REPO or path.startswith(_REPO + os.sep):
            raise PermissionError(
                f"Colab rehearsal: {path} is inside the repository ({_REPO}); on "
                "Colab there is no checkout: read it through the package or the data "
                "registry"
            )

    sys.addaudithook(_refuse_repository)
'''
COLAB_STUB = (
    '"""Stub for the Colab rehearsal (book/tools/colab.py): Colab\'s module."""\n'
)


def run(command: list[str], **kwargs) -> None:
    print("+", " ".join(str(c) for c in command), flush=True)
    subprocess.run(command, check=True, **kwargs)


def build_wheel(out: Path) -> Path:
    shutil.rmtree(out, ignore_errors=True)
    run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "-w",
            str(out),
            str(ROOT),
        ]
    )
    wheels = sorted(out.glob("tinybert-*.whl"))
    if len(wheels) != 1:
        raise RuntimeError(f"expected one tinybert wheel in {out}, found {wheels}")
    return wheels[0]


def make_venv(venv: Path, torch: str) -> Path:
    """A fresh environment with torch==``torch`` and a kernel; returns its python."""
    shutil.rmtree(venv, ignore_errors=True)
    run([sys.executable, "-m", "venv", str(venv)])
    python = venv / "bin" / "python"
    run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "--quiet",
            f"torch=={torch}",
            *COLAB_HAS,
            "ipykernel",
            "nbclient",
            "nbformat",
        ]
    )
    run([str(python), "-m", "ipykernel", "install", "--sys-prefix", "--name", KERNEL])
    site = Path(
        subprocess.run(
            [
                str(python),
                "-c",
                "import sysconfig; print(sysconfig.get_paths()['purelib'])",
            ],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    (site / "google" / "colab").mkdir(parents=True)
    (site / "google" / "colab" / "__init__.py").write_text(COLAB_STUB)
    (site / "_tinybert_colab_rehearsal.py").write_text(STARTUP)
    (site / "_tinybert_colab_rehearsal.pth").write_text(
        "import _tinybert_colab_rehearsal\n"
    )
    return python


def colab_notebooks(out: Path, wheel: Path, only: list[str] | None) -> list[Path]:
    """The Colab edition in ``out``, installing ``wheel`` instead of the repository."""
    shutil.rmtree(out, ignore_errors=True)
    written = write_notebooks(out, colab=True)
    chosen = [p for p in written if not only or p.stem[:2] in only]
    if only and len(chosen) != len(only):
        raise SystemExit(f"--only {only}: no such chapter(s) among {len(written)}")
    for path in chosen:
        notebook = nbformat.read(path, as_version=4)
        cell = notebook.cells[0]
        if cell.source.count(INSTALL_SPEC) != 1:
            raise RuntimeError(f"{path}: the install cell does not name {INSTALL_SPEC}")
        cell.source = cell.source.replace(
            INSTALL_SPEC, repr(f"tinybert @ {wheel.as_uri()}")
        )
        nbformat.write(notebook, path)
    return chosen


# Runs inside the rehearsal's environment: executes one notebook, then checks that the
# install cell left torch as it found it.
EXECUTE = '''
import sys, nbformat
from nbclient import NotebookClient
path, kernel, torch_before = sys.argv[1:4]
notebook = nbformat.read(path, as_version=4)
check = "import torch; print(torch.__version__)"
notebook.cells.append(nbformat.v4.new_code_cell(check))
NotebookClient(notebook, kernel_name=kernel, timeout=600,
               resources={"metadata": {"path": sys.argv[4]}}).execute()
nbformat.write(notebook, path)
torch_after = notebook.cells[-1].outputs[0]["text"].strip()
if torch_after != torch_before:
    sys.exit(f"the install cell changed torch from {torch_before} to {torch_after}")
'''


def execute(python: Path, notebooks: list[Path], work: Path) -> list[dict]:
    torch_before = subprocess.run(
        [str(python), "-c", "import torch; print(torch.__version__)"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    env = {
        **os.environ,
        "TINYBERT_QUICK": "1",
        "TINYBERT_REHEARSAL_REPO": str(ROOT),
        "MPLBACKEND": "Agg",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    runs = []
    shutil.rmtree(work / "run", ignore_errors=True)
    for path in notebooks:
        cwd = work / "run" / path.stem  # each chapter starts in an empty folder
        cwd.mkdir(parents=True)
        start = time.perf_counter()
        done = subprocess.run(
            [str(python), "-c", EXECUTE, str(path), KERNEL, torch_before, str(cwd)],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
        )
        seconds = time.perf_counter() - start
        ok = done.returncode == 0
        runs.append(
            {
                "chapter": path.stem,
                "ok": ok,
                "seconds": round(seconds, 1),
                "torch": torch_before,
                "error": None if ok else done.stderr.strip()[-3000:],
            }
        )
        print(
            f"{path.stem:<24} {'ok' if ok else 'FAILED':<7} {seconds:6.1f} s",
            flush=True,
        )
        if not ok:
            print(runs[-1]["error"], file=sys.stderr)
    return runs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--work",
        type=Path,
        required=True,
        help="a folder outside the repository (emptied first)",
    )
    parser.add_argument(
        "--torch",
        default="2.14.1",
        help="the torch to install (default: the newest installable here)",
    )
    parser.add_argument("--only", nargs="+", metavar="NN", help="chapter numbers")
    args = parser.parse_args(argv)
    work = args.work.resolve()
    if work == ROOT or ROOT in work.parents or work in ROOT.parents:
        parser.error(f"--work {work}: must lie outside the repository {ROOT}")
    if "TINYBERT_DATA_DIR" not in os.environ:
        print(
            "colab: TINYBERT_DATA_DIR is not set: the chapters will "
            "download their data",
            file=sys.stderr,
        )
    work.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    wheel = build_wheel(work / "wheel")
    python = make_venv(work / "venv", args.torch)
    notebooks = colab_notebooks(work / "notebooks", wheel, args.only)
    runs = execute(python, notebooks, work)
    failed = [r["chapter"] for r in runs if not r["ok"]]
    report = {
        "torch": args.torch,
        "wheel": wheel.name,
        "chapters": runs,
        "failed": failed,
        "seconds": round(time.perf_counter() - started),
    }
    (work / "report.json").write_text(json.dumps(report, indent=1) + "\n")
    print(
        f"colab rehearsal: {len(runs) - len(failed)} of {len(runs)} chapters ran from "
        f"the wheel with torch {runs[0]['torch'] if runs else args.torch} in "
        f"{report['seconds']} s (report: {work / 'report.json'})"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
