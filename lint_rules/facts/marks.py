"""Collector ``marks``: run-time registrations of forward entry points.

``obj.mark_forward_method("generate")`` (Lightning Fabric, and ``runtime_shim``),
``obj.mark_forward_method(obj.generate)`` and ``register_fsdp_forward_method(obj, "generate")``
(FSDP2), anywhere in the file. Only files whose text holds one of these names are walked for it.
"""

from __future__ import annotations

from typing import Any

import libcst as cst

from lint_rules import contract
from lint_rules.facts.model import Mark
from lint_rules.facts.traversal import Collector, Scope
from lint_rules.facts.walk import string_value

_NAME_KEYWORDS = ("method", "method_name", "method_or_name")


class Marks(Collector):
    name = "marks"
    triggers = (contract.MARK_METHOD_CALL, contract.FSDP_REGISTER_CALL)
    handlers = {cst.Call: "on_call"}

    def __init__(self, walk: Any) -> None:
        super().__init__(walk)
        self.found: list[tuple[cst.Call, str]] = []

    def wants_expressions(self, scope: Scope) -> bool:
        return True

    def on_call(self, call: cst.Call, scope: Scope) -> None:
        func = call.func
        name = func.attr.value if isinstance(func, cst.Attribute) else (
            func.value if isinstance(func, cst.Name) else "")
        if name not in (contract.MARK_METHOD_CALL, contract.FSDP_REGISTER_CALL):
            return
        args = [a for a in call.args if a.keyword is None]
        is_method = isinstance(func, cst.Attribute) and name == contract.MARK_METHOD_CALL
        arg = args[0] if is_method and args else (args[1] if len(args) > 1 else None)
        arg = arg or next((a for a in call.args if a.keyword is not None and a.keyword.value in _NAME_KEYWORDS), None)
        if arg is None:
            return
        marked = string_value(arg.value)
        if marked is None and isinstance(arg.value, cst.Attribute):
            marked = arg.value.attr.value
        if marked:
            self.found.append((call, marked))

    def finish(self, results: dict[str, dict[str, Any]]) -> dict[str, Any]:
        if not self.found:
            return {}
        lines = self.walk.positions([call for call, _ in self.found])
        return {"marks": tuple(Mark(name, lines[call][0]) for call, name in self.found)}
