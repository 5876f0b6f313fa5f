"""Guarding the processes a guarded process starts (ranks of ``torch.multiprocessing.spawn``).

``follow(mode, record)`` wraps the target of every ``multiprocessing`` process started from now on
(``BaseProcess.start``: the spawn, forkserver and fork start methods, ``torch.multiprocessing``'s
included) in ``Guarded``, a picklable callable of this module: the child imports it when it
unpickles its target, installs the shim with the parent's mode (and records into the parent's
record) before the target runs, and merges its record when the target returns or raises. A
process subclass that overrides ``run`` instead of taking a target is not followed.

Programs started anew (``torchrun``, ``subprocess``) are not processes of this one: they read
``FWD_SHIM_MODE`` and ``FWD_RECORD``, which ``follow`` sets for them, when they import
``runtime_shim.auto``.
"""

from __future__ import annotations

import multiprocessing.process
import os
from typing import Any, Callable, Optional

from lint_rules.contract import MODE_ENV_VAR, RECORD_ENV_VAR


class Guarded:
    """A process target run with the shim installed (``mode``) and recording into ``record``."""

    def __init__(self, target: Callable[..., Any], mode: str, record: Optional[str], single_device: bool) -> None:
        self.target = target
        self.mode = mode
        self.record = record
        self.single_device = single_device

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from runtime_shim import recorder
        from runtime_shim.installer import install

        if self.record:
            recorder.start(self.record)
        install(self.mode, keep_stronger=True, single_device=self.single_device)
        try:
            return self.target(*args, **kwargs)
        finally:
            if recorder.ACTIVE is not None:
                recorder.ACTIVE.flush()  # a child leaves through os._exit: no atexit


_original_start: Optional[Callable[..., None]] = None
_saved_environment: dict[str, Optional[str]] = {}


def follow(mode: str, record: Optional[str]) -> None:
    """Guard (and record in) every process started from now on, until ``unfollow``."""
    global _original_start
    if _original_start is not None:
        return
    for name, value in ((MODE_ENV_VAR, mode), (RECORD_ENV_VAR, os.path.abspath(record) if record else None)):
        _saved_environment[name] = os.environ.get(name)
        if value is not None:
            os.environ[name] = value
    original = _original_start = multiprocessing.process.BaseProcess.start

    def start(self: Any) -> None:
        from runtime_shim import _installed

        target = getattr(self, "_target", None)
        if target is not None and not isinstance(target, Guarded):
            self._target = Guarded(target, mode, os.path.abspath(record) if record else None, _installed.single_device)
        original(self)

    multiprocessing.process.BaseProcess.start = start  # type: ignore[method-assign]


def unfollow() -> None:
    """Stop following; the environment variables ``follow`` set are as they were before."""
    global _original_start
    if _original_start is not None:
        multiprocessing.process.BaseProcess.start = _original_start  # type: ignore[method-assign]
        _original_start = None
    for name, value in _saved_environment.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    _saved_environment.clear()
