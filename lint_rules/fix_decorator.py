"""``--fix-style decorator``: put ``@forward_entry`` on each unmarked entry method.

The new decorator becomes the outermost one (it must see the method as the class will store
it) and is a LibCST ``Decorator`` node, so it is printed with exactly the indentation of the
``def`` (tabs stay tabs) and the file's own line ending. The method is located by the finding's
qualified name *and* its ``def`` line, so nested classes, classes inside functions and
redefined methods are never confused. The import comes from ``fix_imports.ensure_import``.
"""

from __future__ import annotations

import re
from typing import Iterator, Optional, Sequence

import libcst as cst

from lint_rules import contract
from lint_rules.diagnostics import Diagnostic
from lint_rules.engine import decode
from lint_rules.fix_imports import dotted, ensure_import, expression
from lint_rules.fix_result import FileFix, Unfixed, line_suppresses
from lint_rules.fix_verify import FixRefused, Plan, verify
from lint_rules.positions import def_positions, node_positions

#: Decorators after which another decorator must not be added: the result would not be a
#: plain method (and FWD001 never reports these; this is a guard, not a rule).
_NOT_PLAIN = frozenset({"property", "cached_property", "setter", "getter", "deleter",
                        "staticmethod", "classmethod"})


def _blocks(stmt: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """The suites directly inside a compound statement (body, else, except, finally, cases)."""
    for name in ("body", "orelse", "finalbody"):
        child = getattr(stmt, name, None)
        if isinstance(child, (cst.BaseSuite, cst.If, cst.Else, cst.Finally)):
            yield child
    for handler in getattr(stmt, "handlers", ()):
        yield handler
    for case in getattr(stmt, "cases", ()):
        yield case


class _Defs:
    """Every ``def`` with the qualified name ``extract`` gives it, found by walking statements
    only (a full LibCST visit of a 3,000-line model file costs more than parsing it)."""

    def __init__(self) -> None:
        self.found: list[tuple[cst.FunctionDef, str, int, tuple[cst.CSTNode, ...]]] = []

    def walk(self, module: cst.Module) -> None:
        for index, stmt in enumerate(module.body):
            self._statement(stmt, "", index, ())

    def _statement(self, stmt: cst.CSTNode, prefix: str, top: int, path: tuple[cst.CSTNode, ...]) -> None:
        if isinstance(stmt, cst.SimpleStatementLine):
            return
        path = (*path, stmt)
        if isinstance(stmt, cst.FunctionDef):
            self.found.append((stmt, prefix + stmt.name.value, top, path))
            prefix = f"{prefix}{stmt.name.value}.<locals>."
        elif isinstance(stmt, cst.ClassDef):
            prefix = f"{prefix}{stmt.name.value}."
        for block in _blocks(stmt):
            self._suite(block, prefix, top, path)

    def _suite(self, node: cst.CSTNode, prefix: str, top: int, path: tuple[cst.CSTNode, ...]) -> None:
        path = (*path, node)
        if isinstance(node, cst.IndentedBlock):
            for stmt in node.body:
                self._statement(stmt, prefix, top, path)
        elif isinstance(node, (cst.If, cst.Else, cst.Finally, cst.ExceptHandler, cst.ExceptStarHandler,
                               cst.MatchCase)):
            self._statement(node, prefix, top, path[:-1])


class _AddDecorator(cst.CSTTransformer):
    """Adds the decorator to ``targets``, descending only along the paths that lead to them."""

    def __init__(self, targets: set[cst.FunctionDef], ancestors: set[cst.CSTNode], reference: str) -> None:
        self.targets = targets
        self.ancestors = ancestors
        self.reference = reference

    def on_visit(self, node: cst.CSTNode) -> bool:
        return isinstance(node, cst.Module) or node in self.ancestors

    def leave_FunctionDef(self, original_node: cst.FunctionDef, updated_node: cst.FunctionDef) -> cst.FunctionDef:
        if original_node not in self.targets:
            return updated_node
        decorator = cst.Decorator(decorator=expression(self.reference))
        return updated_node.with_changes(decorators=[decorator, *updated_node.decorators])


def _blocker(node: cst.FunctionDef) -> Optional[str]:
    for decorator in node.decorators:
        expr = decorator.decorator.func if isinstance(decorator.decorator, cst.Call) else decorator.decorator
        last = (dotted(expr) or "").rpartition(".")[2]
        if last in _NOT_PLAIN:
            return f"decorated with @{last}: not a plain method"
        if last == contract.DECORATOR_NAME:
            return f"already decorated with @{last}"
    return None


def fix_source(path: str, old: bytes, diagnostics: Sequence[Diagnostic]) -> FileFix:
    """Decorate the methods named by ``diagnostics`` (FWD001 findings in this file)."""
    result = FileFix(path, old, old)
    module = cst.parse_module(old)
    visitor = _Defs()
    visitor.walk(module)
    code = decode(old)
    lines = re.split(r"\r\n|\r|\n", code)
    names = [node.name.value for node, _, _, _ in visitor.found]
    positions = def_positions(code, names)
    if positions is None:
        found = node_positions(module, [node.name for node, _, _, _ in visitor.found], module)
        positions = [found[node.name] for node, _, _, _ in visitor.found]
    by_key = {(qualname, pos[0]): (node, top, path)
              for (node, qualname, top, path), pos in zip(visitor.found, positions)}
    targets: dict[cst.FunctionDef, int] = {}
    ancestors: set[cst.CSTNode] = set()
    for diagnostic in diagnostics:
        hit = by_key.get((diagnostic.symbol, diagnostic.line))
        if hit is None:
            result.unfixed.append(Unfixed(diagnostic, f"cannot find {diagnostic.symbol} at line {diagnostic.line}"))
            continue
        node, top, path_to = hit
        if line_suppresses(lines[diagnostic.line - 1], diagnostic.line, diagnostic.code):
            result.unfixed.append(Unfixed(diagnostic, "the def line carries # noqa"))
            continue
        reason = _blocker(node)
        if reason is not None:
            result.unfixed.append(Unfixed(diagnostic, reason))
            continue
        targets[node] = top
        ancestors.update(path_to)
        result.fixed.append(diagnostic)
    if not targets:
        return result
    edit = ensure_import(module, contract.DECORATOR_MODULE, contract.DECORATOR_NAME, min(targets.values()), code)
    new_module = edit.module.visit(_AddDecorator(set(targets), ancestors, edit.reference))
    plan = Plan(inserted=[f"@{edit.reference}".encode("utf-8")] * len(targets), extended=edit.extended)
    if edit.inserted is not None:
        plan.inserted.append(edit.inserted)
    new = new_module.bytes
    try:
        verify(old, new, plan, path)
    except FixRefused as refused:
        result.error = f"fix not applied: {refused}"
        result.unfixed.extend(Unfixed(d, f"fix refused: {refused}") for d in result.fixed)
        result.fixed = []
        return result
    result.new = new
    return result
