"""Collector ``classes``: the classes of a file, their bases, methods and attributes.

Bases and decorators are resolved through the file's imports (``Names``). A function defined
anywhere in a class body (also under ``if``/``try``) is a method. An attribute's sources are the
class-level annotations (``enc: nn.Module``) and what methods assign to ``self.<attr>``
(``entry_uses``). A function assigned in a class body (``decode = decode_function``) is a method of
kind ``alias`` that hands self to the function. Nested classes are classes too, named
``Outer.Inner`` or ``f.<locals>.Inner``.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any


from lint_rules.facts.entry_uses import MethodBody, method_kind
from lint_rules.facts.model import PASS_CALL, READ, SRC_ANNOTATION, ClassFacts, Guard, MethodFacts, Source, Use
from lint_rules.facts.traversal import Collector, Scope
from lint_rules.facts.walk import FUNCTIONS, dotted_name, positional_params


@dataclass
class _Class:
    qualname: str
    bases: tuple[str, ...]
    methods: list[ast.FunctionDef] = field(default_factory=list)
    decorators: dict[ast.FunctionDef, tuple[str, ...]] = field(default_factory=dict)
    annotations: list[tuple[str, Source]] = field(default_factory=list)
    aliases: list[MethodFacts] = field(default_factory=list)  # `decode = decode_function`


def _base_name(expr: ast.expr) -> str | None:
    """``nn.Module`` -> itself; a subscripted base ``Base[int]`` -> ``Base`` (the class it is)."""
    if type(expr) is ast.Subscript:
        expr = expr.value
    return dotted_name(expr)


class Classes(Collector):
    name = "classes"
    triggers = ("class",)
    handlers = {ast.AnnAssign: "on_ann_assign", ast.Assign: "on_assign"}
    after = ("entry_uses",)

    def __init__(self, walk: Any) -> None:
        super().__init__(walk)
        self.classes: list[_Class] = []
        self.by_node: dict[ast.ClassDef, _Class] = {}

    def enter(self, node: ast.AST, scope: Scope) -> None:
        parent = scope.parent
        if type(node) is ast.ClassDef and parent is not None:
            resolve = self.walk.names.resolve
            bases = tuple(resolve(d) for d in (_base_name(b) for b in node.bases if type(b) is not ast.Starred) if d)
            record = _Class(parent.prefix + node.name, bases)
            self.classes.append(record)
            self.by_node[node] = record
        elif type(node) in FUNCTIONS and parent is not None and parent.kind == "class":
            record = self.by_node[parent.node]
            record.methods.append(node)
            record.decorators[node] = self.walk.names.decorators(node)

    def on_ann_assign(self, node: ast.AnnAssign, scope: Scope) -> None:
        if scope.kind == "class" and type(node.target) is ast.Name:
            ref = self.walk.names.annotation_ref(node.annotation)
            record = self.by_node[scope.node]
            record.annotations.append((node.target.id, Source(SRC_ANNOTATION, ref)))

    def on_assign(self, node: ast.Assign, scope: Scope) -> None:
        """``decode = decode_function`` in a class body: a method that hands self to the function;
        ``decode = forward_entry(decode_function)`` is that method decorated."""
        if scope.kind != "class" or len(node.targets) != 1 or type(node.targets[0]) is not ast.Name:
            return
        value, decorators = node.value, ()
        if type(value) is ast.Call and len(value.args) == 1 and not value.keywords and dotted_name(value.func):
            decorators = (self.walk.names.resolve(dotted_name(value.func) or ""),)
            value = value.args[0]
        dotted = dotted_name(value) if type(value) in (ast.Name, ast.Attribute) else None
        if dotted is None:
            return
        name = node.targets[0].id
        use = Use(PASS_CALL, "", 0, f"{dotted}(self, ...)", f"{self.walk.names.resolve(dotted)}#0")
        kind = method_kind(decorators)  # `x = staticmethod(f)` is no instance method
        line, col = self.walk.position(node.targets[0])
        self.by_node[scope.node].aliases.append(
            MethodFacts(name=name, line=line, col=col, kind="alias" if kind == "method" else kind,
                        decorators=decorators, uses=(use,)))

    def finish(self, results: dict[str, dict[str, Any]]) -> dict[str, Any]:
        bodies: dict[ast.FunctionDef, MethodBody] = results.get("entry_uses", {}).get("_bodies", {})
        classes = []
        for record in self.classes:
            methods = []
            merged: dict[str, list[Source]] = {}
            for name, source in record.annotations:
                merged.setdefault(name, []).append(source)
            for node in record.methods:
                decorators = record.decorators[node]
                body = bodies.get(node)
                line, col = self.walk.def_position(node)
                kind = body.kind if body is not None else method_kind(decorators)
                methods.append(MethodFacts(name=node.name, line=line, col=col, kind=kind,
                                           decorators=decorators, uses=body.uses if body else (),
                                           returns=body.returns if body else (),
                                           generator=body.generator if body else False,
                                           abstract=body.abstract if body else False,
                                           builds=body.builds if body else (),
                                           asynchronous=body.asynchronous if body else False))
                for name, sources in body.attrs if body else ():
                    merged.setdefault(name, []).extend(sources)
            defined = {method.name for method in methods}
            methods.extend(alias for alias in record.aliases if alias.name not in defined)
            # Reads of what the class assigns or defines as a plain method are no property's: not kept
            properties = {method.name for method in methods if method.kind == "property"}
            plain = (defined | set(merged)) - properties
            methods = [_property_reads(method, plain) for method in methods]
            init = next((node for node in reversed(record.methods) if node.name == "__init__"), None)
            classes.append(ClassFacts(qualname=record.qualname, bases=record.bases, methods=tuple(methods),
                                      attrs=tuple((k, tuple(dict.fromkeys(v))) for k, v in merged.items()),
                                      init_params=_init_params(init) if init is not None else ()))
        return {"classes": tuple(classes)}


def _init_params(node: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[str, ...]:
    """``__init__``'s parameters after self, as a call fills them: positional, then keyword-only."""
    return (*positional_params(node)[1:], *(arg.arg for arg in node.args.kwonlyargs))


def _property_reads(method: MethodFacts, plain: set[str]) -> MethodFacts:
    """``method`` keeping one of each attribute read (``READ``) that may be a property's."""
    seen: set[tuple[str, str, tuple[Guard, ...]]] = set()
    uses = []
    for use in method.uses:
        if use.kind == READ:
            if (not use.name and use.method in plain) or (use.name, use.method, use.guards) in seen:
                continue
            seen.add((use.name, use.method, use.guards))
        uses.append(use)
    return method if len(uses) == len(method.uses) else method._replace(uses=tuple(uses))
