"""Run code right after a module has been imported, without importing it ourselves (torch-free).

Both the routing that importing ``runtime_shim`` starts and ``install`` must patch classes of
torch and Lightning that may not be loaded yet. ``AfterImport`` sits on ``sys.meta_path``, lets
the normal finders find the module, and wraps its loader's ``exec_module`` so that the callback
runs once the module's code has executed (and the module is marked as fully imported).
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
from typing import Any, Callable, Iterable


class AfterImport(importlib.abc.MetaPathFinder):
    def __init__(self, names: Iterable[str], callback: Callable[[str, Any], None]) -> None:
        self.names = frozenset(names)
        self.callback = callback

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname not in self.names or self not in sys.meta_path:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        exec_module = spec.loader.exec_module

        def exec_then_call(module: Any) -> None:
            exec_module(module)
            spec._initializing = False  # type: ignore[union-attr]  # done: callbacks may rely on it
            self.callback(fullname, module)

        spec.loader.exec_module = exec_then_call  # type: ignore[method-assign]
        return spec

    def add(self) -> None:
        if self not in sys.meta_path:
            sys.meta_path.insert(0, self)

    def remove(self) -> None:
        if self in sys.meta_path:
            sys.meta_path.remove(self)
