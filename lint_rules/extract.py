"""The one LibCST pass over a file: source text -> ``FileFacts``.

The walk reads node fields directly instead of using ``CSTVisitor``: the visitor machinery
rebuilds every node it passes and costs about as much as the parse, a field walk about 6%.
Names are resolved through the file's own imports (a small alias map, no scope analysis).
"""

from __future__ import annotations

import dataclasses
import re
from typing import Callable, Iterator, Optional, Sequence

import libcst as cst

from lint_rules import contract
from lint_rules.facts import (
    ATTR_CALL, DYNAMIC_CALL, RESULT_CALL, SELF_CALL, SUB_RESULT, SRC_ANNOTATION, SRC_ATTR, SRC_CALL, SRC_MODULE, SRC_NOT_MODULE,
    SRC_PARAM, SRC_PARAM_CALL, SRC_UNKNOWN, SUB_CALL, SUB_METHOD, SUPER_CALL,
    ClassFacts, FileFacts, Mark, MethodFacts, Source, Use,
)
from lint_rules.positions import def_positions, node_positions

# flake8's own pattern (flake8/defaults.py), so `# noqa` means exactly what it means there.
_NOQA_RE = re.compile(r"# noqa(?::[\s]?(?P<codes>([A-Z]+[0-9]+(?:[,\s]+)?)+))?", re.IGNORECASE)
# Functions that run the module or callable given as their first argument.
_RUNS_ARGUMENT = frozenset({
    "checkpoint", "checkpoint_sequential", "checkpoint_seq", "_gradient_checkpointing_func",
    "trace", "trace_module", "export", "functional_call",
})
_RUN_KEYWORDS = frozenset({"func", "fn", "function", "f", "module", "model", "mod"})
_RETURNS_SELF = frozenset({"eval", "train", "to", "cpu", "cuda", "float", "half", "double", "bfloat16",
                           "requires_grad_", "to_empty"})
_COPY_FUNCS = frozenset({"deepcopy", "weight_norm", "spectral_norm"})
_QUOTED_PRIVATE_RE = re.compile(r"""["'](_[A-Za-z]\w*)["']""")
_CALL_NAMES = frozenset({"forward", "__call__"})
_ELEMENT_METHODS = frozenset({"values", "children", "modules"})
_PAIR_METHODS = frozenset({"items", "named_children", "named_modules"})
_PASSTHROUGH_FUNCS = frozenset({"reversed", "list", "tuple", "iter", "sorted"})
_NOT_MODULE_NODES = (
    cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString, cst.ConcatenatedString,
    cst.FormattedString, cst.Lambda, cst.List, cst.Tuple, cst.Dict, cst.Set, cst.ListComp,
    cst.SetComp, cst.DictComp, cst.GeneratorExp, cst.Comparison, cst.UnaryOperation, cst.BinaryOperation,
)
_SKIP_FIELDS = ("whitespace", "lpar", "rpar", "comma", "semicolon", "colon", "lbracket", "rbracket",
                "lbrace", "rbrace", "leading_lines", "lines_after", "header", "footer", "dot", "equal",
                "star", "operator", "asynchronous", "newline", "trailing_whitespace", "first_line",
                "empty_lines", "last_line", "indent")
_FIELDS: dict[type, tuple[str, ...]] = {}
_IS_NODE: dict[type, bool] = {}
# Nodes with nothing inside that the scan cares about.
_LEAVES = frozenset({
    cst.Name, cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString, cst.Ellipsis, cst.Pass,
    cst.Break, cst.Continue, cst.Comment, cst.Newline, cst.SimpleWhitespace, cst.EmptyLine,
    cst.TrailingWhitespace, cst.ParenthesizedWhitespace, cst.Nonlocal, cst.Global,
})

# A step of an expression chain: an attribute name, or None for a subscript.
Chain = tuple[cst.BaseExpression, tuple[Optional[str], ...]]
# What iterating something yields: ("sub", attr) or a tuple of such shapes, or None.
Shape = object


def _fields(node: cst.CSTNode) -> tuple[str, ...]:
    names = _FIELDS.get(type(node))
    if names is None:
        names = tuple(f.name for f in dataclasses.fields(node) if not f.name.startswith(_SKIP_FIELDS))
        _FIELDS[type(node)] = names
    return names


