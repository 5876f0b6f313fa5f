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


def shown(path: str) -> str:
    """A path as one line of text: control characters (a newline in a file name) escaped; bytes
    the terminal cannot encode are escaped by the streams (``cli`` sets ``backslashreplace``)."""
    if path.isprintable():
        return path
    return "".join(c if c.isprintable() else c.encode("unicode_escape", "backslashreplace").decode("ascii")
                   for c in path)
