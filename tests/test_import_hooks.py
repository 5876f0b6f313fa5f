"""``runtime_shim/import_hooks.py`` when one loader object loads many modules, as pytest's
assertion-rewriting hook does for every module of a distribution that registers a pytest plugin
(fwdlint's own ``runtime_shim`` included, since it ships ``pytest11``): each module's callback
runs with that module, after it has executed, and no flag of another module is touched."""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
from pathlib import Path
from typing import Any

from runtime_shim.import_hooks import AfterImport


class _SharedLoader(importlib.abc.Loader):
    """One loader for every module of a directory."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def exec_module(self, module: Any) -> None:
        source = (self.root / (module.__name__.rpartition(".")[2] + ".py")).read_text()
        exec(compile(source, module.__name__, "exec"), module.__dict__)


class _SharedFinder(importlib.abc.MetaPathFinder):
    def __init__(self, package: str, root: Path) -> None:
        self.package, self.loader = package, _SharedLoader(root)

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if not fullname.startswith(self.package + "."):
            return None
        return importlib.util.spec_from_loader(fullname, self.loader)


def test_callbacks_with_a_loader_shared_by_nested_imports(tmp_path: Path) -> None:
    package = "fwd_shared_loader_case"
    (tmp_path / "outer.py").write_text(f"import {package}.inner\nDONE = True\n")
    (tmp_path / "inner.py").write_text("DONE = True\n")
    parent = type(sys)(package)
    parent.__path__ = []  # a namespace the finder below answers for
    sys.modules[package] = parent
    seen: list[tuple[str, str, bool]] = []
    hook = AfterImport({f"{package}.outer", f"{package}.inner"},
                       lambda name, module: seen.append((name, module.__name__, module.DONE)))
    finder = _SharedFinder(package, tmp_path)
    sys.meta_path.append(finder)
    hook.add()
    try:
        importlib.import_module(f"{package}.outer")
    finally:
        sys.meta_path.remove(finder)
        hook.remove()
        for name in [n for n in sys.modules if n == package or n.startswith(package + ".")]:
            del sys.modules[name]
    assert seen == [(f"{package}.inner", f"{package}.inner", True), (f"{package}.outer", f"{package}.outer", True)]