def _is_node(kind: type) -> bool:
    known = _IS_NODE.get(kind)
    if known is None:
        known = _IS_NODE[kind] = issubclass(kind, cst.CSTNode)
    return known


def _children(node: cst.CSTNode) -> list[cst.CSTNode]:
    """Child nodes in reverse document order (ready to be pushed on a stack)."""
    found: list[cst.CSTNode] = []
    for name in _fields(node):
        value = getattr(node, name)
        kind = type(value)
        if kind is tuple or kind is list:
            found.extend(item for item in value if _is_node(type(item)))
        elif _is_node(kind):
            found.append(value)
    found.reverse()
    return found


def _block(suite: cst.BaseSuite) -> Sequence[cst.CSTNode]:
    return suite.body if isinstance(suite, cst.IndentedBlock) else ()


def _blocks(stmt: cst.CSTNode) -> Iterator[Sequence[cst.CSTNode]]:
    """Statement lists directly inside a compound statement (if/elif/else, try/except/finally...)."""
    for name in ("body", "orelse", "handlers", "finalbody", "cases"):
        part = getattr(stmt, name, None)
        if part is None:
            continue
        for item in part if isinstance(part, (tuple, list)) else (part,):
            if isinstance(item, cst.BaseSuite):
                yield _block(item)
            elif isinstance(item, (cst.If, cst.Else, cst.ExceptHandler, cst.ExceptStarHandler, cst.Finally,
                                   cst.MatchCase)):
                yield from _blocks(item)


def _chain(expr: cst.BaseExpression) -> Chain:
    steps: list[Optional[str]] = []
    while True:
        if isinstance(expr, cst.Attribute):
            steps.append(expr.attr.value)
            expr = expr.value
        elif isinstance(expr, cst.Subscript):
            steps.append(None)
            expr = expr.value
        else:
            return expr, tuple(reversed(steps))


def _dotted(expr: cst.BaseExpression) -> Optional[str]:
    root, steps = _chain(expr)
    if not isinstance(root, cst.Name) or None in steps:
        return None
    return ".".join((root.value, *steps))  # type: ignore[arg-type]


