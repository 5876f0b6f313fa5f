"""The rule catalogue: one module per rule (see ``base.py``); codes are stable once released.

Adding a rule is adding its module and its name to ``RULE_MODULES``. A module's name starts with
its code (``fwd001_...``), so ``CODES`` is known without importing any rule: flake8 asks for it
on every run, also when no FWD code is selected, and must not pay for loading the analyzer.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any, Optional

RULE_MODULES: tuple[str, ...] = (
    "fwd001_unmarked_entry",
    "fwd002_unmarked_call",
    "fwd003_invalid_mark",
    "fwd101_meta_device_submodule",
    "fwd201_compiled_call_in_init_context",
    "fwd301_instance_forward_patch",
)

CODES: tuple[str, ...] = tuple(name.split("_", 1)[0].upper() for name in RULE_MODULES)


def __getattr__(name: str) -> Any:
    if name == "RULES":  # loaded on first use
        value = tuple(importlib.import_module(f"{__name__}.{module}") for module in RULE_MODULES)
        globals()["RULES"] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def selected_codes(select: tuple[str, ...], ignore: tuple[str, ...]) -> list[str]:
    """Codes that match a ``select`` prefix and no longer-or-equal ``ignore`` prefix."""
    chosen = []
    for code in CODES:
        sel = max((len(p) for p in select if code.startswith(p)), default=-1)
        ign = max((len(p) for p in ignore if code.startswith(p)), default=-1)
        if sel >= 0 and sel > ign:
            chosen.append(code)
    return chosen


def selected(select: tuple[str, ...], ignore: tuple[str, ...]) -> list[ModuleType]:
    """The rule modules ``selected_codes`` names."""
    codes = set(selected_codes(select, ignore))
    return [rule for rule in __getattr__("RULES") if rule.CODE in codes]


def by_code(code: str) -> Optional[ModuleType]:
    """The rule with this code or name, if any."""
    return next((rule for rule in __getattr__("RULES") if code in (rule.CODE, rule.NAME)), None)
