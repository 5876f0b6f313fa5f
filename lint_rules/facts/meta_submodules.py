"""Collector ``meta_submodules``: attributes of ``self`` assigned a value on the meta device (FWD101).

In a method of a class, ``self.<attr> = <value>`` where the value is put on meta by

* being built inside ``with torch.device("meta"):`` (a call, e.g. ``Block()``);
* ``.to("meta")``, ``.to(device="meta")``, ``.to(torch.device("meta"))`` or ``.to_empty(device="meta")``
  as its last call (after ``.eval()``, ``.requires_grad_(False)`` and other calls that return the
  module), applied to a constructor call, to ``self``, to ``self.<attr>`` or to a ``copy.deepcopy`` of
  those;
* a constructor called with ``device="meta"``.

``value`` says what was put there (a class reference, ``self``, ``self.<attr>``; ``module`` for
``to_empty``, which only modules have), so the rule can tell a submodule from a tensor through
the project view. An attribute counts as ``materialised`` if a method of the class calls
``self.<attr>.to_empty(...)`` with another device, ``self.to_empty(...)``, or
``load_state_dict(..., assign=True)`` on it or on ``self`` (the deliberate deferred-init pattern).
Templates kept out of the module tree (``self._tpl = [Block()]``, ``object.__setattr__``) are
not ``self.<attr> = <call>`` assignments and never appear here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import libcst as cst

from lint_rules.facts.devices import is_meta, meta_keyword
from lint_rules.facts.model import MetaSubmodule
from lint_rules.facts.traversal import Collector, Scope
from lint_rules.facts.walk import LEAVES, child_nodes, dotted_name
from lint_rules.vocabulary import DEEPCOPY, MODULE_KEEPS_DEVICE


@dataclass
class _Found:
    cls: str
    attr: str
    node: cst.Name
    how: str
    value: str


class MetaSubmodules(Collector):
    name = "meta_submodules"
    triggers = ("meta",)
    handlers = {cst.With: "on_with", cst.Assign: "on_assign", cst.AnnAssign: "on_assign", cst.Call: "on_call"}

    def __init__(self, walk: Any) -> None:
        super().__init__(walk)
        self.in_meta: dict[cst.CSTNode, str] = {}  # statement lines inside `with torch.device("meta")`
        self.found: list[_Found] = []
        self.materialised: set[tuple[str, str]] = set()  # (class, attr); attr "" = the whole module

    def wants_expressions(self, scope: Scope) -> bool:
        return scope.method is not None

    def on_with(self, node: cst.With, scope: Scope) -> None:
        if scope.method is None or not any(is_meta(item.item, self.walk.names) and isinstance(item.item, cst.Call)
                                           for item in node.items):
            return
        stack: list[cst.CSTNode] = [node.body]
        while stack:  # the statement lines of the block, not those of nested definitions
            current = stack.pop()
            if isinstance(current, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
                self.in_meta[current] = 'with torch.device("meta")'
            elif not isinstance(current, (cst.FunctionDef, cst.ClassDef, cst.Lambda)) and type(current) not in LEAVES:
                stack.extend(child_nodes(current))

    def on_assign(self, node: cst.Assign | cst.AnnAssign, scope: Scope) -> None:
        owner = scope.enclosing_class
        me = scope.self_name
        if owner is None or me is None or node.value is None:
            return
        targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
        for target in targets:
            if not (isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name)
                    and target.value.value == me):
                continue
            found = self._on_meta(node.value, me)
            if found is None:
                continue
            how, value = found
            cls = owner.prefix.removesuffix(".")
            self.found.append(_Found(cls, target.attr.value, target.attr, how, value))

    def _on_meta(self, value: cst.BaseExpression, me: str) -> Optional[tuple[str, str]]:
        """(how, what) if ``value`` ends up on meta."""
        names = self.walk.names
        while (isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute)
               and value.func.attr.value in MODULE_KEEPS_DEVICE):  # X().to("meta").eval() is X on meta
            value = value.func.value
        if not isinstance(value, cst.Call):
            return None
        func = value.func
        if isinstance(func, cst.Attribute) and func.attr.value in ("to", "to_empty"):
            positional = [a.value for a in value.args if a.keyword is None]
            device = (positional[:1] if func.attr.value == "to" else []) + [
                a.value for a in value.args if a.keyword is not None and a.keyword.value == "device"]
            if not any(is_meta(d, names) for d in device):
                return None
            how = f'.{func.attr.value}(device="meta")' if func.attr.value == "to_empty" else '.to("meta")'
            what = self._what(func.value, me)
            if func.attr.value == "to_empty":
                what = what or "module"
            return (how, what) if what else None
        ref = names.resolve(dotted_name(func) or "")
        if not ref or ref.split(".", 1)[0] == me:
            return None
        if meta_keyword(value, names):
            return 'device="meta"', ref
        if self.walk.statement in self.in_meta and ref not in DEEPCOPY:
            return self.in_meta[self.walk.statement], ref
        return None

    def _what(self, expr: cst.BaseExpression, me: str) -> str:
        """What ``.to(...)`` was applied to: a class built here, ``self``, ``self.<attr>``, "" if unknown."""
        if isinstance(expr, cst.Call) and self.walk.names.resolve(dotted_name(expr.func) or "") in DEEPCOPY:
            expr = expr.args[0].value if expr.args else expr
        text = dotted_name(expr)
        if text == me:
            return "self"
        if text is not None and text.startswith(me + ".") and text.count(".") == 1:
            return "self." + text.split(".", 1)[1]
        if isinstance(expr, cst.Call):
            ref = self.walk.names.resolve(dotted_name(expr.func) or "")
            return ref if ref and ref.split(".", 1)[0] != me else ""
        return ""

    def on_call(self, call: cst.Call, scope: Scope) -> None:
        """Materialisation: ``self[.attr].to_empty(device=<not meta>)``, ``...load_state_dict(..., assign=True)``."""
        func = call.func
        owner, me = scope.enclosing_class, scope.self_name
        if owner is None or me is None or not isinstance(func, cst.Attribute):
            return
        method = func.attr.value
        if method == "to_empty":
            if meta_keyword(call, self.walk.names):
                return
        elif method == "load_state_dict":
            if not any(a.keyword is not None and a.keyword.value == "assign" and isinstance(a.value, cst.Name)
                       and a.value.value == "True" for a in call.args):
                return
        else:
            return
        text = dotted_name(func.value)
        if text == me:
            self.materialised.add((owner.prefix.removesuffix("."), ""))
        elif text is not None and text.startswith(me + ".") and text.count(".") == 1:
            self.materialised.add((owner.prefix.removesuffix("."), text.split(".", 1)[1]))

    def finish(self, results: dict[str, dict[str, Any]]) -> dict[str, Any]:
        if not self.found:
            return {}
        positions = self.walk.positions([f.node for f in self.found])
        return {"meta_submodules": tuple(
            MetaSubmodule(f.cls, f.attr, positions[f.node][0], positions[f.node][1], f.how, f.value,
                          (f.cls, f.attr) in self.materialised or (f.cls, "") in self.materialised)
            for f in self.found)}
