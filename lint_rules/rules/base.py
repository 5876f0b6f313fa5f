"""What every rule module provides, and the example cases each carries (Fixit's shape)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Protocol

from lint_rules.diagnostics import Diagnostic
from lint_rules.facts import FileFacts
from lint_rules.project import ProjectIndex


@dataclass(frozen=True)
class Valid:
    """Code the rule must stay silent on."""

    code: str


@dataclass(frozen=True)
class Invalid:
    """Code the rule must report, with the ``Class.method`` symbols it reports, in order."""

    code: str
    symbols: tuple[str, ...]


class Rule(Protocol):
    CODE: str
    NAME: str
    VALID: tuple[Valid, ...]
    INVALID: tuple[Invalid, ...]

    def check(self, index: ProjectIndex, facts: FileFacts) -> Iterator[Diagnostic]: ...