def _is_super(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value == "super"


def _render(root: str, steps: Sequence[Optional[str]]) -> str:
    return root + "".join("[...]" if s is None else "." + s for s in steps)


def _noqa_lines(source: str) -> tuple[tuple[int, str], ...]:
    if "noqa" not in source.lower():
        return ()
    found = []
    for number, line in enumerate(source.splitlines(), 1):
        match = _NOQA_RE.search(line)
        if match:
            found.append((number, match.group("codes") or ""))
    return tuple(found)


class _MethodScan:
    """Uses and attribute assignments of one method body (nested functions and lambdas included)."""

    def __init__(self, file: "_FileScan", self_name: Optional[str], params: dict[str, cst.Param],
                 local_prefix: str):
        self.file = file
        self.local_prefix = local_prefix  # qualname prefix of classes defined inside this body
        self.self_name = self_name
        self.params = params
        self.uses: list[tuple[cst.CSTNode, Use]] = []
        self.local_calls: list[tuple[cst.Call, str, tuple[Optional[str], ...], Callable[[str], str]]] = []
        self.bindings: dict[str, tuple[str, str]] = {}  # local -> ("sub"|"attr", attr)
        self.locals: dict[str, list[cst.BaseExpression]] = {}
        self.assigned: list[tuple[str, cst.BaseExpression]] = []  # self.<attr> = expr
        self.registered: list[str] = []
        self.returns: list[str] = []  # attributes returned as `return self.<attr>...`

    # -- walking ---------------------------------------------------------------------------
    def scan(self, node: cst.CSTNode) -> None:
        stack = [node]
        pop, push = stack.pop, stack.extend
        while stack:
            current = pop()
            kind = type(current)
            if kind in _LEAVES:
                continue
            if kind is cst.Call:
                self.on_call(current)  # type: ignore[arg-type]
            elif kind is cst.ClassDef:
                self.file.scan_class(current, self.local_prefix)  # type: ignore[arg-type]
                continue
            elif kind is cst.FunctionDef:
                self.file.def_names.append(current)  # type: ignore[arg-type]
            elif kind is cst.For or kind is cst.CompFor:
                self.bind(current.target, self.shape(current.iter))  # type: ignore[attr-defined]
            elif kind is cst.Assign:
                for target in current.targets:  # type: ignore[attr-defined]
                    self.on_assign(target.target, current.value)  # type: ignore[attr-defined]
            elif kind is cst.AnnAssign and current.value is not None:  # type: ignore[attr-defined]
                self.on_assign(current.target, current.value)  # type: ignore[attr-defined]
            elif kind is cst.Import or kind is cst.ImportFrom:
                self.file.on_import(current)
                continue
            elif kind is cst.Return and current.value is not None:  # type: ignore[attr-defined]
                root, steps = _chain(current.value)  # type: ignore[attr-defined]
                if self.is_self(root) and steps and steps[0] is not None:
                    self.returns.append(steps[0])
            push(_children(current))

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
        root, steps = _chain(value)
        if self.is_self(root) and steps and steps[0] is not None:
            if len(steps) == 1:
                return ("attr", steps[0])
            return ("sub", steps[0]) if steps[-1] is None else None
        if isinstance(root, cst.Call) and not steps:
            func = root.func
            if isinstance(func, cst.Name) and func.value == "getattr" and len(root.args) >= 2 and (
                    self.is_self(root.args[0].value) or _is_type_of(root.args[0].value, self.self_name)):
                attr = _string_value(root.args[1].value)
                return ("attr", attr) if attr else ("dynamic", "")
            inner_root, inner_steps = _chain(func)
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
        if name in (contract.MARK_METHOD_CALL, contract.FSDP_REGISTER_CALL):
            self.file.on_mark(call, name)
        elif name in ("add_module", "register_module") and isinstance(func, cst.Attribute) \
                and self.is_self(func.value) and call.args:
            attr = _string_value(call.args[0].value)
            if attr:
                self.registered.append(attr)
        elif name == "setattr" and len(call.args) == 3 and self.is_self(call.args[0].value):
            attr = _string_value(call.args[1].value)
            if attr:
                self.assigned.append((attr, call.args[2].value))
        if name in _RUNS_ARGUMENT:
            target = _run_target(call)
            if target is not None:
                self.classify_callee(call, self.unwrap_self(target), lambda text: f"{name}({text}, ...)")
        self.classify_callee(call, func, lambda text: text + "(...)")

    def classify_callee(self, call: cst.Call, func: cst.BaseExpression, show: Callable[[str], str]) -> None:
        root, steps = _chain(func)
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
        if _is_super(inner):
            if len(steps) == 1 and steps[0] is not None:
                self.add(call, Use(SUPER_CALL, steps[0], 0, show(f"super().{steps[0]}")))
            return
        func = inner.func
        if isinstance(func, cst.Name) and func.value in ("type", "getattr") and inner.args and (
                self.is_self(inner.args[0].value) or _is_type_of(inner.args[0].value, self.self_name)):
            if func.value == "type" and steps[-1:] == ("forward",):
                self.add(call, Use(SELF_CALL, "", 0, show("type(self).forward")))
            elif func.value == "getattr" and not steps and len(inner.args) >= 2:
                self.classify_getattr(call, inner, show)
            return
        root, inner_steps = _chain(func)
        if not self.is_self(root) or None in inner_steps or (steps and steps[-1] is not None
                                                             and steps[-1] not in _CALL_NAMES):
            return
        text = show(_render("self", inner_steps) + "()" + _render("", steps))
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
        attr = _string_value(inner.args[1].value)
        if attr is not None:
            self.classify_self_chain(call, (attr,), show)
        else:  # dispatch by a computed name: resolved against names quoted in the file
            self.add(call, Use(DYNAMIC_CALL, "", 0, show("getattr(self, ...)")))

    def classify_self_chain(self, call: cst.Call, steps: tuple[Optional[str], ...],
                            show: Callable[[str], str]) -> None:
        text = show(_render("self", steps))
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
        root, steps = _chain(expr)
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
            text = show(_render(name, steps))
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
                return [Source(SRC_PARAM, self.file.annotation_ref(self.params[value.value].annotation))]
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
                ref = self.file.dotted_ref(param.default) if param.default is not None else None
                return [Source(SRC_PARAM_CALL, ref or self.file.annotation_ref(param.annotation))]
            dotted = _dotted(func)
            if dotted is None:
                return [Source(SRC_UNKNOWN)]
            if dotted.rsplit(".", 1)[-1] in _COPY_FUNCS and value.args:
                return self.sources(value.args[0].value, depth + 1)
            if dotted.split(".", 1)[0] == self.self_name:
                return [Source(SRC_UNKNOWN)]
            return [Source(SRC_CALL, self.file.resolve(dotted))]
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


def _is_type_of(expr: cst.BaseExpression, name: Optional[str]) -> bool:
    """``type(self)`` or ``self.__class__``."""
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value == "type":
        return len(expr.args) == 1 and isinstance(expr.args[0].value, cst.Name) and expr.args[0].value.value == name
    return (isinstance(expr, cst.Attribute) and expr.attr.value == "__class__"
            and isinstance(expr.value, cst.Name) and expr.value.value == name)


def _string_value(expr: cst.BaseExpression) -> Optional[str]:
    if isinstance(expr, cst.SimpleString):
        value = expr.evaluated_value
        return value if isinstance(value, str) else None
    return None


class _FileScan:
    def __init__(self, source: str, module: str, is_package: bool):
        self.source = source
        self.module = module
        self.package = module if is_package else module.rpartition(".")[0]
        self.imports: dict[str, str] = {}
        self.stars: list[str] = []
        self.top_classes: set[str] = set()
        self.def_names: list[cst.FunctionDef] = []
        self.classes: list[tuple[cst.ClassDef, str, list, list, list]] = []
        self.marks: list[tuple[cst.CSTNode, str]] = []
        self.mark_text = contract.MARK_METHOD_CALL in source or contract.FSDP_REGISTER_CALL in source

    # -- names -----------------------------------------------------------------------------
    def resolve(self, dotted: str) -> str:
        head, _, rest = dotted.partition(".")
        target = self.imports.get(head)
        if target is None:
            if head in self.top_classes:
                target = f"{self.module}.{head}" if self.module else head
            else:
                return dotted
        return f"{target}.{rest}" if rest else target

    def dotted_ref(self, expr: Optional[cst.BaseExpression]) -> Optional[str]:
        if expr is None:
            return None
        dotted = _dotted(expr)
        return self.resolve(dotted) if dotted else None

    def annotation_ref(self, annotation: Optional[cst.Annotation]) -> str:
        if annotation is None:
            return ""
        expr: cst.BaseExpression = annotation.annotation
        if isinstance(expr, cst.SimpleString):  # "nn.Module | None", "Optional[Encoder]"
            names = re.findall(r"[A-Za-z_][\w.]*", _string_value(expr) or "")
            names = [n for n in names if n.rsplit(".", 1)[-1] not in ("None", "Optional", "Union")]
            return self.resolve(names[0]) if names else ""
        while True:
            if isinstance(expr, cst.BinaryOperation):  # X | None
                left = self.dotted_ref(expr.left)
                expr = expr.right if left in (None, "None") else expr.left
            elif isinstance(expr, cst.Subscript) and (_dotted(expr.value) or "").rsplit(".", 1)[-1] in (
                    "Optional", "Union") and expr.slice:
                first = expr.slice[0].slice
                expr = first.value if isinstance(first, cst.Index) else expr.value
            else:
                return self.dotted_ref(expr) or ""

    def absolute(self, module: Optional[cst.BaseExpression], dots: int) -> str:
        name = _dotted(module) if module is not None else ""
        if not dots:
            return name or ""
        parts = self.package.split(".") if self.package else []
        base = parts[: len(parts) - (dots - 1)] if dots > 1 else parts
        return ".".join([*base, name] if name else base)

    def on_import(self, node: cst.CSTNode) -> None:
        if isinstance(node, cst.Import):
            for alias in node.names:
                full = _dotted(alias.name) or ""
                if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                    self.imports[alias.asname.name.value] = full
                else:
                    head = full.split(".", 1)[0]
                    self.imports.setdefault(head, head)
        elif isinstance(node, cst.ImportFrom):
            base = self.absolute(node.module, len(node.relative))
            if isinstance(node.names, cst.ImportStar):
                self.stars.append(base)
                return
            for alias in node.names:
                name = _dotted(alias.name) or ""
                local = alias.asname.name.value if alias.asname is not None and isinstance(
                    alias.asname.name, cst.Name) else name
                self.imports[local] = f"{base}.{name}" if base else name

    def on_mark(self, call: cst.Call, func_name: str) -> None:
        args = [a for a in call.args if a.keyword is None]
        is_method = isinstance(call.func, cst.Attribute) and func_name == contract.MARK_METHOD_CALL
        arg = args[0] if is_method and args else (args[1] if len(args) > 1 else None)
        if arg is None:
            return
        value = arg.value
        name = _string_value(value)
        if name is None and isinstance(value, cst.Attribute):
            name = value.attr.value
        if name:
            self.marks.append((call, name))

    # -- structure -------------------------------------------------------------------------
    def scan_module(self, module: cst.Module) -> None:
        for stmt in module.body:
            if isinstance(stmt, cst.ClassDef):
                self.top_classes.add(stmt.name.value)
        self.scan_statements(module.body, "")

    def scan_statements(self, body: Sequence[cst.CSTNode], prefix: str) -> None:
        """Statements outside classes: only imports, classes, defs (and marks) matter, and those
        are statements, so expressions are walked only when the text has a registration call."""
        for stmt in body:
            kind = type(stmt)
            if kind is cst.ClassDef:
                self.scan_class(stmt, prefix)  # type: ignore[arg-type]
            elif kind is cst.FunctionDef:
                self.def_names.append(stmt)  # type: ignore[arg-type]
                inner = f"{prefix}{stmt.name.value}.<locals>."  # type: ignore[attr-defined]
                if self.mark_text:
                    _MethodScan(self, None, {}, inner).scan(stmt.body)  # type: ignore[attr-defined]
                else:
                    self.scan_statements(_block(stmt.body), inner)  # type: ignore[attr-defined]
            elif kind is cst.SimpleStatementLine:
                for small in stmt.body:  # type: ignore[attr-defined]
                    if isinstance(small, (cst.Import, cst.ImportFrom)):
                        self.on_import(small)
                    elif self.mark_text:
                        _MethodScan(self, None, {}, prefix).scan(small)
            else:  # if / try / with / for / while / match: their bodies hold statements
                if self.mark_text:
                    _MethodScan(self, None, {}, prefix).scan(stmt)
                else:
                    for block in _blocks(stmt):
                        self.scan_statements(block, prefix)

    def scan_class(self, node: cst.ClassDef, prefix: str) -> None:
        qualname = prefix + node.name.value
        bases = [self.resolve(d) for d in (_dotted(a.value) for a in node.bases if a.keyword is None) if d]
        methods: list = []
        attrs: list[tuple[str, list[Source]]] = []
        self.classes.append((node, qualname, bases, methods, attrs))
        body = node.body.body if isinstance(node.body, cst.IndentedBlock) else ()
        for stmt in body:
            if isinstance(stmt, cst.FunctionDef):
                self.def_names.append(stmt)
                methods.append(self.scan_method(stmt, attrs, qualname + "."))
            elif isinstance(stmt, cst.ClassDef):
                self.scan_class(stmt, qualname + ".")
            elif isinstance(stmt, cst.SimpleStatementLine):
                for small in stmt.body:
                    if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name):
                        ref = self.annotation_ref(cst.Annotation(small.annotation.annotation))
                        attrs.append((small.target.value, [Source(SRC_ANNOTATION, ref)]))
                    elif isinstance(small, (cst.Import, cst.ImportFrom)):
                        self.on_import(small)
            else:  # if/try blocks in a class body: scan for defs and marks, not as methods
                _MethodScan(self, None, {}, qualname + ".").scan(stmt)

    def scan_method(self, node: cst.FunctionDef, attrs: list, prefix: str) -> tuple:
        decorators = tuple(self.resolve(_dotted(d.decorator.func if isinstance(d.decorator, cst.Call)
                                                else d.decorator) or "?") for d in node.decorators)
        kind = "method"
        for dec in decorators:
            last = dec.rsplit(".", 1)[-1]
            if last in ("staticmethod", "classmethod"):
                kind = last
            elif last in ("property", "cached_property", "setter", "getter", "deleter"):
                kind = "property"
        params = node.params
        positional = [*params.posonly_params, *params.params]
        self_name = positional[0].name.value if positional and kind != "staticmethod" else None
        if kind == "classmethod":
            self_name = None
        all_params = [*positional, *params.kwonly_params]
        for extra in (params.star_arg, params.star_kwarg):
            if isinstance(extra, cst.Param):
                all_params.append(extra)
        by_name = {p.name.value: p for p in all_params if p.name.value != self_name}
        scan = _MethodScan(self, self_name, by_name, f"{prefix}{node.name.value}.<locals>.")
        scan.scan(node.body)
        scan.resolve_local_calls()
        for name, value in scan.assigned:
            attrs.append((name, scan.sources(value)))
        for name in scan.registered:
            attrs.append((name, [Source(SRC_MODULE)]))
        return (node, kind, decorators, scan.uses, tuple(dict.fromkeys(scan.returns)))

    # -- result ----------------------------------------------------------------------------
    def facts(self, path: str, module_node: cst.Module, locate: bool) -> FileFacts:
        defs = def_positions(self.source, [d.name.value for d in self.def_names])
        if defs is None:  # a `def` inside a string fooled the regex: locate them by codegen
            found = node_positions(module_node, [d.name for d in self.def_names], module_node)
            defs = [found[d.name] for d in self.def_names]
        def_pos = dict(zip(self.def_names, defs))
        classes = []
        for _, qualname, bases, methods, attrs in self.classes:
            method_facts = tuple(
                MethodFacts(name=fn.name.value, line=def_pos[fn][0], col=def_pos[fn][1], kind=kind,
                            decorators=decorators, uses=_located(fn, kind, uses, def_pos[fn][0], module_node)
                            if locate else tuple(use for _, use in uses),
                            returns=returns)
                for fn, kind, decorators, uses, returns in methods
            )
            merged: dict[str, list[Source]] = {}
            for name, sources in attrs:
                merged.setdefault(name, []).extend(sources)
            classes.append(ClassFacts(
                qualname=qualname, bases=tuple(bases), methods=method_facts,
                attrs=tuple((k, tuple(dict.fromkeys(v))) for k, v in merged.items()),
            ))
        imports = tuple(self.imports.items()) + tuple(("*", star) for star in self.stars)
        mark_pos = node_positions(module_node, [n for n, _ in self.marks], module_node) if self.marks else {}
        marks = tuple(Mark(name, mark_pos[node][0]) for node, name in self.marks)
        return FileFacts(path=path, module=self.module, imports=imports, classes=tuple(classes),
                         marks=marks, noqa=_noqa_lines(self.source),
                         quoted=tuple(sorted(set(_QUOTED_PRIVATE_RE.findall(self.source)))))


