"""Hand-written tests of the package's layout (issue 17): the map on the "How this book is
made" page, book/tools/layout.py and the chapters' export tags agree; no import cycle inside
tinybert; every subpackage re-exports its modules' public names."""
from __future__ import annotations

import ast
import importlib
import os
import re
from pathlib import Path

import pytest

from book.tools.chapters import ROOT, chapters
from book.tools.export import MARKER, collect, public_names
from book.tools.layout import LAYERS, MODULES, PACKAGES

PACKAGE = ROOT / "tinybert"
PAGE = ROOT / "book" / "how-this-book-is-made.md"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _top_level_imports(path: Path) -> set[str]:
    """The tinybert modules that importing ``path`` imports (imports inside functions
    run later, and cannot make a cycle at import time)."""
    found = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.startswith("tinybert"):
                found.add(node.module)
                for alias in node.names:       # from tinybert.pkg import module
                    candidate = f"{node.module}.{alias.name}"
                    if (PACKAGE.parent / Path(*candidate.split("."))).with_suffix(
                            ".py").exists():
                        found.add(candidate)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("tinybert")}
    return found


def _graph() -> dict[str, set[str]]:
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph = {}
    for name, path in modules.items():
        edges = set()
        for target in _top_level_imports(path):
            # importing a.b.c imports the packages a and a.b first
            parts = target.split(".")
            edges |= {".".join(parts[:i]) for i in range(1, len(parts) + 1)}
        # a module's own packages are imported before it: not an edge of a cycle
        ancestors = {".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)}
        graph[name] = {t for t in edges if t in modules and t != name
                       and t not in ancestors}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    cycles, state = [], {}

    def visit(node, stack):
        state[node] = "open"
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                cycles.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, stack + [nxt])
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    return cycles


def test_no_import_cycle_in_the_package():
    graph = _graph()
    assert "tinybert.pretraining.pretrain_loop" in graph
    cycles = _cycles(graph)
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_layout_file_page_and_chapters_agree():
    exported = {module: sorted({int(p.chapter.number) for p in pieces})
                for module, pieces in collect(chapters()).items()}
    assert set(exported) == set(MODULES), "book/tools/layout.py and the export tags"
    page = PAGE.read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| `tinybert\.([\w.]+)` \| ([\d, ]+) \|", page, re.M))
    assert rows == {m: ", ".join(map(str, c)) for m, c in exported.items()}
    packages = {m.rsplit(".", 1)[0] for m in MODULES if "." in m}
    assert packages == set(PACKAGES)
    for package in PACKAGES:
        assert f"- `tinybert.{package}`: " in page


def test_every_generated_module_is_on_the_map_and_says_what_it_holds():
    for path in PACKAGE.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        if not text.startswith(MARKER) or path.name == "__init__.py":
            continue
        module = _module_name(path).removeprefix("tinybert.")
        assert module in MODULES, path
        doc = " ".join(ast.get_docstring(ast.parse(text)).split())
        assert doc.startswith(MODULES[module]), path


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_subpackages_reexport_their_modules_public_names(package):
    pkg = importlib.import_module(f"tinybert.{package}")
    expected = set()
    for path in (PACKAGE / package).glob("*.py"):
        if path.name != "__init__.py" and path.read_text().startswith(MARKER):
            expected |= set(public_names(path.read_text(encoding="utf-8")))
    assert set(pkg.__all__) == expected
    for name in sorted(expected):
        assert getattr(pkg, name) is not None
    with pytest.raises(AttributeError, match="no attribute"):
        pkg.no_such_name


def test_the_public_api_reads_as_the_issue_asks():
    from tinybert.models import BertConfig, BertModel
    from tinybert.tokenizers import WordPieceTokenizer
    from tinybert.tokenizers.wordpiece import WordPieceTokenizer as direct
    assert WordPieceTokenizer is direct and BertModel.__name__ == "BertModel"
    assert BertConfig.__module__ == "tinybert.models.bert"


def test_no_module_imports_another_modules_private_names():
    found = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.ImportFrom) and node.module
                    and node.module.startswith("tinybert")):
                found += [f"{_module_name(path)} imports {node.module}.{a.name}"
                          for a in node.names
                          if a.name.startswith("_") and not a.name.startswith("__")]
    assert not found, found


# --- issue 17: following input_ids to the loss ---------------------------------------------

HAS_DATA = bool(os.environ.get("TINYBERT_DATA_DIR", "").strip())
# nanoGPT: 2 files, Google's BERT: 3, Cramming: about 6. Was 8 until issue 36 moved the
# padding that pretraining and fine-tuning share a layer down, to training/inputs.py: one
# file more on the path, by design; the next file must be argued for as this one was.
PATH_LIMIT = 9
BATCH_FILES = {"pretraining/examples.py", "pretraining/objective.py", "training/inputs.py"}


