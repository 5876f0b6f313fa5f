"""Registering entry methods right after the statement that sets the model up: the edit shared
by FWD001's ``call`` style (for classes you do not want to edit) and FWD002's fix (for classes
you cannot edit)::

    model.mark_forward_method("generate")              # Fabric
    register_fsdp_forward_method(model, "generate")    # FSDP2, plus its import
    mark_forward_method(ddp, "generate")               # DDP, FSDP1: runtime_shim's, plus its import
"""

from __future__ import annotations

from typing import Optional, Sequence

import libcst as cst

from lint_rules import contract
from lint_rules.facts.model import WrapSite
from lint_rules.fix.imports import ensure_import
from lint_rules.fix.locate import parse_for_edit, simple_statements_by_line
from lint_rules.fix.result import FileFix
from lint_rules.source import decode

FSDP_MODULE = "torch.distributed.fsdp"


class _Insert(cst.CSTTransformer):
    """Inserts statements after given statements, descending only towards them."""

    def __init__(self, after: dict[cst.CSTNode, list[cst.SimpleStatementLine]], ancestors: set[cst.CSTNode]):
        self.after = after
        self.ancestors = ancestors

    def on_visit(self, node: cst.CSTNode) -> bool:
        return isinstance(node, cst.Module) or node in self.ancestors

    def _body(self, original: Sequence[cst.CSTNode], updated: Sequence[cst.CSTNode]) -> list[cst.CSTNode]:
        body: list[cst.CSTNode] = []
        for old, new in zip(original, updated):
            body.append(new)
            body.extend(self.after.get(old, ()))
        return body

    def leave_IndentedBlock(self, original_node: cst.IndentedBlock,
                            updated_node: cst.IndentedBlock) -> cst.IndentedBlock:
        return updated_node.with_changes(body=self._body(original_node.body, updated_node.body))

    def leave_Module(self, original_node: cst.Module, updated_node: cst.Module) -> cst.Module:
        return updated_node.with_changes(body=self._body(original_node.body, updated_node.body))


#: Where the registration function of each set-up kind comes from (Fabric's is a method).
_REGISTER_IMPORTS = {"fsdp2": (FSDP_MODULE, contract.FSDP_REGISTER_CALL),
                     "ddp": (contract.DECORATOR_MODULE, contract.MARK_METHOD_CALL),
                     "fsdp1": (contract.DECORATOR_MODULE, contract.MARK_METHOD_CALL),
                     # DDP, FSDP1 or FSDP2 as the launch config says: runtime_shim's function takes each
                     "accelerate": (contract.DECORATOR_MODULE, contract.MARK_METHOD_CALL)}


def register_after_sites(path: str, plan: Sequence[tuple[WrapSite, Sequence[str]]], jobs: int = 1) -> FileFix:
    """Insert, right after each set-up statement, one registration per method name: Fabric's
    ``model.mark_forward_method("m")``, FSDP2's ``register_fsdp_forward_method(model, "m")``, or
    ``runtime_shim``'s ``mark_forward_method(ddp, "m")`` for DDP and FSDP1, with the imports. Parsed
    and edited in a parser worker (``isolated``), as every fix is."""
    from lint_rules.fix import isolated, verify

    return isolated.run(_register, [(path, (tuple(plan),))], jobs, [()], verify.text_problem)[0]


def _register(path: str, old: bytes, plan: Sequence[tuple[WrapSite, Sequence[str]]]) -> FileFix:
    """``register_after_sites``' edit of ``old``, the text of the file at ``path`` (in a worker)."""
    from lint_rules.source import one_line

    try:
        return _edit(path, old, plan)
    except (cst.ParserSyntaxError, RecursionError, SyntaxError, UnicodeDecodeError) as error:
        return FileFix(path, old, old, error=f"fix not applied: {one_line(error)}")


def _edit(path: str, old: bytes, plan: Sequence[tuple[WrapSite, Sequence[str]]]) -> FileFix:
    text = decode(old)
    module, tail = parse_for_edit(old)
    statements = simple_statements_by_line(module)
    result = FileFix(path, old, old)
    extended: Optional[tuple[int, int]] = None
    references: dict[str, str] = {}
    edits = 0
    needed: dict[tuple[str, str], set[str]] = {}
    for site, _ in plan:
        if site.kind in _REGISTER_IMPORTS:
            needed.setdefault(_REGISTER_IMPORTS[site.kind], set()).add(site.kind)
    original = module
    for (source, name), kinds in sorted(needed.items()):
        # statement indices and text are the original's; an import added before shifts them
        shift = len(module.body) - len(original.body)
        tops = [statements[site.line][2] + shift for site, _ in plan if site.kind in kinds and site.line in statements]
        edit = ensure_import(module, source, name, min(tops, default=len(module.body)),
                             text if module is original else module.code)
        if edit.inserted is not None or edit.extended is not None:
            edits += 1
        if edits > 1 and (edit.extended is not None or extended is not None):
            result.error = "fix not applied: two imports would have to change; add the registrations by hand"
            return result
        module = edit.module
        references.update((kind, edit.reference) for kind in kinds)
        extended = edit.extended or extended
    after: dict[cst.CSTNode, list[cst.SimpleStatementLine]] = {}
    ancestors: set[cst.CSTNode] = set()
    for site, names in plan:
        found = statements.get(site.line)
        if found is None:
            result.error = f"fix not applied: cannot find the set-up statement at line {site.line}"
            return result
        statement, path_to, _ = found
        for name in names:
            if site.kind == "fabric":
                line = f'{site.var}.{contract.MARK_METHOD_CALL}("{name}")'
            else:
                line = f'{references[site.kind]}({site.var}, "{name}")'
            after.setdefault(statement, []).append(cst.SimpleStatementLine(body=[cst.Expr(cst.parse_expression(line))]))
        ancestors.update(path_to)
    result.new = module.visit(_Insert(after, ancestors)).bytes + tail
    result.may_change = frozenset(range(extended[0], extended[1] + 1)) if extended else frozenset()
    return result
