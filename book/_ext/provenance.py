"""Hand-written Sphinx extension: say on every executed page when and with what it was executed.

The book build executes each chapter (myst-nb, ``execute_notebooks: force``), so the outputs on
a page are only as trustworthy as the run that made them. This extension adds a footer to each
chapter page: the time the notebook finished executing and how long it took (from myst-nb's own
execution record), the mode (quick or normal), and the versions of tinybert, PyTorch and Python
and the device, as reported by the very kernel that executed the chapters: the kernel's
interpreter is run once per build, in the build's environment, with a short probe.

A page whose notebook was not executed in this build (execution turned off, or outputs taken
from a cache of an earlier run) says so instead of claiming a run that did not happen.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime, timezone

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.util import logging

logger = logging.getLogger(__name__)

PROBE = """
import json, os, platform
import torch, tinybert
from tinybert.runtime import get_device, is_quick
device = get_device()
print(json.dumps({
    "tinybert": tinybert.__version__,
    "torch": torch.__version__,
    "python": platform.python_version(),
    "device": device.type,
    "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
    "cpu_count": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
    "quick": is_quick(),
}))
"""


def kernel_python(kernel_name: str) -> str:
    """The interpreter a Jupyter kernel runs (its kernelspec's first argument)."""
    from jupyter_client.kernelspec import KernelSpecManager

    argv = KernelSpecManager().get_kernel_spec(kernel_name).argv
    return argv[0] if argv and argv[0] not in {"python", "python3"} else sys.executable


def probe(python: str, cwd: str | None = None) -> dict:
    """Run the probe with ``python`` in this process's environment; return what it reports."""
    result = subprocess.run([python, "-c", PROBE], capture_output=True, text=True, cwd=cwd,
                            env=dict(os.environ), timeout=300)
    if result.returncode != 0:
        raise RuntimeError(f"the provenance probe failed with {python}:\n{result.stderr[-2000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def _kernel_report(app: Sphinx, kernel_name: str) -> dict:
    # Kept on the application, not in the pickled environment: every build probes afresh.
    if not hasattr(app, "_tinybert_kernel_reports"):
        app._tinybert_kernel_reports = {}
    cache = app._tinybert_kernel_reports
    if kernel_name not in cache:
        cache[kernel_name] = probe(kernel_python(kernel_name), cwd=app.confdir)
    return cache[kernel_name]


def footer_text(executed: dict | None, report: dict) -> str:
    """The footer's sentence, from myst-nb's execution record and the kernel's report."""
    device = {"cuda": f"a GPU ({report.get('gpu') or 'CUDA'})", "mps": "an Apple GPU (MPS)"}.get(
        report["device"], f"the CPU ({report['cpu_count']} cores)")
    versions = (f"tinybert {report['tinybert']}, PyTorch {report['torch']} and "
                f"Python {report['python']}, on {device}")
    if not executed or not executed.get("mtime"):
        return (f"The code on this page was not executed when this page was built; this build "
                f"used {versions}.")
    when = datetime.fromtimestamp(executed["mtime"], tz=timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    took = executed.get("runtime")
    took = f" in {took:.0f} s" if isinstance(took, (int, float)) else ""
    mode = "quick mode (TINYBERT_QUICK=1)" if report["quick"] else "normal mode"
    how = "" if executed.get("method") in (None, "force", "auto", "inline") else \
        f" (outputs from the {executed['method']} execution record)"
    return (f"This page was executed on {when}{took}, in {mode}, with {versions}{how}.")


def _add_footer(app: Sphinx, doctree: nodes.document) -> None:
    docname = app.env.docname
    if not any(docname.startswith(prefix) for prefix in app.config.tinybert_provenance_pages):
        return
    from myst_nb.sphinx_ import NbMetadataCollector

    metadata = app.env.metadata.get(docname, {})
    kernel = (metadata.get("kernelspec") or {}).get("name", "python3")
    executed = NbMetadataCollector.get_exec_data(app.env, docname)
    try:
        report = _kernel_report(app, kernel)
    except Exception as error:  # the footer must not hide a broken environment
        logger.warning(f"provenance: {error}", location=docname)
        return
    text = footer_text(executed, report)
    box = nodes.container("", nodes.paragraph(text, text), classes=["tinybert-provenance"])
    sections = list(doctree.findall(nodes.section))
    (sections[0] if sections else doctree).append(box)


def setup(app: Sphinx) -> dict:
    app.add_config_value("tinybert_provenance_pages", ["chapters/"], "env")
    app.connect("doctree-read", _add_footer)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
