"""Collector ``model_flow``: how models are built, set up, marked and called in a file.

Follows each model variable through the statements of its scope (in order):

* built: ``model = GPT(...)``, ``GPT.from_pretrained(...)``, an annotation (``model: GPT = ...``);
  through the ``Module`` methods that return the module itself (``GPT(cfg).eval()``,
  ``model = model.to(device)``) and ``torch.compile``, whose result forwards attribute access to
  the module it compiles;
* set up (``WrapSite``): ``fabric.setup(...)`` / ``fabric.setup_module(...)`` (tuple targets such
  as ``model, opt = fabric.setup(model, opt)`` pair with the positional arguments),
  ``DistributedDataParallel(...)`` / ``FullyShardedDataParallel(...)`` (any import alias), and
  FSDP2's ``fully_shard(model)``, accelerate's ``accelerator.prepare(...)`` /
  ``prepare_model(...)`` (paired like ``fabric.setup``); ``runtime_shim``'s ``guard(DDP(model))``
  sets up like ``DDP(model)``. A receiver counts as a Fabric (an Accelerator) if its name contains
  "fabric" ("accelerator") or it was assigned ``...Fabric(...)`` (``...Accelerator(...)``);
* copied: ``net = model``, ``inner = ddp.module``, ``accelerator.unwrap_model(model)``; stored on
  ``self`` in one method (``self.model = fabric.setup(model)``) and used in another
  (``self.model.generate(...)``);
  passed to a function of the same file (``evaluate(fmodel)``, whose parameter is then followed);
* marked (``Mark``): ``model.mark_forward_method("generate")``, ``mark_forward_method(model,
  model.generate)`` (``runtime_shim``), ``register_fsdp_forward_method(model, "generate")``;
* called (``WrappedCall``): any ``<receiver>.<method>(...)`` on a set-up model, on its ``.module``,
  or on the module it wraps.

Each function body is its own scope; class bodies share their enclosing scope's names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Optional

import libcst as cst

from lint_rules import contract
from lint_rules.facts.model import COMPILE, Mark, WrapSite, WrappedCall
from lint_rules.facts.traversal import Collector, Scope
from lint_rules.facts.walk import dotted_name, string_value
from lint_rules.positions import code_line
from lint_rules.vocabulary import (ACCELERATE_PREPARE, ACCELERATE_UNWRAP, MARK_NAME_KEYWORDS, MODULE_RETURNS_SELF,
                                   SETUP_METHODS, WRAPPER_CLASSES)

_TRIGGER = re.compile(r"\.setup(?:_module)?\s*\(|fully_shard\s*\(|DistributedDataParallel|FullyShardedDataParallel"
                      r"|\.prepare(?:_model)?\s*\("
                      rf"|\bDDP\b|\bFSDP\b|{contract.MARK_METHOD_CALL}|{contract.FSDP_REGISTER_CALL}")
#: Calls whose result stands for the module they are given: ``ddp = guard(DDP(model))`` sets up like
#: ``DDP(model)``; ``torch.compile``'s ``OptimizedModule`` forwards attribute access to its module.
_PASS_THROUGH = frozenset({f"{contract.DECORATOR_MODULE}.guard", f"{contract.DECORATOR_MODULE}.api.guard", COMPILE})


@dataclass(frozen=True)
class _Value:
    """What a name holds: a model of class ``cls`` ("model"), a wrapper or set-up model
    ("wrapped"), or the module inside a wrapper ("inner"); ``site`` indexes the set-up site."""

    kind: str
    cls: Optional[str] = None
    site: Optional[int] = None


@dataclass
class _Site:
    kind: str
    var: str
    cls: Optional[str]
    statement: cst.CSTNode
    qualname: str
    inline: bool
    called: list[str] = field(default_factory=list)


@dataclass
class _Frame:
    """One function (or the module): its names and the Fabrics among them."""

    values: dict[str, _Value] = field(default_factory=dict)
    fabrics: set[str] = field(default_factory=set)
    accelerators: set[str] = field(default_factory=set)
    params: dict[str, int] = field(default_factory=dict)  # parameter -> position (self excluded)


class ModelFlow(Collector):
    name = "model_flow"
    handlers = {cst.Assign: "on_statement", cst.AnnAssign: "on_statement", cst.Expr: "on_statement",
                cst.Call: "on_call"}

    def __init__(self, walk: Any) -> None:
        super().__init__(walk)
        self.sites: list[_Site] = []
        self.frames: dict[cst.CSTNode, _Frame] = {}
        self.calls: list[tuple[str, cst.Attribute, int]] = []  # (text, attribute node, site)
        self.marks: list[tuple[cst.Call, str, str, str, Optional[_Value]]] = []
        # Resolved at the end: calls on self.<attr> (class node, attr, rest, method, node) and on
        # parameters (function name, position, rest, method, node); values stored on self and
        # passed to same-file functions.
        self.self_calls: list[tuple[cst.CSTNode, str, str, str, cst.Attribute]] = []
        self.param_calls: list[tuple[str, int, str, str, cst.Attribute]] = []
        self.self_values: dict[tuple[cst.CSTNode, str], _Value] = {}
        self.passed: list[tuple[str, int, _Value]] = []
        self.functions: set[str] = set()

    @classmethod
    def wanted(cls, source: str, resolving: bool = False) -> bool:
        return _TRIGGER.search(source) is not None

    def wants_expressions(self, scope: Scope) -> bool:
        return True

    # -- scopes ----------------------------------------------------------------------------
    @staticmethod
    def _owner(scope: Scope) -> Scope:
        current = scope
        while current.kind == "class" and current.parent is not None:
            current = current.parent
        return current

    def _frame(self, scope: Scope) -> _Frame:
        owner = self._owner(scope)
        frame = self.frames.get(owner.node)
        if frame is None:  # a function starts with the Fabrics its definer knew
            outer = self._frame(owner.parent) if owner.parent is not None else None
            frame = self.frames[owner.node] = _Frame(fabrics=set(outer.fabrics) if outer else set(),
                                                     accelerators=set(outer.accelerators) if outer else set())
            if isinstance(owner.node, cst.FunctionDef):
                frame.params = self._params(owner)
        return frame

    @staticmethod
    def _params(owner: Scope) -> dict[str, int]:
        node = owner.node
        assert isinstance(node, cst.FunctionDef)
        names = [p.name.value for p in (*node.params.posonly_params, *node.params.params)]
        if owner.parent is not None and owner.parent.kind == "class" and names:
            names = names[1:]  # self
        return {name: index for index, name in enumerate(names)}

    def enter(self, node: cst.CSTNode, scope: Scope) -> None:
        if isinstance(node, cst.FunctionDef) and scope.parent is not None and scope.parent.kind == "module":
            self.functions.add(node.name.value)

    # -- values ----------------------------------------------------------------------------
    def _same_object(self, expr: cst.BaseExpression) -> cst.BaseExpression:
        """The expression whose module ``expr`` stands for: through ``Module`` methods that return
        the module itself (``GPT(cfg).eval()``, ``model.to(device)``) and ``_PASS_THROUGH`` calls."""
        while isinstance(expr, cst.Call):
            func = expr.func
            first = expr.args[0] if expr.args else None
            if isinstance(func, cst.Attribute) and func.attr.value in MODULE_RETURNS_SELF:
                expr = func.value
            elif first is not None and first.keyword is None and not first.star and \
                    self.walk.names.resolve(dotted_name(func) or "") in _PASS_THROUGH:
                expr = first.value
            else:
                break
        return expr

    def _path(self, expr: cst.BaseExpression, scope: Scope) -> Optional[str]:
        """The dotted path of the module ``expr`` stands for (``model``, ``ddp.module``), through
        ``_same_object``; ``accelerator.unwrap_model(model)`` is ``model.module``."""
        expr = self._same_object(expr)
        if isinstance(expr, cst.Call):
            receiver, _, last = (dotted_name(expr.func) or "").rpartition(".")
            if last == ACCELERATE_UNWRAP and receiver and expr.args and self._is_accelerator(receiver, scope):
                inner = self._path(expr.args[0].value, scope)
                return f"{inner}.module" if inner else None
            return None
        return dotted_name(expr)

    def _value(self, expr: Optional[cst.BaseExpression], scope: Scope) -> Optional[_Value]:
        """The value of the module ``expr`` stands for (``_path``)."""
        text = self._path(expr, scope) if expr is not None else None
        return self._value_of(text, self._frame(scope)) if text else None

    def _is_accelerator(self, receiver: str, scope: Scope) -> bool:
        return "accelerator" in receiver.rpartition(".")[2].lower() or receiver in self._frame(scope).accelerators

    def _value_of(self, text: str, frame: _Frame) -> Optional[_Value]:
        if text in frame.values:
            return frame.values[text]
        head, _, last = text.rpartition(".")
        if last == "module" and head:
            outer = self._value_of(head, frame)
            if outer is not None and outer.kind == "wrapped":
                return _Value("inner", outer.cls, outer.site)
        return None

    def _bind(self, target: cst.BaseExpression, value: Optional[_Value], scope: Scope) -> None:
        text = dotted_name(target)
        if text is None:
            return
        frame = self._frame(scope)
        if value is None:
            frame.values.pop(text, None)
        else:
            frame.values[text] = value
        self_class = scope.enclosing_class.node if scope.enclosing_class is not None else None
        root = text.split(".", 1)[0]
        if value is not None and self_class is not None and text.count(".") == 1 and root == scope.self_name:
            self.self_values[(self_class, text.split(".", 1)[1])] = value

    # -- statements ------------------------------------------------------------------------
    def on_statement(self, small: cst.CSTNode, scope: Scope) -> None:
        frame = self._frame(scope)
        value: Optional[cst.BaseExpression] = None
        targets: list[cst.BaseExpression] = []
        annotation: Optional[str] = None
        if isinstance(small, cst.Assign):
            value, targets = small.value, [t.target for t in small.targets]
        elif isinstance(small, cst.AnnAssign):
            value, targets = small.value, [small.target]
            annotation = dotted_name(small.annotation.annotation)
        elif isinstance(small, cst.Expr):
            value = small.value
        if value is not None:
            value = self._same_object(value)
        if not isinstance(value, cst.Call) or self._path(value, scope) is not None:
            for target in targets:
                copied = self._value(value, scope)
                if copied is None and annotation:
                    copied = _Value("model", annotation)
                self._bind(target, copied, scope)
            return
        func = dotted_name(value.func) or ""
        receiver, _, last = func.rpartition(".")
        positional = [self._same_object(a.value) for a in value.args if a.keyword is None and not a.star]
        is_fabric = "fabric" in receiver.rpartition(".")[2].lower() or receiver in frame.fabrics
        kind = ("fabric" if last in SETUP_METHODS and receiver and is_fabric else
                "accelerate" if last in ACCELERATE_PREPARE and receiver and self._is_accelerator(receiver, scope)
                else "")
        if kind == "accelerate" and last == "prepare_model" and _evaluation_only(value):  # moved, not wrapped
            if targets and positional:
                cls = self._class_of_arg(positional[0], scope)
                self._bind(targets[0], self._value(positional[0], scope) or (_Value("model", cls) if cls else None),
                           scope)
            return
        if kind:  # each target pairs with the positional argument in its place
            elements = targets[0].elements if targets and isinstance(targets[0], (cst.Tuple, cst.List)) else None
            pairs = (zip([e.value for e in elements], positional) if elements is not None
                     else zip(targets[:1], positional[:1]))
            for target, arg in pairs:
                cls = self._class_of_arg(arg, scope)
                var = dotted_name(target)
                if var is not None:
                    site = self._site(kind, var, cls, scope)
                    self._bind(arg, _Value("inner", cls, site), scope)
                    self._bind(target, _Value("wrapped", cls, site), scope)
            return
        wrapper = WRAPPER_CLASSES.get(self._wrapper_name(func))
        if wrapper is not None and positional:
            cls = self._class_of_arg(positional[0], scope)
            var = dotted_name(targets[0]) if targets else None
            site = self._site(wrapper, var or "", cls, scope)
            self._bind(positional[0], _Value("inner", cls, site), scope)
            for target in targets:
                self._bind(target, _Value("wrapped", cls, site), scope)
            return
        if last == "fully_shard" and positional and dotted_name(positional[0]):
            cls = self._class_of_arg(positional[0], scope)
            site = self._site("fsdp2", dotted_name(positional[0]) or "", cls, scope)
            self._bind(positional[0], _Value("wrapped", cls, site), scope)
            for target in targets:
                self._bind(target, _Value("wrapped", cls, site), scope)
            return
        if last.endswith("Fabric"):
            frame.fabrics.update(dotted_name(t) or "" for t in targets)
        if last.endswith("Accelerator"):
            frame.accelerators.update(dotted_name(t) or "" for t in targets)
        for target in targets:
            self._bind(target, _Value("model", annotation or func) if func else None, scope)

    def _wrapper_name(self, func: str) -> str:
        """``DistributedDataParallel`` / ``FullyShardedDataParallel`` if ``func`` names torch's
        (through any import alias such as ``DDP``), else ""."""
        head, _, last = (self.walk.names.resolve(func) if func else "").rpartition(".")
        return last if last in WRAPPER_CLASSES and (head.split(".", 1)[0] == "torch" or not head) else ""

    def _class_of_arg(self, arg: cst.BaseExpression, scope: Scope) -> Optional[str]:
        known = self._value(arg, scope)
        if known is not None:
            return known.cls
        return dotted_name(arg.func) if isinstance(arg, cst.Call) else None

    def _site(self, kind: str, var: str, cls: Optional[str], scope: Scope) -> int:
        owner = self._owner(scope)
        qualname = owner.prefix.removesuffix(".<locals>.") if owner.kind == "function" else ""
        self.sites.append(_Site(kind, var, cls, self.walk.statement, qualname, self.walk.inline))
        return len(self.sites) - 1

    # -- calls -----------------------------------------------------------------------------
    def on_call(self, call: cst.Call, scope: Scope) -> None:
        func = call.func
        if isinstance(func, cst.Name):
            resolved = self.walk.names.resolve(func.value)
            called = resolved.rpartition(".")[2]  # through import aliases (`as shim_mark_forward_method`)
            if called == contract.MARK_METHOD_CALL and call.args:  # runtime_shim's function form
                via = "shim" if resolved.startswith(contract.DECORATOR_MODULE) else ""
                self._mark(call, call.args[0].value, via, call.args[1:], scope)
            elif called == contract.FSDP_REGISTER_CALL and call.args:
                self._mark(call, call.args[0].value, "fsdp2", call.args[1:], scope)
            elif func.value in self.functions:
                for position, arg in enumerate(a for a in call.args if a.keyword is None and not a.star):
                    value = self._value(arg.value, scope)
                    if value is not None and value.kind != "model":
                        self.passed.append((func.value, position, value))
            return
        if not isinstance(func, cst.Attribute):
            return
        method = func.attr.value
        if method == contract.MARK_METHOD_CALL:
            self._mark(call, func.value, "fabric", call.args, scope)
            return
        if method == contract.FSDP_REGISTER_CALL and call.args:
            self._mark(call, call.args[0].value, "fsdp2", call.args[1:], scope)
            return
        receiver = self._path(func.value, scope)
        if receiver is None:
            return
        shown = dotted_name(func.value) or _shown(func.value) or receiver  # as written
        value = self._value_of(receiver, self._frame(scope))
        if value is not None:
            self._called(value, shown, func)
            return
        root, _, rest = receiver.partition(".")
        self_class = scope.enclosing_class.node if scope.enclosing_class is not None else None
        if self_class is not None and root == scope.self_name and rest:
            attr, _, tail = rest.partition(".")
            self.self_calls.append((self_class, attr, tail, shown, func))
        owner = self._owner(scope)
        frame = self._frame(scope)
        if root in frame.params and root not in frame.values and isinstance(owner.node, cst.FunctionDef):
            self.param_calls.append((owner.node.name.value, frame.params[root], rest, shown, func))

    def _called(self, value: _Value, receiver: str, func: cst.Attribute) -> None:
        if value.kind == "model" or value.site is None:
            return
        self.calls.append((f"{receiver}.{func.attr.value}", func, value.site))
        site = self.sites[value.site]
        if func.attr.value not in site.called:
            site.called.append(func.attr.value)

    def _mark(self, call: cst.Call, receiver: cst.BaseExpression, via: str, args: Any, scope: Scope) -> None:
        positional = [a for a in args if a.keyword is None]
        arg = positional[0] if positional else next(
            (a for a in args if a.keyword is not None and a.keyword.value in MARK_NAME_KEYWORDS), None)
        if arg is None:
            return
        name = string_value(arg.value)
        if name is None and isinstance(arg.value, cst.Attribute):
            name = arg.value.attr.value
        if not name:
            return
        value = self._value(receiver, scope)
        if via == "fabric" and (value is None or value.kind != "wrapped" or value.site is None
                                or self.sites[value.site].kind != "fabric"):
            via = ""  # not a model this file set up with Fabric: whose method it is, the file does not tell
        self.marks.append((call, name, via, dotted_name(receiver) or "", value))

    # -- results ---------------------------------------------------------------------------
    def finish(self, results: dict[str, dict[str, Any]]) -> dict[str, Any]:
        for self_class, attr, tail, receiver, func in self.self_calls:
            value = self.self_values.get((self_class, attr))
            if value is not None and tail == "module" and value.kind == "wrapped":
                value = _Value("inner", value.cls, value.site)
            elif tail:
                value = None
            if value is not None:
                self._called(value, receiver, func)
        for function, position, tail, receiver, func in self.param_calls:
            for name, index, value in self.passed:
                if (name, index) == (function, position) and not tail:
                    self._called(value, receiver, func)
        mark_nodes = [call.func.attr if isinstance(call.func, cst.Attribute) else call.func for call, *_ in self.marks]
        nodes = [site.statement for site in self.sites] + [func.attr for _, func, _ in self.calls] + mark_nodes
        if not nodes:
            return {}
        positions = self.walk.positions(nodes)
        resolve = self.walk.names.resolve
        sites = tuple(
            WrapSite(kind=site.kind, var=site.var, cls=resolve(site.cls) if site.cls else "",
                     line=code_line(site.statement, positions[site.statement][0]), scope=site.qualname,
                     called=tuple(site.called),
                     inline=site.inline)
            for site in self.sites)
        calls = tuple(dict.fromkeys(
            WrappedCall(func.attr.value, positions[func.attr][0], positions[func.attr][1], text, site)
            for text, func, site in self.calls))
        marks = tuple(
            Mark(name, positions[node][0], positions[node][1], via, receiver,
                 resolve(value.cls) if value is not None and value.cls else "",
                 value.site if value is not None and value.site is not None and value.kind != "model" else -1)
            for node, (call, name, via, receiver, value) in zip(mark_nodes, self.marks))
        return {"wrap_sites": sites, "wrapped_calls": calls, "marks": marks}


def _shown(expr: cst.BaseExpression) -> Optional[str]:
    """An expression as a message shows it: names and attributes, calls with their arguments
    elided (``accelerator.unwrap_model(...)``); ``None`` for anything else."""
    if isinstance(expr, cst.Call):
        inner = _shown(expr.func)
        return f"{inner}(...)" if inner is not None else None
    if isinstance(expr, cst.Attribute):
        inner = _shown(expr.value)
        return f"{inner}.{expr.attr.value}" if inner is not None else None
    return expr.value if isinstance(expr, cst.Name) else None


def _evaluation_only(call: cst.Call) -> bool:
    """``prepare_model(model, evaluation_mode=True)`` (accelerate 1.15.0: the third parameter): the
    model is moved to its device and not wrapped, whatever the launch configuration."""
    positional = [a for a in call.args if a.keyword is None and not a.star]
    flag = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "evaluation_mode"),
                positional[2].value if len(positional) > 2 else None)
    return flag is not None and not (isinstance(flag, cst.Name) and flag.value == "False")
