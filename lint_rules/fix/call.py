"""Registering entry methods where the model is set up: FWD001's ``--fix-style call`` (for
classes you do not want to edit) and FWD002's fixer (for classes you cannot edit).

For each set-up site in the facts (``wrap_sites``: ``model = fabric.setup(...)``, FSDP2's
``fully_shard(model)``) of a file the run was given, the model's class is resolved through the
project view. Every unmarked entry method of that class (or its bases) that the code after the
set-up calls on the model gets, right after the set-up statement and with its indentation::

    model.mark_forward_method("generate")              # Fabric
    register_fsdp_forward_method(model, "generate")    # FSDP2, plus its import

If the class cannot be resolved, nothing is guessed: the findings for the methods called on
that model are reported as not fixed. A registration covers the class set up, its bases and its
subclasses (as the analyzer reads it), so a finding counts as fixed only when a registration covers its class:
another class with a method of the same name stays reported.
"""

from __future__ import annotations

from itertools import groupby
from pathlib import Path
from typing import Optional, Sequence

import libcst as cst

from lint_rules import contract
from lint_rules.diagnostics import Diagnostic
from lint_rules.facts.model import FileFacts, WrapSite
from lint_rules.fix.imports import ensure_import
from lint_rules.fix.locate import parse_for_edit, simple_statements_by_line
from lint_rules.fix.result import FileFix, FixContext, Unfixed
from lint_rules.fix.verify import FixRefused, Plan, planned, verify
from lint_rules.project import ProjectIndex
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


def fix(context: FixContext, diagnostics: Sequence[Diagnostic]) -> tuple[list[FileFix], list[Unfixed]]:
    """Plan the call-style fixes for a whole run (set-up sites may be in any given file)."""
    by_class: dict[tuple[str, str], list[str]] = {}
    for d in diagnostics:
        by_class.setdefault((d.path, d.symbol.rpartition(".")[0]), []).append(d.symbol.rpartition(".")[2])
    unresolved: dict[str, str] = {}  # method name -> why it could not be registered
    files: list[tuple[FileFix, set[tuple[str, str, str]]]] = []  # with the (path, class, method)s covered
    for path in sorted(set(context.paths)):
        view = context.analysis.view_for(path)
        facts = view.files.get(path) if view is not None else None
        if facts is None or not facts.wrap_sites:
            continue
        covered: set[tuple[str, str, str]] = set()
        file = _fix_file(path, facts, view, by_class, unresolved, covered)  # type: ignore[arg-type]
        if file is not None:
            files.append((file, covered))
    unfixed: list[Unfixed] = []
    for d in diagnostics:
        name = d.symbol.rpartition(".")[2]
        key = (d.path, d.symbol.rpartition(".")[0], name)
        owner = next((f for f, covered in files if f.error is None and key in covered), None)
        refused = next((f for f, covered in files if f.error is not None and key in covered), None)
        if owner is not None:
            owner.fixed.append(d)
        elif refused is not None:
            unfixed.append(Unfixed(d, f"fix refused in {refused.path}"))
        elif name in unresolved:
            unfixed.append(Unfixed(d, unresolved[name]))
        else:
            unfixed.append(Unfixed(d, "no set-up of its class that routes registrations (fabric.setup, fully_shard, "
                                      "DDP, FSDP; not DataParallel) is followed by a call of it; "
                                      "use --fix-style decorator"))
    return [f for f, _ in files], unfixed


