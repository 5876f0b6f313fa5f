"""What a rule's ``fix`` gets and gives: the run it fixes, and what fixing one file produced
(plain data, so ``-j N`` workers can send it back)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Optional, Sequence

from lint_rules.diagnostics import Diagnostic
from lint_rules.noqa import NOQA_INLINE, is_suppressed

if TYPE_CHECKING:
    from lint_rules.engine import Result, Run


@dataclass(frozen=True)
class Unfixed:
    diagnostic: Diagnostic
    reason: str


@dataclass
class FileFix:
    """``new == old`` when nothing changed; ``error`` set when the fix was refused (the file is
    then left untouched and every finding in it is in ``unfixed``). ``may_change``: the 1-based
    old lines the fix rewrites or deletes (an import it extends, a statement it replaces); every
    other old line must stay as it was (``verify``)."""

    path: str
    old: bytes = b""
    new: bytes = b""
    fixed: list[Diagnostic] = field(default_factory=list)
    unfixed: list[Unfixed] = field(default_factory=list)
    error: Optional[str] = None
    may_change: frozenset[int] = frozenset()
    # the text gate's verdict (``verify.text_problem``), given by the worker that made the fix (``checked``)
    checked: bool = False
    text_problem: Optional[str] = None

    @property
    def changed(self) -> bool:
        return self.error is None and self.new != self.old


def line_suppresses(text: str, line: int, code: str) -> bool:
    """Does this physical line carry a ``# noqa`` that covers ``code``? (The engine already
    drops suppressed findings; the fixer checks again so a noqa line is never edited.)"""
    match = NOQA_INLINE.search(text)
    if match is None:
        return False
    return is_suppressed(((line, (match.group("codes") or "").strip()),), line, code)


@dataclass
class FixContext:
    """What a rule's fix may read: the files the run was given, the analysis of them (findings,
    facts, project views) and the run's options."""

    paths: Sequence[str]
    analysis: "Result"
    run: "Run"

    @property
    def jobs(self) -> int:
        return self.run.jobs
