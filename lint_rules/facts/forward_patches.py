"""Collector ``forward_patches``: ``forward`` rebound on an object, classes renamed through an instance (FWD301).

Statements anywhere but class bodies:

* ``<obj>.forward = <value>``: ``form`` is ``MethodType`` (``types.MethodType(f, obj)``), ``__get__``
  (``f.__get__(obj)``), ``partial`` (``functools.partial(f, obj)``) or ``assign`` (anything else);
* ``setattr(<obj>, "forward", <value>)`` and ``object.__setattr__(<obj>, "forward", ...)``: ``setattr``;
* ``<obj>.__dict__["forward"] = ...`` and ``vars(<obj>)["forward"] = ...``: ``__dict__``;
* ``<obj>.__class__.__name__ = ...``, ``type(<obj>).__name__ = ...`` (and ``__qualname__``, and the
  ``setattr`` spelling): ``rename``;
* ``helper(<obj>, "forward", ...)``: ``helper``, a call handing the name ``"forward"`` to a function;
  the rule decides through ``attr_setters`` (of this file or the helper's) whether the helper
  sets that attribute on its first argument, as Liger-Kernel's ``_bind_method_to_module`` does.

``attr_setters`` lists the module-level functions whose body sets an attribute named by one
parameter on another (``obj.__dict__[name] = ...``, ``setattr(obj, name, ...)``).

What the receiver is, where the file says (``receiver_type``): a class for the first parameter
of a class method or ``__init_subclass__``, a parameter annotated ``type[...]``, a name bound to
``type(x)`` or ``x.__class__``; the method's own instance for its ``self``; an instance of ``X``
for a name bound to ``X(...)`` or a parameter annotated ``X``. Patches of a class itself
(``type(obj).forward = f``, ``obj.__class__.forward = f``) are left out here; ``Cls.forward = f``
is recorded with ``receiver_ref`` so the rule can tell a class from an instance.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Optional

import libcst as cst

from lint_rules.facts.model import ForwardPatch
from lint_rules.facts.traversal import Collector, Scope
from lint_rules.facts.walk import dotted_name, string_value
from lint_rules.vocabulary import (
    CLASS_NAME_ATTRIBUTES, IMPLICIT_CLASSMETHODS, METACLASSES, METHOD_TYPE, PARTIAL, SETATTR, TYPE_ANNOTATIONS,
)

_TRIGGER = re.compile(r"""\.forward\s*=[^=]|["']forward["']|__(?:qual)?name__\s*=[^=]|__dict__\[\w+\]\s*=[^=]""")
CLASS = "class"


@dataclass
class _Patch:
    form: str
    receiver: Optional[cst.BaseExpression]
    node: cst.Name  # positioned: "forward", "__name__", "setattr"...
    scope: Scope
    function: str = ""
    simple: bool = False
    slot: int = -1
    kind: str = ""  # the receiver's type when the patch was seen


def _instance_of_type(expr: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    """``x`` for ``type(x)`` / ``x.__class__``, else None."""
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value == "type" \
            and len(expr.args) == 1:
        return expr.args[0].value
    if isinstance(expr, cst.Attribute) and expr.attr.value == "__class__":
        return expr.value
    return None


def _params(node: cst.FunctionDef) -> list[cst.Param]:
    return [*node.params.posonly_params, *node.params.params]


class ForwardPatches(Collector):
    name = "forward_patches"
    handlers = {cst.Assign: "on_assign", cst.Expr: "on_expr"}

    def __init__(self, walk: Any) -> None:
        super().__init__(walk)
        self.found: list[_Patch] = []
        self.types: dict[cst.CSTNode, dict[str, str]] = {}  # function -> local name -> receiver type
        self.saved: dict[tuple[cst.CSTNode, str], str] = {}  # (function, local) -> receiver of the forward it saved
        self.setters: list[tuple[str, int, int]] = []

    @classmethod
    def wanted(cls, source: str, resolving: bool = False) -> bool:
        return _TRIGGER.search(source) is not None

    # -- what names hold ---------------------------------------------------------------------
    def enter(self, node: cst.CSTNode, scope: Scope) -> None:
        if not isinstance(node, cst.FunctionDef) or scope.parent is None:
            return
        names = self.walk.names
        known: dict[str, str] = {}
        params = _params(node)
        if scope.parent.kind == "class" and params:
            decorators = {d.rpartition(".")[2] for d in names.decorators(node)}
            if "staticmethod" not in decorators:
                first = params[0].name.value
                if "classmethod" in decorators or node.name.value in IMPLICIT_CLASSMETHODS or \
                        self._metaclass(scope.parent.node):
                    known[first] = CLASS
                else:
                    known[first] = "self:" + scope.parent.prefix.removesuffix(".")
        for param in params + list(node.params.kwonly_params):
            if param.name.value not in known and param.annotation is not None:
                kind = self._annotation(param.annotation)
                if kind:
                    known[param.name.value] = kind
        self.types[node] = known

    def _annotation(self, annotation: cst.Annotation) -> str:
        expr = annotation.annotation
        if isinstance(expr, cst.Subscript):
            expr = expr.value
        ref = self.walk.names.resolve(dotted_name(expr) or "")
        if ref in TYPE_ANNOTATIONS:
            return CLASS
        return "ref:" + self.walk.names.annotation_ref(annotation) if ref else ""

    def _saved(self, scope: Scope, name: str) -> Optional[str]:
        """The receiver whose ``forward`` ``name`` saved (``orig = m.forward``), if it did."""
        function = scope.function
        return self.saved.get((function.node, name)) if function is not None else None

    def _bind(self, scope: Scope, name: str, value: cst.BaseExpression) -> None:
        function = scope.function
        if function is None:
            return
        if isinstance(value, cst.Attribute) and value.attr.value == "forward" and dotted_name(value.value):
            self.saved[(function.node, name)] = dotted_name(value.value) or ""
        else:
            self.saved.pop((function.node, name), None)
        known = self.types.setdefault(function.node, {})
        if _instance_of_type(value) is not None:
            known[name] = CLASS
        elif isinstance(value, cst.Call) and dotted_name(value.func):
            known[name] = "ref:" + self.walk.names.resolve(dotted_name(value.func) or "")
        else:
            known.pop(name, None)

    def _metaclass(self, node: cst.CSTNode) -> bool:
        """A class deriving from ``type`` (``class _LossMeta(abc.ABCMeta)``): its methods' first
        argument is a class being made, and ``cls.forward = ...`` patches that class."""
        return isinstance(node, cst.ClassDef) and any(
            self.walk.names.resolve(dotted_name(base.value) or "") in METACLASSES for base in node.bases)

    def _receiver_type(self, receiver: Optional[cst.BaseExpression], scope: Scope) -> str:
        if isinstance(receiver, cst.Subscript):  # self._refs[i]: an element of a container attribute
            owner, me, text = scope.enclosing_class, scope.self_name, dotted_name(receiver.value)
            if owner is None or me is None or text is None or not text.startswith(f"{me}.") or text.count(".") != 1:
                return ""
            return f"element:{owner.prefix.removesuffix('.')}.{text.split('.', 1)[1]}"
        if not isinstance(receiver, cst.Name):
            return ""
        current: Optional[Scope] = scope.function
        while current is not None:  # nested functions see their definers' names
            if current.kind == "function":
                found = self.types.get(current.node, {}).get(receiver.value)
                if found is not None:
                    return found
            current = current.parent
        return ""

    # -- statements --------------------------------------------------------------------------
    def on_assign(self, node: cst.Assign, scope: Scope) -> None:
        if scope.kind == "class":
            return
        resolve = self.walk.names.resolve
        for target in (t.target for t in node.targets):
            if isinstance(target, cst.Name):
                self._bind(scope, target.value, node.value)
            elif isinstance(target, cst.Attribute) and target.attr.value == "forward":
                if _instance_of_type(target.value) is not None:
                    continue  # the class itself is patched
                form, function = self._form(node.value)
                saved = self._saved(scope, node.value.value) if isinstance(node.value, cst.Name) else None
                if saved is not None and saved == dotted_name(target.value):
                    form, function = "restore", node.value.value  # m.forward = orig, after orig = m.forward
                simple = (form == "MethodType" and len(node.targets) == 1 and bool(function)
                          and self._bound_to(node.value) == dotted_name(target.value) is not None
                          and not self.walk.inline and isinstance(self.walk.statement, cst.SimpleStatementLine)
                          and len(self.walk.statement.body) == 1)
                self._add(_Patch(form, target.value, target.attr, scope, function, simple))
            elif isinstance(target, cst.Attribute) and target.attr.value in CLASS_NAME_ATTRIBUTES:
                instance = _instance_of_type(target.value)
                if instance is not None:
                    self._add(_Patch("rename", instance, target.attr, scope))
            elif isinstance(target, cst.Subscript) and len(target.slice) == 1 and isinstance(
                    target.slice[0].slice, cst.Index):
                holder, key = target.value, target.slice[0].slice.value
                obj, node_at = None, None
                if isinstance(holder, cst.Attribute) and holder.attr.value == "__dict__":
                    obj, node_at = holder.value, holder.attr
                elif isinstance(holder, cst.Call) and isinstance(holder.func, cst.Name) \
                        and resolve(holder.func.value) == "vars" and holder.args:
                    obj, node_at = holder.args[0].value, holder.func
                if obj is None or node_at is None:
                    continue
                if string_value(key) == "forward":
                    self._add(_Patch("__dict__", obj, node_at, scope))
                else:
                    self._setter(scope, obj, key)

    def on_expr(self, node: cst.Expr, scope: Scope) -> None:
        call = node.value
        if scope.kind == "class" or not isinstance(call, cst.Call) or len(call.args) < 2:
            return
        callee = self.walk.names.resolve(dotted_name(call.func) or "")
        node_at = call.func.attr if isinstance(call.func, cst.Attribute) else call.func
        if not isinstance(node_at, cst.Name):
            return
        if callee in SETATTR and len(call.args) >= 3:
            obj, name = call.args[0].value, string_value(call.args[1].value)
            if name == "forward" and _instance_of_type(obj) is None:
                _, function = self._form(call.args[2].value)
                self._add(_Patch("setattr", obj, node_at, scope, function))
            elif name in CLASS_NAME_ATTRIBUTES and _instance_of_type(obj) is not None:
                self._add(_Patch("rename", _instance_of_type(obj), node_at, scope))
            elif name is None:
                self._setter(scope, obj, call.args[1].value)
            return
        positional = [a.value for a in call.args if a.keyword is None and not a.star]
        slot = next((i for i, arg in enumerate(positional) if i and string_value(arg) == "forward"), -1)
        if slot > 0 and callee:
            self._add(_Patch("helper", positional[0], node_at, scope, callee, slot=slot))

    def _add(self, patch: _Patch) -> None:
        patch.kind = self._receiver_type(patch.receiver, patch.scope)
        self.found.append(patch)

    def _setter(self, scope: Scope, obj: cst.BaseExpression, key: cst.BaseExpression) -> None:
        """``obj.__dict__[name] = ...`` / ``setattr(obj, name, ...)`` in a module-level function
        whose parameters ``obj`` and ``name`` are."""
        function = scope.function
        if function is None or function.parent is None or function.parent.kind != "module":
            return
        if not (isinstance(obj, cst.Name) and isinstance(key, cst.Name)):
            return
        assert isinstance(function.node, cst.FunctionDef)
        names = [p.name.value for p in _params(function.node)]
        if obj.value in names and key.value in names:
            self.setters.append((function.node.name.value, names.index(obj.value), names.index(key.value)))

    def _form(self, value: cst.BaseExpression) -> tuple[str, str]:
        """How the new forward is made, and the function it binds if that is a plain name."""
        if not isinstance(value, cst.Call):
            return "assign", ""
        first = value.args[0].value if value.args else None
        name = first.value if isinstance(first, cst.Name) else ""
        ref = self.walk.names.resolve(dotted_name(value.func) or "")
        if ref in METHOD_TYPE:
            return "MethodType", name
        if ref in PARTIAL:
            return "partial", name
        if isinstance(value.func, cst.Attribute) and value.func.attr.value == "__get__":
            inner = value.func.value
            return "__get__", inner.value if isinstance(inner, cst.Name) else ""
        return "assign", ""

    @staticmethod
    def _bound_to(value: cst.BaseExpression) -> Optional[str]:
        """The object ``MethodType(f, obj)`` binds to, as written."""
        plain = isinstance(value, cst.Call) and all(a.keyword is None and not a.star for a in value.args)
        if plain and len(value.args) == 2:  # type: ignore[union-attr]
            return dotted_name(value.args[1].value)  # type: ignore[union-attr]
        return None

    def finish(self, results: dict[str, dict[str, Any]]) -> dict[str, Any]:
        fields: dict[str, Any] = {}
        if self.setters:
            fields["attr_setters"] = tuple(dict.fromkeys(self.setters))
        if not self.found:
            return fields
        positions = self.walk.positions([p.node for p in self.found])
        resolve = self.walk.names.resolve
        patches = []
        for p in self.found:
            receiver = dotted_name(p.receiver) if p.receiver is not None else None
            ref = resolve(receiver) if receiver else ""
            line, col = positions[p.node]
            function = p.scope.function
            scope = function.prefix.removesuffix(".<locals>.") if function is not None else ""
            patches.append(ForwardPatch(p.form, receiver or "", ref if ref != receiver else "", line, col,
                                        p.node.value, scope, p.function, p.simple,
                                        p.kind, p.slot))
        fields["forward_patches"] = tuple(patches)
        return fields