def _fix_file(path: str, facts: FileFacts, view: ProjectIndex, by_class: dict[tuple[str, str], list[str]],
              unresolved: dict[str, str], covered: set[tuple[str, str, str]]) -> Optional[FileFix]:
    """The registrations for the set-up sites of one file, or ``None`` if it has none to add;
    ``covered`` gets the (path, class, method) of every finding they fix."""
    entry_names = {name for names in by_class.values() for name in names}
    plan: list[tuple[WrapSite, list[str]]] = []
    for site in facts.wrap_sites:
        calls = [name for name in site.called if name in entry_names]
        if not calls:
            continue
        where = f"{path}:{site.line}"
        ref = view.find_constructed(site.cls, facts) if site.cls else None
        if ref is None:
            for name in calls:
                unresolved.setdefault(name, f"the class of `{site.var}` set up at {where} cannot be resolved; "
                                            f"register the method there by hand")
            continue
        own = {(*item.key, name) for item in view.mro(ref) for name in by_class.get(item.key, ())}
        names = [name for name in calls if any(key[2] == name for key in own)]
        if names and site.inline:
            for name in names:
                unresolved.setdefault(name, f"the set-up at {where} shares its line with its block: "
                                            f"no room for a registration")
            continue
        if names:
            plan.append((site, names))
            related = [*view.mro(ref), *view.subclasses(ref)]  # whom the analysis applies the registration to
            covered.update((*item.key, name) for item in related for name in by_class.get(item.key, ()) if name in names)
    return register_after_sites(path, plan) if plan else None


#: Where the registration function of each set-up kind comes from (Fabric's is a method).
_REGISTER_IMPORTS = {"fsdp2": (FSDP_MODULE, contract.FSDP_REGISTER_CALL),
                     "ddp": (contract.DECORATOR_MODULE, contract.MARK_METHOD_CALL),
                     "fsdp1": (contract.DECORATOR_MODULE, contract.MARK_METHOD_CALL)}


def register_after_sites(path: str, plan: Sequence[tuple[WrapSite, Sequence[str]]]) -> FileFix:
    """Insert, right after each set-up statement, one registration per method name: Fabric's
    ``model.mark_forward_method("m")``, FSDP2's ``register_fsdp_forward_method(model, "m")``, or
    ``runtime_shim``'s ``mark_forward_method(ddp, "m")`` for DDP and FSDP1, with the imports."""
    old = Path(path).read_bytes()
    text = decode(old)
    module, tail = parse_for_edit(old)
    statements = simple_statements_by_line(module)
    result = FileFix(path, old, old)
    inserted: list[bytes] = []
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
        inserted.extend(edit.lines)
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
            inserted.append(planned(line, module.encoding))
        ancestors.update(path_to)
    new = module.visit(_Insert(after, ancestors)).bytes + tail
    try:
        verify(old, new, Plan(inserted=inserted, extended=extended), path)
    except FixRefused as refused:
        result.error = f"fix not applied: {refused}"
        return result
    result.new = new
    return result


def fix_wrapped_calls(context: FixContext, diagnostics: Sequence[Diagnostic]) -> tuple[list[FileFix], list[Unfixed]]:
    """FWD002's fixer (both styles: the class is not yours to decorate): register each called
    method right after the set-up of the model it is called on."""
    files: list[FileFix] = []
    unfixed: list[Unfixed] = []
    for path, group in groupby(sorted(diagnostics), key=lambda d: d.path):
        found = list(group)
        view = context.analysis.view_for(path)
        facts = view.files.get(path) if view is not None else None
        plan: dict[int, list[str]] = {}
        fixable: list[Diagnostic] = []
        for d in found:
            hit = next((c for c in facts.wrapped_calls if (c.line, c.col) == (d.line, d.col)), None) if facts else None
            site = facts.wrap_sites[hit.site] if facts is not None and hit is not None else None
            if hit is None or site is None:
                unfixed.append(Unfixed(d, "cannot find the call in the file's facts"))
            elif not site.var or site.inline:
                unfixed.append(Unfixed(d, f"the set-up at line {site.line} has no variable or no room for a "
                                          f"registration after it; register the method by hand"))
            else:
                names = plan.setdefault(hit.site, [])
                if hit.method not in names:
                    names.append(hit.method)
                fixable.append(d)
        if not plan or facts is None:
            continue
        file = register_after_sites(path, [(facts.wrap_sites[index], names) for index, names in sorted(plan.items())])
        if file.error is None:
            file.fixed.extend(fixable)
        else:
            file.unfixed.extend(Unfixed(d, "fix refused") for d in fixable)
        files.append(file)
    return files, unfixed
