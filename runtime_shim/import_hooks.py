"""Run code right after a module has been imported, without importing it ourselves (torch-free).

Both the routing that importing ``runtime_shim`` starts and ``install`` must patch classes of
torch and Lightning that may not be loaded yet. ``AfterImport`` sits on ``sys.meta_path``, lets
the normal finders find the module, and wraps its loader's ``exec_module`` so that the callback
runs once the module's code has executed (and the module is marked as fully imported).

A callback never runs while a module of ``runtime_shim`` itself is half imported: when
``runtime_shim.api``'s ``from torch import nn`` is what imports torch (isort puts ``runtime_shim``
before ``torch``), patching then would import ``runtime_shim.installer``, which imports the
half-initialised ``api`` (a circular ``ImportError``). Such a callback is deferred until the last
of our own modules has finished importing (``_Own`` watches them). A callback that fails warns;
it never breaks the import of torch or Lightning.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
import threading
import warnings
from typing import Any, Callable, Iterable

OWN_PACKAGE = __name__.rpartition(".")[0]  # "runtime_shim"

_lock = threading.RLock()
_deferred: list[Callable[[], None]] = []


def _own_import_running() -> bool:
    """Is a module of this package being imported right now (in any thread)?"""
    for name, module in list(sys.modules.items()):
        if name == OWN_PACKAGE or name.startswith(OWN_PACKAGE + "."):
            if getattr(getattr(module, "__spec__", None), "_initializing", False):
                return True
    return False


def _run(call: Callable[[], None], what: str) -> None:
    try:
        call()
    except Exception as exc:  # never turn a patching problem into a failed import of torch
        warnings.warn(f"runtime_shim: could not patch after importing {what}: {type(exc).__name__}: {exc}",
                      RuntimeWarning, stacklevel=2)


def _run_or_defer(call: Callable[[], None], what: str) -> None:
    with _lock:
        if _own_import_running():
            _deferred.append(lambda: _run(call, what))
            return
    _run(call, what)


def _flush() -> None:
    with _lock:
        if _own_import_running():
            return
        pending = list(_deferred)
        _deferred.clear()
    for call in pending:
        call()


class _ThenCall:
    """A spec's own loader: the real one executes the module, then ``after`` runs. The real loader
    is wrapped, never changed: it may be one object shared by many modules (pytest's
    assertion-rewriting hook loads every module of a distribution that registers a pytest plugin,
    this package's included), and changing it would run one module's callback, and clear its
    "initializing" flag, when another finishes. Everything else is the real loader's."""

    def __init__(self, loader: Any, spec: Any, after: Callable[[Any], None]) -> None:
        self._loader, self._spec, self._after = loader, spec, after

    def create_module(self, spec: Any) -> Any:
        create = getattr(self._loader, "create_module", None)
        return create(spec) if create is not None else None

    def exec_module(self, module: Any) -> None:
        try:
            self._loader.exec_module(module)
        finally:
            self._spec._initializing = False  # done (or failed): callbacks may rely on it
        self._after(module)

    def __getattr__(self, name: str) -> Any:  # get_source, get_code, is_package, resource readers
        return getattr(self._loader, name)


def _wrap_loader(fullname: str, spec: Any, after: Callable[[Any], None]) -> Any:
    """Return ``spec`` with a loader that runs ``after(module)`` once the module has executed."""
    if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
        return spec
    spec.loader = _ThenCall(spec.loader, spec, after)
    return spec


def _find_with_others(finder: importlib.abc.MetaPathFinder, fullname: str) -> Any:
    sys.meta_path.remove(finder)
    try:
        return importlib.util.find_spec(fullname)
    finally:
        sys.meta_path.insert(0, finder)


class _Own(importlib.abc.MetaPathFinder):
    """Flushes deferred callbacks when the last module of ``runtime_shim`` finishes importing."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if not fullname.startswith(OWN_PACKAGE + ".") or self not in sys.meta_path:
            return None
        return _wrap_loader(fullname, _find_with_others(self, fullname), lambda module: _flush())


_OWN = _Own()


class AfterImport(importlib.abc.MetaPathFinder):
    def __init__(self, names: Iterable[str], callback: Callable[[str, Any], None]) -> None:
        self.names = frozenset(names)
        self.callback = callback

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname not in self.names or self not in sys.meta_path:
            return None

        def after(module: Any) -> None:
            _run_or_defer(lambda: self.callback(fullname, module), fullname)

        return _wrap_loader(fullname, _find_with_others(self, fullname), after)

    def add(self) -> None:
        if _OWN not in sys.meta_path:
            sys.meta_path.insert(0, _OWN)
        if self not in sys.meta_path:
            sys.meta_path.insert(0, self)

    def remove(self) -> None:
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        if _OWN in sys.meta_path and not any(isinstance(f, AfterImport) for f in sys.meta_path):
            sys.meta_path.remove(_OWN)  # nothing left to defer
