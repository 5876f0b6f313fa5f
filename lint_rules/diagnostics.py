"""What rules produce and front ends print."""

import os
from pathlib import Path
from typing import Iterable, NamedTuple, Optional

from lint_rules.contract import format_chain

# The records a warm run builds (these, ``settings``', ``engine``'s, ``environment``'s) are NamedTuples,
# not dataclasses: importing dataclasses (and inspect) and generating their methods was a fifth of a warm
# run (issue 37). Their modules evaluate annotations (no ``from __future__ import annotations``): a
# NamedTuple compiles each annotation given as a string.


class Step(NamedTuple):
    """One step of a finding's evidence (``generate -> _decode -> self.decoder(...) at line 88`` is
    three), or a place it names (a set-up site): what happens there, and where. Built where the
    chain is built, so reports never re-read the message. ``line`` 0: not located (files read
    only to resolve names keep no lines): the step says less rather than something wrong."""

    what: str  # "generate", "self.decoder(...)"
    path: str = ""  # the file it is in; "" when not known
    line: int = 0  # 1-based; 0 when not known
    col: int = 0  # 0-based, as Diagnostic's; -1 when only the line is known (a statement's first line)
    cited: bool = False  # the message gives its line ("... at line 88")

    def __str__(self) -> str:
        """The step as the message shows it."""
        return f"{self.what} at line {self.line}" if self.cited and self.line else self.what

    def shown_from(self, path: str) -> str:
        """The step as the message of a finding in ``path`` shows it: a line of another file with its
        file (``self.text_model(...) at chinese_clip/modeling_chinese_clip.py:859``, not "at line 859"
        of the file the finding is in), relative to the working directory when it lies below it."""
        if not (self.cited and self.line and self.path) or os.path.abspath(self.path) == os.path.abspath(path):
            return str(self)
        return f"{self.what} at {shown(below(self.path) or self.path)}:{self.line}"


Chain = list[Step]


def chain_text(chain: Iterable[Step], path: str) -> str:
    """A chain as the message of a finding in ``path`` shows it (``Step.shown_from``)."""
    return format_chain(step.shown_from(path) for step in chain)


class Diagnostic(NamedTuple):
    path: str
    line: int  # 1-based
    col: int  # 0-based (flake8's convention); the CLI prints col + 1
    code: str
    message: str  # what and where, one line (flake8 prints it)
    symbol: str  # "Class.method"
    help: str = ""  # what to do about it (JSON ``help``, ``--show-source``, SARIF; ``--explain`` says more)
    severity: str = "error"  # or "warning": what it costs is known to be less than failure (SARIF level, github)
    steps: tuple[Step, ...] = ()  # the evidence chain the message shows, located (JSON ``steps``, SARIF codeFlows)
    related: tuple[Step, ...] = ()  # places the message names besides (set-up sites: SARIF relatedLocations)


class FileError(NamedTuple):
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