@pytest.mark.skipif(not HAS_DATA, reason="TINYBERT_DATA_DIR is not set")
@pytest.mark.parametrize("objective", ["mlm+nsp", "mlm"])
def test_input_ids_reach_the_loss_through_few_files(tmp_path, monkeypatch, objective):
    """In `tinybert pretrain`, input_ids go from the batch being made (dynamic masking,
    collation and padding: the three files of BATCH_FILES) to the losses through at most PATH_LIMIT
    files of the package in all: traced while the command runs, not counted by hand."""
    import sys

    import tinybert.pretraining.run as run
    import tinybert.pretraining.objective as objective_module
    from tinybert.__main__ import main

    seen: dict[str, set[str]] = {"batch": set(), "loss": set()}

    def traced(fn, key):
        def record(frame, event, arg):
            name = frame.f_code.co_filename
            if event == "call" and name.startswith(str(PACKAGE)):
                seen[key].add(Path(name).relative_to(PACKAGE).as_posix())

        def wrapper(*args, **kwargs):
            previous = sys.getprofile()
            sys.setprofile(record)
            try:
                return fn(*args, **kwargs)
            finally:
                sys.setprofile(previous)
        return wrapper

    original_pretrain = run.pretrain

    def pretrain(model, batches, *args, **kwargs):
        return original_pretrain(model, traced(batches, "batch"), *args, **kwargs)

    monkeypatch.setattr(run, "pretrain", pretrain)
    monkeypatch.setattr(objective_module, "pretraining_losses",
                        traced(objective_module.pretraining_losses, "loss"))
    assert main(["pretrain", "--out", str(tmp_path / "run"), "--steps", "2",
                 "--objective", objective, "--set", "d_model=32", "--set", "n_layers=1",
                 "--set", "n_heads=2", "--set", "d_ff=37", "--set", "max_len=32",
                 "--batch-size", "8", "--vocab-size", "120", "--vocab-min-count", "2",
                 "--eval-batches", "1", "--max-documents", "2", "--device", "cpu",
                 "--threads", "1"]) == 0
    # the trace saw the path: the losses, the model and its heads
    assert {"pretraining/objective.py", "models/bert.py",
            "models/bert_heads.py"} <= seen["loss"]
    assert seen["batch"] == BATCH_FILES, sorted(seen["batch"])
    path = seen["batch"] | seen["loss"]
    assert len(path) <= PATH_LIMIT, sorted(path)


def test_the_data_registry_and_the_help_import_no_torch():
    """`import tinybert.data` and `tinybert --help` work where torch cannot be imported:
    the package imports its models on first use, and the command line imports only the
    command it runs."""
    import subprocess
    import sys

    code = "\n".join([
        "import sys",
        "class NoTorch:",
        "    def find_spec(self, name, path=None, target=None):",
        "        if name == 'torch' or name.startswith('torch.'):",
        "            raise ImportError('torch is blocked in this test')",
        "sys.meta_path.insert(0, NoTorch())",
        "import tinybert, tinybert.data",
        "assert len(tinybert.data.REGISTRY) > 30",
        "from tinybert.__main__ import main",
        "try:",
        "    main(['--help'])",
        "except SystemExit as stop:",
        "    assert stop.code == 0, stop.code",
        "loaded = [m for m in sys.modules if m.startswith('tinybert.commands')]",
        "assert not loaded, loaded",
    ])
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=PACKAGE.parent)
    assert done.returncode == 0, done.stderr[-2000:]


def test_the_package_reaches_its_names_and_subpackages_lazily():
    import tinybert

    assert tinybert.BertModel is tinybert.models.bert.BertModel
    assert "BertModel" in dir(tinybert) and "finetuning" in dir(tinybert)
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        tinybert.nothing


def _subpackage_graph() -> dict[str, set[str]]:
    """Subpackage (or top-level module) -> the others it imports anywhere in its code,
    imports inside functions included."""
    graph: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        source = path.relative_to(PACKAGE).parts[0].removesuffix(".py")
        graph.setdefault(source, set())
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            for name in names:
                parts = name.split(".")
                if parts[0] == "tinybert" and len(parts) > 1 and parts[1] != source:
                    graph[source].add(parts[1])
    return {node: {t for t in targets if t in graph} for node, targets in graph.items()}


def _layer_of() -> dict[str, int]:
    return {name: k for k, names in enumerate(LAYERS) for name in names}


def test_every_import_goes_down_the_layers_or_across():
    """The layers of book/tools/layout.py, imports inside functions counted: a
    subpackage imports only its own layer or lower ones, and nothing loops."""
    graph, layer = _subpackage_graph(), _layer_of()
    assert set(graph) == set(layer), "LAYERS must name every subpackage and module"
    upward = sorted(f"{a} (layer {layer[a]}) imports {b} (layer {layer[b]})"
                    for a in graph for b in graph[a] if layer[b] > layer[a])
    assert not upward, "imports up the layers: " + "; ".join(upward)
    assert not _cycles(graph), "a loop between subpackages: " + str(_cycles(graph))


def test_the_layer_check_fails_on_an_upward_import(monkeypatch):
    real = _subpackage_graph()
    monkeypatch.setitem(globals(), "_subpackage_graph",
                        lambda: {**real, "checkpoint": real["checkpoint"] | {"models"}})
    with pytest.raises(AssertionError, match="checkpoint .layer 1. imports models"):
        test_every_import_goes_down_the_layers_or_across()


def test_the_page_lists_the_layers():
    page = PAGE.read_text(encoding="utf-8")
    start = page.index("The package is built in layers.")
    block = page[start : page.index("Hand-written modules sit beside them", start)]
    listed = [tuple(re.findall(r"`(\w+)`", head))
              for head in re.findall(r"^\d+\. ([^:\n]*):", block, re.M)]
    assert listed == [tuple(names) for names in LAYERS]
