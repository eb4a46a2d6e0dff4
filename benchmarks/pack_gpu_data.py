"""Hand-written: pack the course data for a lent GPU machine into ``_gpu/data.tar.xz``.

    python3 benchmarks/pack_gpu_data.py   # from $TINYBERT_DATA_DIR, else ../shared/data
    make gpu-data                                   # the same

The lent machine receives the working tree and at most 64 MiB of ignored paths (``carry:
["_gpu"]``), and the data folder lies outside the tree. The archive holds one folder,
``data/``, with everything of the data folder except ``pretrained/`` (all-MiniLM-L6-v2,
90.9 MB, which cannot travel; the chapters that need it are recorded as stopped there).
``make gpu-check`` unpacks it into a temporary folder and points ``TINYBERT_DATA_DIR``
at it; the data registry checks every file's SHA-256 as usual. The commit of the
checkout goes to ``_gpu/commit.txt`` (the lent machine gets no .git folder). It refuses
to write an archive over ``--max-mib`` (default 34: the tree itself takes about 26 of
the 64 MiB).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LEFT_OUT = ("pretrained",)  # top-level folders that do not travel


def commit_info() -> dict:
    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout

    try:
        return {
            "commit": git("rev-parse", "HEAD").strip(),
            "modified_files": len(
                git("status", "--porcelain", "--untracked-files=no").splitlines()
            ),
        }
    except (OSError, subprocess.CalledProcessError):
        return {"commit": None}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--source",
        type=Path,
        default=Path(
            os.environ.get("TINYBERT_DATA_DIR", "").strip()
            or ROOT.parent / "shared" / "data"
        ),
    )
    parser.add_argument("--out", type=Path, default=ROOT / "_gpu" / "data.tar.xz")
    parser.add_argument("--max-mib", type=float, default=34.0)
    args = parser.parse_args(argv)
    source = args.source.expanduser().absolute()
    if not (source / "SOURCES.md").is_file():
        print(
            f"{source} is not the course's data folder (no SOURCES.md)", file=sys.stderr
        )
        return 2
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_name(args.out.name + ".part")
    count, raw = 0, 0
    with tarfile.open(tmp, "w:xz", preset=6) as tar:
        for path in sorted(source.rglob("*")):
            relative = path.relative_to(source)
            if relative.parts[0] in LEFT_OUT or not path.is_file() or path.is_symlink():
                continue
            tar.add(path, arcname=(Path("data") / relative).as_posix(), recursive=False)
            count, raw = count + 1, raw + path.stat().st_size
    size = tmp.stat().st_size
    if size > args.max_mib * 2**20:
        tmp.unlink()
        print(
            f"the archive would take {size / 2**20:.1f} MiB, over --max-mib "
            f"{args.max_mib}",
            file=sys.stderr,
        )
        return 1
    os.replace(tmp, args.out)
    (args.out.parent / "commit.txt").write_text(json.dumps(commit_info()) + "\n")
    print(
        f"{args.out}: {count} files, {raw / 2**20:.1f} MiB -> {size / 2**20:.1f} MiB "
        f"(left out: {', '.join(LEFT_OUT)})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
