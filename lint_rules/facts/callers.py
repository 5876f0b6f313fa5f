"""Collector ``callers``: where each method name is called, for FWD001's "called only from
``Parent.forward``".

``attribute_uses``: (name, owner) for every call ``<anything>.name(...)`` and every method of
self handed over or kept without a call (``apply_chunking_to_forward(self.ff_chunk, x)``,
``f = self.ff_chunk``, ``getattr(self, "ff_chunk")``), dunders left out. An attribute the class
assigns on self is data or a submodule (``self.dense(x)``), not a method: its uses on self are
left out. The owner is the qualified name of the function the code belongs to (``BertLayer.forward``; code
nested in a method counts as the method's; ``""`` at module level and in class bodies). Calls of
other objects' methods of the same name are in too (the rule cannot tell ``tokenizer.encode``
from ``vae.encode``), which only ever makes the rule claim less. Another object's method handed
over without a call (``run(model.encode)``) is not recorded: attribute reads are mostly data
(``config.hidden_size``), and keeping them all would add half again to a file's facts.

The rule reads these from every file of the project view. A file the text prefilter skips (no
``class`` and no ``def ``: module-level code only, such as a script that imports a model and calls
it) is not read, so its calls are not seen.
"""

from __future__ import annotations

import ast
from typing import Any

from lint_rules.facts.traversal import Collector, Scope
from lint_rules.facts.walk import call_args, string_value


class Callers(Collector):
    name = "callers"
    triggers = ("class", "def ")
    after = ("classes",)  # the attributes each class assigns on self
    handlers = {ast.Call: "on_call", ast.Assign: "on_assign"}

    def __init__(self, walk: Any) -> None:
        super().__init__(walk)
        self.uses: dict[tuple[str, str], bool] = {}  # (name, owner) -> on self (once each, in document order)

    def wants_expressions(self, scope: Scope) -> bool:
        return True

    def on_call(self, call: ast.Call, scope: Scope) -> None:
        func = call.func
        if type(func) is ast.Attribute:
            root = func.value
            while type(root) is ast.Attribute:
                root = root.value
            if not (type(root) is ast.Name and root.id in self.walk.names.imports):  # torch.cat, F.relu
                self._add(func.attr, scope, self._is_self(func.value, scope))
        elif type(func) is ast.Name and func.id == "getattr" and len(call.args) >= 2:
            name = string_value(call.args[1])
            if name is not None and self._is_self(call.args[0], scope):
                self._add(name, scope, False)
        for arg in call_args(call):
            self._handed(arg.value, scope)

    def on_assign(self, node: ast.Assign, scope: Scope) -> None:
        self._handed(node.value, scope)

    def _handed(self, value: ast.expr, scope: Scope) -> None:
        if type(value) is ast.Attribute and self._is_self(value.value, scope):
            self._add(value.attr, scope, True)

    @staticmethod
    def _is_self(node: ast.expr, scope: Scope) -> bool:
        return type(node) is ast.Name and node.id == scope.self_name

    def _add(self, name: str, scope: Scope, on_self: bool) -> None:
        if not name.startswith("__"):
            key = (name, scope.owner)
            self.uses[key] = self.uses.get(key, True) and on_self  # one use on another object is enough

    def finish(self, results: dict[str, dict[str, Any]]) -> dict[str, Any]:
        # an attribute the class assigns on self is data or a submodule, not a method
        classes = results.get("classes", {}).get("classes", ())
        stored = {cls.qualname: {attr for attr, _ in cls.attrs} for cls in classes}
        return {"attribute_uses": tuple(
            (name, owner) for (name, owner), on_self in self.uses.items()
            if not (on_self and name in stored.get(owner.rpartition(".")[0], ())))}
