"""Collector ``entry_uses``: what each method body does that may be module computation.

Per method (nested functions, lambdas and comprehensions included): the uses (``self(...)``,
``self.enc(x)``, ``self.vae.encode(x)``, ``helper(self.model)``...), local aliases of self and of
submodules (either branch of a conditional), what is assigned to ``self.<attr>`` or put into a
container attribute, which attributes it returns and what it builds and returns. Per module-level
function: a summary of which parameters it uses as modules, read with each standing for ``self``,
so that a method in any file that hands it ``self`` or a submodule is judged by it. Each body is
read by a ``method_scan.MethodScan``.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from typing import Any, Callable

from lint_rules import contract
from lint_rules.facts.method_scan import MethodScan, not_a_module
from lint_rules.facts.model import (
    PASS_CALL, READ, SRC_ELEMENT, SRC_MODULE, FunctionFacts, Guard, MethodFacts, Source, Use,
)
from lint_rules.facts.model_flow import ModelFlow
from lint_rules.facts.traversal import Collector, FileWalk, Scope, with_twins
from lint_rules.facts.walk import FUNCTIONS, LEAVES, call_args, dotted_name, expand_children, params, split_chain
from lint_rules.vocabulary import PLAIN_TYPES, PROPERTY_DECORATORS


@dataclasses.dataclass(frozen=True)
class MethodBody:
    """What ``entry_uses`` found in one method, for ``classes`` to put into ``MethodFacts``."""

    kind: str
    uses: tuple[Use, ...]
    returns: tuple[str, ...]
    attrs: tuple[tuple[str, tuple[Source, ...]], ...]  # self.<attr> -> what this method assigns
    generator: bool = False
    abstract: bool = False
    builds: tuple[str, ...] = ()
    asynchronous: bool = False


def method_kind(decorators: tuple[str, ...]) -> str:
    """"method", "staticmethod", "classmethod" or "property", from the resolved decorators."""
    kind = "method"
    for dec in decorators:
        last = dec.rsplit(".", 1)[-1]
        if last.endswith(("staticmethod", "classmethod")):  # Lightning's `_restricted_classmethod` too
            kind = "staticmethod" if last.endswith("staticmethod") else "classmethod"
        elif last in PROPERTY_DECORATORS:
            kind = "property"
    return kind


def _relay(name: str) -> Callable[["EntryUses", Any, Scope], None]:
    """A handler that hands the node to the scan of the method it is in (if any)."""

    read = getattr(MethodScan, name)

    def handler(self: "EntryUses", node: Any, scope: Scope) -> None:
        if scope.method is not None:
            _, scan, kept = self.scans[scope.method]
            scan.own_body = scope.node is scope.method
            read(scan, node)
            kept.append(node)
        else:
            kept = self.kept.get(scope)
            if kept is not None:
                kept.append(node)

    handler.__name__ = name
    return handler


class EntryUses(Collector):
    name = "entry_uses"
    triggers = ("class", "def ")  # a file of functions only: they may be handed modules
    handlers = {ast.Call: "on_call", ast.For: "on_for", ast.comprehension: "on_for", ast.Assign: "on_assign",
                ast.AnnAssign: "on_ann_assign", ast.Return: "on_return", ast.Yield: "on_yield"}

    @classmethod
    def wanted(cls, source: str) -> bool:
        # a script that sets a model up may build it in a function of its own (``fabric.setup(build())``)
        return super().wanted(source) or ModelFlow.wanted(source)

    def __init__(self, walk: FileWalk) -> None:
        super().__init__(walk)
        # method -> (kind, its scan, the nodes the scan read: replayed if it is read as a function)
        self.scans: dict[ast.FunctionDef, tuple[str, MethodScan, list[ast.AST]]] = {}
        # The scopes of a module-level function (its nested functions too) -> the nodes a scan would
        # read there, in the walk's order: kept where the walk visits their expressions anyway
        # (another collector wants them), so its summary need not walk its body again.
        self.kept: dict[Scope, list[ast.AST]] = {}
        self.kept_of: dict[ast.FunctionDef, list[ast.AST]] = {}  # ... by function, if complete
        self.functions: dict[str, ast.FunctionDef] = {}  # module-level functions (the last of a name)
        self.statics: dict[ast.FunctionDef, str] = {}  # static methods -> "Class.method"
        self.bound: dict[ast.FunctionDef, str] = {}  # plain methods -> "Class.method"
        self.generators: set[ast.FunctionDef] = set()  # methods whose own body yields

    def wants_expressions(self, scope: Scope) -> bool:
        return scope.method is not None

    def enter(self, node: ast.AST, scope: Scope) -> None:
        if scope.kind != "function" or scope.parent is None:
            return
        assert isinstance(node, FUNCTIONS)
        if scope.parent.kind == "class":
            kind = method_kind(self.walk.names.decorators(node))
            scan = MethodScan.for_function(self.walk.names, node, kind)
            scan.watch(self.walk.conditions, node, kind)
            self.scans[node] = (kind, scan, [])
            if kind == "staticmethod":  # summarised like a function, named Class.method
                self.statics[node] = scope.parent.prefix + node.name
            elif kind == "method":  # ... and so is a method, with self left out, if it is handed a module
                self.bound[node] = scope.parent.prefix + node.name
        elif scope.parent.kind == "module":
            self.functions[node.name] = node
            if scope.expressions:
                self.kept[scope] = self.kept_of[node] = []
        elif scope.parent in self.kept:  # a function nested in one: its nodes are the outer one's
            if scope.expressions:
                self.kept[scope] = self.kept[scope.parent]
            else:  # its body's calls are not visited: the module-level function's summary walks its body itself
                top = scope.parent
                while top.parent is not None and top.parent.kind != "module":
                    top = top.parent
                self.kept_of.pop(top.node, None)

    on_call = _relay("on_call")
    on_for = _relay("on_for")
    on_assign = _relay("on_assign_stmt")
    on_ann_assign = _relay("on_ann_assign")
    on_return = _relay("on_return")

    def on_yield(self, node: ast.Yield | ast.YieldFrom, scope: Scope) -> None:
        if scope.method is not None and scope.node is scope.method:
            self.generators.add(scope.method)

    def finish(self, results: dict[str, dict[str, Any]]) -> dict[str, Any]:
        bodies: dict[ast.FunctionDef, MethodBody] = {}
        for node, (kind, scan, _) in self.scans.items():
            bodies[node] = self._body(node, kind, scan)
        # Functions this file's methods hand modules to are located (their evidence gets lines);
        # the others keep line 0, as they did when locating cost a code generation pass.
        local = {use.method.rpartition("#")[0] for body in bodies.values() for use in body.uses
                 if use.kind == PASS_CALL}
        functions = tuple(self._function(node, node.name, node.name in local)
                          for node in self.functions.values())
        functions += tuple(self._function(node, name, False) for node, name in self.statics.items())
        # A method is read as a function where this file hands it a module (self._run(self.head),
        # super().encode(obs, self.enc)), or where it calls a parameter (``encoder(obs)``), which
        # a subclass in another file may hand a module through super(): reading every method cost
        # about a fifth more facts time.
        handed = {ref.partition(".")[2] for ref in local if ref.startswith(("self.", "super."))}
        functions += tuple(summary for summary in (self._function(node, name, False, bound=True)
                                                   for node, name in self.bound.items()
                                                   if node.name in handed or self.scans[node][1].calls_param)
                           if summary.runs)
        return {"_bodies": bodies, "functions": functions}  # all: a name that is a function is no module

    def _body(self, node: ast.FunctionDef, kind: str, scan: MethodScan) -> MethodBody:
        scan.resolve_local_calls()
        attrs = [(name, tuple(scan.registered_sources(name, value) or scan.sources(value)))
                 for name, value in scan.assigned]
        attrs.extend((name, (Source(SRC_MODULE),)) for name in scan.registered)
        attrs.extend((name, tuple(Source(SRC_ELEMENT, ref) for ref in scan.built_in([value])))
                     for name, value in scan.elements)
        abstract = _is_abstract(node, self.walk.names.decorators(node))
        builds = list(scan.builds)
        if kind == "classmethod" and node.returns is not None:  # a factory's declared class, first
            builds.insert(0, self.walk.names.annotation_ref(node.returns))
        if kind == "property":
            scan.element_reads(node)
        uses = self._located(node, kind, scan.guarded_uses(node))
        if kind in ("method", "property") and scan.self_name:
            uses += self._self_reads(node, scan.self_name)
        return MethodBody(kind, uses, tuple(dict.fromkeys(scan.returns)),
                          tuple(attrs), node in self.generators, abstract, tuple(b for b in dict.fromkeys(builds) if b),
                          type(node) is ast.AsyncFunctionDef)

    def _self_reads(self, fn: ast.FunctionDef, self_name: str) -> tuple[Use, ...]:
        """``self.<name>`` read, not called nor assigned (a property's getter runs), once per name:
        found in the method's text, not by visiting every attribute node (a third of the facts time
        of torch's files). A mention in a comment or a string counts too: ``classes`` keeps only names
        the class neither assigns nor defines as a plain method."""
        start = fn.lineno
        text = "\n".join(self.walk.lines[start - 1:fn.end_lineno])
        found: dict[str, Use] = {}
        line, counted = start, 0  # lines are counted on from the last one found, not from the top
        name = re.escape(self_name)  # the name first, its word boundary after: the engine looks for a literal
        for match in re.finditer(rf"{name}(?<=\b{name})\.([A-Za-z_]\w*)\b(?!\s*(?:\(|=[^=]))", text):
            attr = match.group(1)
            if attr not in found:
                if self.walk.locate:
                    line += text.count("\n", counted, match.start())
                    counted = match.start()
                found[attr] = Use(READ, "", line if self.walk.locate else 0, f"{self_name}.{attr}", attr)
        return tuple(found.values())

    def _function(self, fn: ast.FunctionDef, name: str, locate: bool, bound: bool = False) -> FunctionFacts:
        """A module-level function's summary: for each parameter it uses as a module, its body read
        with that parameter standing for self (so SpeechT5's ``_generate_speech(self, ...)`` and
        ``generate_fn(model=self.model)`` are read once, where they are defined). ``bound``: a
        method, whose ``self`` is left out and whose parameters count only if it calls them, calls
        their methods or iterates them (``self._run(self.head, x)``: ``def _run(self, module, x)``);
        handing a parameter on, which every method does with its tensors, would read them all."""
        every = params(fn)[1 if bound else 0:]
        names = [p.name for p in every]
        # `pretrained=False`, `depth: int`: flags and numbers are never modules, whatever they are handed to
        plain = {p.name for p in every if not_a_module(p.default) or (
            type(p.annotation) is ast.Name and p.annotation.id in PLAIN_TYPES)}
        handled = self.scans[fn][2] if fn in self.scans else self.kept_of.get(fn)
        if handled is None:
            handled = _handled_nodes(fn)
        candidates, returned = _module_candidates(handled, set(names) - plain, handed_on=not bound)
        if bound:
            returned = []  # what a method returns is its MethodFacts' to say
        runs = []
        builds: list[str] = []
        for index, param in enumerate(names):
            if param not in candidates or param == "cls":  # `cls(...)` builds an instance, runs nothing
                continue
            scan = MethodScan.for_function(self.walk.names, fn, "method", param)
            scan.own_body = False  # (as in a function nested in a method: no guards are watched)
            for node in handled:
                read = _REPLAYED.get(type(node))
                if read is not None:
                    read(scan, node)
            scan.resolve_local_calls()
            builds.extend(scan.builds)
            if scan.uses:
                uses = self._located(fn, "method", scan.uses) if locate else tuple(u for _, u in scan.uses)
                runs.append(MethodFacts(name, 0, 0, f"param:{index}", (), uses))
        if not runs and returned:  # no parameter is a module: read the returns alone
            scan = MethodScan.for_function(self.walk.names, fn, "method", None)
            for node in returned:
                scan.on_return(node)
            builds.extend(scan.builds)
        if fn.returns is not None:  # the declared class first: factories return it in the common case
            builds.insert(0, self.walk.names.annotation_ref(fn.returns))
        return FunctionFacts(name, tuple(names), tuple(runs), tuple(b for b in dict.fromkeys(builds) if b))

    def _located(self, fn: ast.FunctionDef, kind: str, uses: list[tuple[ast.AST, Use]]) -> tuple[Use, ...]:
        """Give lines to the uses that can end an evidence chain: the first of each distinct use
        (a later twin is never chosen), in methods that can be reported or called. ``forward``,
        dunders and non-methods are never reported and never walked into, so they keep line 0,
        as do all uses of files read only to resolve names."""
        name = fn.name
        if not uses or not self.walk.locate or kind not in ("method", "property") or name in contract.NEVER_ENTRY \
                or contract.is_dunder(name):
            return tuple(use for _, use in uses)
        first: dict[tuple[str, str, str, str, tuple[Guard, ...]], ast.AST] = {}
        for node, use in uses:  # a twin under other guards may be chosen when a caller's constants drop the first
            first.setdefault((use.kind, use.name, use.method, use.text, use.guards), node)
        located = set(first.values())  # a node that is first for one use gives its line to all of its uses

        def at(node: ast.AST, use: Use) -> Use:
            line, col = self.walk.position(node)
            return use._replace(line=line, col=col)

        return tuple(at(node, use) if node in located else use for node, use in uses)


_HANDLED = with_twins(EntryUses.handlers)  # node types a scan reads
#: Node type -> the ``MethodScan`` method a replay of a function's body calls (``yield`` marks methods only).
_REPLAYED = {kind: getattr(MethodScan, getattr(EntryUses, method).__name__) for kind, method in _HANDLED.items()
             if method != "on_yield"}


def _handled_nodes(fn: ast.FunctionDef) -> list[ast.AST]:
    """The nodes a scan of the body reads (``EntryUses.handlers``, nested classes left out), in the
    walk's order, for a function whose body the walk did not visit."""
    handled: list[ast.AST] = []
    stack: list[ast.AST] = list(reversed(fn.body))
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind in LEAVES or kind is ast.ClassDef:
            continue
        if kind in _REPLAYED:
            handled.append(node)
        if kind in FUNCTIONS:  # as the walk: decorators and defaults first, in the enclosing body
            stack.extend(reversed(node.body))
            stack.append(node.args)
            stack.extend(reversed(node.decorator_list))
        else:
            expand_children(node, stack)
    return handled


def _module_candidates(handled: list[ast.AST], params: set[str], handed_on: bool = True
                       ) -> tuple[set[str], list[ast.Return]]:
    """Of the nodes a scan of a body reads: the parameters it may use as modules (called, a method
    of them called, iterated or, with ``handed_on``, handed to another call), and its returns. The
    real scans replay those nodes instead of walking the body again."""
    found: set[str] = set()
    returns: list[ast.Return] = []
    for node in handled:
        kind = type(node)
        if kind is ast.Call:
            root = split_chain(node.func)[0]
            if type(root) is ast.Name and root.id in params:
                found.add(root.id)
            for arg in call_args(node) if handed_on else ():
                inner = split_chain(arg.value)[0]
                if type(inner) is ast.Name and inner.id in params:
                    found.add(inner.id)
        elif kind is ast.For or kind is ast.AsyncFor or kind is ast.comprehension:
            root = split_chain(node.iter)[0]
            if type(root) is ast.Name and root.id in params:
                found.add(root.id)
        elif kind is ast.Return:
            returns.append(node)
    return found, returns


def _is_abstract(node: ast.FunctionDef, decorators: tuple[str, ...]) -> bool:
    """``@abstractmethod``, or a body that does nothing but document, pass or raise NotImplementedError."""
    if any(d.rpartition(".")[2] == "abstractmethod" for d in decorators):
        return True
    for stmt in node.body:
        kind = type(stmt)
        if kind is ast.Pass or (kind is ast.Expr and type(stmt.value) is ast.Constant and (
                type(stmt.value.value) in (str, bytes) or stmt.value.value is Ellipsis)):
            continue  # a docstring or `...`
        if kind is ast.Raise and stmt.exc is not None and (
                dotted_name(stmt.exc.func if type(stmt.exc) is ast.Call else stmt.exc) or ""
        ).endswith("NotImplementedError"):
            continue
        return False
    return True
