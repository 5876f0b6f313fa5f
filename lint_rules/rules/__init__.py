"""The rule catalogue: one module per rule (see ``base.py``); codes are stable once released."""

from __future__ import annotations

from types import ModuleType
from typing import Optional

from lint_rules.rules import fwd001_unmarked_entry

RULES: tuple[ModuleType, ...] = (
    fwd001_unmarked_entry,
)


def selected(select: tuple[str, ...], ignore: tuple[str, ...]) -> list[ModuleType]:
    """Rules whose code matches a ``select`` prefix and no longer-or-equal ``ignore`` prefix."""
    chosen = []
    for rule in RULES:
        sel = max((len(p) for p in select if rule.CODE.startswith(p)), default=-1)
        ign = max((len(p) for p in ignore if rule.CODE.startswith(p)), default=-1)
        if sel >= 0 and sel > ign:
            chosen.append(rule)
    return chosen


def by_code(code: str) -> Optional[ModuleType]:
    """The rule with this code or name, if any."""
    return next((rule for rule in RULES if code in (rule.CODE, rule.NAME)), None)
