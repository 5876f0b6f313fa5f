"""Collector ``wrap_sites``: where a model is set up for distributed execution.

``model = fabric.setup(model)`` (also ``fabric.setup_module``, and tuple targets such as
``model, opt = fabric.setup(model, opt)``) and FSDP2's ``fully_shard(model)``. For each, the
set-up variable, the model's class as far as the same scope tells (``model = GPT(...)``,
``GPT.from_pretrained(...)``, an annotation, or a constructor call passed straight to ``setup``),
and the methods called on the variable later in that scope (nested functions included). A
receiver counts as a Fabric if its name contains "fabric" or it was assigned ``...Fabric(...)``.
Each function body is its own scope; class bodies share their enclosing scope's names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Optional

import libcst as cst

from lint_rules.facts.model import WrapSite
from lint_rules.facts.traversal import Collector, Scope
from lint_rules.facts.walk import dotted_name

_SETUP_METHODS = ("setup", "setup_module")
_TRIGGER = re.compile(r"\.setup(?:_module)?\s*\(|fully_shard\s*\(")


@dataclass
class _Site:
    kind: str
    var: str
    cls: Optional[str]
    statement: cst.CSTNode
    scope: cst.CSTNode  # the function (or module) whose later code may call methods on var
    qualname: str
    inline: bool
    called: list[str] = field(default_factory=list)


@dataclass
class _Names:
    """What one function scope knows: variable -> class reference as written (or None), and
    which names hold a Fabric."""

    classes: dict[str, Optional[str]] = field(default_factory=dict)
    fabrics: set[str] = field(default_factory=set)


class WrapSites(Collector):
    name = "wrap_sites"
    handlers = {cst.Assign: "on_statement", cst.AnnAssign: "on_statement", cst.Expr: "on_statement",
                cst.Call: "on_call"}

    def __init__(self, walk: Any) -> None:
        super().__init__(walk)
        self.sites: list[_Site] = []
        self.open: dict[cst.CSTNode, list[_Site]] = {}  # scope node -> its sites so far
        self.names: dict[cst.CSTNode, _Names] = {}

    @classmethod
    def wanted(cls, source: str) -> bool:
        return _TRIGGER.search(source) is not None

    def wants_expressions(self, scope: Scope) -> bool:
        return True

    @staticmethod
    def _owners(scope: Scope) -> list[Scope]:
        """The function scopes around ``scope``, innermost first, then the module."""
        found = []
        current: Optional[Scope] = scope
        while current is not None:
            if current.kind != "class":
                found.append(current)
            current = current.parent
        return found

    def _names(self, scope: Scope) -> _Names:
        owners = self._owners(scope)
        found = self.names.get(owners[0].node)
        if found is None:  # a new function starts with the Fabrics its definer knew
            outer = self._names(owners[1]) if len(owners) > 1 else None
            found = self.names[owners[0].node] = _Names(fabrics=set(outer.fabrics) if outer else set())
        return found

    def on_call(self, call: cst.Call, scope: Scope) -> None:
        func = call.func
        if not self.open or not isinstance(func, cst.Attribute):
            return
        receiver = dotted_name(func.value)
        if receiver is None:
            return
        for owner in self._owners(scope):
            for site in self.open.get(owner.node, ()):
                if site.var == receiver and func.attr.value not in site.called:
                    site.called.append(func.attr.value)

    def on_statement(self, small: cst.CSTNode, scope: Scope) -> None:
        names = self._names(scope)
        value: Optional[cst.BaseExpression] = None
        targets: list[cst.BaseExpression] = []
        if isinstance(small, cst.Assign):
            value, targets = small.value, [t.target for t in small.targets]
        elif isinstance(small, cst.AnnAssign) and small.value is not None:
            value, targets = small.value, [small.target]
            annotated = dotted_name(small.annotation.annotation)
            if annotated and isinstance(small.target, (cst.Name, cst.Attribute)):
                names.classes[dotted_name(small.target) or ""] = annotated
        elif isinstance(small, cst.Expr):
            value = small.value
        if not isinstance(value, cst.Call):
            for target in targets:
                if dotted_name(target):
                    names.classes[dotted_name(target) or ""] = None
            return
        func = dotted_name(value.func) or ""
        receiver, _, last = func.rpartition(".")
        positional = [a.value for a in value.args if a.keyword is None]
        is_fabric = "fabric" in receiver.rpartition(".")[2].lower() or receiver in names.fabrics
        if last in _SETUP_METHODS and receiver and is_fabric:
            elements = targets[0].elements if targets and isinstance(targets[0], (cst.Tuple, cst.List)) else None
            pairs = (zip([e.value for e in elements], positional) if elements is not None
                     else zip(targets[:1], positional[:1]))
            for target, arg in pairs:
                var = dotted_name(target)
                if var is None:
                    continue
                arg_name = dotted_name(arg)
                cls = names.classes.get(arg_name) if arg_name else (
                    dotted_name(arg.func) if isinstance(arg, cst.Call) else None)
                names.classes[var] = cls
                self._site("fabric", var, cls, scope)
            return
        if last == "fully_shard" and positional and dotted_name(positional[0]):
            var = dotted_name(positional[0]) or ""
            cls = names.classes.get(var)
            for target in targets:
                if dotted_name(target):
                    names.classes[dotted_name(target) or ""] = cls
            self._site("fsdp2", var, cls, scope)
            return
        if last.endswith("Fabric"):
            names.fabrics.update(dotted_name(t) or "" for t in targets)
        for target in targets:
            if dotted_name(target):
                names.classes[dotted_name(target) or ""] = func or None

    def _site(self, kind: str, var: str, cls: Optional[str], scope: Scope) -> None:
        owner = self._owners(scope)[0]
        qualname = owner.prefix.removesuffix(".<locals>.") if owner.kind == "function" else ""
        site = _Site(kind, var, cls, self.walk.statement, owner.node, qualname, self.walk.inline)
        self.sites.append(site)
        self.open.setdefault(owner.node, []).append(site)

    def finish(self, results: dict[str, dict[str, Any]]) -> dict[str, Any]:
        if not self.sites:
            return {}
        lines = self.walk.positions([site.statement for site in self.sites])
        resolve = self.walk.names.resolve
        return {"wrap_sites": tuple(
            WrapSite(kind=site.kind, var=site.var, cls=resolve(site.cls) if site.cls else "",
                     line=lines[site.statement][0], scope=site.qualname, called=tuple(site.called),
                     inline=site.inline)
            for site in self.sites)}
