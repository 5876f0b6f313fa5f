"""Collector ``entry_uses``: what each method body does that may be module computation.

Per method (nested functions, lambdas and comprehensions included): the uses (``self(...)``,
``self.enc(x)``, ``self.vae.encode(x)``, ``helper(self)``...), local aliases of submodules, what is
assigned to ``self.<attr>``, and which attributes it returns. Module-level functions that a method
passes ``self`` to are read afterwards with that parameter standing for ``self`` (delegates).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Optional

import libcst as cst

from lint_rules import contract
from lint_rules.facts.model import (
    ATTR_CALL, DELEGATE_CALL, DYNAMIC_CALL, RESULT_CALL, SELF_CALL, SRC_ATTR, SRC_CALL, SRC_MODULE, SRC_NOT_MODULE,
    SRC_PARAM, SRC_PARAM_CALL, SRC_UNKNOWN, SUB_CALL, SUB_METHOD, SUB_RESULT, SUPER_CALL, MethodFacts, Source, Use,
)
from lint_rules.facts.names import Names
from lint_rules.facts.traversal import Collector, FileWalk, Scope
from lint_rules.facts.walk import dotted_name, is_super_call, is_type_of, render_chain, split_chain, string_value

# Functions that run the module or callable given as their first argument.
_RUNS_ARGUMENT = frozenset({
    "checkpoint", "checkpoint_sequential", "checkpoint_seq", "_gradient_checkpointing_func",
    "trace", "trace_module", "export", "functional_call",
})
_RUN_KEYWORDS = frozenset({"func", "fn", "function", "f", "module", "model", "mod"})
_RETURNS_SELF = frozenset({"eval", "train", "to", "cpu", "cuda", "float", "half", "double", "bfloat16",
                           "requires_grad_", "to_empty"})
_COPY_FUNCS = frozenset({"deepcopy", "weight_norm", "spectral_norm"})
_CALL_NAMES = frozenset({"forward", "__call__"})
_ELEMENT_METHODS = frozenset({"values", "children", "modules"})
_PAIR_METHODS = frozenset({"items", "named_children", "named_modules"})
_PASSTHROUGH_FUNCS = frozenset({"reversed", "list", "tuple", "iter", "sorted"})
_NOT_MODULE_NODES = (
    cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString, cst.ConcatenatedString,
    cst.FormattedString, cst.Lambda, cst.List, cst.Tuple, cst.Dict, cst.Set, cst.ListComp,
    cst.SetComp, cst.DictComp, cst.GeneratorExp, cst.Comparison, cst.UnaryOperation, cst.BinaryOperation,
)
# What iterating something yields: ("sub", attr), ("self", ""), a tuple of shapes, or None.
Shape = object


class MethodScan:
    """Uses and attribute assignments of one method body (its nested functions included)."""

    def __init__(self, names: Names, self_name: Optional[str], params: dict[str, cst.Param]):
        self.names = names
        self.self_name = self_name
        self.params = params
        self.uses: list[tuple[cst.CSTNode, Use]] = []
        self.local_calls: list[tuple[cst.Call, str, tuple[Optional[str], ...], Callable[[str], str]]] = []
        # local name -> ("attr"|"sub"|"self"|"result"|"dynamic", attribute or getter name)
        self.bindings: dict[str, tuple[str, str]] = {}
        self.locals: dict[str, list[cst.BaseExpression]] = {}
        self.assigned: list[tuple[str, Optional[cst.BaseExpression]]] = []  # self.<attr> = expr
        self.registered: list[str] = []
        self.returns: list[str] = []  # attributes returned as `return self.<attr>...`

    @classmethod
    def for_function(cls, names: Names, node: cst.FunctionDef, kind: str, self_position: int = 0) -> "MethodScan":
        params = node.params
        positional = [*params.posonly_params, *params.params]
        self_name = None
        if kind not in ("staticmethod", "classmethod") and self_position < len(positional):
            self_name = positional[self_position].name.value
        all_params = [*positional, *params.kwonly_params]
        for extra in (params.star_arg, params.star_kwarg):
            if isinstance(extra, cst.Param):
                all_params.append(extra)
        return cls(names, self_name, {p.name.value: p for p in all_params if p.name.value != self_name})

    # -- events from the walk ----------------------------------------------------------------
    def on_for(self, node: cst.For | cst.CompFor) -> None:
        self.bind(node.target, self.shape(node.iter))

    def on_assign_stmt(self, node: cst.Assign) -> None:
        for target in node.targets:
            self.on_assign(target.target, node.value)

    def on_ann_assign(self, node: cst.AnnAssign) -> None:
        if node.value is not None:
            self.on_assign(node.target, node.value)

    def on_return(self, node: cst.Return) -> None:
        if node.value is not None:
            root, steps = split_chain(node.value)
            if self.is_self(root) and steps and steps[0] is not None:
                self.returns.append(steps[0])

    def on_assign(self, target: cst.BaseExpression, value: Optional[cst.BaseExpression]) -> None:
        """``value`` None: assigned something the file does not spell out (tuple unpacking)."""
        if isinstance(target, (cst.Tuple, cst.List)):
            values = value.elements if isinstance(value, (cst.Tuple, cst.List)) else None
            for i, element in enumerate(target.elements):
                paired = values is not None and i < len(values) and not isinstance(element, cst.StarredElement)
                self.on_assign(element.value, values[i].value if paired else None)  # type: ignore[index]
            return
        if isinstance(target, cst.Name) and value is not None:
            self.locals.setdefault(target.value, []).append(value)
            binding = self.binding_of(value)
            if binding is not None:
                self.bindings[target.value] = binding
        elif isinstance(target, cst.Attribute) and self.is_self(target.value):
            self.assigned.append((target.attr.value, value))

    def binding_of(self, value: cst.BaseExpression) -> Optional[tuple[str, str]]:
        """What a local name assigned ``value`` stands for, when it is a piece of self."""
        root, steps = split_chain(value)
        if self.is_self(root) and steps and steps[0] is not None:
            if len(steps) == 1:
                return ("attr", steps[0])
            return ("sub", steps[0]) if steps[-1] is None else None
        if isinstance(root, cst.Call) and not steps:
            func = root.func
            if isinstance(func, cst.Name) and func.value == "getattr" and len(root.args) >= 2 and (
                    self.is_self(root.args[0].value) or is_type_of(root.args[0].value, self.self_name)):
                attr = string_value(root.args[1].value)
                return ("attr", attr) if attr else ("dynamic", "")
            inner_root, inner_steps = split_chain(func)
            if self.is_self(inner_root) and len(inner_steps) == 1 and inner_steps[0]:
                return ("result", inner_steps[0])
        return None

    # -- calls -----------------------------------------------------------------------------
    def is_self(self, expr: cst.BaseExpression) -> bool:
        return self.self_name is not None and isinstance(expr, cst.Name) and expr.value == self.self_name

    def on_call(self, call: cst.Call) -> None:
        func = call.func
        name = func.attr.value if isinstance(func, cst.Attribute) else (
            func.value if isinstance(func, cst.Name) else "")
        if name in ("add_module", "register_module") and isinstance(func, cst.Attribute) \
                and self.is_self(func.value) and call.args:
            attr = string_value(call.args[0].value)
            if attr:
                self.registered.append(attr)
        elif name == "setattr" and len(call.args) == 3 and self.is_self(call.args[0].value):
            attr = string_value(call.args[1].value)
            if attr:
                self.assigned.append((attr, call.args[2].value))
        if name in _RUNS_ARGUMENT:
            target = _run_target(call)
            if target is not None:
                self.classify_callee(call, self.unwrap_self(target), lambda text: f"{name}({text}, ...)")
        self.classify_callee(call, func, lambda text: text + "(...)")
        if isinstance(func, cst.Name) and func.value not in self.params and func.value not in self.bindings:
            for position, arg in enumerate(call.args):
                if arg.keyword is not None or arg.star:
                    break
                if self.is_self(arg.value):
                    self.add(call, Use(DELEGATE_CALL, func.value, 0, f"{func.value}(self, ...)", str(position)))
                    break

    def classify_callee(self, call: cst.Call, func: cst.BaseExpression, show: Callable[[str], str]) -> None:
        root, steps = split_chain(func)
        if isinstance(root, cst.Call):
            self.classify_call_result(call, root, steps, show)
            return
        if not isinstance(root, cst.Name):
            return
        if self.is_self(root):
            self.classify_self_chain(call, steps, show)
        elif steps == ("forward",) and call.func is func and call.args and self.is_self(call.args[0].value):
            self.add(call, Use(SELF_CALL, "", 0, show(f"{root.value}.forward") + " with self"))
        elif not steps or None in steps or steps[-1] in _CALL_NAMES:
            self.local_calls.append((call, root.value, steps, show))

    def classify_call_result(self, call: cst.Call, inner: cst.Call, steps: tuple[Optional[str], ...],
                             show: Callable[[str], str]) -> None:
        """``super().forward(...)``, ``type(self).forward(self)``, ``self.get_encoder()(...)``,
        ``getattr(self, name)(...)``."""
        if is_super_call(inner):
            if len(steps) == 1 and steps[0] is not None:
                self.add(call, Use(SUPER_CALL, steps[0], 0, show(f"super().{steps[0]}")))
            return
        func = inner.func
        if isinstance(func, cst.Name) and func.value in ("type", "getattr") and inner.args and (
                self.is_self(inner.args[0].value) or is_type_of(inner.args[0].value, self.self_name)):
            if func.value == "type" and steps[-1:] == ("forward",):
                self.add(call, Use(SELF_CALL, "", 0, show("type(self).forward")))
            elif func.value == "getattr" and not steps and len(inner.args) >= 2:
                self.classify_getattr(call, inner, show)
            return
        root, inner_steps = split_chain(func)
        if not self.is_self(root) or None in inner_steps or (steps and steps[-1] is not None
                                                             and steps[-1] not in _CALL_NAMES):
            return
        text = show(render_chain("self", inner_steps) + "()" + render_chain("", steps))
        if len(inner_steps) == 1:
            self.add(call, Use(RESULT_CALL, inner_steps[0], 0, text))  # type: ignore[arg-type]
        elif len(inner_steps) == 2:
            self.add(call, Use(SUB_RESULT, inner_steps[0], 0, text, method=inner_steps[1]))  # type: ignore[arg-type]

    def unwrap_self(self, expr: cst.BaseExpression) -> cst.BaseExpression:
        """``self.eval()`` and friends return ``self``: ``trace(self.eval(), x)`` runs self."""
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) \
                and self.is_self(expr.func.value) and expr.func.attr.value in _RETURNS_SELF:
            return expr.func.value
        return expr

    def classify_getattr(self, call: cst.Call, inner: cst.Call, show: Callable[[str], str]) -> None:
        attr = string_value(inner.args[1].value)
        if attr is not None:
            self.classify_self_chain(call, (attr,), show)
        else:  # dispatch by a computed name: resolved against names quoted in the file
            self.add(call, Use(DYNAMIC_CALL, "", 0, show("getattr(self, ...)")))

    def classify_self_chain(self, call: cst.Call, steps: tuple[Optional[str], ...],
                            show: Callable[[str], str]) -> None:
        text = show(render_chain("self", steps))
        if not steps or steps in (("forward",), ("__call__",)) or steps[0] is None:
            self.add(call, Use(SELF_CALL, "", 0, text))
        elif len(steps) == 1:
            self.add(call, Use(ATTR_CALL, steps[0], 0, text))
        elif steps[-1] is None or steps[-1] in _CALL_NAMES:
            self.add(call, Use(SUB_CALL, steps[0], 0, text))
        elif len(steps) == 2:
            self.add(call, Use(SUB_METHOD, steps[0], 0, text, method=steps[1]))  # type: ignore[arg-type]

    def add(self, node: cst.CSTNode, use: Use) -> None:
        self.uses.append((node, use))

    # -- local names: loop variables and aliases of submodules -----------------------------
    def shape(self, expr: cst.BaseExpression) -> Shape:
        if isinstance(expr, cst.Call):
            func = expr.func
            args = [a.value for a in expr.args]
            if isinstance(func, cst.Name):
                if func.value == "enumerate" and args:
                    return (None, self.shape(args[0]))
                if func.value == "zip":
                    return tuple(self.shape(a) for a in args)
                if func.value in _PASSTHROUGH_FUNCS and args:
                    return self.shape(args[0])
            if isinstance(func, cst.Attribute):
                inner = self.shape(func.value)
                if func.attr.value in _ELEMENT_METHODS:
                    return inner
                if func.attr.value in _PAIR_METHODS and inner is not None:
                    return (None, inner)
            return None
        root, steps = split_chain(expr)
        if self.is_self(root) and not steps:
            return ("self", "")
        if self.is_self(root) and steps and steps[0] is not None and all(s is None for s in steps[1:]):
            return ("sub", steps[0])
        if isinstance(root, cst.Name) and not steps and root.value in self.bindings:
            return ("sub", self.bindings[root.value][1])
        return None

    def bind(self, target: cst.BaseExpression, shape: Shape) -> None:
        if shape is None:
            return
        leaf = isinstance(shape, tuple) and shape[:1] in (("sub",), ("self",))
        if isinstance(target, cst.Name) and leaf:
            self.bindings[target.value] = shape  # type: ignore[assignment]
        elif isinstance(target, (cst.Tuple, cst.List)) and isinstance(shape, tuple) and not leaf:
            for element, inner in zip(target.elements, shape):
                self.bind(element.value, inner)

    def resolve_local_calls(self) -> None:
        for call, name, steps, show in self.local_calls:
            binding = self.bindings.get(name)
            if binding is None:
                continue
            kind, attr = binding
            text = show(render_chain(name, steps))
            direct = not steps
            if kind == "attr" and direct:
                self.add(call, Use(ATTR_CALL, attr, 0, f"{text} with {name} = self.{attr}"))
            elif kind in ("attr", "sub"):
                self.add(call, Use(SUB_CALL, attr, 0, f"{text} with {name} from self.{attr}"))
            elif kind == "self":
                self.add(call, Use(SELF_CALL, "", 0, f"{text} with {name} a child of self"))
            elif kind == "result" and direct:
                self.add(call, Use(RESULT_CALL, attr, 0, f"{text} with {name} = self.{attr}()"))
            elif kind == "dynamic" and direct:
                self.add(call, Use(DYNAMIC_CALL, "", 0, f"{text} with {name} = getattr(self, ...)"))

    # -- attribute sources -----------------------------------------------------------------
    def sources(self, value: Optional[cst.BaseExpression], depth: int = 0) -> list[Source]:
        if value is None or depth > 4:
            return [Source(SRC_UNKNOWN)]
        if isinstance(value, cst.Name):
            if value.value == "None":
                return []
            if value.value in ("True", "False"):
                return [Source(SRC_NOT_MODULE)]
            if value.value in self.params:
                return [Source(SRC_PARAM, self.names.annotation_ref(self.params[value.value].annotation))]
            if value.value in self.locals:
                return [s for v in self.locals[value.value] for s in self.sources(v, depth + 1)]
            return [Source(SRC_UNKNOWN)]
        if isinstance(value, _NOT_MODULE_NODES):
            return [Source(SRC_NOT_MODULE)]
        if isinstance(value, cst.IfExp):
            return self.sources(value.body, depth + 1) + self.sources(value.orelse, depth + 1)
        if isinstance(value, cst.BooleanOperation):
            return self.sources(value.left, depth + 1) + self.sources(value.right, depth + 1)
        if isinstance(value, cst.Attribute) and self.is_self(value.value):
            return [Source(SRC_ATTR, value.attr.value)]
        if isinstance(value, cst.Call):
            func = value.func
            if isinstance(func, cst.Name) and func.value in self.params:
                param = self.params[func.value]
                ref = self.names.dotted_ref(param.default) if param.default is not None else None
                return [Source(SRC_PARAM_CALL, ref or self.names.annotation_ref(param.annotation))]
            dotted = dotted_name(func)
            if dotted is None:
                return [Source(SRC_UNKNOWN)]
            if dotted.rsplit(".", 1)[-1] in _COPY_FUNCS and value.args:
                return self.sources(value.args[0].value, depth + 1)
            if dotted.split(".", 1)[0] == self.self_name:
                return [Source(SRC_UNKNOWN)]
            return [Source(SRC_CALL, self.names.resolve(dotted))]
        return [Source(SRC_UNKNOWN)]


def _run_target(call: cst.Call) -> Optional[cst.BaseExpression]:
    """The module or callable a checkpoint/trace/export call runs: first positional argument or
    a keyword such as ``func=``/``module=``."""
    for arg in call.args:
        if arg.keyword is None and not arg.star:
            return arg.value
        if arg.keyword is not None and arg.keyword.value in _RUN_KEYWORDS:
            return arg.value
    return None


@dataclasses.dataclass(frozen=True)
class MethodBody:
    """What ``entry_uses`` found in one method, for ``classes`` to put into ``MethodFacts``."""

    kind: str
    uses: tuple[Use, ...]
    returns: tuple[str, ...]
    attrs: tuple[tuple[str, tuple[Source, ...]], ...]  # self.<attr> -> what this method assigns
    generator: bool = False


_PROPERTY_DECORATORS = frozenset({"property", "cached_property", "setter", "getter", "deleter"})


def method_kind(decorators: tuple[str, ...]) -> str:
    """"method", "staticmethod", "classmethod" or "property", from the resolved decorators."""
    kind = "method"
    for dec in decorators:
        last = dec.rsplit(".", 1)[-1]
        if last in ("staticmethod", "classmethod"):
            kind = last
        elif last in _PROPERTY_DECORATORS:
            kind = "property"
    return kind


def _relay(name: str) -> Callable[["EntryUses", Any, Scope], None]:
    """A handler that hands the node to the scan of the method it is in (if any)."""

    def handler(self: "EntryUses", node: Any, scope: Scope) -> None:
        scan = self._scan(scope)
        if scan is not None:
            getattr(scan, name)(node)

    handler.__name__ = name
    return handler


class EntryUses(Collector):
    name = "entry_uses"
    triggers = ("class",)
    handlers = {cst.Call: "on_call", cst.For: "on_for", cst.CompFor: "on_for", cst.Assign: "on_assign",
                cst.AnnAssign: "on_ann_assign", cst.Return: "on_return", cst.Yield: "on_yield"}

    def __init__(self, walk: FileWalk) -> None:
        super().__init__(walk)
        self.scans: dict[cst.FunctionDef, tuple[str, MethodScan]] = {}  # method -> (kind, its scan)
        self.functions: dict[str, cst.FunctionDef] = {}  # module-level functions
        self.current: Optional[MethodScan] = None  # set while a delegate is read a second time
        self.generators: set[cst.FunctionDef] = set()  # methods whose own body yields

    def wants_expressions(self, scope: Scope) -> bool:
        return scope.method is not None

    def enter(self, node: cst.CSTNode, scope: Scope) -> None:
        if scope.kind != "function" or scope.parent is None:
            return
        assert isinstance(node, cst.FunctionDef)
        if scope.parent.kind == "class":
            kind = method_kind(self.walk.names.decorators(node))
            self.scans[node] = (kind, MethodScan.for_function(self.walk.names, node, kind))
        elif scope.parent.kind == "module":
            self.functions[node.name.value] = node

    def _scan(self, scope: Scope) -> Optional[MethodScan]:
        if self.current is not None:
            return self.current
        return self.scans[scope.method][1] if scope.method is not None else None

    on_call = _relay("on_call")
    on_for = _relay("on_for")
    on_assign = _relay("on_assign_stmt")
    on_ann_assign = _relay("on_ann_assign")
    on_return = _relay("on_return")

    def on_yield(self, node: cst.Yield, scope: Scope) -> None:
        if self.current is None and scope.method is not None and scope.node is scope.method:
            self.generators.add(scope.method)

    def finish(self, results: dict[str, dict[str, Any]]) -> dict[str, Any]:
        bodies: dict[cst.FunctionDef, MethodBody] = {}
        for node, (kind, scan) in self.scans.items():
            bodies[node] = self._body(node, kind, scan)
        return {"_bodies": bodies, "delegates": self._delegates(bodies)}

    def _body(self, node: cst.FunctionDef, kind: str, scan: MethodScan) -> MethodBody:
        scan.resolve_local_calls()
        attrs = [(name, tuple(scan.sources(value))) for name, value in scan.assigned]
        attrs.extend((name, (Source(SRC_MODULE),)) for name in scan.registered)
        return MethodBody(kind, self._located(node, kind, scan.uses), tuple(dict.fromkeys(scan.returns)),
                          tuple(attrs), node in self.generators)

    def _delegates(self, bodies: dict[cst.FunctionDef, MethodBody]) -> tuple[tuple[int, MethodFacts], ...]:
        """Read the module-level functions that methods pass ``self`` to, with that parameter
        standing for self (SpeechT5's ``generate`` is ``return _generate_speech(self, ...)``)."""
        wanted = {(use.name, int(use.method)) for body in bodies.values() for use in body.uses
                  if use.kind == DELEGATE_CALL}
        found = []
        for name, position in sorted(wanted):
            fn = self.functions.get(name)
            if fn is None or position >= len([*fn.params.posonly_params, *fn.params.params]):
                continue
            scan = self.current = MethodScan.for_function(self.walk.names, fn, "method", position)
            try:
                self.walk.expressions([fn.body], Scope("function", fn, None, ""), only=self)
            finally:
                self.current = None
            scan.resolve_local_calls()
            line, col = self.walk.def_position(fn)
            kind = f"delegate:{position}"  # distinct per position: analysed once per self parameter
            found.append((position, MethodFacts(name, line, col, kind, (), self._located(fn, "method", scan.uses))))
        return tuple(found)

    def _located(self, fn: cst.FunctionDef, kind: str, uses: list[tuple[cst.CSTNode, Use]]) -> tuple[Use, ...]:
        """Give lines to the uses that can end an evidence chain: the first of each distinct use
        (a later twin is never chosen), in methods that can be reported or called. ``forward``,
        dunders and non-methods are never reported and never walked into, so they keep line 0,
        as do all uses of files read only to resolve names."""
        name = fn.name.value
        if not uses or not self.walk.locate or kind != "method" or name in contract.NEVER_ENTRY \
                or contract.is_dunder(name):
            return tuple(use for _, use in uses)
        first: dict[tuple[str, str, str, str], cst.CSTNode] = {}
        for node, use in uses:
            first.setdefault((use.kind, use.name, use.method, use.text), node)
        found = self.walk.positions([fn.name, *first.values()], root=fn)
        offset = self.walk.def_position(fn)[0] - found[fn.name][0]
        return tuple(
            dataclasses.replace(use, line=found[node][0] + offset) if node in found else use
            for node, use in uses
        )
