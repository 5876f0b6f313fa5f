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
  those or of a parameter annotated as a module class; ``self.<attr>.to("meta")`` alone moves the
  submodule in place (``Module.to`` returns ``self``);
* a constructor called with ``device="meta"``;
* a local variable holding any of these, assigned to ``self`` later.

"meta" may be written out, or held in a variable of the method, a parameter's default or a
module-level constant. ``value`` says what was put there (a class reference, ``self``,
``self.<attr>``; ``module`` for ``to_empty``, which only modules have), so the rule can tell a
submodule from a tensor through the project view. An attribute counts as ``materialised`` if a
method of the class calls ``self.<attr>.to_empty(...)`` with another device, ``self.to_empty(...)``,
or ``load_state_dict(..., assign=True)`` on it or on ``self`` (the deliberate deferred-init
pattern); a local materialised before it is stored is not on meta any more. Templates kept out of
the module tree (``self._tpl = [Block()]``, ``object.__setattr__``) are not registrations and never
appear here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import libcst as cst

from lint_rules.facts.devices import is_meta
from lint_rules.facts.model import MetaSubmodule
from lint_rules.facts.traversal import Collector, Scope
from lint_rules.facts.walk import LEAVES, child_nodes, dotted_name, string_value
from lint_rules.vocabulary import ACCELERATE_META_CONTEXTS, ADD_SUBMODULE, DEEPCOPY, MODULE_KEEPS_DEVICE

Meta = tuple[str, str]  # (how it got on meta, as shown; what: a class reference, "self", "self.<attr>", "module")
#: ``self.<attr>.<method>(value)``: the container methods that register their argument(s) (torch 2.13
#: ``ModuleList.append/extend/insert``, ``ModuleDict.update``; ``Sequential.append``).
_CONTAINER_ADDS = frozenset({"append", "extend", "insert", "update"})


@dataclass
class _Found:
    cls: str
    attr: str
    node: cst.CSTNode
    how: str
    value: str


