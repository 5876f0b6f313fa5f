"""The single LibCST traversal of a file, shared by every collector.

A file is parsed once and walked once. The walk owns what every collector needs: statements in
document order, scopes (module, class, function; ``Scope``), name resolution (``names.Names``, fed
by every import it passes) and the ``def`` positions. Collectors (one per concern: ``classes``,
``entry_uses``, ``model_flow``) subscribe to node types and to entering and leaving
classes and functions, and turn what they saw into fields of ``FileFacts``.

Speed: expressions are walked only in scopes where some active collector wants them (method
bodies, or everywhere in a file that holds a registration or a set-up call); elsewhere only
statements are visited. A collector is active only if the file's text holds one of its
triggers, and a file with no active collector is not parsed at all (``extract.prefilter``).
The walk reads node fields directly (``walk.child_nodes``): LibCST's ``CSTVisitor`` costs about as
much as the parse itself.
"""

from __future__ import annotations

from typing import Any, Callable, ClassVar, Optional, Sequence

import libcst as cst

from lint_rules.facts.names import Names
from lint_rules.facts.walk import LEAVES, child_nodes, node_fields
from lint_rules.positions import Position, def_positions, node_positions

_BLOCK_PARTS = (cst.If, cst.Else, cst.Finally, cst.ExceptHandler, cst.ExceptStarHandler, cst.MatchCase)


class Scope:
    """Where a node is: the module, a class body or a function body (lambdas and comprehensions
    are not scopes here)."""

    __slots__ = ("kind", "node", "parent", "prefix", "method", "expressions")

    def __init__(self, kind: str, node: cst.CSTNode, parent: Optional["Scope"], prefix: str) -> None:
        self.kind = kind  # "module", "class" or "function"
        self.node = node
        self.parent = parent
        self.prefix = prefix  # qualified-name prefix of definitions inside: "", "A.", "A.f.<locals>."
        # The method this scope's code belongs to: a function defined in a class body, or any
        # function nested in one (its code runs as part of the method).
        self.method: Optional[cst.FunctionDef] = None
        if kind == "function" and parent is not None:
            self.method = node if parent.kind == "class" else parent.method  # type: ignore[assignment]
        self.expressions = False

    @property
    def self_name(self) -> Optional[str]:
        """The first parameter of the method this scope's code belongs to (None outside methods)."""
        if self.method is None:
            return None
        params = [*self.method.params.posonly_params, *self.method.params.params]
        return params[0].name.value if params else None

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


