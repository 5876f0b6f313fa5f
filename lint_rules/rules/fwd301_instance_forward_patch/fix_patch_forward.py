"""FWD301's fix: ``m.forward = types.MethodType(f, m)`` -> ``patch_forward(m, f)``.

Only the plain form is rewritten (the facts' ``simple`` flag: one statement alone on its line,
``f`` a plain name, the same object bound and patched). The statement keeps its indentation,
comments and line ending; ``patch_forward`` is imported from ``runtime_shim`` with
``imports.ensure_import``. The ``import types`` (or ``from types import MethodType``) that the
rewrite leaves unused goes too (flake8's F401 otherwise), with the blank line that set its
section apart; it stays while anything else in the module uses the name. Every other form is
reported as not fixed, with the reason.
"""

from __future__ import annotations

from itertools import groupby
from typing import Optional, Sequence

import libcst as cst

from lint_rules import contract
from lint_rules.diagnostics import Diagnostic
from lint_rules.fix.imports import ensure_import, expression, remove_unused_import
from lint_rules.fix.locate import parse_for_edit, simple_statements_by_line
from lint_rules.fix.result import FileFix, FixContext, Unfixed, line_suppresses
from lint_rules.fix.verify import fix_files
from lint_rules.source import decode, split_lines

FUNCTION = "patch_forward"


class _Rewrite(cst.CSTTransformer):
    """Replaces the small statement of each target line, descending only towards them."""

    def __init__(self, targets: dict[cst.SimpleStatementLine, cst.BaseSmallStatement], ancestors: set[cst.CSTNode]):
        self.targets = targets
        self.ancestors = ancestors

    def on_visit(self, node: cst.CSTNode) -> bool:
        return isinstance(node, cst.Module) or node in self.ancestors

    def leave_SimpleStatementLine(self, original_node: cst.SimpleStatementLine,
                                  updated_node: cst.SimpleStatementLine) -> cst.SimpleStatementLine:
        new = self.targets.get(original_node)
        return updated_node.with_changes(body=[new]) if new is not None else updated_node


def _call(assign: cst.Assign, reference: str) -> cst.Expr:
    """``patch_forward(<receiver>, <function>)`` from ``<receiver>.forward = MethodType(<function>, <receiver>)``."""
    target = assign.targets[0].target
    value = assign.value
    assert isinstance(target, cst.Attribute) and isinstance(value, cst.Call)
    args = [cst.Arg(target.value, comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))),
            cst.Arg(value.args[0].value)]
    return cst.Expr(cst.Call(func=expression(reference), args=args))


def fix_source(path: str, old: bytes, diagnostics: Sequence[Diagnostic]) -> FileFix:
    result = FileFix(path, old, old)
    module, tail = parse_for_edit(old)
    code = decode(old)
    lines = split_lines(code)
    by_line = simple_statements_by_line(module)
    chosen: dict[cst.SimpleStatementLine, tuple[cst.Assign, int, int]] = {}
    ancestors: set[cst.CSTNode] = set()
    for diagnostic in diagnostics:
        hit = by_line.get(diagnostic.line)
        node = hit[0] if hit is not None else None
        small = node.body[0] if isinstance(node, cst.SimpleStatementLine) and len(node.body) == 1 else None
        if not isinstance(small, cst.Assign):
            result.unfixed.append(Unfixed(diagnostic, f"cannot find the statement at line {diagnostic.line}"))
            continue
        if line_suppresses(lines[diagnostic.line - 1], diagnostic.line, diagnostic.code):
            result.unfixed.append(Unfixed(diagnostic, "the line carries # noqa"))
            continue
        assert hit is not None and isinstance(node, cst.SimpleStatementLine)
        chosen[node] = (small, hit[2], diagnostic.line)
        ancestors.update(hit[1])
        result.fixed.append(diagnostic)
    if not chosen:
        return result
    edit = ensure_import(module, contract.DECORATOR_MODULE, FUNCTION, min(top for _, top, _ in chosen.values()), code)
    targets = {node: _call(assign, edit.reference) for node, (assign, _, _) in chosen.items()}
    new_module = edit.module.visit(_Rewrite(targets, ancestors))
    may_change = set(edit.may_change) | {line for _, _, line in chosen.values()}
    own_lines = {node: line for line, (node, path, _) in by_line.items()
                 if not path and isinstance(node, cst.SimpleStatementLine)}
    for binding in sorted({_method_type_binding(assign) for assign, _, _ in chosen.values()} - {None}):
        removal = remove_unused_import(new_module, module, own_lines, "types", *binding, inserted=edit.inserted,
                                       inserted_blanks=edit.blank_lines)
        if removal is not None:
            new_module = removal.module
            may_change.update(removal.removed)
    result.new = new_module.bytes + tail
    result.may_change = frozenset(may_change)
    return result


def _method_type_binding(assign: cst.Assign) -> Optional[tuple[str, str]]:
    """The import the rewritten ``MethodType`` came through, as (name imported from ``types``,
    local name): ``types.MethodType`` -> ("", "types"), ``MT`` -> ("MethodType", "MT")."""
    func = assign.value.func if isinstance(assign.value, cst.Call) else None
    if isinstance(func, cst.Name):
        return ("MethodType", func.value)
    if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name):
        return ("", func.value.value)
    return None


def fix(context: FixContext, diagnostics: Sequence[Diagnostic]) -> tuple[list[FileFix], list[Unfixed]]:
    """Rewrite the plain ``MethodType`` patches; say why every other one stays."""
    fixable, unfixed = [], []
    for d in diagnostics:
        facts = context.analysis.facts_for(d.path)
        patch = next((p for p in facts.forward_patches if p.line == d.line and p.col == d.col), None) if facts else None
        if patch is not None and patch.simple:
            fixable.append(d)
        elif patch is not None and patch.form == "rename":
            unfixed.append(Unfixed(d, "a class renamed through an instance has no mechanical replacement; "
                                      f"use {contract.DECORATOR_MODULE}.{FUNCTION}(obj, fn, name=...)"))
        else:
            unfixed.append(Unfixed(d, f"only `m.forward = types.MethodType(f, m)` with a plain function name is "
                                      f"rewritten to {FUNCTION}(m, f) automatically"))
    tasks = [(path, tuple(group)) for path, group in groupby(sorted(fixable), key=lambda d: d.path)]
    return fix_files(fix_source, tasks, context.jobs), unfixed
