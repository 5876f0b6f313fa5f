"""What fixers get and give: the run they fix, and what fixing one file produced (plain data,
so ``-j N`` workers can send it back)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Optional, Sequence

from lint_rules.diagnostics import Diagnostic
from lint_rules.noqa import NOQA_INLINE, is_suppressed

if TYPE_CHECKING:
    from lint_rules.engine import Result


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
    """What a fixer may read: the files the run was given and the analysis of them."""

    paths: Sequence[str]
    analysis: "Result"
    jobs: int = 1


#: A rule's fixer: turns that rule's findings into file edits (``FileFix``) and says why the
#: others cannot be fixed. It edits; what to edit comes from the diagnostics and the facts.
Fixer = Callable[[FixContext, Sequence[Diagnostic]], tuple[list[FileFix], list[Unfixed]]]


def lazy_fixer(module: str, name: str) -> Fixer:
    """A fixer loaded when first used: rules name their fixers without importing the edit
    machinery (and LibCST) into every check-only run."""

    def fixer(context: FixContext, diagnostics: Sequence[Diagnostic]) -> tuple[list[FileFix], list[Unfixed]]:
        import importlib

        return getattr(importlib.import_module(module), name)(context, diagnostics)

    fixer.__qualname__ = f"{module}.{name}"
    return fixer
