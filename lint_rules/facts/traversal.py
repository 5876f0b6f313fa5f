"""The single traversal of a file's ``ast`` tree, shared by every collector.

A file is parsed once and walked once. The walk owns what every collector needs: statements in
document order, scopes (module, class, function; ``Scope``), name resolution (``names.Names``, fed
by every import it passes) and positions. Collectors (one per concern: ``classes``,
``entry_uses``, ``model_flow``) subscribe to node types and to entering and leaving
classes and functions, and turn what they saw into fields of ``FileFacts``.

Speed: expressions are walked only in scopes where some active collector wants them (method
bodies, or everywhere in a file that holds a registration or a set-up call); elsewhere only
statements are visited. A collector is active only if the file's text holds one of its
triggers, and a file with no active collector is not parsed at all (``extract.wanted``).
A handler registered for ``ast.For``, ``ast.With``, ``ast.FunctionDef`` or ``ast.Yield`` also gets
their ``async`` (and ``yield from``) twins: the collectors ask what the code does, not how it is spelled.
"""

from __future__ import annotations

import ast
import re
from typing import Any, Callable, ClassVar, Optional, Sequence

from lint_rules.facts.names import Names
from lint_rules.facts.walk import (
    DEFINITIONS, EXPANDERS, LEAVES, PASSED_THROUGH, child_nodes, node_fields, positional_params,
)
from lint_rules.source import split_lines

Position = tuple[int, int]  # 1-based line, 0-based column (characters)
_TWINS = {ast.For: ast.AsyncFor, ast.With: ast.AsyncWith, ast.FunctionDef: ast.AsyncFunctionDef,
          ast.Yield: ast.YieldFrom}
_BODIES = ("body", "orelse", "finalbody")
_DEF_NAME = re.compile(r"(?:async\s+)?def\s+\w+")
_COMPOUND = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try, ast.Match,
             *((ast.TryStar,) if hasattr(ast, "TryStar") else ()))


class Scope:
    """Where a node is: the module, a class body or a function body (lambdas and comprehensions
    are not scopes here)."""

    __slots__ = ("kind", "node", "parent", "prefix", "method", "expressions", "_self_name", "_owner")

    def __init__(self, kind: str, node: ast.AST, parent: Optional["Scope"], prefix: str) -> None:
        self.kind = kind  # "module", "class" or "function"
        self.node = node
        self.parent = parent
        self.prefix = prefix  # qualified-name prefix of definitions inside: "", "A.", "A.f.<locals>."
        # The method this scope's code belongs to: a function defined in a class body, or any
        # function nested in one (its code runs as part of the method).
        self.method: Optional[ast.FunctionDef] = None
        if kind == "function" and parent is not None:
            self.method = node if parent.kind == "class" else parent.method
        self.expressions = False
        self._self_name: Optional[str] = None  # read once: every handler asks
        self._owner: Optional[str] = None  # ... as is ``owner``, of each call
        if self.method is not None:
            self._self_name = next(iter(positional_params(self.method)), None)

    @property
    def self_name(self) -> Optional[str]:
        """The first parameter of the method this scope's code belongs to (None outside methods)."""
        return self._self_name

    @property
    def owner(self) -> str:
        """The qualified name of the function whose code this is ("" at module level); a method's
        for the code of the functions nested in it (that code runs as part of the method)."""
        if self._owner is None:
            current: Optional[Scope] = self
            while current is not None and current.kind != "function":
                current = current.parent
            while current is not None and current.method is not None and current.node is not current.method \
                    and current.parent is not None:
                current = current.parent
            self._owner = current.prefix.removesuffix(".<locals>.") if current is not None else ""
        return self._owner

    @property
    def enclosing_class(self) -> Optional["Scope"]:
        """The innermost class scope around this one (self included)."""
        scope: Optional[Scope] = self
        while scope is not None and scope.kind != "class":
            scope = scope.parent
        return scope

    @property
    def function(self) -> Optional["Scope"]:
        """The innermost enclosing function scope (self included), or None at module level."""
        scope: Optional[Scope] = self
        while scope is not None and scope.kind != "function":
            scope = scope.parent
        return scope


def with_twins(handlers: dict[type, str]) -> dict[type, str]:
    """A collector's handlers with their ``async`` and ``yield from`` twins."""
    found = dict(handlers)
    for kind, method in handlers.items():
        if kind in _TWINS:
            found.setdefault(_TWINS[kind], method)
    return found


