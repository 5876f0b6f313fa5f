"""Collector ``forward_patches``: ``forward`` rebound on an object, classes renamed through an instance (FWD301).

Statements anywhere but class bodies:

* ``<obj>.forward = <value>``: ``form`` is ``MethodType`` (``types.MethodType(f, obj)``), ``__get__``
  (``f.__get__(obj)``), ``partial`` (``functools.partial(f, obj)``) or ``assign`` (anything else);
* ``setattr(<obj>, "forward", <value>)`` and ``object.__setattr__(<obj>, "forward", ...)``: ``setattr``;
* ``<obj>.__dict__["forward"] = ...`` and ``vars(<obj>)["forward"] = ...``: ``__dict__``;
* ``<obj>.__class__.__name__ = ...``, ``type(<obj>).__name__ = ...`` (and ``__qualname__``, and the
  ``setattr`` spelling): ``rename``.

Patches of a class itself (``type(obj).forward = f``, ``obj.__class__.forward = f``) are not
instance patches and are left out here; ``Cls.forward = f`` is recorded with ``receiver_ref`` so
the rule can tell a class (through the project view) from an instance.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Optional

import libcst as cst

from lint_rules.facts.model import ForwardPatch
from lint_rules.facts.traversal import Collector, Scope
from lint_rules.facts.walk import dotted_name, string_value

_TRIGGER = re.compile(r"""\.forward\s*=[^=]|["']forward["']|__(?:qual)?name__\s*=[^=]""")
_METHOD_TYPE = frozenset({"types.MethodType", "MethodType"})
_PARTIAL = frozenset({"functools.partial", "partial"})
_SETATTR = frozenset({"setattr", "object.__setattr__"})
_NAMES = ("__name__", "__qualname__")


@dataclass
class _Patch:
    form: str
    receiver: Optional[cst.BaseExpression]
    node: cst.Name  # positioned: "forward", "__name__", "setattr"...
    scope: str
    function: str = ""
    simple: bool = False


def _instance_of_type(expr: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    """``x`` for ``type(x)`` / ``x.__class__``, else None."""
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value == "type" \
            and len(expr.args) == 1:
        return expr.args[0].value
    if isinstance(expr, cst.Attribute) and expr.attr.value == "__class__":
        return expr.value
    return None


class ForwardPatches(Collector):
    name = "forward_patches"
    handlers = {cst.Assign: "on_assign", cst.Expr: "on_expr"}

    def __init__(self, walk: Any) -> None:
        super().__init__(walk)
        self.found: list[_Patch] = []

    @classmethod
    def wanted(cls, source: str, resolving: bool = False) -> bool:
        return _TRIGGER.search(source) is not None

    @staticmethod
    def _scope_name(scope: Scope) -> str:
        function = scope.function
        return function.prefix.removesuffix(".<locals>.") if function is not None else ""

    def on_assign(self, node: cst.Assign, scope: Scope) -> None:
        if scope.kind == "class":
            return
        resolve = self.walk.names.resolve
        for target in (t.target for t in node.targets):
            if isinstance(target, cst.Attribute) and target.attr.value == "forward":
                if _instance_of_type(target.value) is not None:
                    continue  # the class itself is patched
                form, function = self._form(node.value)
                simple = (form == "MethodType" and len(node.targets) == 1 and bool(function)
                          and self._bound_to(node.value) == dotted_name(target.value) is not None
                          and not self.walk.inline and isinstance(self.walk.statement, cst.SimpleStatementLine)
                          and len(self.walk.statement.body) == 1)
                self.found.append(_Patch(form, target.value, target.attr, self._scope_name(scope), function, simple))
            elif isinstance(target, cst.Attribute) and target.attr.value in _NAMES:
                instance = _instance_of_type(target.value)
                if instance is not None:
                    self.found.append(_Patch("rename", instance, target.attr, self._scope_name(scope)))
            elif isinstance(target, cst.Subscript) and len(target.slice) == 1 and isinstance(
                    target.slice[0].slice, cst.Index) and string_value(target.slice[0].slice.value) == "forward":
                holder = target.value
                if isinstance(holder, cst.Attribute) and holder.attr.value == "__dict__":
                    self.found.append(_Patch("__dict__", holder.value, holder.attr, self._scope_name(scope)))
                elif isinstance(holder, cst.Call) and isinstance(holder.func, cst.Name) \
                        and resolve(holder.func.value) == "vars" and holder.args:
                    self.found.append(_Patch("__dict__", holder.args[0].value, holder.func, self._scope_name(scope)))

    def on_expr(self, node: cst.Expr, scope: Scope) -> None:
        call = node.value
        if scope.kind == "class" or not isinstance(call, cst.Call) or len(call.args) < 3:
            return
        if self.walk.names.resolve(dotted_name(call.func) or "") not in _SETATTR:
            return
        obj, name = call.args[0].value, string_value(call.args[1].value)
        node = call.func.attr if isinstance(call.func, cst.Attribute) else call.func
        if name == "forward" and _instance_of_type(obj) is None:
            _, function = self._form(call.args[2].value)
            self.found.append(_Patch("setattr", obj, node, self._scope_name(scope), function))
        elif name in _NAMES and _instance_of_type(obj) is not None:
            self.found.append(_Patch("rename", _instance_of_type(obj), node, self._scope_name(scope)))

    def _form(self, value: cst.BaseExpression) -> tuple[str, str]:
        """How the new forward is made, and the function it binds if that is a plain name."""
        if not isinstance(value, cst.Call):
            return "assign", ""
        first = value.args[0].value if value.args else None
        name = first.value if isinstance(first, cst.Name) else ""
        ref = self.walk.names.resolve(dotted_name(value.func) or "")
        if ref in _METHOD_TYPE:
            return "MethodType", name
        if ref in _PARTIAL:
            return "partial", name
        if isinstance(value.func, cst.Attribute) and value.func.attr.value == "__get__":
            inner = value.func.value
            return "__get__", inner.value if isinstance(inner, cst.Name) else ""
        return "assign", ""

    @staticmethod
    def _bound_to(value: cst.BaseExpression) -> Optional[str]:
        """The object ``MethodType(f, obj)`` binds to, as written."""
        if isinstance(value, cst.Call) and len(value.args) == 2 and all(a.keyword is None and not a.star
                                                                       for a in value.args):
            return dotted_name(value.args[1].value)
        return None

    def finish(self, results: dict[str, dict[str, Any]]) -> dict[str, Any]:
        if not self.found:
            return {}
        positions = self.walk.positions([p.node for p in self.found])
        resolve = self.walk.names.resolve
        patches = []
        for p in self.found:
            receiver = dotted_name(p.receiver) if p.receiver is not None else None
            ref = resolve(receiver) if receiver else ""
            line, col = positions[p.node]
            at = p.node.value if isinstance(p.node, cst.Name) else ""
            patches.append(ForwardPatch(p.form, receiver or "", ref if ref != receiver else "", line, col, at,
                                        p.scope, p.function, p.simple))
        return {"forward_patches": tuple(patches)}
