"""Collector ``init_contexts``: what is compiled, and what is called inside init contexts (FWD201).

* ``compiled``: module-level names bound to ``torch.compile(...)`` or defined under
  ``@torch.compile`` / ``@torch.compile(...)``. (Attributes ``self.x = torch.compile(...)`` are
  attribute sources of the ``classes`` facts, and decorated methods carry their decorators.)
* ``init_calls`` with a ``context``: every call inside the block of ``with torch.device("meta")``,
  ``with <x>.init_module(...)`` or ``with _EmptyInit(...)`` (``devices.init_context``), in any
  scope, nested definitions left out. A local variable bound to ``torch.compile(...)`` earlier in
  the same function is marked ``local``; ``self.<name>(...)`` keeps ``self`` as written-for-the-rule.
* ``init_calls`` without a context: the calls of ``self.<name>(...)`` and of names (torch's left
  out) made by each class's ``__init__`` and ``configure_model`` and by the helper methods they
  reach through ``self.<name>(...)``, so the rule can follow construction, into the classes built
  there too, to a compiled call. A context may be held in a variable (``ctx =
  fabric.init_module(); with ctx:``). Their positions are
  computed only in files that mention ``compile`` (elsewhere ``line`` is 0: such a call is an edge
  of a chain, or a call of a compiled function of another file, shown without its line).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any, Optional

from lint_rules.facts.devices import INIT_CONTEXT_TEXTS, init_context
from lint_rules.facts.model import COMPILE, InitCall
from lint_rules.facts.traversal import Collector, Scope
from lint_rules.facts.walk import DEFINITIONS, LEAVES, arg_slots, call_args, child_nodes, dotted_name
from lint_rules.vocabulary import INIT_METHODS  # what a chain from a construction starts with


@dataclass
class _Call:
    scope: str
    callee: str
    node: ast.expr  # the callee: the finding points at its last name
    context: str
    local: bool
    arguments: tuple[tuple[str, str], ...]


def _children(node: ast.AST) -> list[ast.AST]:
    """Child nodes in reverse order, ready for a stack: a call's arguments and a dict's keys and
    values as written (``ast`` keeps keywords after positionals, keys before values)."""
    kind = type(node)
    if kind is ast.Call:
        found: list[ast.AST] = [node.func, *(arg.value for arg in call_args(node))]
    elif kind is ast.Dict:
        found = []
        for key, value in zip(node.keys, node.values):
            if key is not None:
                found.append(key)
            found.append(value)
    else:
        return child_nodes(node)
    found.reverse()
    return found


class InitContexts(Collector):
    name = "init_contexts"
    triggers = ("class", "compile", "init_module", "_EmptyInit", "meta")
    handlers = {ast.With: "on_with", ast.Assign: "on_assign", ast.FunctionDef: "on_def", ast.Call: "on_call"}

    def __init__(self, walk: Any) -> None:
        super().__init__(walk)
        self.compiles = "compile" in walk.source
        # a file that names no init context has none to read in its assignments and ``with`` blocks
        self.contextual = any(word in walk.source for word in INIT_CONTEXT_TEXTS)
        self.compiled: list[str] = []
        self.locals: dict[ast.AST, set[str]] = {}  # function -> local names bound to torch.compile
        self.calls: list[_Call] = []
        self.seen: set[ast.Call] = set()  # calls already recorded inside a context
        self.contexts: dict[tuple[Optional[ast.AST], str], str] = {}  # (function, name) -> the context it holds

    def wants_expressions(self, scope: Scope) -> bool:
        return scope.method is not None

    def _is_compile(self, expr: Optional[ast.expr]) -> bool:
        return type(expr) is ast.Call and self.walk.names.resolve(dotted_name(expr.func) or "") == COMPILE

    def on_assign(self, node: ast.Assign, scope: Scope) -> None:
        if type(node.value) is not ast.Call:  # a context and ``torch.compile(...)`` are both made by a call
            return
        context = init_context(node.value, self.walk.names) if self.contextual else None
        if context is not None:  # ctx = fabric.init_module(empty_init=True); with ctx: ...
            function = scope.function
            for target in node.targets:
                if type(target) is ast.Name:
                    self.contexts[(function.node if function else None, target.id)] = context
            return
        if not self.compiles or not self._is_compile(node.value):
            return
        for target in node.targets:
            if type(target) is ast.Name:
                function = scope.function
                if function is None:
                    self.compiled.append(target.id)
                else:
                    self.locals.setdefault(function.node, set()).add(target.id)

    def on_def(self, node: ast.FunctionDef | ast.AsyncFunctionDef, scope: Scope) -> None:
        if self.compiles and scope.kind == "module" and COMPILE in self.walk.names.decorators(node):
            self.compiled.append(node.name)

    def _held(self, item: ast.expr, scope: Scope) -> Optional[str]:
        """The context a name holds (``with ctx:``), bound in this function or at module level."""
        function = scope.function
        if type(item) is not ast.Name:
            return None
        return self.contexts.get((function.node if function else None, item.id)) or self.contexts.get(
            (None, item.id))

    def on_with(self, node: ast.With | ast.AsyncWith, scope: Scope) -> None:
        if not self.contextual:
            return
        names = self.walk.names
        context = next((c for c in (init_context(i.context_expr, names) or self._held(i.context_expr, scope)
                                    for i in node.items) if c), None)
        if context is None:
            return
        me = scope.self_name
        function = scope.function
        local = self.locals.get(function.node, set()) if function is not None else set()
        stack: list[ast.AST] = list(reversed(node.body))
        while stack:
            current = stack.pop()
            kind = type(current)
            if kind in LEAVES or kind in DEFINITIONS or kind is ast.Lambda:
                continue
            if kind is ast.Call and current not in self.seen:
                self.seen.add(current)
                self._record(current, scope, me, context, local)
            stack.extend(_children(current))

    def on_call(self, call: ast.Call, scope: Scope) -> None:
        if call not in self.seen and scope.method is not None:
            self._record(call, scope, scope.self_name, "", set())

    def _record(self, call: ast.Call, scope: Scope, me: Optional[str], context: str, local: set[str]) -> None:
        func = call.func
        text = dotted_name(func)
        if text is None:
            return
        root, _, rest = text.partition(".")
        if me is not None and root == me:
            if not rest or "." in rest:
                return
            callee = f"self.{rest}"
        else:
            callee = text if root in local else self.walk.names.resolve(text)
            if not context and callee.split(".", 1)[0] == "torch":
                return  # outside contexts: compiled functions and the classes __init__ builds, never torch's
        self.calls.append(_Call(scope.owner, callee, func, context, root in local,
                                self._arguments(call, local) if context else ()))

    def _arguments(self, call: ast.Call, local: set[str]) -> tuple[tuple[str, str], ...]:
        """(slot, what) of the arguments that may be compiled: ``torch.compile`` for a
        ``torch.compile(...)`` call or a local bound to one, else the name resolved through the
        file's imports (the rule knows which module-level names are compiled)."""
        kept = []
        for slot, arg in arg_slots(call_args(call)):
            value = arg.value
            if self._is_compile(value) or (type(value) is ast.Name and value.id in local):
                kept.append((slot, COMPILE))
            elif type(value) is ast.Name:
                kept.append((slot, self.walk.names.resolve(value.id)))
        return tuple(kept)

    def _init_reached(self) -> set[str]:
        """Scopes of ``__init__``/``configure_model`` and the helper methods they reach via ``self.<name>(...)``."""
        edges: dict[str, list[str]] = {}
        for call in self.calls:
            if call.callee.startswith("self.") and "." in call.scope:
                edges.setdefault(call.scope, []).append(f"{call.scope.rpartition('.')[0]}.{call.callee[5:]}")
        todo = [c.scope for c in self.calls if c.scope.rpartition(".")[2] in INIT_METHODS]
        reached: set[str] = set()
        while todo:
            scope = todo.pop()
            if scope not in reached:
                reached.add(scope)
                todo.extend(edges.get(scope, ()))
        return reached

    def _position(self, func: ast.expr) -> tuple[int, int]:
        """Where the callee's last name starts (``f`` in ``f(...)``, ``g`` in ``a.g(...)``)."""
        if type(func) is ast.Attribute:
            return self.walk.attr_position(func)
        return self.walk.position(func)

    def finish(self, results: dict[str, dict[str, Any]]) -> dict[str, Any]:
        fields: dict[str, Any] = {}
        if self.compiled:
            fields["compiled"] = tuple(dict.fromkeys(self.compiled))
        reached = self._init_reached()
        kept = [c for c in self.calls if c.context or c.scope in reached]
        if kept:
            fields["init_calls"] = tuple(
                InitCall(c.scope, c.callee, *(self._position(c.node) if c.context or self.compiles else (0, 0)),
                         c.context, c.local, c.arguments) for c in kept)
        return fields
