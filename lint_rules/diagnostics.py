"""What rules produce and front ends print."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional


@dataclass(frozen=True, order=True)
class Diagnostic:
    path: str
    line: int  # 1-based
    col: int  # 0-based (flake8's convention); the CLI prints col + 1
    code: str
    message: str  # what and where, one line (flake8 prints it)
    symbol: str  # "Class.method"
    help: str = ""  # what to do about it (JSON ``help``, ``--show-source``, SARIF; ``--explain`` says more)
    severity: str = "error"  # or "warning": what it costs is known to be less than failure (SARIF level, github)


@dataclass(frozen=True, order=True)
class FileError:
    """A file that could not be read or parsed: reported in one line, the run goes on."""

    path: str
    message: str


def shown(path: str) -> str:
    """A path as one line of text: control characters (a newline in a file name) escaped; bytes
    the terminal cannot encode are escaped by the streams (``cli`` sets ``backslashreplace``)."""
    if path.isprintable():
        return path
    return "".join(c if c.isprintable() else c.encode("unicode_escape", "backslashreplace").decode("ascii")
                   for c in path)


def below(path: str, cwd: Optional[str] = None) -> Optional[str]:
    """``path`` relative to ``cwd`` (default: the working directory) with ``/``, if it lies below it;
    else None. (GitHub annotations and SARIF URIs want such paths; ``fix.diff.diff_name`` too.)"""
    base = cwd or os.getcwd()
    relative = os.path.relpath(os.path.abspath(os.path.join(base, path)), base)
    if relative == os.pardir or relative.startswith(os.pardir + os.sep):
        return None
    return Path(relative).as_posix()
