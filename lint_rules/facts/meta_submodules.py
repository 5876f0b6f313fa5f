"""Collector ``meta_submodules``: submodules of ``self`` given a value on the meta device (FWD101).

In a method of a class, a module registered on ``self`` (``self.<attr> = <value>``,
``self.add_module("<attr>", <value>)``, ``register_module``, ``setattr(self, "<attr>", <value>)``,
``self.<attr>.append/extend/insert/update(...)``, ``self.<attr>[key] = <value>``) whose value is
put on meta by

* being built inside a meta context: ``with torch.device("meta"):``, accelerate's
  ``init_empty_weights()`` / ``init_on_device("meta")`` (also chosen through a variable:
  ``ctx = init_empty_weights if low_memory else nullcontext; with ctx():``), or after
  ``torch.set_default_device("meta")`` in the same method;
* ``.to("meta")``, ``.to(device="meta")``, ``.to(torch.device("meta"))`` or ``.to_empty(device="meta")``
  as its last call (after ``.eval()``, ``.requires_grad_(False)`` and other calls that return the
  module), applied to a constructor call, to ``self``, to ``self.<attr>``, to a ``copy.deepcopy`` of
  those or of a parameter (its annotated class, or ``param:<name>``); ``self.<attr>.to("meta")`` alone moves the
  submodule in place (``Module.to`` returns ``self``);
* a constructor called with ``device="meta"``;
* a local variable holding any of these, assigned to ``self`` later.

"meta" may be written out, or held in a variable of the method, a parameter's default or a
module-level constant. ``value`` says what was put there (a class reference, ``self``,
``self.<attr>``; ``module`` for ``to_empty``, which only modules have), so the rule can tell a
submodule from a tensor through the project view; ``self.<method>()`` for what a method of the
class returns (``self._empty_net = self._build_net()`` under ``torch.device("meta")``). An
attribute counts as ``materialised`` if a method of the class calls ``self.<attr>.to_empty(...)``
with another device, ``self.to_empty(...)``, or ``load_state_dict(..., assign=True)`` on it or on
``self`` (the deliberate deferred-init pattern); a local materialised before it is stored is not
on meta any more. Templates kept out of the module tree (``self._tpl = [Block()]``,
``object.__setattr__``) are not registrations and never appear here.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any, Optional

from lint_rules.facts.devices import META_TEXTS, is_meta
from lint_rules.facts.model import MetaSubmodule
from lint_rules.facts.traversal import Collector, Scope
from lint_rules.facts.walk import (DEFINITIONS, FUNCTIONS, call_args, dotted_name, is_constant, nested_statements,
                                   params, string_value)
from lint_rules.vocabulary import ACCELERATE_META_CONTEXTS, ADD_SUBMODULE, DEEPCOPY, MODULE_KEEPS_DEVICE

Meta = tuple[str, str]  # (how it got on meta, as shown; what: a class reference, "self", "self.<attr>", "module")
#: ``self.<attr>.<method>(value)``: the container methods that register their argument(s) (torch 2.13
#: ``ModuleList.append/extend/insert``, ``ModuleDict.update``; ``Sequential.append``).
_CONTAINER_ADDS = frozenset({"append", "extend", "insert", "update"})
#: What a file must spell out to put anything on meta: the device, or accelerate's context, which
#: names no device. (Substring tests: one regular expression of these costs more than the walk it saves.)
_TRIGGERS = (*META_TEXTS, *sorted(ACCELERATE_META_CONTEXTS))
#: Statements holding blocks (their simple statements are inside a ``with`` around them).
_COMPOUND = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try, ast.Match,
             *((ast.TryStar,) if hasattr(ast, "TryStar") else ()))


@dataclass
class _Found:
    cls: str
    attr: str
    node: ast.expr  # ``self.<attr>`` (the finding points at its name) or the string naming it
    how: str
    value: str


class MetaSubmodules(Collector):
    name = "meta_submodules"
    triggers = _TRIGGERS
    handlers = {ast.With: "on_with", ast.Assign: "on_assign", ast.AnnAssign: "on_assign", ast.Call: "on_call"}

    def __init__(self, walk: Any) -> None:
        super().__init__(walk)
        self.in_meta: dict[ast.stmt, str] = {}  # simple statements inside a meta context
        self.found: list[_Found] = []
        self.materialised: set[tuple[str, str]] = set()  # (class, attr); attr "" = the whole module
        # Names holding "meta" / torch.device("meta") (None: module level), meta contexts, locals on meta
        self.meta_names: dict[Optional[ast.AST], set[str]] = {}
        self.contexts: dict[Optional[ast.AST], set[str]] = {}
        self.locals: dict[tuple[ast.AST, str], Meta] = {}
        self.default_meta: set[ast.AST] = set()  # methods after torch.set_default_device("meta")

    def wants_expressions(self, scope: Scope) -> bool:
        return scope.method is not None

    # -- what is "meta" ------------------------------------------------------------------------
    def _key(self, scope: Scope) -> Optional[ast.AST]:
        function = scope.function
        return function.node if function is not None else None

    def _is_meta(self, expr: ast.expr, scope: Scope) -> bool:
        """``"meta"``, ``torch.device("meta")``, or a name holding one (here, a default, a constant)."""
        if is_meta(expr, self.walk.names):
            return True
        if type(expr) is ast.Call and self.walk.names.resolve(dotted_name(expr.func) or "") == "torch.device":
            args = call_args(expr)
            if args:
                expr = args[0].value
        return type(expr) is ast.Name and any(
            expr.id in self.meta_names.get(key, ()) for key in (self._key(scope), None))

    def _meta_keyword(self, call: ast.Call, scope: Scope) -> bool:
        return any(a.keyword == "device" and self._is_meta(a.value, scope) for a in call_args(call))

    def _context(self, expr: ast.expr, scope: Scope) -> Optional[str]:
        """How a ``with`` item that builds on meta is shown, or None."""
        if type(expr) is not ast.Call:
            return None
        func = dotted_name(expr.func) or ""
        ref = self.walk.names.resolve(func)
        args = call_args(expr)
        if ref == "torch.device" and args and self._is_meta(args[0].value, scope):
            return 'with torch.device("meta")'
        if ref.split(".", 1)[0] == "accelerate" and ref.rpartition(".")[2] in ACCELERATE_META_CONTEXTS:
            last = ref.rpartition(".")[2]
            if last == "init_empty_weights" or (args and self._is_meta(args[0].value, scope)):
                return f"with {last}()"
        if type(expr.func) is ast.Name and any(func in self.contexts.get(key, ())
                                               for key in (self._key(scope), None)):
            return f"with {func}() (init_empty_weights)"
        return None

    def _binds_context(self, value: ast.expr) -> bool:
        """``init_empty_weights``, or ``init_empty_weights if low_memory else nullcontext``."""
        options = [value.body, value.orelse] if type(value) is ast.IfExp else [value]
        return any(self.walk.names.resolve(dotted_name(o) or "").rpartition(".")[2] == "init_empty_weights"
                   for o in options)

    # -- handlers ------------------------------------------------------------------------------
    def enter(self, node: ast.AST, scope: Scope) -> None:
        if type(node) in FUNCTIONS:  # parameters whose default is meta: `device="meta"`
            self.meta_names[node] = {p.name for p in params(node)
                                     if p.default is not None and self._is_meta(p.default, scope)}

    def on_with(self, node: ast.With | ast.AsyncWith, scope: Scope) -> None:
        how = next((found for found in (self._context(item.context_expr, scope) for item in node.items) if found),
                   None)
        if scope.method is None or how is None:
            return
        stack: list[ast.stmt] = list(node.body)
        while stack:  # the simple statements of the block, not those of nested definitions
            current = stack.pop()
            kind = type(current)
            if kind in _COMPOUND:
                for body in nested_statements(current):
                    stack.extend(body)
            elif kind not in DEFINITIONS:
                self.in_meta[current] = how

    def on_assign(self, node: ast.Assign | ast.AnnAssign, scope: Scope) -> None:
        if node.value is None:
            return
        targets = node.targets if type(node) is ast.Assign else [node.target]
        key = self._key(scope)
        for target in targets:
            if type(target) is ast.Name:  # a name: "meta", a context factory, or a local on meta
                (self.meta_names.setdefault(key, set()).add if self._is_meta(node.value, scope)
                 else self.meta_names.setdefault(key, set()).discard)(target.id)
                if self._binds_context(node.value):
                    self.contexts.setdefault(key, set()).add(target.id)
                if scope.method is not None:
                    found = self._on_meta(node.value, scope)
                    if found is None:
                        self.locals.pop((scope.method, target.id), None)
                    else:
                        self.locals[(scope.method, target.id)] = found
                continue
            container = target.value if type(target) is ast.Subscript else target
            attr = self._self_attr(container, scope)
            if attr is not None:  # self.<attr> = value, self.<attr>[key] = value
                self._register(attr, container, node.value, scope)

    def on_call(self, call: ast.Call, scope: Scope) -> None:
        func = call.func
        owner, me = scope.enclosing_class, scope.self_name
        if owner is None or me is None:
            return
        is_attribute = type(func) is ast.Attribute
        name = func.attr if is_attribute else dotted_name(func) or ""
        args = call_args(call)
        if self.walk.names.resolve(dotted_name(func) or "") == "torch.set_default_device" and args \
                and scope.method is not None:
            (self.default_meta.add if self._is_meta(args[0].value, scope)
             else self.default_meta.discard)(scope.method)
            return
        if name == "setattr" and len(args) == 3 and dotted_name(args[0].value) == me:
            attr = string_value(args[1].value)
            if attr:
                self._register(attr, args[1].value, args[2].value, scope)
            return
        if not is_attribute:
            return
        receiver = dotted_name(func.value)
        if name in ADD_SUBMODULE and receiver == me and len(args) >= 2:
            attr = string_value(args[0].value)
            if attr:
                self._register(attr, args[0].value, args[1].value, scope)
            return
        attr = self._self_attr(func.value, scope)
        if name in _CONTAINER_ADDS and attr is not None and args:
            for value in _elements(args[-1].value, name):
                self._register(attr, func.value, value, scope)
            return
        if name == "to" and attr is not None:  # self.<attr>.to("meta"): moved in place, whatever is done with it
            self._register(attr, func.value, call, scope)
            return
        if name == "to" and type(func.value) is ast.Name and scope.method is not None:
            found = self._on_meta(call, scope)  # local.to("meta") in place
            if found is not None:
                local = func.value
                self.locals[(scope.method, local.id)] = (found[0], self._param_class(local, scope))
            return
        self._materialise(call, scope)

    def _materialise(self, call: ast.Call, scope: Scope) -> None:
        """``self[.attr].to_empty(device=<not meta>)``, ``...load_state_dict(..., assign=True)``; on
        a local: it is not on meta any more."""
        func = call.func
        assert isinstance(func, ast.Attribute)
        method = func.attr
        if method == "to_empty":
            if self._meta_keyword(call, scope):
                return
        elif method == "load_state_dict":
            if not any(a.keyword == "assign" and is_constant(a.value, True) for a in call_args(call)):
                return
        else:
            return
        me, owner = scope.self_name, scope.enclosing_class
        attr = "" if dotted_name(func.value) == me else self._self_attr(func.value, scope)
        if type(func.value) is ast.Name and attr is None and scope.method is not None:
            self.locals.pop((scope.method, func.value.id), None)
        elif owner is not None and attr is not None:
            self.materialised.add((owner.prefix.removesuffix("."), attr))

    # -- values --------------------------------------------------------------------------------
    def _self_attr(self, expr: ast.expr, scope: Scope) -> Optional[str]:
        """``attr`` if ``expr`` is ``self.<attr>``."""
        text = dotted_name(expr)
        me = scope.self_name
        if me is None or text is None or not text.startswith(f"{me}.") or text.count(".") != 1:
            return None
        return text.split(".", 1)[1]

    def _register(self, attr: str, node: ast.expr, value: ast.expr, scope: Scope) -> None:
        owner = scope.enclosing_class
        if owner is None or scope.method is None:
            return
        found = self._on_meta(value, scope)
        if found is not None:
            self.found.append(_Found(owner.prefix.removesuffix("."), attr, node, *found))

    def _on_meta(self, value: ast.expr, scope: Scope) -> Optional[Meta]:
        """(how, what) if ``value`` ends up on meta."""
        names = self.walk.names
        me = scope.self_name or ""
        while (type(value) is ast.Call and type(value.func) is ast.Attribute
               and value.func.attr in MODULE_KEEPS_DEVICE):  # X().to("meta").eval() is X on meta
            value = value.func.value
        if type(value) is ast.Name and scope.method is not None:
            return self.locals.get((scope.method, value.id))
        if type(value) is not ast.Call:
            return None
        func = value.func
        if type(func) is ast.Attribute and func.attr in ("to", "to_empty"):
            args = call_args(value)
            positional = [a.value for a in args if a.keyword is None]
            device = (positional[:1] if func.attr == "to" else []) + [
                a.value for a in args if a.keyword == "device"]
            if not any(self._is_meta(d, scope) for d in device):
                return None
            how = f'.{func.attr}(device="meta")' if func.attr == "to_empty" else '.to("meta")'
            what = self._what(func.value, scope)
            if func.attr == "to_empty":
                what = what or "module"
            return (how, what) if what else None
        ref = names.resolve(dotted_name(func) or "")
        if ref.split(".", 1)[0] == me and ref.count(".") == 1:  # self._build(...): what the method builds
            ref = f"{ref.replace(me, 'self', 1)}()"
        elif not ref or ref.split(".", 1)[0] == me:
            return None
        if self._meta_keyword(value, scope):
            return 'device="meta"', ref
        if ref in DEEPCOPY:
            return None
        statement = self.walk.statement
        if statement in self.in_meta:
            return self.in_meta[statement], ref
        if scope.method in self.default_meta:
            return 'torch.set_default_device("meta")', ref
        return None

    def _what(self, expr: ast.expr, scope: Scope) -> str:
        """What ``.to(...)`` was applied to: a class built here, ``self``, ``self.<attr>``, the
        annotated class of a parameter, "" if unknown."""
        me = scope.self_name or ""
        if type(expr) is ast.Call and self.walk.names.resolve(dotted_name(expr.func) or "") in DEEPCOPY:
            args = call_args(expr)
            expr = args[0].value if args else expr
        if dotted_name(expr) == me:
            return "self"
        attr = self._self_attr(expr, scope)
        if attr is not None:
            return f"self.{attr}"
        if type(expr) is ast.Name:
            return self._param_class(expr, scope)
        if type(expr) is ast.Call:
            ref = self.walk.names.resolve(dotted_name(expr.func) or "")
            return ref if ref and ref.split(".", 1)[0] != me else ""
        return ""

    def _param_class(self, name: ast.Name, scope: Scope) -> str:
        """The class a parameter is annotated with (``encoder: nn.Module``), ``param:<name>`` if it
        has none (the rule asks what the project passes there), "" if it is no parameter."""
        method = scope.method
        if method is None:
            return ""
        for param in params(method):
            if param.name == name.id:
                annotated = param.annotation is not None
                return self.walk.names.annotation_ref(param.annotation) if annotated else f"param:{name.id}"
        return ""

    def _position(self, node: ast.expr) -> tuple[int, int]:
        """Where the attribute's name starts: in ``self.<name>``, or inside the string literal naming it."""
        if type(node) is ast.Attribute:
            return self.walk.attr_position(node)
        line, col = self.walk.position(node)
        return line, col + _opening(self.walk.lines[line - 1], col)

    def finish(self, results: dict[str, dict[str, Any]]) -> dict[str, Any]:
        if not self.found:
            return {}
        return {"meta_submodules": tuple(dict.fromkeys(
            MetaSubmodule(f.cls, f.attr, *self._position(f.node), f.how, f.value,
                          (f.cls, f.attr) in self.materialised or (f.cls, "") in self.materialised)
            for f in self.found))}


def _elements(value: ast.expr, method: str) -> list[ast.expr]:
    """What a container method registers: the argument (``append``, ``insert``), the elements of a
    list or tuple (``extend``), the values of a dict display (``update``)."""
    if method in ("append", "insert"):
        return [value]
    kind = type(value)
    if method == "extend" and (kind is ast.List or kind is ast.Tuple):
        return [e for e in value.elts if type(e) is not ast.Starred]
    if method == "extend" and (kind is ast.ListComp or kind is ast.GeneratorExp):
        return [value.elt]
    if method == "update" and kind is ast.Dict:
        return [v for k, v in zip(value.keys, value.values) if k is not None]
    return []


def _opening(text: str, col: int) -> int:
    """Where a name given as a string starts inside its literal (``"added"``: 1), the literal
    starting at ``col`` of ``text``: the finding points at the name, as it does at ``self.<name>``."""
    rest = text[col:]
    quotes = rest.lstrip("rbuRBUfF")
    prefix = len(rest) - len(quotes)
    return prefix + (3 if quotes[:3] in ('"""', "'''") else 1)
