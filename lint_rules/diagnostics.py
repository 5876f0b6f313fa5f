"""What rules produce and front ends print."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class Diagnostic:
    path: str
    line: int  # 1-based
    col: int  # 0-based (flake8's convention); the CLI prints col + 1
    code: str
    message: str
    symbol: str  # "Class.method"


@dataclass(frozen=True, order=True)
class FileError:
    """A file that could not be read or parsed: reported in one line, the run goes on."""

    path: str
    message: str
