"""The rule catalogue: one module per rule (see ``base.py``); codes are stable once released.

Adding a rule is adding its module and its short name to ``RULE_MODULES``. A module's name starts
with its code (``fwd001_...``), so ``CODES`` and ``NAMES`` are known without importing any rule:
flake8 asks for them on every run, also when no FWD code is selected, and a report of reused
findings (``results``) must not pay for loading the analyzer either.
"""

from __future__ import annotations

import functools
import importlib
from types import ModuleType
from typing import Any, Optional, Sequence

#: rule module -> the rule's short name (its ``NAME``; tests/test_rules.py keeps them equal)
RULE_MODULES: dict[str, str] = {
    "fwd001_unmarked_entry": "unmarked-forward-entry",
    "fwd002_unmarked_call": "unmarked-call-on-wrapped-model",
    "fwd003_invalid_mark": "invalid-mark",
    "fwd004_observed_entry": "observed-unmarked-entry",
    "fwd005_unresolved_name": "unresolved-name",
    "fwd101_meta_device_submodule": "meta-device-submodule",
    "fwd201_compiled_call_in_init_context": "compiled-call-in-init-context",
    "fwd301_instance_forward_patch": "instance-forward-patch",
}

CODES: tuple[str, ...] = tuple(name.split("_", 1)[0].upper() for name in RULE_MODULES)
NAMES: dict[str, str] = dict(zip(CODES, RULE_MODULES.values()))  # a report names findings without the rules


def __getattr__(name: str) -> Any:
    if name == "RULES":  # loaded on first use
        return _rules()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _rules() -> tuple[ModuleType, ...]:
    value = globals().get("RULES")
    if value is None:  # a rule is selected for every file checked: import them once
        value = globals()["RULES"] = tuple(importlib.import_module(f"{__name__}.{module}") for module in RULE_MODULES)
    return value


def selected_codes(select: Sequence[str], ignore: Sequence[str]) -> tuple[str, ...]:
    """Codes that match a ``select`` prefix and no longer-or-equal ``ignore`` prefix."""
    return _selected_codes(tuple(select), tuple(ignore))


@functools.lru_cache(maxsize=64)  # asked for every file checked
def _selected_codes(select: tuple[str, ...], ignore: tuple[str, ...]) -> tuple[str, ...]:
    chosen = []
    for code in CODES:
        sel = max((len(p) for p in select if code.startswith(p)), default=-1)
        ign = max((len(p) for p in ignore if code.startswith(p)), default=-1)
        if sel >= 0 and sel > ign:
            chosen.append(code)
    return tuple(chosen)


def selected(select: Sequence[str], ignore: Sequence[str]) -> list[ModuleType]:
    """The rule modules ``selected_codes`` names."""
    codes = set(selected_codes(select, ignore))
    return [rule for rule in _rules() if rule.CODE in codes]


def by_code(code: str) -> Optional[ModuleType]:
    """The rule with this code or name, if any."""
    return next((rule for rule in _rules() if code in (rule.CODE, rule.NAME)), None)
