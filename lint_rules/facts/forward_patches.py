"""Collector ``forward_patches``: ``forward`` rebound on an object, classes renamed through an instance (FWD301).

Statements anywhere but class bodies:

* ``<obj>.forward = <value>``: ``form`` is ``MethodType`` (``types.MethodType(f, obj)``), ``__get__``
  (``f.__get__(obj)``), ``partial`` (``functools.partial(f, obj)``) or ``assign`` (anything else);
* ``setattr(<obj>, "forward", <value>)`` and ``object.__setattr__(<obj>, "forward", ...)``: ``setattr``;
* ``<obj>.__dict__["forward"] = ...`` and ``vars(<obj>)["forward"] = ...``: ``__dict__``;
* ``<obj>.__class__.__name__ = ...``, ``type(<obj>).__name__ = ...`` (and ``__qualname__``, and the
  ``setattr`` spelling): ``rename``;
* ``<obj>.forward = <saved>``: ``restore``, the end of a swap, where ``<saved>`` is a local that saved
  ``<obj>.forward`` in the same function, or ``<obj>.<attr>`` where the file saves a ``forward`` in an
  attribute of that name anywhere (accelerate's ``module._old_forward``);
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

import ast
import re
from dataclasses import dataclass
from typing import Any, Optional

from lint_rules.facts.model import ForwardPatch
from lint_rules.facts.traversal import Collector, Scope
from lint_rules.facts.walk import FUNCTIONS, call_args, dotted_name, params, positional_params, string_value
from lint_rules.vocabulary import (
    CLASS_NAME_ATTRIBUTES, IMPLICIT_CLASSMETHODS, METACLASSES, METHOD_TYPE, PARTIAL, SETATTR, TYPE_ANNOTATIONS,
)

#: One pattern per kind of text that can patch a forward, each starting with a literal, which the
#: regex engine finds fast; as one pattern of alternatives it scanned every position of every file.
_TRIGGERS = tuple(re.compile(pattern) for pattern in (
    r"\.forward\s*=[^=]", "'forward'", '"forward"', r"__name__\s*=[^=]", r"__qualname__\s*=[^=]",
    r"__dict__\[\w+\]\s*=[^=]"))
CLASS = "class"


@dataclass
class _Patch:
    form: str
    receiver: Optional[ast.expr]
    node: ast.Name | ast.Attribute  # positioned at the name: "forward", "__name__", "setattr"...
    scope: Scope
    function: str = ""
    simple: bool = False
    slot: int = -1
    kind: str = ""  # the receiver's type when the patch was seen
    from_attr: str = ""  # ``m.forward = m.<attr>``: a restore if the file saves a forward in <attr>


def _instance_of_type(expr: ast.expr) -> Optional[ast.expr]:
    """``x`` for ``type(x)`` / ``x.__class__``, else None."""
    kind = type(expr)
    if kind is ast.Call and type(expr.func) is ast.Name and expr.func.id == "type":
        args = call_args(expr)
        return args[0].value if len(args) == 1 else None
    if kind is ast.Attribute and expr.attr == "__class__":
        return expr.value
    return None


def _named(node: ast.Name | ast.Attribute) -> str:
    """The name a patch is positioned at: a bare name's, or an attribute's own."""
    return node.id if type(node) is ast.Name else node.attr


class ForwardPatches(Collector):
    name = "forward_patches"
    handlers = {ast.Assign: "on_assign", ast.Expr: "on_expr"}

    def __init__(self, walk: Any) -> None:
        super().__init__(walk)
        self.found: list[_Patch] = []
        self.types: dict[ast.AST, dict[str, str]] = {}  # function -> local name -> receiver type
        self.saved: dict[tuple[ast.AST, str], str] = {}  # (function, local) -> receiver of the forward it saved
        self.saved_attrs: set[str] = set()  # `m._old_forward = m.forward` anywhere in the file
        self.setters: list[tuple[str, int, int]] = []

    @classmethod
    def wanted(cls, source: str) -> bool:
        return any(pattern.search(source) is not None for pattern in _TRIGGERS)

    # -- what names hold ---------------------------------------------------------------------
    def enter(self, node: ast.AST, scope: Scope) -> None:
        if not isinstance(node, FUNCTIONS) or scope.parent is None:
            return
        names = self.walk.names
        known: dict[str, str] = {}
        positional = positional_params(node)
        if scope.parent.kind == "class" and positional:
            decorators = {d.rpartition(".")[2] for d in names.decorators(node)}
            if "staticmethod" not in decorators:
                first = positional[0]
                if "classmethod" in decorators or node.name in IMPLICIT_CLASSMETHODS or \
                        self._metaclass(scope.parent.node):
                    known[first] = CLASS
                else:
                    known[first] = "self:" + scope.parent.prefix.removesuffix(".")
        for param in params(node):  # positional-only, positional, keyword-only
            if param.name not in known and param.annotation is not None:
                kind = self._annotation(param.annotation)
                if kind:
                    known[param.name] = kind
        self.types[node] = known

    def _annotation(self, annotation: ast.expr) -> str:
        expr = annotation
        if type(expr) is ast.Subscript:
            expr = expr.value
        ref = self.walk.names.resolve(dotted_name(expr) or "")
        if ref in TYPE_ANNOTATIONS:
            return CLASS
        return "ref:" + self.walk.names.annotation_ref(annotation) if ref else ""

    def _saved(self, scope: Scope, name: str) -> Optional[str]:
        """The receiver whose ``forward`` ``name`` saved (``orig = m.forward``), if it did."""
        function = scope.function
        return self.saved.get((function.node, name)) if function is not None else None

    def _bind(self, scope: Scope, name: str, value: ast.expr) -> None:
        function = scope.function
        if function is None:
            return
        if type(value) is ast.Attribute and value.attr == "forward" and dotted_name(value.value):
            self.saved[(function.node, name)] = dotted_name(value.value) or ""
        else:
            self.saved.pop((function.node, name), None)
        known = self.types.setdefault(function.node, {})
        if _instance_of_type(value) is not None:
            known[name] = CLASS
        elif type(value) is ast.Call and dotted_name(value.func):
            known[name] = "ref:" + self.walk.names.resolve(dotted_name(value.func) or "")
        else:
            known.pop(name, None)

    def _metaclass(self, node: ast.AST) -> bool:
        """A class deriving from ``type`` (``class _LossMeta(abc.ABCMeta)``): its methods' first
        argument is a class being made, and ``cls.forward = ...`` patches that class."""
        return type(node) is ast.ClassDef and any(
            self.walk.names.resolve(dotted_name(base.value if type(base) is ast.Starred else base) or "")
            in METACLASSES for base in node.bases)

    def _receiver_type(self, receiver: Optional[ast.expr], scope: Scope) -> str:
        if type(receiver) is ast.Subscript:  # self._refs[i]: an element of a container attribute
            owner, me, text = scope.enclosing_class, scope.self_name, dotted_name(receiver.value)
            if owner is None or me is None or text is None or not text.startswith(f"{me}.") or text.count(".") != 1:
                return ""
            return f"element:{owner.prefix.removesuffix('.')}.{text.split('.', 1)[1]}"
        if type(receiver) is not ast.Name:
            return ""
        current: Optional[Scope] = scope.function
        while current is not None:  # nested functions see their definers' names
            if current.kind == "function":
                found = self.types.get(current.node, {}).get(receiver.id)
                if found is not None:
                    return found
            current = current.parent
        return ""

    # -- statements --------------------------------------------------------------------------
    def on_assign(self, node: ast.Assign, scope: Scope) -> None:
        if scope.kind == "class":
            return
        resolve = self.walk.names.resolve
        for target in node.targets:
            kind = type(target)
            if kind is ast.Name:
                self._bind(scope, target.id, node.value)
            elif kind is ast.Attribute and target.attr != "forward" and (
                    (type(node.value) is ast.Attribute and node.value.attr == "forward")
                    or (type(node.value) is ast.Name and self._saved(scope, node.value.id) is not None)):
                self.saved_attrs.add(target.attr)  # `m._old_forward = m.forward`, or a local that saved it
            elif kind is ast.Attribute and target.attr == "forward":
                if _instance_of_type(target.value) is not None:
                    continue  # the class itself is patched
                form, function = self._form(node.value)
                saved = self._saved(scope, node.value.id) if type(node.value) is ast.Name else None
                if saved is not None and saved == dotted_name(target.value):
                    form, function = "restore", node.value.id  # m.forward = orig, after orig = m.forward
                simple = (form == "MethodType" and len(node.targets) == 1 and bool(function)
                          and self._bound_to(node.value) == dotted_name(target.value) is not None
                          and not self.walk.inline and self.walk.alone)
                value = node.value
                from_attr = value.attr if form == "assign" and type(value) is ast.Attribute and dotted_name(
                    value.value) == dotted_name(target.value) is not None else ""
                self._add(_Patch(form, target.value, target, scope, function, simple, from_attr=from_attr))
            elif kind is ast.Attribute and target.attr in CLASS_NAME_ATTRIBUTES:
                instance = _instance_of_type(target.value)
                if instance is not None:
                    self._add(_Patch("rename", instance, target, scope))
            elif kind is ast.Subscript and type(target.slice) is not ast.Slice:
                holder, key = target.value, target.slice
                obj: Optional[ast.expr] = None
                node_at: Optional[ast.Name | ast.Attribute] = None
                if type(holder) is ast.Attribute and holder.attr == "__dict__":
                    obj, node_at = holder.value, holder
                elif type(holder) is ast.Call and type(holder.func) is ast.Name \
                        and resolve(holder.func.id) == "vars":
                    args = call_args(holder)
                    if args:
                        obj, node_at = args[0].value, holder.func
                if obj is None or node_at is None:
                    continue
                if string_value(key) == "forward":
                    self._add(_Patch("__dict__", obj, node_at, scope))
                else:
                    self._setter(scope, obj, key)

    def on_expr(self, node: ast.Expr, scope: Scope) -> None:
        call = node.value
        if scope.kind == "class" or type(call) is not ast.Call:
            return
        args = call_args(call)
        if len(args) < 2:
            return
        callee = self.walk.names.resolve(dotted_name(call.func) or "")
        node_at = call.func
        if type(node_at) is not ast.Name and type(node_at) is not ast.Attribute:
            return
        if callee in SETATTR and len(args) >= 3:
            obj, name = args[0].value, string_value(args[1].value)
            if name == "forward" and _instance_of_type(obj) is None:
                _, function = self._form(args[2].value)
                self._add(_Patch("setattr", obj, node_at, scope, function))
            elif name in CLASS_NAME_ATTRIBUTES and _instance_of_type(obj) is not None:
                self._add(_Patch("rename", _instance_of_type(obj), node_at, scope))
            elif name is None:
                self._setter(scope, obj, args[1].value)
            return
        positional = [a.value for a in args if a.keyword is None and not a.star]
        slot = next((i for i, arg in enumerate(positional) if i and string_value(arg) == "forward"), -1)
        if slot > 0 and callee:
            self._add(_Patch("helper", positional[0], node_at, scope, callee, slot=slot))

    def _add(self, patch: _Patch) -> None:
        patch.kind = self._receiver_type(patch.receiver, patch.scope)
        self.found.append(patch)

    def _setter(self, scope: Scope, obj: ast.expr, key: ast.expr) -> None:
        """``obj.__dict__[name] = ...`` / ``setattr(obj, name, ...)`` in a module-level function
        whose parameters ``obj`` and ``name`` are."""
        function = scope.function
        if function is None or function.parent is None or function.parent.kind != "module":
            return
        if not (type(obj) is ast.Name and type(key) is ast.Name):
            return
        assert isinstance(function.node, FUNCTIONS)
        names = positional_params(function.node)
        if obj.id in names and key.id in names:
            self.setters.append((function.node.name, names.index(obj.id), names.index(key.id)))

    def _form(self, value: ast.expr) -> tuple[str, str]:
        """How the new forward is made, and the function it binds if that is a plain name."""
        if type(value) is not ast.Call:
            return "assign", ""
        args = call_args(value)
        first = args[0].value if args else None
        name = first.id if type(first) is ast.Name else ""
        ref = self.walk.names.resolve(dotted_name(value.func) or "")
        if ref in METHOD_TYPE:
            return "MethodType", name
        if ref in PARTIAL:
            return "partial", name
        if type(value.func) is ast.Attribute and value.func.attr == "__get__":
            inner = value.func.value
            return "__get__", inner.id if type(inner) is ast.Name else ""
        return "assign", ""

    @staticmethod
    def _bound_to(value: ast.expr) -> Optional[str]:
        """The object ``MethodType(f, obj)`` binds to, as written."""
        if type(value) is not ast.Call:
            return None
        args = call_args(value)
        if len(args) == 2 and all(a.keyword is None and not a.star for a in args):
            return dotted_name(args[1].value)
        return None

    def finish(self, results: dict[str, dict[str, Any]]) -> dict[str, Any]:
        fields: dict[str, Any] = {}
        if self.setters:
            fields["attr_setters"] = tuple(dict.fromkeys(self.setters))
        if not self.found:
            return fields
        walk = self.walk
        resolve = walk.names.resolve
        patches = []
        for p in self.found:
            receiver = dotted_name(p.receiver) if p.receiver is not None else None
            if p.from_attr in self.saved_attrs:  # `m.forward = m._old_forward`, saved in another function too
                p.form, p.function = "restore", f"{receiver}.{p.from_attr}"
            ref = resolve(receiver) if receiver else ""
            # at the name itself: ``forward`` in ``m.forward = f``, ``setattr`` in ``setattr(m, ...)``
            line, col = walk.attr_position(p.node) if type(p.node) is ast.Attribute else walk.position(p.node)
            function = p.scope.function
            scope = function.prefix.removesuffix(".<locals>.") if function is not None else ""
            patches.append(ForwardPatch(p.form, receiver or "", ref if ref != receiver else "", line, col,
                                        _named(p.node), scope, p.function, p.simple,
                                        p.kind, p.slot))
        fields["forward_patches"] = tuple(patches)
        return fields
