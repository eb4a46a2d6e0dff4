"""Hand-written: the lazy re-export that every subpackage's generated ``__init__`` uses.

``from tinybert.tokenizers import WordPieceTokenizer`` imports the one module that
defines the name, on first use; importing a subpackage imports none of its modules, so
that no module's import can pull in its siblings (and no import cycle can start here).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from importlib import import_module


def lazy_reexports(
    package: str,
    modules: dict[str, list[str]],
    subpackages: tuple[str, ...] = (),
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package`` (PEP 562), for the public
    names in ``modules`` (a submodule of ``package`` -> the names it defines) and the
    ``subpackages`` reached as attributes (``tinybert.models`` after ``import
    tinybert``), each imported on first use."""
    owners = {name: module for module, names in modules.items() for name in names}

    def __getattr__(name: str):
        if name in subpackages:
            return import_module(f"{package}.{name}")  # sets the attribute itself
        if name not in owners:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(f"{package}.{owners[name]}"), name)
        setattr(sys.modules[package], name, value)  # found directly next time
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(owners) | set(subpackages))

    return __getattr__, __dir__
