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
from lint_rules.fix.locate import defs_by_line, dotted_name, parse_for_edit, simple_statements_by_line
from lint_rules.fix.result import FileFix, FixContext, Unfixed, line_suppresses
from lint_rules.fix.verify import fix_files
from lint_rules.source import decode, split_lines
from lint_rules.vocabulary import DESCRIPTORS, PROPERTY_DECORATORS

#: Decorators after which another decorator must not be added: the result would not be a
#: plain method (and FWD001 never reports these; this is a guard, not a rule).
_NOT_PLAIN = DESCRIPTORS | PROPERTY_DECORATORS


class _AddDecorator(cst.CSTTransformer):
    """Adds the decorator to ``targets``, descending only along the paths that lead to them."""

    def __init__(self, targets: set[cst.CSTNode], ancestors: set[cst.CSTNode], reference: str) -> None:
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

    def leave_Assign(self, original_node: cst.Assign, updated_node: cst.Assign) -> cst.Assign:
        """``decode = decode_function`` -> ``decode = forward_entry(decode_function)``: the call is
        what the decorator does."""
        if original_node not in self.targets:
            return updated_node
        value = updated_node.value
        if len(value.lpar) == 1:  # `(\n    decode_function  # why\n)`: the call's parentheses take over
            call = cst.Call(expression(self.reference), [cst.Arg(value.with_changes(lpar=[], rpar=[]),
                                                                 whitespace_after_arg=value.rpar[0].whitespace_before)],
                            whitespace_before_args=value.lpar[0].whitespace_after)
        else:
            call = cst.Call(expression(self.reference), [cst.Arg(value)])
        return updated_node.with_changes(value=call)


def _alias(hit: Optional[tuple[cst.CSTNode, tuple[cst.CSTNode, ...], int]],
           name: str) -> Optional[tuple[cst.Assign, tuple[cst.CSTNode, ...], int]]:
    """The ``name = function`` statement of a class body on the reported line, and the path to it."""
    if hit is None or not isinstance(hit[0], cst.SimpleStatementLine) or len(hit[0].body) != 1:
        return None
    assign = hit[0].body[0]
    if not (isinstance(assign, cst.Assign) and len(assign.targets) == 1
            and isinstance(assign.targets[0].target, cst.Name)
            and unicodedata.normalize("NFKC", assign.targets[0].target.value) == name
            and dotted_name(assign.value) is not None):
        return None
    return assign, (*hit[1], hit[0]), hit[2]


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
    statements: Optional[dict[int, tuple[cst.CSTNode, tuple[cst.CSTNode, ...], int]]] = None
    targets: dict[cst.CSTNode, int] = {}
    ancestors: set[cst.CSTNode] = set()
    rewritten: set[int] = set()  # the lines of the aliases whose value is wrapped
    for diagnostic in diagnostics:
        name = diagnostic.symbol.rpartition(".")[2]
        hit = by_line.get(diagnostic.line)
        if hit is None:  # a class attribute alias: `decode = decode_function`
            statements = simple_statements_by_line(module) if statements is None else statements
            found = _alias(statements.get(diagnostic.line), name)
            if found is not None:
                if line_suppresses(lines[diagnostic.line - 1], diagnostic.line, diagnostic.code):
                    result.unfixed.append(Unfixed(diagnostic, "the line carries # noqa"))
                    continue
                assign, path_to, top = found
                targets[assign] = top
                ancestors.update(path_to)
                size = len(split_lines(module.code_for_node(assign)))
                rewritten.update(range(diagnostic.line, diagnostic.line + size))
                result.fixed.append(diagnostic)
                continue
        # Python reads identifiers in NFKC (`def ｓtep` defines `step`), as the facts do; LibCST keeps the text
        if hit is None or unicodedata.normalize("NFKC", hit[0].name.value) != name:
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
    result.may_change = edit.may_change | rewritten
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
