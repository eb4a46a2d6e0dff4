"""Hand-written: everything a lent GPU should check, in one run of at most 8 minutes,
written to one JSON file (``make gpu-check``; see benchmarks/README.md).

    PYTHONPATH=. python3 benchmarks/gpu_check.py --out DIR         # on the GPU machine
    PYTHONPATH=. python3 benchmarks/gpu_check.py --out DIR --tiny  # seconds, on a CPU

Steps, in this order, each in a subprocess with a timeout, none stopping the others:

1. ``environment``: device name, compute capability, torch/CUDA/Python versions, the git
   commit, SDPA backends, TF32 settings;
2. ``data``: the course data (``$TINYBERT_DATA_DIR``, or ``_gpu/data.tar.xz`` unpacked
   into a temporary folder) checked file by file against the registry's SHA-256;
3. ``parity``: ``pytest -m device tests/test_device_parity.py`` on the device
   (``TINYBERT_TEST_DEVICE``), with pass/fail counts, durations and the measured errors;
4. ``throughput``: benchmarks/gpu_throughput.py, the bert-mini training step by
   precision and batch size, with FLOPs per token, TFLOP/s and a CPU reference from the
   same run;
5. ``chapters_quick``: every chapter in quick mode (``TINYBERT_QUICK=1``), executed cell
   by cell by benchmarks/run_chapter.py from a temporary folder outside the repository;
6. ``chapters_normal``: chapters in normal mode, shortest CPU budget (book/budgets.json)
   first, while the deadline leaves 1.5 times the CPU budget.

A step's status is passed, failed, skipped, or incomplete (chapters left out by the
deadline, none failed); a chapter's is passed, failed, timeout (its own limit),
stopped (MiniLM), cut (by the run's deadline) or skipped.

all-MiniLM-L6-v2 (90.9 MB) cannot travel to the lent machine: a chapter that stops with
the data registry's error for it is recorded as ``"stopped": "needs all-MiniLM-L6-v2
(not carried)"``, with the cell it reached. Downloads are made to fail at once (a proxy
address that refuses connections), so that a missing file never waits for a network
timeout.

The JSON is rewritten atomically after every step and every chapter; ``--deadline-s``
(default 420) is enforced by skipping what no longer fits, recorded as skipped.
``--tiny``: the parity tests on the CPU, chapter 01 in quick mode and one tiny
throughput row (the test tests/test_gpu_check.py runs it, so that the script cannot
rot).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
import xml.etree.ElementTree as ET
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MINILM = "all-MiniLM-L6-v2"
STOPPED_MINILM = f"needs {MINILM} (not carried)"
# seconds kept free at the deadline for writing the results
RESERVE = 10.0


class Check:
    """The results so far, the clock, and the atomic writer."""

    def __init__(self, out: Path, deadline_s: float, tiny: bool, device: str):
        self.out, self.start, self.deadline_s = out, time.monotonic(), deadline_s
        self.path = out / "gpu_check.json"
        self.data = {
            "about": (
                "benchmarks/gpu_check.py: see its docstring and benchmarks/README.md"
            ),
            "started": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "tiny": tiny,
            "device": device,
            "deadline_s": deadline_s,
            "finished": False,
            "elapsed_s": 0.0,
            "steps": {},
            "summary": {},
        }

    def remaining(self) -> float:
        return self.deadline_s - (time.monotonic() - self.start) - RESERVE

    def save(self) -> None:
        self.data["elapsed_s"] = round(time.monotonic() - self.start, 1)
        steps = self.data["steps"].items()
        self.data["summary"] = {
            status: [name for name, s in steps if s.get("status") == status]
            for status in ("passed", "failed", "incomplete", "skipped", "running")
        }
        self.data["all_passed"] = all(s.get("status") == "passed" for _, s in steps)
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps(self.data, indent=1, default=str) + "\n")
        os.replace(tmp, self.path)

    def step(self, name: str, fn, *, needs: float) -> None:
        """Run ``fn(record)`` unless fewer than ``needs`` seconds are left; an exception
        becomes a failed step with its message."""
        record = self.data["steps"].setdefault(name, {})
        if self.remaining() < needs:
            record.update(
                status="skipped",
                reason=f"deadline: {self.remaining():.0f} s left, "
                f"step needs about {needs:.0f} s",
            )
            self.save()
            return
        record["status"] = "running"
        self.save()
        began = time.monotonic()
        try:
            fn(record)
            if record["status"] == "running":
                record["status"] = "passed"
        except Exception as error:  # noqa: BLE001 - recorded; the other steps go on
            import traceback

            record.update(
                status="failed",
                error=f"{type(error).__name__}: {error}"[:2000],
                traceback=traceback.format_exc()[-3000:],
            )
        record["seconds"] = round(time.monotonic() - began, 2)
        self.save()


def run(
    command: list[str],
    *,
    timeout: float,
    env: dict | None = None,
    cwd=None,
    log: Path | None = None,
) -> tuple[int | None, str, float]:
    """(exit status or None on timeout, stdout+stderr, seconds); the whole process group
    is killed at the timeout."""
    began = time.monotonic()
    with tempfile.TemporaryFile("w+") as sink:
        process = subprocess.Popen(
            command,
            stdout=sink,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=cwd,
            start_new_session=True,
            text=True,
        )
        try:
            code = process.wait(timeout=max(1.0, timeout))
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            code = None
        sink.seek(0)
        text = sink.read()
    if log is not None:
        log.write_text(text)
    return code, text, time.monotonic() - began


def tail(text: str, chars: int = 1500) -> str:
    lines = [line for line in text.splitlines() if not line.startswith("#cell ")]
    return "\n".join(lines)[-chars:]


def child_env(device: str, **extra: str) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(ROOT), env.get("PYTHONPATH")])
    )
    env.update(
        MPLBACKEND="Agg",
        PYTHONDONTWRITEBYTECODE="1",
        TINYBERT_DEVICE=device,
        # no network on the lent machine: make every download fail at once
        http_proxy="http://127.0.0.1:9",
        https_proxy="http://127.0.0.1:9",
        HTTP_PROXY="http://127.0.0.1:9",
        HTTPS_PROXY="http://127.0.0.1:9",
        no_proxy="",
        NO_PROXY="",
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
    )
    env.update(extra)
    return env


# --- steps ----------------------------------------------------------------------------


def environment(check: Check, record: dict) -> None:
    import torch

    device = torch.device(check.data["device"])
    record.update(
        python=platform.python_version(),
        platform=platform.platform(),
        torch=torch.__version__,
        cuda=torch.version.cuda,
        cudnn=torch.backends.cudnn.version()
        if torch.backends.cudnn.is_available()
        else None,
        cpu_count=os.cpu_count(),
        torch_threads=torch.get_num_threads(),
    )
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        capability = torch.cuda.get_device_capability(device)
        record.update(
            device_name=torch.cuda.get_device_name(device),
            capability=list(capability),
            memory_gib=round(props.total_memory / 2**30, 1),
            bf16_native=capability >= (8, 0),
            bf16_supported_including_emulation=torch.cuda.is_bf16_supported(),
            sdpa={
                "flash": torch.backends.cuda.flash_sdp_enabled(),
                "mem_efficient": torch.backends.cuda.mem_efficient_sdp_enabled(),
                "math": torch.backends.cuda.math_sdp_enabled(),
            },
            tf32_default={
                "matmul": torch.backends.cuda.matmul.allow_tf32,
                "cudnn": torch.backends.cudnn.allow_tf32,
                "float32_matmul_precision": torch.get_float32_matmul_precision(),
            },
        )
    else:
        record.update(
            device_name=platform.processor() or platform.machine(), capability=None
        )
    from tinybert.training.optim import autocast_dtype

    record["autocast_dtype"] = str(autocast_dtype(device))
    record["git"] = git_commit()
    check.data["environment"] = {
        k: record[k] for k in ("device_name", "capability", "torch", "cuda", "python")
    }
    check.data["environment"]["git_commit"] = record["git"].get("commit")


def git_commit() -> dict:
    """The commit of the checkout: from git when it is there, else from _gpu/commit.txt
    (written by benchmarks/pack_gpu_data.sh; the lent machine gets no .git folder)."""
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=10,
        )
        if commit.returncode == 0:
            dirty = subprocess.run(
                ["git", "status", "--porcelain", "--untracked-files=no"],
                cwd=ROOT,
                capture_output=True,
                text=True,
                timeout=20,
            )
            return {
                "commit": commit.stdout.strip(),
                "source": "git",
                "modified_files": len(dirty.stdout.splitlines()),
            }
    except (OSError, subprocess.SubprocessError):
        pass
    saved = ROOT / "_gpu" / "commit.txt"
    if saved.is_file():
        return {"source": "_gpu/commit.txt", **json.loads(saved.read_text())}
    return {"commit": None, "source": "unknown"}


def data_step(check: Check, record: dict, data_dir: Path | None) -> None:
    from tinybert.data import REGISTRY
    from tinybert.data.fetching import sha256_of

    record["data_dir"] = str(data_dir) if data_dir else None
    if data_dir is None:
        record.update(
            status="failed",
            error="no data: set TINYBERT_DATA_DIR or build "
            "_gpu/data.tar.xz (benchmarks/pack_gpu_data.sh)",
        )
        return
    verified, missing, bad, not_carried, not_offline = 0, [], [], [], []
    for entry in REGISTRY.values():
        path = data_dir / entry.relpath
        if not path.is_file():
            if MINILM in entry.relpath:
                not_carried.append(entry.relpath)
            elif not entry.offline_copy:  # not in the course's offline folder either
                not_offline.append(entry.relpath)
            else:
                missing.append(entry.relpath)
        elif sha256_of(path) != entry.sha256:
            bad.append(entry.relpath)
        else:
            verified += 1
    record.update(
        verified=verified,
        missing=missing,
        bad_sha256=bad,
        not_carried=len(not_carried),
        not_in_offline_data=not_offline,
    )
    if missing or bad:
        record["status"] = "failed"


def parity_step(check: Check, record: dict) -> None:
    device = check.data["device"]
    xml, report = check.out / "parity.xml", check.out / "parity_errors.json"
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-m",
        "device",
        "-p",
        "no:cacheprovider",
        f"--junitxml={xml}",
        "tests/test_device_parity.py",
    ]
    env = child_env(
        device, TINYBERT_TEST_DEVICE=device, TINYBERT_PARITY_REPORT=str(report)
    )
    code, text, seconds = run(
        command,
        timeout=min(300.0, check.remaining()),
        env=env,
        cwd=ROOT,
        log=check.out / "parity.log",
    )
    record.update(
        command=" ".join(command[1:]),
        exit_status=code,
        wall_s=round(seconds, 1),
        output_tail=tail(text, 3000),
    )
    if xml.is_file():
        suite = ET.parse(xml).getroot()
        suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
        counts = {
            k: int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")
        }
        counts["passed"] = (
            counts["tests"] - counts["failures"] - counts["errors"] - counts["skipped"]
        )
        cases = []
        for case in suite.iter("testcase"):
            outcome = next(
                (
                    child.tag
                    for child in case
                    if child.tag in ("failure", "error", "skipped")
                ),
                "passed",
            )
            item = {
                "test": case.get("name"),
                "seconds": float(case.get("time", 0)),
                "outcome": outcome,
            }
            if outcome in ("failure", "error"):
                item["message"] = (case.find(outcome).get("message") or "")[:500]
            cases.append(item)
        record.update(
            counts=counts, pytest_seconds=float(suite.get("time", 0)), tests=cases
        )
    if report.is_file():
        record["measured_errors"] = json.loads(report.read_text())
    if code != 0 or not record.get("counts", {}).get("passed"):
        record["status"] = "failed"


def throughput_step(check: Check, record: dict) -> None:
    device = check.data["device"]
    target = check.out / "throughput.json"
    command = [
        sys.executable,
        "benchmarks/gpu_throughput.py",
        "--out",
        str(target),
        "--device",
        device,
    ]
    if check.data["tiny"]:
        command.append("--tiny")
    elif device == "cpu":  # the GPU's batch sizes would take minutes on a CPU
        command += ["--tokens", "1024", "4096", "--min-seconds", "2"]
    code, text, seconds = run(
        command,
        timeout=min(240.0, check.remaining()),
        env=child_env(device),
        cwd=ROOT,
        log=check.out / "throughput.log",
    )
    record.update(
        exit_status=code, wall_s=round(seconds, 1), output_tail=tail(text, 2000)
    )
    if target.is_file():
        record["table"] = json.loads(target.read_text())
    rows = record.get("table", {}).get("rows", [])
    if code != 0 or not rows or record["table"].get("errors"):
        record["status"] = "failed"


def budgets() -> dict[str, float]:
    """CPU normal-mode seconds per chapter from book/budgets.json (a guess
    where absent)."""
    try:
        chapters = json.loads((ROOT / "book" / "budgets.json").read_text())["chapters"]
        return {
            name: entry["normal"]["cpu"]["seconds"]
            for name, entry in chapters.items()
            if "cpu" in entry.get("normal", {})
        }
    except (OSError, KeyError, ValueError):
        return {}


def run_one_chapter(
    check: Check, chapter: Path, *, quick: bool, timeout: float, data_dir: Path | None
) -> dict:
    device = check.data["device"]
    extra = {"TINYBERT_QUICK": "1" if quick else "0"}
    if data_dir is not None:
        extra["TINYBERT_DATA_DIR"] = str(data_dir)
    (check.out / "chapters").mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f"gpu-check-{chapter.stem}-") as folder:
        extra["TINYBERT_CACHE_DIR"] = str(Path(folder) / "cache")
        code, text, seconds = run(
            [sys.executable, str(ROOT / "benchmarks" / "run_chapter.py"), str(chapter)],
            timeout=timeout,
            env=child_env(device, **extra),
            cwd=folder,
            log=check.out
            / "chapters"
            / f"{chapter.stem}.{'quick' if quick else 'normal'}.log",
        )
    result = {
        "chapter": chapter.stem,
        "seconds": round(seconds, 1),
        "exit_status": code,
    }
    summary = next(
        (
            json.loads(line.split(" ", 1)[1])
            for line in reversed(text.splitlines())
            if line.startswith("#run_chapter ")
        ),
        None,
    )
    reached = next(
        (
            line.split()[1]
            for line in reversed(text.splitlines())
            if line.startswith("#cell ")
        ),
        None,
    )
    if summary:
        result.update(summary)
    elif reached:
        result["reached_cell"] = reached
    if code == 0:
        result["status"] = "passed"
    elif code is None:
        result.update(
            status="timeout", timeout_s=round(timeout), stderr_tail=tail(text)
        )
    else:
        error = (summary or {}).get("error", "")
        if MINILM in error and (
            "DataUnavailableError" in error or "not on this machine" in error
        ):
            result.update(status="stopped", stopped=STOPPED_MINILM)
        else:
            result["status"] = "failed"
        result["stderr_tail"] = tail(text)
    return result


def chapters_step(
    check: Check,
    record: dict,
    chapters: list[Path],
    *,
    quick: bool,
    data_dir: Path | None,
) -> None:
    seconds = budgets()
    if not quick:  # the cheapest first, while 1.5 times its CPU budget fits
        chapters = sorted(chapters, key=lambda c: seconds.get(c.stem, 600.0))
    results = record.setdefault("chapters", [])
    for chapter in chapters:
        estimate = 60.0 if quick else seconds.get(chapter.stem, 600.0)
        left = check.remaining()
        if (quick and left < 20.0) or (not quick and left < 1.5 * estimate):
            results.append(
                {
                    "chapter": chapter.stem,
                    "status": "skipped",
                    "reason": f"deadline: {left:.0f} s left"
                    + ("" if quick else f", CPU budget {estimate:.0f} s"),
                }
            )
            check.save()
            continue
        cap = 180.0 if quick else 2.0 * estimate + 60.0
        result = run_one_chapter(
            check, chapter, quick=quick, data_dir=data_dir, timeout=min(cap, left)
        )
        if result["status"] == "timeout" and left < cap:
            # stopped by the run's deadline, not by its own limit: not a failure
            result["status"] = "cut"
        results.append(result)
        check.save()
    statuses = [r["status"] for r in results]
    record["counts"] = {s: statuses.count(s) for s in sorted(set(statuses))}
    record["status"] = (
        "failed"
        if {"failed", "timeout"} & set(statuses)
        else "incomplete"
        if {"skipped", "cut"} & set(statuses)
        else "passed"
    )


# --- main -----------------------------------------------------------------------------


def prepare_data(
    archive: Path, explicit: str | None
) -> tuple[Path | None, str, Path | None]:
    """The data folder to use, where it came from, and a temporary folder to delete at
    the end: --data-dir, else the archive (unpacked into a temporary folder; it holds
    one folder, ``data``), else $TINYBERT_DATA_DIR."""
    if explicit:
        return Path(explicit).absolute(), "--data-dir", None
    if archive.is_file():
        target = Path(tempfile.mkdtemp(prefix="tinybert-data-"))
        with tarfile.open(archive, "r:xz") as tar:
            if hasattr(tarfile, "data_filter"):  # Python >= 3.12 (and 3.11.4)
                tar.extractall(target, filter="data")
            else:
                tar.extractall(target)
        return target / "data", f"unpacked from {archive}", target
    value = os.environ.get("TINYBERT_DATA_DIR", "").strip()
    return (
        (Path(value).absolute(), "TINYBERT_DATA_DIR", None)
        if value
        else (None, "none", None)
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--out", type=Path, required=True, help="folder for gpu_check.json"
    )
    parser.add_argument(
        "--tiny", action="store_true", help="the CPU smoke run (seconds)"
    )
    parser.add_argument("--deadline-s", type=float, default=420.0)
    parser.add_argument(
        "--device", default=None, help="default: cuda if available, else cpu"
    )
    parser.add_argument("--data-dir", default=None)
    parser.add_argument(
        "--data-archive", type=Path, default=ROOT / "_gpu" / "data.tar.xz"
    )
    parser.add_argument(
        "--chapters",
        nargs="*",
        default=None,
        help="chapter numbers, e.g. 01 03 (default: all; --tiny: 01)",
    )
    parser.add_argument(
        "--skip",
        nargs="*",
        default=[],
        help="steps to leave out: data parity throughput chapters_quick "
        "chapters_normal",
    )
    args = parser.parse_args(argv)
    import torch

    device = (
        "cpu"
        if args.tiny
        else args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    )
    args.out.mkdir(parents=True, exist_ok=True)
    check = Check(args.out, args.deadline_s, args.tiny, device)
    check.save()
    check.step("environment", lambda r: environment(check, r), needs=0.0)
    unpacked = time.monotonic()
    data_dir, source, temporary = prepare_data(args.data_archive, args.data_dir)
    check.data["data"] = {
        "dir": str(data_dir) if data_dir else None,
        "source": source,
        "unpack_s": round(time.monotonic() - unpacked, 1),
    }
    if data_dir is not None:
        os.environ["TINYBERT_DATA_DIR"] = str(data_dir)
    numbers = (
        args.chapters if args.chapters is not None else (["01"] if args.tiny else None)
    )
    chapters = sorted(
        p
        for p in (ROOT / "chapters").glob("[0-9][0-9]_*.py")
        if numbers is None or p.name[:2] in numbers
    )
    plan = [
        ("data", lambda r: data_step(check, r, data_dir), 0.0),
        ("parity", lambda r: parity_step(check, r), 30.0),
        ("throughput", lambda r: throughput_step(check, r), 20.0),
        (
            "chapters_quick",
            lambda r: chapters_step(check, r, chapters, quick=True, data_dir=data_dir),
            20.0,
        ),
    ]
    if not args.tiny:
        plan.append(
            (
                "chapters_normal",
                lambda r: chapters_step(
                    check, r, chapters, quick=False, data_dir=data_dir
                ),
                20.0,
            )
        )
    for name, fn, needs in plan:
        if name in args.skip:
            check.data["steps"][name] = {"status": "skipped", "reason": "--skip"}
            check.save()
            continue
        check.step(name, fn, needs=needs)
    check.data["finished"] = True
    check.save()
    if temporary is not None:
        shutil.rmtree(temporary, ignore_errors=True)
    summary = check.data["summary"]
    print(
        f"gpu_check: {check.path} ({check.data['elapsed_s']} s): passed "
        f"{summary['passed']}, failed {summary['failed']}, skipped {summary['skipped']}"
    )
    return 0 if not summary["failed"] else 1


if __name__ == "__main__":
    sys.exit(main())