class Collector:
    """One concern's share of the traversal. Subclasses set ``name``, ``triggers`` and
    ``handlers`` (node type -> method name, called as ``method(node, scope)``)."""

    name: ClassVar[str]
    triggers: ClassVar[tuple[str, ...]] = ()
    handlers: ClassVar[dict[type, str]] = {}
    after: ClassVar[tuple[str, ...]] = ()  # collectors whose results ``finish`` reads

    def __init__(self, walk: "FileWalk") -> None:
        self.walk = walk

    @classmethod
    def wanted(cls, source: str) -> bool:
        """Can this file's text give this collector anything? (A cheap text test.)"""
        return any(trigger in source for trigger in cls.triggers)

    def wants_expressions(self, scope: Scope) -> bool:
        return False

    def enter(self, node: ast.AST, scope: Scope) -> None:
        """A class or function starts; ``scope`` is its own new scope."""

    def leave(self, node: ast.AST, scope: Scope) -> None:
        """A class or function ends."""

    def finish(self, results: dict[str, dict[str, Any]]) -> dict[str, Any]:
        """Facts fields from what was collected; ``results`` holds earlier collectors' output."""
        return {}


class FileWalk:
    def __init__(self, source: str, module: str, is_package: bool, collectors: Sequence[type[Collector]],
                 locate: bool = True) -> None:
        self.source = source
        self.module_name = module
        self.locate = locate  # give evidence lines (off for files read only to resolve names)
        self.names = Names(module, is_package)
        self.collectors = [kind(self) for kind in collectors]
        self.tree: Optional[ast.Module] = None
        self.statement: Optional[ast.stmt] = None  # the simple statement being walked
        self._body: Sequence[ast.stmt] = ()  # ... the statement list it is in, and its index there
        self._index = 0
        # The ``if`` tests the current statement runs under, and whether each holds there (the
        # function being walked only: a nested def starts with none). ``facts/guards.py`` reads them.
        self.conditions: list[tuple[ast.expr, bool]] = []
        self._lines: Optional[list[str]] = None
        self._dispatch: dict[type, list[Callable[[Any, Scope], None]]] = {}
        for collector in self.collectors:
            for kind, method in with_twins(collector.handlers).items():
                if kind in PASSED_THROUGH:
                    raise TypeError(f"{collector.name}: the expression walk passes through {kind.__name__} nodes")
                self._dispatch.setdefault(kind, []).append(getattr(collector, method))

    # -- running ---------------------------------------------------------------------------
    def run(self, tree: ast.Module) -> dict[str, Any]:
        self.tree = tree
        for stmt in tree.body:
            if type(stmt) is ast.ClassDef:
                self.names.top_classes.add(stmt.name)
        root = self._scope("module", tree, None, "")
        results: dict[str, dict[str, Any]] = {}
        try:
            self.block(tree.body, root)
            for collector in self._finish_order():
                results[collector.name] = collector.finish(results)
        finally:
            # The collectors (and their handlers) point back at the walk. Without that cycle the
            # file's tree is freed as soon as its facts are made, not by the cyclic collector,
            # which traversed every tree kept alive until it ran: 15-25% of a worker's CPU.
            self.collectors, self._dispatch = [], {}
        fields: dict[str, Any] = {}
        for found in results.values():
            fields.update((key, value) for key, value in found.items() if not key.startswith("_"))
        return fields

    def _finish_order(self) -> list[Collector]:
        done: list[Collector] = []
        pending = list(self.collectors)
        while pending:
            ready = [c for c in pending if all(a in {d.name for d in done} or a not in
                                               {p.name for p in pending} for a in c.after)]
            for collector in ready or pending[:1]:
                done.append(collector)
                pending.remove(collector)
        return done

    def _scope(self, kind: str, node: ast.AST, parent: Optional[Scope], prefix: str) -> Scope:
        scope = Scope(kind, node, parent, prefix)
        scope.expressions = any(c.wants_expressions(scope) for c in self.collectors)
        return scope

    # -- statements --------------------------------------------------------------------------
    def block(self, stmts: Sequence[ast.stmt], scope: Scope) -> None:
        depth = len(self.conditions)
        for index, stmt in enumerate(stmts):
            kind = type(stmt)
            if kind in DEFINITIONS:
                self._definition(stmt, scope)
            elif kind in _COMPOUND:
                self._compound(stmt, scope)
                if kind is ast.If:  # `if mode != "x": return ...`: the rest runs only when the test fails
                    body_exits, else_exits = _exits(stmt.body), _exits(stmt.orelse)
                    if body_exits != else_exits:
                        self.conditions.append((stmt.test, else_exits))
            else:
                self.statement, self._body, self._index = stmt, stmts, index
                self._small(stmt, scope)
        del self.conditions[depth:]

    @property
    def inline(self) -> bool:
        """The statement is in a one-line suite (``if x: a = b``): its list starts on a header's line."""
        first = self._body[0]
        line = self.lines[first.lineno - 1]
        return first.col_offset != len(line) - len(line.lstrip(" \t\f"))

    @property
    def alone(self) -> bool:
        """No other statement shares a line with this one (``a = f; b = g`` are not alone)."""
        stmt, body, index = self.statement, self._body, self._index
        assert stmt is not None
        return not ((index > 0 and body[index - 1].end_lineno == stmt.lineno)
                    or (index + 1 < len(body) and body[index + 1].lineno == stmt.end_lineno))

    def _small(self, small: ast.stmt, scope: Scope) -> None:
        kind = type(small)
        if kind is ast.Import or kind is ast.ImportFrom:
            self.names.on_import(small)
        elif kind is ast.Assign and scope.kind != "function":
            self.names.on_alias(small, top=scope.kind == "module")
        if scope.expressions:
            self.expressions([small], scope)
        else:
            self._handle(small, scope)

    def _compound(self, stmt: ast.AST, scope: Scope) -> None:
        """if / for / while / with / try / match: the statement itself, its header expressions,
        then its blocks."""
        self._handle(stmt, scope)
        for name in node_fields(stmt):
            value = getattr(stmt, name)
            if name in _BODIES and type(stmt) is ast.If:
                self.conditions.append((stmt.test, name == "body"))
                self.block(value, scope)
                self.conditions.pop()
            elif name in _BODIES:
                self.block(value, scope)
            elif name == "handlers" or name == "cases":
                for part in value:  # except clauses, match cases: their header, then their block
                    self._handle(part, scope)
                    if scope.expressions:
                        self.expressions([getattr(part, field) for field in ("type", "pattern", "guard")
                                          if getattr(part, field, None) is not None], scope)
                    self.block(part.body, scope)
            elif scope.expressions:
                if type(value) is list:
                    self.expressions([item for item in value if isinstance(item, ast.AST)], scope)
                elif isinstance(value, ast.AST):
                    self.expressions([value], scope)

    def _definition(self, node: ast.FunctionDef | ast.ClassDef, scope: Scope) -> None:
        self._handle(node, scope)
        if type(node) is not ast.ClassDef:
            if scope.expressions:  # decorators and defaults run in the enclosing scope
                self.expressions([*node.decorator_list, node.args], scope)
            inner = self._scope("function", node, scope, f"{scope.prefix}{node.name}.<locals>.")
        else:
            inner = self._scope("class", node, scope, f"{scope.prefix}{node.name}.")
        outer = self.conditions[:]
        self.conditions.clear()
        for collector in self.collectors:
            collector.enter(node, inner)
        self.block(node.body, inner)
        for collector in reversed(self.collectors):
            collector.leave(node, inner)
        self.conditions[:] = outer

    # -- expressions -------------------------------------------------------------------------
    def expressions(self, nodes: Sequence[ast.AST], scope: Scope) -> None:
        """Every node under ``nodes`` (document order), dispatched to the handlers."""
        stack = list(reversed(nodes))
        pop, push, dispatch, expanders = stack.pop, stack.extend, self._dispatch, EXPANDERS
        while stack:
            current = pop()
            kind = type(current)
            if kind in LEAVES:
                continue
            handlers = dispatch.get(kind)
            if handlers:
                for handler in handlers:
                    handler(current, scope)
            expand = expanders.get(kind)  # walk.expand_children, inlined
            if expand is None:
                push(child_nodes(current))
            else:
                expand(current, stack)

    def _handle(self, node: ast.AST, scope: Scope) -> None:
        for handler in self._dispatch.get(type(node), ()):
            handler(node, scope)

    # -- positions ---------------------------------------------------------------------------
    @property
    def lines(self) -> list[str]:
        if self._lines is None:
            self._lines = split_lines(self.source)
        return self._lines

    def column(self, line: int, offset: int) -> int:
        """The character column of ``ast``'s UTF-8 byte ``offset`` on ``line``."""
        text = self.lines[line - 1]
        return offset if text.isascii() else len(text.encode("utf-8")[:offset].decode("utf-8", "ignore"))

    def position(self, node: ast.AST) -> Position:
        """(line, column) where a node starts."""
        line = node.lineno
        return line, self.column(line, node.col_offset)

    def def_position(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> Position:
        """(line, column) of a def's name."""
        line = node.lineno
        text = self.lines[line - 1]
        start = self.column(line, node.col_offset)
        found = _DEF_NAME.match(text, start)
        return line, found.end() - len(node.name) if found else start

    def attr_position(self, node: ast.Attribute) -> Position:
        """(line, column) of the attribute's name in ``a.name``."""
        line = node.end_lineno or node.lineno
        return line, self.column(line, node.end_col_offset or 0) - len(node.attr)


def _exits(body: Sequence[ast.stmt]) -> bool:
    """Does the block always leave (return, raise, continue, break) when it ends?"""
    return bool(body) and type(body[-1]) in (ast.Return, ast.Raise, ast.Continue, ast.Break)
