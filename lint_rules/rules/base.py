"""What every rule module provides (Fixit's shape), checked by ``tests/test_rules.py``.

A rule is one module under ``rules/`` with:

* ``CODE`` (``FWD001``; stable once released) and ``NAME`` (``unmarked-forward-entry``);
* its docstring: the user documentation (``fwdlint --explain`` prints it);
* ``VALID`` and ``INVALID`` examples. An invalid example marks each line that must be reported
  with ``# expect: FWDxxx "a piece of the message"``, as the fixtures do; the tests run every
  example through the CLI and through flake8 and check code, line, column and message;
* ``check(view, facts)``: yields ``Diagnostic``s for one file, with the project view for
  everything beyond it. Rules never parse;
* if it has an automatic fix, ``fix(context, findings, options)``: the edits (``fix.result.FileFix``)
  for its findings, and why the others cannot be fixed. It reads the run's facts and views
  (``FixContext``), and imports its edit code (LibCST) inside ``fix``, so a check-only run never
  loads it. ``FIX_OPTIONS`` (option -> choices, the first the default) are the fix's own options,
  set from the command line (``--fix-style`` is FWD001's ``style``). Every fix then passes the same
  gate (``fix.verify``), and the driver (``fix.run``) repeats passes until none is left to do.

Adding a rule is adding its module (a package when its fix has modules of its own), one line in
``rules/__init__.py`` and a folder of fixtures (``CONTRIBUTING.md``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator, Mapping, Protocol, Sequence

from lint_rules.diagnostics import Diagnostic
from lint_rules.facts.model import FileFacts
from lint_rules.fix.result import FileFix, FixContext, Unfixed
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
    VALID: tuple[Valid, ...]
    INVALID: tuple[Invalid, ...]

    def check(self, view: ProjectIndex, facts: FileFacts) -> Iterator[Diagnostic]: ...


#: A rule's ``fix`` (optional): (context, its findings in the given files, its options) -> the
#: edited files and the findings it cannot fix, with the reason.
Fix = Callable[[FixContext, Sequence[Diagnostic], Mapping[str, str]], tuple[list[FileFix], list[Unfixed]]]
