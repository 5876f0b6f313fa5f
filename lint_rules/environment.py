"""The Python environment the checked code runs in: where its installed packages live.

Base classes and attribute types often come from other packages (mmdet's detectors derive from
mmengine's ``BaseModel``; a wrapper holds a transformers model). fwdlint resolves such names the
way type checkers do: it reads the installed sources, through the facts store and its cache, and
never imports them. The interpreter whose packages count is ``--python PATH`` (flake8:
``--fwd-python-executable``; config: ``python-executable``), else the active virtual environment
(``$VIRTUAL_ENV``), else the interpreter running fwdlint. Its import path is asked once per run
(``PATH -I -c 'print(sys.path)'``: isolated mode, nothing of the project is imported), minus the
standard library, which defines no modules.

A name whose package is not installed there stays unresolved: the analysis then falls back to
what the checked file itself shows (the class's own ``forward`` calling the attribute, module
methods used on it, the documented method-name list), so findings may be missed, never invented
from a missing package.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

_QUERY = ("import json, sys, sysconfig; paths = sysconfig.get_paths(); "
          "print(json.dumps([sys.path, [paths['stdlib'], paths['platstdlib']]]))")
QUERY_TIMEOUT = 30  # seconds: an interpreter that does not answer is an error, not a hang


class NoInterpreter(Exception):
    """``--python`` does not name a working interpreter (one line, for the user)."""


@dataclass(frozen=True)
class Environment:
    python: str  # the interpreter, as given or found
    roots: tuple[Path, ...] = field(default=())  # import path entries that hold packages


def default_python() -> str:
    """The active virtual environment's interpreter, else the one running fwdlint."""
    venv = os.environ.get("VIRTUAL_ENV")
    if venv:
        for candidate in (Path(venv) / "bin" / "python", Path(venv) / "Scripts" / "python.exe"):
            if candidate.is_file():
                return str(candidate)
    return sys.executable


def find(python: Optional[str] = None) -> Environment:
    """The environment of ``python`` (default: ``default_python()``). Raises
    ``NoInterpreter`` when a given interpreter cannot be asked."""
    chosen = python or default_python()
    if _same_interpreter(chosen):
        stdlib = [sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["platstdlib"]]
        # sys.path[0] is the directory of the script or the current directory: not installed packages
        return Environment(chosen, _package_roots(sys.path[1:], stdlib))
    try:
        proc = subprocess.run([chosen, "-I", "-c", _QUERY], capture_output=True, text=True,
                              timeout=QUERY_TIMEOUT, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError) as exc:
        if python is None:  # a stale $VIRTUAL_ENV: fall back to fwdlint's own interpreter
            return find(sys.executable)
        raise NoInterpreter(f"--python {chosen}: cannot run it ({exc.__class__.__name__}: {exc})") from None
    try:
        path, stdlib = json.loads(proc.stdout.strip().splitlines()[-1]) if proc.returncode == 0 else (None, None)
    except (ValueError, IndexError, TypeError):
        path, stdlib = None, None
    if not isinstance(path, list) or not isinstance(stdlib, list):
        if python is None:
            return find(sys.executable)
        raise NoInterpreter(f"--python {chosen}: not a Python interpreter (exit status {proc.returncode})")
    return Environment(chosen, _package_roots([p for p in path if isinstance(p, str)],
                                              [p for p in stdlib if isinstance(p, str)]))


def _same_interpreter(python: str) -> bool:
    try:
        return os.path.samefile(python, sys.executable)
    except OSError:
        return False


def _package_roots(path: list[str], stdlib: list[str]) -> tuple[Path, ...]:
    """Directories of the import path, without the standard library (its site-packages kept)."""
    found: list[Path] = []
    standard = [os.path.normcase(os.path.abspath(p)) for p in stdlib if p]
    for entry in path:
        if not entry or not os.path.isdir(entry):
            continue  # '' (the current directory) and zip files hold no installed packages
        normal = os.path.normcase(os.path.abspath(entry))
        in_stdlib = any(normal == s or normal.startswith(s + os.sep) for s in standard)
        if in_stdlib and "site-packages" not in normal and "dist-packages" not in normal:
            continue
        root = Path(entry).resolve()
        if root not in found:
            found.append(root)
    return tuple(found)