class Collector:
    """One concern's share of the traversal. Subclasses set ``name``, ``triggers`` and
    ``handlers`` (node type -> method name, called as ``method(node, scope)``)."""

    name: ClassVar[str]
    triggers: ClassVar[tuple[str, ...]] = ()
    resolve_triggers: ClassVar[tuple[str, ...]] = ()  # more, for files read only to resolve names
    handlers: ClassVar[dict[type, str]] = {}
    after: ClassVar[tuple[str, ...]] = ()  # collectors whose results ``finish`` reads

    def __init__(self, walk: "FileWalk") -> None:
        self.walk = walk

    @classmethod
    def wanted(cls, source: str, resolving: bool = False) -> bool:
        """Can this file's text give this collector anything? (A cheap text test.)"""
        return any(trigger in source for trigger in (*cls.triggers, *(cls.resolve_triggers if resolving else ())))

    def wants_expressions(self, scope: Scope) -> bool:
        return False

    def enter(self, node: cst.CSTNode, scope: Scope) -> None:
        """A class or function starts; ``scope`` is its own new scope."""

    def leave(self, node: cst.CSTNode, scope: Scope) -> None:
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
        self.tree: Optional[cst.Module] = None
        self.defs: list[cst.FunctionDef] = []  # every def, in document order
        self.statement: Optional[cst.CSTNode] = None  # the statement line being walked
        self.inline = False  # the statement line is a one-line suite (`if x: a = b`)
        self._def_positions: Optional[dict[cst.FunctionDef, Position]] = None
        self._dispatch: dict[type, list[Callable[[Any, Scope], None]]] = {}
        for collector in self.collectors:
            for kind, method in collector.handlers.items():
                self._dispatch.setdefault(kind, []).append(getattr(collector, method))

    # -- running ---------------------------------------------------------------------------
    def run(self, tree: cst.Module) -> dict[str, Any]:
        self.tree = tree
        for stmt in tree.body:
            if isinstance(stmt, cst.ClassDef):
                self.names.top_classes.add(stmt.name.value)
        root = self._scope("module", tree, None, "")
        self.block(tree.body, root)
        results: dict[str, dict[str, Any]] = {}
        for collector in self._finish_order():
            results[collector.name] = collector.finish(results)
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

    def _scope(self, kind: str, node: cst.CSTNode, parent: Optional[Scope], prefix: str) -> Scope:
        scope = Scope(kind, node, parent, prefix)
        scope.expressions = any(c.wants_expressions(scope) for c in self.collectors)
        return scope

    # -- statements --------------------------------------------------------------------------
    def block(self, stmts: Sequence[cst.CSTNode], scope: Scope) -> None:
        for stmt in stmts:
            kind = type(stmt)
            if kind is cst.SimpleStatementLine:
                self.statement, self.inline = stmt, False
                for small in stmt.body:  # type: ignore[attr-defined]
                    self._small(small, scope)
            elif kind is cst.FunctionDef or kind is cst.ClassDef:
                self._definition(stmt, scope)  # type: ignore[arg-type]
            else:
                self._compound(stmt, scope)

    def _small(self, small: cst.CSTNode, scope: Scope) -> None:
        if type(small) is cst.Import or type(small) is cst.ImportFrom:
            self.names.on_import(small)  # type: ignore[arg-type]
        elif type(small) is cst.Assign and scope.kind != "function":
            self.names.on_alias(small)  # type: ignore[arg-type]
        if scope.expressions:
            self.expressions([small], scope)
        else:
            self._handle(small, scope)

    def _suite(self, suite: cst.CSTNode, scope: Scope) -> None:
        if isinstance(suite, cst.IndentedBlock):
            self.block(suite.body, scope)
        elif isinstance(suite, cst.SimpleStatementSuite):
            for small in suite.body:
                self.statement, self.inline = suite, True
                self._small(small, scope)

    def _compound(self, stmt: cst.CSTNode, scope: Scope) -> None:
        """if / for / while / with / try / match: the statement itself, its header expressions,
        then its blocks."""
        self._handle(stmt, scope)
        for name in node_fields(stmt):
            value = getattr(stmt, name)
            if isinstance(value, cst.BaseSuite):
                self._suite(value, scope)
            elif isinstance(value, _BLOCK_PARTS):
                self._compound(value, scope)
            elif isinstance(value, (tuple, list)):
                for item in value:
                    if isinstance(item, _BLOCK_PARTS):
                        self._compound(item, scope)
                    elif scope.expressions and isinstance(item, cst.CSTNode):
                        self.expressions([item], scope)
            elif scope.expressions and isinstance(value, cst.CSTNode):
                self.expressions([value], scope)

    def _definition(self, node: cst.FunctionDef | cst.ClassDef, scope: Scope) -> None:
        self._handle(node, scope)
        if isinstance(node, cst.FunctionDef):
            self.defs.append(node)
            if scope.expressions:  # decorators and defaults run in the enclosing scope
                self.expressions([*node.decorators, node.params], scope)
            inner = self._scope("function", node, scope, f"{scope.prefix}{node.name.value}.<locals>.")
        else:
            inner = self._scope("class", node, scope, f"{scope.prefix}{node.name.value}.")
        for collector in self.collectors:
            collector.enter(node, inner)
        self._suite(node.body, inner)
        for collector in reversed(self.collectors):
            collector.leave(node, inner)

    # -- expressions -------------------------------------------------------------------------
    def expressions(self, nodes: Sequence[cst.CSTNode], scope: Scope,
                    only: Optional[Collector] = None) -> None:
        """Every node under ``nodes`` (document order), dispatched to the handlers (with ``only``:
        to that collector's alone, skipping nested classes; for a second look at a subtree)."""
        stack = list(reversed(nodes))
        pop, push, dispatch = stack.pop, stack.extend, self._dispatch
        if only is not None:
            dispatch = {kind: [getattr(only, name)] for kind, name in only.handlers.items()}
        while stack:
            current = pop()
            kind = type(current)
            if kind in LEAVES or (only is not None and kind is cst.ClassDef):
                continue
            handlers = dispatch.get(kind)
            if handlers:
                for handler in handlers:
                    handler(current, scope)
            push(child_nodes(current))

    def _handle(self, node: cst.CSTNode, scope: Scope) -> None:
        for handler in self._dispatch.get(type(node), ()):
            handler(node, scope)

    # -- positions ---------------------------------------------------------------------------
    def def_position(self, node: cst.FunctionDef) -> Position:
        """(line, column) of a def's name."""
        if self._def_positions is None:
            found = def_positions(self.source, [d.name.value for d in self.defs])
            if found is None:  # a `def` inside a string fooled the regex: locate them by codegen
                by_name = node_positions(self.tree, [d.name for d in self.defs], self.tree)  # type: ignore[arg-type]
                found = [by_name[d.name] for d in self.defs]
            self._def_positions = dict(zip(self.defs, found))
        return self._def_positions[node]

    def positions(self, nodes: Sequence[cst.CSTNode],
                  root: Optional[cst.CSTNode] = None) -> dict[cst.CSTNode, Position]:
        """Positions of a few nodes, relative to ``root``'s first line (the module by default)."""
        assert self.tree is not None
        return node_positions(root if root is not None else self.tree, nodes, self.tree)