def _located(fn: cst.FunctionDef, kind: str, uses: list[tuple[cst.CSTNode, Use]], def_line: int,
             module: cst.Module) -> tuple[Use, ...]:
    """Give lines to the uses that can end an evidence chain: the first of each distinct use
    (a later twin is never chosen), in methods that can be reported or called. ``forward``,
    dunders and non-methods are never reported and never walked into, so they keep line 0."""
    if not uses:
        return ()
    name = fn.name.value
    if kind != "method" or name in contract.NEVER_ENTRY or contract.is_dunder(name):
        return tuple(use for _, use in uses)
    first: dict[tuple[str, str, str, str], cst.CSTNode] = {}
    for node, use in uses:
        first.setdefault((use.kind, use.name, use.method, use.text), node)
    found = node_positions(fn, [fn.name, *first.values()], module)
    offset = def_line - found[fn.name][0]
    return tuple(
        dataclasses.replace(use, line=found[node][0] + offset) if node in found else use
        for node, use in uses
    )


def extract(source: str, path: str, module: str = "", is_package: bool = False,
            locate: bool = True) -> FileFacts:
    """Parse ``source`` once and return its facts. Raises ``libcst.ParserSyntaxError``.

    ``locate=False`` leaves evidence lines at 0: for files read only to resolve names."""
    tree = cst.parse_module(source)
    scan = _FileScan(source, module, is_package)
    scan.scan_module(tree)
    return scan.facts(path, tree, locate)


def empty_facts(path: str, module: str = "") -> FileFacts:
    """Facts of a file the text prefilter ruled out (no module classes, no marks)."""
    return FileFacts(path=path, module=module, imports=(), classes=(), marks=(), parsed=False)