class MetaSubmodules(Collector):
    name = "meta_submodules"
    triggers = ("meta",)
    handlers = {cst.With: "on_with", cst.Assign: "on_assign", cst.AnnAssign: "on_assign", cst.Call: "on_call"}

    def __init__(self, walk: Any) -> None:
        super().__init__(walk)
        self.in_meta: dict[cst.CSTNode, str] = {}  # statement lines inside a meta context
        self.found: list[_Found] = []
        self.materialised: set[tuple[str, str]] = set()  # (class, attr); attr "" = the whole module
        # Names holding "meta" / torch.device("meta") (None: module level), meta contexts, locals on meta
        self.meta_names: dict[Optional[cst.CSTNode], set[str]] = {}
        self.contexts: dict[Optional[cst.CSTNode], set[str]] = {}
        self.locals: dict[tuple[cst.CSTNode, str], Meta] = {}
        self.default_meta: set[cst.CSTNode] = set()  # methods after torch.set_default_device("meta")

    def wants_expressions(self, scope: Scope) -> bool:
        return scope.method is not None

    # -- what is "meta" ------------------------------------------------------------------------
    def _key(self, scope: Scope) -> Optional[cst.CSTNode]:
        function = scope.function
        return function.node if function is not None else None

    def _is_meta(self, expr: cst.BaseExpression, scope: Scope) -> bool:
        """``"meta"``, ``torch.device("meta")``, or a name holding one (here, a default, a constant)."""
        if is_meta(expr, self.walk.names):
            return True
        if isinstance(expr, cst.Call) and self.walk.names.resolve(dotted_name(expr.func) or "") == "torch.device" \
                and expr.args:
            expr = expr.args[0].value
        return isinstance(expr, cst.Name) and any(
            expr.value in self.meta_names.get(key, ()) for key in (self._key(scope), None))

    def _meta_keyword(self, call: cst.Call, scope: Scope) -> bool:
        return any(a.keyword is not None and a.keyword.value == "device" and self._is_meta(a.value, scope)
                   for a in call.args)

    def _context(self, expr: cst.BaseExpression, scope: Scope) -> Optional[str]:
        """How a ``with`` item that builds on meta is shown, or None."""
        if not isinstance(expr, cst.Call):
            return None
        func = dotted_name(expr.func) or ""
        ref = self.walk.names.resolve(func)
        if ref == "torch.device" and expr.args and self._is_meta(expr.args[0].value, scope):
            return 'with torch.device("meta")'
        if ref.split(".", 1)[0] == "accelerate" and ref.rpartition(".")[2] in ACCELERATE_META_CONTEXTS:
            last = ref.rpartition(".")[2]
            if last == "init_empty_weights" or (expr.args and self._is_meta(expr.args[0].value, scope)):
                return f"with {last}()"
        if isinstance(expr.func, cst.Name) and any(func in self.contexts.get(key, ())
                                                   for key in (self._key(scope), None)):
            return f"with {func}() (init_empty_weights)"
        return None

    def _binds_context(self, value: cst.BaseExpression) -> bool:
        """``init_empty_weights``, or ``init_empty_weights if low_memory else nullcontext``."""
        options = [value.body, value.orelse] if isinstance(value, cst.IfExp) else [value]
        return any(self.walk.names.resolve(dotted_name(o) or "").rpartition(".")[2] == "init_empty_weights"
                   for o in options)

    # -- handlers ------------------------------------------------------------------------------
    def enter(self, node: cst.CSTNode, scope: Scope) -> None:
        if isinstance(node, cst.FunctionDef):  # parameters whose default is meta: `device="meta"`
            params = [*node.params.posonly_params, *node.params.params, *node.params.kwonly_params]
            self.meta_names[node] = {p.name.value for p in params
                                     if p.default is not None and self._is_meta(p.default, scope)}

    def on_with(self, node: cst.With, scope: Scope) -> None:
        how = next((found for found in (self._context(item.item, scope) for item in node.items) if found), None)
        if scope.method is None or how is None:
            return
        stack: list[cst.CSTNode] = [node.body]
        while stack:  # the statement lines of the block, not those of nested definitions
            current = stack.pop()
            if isinstance(current, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
                self.in_meta[current] = how
            elif not isinstance(current, (cst.FunctionDef, cst.ClassDef, cst.Lambda)) and type(current) not in LEAVES:
                stack.extend(child_nodes(current))

    def on_assign(self, node: cst.Assign | cst.AnnAssign, scope: Scope) -> None:
        if node.value is None:
            return
        targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
        key = self._key(scope)
        for target in targets:
            if isinstance(target, cst.Name):  # a name: "meta", a context factory, or a local on meta
                (self.meta_names.setdefault(key, set()).add if self._is_meta(node.value, scope)
                 else self.meta_names.setdefault(key, set()).discard)(target.value)
                if self._binds_context(node.value):
                    self.contexts.setdefault(key, set()).add(target.value)
                if scope.method is not None:
                    found = self._on_meta(node.value, scope)
                    if found is None:
                        self.locals.pop((scope.method, target.value), None)
                    else:
                        self.locals[(scope.method, target.value)] = found
                continue
            container = target.value if isinstance(target, cst.Subscript) else target
            attr = self._self_attr(container, scope)
            if attr is not None:  # self.<attr> = value, self.<attr>[key] = value
                self._register(attr, container, node.value, scope)

    def on_call(self, call: cst.Call, scope: Scope) -> None:
        func = call.func
        owner, me = scope.enclosing_class, scope.self_name
        if owner is None or me is None:
            return
        name = func.attr.value if isinstance(func, cst.Attribute) else dotted_name(func) or ""
        if self.walk.names.resolve(dotted_name(func) or "") == "torch.set_default_device" and call.args \
                and scope.method is not None:
            (self.default_meta.add if self._is_meta(call.args[0].value, scope)
             else self.default_meta.discard)(scope.method)
            return
        if name == "setattr" and len(call.args) == 3 and dotted_name(call.args[0].value) == me:
            attr = string_value(call.args[1].value)
            if attr:
                self._register(attr, call.args[1].value, call.args[2].value, scope)
            return
        if not isinstance(func, cst.Attribute):
            return
        receiver = dotted_name(func.value)
        if name in ADD_SUBMODULE and receiver == me and len(call.args) >= 2:
            attr = string_value(call.args[0].value)
            if attr:
                self._register(attr, call.args[0].value, call.args[1].value, scope)
            return
        attr = self._self_attr(func.value, scope)
        if name in _CONTAINER_ADDS and attr is not None and call.args:
            for value in _elements(call.args[-1].value, name):
                self._register(attr, func.value, value, scope)
            return
        if name == "to" and attr is not None:  # self.<attr>.to("meta"): moved in place, whatever is done with it
            self._register(attr, func.value, call, scope)
            return
        if name == "to" and isinstance(func.value, cst.Name) and scope.method is not None:
            found = self._on_meta(call, scope)  # local.to("meta") in place
            if found is not None:
                self.locals[(scope.method, func.value.value)] = (found[0], self._param_class(func.value, scope))
            return
        self._materialise(call, scope)

    def _materialise(self, call: cst.Call, scope: Scope) -> None:
        """``self[.attr].to_empty(device=<not meta>)``, ``...load_state_dict(..., assign=True)``; on
        a local: it is not on meta any more."""
        func = call.func
        assert isinstance(func, cst.Attribute)
        method = func.attr.value
        if method == "to_empty":
            if self._meta_keyword(call, scope):
                return
        elif method == "load_state_dict":
            if not any(a.keyword is not None and a.keyword.value == "assign" and isinstance(a.value, cst.Name)
                       and a.value.value == "True" for a in call.args):
                return
        else:
            return
        me, owner = scope.self_name, scope.enclosing_class
        attr = "" if dotted_name(func.value) == me else self._self_attr(func.value, scope)
        if isinstance(func.value, cst.Name) and attr is None and scope.method is not None:
            self.locals.pop((scope.method, func.value.value), None)
        elif owner is not None and attr is not None:
            self.materialised.add((owner.prefix.removesuffix("."), attr))

    # -- values --------------------------------------------------------------------------------
    def _self_attr(self, expr: cst.BaseExpression, scope: Scope) -> Optional[str]:
        """``attr`` if ``expr`` is ``self.<attr>``."""
        text = dotted_name(expr)
        me = scope.self_name
        if me is None or text is None or not text.startswith(f"{me}.") or text.count(".") != 1:
            return None
        return text.split(".", 1)[1]

    def _register(self, attr: str, node: cst.CSTNode, value: cst.BaseExpression, scope: Scope) -> None:
        owner = scope.enclosing_class
        if owner is None or scope.method is None:
            return
        found = self._on_meta(value, scope)
        if found is not None:
            where = node.attr if isinstance(node, cst.Attribute) else node
            self.found.append(_Found(owner.prefix.removesuffix("."), attr, where, *found))

    def _on_meta(self, value: cst.BaseExpression, scope: Scope) -> Optional[Meta]:
        """(how, what) if ``value`` ends up on meta."""
        names = self.walk.names
        me = scope.self_name or ""
        while (isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute)
               and value.func.attr.value in MODULE_KEEPS_DEVICE):  # X().to("meta").eval() is X on meta
            value = value.func.value
        if isinstance(value, cst.Name) and scope.method is not None:
            return self.locals.get((scope.method, value.value))
        if not isinstance(value, cst.Call):
            return None
        func = value.func
        if isinstance(func, cst.Attribute) and func.attr.value in ("to", "to_empty"):
            positional = [a.value for a in value.args if a.keyword is None]
            device = (positional[:1] if func.attr.value == "to" else []) + [
                a.value for a in value.args if a.keyword is not None and a.keyword.value == "device"]
            if not any(self._is_meta(d, scope) for d in device):
                return None
            how = f'.{func.attr.value}(device="meta")' if func.attr.value == "to_empty" else '.to("meta")'
            what = self._what(func.value, scope)
            if func.attr.value == "to_empty":
                what = what or "module"
            return (how, what) if what else None
        ref = names.resolve(dotted_name(func) or "")
        if not ref or ref.split(".", 1)[0] == me:
            return None
        if self._meta_keyword(value, scope):
            return 'device="meta"', ref
        if ref in DEEPCOPY:
            return None
        if self.walk.statement in self.in_meta:
            return self.in_meta[self.walk.statement], ref
        if scope.method in self.default_meta:
            return 'torch.set_default_device("meta")', ref
        return None

    def _what(self, expr: cst.BaseExpression, scope: Scope) -> str:
        """What ``.to(...)`` was applied to: a class built here, ``self``, ``self.<attr>``, the
        annotated class of a parameter, "" if unknown."""
        me = scope.self_name or ""
        if isinstance(expr, cst.Call) and self.walk.names.resolve(dotted_name(expr.func) or "") in DEEPCOPY:
            expr = expr.args[0].value if expr.args else expr
        if dotted_name(expr) == me:
            return "self"
        attr = self._self_attr(expr, scope)
        if attr is not None:
            return f"self.{attr}"
        if isinstance(expr, cst.Name):
            return self._param_class(expr, scope)
        if isinstance(expr, cst.Call):
            ref = self.walk.names.resolve(dotted_name(expr.func) or "")
            return ref if ref and ref.split(".", 1)[0] != me else ""
        return ""

    def _param_class(self, name: cst.Name, scope: Scope) -> str:
        """The class a parameter is annotated with (``encoder: nn.Module``), "" if none."""
        method = scope.method
        if method is None:
            return ""
        params = [*method.params.posonly_params, *method.params.params, *method.params.kwonly_params]
        for param in params:
            if param.name.value == name.value and param.annotation is not None:
                return self.walk.names.annotation_ref(param.annotation)
        return ""

    def finish(self, results: dict[str, dict[str, Any]]) -> dict[str, Any]:
        if not self.found:
            return {}
        positions = self.walk.positions([f.node for f in self.found])
        return {"meta_submodules": tuple(dict.fromkeys(
            MetaSubmodule(f.cls, f.attr, positions[f.node][0], positions[f.node][1] + _opening(f.node), f.how, f.value,
                          (f.cls, f.attr) in self.materialised or (f.cls, "") in self.materialised)
            for f in self.found))}


def _elements(value: cst.BaseExpression, method: str) -> list[cst.BaseExpression]:
    """What a container method registers: the argument (``append``, ``insert``), the elements of a
    list or tuple (``extend``), the values of a dict display (``update``)."""
    if method in ("append", "insert"):
        return [value]
    if method == "extend" and isinstance(value, (cst.List, cst.Tuple)):
        return [e.value for e in value.elements if isinstance(e, cst.Element)]
    if method == "extend" and isinstance(value, (cst.ListComp, cst.GeneratorExp)):
        return [value.elt]
    if method == "update" and isinstance(value, cst.Dict):
        return [e.value for e in value.elements if isinstance(e, cst.DictElement)]
    return []


def _opening(node: cst.CSTNode) -> int:
    """Where a name given as a string starts inside its literal (``"added"``: 1): the finding
    points at the name, as it does at ``self.<name>``."""
    if not isinstance(node, cst.SimpleString):
        return 0
    prefix = len(node.value) - len(node.value.lstrip("rbuRBUfF"))
    return prefix + len(node.quote)
