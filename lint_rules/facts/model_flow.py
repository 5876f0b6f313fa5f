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

import ast
import re
from dataclasses import dataclass, field
from typing import Any, Optional

from lint_rules import contract
from lint_rules.facts.model import COMPILE, Mark, WrapSite, WrappedCall
from lint_rules.facts.traversal import Collector, Scope
from lint_rules.facts.walk import FUNCTIONS, Arg, call_args, dotted_name, is_constant, positional_params, string_value
from lint_rules.vocabulary import (ACCELERATE_PREPARE, ACCELERATE_UNWRAP, MARK_NAME_KEYWORDS, MODULE_RETURNS_SELF,
                                   SETUP_METHODS, WRAPPER_CLASSES)

#: Texts that can set a model up, one pattern each, each starting with a literal, which the regex
#: engine finds fast (as one pattern of alternatives, ``\bDDP\b`` made it test every position: 0.77 s
#: for the 570 files of timm and lightning, against 0.06 s): ``DDP(?<=\bDDP)\b`` is ``\bDDP\b``.
_TRIGGERS = tuple(re.compile(pattern) for pattern in (
    r"\.setup(?:_module)?\s*\(", r"fully_shard\s*\(", "DistributedDataParallel", "FullyShardedDataParallel",
    r"\.prepare(?:_model)?\s*\(", r"DDP(?<=\bDDP)\b", r"FSDP(?<=\bFSDP)\b", contract.MARK_METHOD_CALL,
    contract.FSDP_REGISTER_CALL))
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
    statement: ast.stmt
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
    handlers = {ast.Assign: "on_statement", ast.AnnAssign: "on_statement", ast.Expr: "on_statement",
                ast.Call: "on_call"}

    def __init__(self, walk: Any) -> None:
        super().__init__(walk)
        self.sites: list[_Site] = []
        self.frames: dict[ast.AST, _Frame] = {}
        self.calls: list[tuple[str, ast.Attribute, int]] = []  # (text, attribute node, site)
        self.marks: list[tuple[ast.Call, str, str, str, Optional[_Value]]] = []
        # Resolved at the end: calls on self.<attr> (class node, attr, rest, method, node) and on
        # parameters (function name, position, rest, method, node); values stored on self and
        # passed to same-file functions.
        self.self_calls: list[tuple[ast.AST, str, str, str, ast.Attribute]] = []
        self.param_calls: list[tuple[str, int, str, str, ast.Attribute]] = []
        self.self_values: dict[tuple[ast.AST, str], _Value] = {}
        self.passed: list[tuple[str, int, _Value]] = []
        self.functions: set[str] = set()

    #: a text every pattern of ``_TRIGGERS`` contains: ``in`` rules most files out faster still
    triggers = (".setup", "fully_shard", "DistributedDataParallel", "FullyShardedDataParallel", ".prepare", "DDP",
                "FSDP", contract.MARK_METHOD_CALL, contract.FSDP_REGISTER_CALL)

    @classmethod
    def wanted(cls, source: str) -> bool:
        return super().wanted(source) and any(pattern.search(source) is not None for pattern in _TRIGGERS)

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
            if type(owner.node) in FUNCTIONS:
                frame.params = self._params(owner)
        return frame

    @staticmethod
    def _params(owner: Scope) -> dict[str, int]:
        node = owner.node
        assert isinstance(node, FUNCTIONS)
        names = positional_params(node)
        if owner.parent is not None and owner.parent.kind == "class" and names:
            names = names[1:]  # self
        return {name: index for index, name in enumerate(names)}

    def enter(self, node: ast.AST, scope: Scope) -> None:
        if type(node) in FUNCTIONS and scope.parent is not None and scope.parent.kind == "module":
            self.functions.add(node.name)

    # -- values ----------------------------------------------------------------------------
    def _same_object(self, expr: ast.expr) -> ast.expr:
        """The expression whose module ``expr`` stands for: through ``Module`` methods that return
        the module itself (``GPT(cfg).eval()``, ``model.to(device)``) and ``_PASS_THROUGH`` calls."""
        while type(expr) is ast.Call:
            func = expr.func
            if type(func) is ast.Attribute and func.attr in MODULE_RETURNS_SELF:
                expr = func.value
                continue
            args = call_args(expr)
            first = args[0] if args else None
            if first is not None and first.keyword is None and not first.star and \
                    self.walk.names.resolve(dotted_name(func) or "") in _PASS_THROUGH:
                expr = first.value
            else:
                break
        return expr

    def _path(self, expr: ast.expr, scope: Scope) -> Optional[str]:
        """The dotted path of the module ``expr`` stands for (``model``, ``ddp.module``), through
        ``_same_object``; ``accelerator.unwrap_model(model)`` is ``model.module``."""
        expr = self._same_object(expr)
        if type(expr) is ast.Call:
            receiver, _, last = (dotted_name(expr.func) or "").rpartition(".")
            args = call_args(expr)
            if last == ACCELERATE_UNWRAP and receiver and args and self._is_accelerator(receiver, scope):
                inner = self._path(args[0].value, scope)
                return f"{inner}.module" if inner else None
            return None
        return dotted_name(expr)

    def _value(self, expr: Optional[ast.expr], scope: Scope) -> Optional[_Value]:
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

    def _bind(self, target: ast.expr, value: Optional[_Value], scope: Scope) -> None:
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
    def on_statement(self, small: ast.stmt, scope: Scope) -> None:
        frame = self._frame(scope)
        value: Optional[ast.expr] = None
        targets: list[ast.expr] = []
        annotation: Optional[str] = None
        shape = type(small)
        if shape is ast.Assign:
            value, targets = small.value, list(small.targets)
        elif shape is ast.AnnAssign:
            value, targets = small.value, [small.target]
            annotation = dotted_name(small.annotation)
        elif shape is ast.Expr:
            value = small.value
        if value is not None:
            value = self._same_object(value)
        if type(value) is not ast.Call or self._path(value, scope) is not None:
            for target in targets:
                copied = self._value(value, scope)
                if copied is None and annotation:
                    copied = _Value("model", annotation)
                self._bind(target, copied, scope)
            return
        assert isinstance(value, ast.Call)
        func = dotted_name(value.func) or ""
        receiver, _, last = func.rpartition(".")
        positional = [self._same_object(a.value) for a in call_args(value) if a.keyword is None and not a.star]
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
            first = targets[0] if targets else None
            elements = first.elts if type(first) is ast.Tuple or type(first) is ast.List else None
            pairs = (zip([e.value if type(e) is ast.Starred else e for e in elements], positional)
                     if elements is not None else zip(targets[:1], positional[:1]))
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

    def _class_of_arg(self, arg: ast.expr, scope: Scope) -> Optional[str]:
        known = self._value(arg, scope)
        if known is not None:
            return known.cls
        return dotted_name(arg.func) if type(arg) is ast.Call else None

    def _site(self, kind: str, var: str, cls: Optional[str], scope: Scope) -> int:
        owner = self._owner(scope)
        qualname = owner.prefix.removesuffix(".<locals>.") if owner.kind == "function" else ""
        self.sites.append(_Site(kind, var, cls, self.walk.statement, qualname, self.walk.inline))
        return len(self.sites) - 1

    # -- calls -----------------------------------------------------------------------------
    def on_call(self, call: ast.Call, scope: Scope) -> None:
        func = call.func
        kind = type(func)
        if kind is ast.Name:
            resolved = self.walk.names.resolve(func.id)
            called = resolved.rpartition(".")[2]  # through import aliases (`as shim_mark_forward_method`)
            if called == contract.MARK_METHOD_CALL and (call.args or call.keywords):  # runtime_shim's function form
                args = call_args(call)
                via = "shim" if resolved.startswith(contract.DECORATOR_MODULE) else ""
                self._mark(call, args[0].value, via, args[1:], scope)
            elif called == contract.FSDP_REGISTER_CALL and (call.args or call.keywords):
                args = call_args(call)
                self._mark(call, args[0].value, "fsdp2", args[1:], scope)
            elif func.id in self.functions:
                for position, arg in enumerate(a for a in call.args if type(a) is not ast.Starred):
                    value = self._value(arg, scope)
                    if value is not None and value.kind != "model":
                        self.passed.append((func.id, position, value))
            return
        if kind is not ast.Attribute:
            return
        assert isinstance(func, ast.Attribute)
        method = func.attr
        if method == contract.MARK_METHOD_CALL:
            module = self.walk.names.dotted_ref(func.value) or ""
            if module.split(".", 1)[0] == contract.DECORATOR_MODULE and (call.args or call.keywords):
                args = call_args(call)  # runtime_shim.mark_forward_method(ddp, "name"): the function form
                self._mark(call, args[0].value, "shim", args[1:], scope)
                return
            self._mark(call, func.value, "fabric", call_args(call), scope)
            return
        if method == contract.FSDP_REGISTER_CALL and (call.args or call.keywords):
            args = call_args(call)
            self._mark(call, args[0].value, "fsdp2", args[1:], scope)
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
        if root in frame.params and root not in frame.values and type(owner.node) in FUNCTIONS:
            self.param_calls.append((owner.node.name, frame.params[root], rest, shown, func))

    def _called(self, value: _Value, receiver: str, func: ast.Attribute) -> None:
        if value.kind == "model" or value.site is None:
            return
        self.calls.append((f"{receiver}.{func.attr}", func, value.site))
        site = self.sites[value.site]
        if func.attr not in site.called:
            site.called.append(func.attr)

    def _mark(self, call: ast.Call, receiver: ast.expr, via: str, args: list[Arg], scope: Scope) -> None:
        positional = [a for a in args if a.keyword is None]
        arg = positional[0] if positional else next(
            (a for a in args if a.keyword is not None and a.keyword in MARK_NAME_KEYWORDS), None)
        if arg is None:
            return
        name = string_value(arg.value)
        if name is None and type(arg.value) is ast.Attribute:
            name = arg.value.attr
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
        if not (self.sites or self.calls or self.marks):
            return {}
        walk = self.walk
        resolve = walk.names.resolve
        sites = tuple(
            WrapSite(kind=site.kind, var=site.var, cls=resolve(site.cls) if site.cls else "",
                     line=site.statement.lineno, scope=site.qualname,
                     called=tuple(site.called),
                     inline=site.inline)
            for site in self.sites)
        calls = tuple(dict.fromkeys(
            WrappedCall(func.attr, *walk.attr_position(func), text, site)
            for text, func, site in self.calls))
        marks = tuple(
            Mark(name, *(walk.attr_position(call.func) if type(call.func) is ast.Attribute
                         else walk.position(call.func)), via, receiver,
                 resolve(value.cls) if value is not None and value.cls else "",
                 value.site if value is not None and value.site is not None and value.kind != "model" else -1)
            for call, name, via, receiver, value in self.marks)
        return {"wrap_sites": sites, "wrapped_calls": calls, "marks": marks}


def _shown(expr: ast.expr) -> Optional[str]:
    """An expression as a message shows it: names and attributes, calls with their arguments
    elided (``accelerator.unwrap_model(...)``); ``None`` for anything else."""
    kind = type(expr)
    if kind is ast.Call:
        inner = _shown(expr.func)
        return f"{inner}(...)" if inner is not None else None
    if kind is ast.Attribute:
        inner = _shown(expr.value)
        return f"{inner}.{expr.attr}" if inner is not None else None
    return expr.id if kind is ast.Name else None


def _evaluation_only(call: ast.Call) -> bool:
    """``prepare_model(model, evaluation_mode=True)`` (accelerate 1.15.0: the third parameter): the
    model is moved to its device and not wrapped, whatever the launch configuration."""
    positional = [a for a in call.args if type(a) is not ast.Starred]
    flag = next((k.value for k in call.keywords if k.arg == "evaluation_mode"),
                positional[2] if len(positional) > 2 else None)
    return flag is not None and not is_constant(flag, False)
