"""Collector ``handovers``: objects handed to functions imported from elsewhere, for FWD301 at the
user's call (``apply_liger_kernel_to_llama(model=model)`` rebinds ``forward`` on ``model``).

``handovers``: per call of a function whose name resolves through the file's imports to another
top-level package than the file's own (torch's, builtins and the standard library's left out),
each argument that is a name or a dotted name (``model``, ``self.model``):
the callee, the slot ("0" or the keyword), the argument as written, and the position of the
callee's last name. Whether the function patches what it is given is read from its own file
(``ForwardPatch`` facts whose receiver is that parameter), by the rule.

Same prefilter as ``callers``: a file with neither ``class`` nor ``def `` is not read.
"""

from __future__ import annotations

import ast
import sys
from typing import Any

from lint_rules.facts.model import Handover
from lint_rules.facts.traversal import Collector, Scope
from lint_rules.facts.walk import arg_slots, call_args, dotted_name

_NOT_HANDED_TO = ("torch.", "builtins.")


class Handovers(Collector):
    name = "handovers"
    triggers = ("class", "def ")
    handlers = {ast.Call: "on_call"}

    def __init__(self, walk: Any) -> None:
        super().__init__(walk)
        self.found: list[Handover] = []

    def wants_expressions(self, scope: Scope) -> bool:
        return True

    def on_call(self, call: ast.Call, scope: Scope) -> None:
        text = dotted_name(call.func)
        if text is None or text.split(".", 1)[0] not in self.walk.names.imports:
            return  # methods, locals, builtins: only what the file imports is read elsewhere
        callee = self.walk.names.resolve(text)
        top, own = callee.split(".", 1)[0], self.walk.module_name.split(".", 1)[0]
        if callee.startswith(_NOT_HANDED_TO) or top in sys.stdlib_module_names or (own and top == own):
            return  # the standard library; a package's own functions: reported where those patch, if they do
        for slot, arg in arg_slots(call_args(call)):
            handed = dotted_name(arg.value) if type(arg.value) in (ast.Name, ast.Attribute) else None
            if handed is not None:
                line, col = (self.walk.attr_position(call.func) if type(call.func) is ast.Attribute
                             else self.walk.position(call.func))
                self.found.append(Handover(callee, slot, handed, line, col, scope.owner))

    def finish(self, results: dict[str, dict[str, Any]]) -> dict[str, Any]:
        return {"handovers": tuple(self.found)} if self.found else {}
