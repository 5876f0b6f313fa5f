"""What every rule module provides (Fixit's shape), checked by ``tests/test_rules.py``.

A rule is one module under ``rules/`` with:

* ``CODE`` (``FWD001``; stable once released) and ``NAME`` (``unmarked-forward-entry``);
* its docstring: the user documentation (``fwdlint --explain`` prints it);
* ``VALID`` and ``INVALID`` examples. An invalid example marks each line that must be reported
  with ``# expect: FWDxxx "a piece of the message"``, as the fixtures do; the tests run every
  example through the CLI and through flake8 and check code, line, column and message;
* ``NEEDS``: the collectors (``facts.COLLECTORS``) whose facts it reads;
* ``check(view, facts)``: yields ``Diagnostic``s for one file, with the project view for
  everything beyond it. Rules never parse;
* ``FIXERS``: fix style -> fixer (``fix.Fixer``); empty if the rule has no automatic fix.

Adding a rule is adding its module and one line in ``rules/__init__.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Mapping, Protocol

from lint_rules.diagnostics import Diagnostic
from lint_rules.facts.model import FileFacts
from lint_rules.project import ProjectIndex


@dataclass(frozen=True)
class Valid:
    """Code the rule must stay silent on."""

    code: str


@dataclass(frozen=True)
class Invalid:
    """Code the rule must report, on the lines that carry ``# expect: FWDxxx "..."``."""

    code: str


class Rule(Protocol):
    CODE: str
    NAME: str
    NEEDS: tuple[str, ...]
    VALID: tuple[Valid, ...]
    INVALID: tuple[Invalid, ...]
    FIXERS: Mapping[str, object]

    def check(self, view: ProjectIndex, facts: FileFacts) -> Iterator[Diagnostic]: ...
