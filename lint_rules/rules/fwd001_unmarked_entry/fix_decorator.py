"""FWD001's ``decorator`` style: put ``@forward_entry`` on each unmarked entry method.

The new decorator becomes the outermost one (it must see the method as the class will store
it) and is a LibCST ``Decorator`` node, so it is printed with exactly the indentation of the
``def`` (tabs stay tabs) and the file's own line ending. The method is located by its ``def`` line (from
the facts), so nested classes, classes inside functions and redefined methods are never confused.
The import comes from ``imports.ensure_import``.
Findings are grouped by file; files are independent, so ``-j N`` fixes them in worker processes
and collects the results in path order (the output does not depend on ``N``).
"""

from __future__ import annotations

import unicodedata
from itertools import groupby
from typing import Optional, Sequence

import libcst as cst

from lint_rules import contract
from lint_rules.diagnostics import Diagnostic
from lint_rules.facts.model import MethodFacts
from lint_rules.fix.imports import ensure_import, expression
from lint_rules.fix.locate import defs_by_line, dotted_name, parse_for_edit
from lint_rules.fix.result import FileFix, FixContext, Unfixed, line_suppresses
from lint_rules.fix.verify import fix_files
from lint_rules.source import decode, split_lines
from lint_rules.vocabulary import DESCRIPTORS, PROPERTY_DECORATORS

#: Decorators after which another decorator must not be added: the result would not be a
#: plain method (and FWD001 never reports these; this is a guard, not a rule).
_NOT_PLAIN = DESCRIPTORS | PROPERTY_DECORATORS


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
        last = (dotted_name(expr) or "").rpartition(".")[2]
        if last in _NOT_PLAIN:
            return f"decorated with @{last}: not a plain method"
        if last == contract.DECORATOR_NAME:
            return f"already decorated with @{last}"
    return None


def fix_source(path: str, old: bytes, diagnostics: Sequence[Diagnostic]) -> FileFix:
    """Decorate the methods named by ``diagnostics`` (FWD001 findings in this file)."""
    result = FileFix(path, old, old)
    module, tail = parse_for_edit(old)
    code = decode(old)
    lines = split_lines(code)
    by_line = defs_by_line(module, code)
    targets: dict[cst.FunctionDef, int] = {}
    ancestors: set[cst.CSTNode] = set()
    for diagnostic in diagnostics:
        hit = by_line.get(diagnostic.line)
        # Python reads identifiers in NFKC (`def ｓtep` defines `step`), as the facts do; LibCST keeps the text
        if hit is None or unicodedata.normalize("NFKC", hit[0].name.value) != diagnostic.symbol.rpartition(".")[2]:
            result.unfixed.append(Unfixed(diagnostic, f"cannot find {diagnostic.symbol} at line {diagnostic.line}"))
            continue
        node, path_to, top = hit
        if line_suppresses(lines[diagnostic.line - 1], diagnostic.line, diagnostic.code):
            result.unfixed.append(Unfixed(diagnostic, "the def line carries # noqa"))
            continue
        reason = _blocker(node)
        if reason is not None:
            result.unfixed.append(Unfixed(diagnostic, reason))
            continue
        targets[node] = top
        ancestors.update(path_to)
        ancestors.add(node)
        result.fixed.append(diagnostic)
    if not targets:
        return result
    edit = ensure_import(module, contract.DECORATOR_MODULE, contract.DECORATOR_NAME, min(targets.values()), code)
    new_module = edit.module.visit(_AddDecorator(set(targets), ancestors, edit.reference))
    result.new = new_module.bytes + tail
    result.may_change = edit.may_change
    return result


def _deferred(context: FixContext, diagnostic: Diagnostic) -> Optional[MethodFacts]:
    """The reported method if it is a generator or an ``async def`` (its body runs later)."""
    facts = context.analysis.facts_for(diagnostic.path)
    cls = facts.class_named(diagnostic.symbol.rpartition(".")[0]) if facts is not None else None
    return next((m for m in cls.methods if (m.generator or m.asynchronous) and m.line == diagnostic.line),
                None) if cls is not None else None


def fix(context: FixContext, diagnostics: Sequence[Diagnostic]) -> tuple[list[FileFix], list[Unfixed]]:
    """A generator or async method is never decorated: the decorator rejects it when the class is
    defined, so the fixed file would no longer import."""
    deferred = {d: _deferred(context, d) for d in diagnostics}
    refused = [d for d, method in deferred.items() if method is not None]
    unfixed = [Unfixed(d, contract.generator_message(d.symbol, deferred[d].asynchronous)) for d in refused]
    rest = sorted(set(diagnostics) - set(refused))
    tasks = [(path, tuple(group)) for path, group in groupby(rest, key=lambda d: d.path)]
    return fix_files(fix_source, tasks, context.jobs), unfixed
