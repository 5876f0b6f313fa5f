"""Recording the forward entries a run really uses (``FWD_RECORD``, ``pytest --fwd-record``).

While a recorder is active, every guard notes (``record.py``):

* each unmarked entry that reached a module forward outside the wrapper's forward (in every
  detecting mode: ``record`` stays silent, ``warn`` warns, ``error`` records and then raises);
* each marked entry the wrapper routed, so the record also confirms marks.

The first observation of an entry is built once (names, its ``def``, the call site, the test) and
merged into the record file at once, so a rank that dies still leaves it there; later calls only
count, and the counts are merged at exit (``flush``). The file format and its locked, atomic
merge are ``lint_rules.run_record``'s. A forked child starts with its parent's entries known and
its counts at zero, so nothing is counted twice; ``spawned`` starts one in spawned processes.
"""

from __future__ import annotations

import atexit
import inspect
import os
import sys
import threading
import warnings
from dataclasses import replace
from types import FrameType
from typing import Any, Optional

from lint_rules.contract import RECORD_ENV_VAR
from lint_rules.run_record import Entry, RecordError, merge
from runtime_shim.detect import user_class

_SHIM_DIR = os.path.dirname(os.path.abspath(__file__))
_PYTEST_TEST = "PYTEST_CURRENT_TEST"  # "tests/test_x.py::test_a (call)", set by pytest during each test

#: The process's recorder, or None (read by the guards on every note: one global lookup).
ACTIVE: Optional["Recorder"] = None


def _library_dirs() -> tuple[str, ...]:
    """Directories whose frames are never the user's call site: torch, Lightning, this shim."""
    found = [_SHIM_DIR + os.sep]
    for name in ("torch", "lightning", "lightning_fabric", "pytorch_lightning"):
        module = sys.modules.get(name)
        if module is not None and getattr(module, "__file__", None):
            found.append(os.path.dirname(os.path.abspath(module.__file__)) + os.sep)
    return tuple(found)


def user_frame(frame: Optional[FrameType]) -> str:
    """``file:line`` of the first frame from ``frame`` outwards that is not torch's, Lightning's or
    the shim's ("" if none)."""
    skipped = _library_dirs()
    while frame is not None:
        filename = os.path.abspath(frame.f_code.co_filename)
        if not filename.startswith(skipped):
            return f"{filename}:{frame.f_lineno}"
        frame = frame.f_back
    return ""


def _current_test() -> str:
    return os.environ.get(_PYTEST_TEST, "").rpartition(" (")[0] or os.environ.get(_PYTEST_TEST, "")


def _qualified(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _definition(cls: type, method: str) -> tuple[str, str, int]:
    """(defining class, file, first line) of ``method`` as ``cls`` resolves it."""
    for klass in cls.__mro__:
        if method in vars(klass):
            func = inspect.unwrap(getattr(vars(klass)[method], "__func__", vars(klass)[method]))
            code = getattr(func, "__code__", None)
            if code is not None:
                return _qualified(klass), os.path.abspath(code.co_filename), code.co_firstlineno
            return _qualified(klass), "", 0
    return _qualified(cls), "", 0


class Recorder:
    """The entries this process observed, and what of them is not in the file yet."""

    def __init__(self, path: str) -> None:
        self.path = os.path.realpath(path)  # a link is written through to its target (``run_record.merge``)
        self.lock = threading.Lock()
        self.entries: dict[tuple[Any, ...], Entry] = {}  # (class, method, marked, wrapper) -> entry
        self.counts: dict[tuple[Any, ...], int] = {}  # calls not yet merged into the file
        self.failed = False

    def note(self, module: Any, method: str, marked: bool, wrapper: str, caller: Optional[FrameType],
             wrapped_at: str) -> None:
        """One call of ``module.method``. ``caller``: a frame from which the call site is found (read
        only the first time this entry is seen, as is everything but the count)."""
        key = (type(module), method, marked, wrapper)
        with self.lock:
            if key in self.entries:
                self.counts[key] = self.counts.get(key, 0) + 1
                return
            cls = user_class(module)
            defined_in, file, line = _definition(cls, method)
            self.entries[key] = Entry(_qualified(cls), method, marked, wrapper, defined_in, file, line,
                                      user_frame(caller), _current_test(), wrapped_at, count=0)
            self.counts[key] = self.counts.get(key, 0) + 1
            self._flush_locked()  # a first observation reaches the file at once

    def flush(self) -> None:
        with self.lock:
            self._flush_locked()

    def _flush_locked(self) -> None:
        pending = [replace(self.entries[key], count=count) for key, count in self.counts.items() if count]
        if not pending or self.failed:
            return
        try:
            merge(self.path, pending)
        except (RecordError, OSError) as exc:
            self.failed = True  # one warning; the program itself goes on unchanged
            warnings.warn(f"fwdlint: not recording entries: {exc}", RuntimeWarning, stacklevel=2)
            return
        self.counts.clear()

    def _forked(self) -> None:
        """In a forked child: the parent's counts are the parent's to write."""
        self.lock = threading.Lock()
        self.counts.clear()


def start(path: str) -> Recorder:
    """Record into ``path`` from now on in this process (idempotent for the same path)."""
    global ACTIVE
    if ACTIVE is not None and ACTIVE.path == os.path.realpath(path):
        return ACTIVE
    if ACTIVE is not None:
        ACTIVE.flush()
    ACTIVE = Recorder(path)
    return ACTIVE


def stop() -> None:
    """Merge what is left and stop recording."""
    global ACTIVE
    if ACTIVE is not None:
        ACTIVE.flush()
    ACTIVE = None


def start_from_env() -> Optional[Recorder]:
    """``FWD_RECORD=PATH`` in the environment: record there."""
    path = os.environ.get(RECORD_ENV_VAR, "").strip()
    return start(path) if path else None


def _flush_at_exit() -> None:
    if ACTIVE is not None:
        ACTIVE.flush()


def _after_fork_in_child() -> None:
    if ACTIVE is not None:
        ACTIVE._forked()


atexit.register(_flush_at_exit)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
