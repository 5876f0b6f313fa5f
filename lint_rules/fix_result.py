"""What fixing one file produced; plain data so ``-j N`` workers can send it back."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from lint_rules.diagnostics import Diagnostic
from lint_rules.noqa import NOQA_INLINE, is_suppressed


@dataclass(frozen=True)
class Unfixed:
    diagnostic: Diagnostic
    reason: str


@dataclass
class FileFix:
    """``new == old`` when nothing changed; ``error`` set when the fix was refused (the file is
    then left untouched and every finding in it is in ``unfixed``)."""

    path: str
    old: bytes = b""
    new: bytes = b""
    fixed: list[Diagnostic] = field(default_factory=list)
    unfixed: list[Unfixed] = field(default_factory=list)
    error: Optional[str] = None
    registered: list[str] = field(default_factory=list)  # call style: method names registered here

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
