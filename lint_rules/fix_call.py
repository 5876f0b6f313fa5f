"""``--fix-style call``: register entry methods where the model is set up, for classes you
cannot (or do not want to) edit.

For each ``model = fabric.setup(...)`` (also ``fabric.setup_module``, tuple targets such as
``model, opt = fabric.setup(model, opt)``) and each FSDP2 ``fully_shard(model)``, the model's
class is resolved from the same scope (``model = GPT(...)``, ``GPT.from_pretrained(...)``, or a
constructor call passed straight to ``setup``) through the project index. Every unmarked entry
method of that class (or its project bases) that the code after the set-up calls on the model
gets, right after the set-up statement and with its indentation::

    model.mark_forward_method("generate")              # Fabric
    register_fsdp_forward_method(model, "generate")    # FSDP2, plus its import

If the class cannot be resolved, nothing is guessed: the findings for the methods called on
that model are reported as not fixed. Registration marks a method name for the whole run, as
the analyzer reads it, so a finding counts as fixed when its method name was registered.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Sequence

import libcst as cst

from lint_rules import contract
from lint_rules.diagnostics import Diagnostic
from lint_rules.engine import decode
from lint_rules.extract import extract
from lint_rules.facts import FileFacts
from lint_rules.fix_imports import dotted, ensure_import
from lint_rules.fix_result import FileFix, Unfixed
from lint_rules.fix_verify import FixRefused, Plan, verify
from lint_rules.positions import node_positions
from lint_rules.project import ClassRef, ProjectIndex, module_name_for

FSDP_MODULE = "torch.distributed.fsdp"
_SETUP_METHODS = ("setup", "setup_module")
_PREFILTER = re.compile(r"\.setup(?:_module)?\s*\(|fully_shard\s*\(")


@dataclass(eq=False)  # identity: sites are dictionary keys
class Site:
    """One set-up statement and what follows it in its scope."""

    statement: cst.SimpleStatementLine
    path_to: tuple[cst.CSTNode, ...]  # ancestors, module first
    top: int  # index of the top-level statement that contains it
    kind: str  # "fabric" or "fsdp2"
    var: str  # "model", "self.model"
    cls: Optional[str]  # dotted class reference as written (resolved through imports), or None
    called: list[str] = field(default_factory=list)  # method names called on var afterwards
    inline: bool = False  # inside a one-line suite (`if x: m = fabric.setup(m)`): no room for a line


def _resolve(facts: FileFacts, text: str) -> str:
    imports = dict(facts.imports)
    head, _, rest = text.partition(".")
    target = imports.get(head)
    if target is None:
        target = f"{facts.module}.{head}" if facts.module and facts.class_named(head) else head
    return f"{target}.{rest}" if rest else target


def _constructed(call: cst.BaseExpression) -> Optional[str]:
    """``GPT(...)`` -> ``GPT``; ``GPT.from_pretrained(...)`` -> ``GPT.from_pretrained`` (the
    caller tries it with and without the last part)."""
    if isinstance(call, cst.Call):
        return dotted(call.func)
    return None


class _Scan:
    """Finds set-up sites statement by statement; each function body is its own scope."""

    def __init__(self, module: cst.Module) -> None:
        self.module = module
        self.sites: list[Site] = []

    def run(self) -> None:
        body = list(self.module.body)
        bindings: dict[str, Optional[str]] = {}
        fabrics: set[str] = set()
        for index, stmt in enumerate(body):
            self._statement(stmt, index, (self.module,), bindings, fabrics, body[index + 1:], False)

    def _block(self, stmts: Sequence[cst.CSTNode], top: int, path: tuple[cst.CSTNode, ...],
               bindings: dict[str, Optional[str]], fabrics: set[str], after: list[cst.CSTNode],
               inline: bool) -> None:
        stmts = list(stmts)
        for index, stmt in enumerate(stmts):
            self._statement(stmt, top, path, bindings, fabrics, stmts[index + 1:] + after, inline)

    def _statement(self, stmt: cst.CSTNode, top: int, path: tuple[cst.CSTNode, ...],
                   bindings: dict[str, Optional[str]], fabrics: set[str], after: list[cst.CSTNode],
                   inline: bool) -> None:
        if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
            scope_bindings: dict[str, Optional[str]] = {} if isinstance(stmt, cst.FunctionDef) else bindings
            self._suite(stmt.body, top, (*path, stmt), scope_bindings, set(fabrics), [], False)
            return
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                self._small(small, stmt, top, path, bindings, fabrics, after, inline)
            return
        for name in ("body", "orelse", "finalbody"):
            child = getattr(stmt, name, None)
            if isinstance(child, cst.BaseSuite):
                self._suite(child, top, (*path, stmt), bindings, fabrics, after, inline)
            elif isinstance(child, (cst.If, cst.Else, cst.Finally)):
                self._statement(child, top, (*path, stmt), bindings, fabrics, after, inline)
        for handler in [*getattr(stmt, "handlers", ()), *getattr(stmt, "cases", ())]:
            self._suite(handler.body, top, (*path, stmt, handler), bindings, fabrics, after, inline)

    def _suite(self, suite: cst.BaseSuite, top: int, path: tuple[cst.CSTNode, ...],
               bindings: dict[str, Optional[str]], fabrics: set[str], after: list[cst.CSTNode],
               inline: bool) -> None:
        if isinstance(suite, cst.IndentedBlock):
            self._block(suite.body, top, (*path, suite), bindings, fabrics, after, inline)
        elif isinstance(suite, cst.SimpleStatementSuite):
            line = cst.SimpleStatementLine(body=suite.body)
            for small in suite.body:
                self._small(small, line, top, (*path, suite), bindings, fabrics, after, True)

    def _small(self, small: cst.BaseSmallStatement, stmt: cst.SimpleStatementLine, top: int,
               path: tuple[cst.CSTNode, ...], bindings: dict[str, Optional[str]], fabrics: set[str],
               after: list[cst.CSTNode], inline: bool) -> None:
        value: Optional[cst.BaseExpression] = None
        targets: list[cst.BaseExpression] = []
        if isinstance(small, cst.Assign):
            value, targets = small.value, [t.target for t in small.targets]
        elif isinstance(small, cst.AnnAssign) and small.value is not None:
            value, targets = small.value, [small.target]
            annotated = dotted(small.annotation.annotation)
            if annotated and isinstance(small.target, (cst.Name, cst.Attribute)):
                bindings[dotted(small.target) or ""] = annotated
        elif isinstance(small, cst.Expr):
            value = small.value
        if not isinstance(value, cst.Call):
            for target in targets:
                if dotted(target):
                    bindings[dotted(target) or ""] = None
            return
        func = dotted(value.func) or ""
        last = func.rpartition(".")[2]
        receiver = func.rpartition(".")[0]
        positional = [a.value for a in value.args if a.keyword is None]
        fabric = "fabric" in receiver.rpartition(".")[2].lower() or receiver in fabrics
        if last in _SETUP_METHODS and receiver and fabric:
            names = targets[0].elements if targets and isinstance(targets[0], (cst.Tuple, cst.List)) else None
            pairs = (zip([e.value for e in names], positional) if names is not None
                     else zip(targets[:1], positional[:1]))
            for target, arg in pairs:
                var = dotted(target)
                if var is None:
                    continue
                cls = bindings.get(dotted(arg) or "") if dotted(arg) else _constructed(arg)
                bindings[var] = cls
                self._site(stmt, path, top, "fabric", var, cls, after, inline)
            return
        if last == "fully_shard" and positional and dotted(positional[0]):
            var = dotted(positional[0]) or ""
            cls = bindings.get(var)
            for target in targets:
                if dotted(target):
                    bindings[dotted(target) or ""] = cls
            self._site(stmt, path, top, "fsdp2", var, cls, after, inline)
            return
        if last.endswith("Fabric"):
            fabrics.update(dotted(t) or "" for t in targets)
        for target in targets:
            if dotted(target):
                bindings[dotted(target) or ""] = func or None

    def _site(self, stmt: cst.SimpleStatementLine, path: tuple[cst.CSTNode, ...], top: int, kind: str,
              var: str, cls: Optional[str], after: list[cst.CSTNode], inline: bool) -> None:
        code = "".join(self.module.code_for_node(s) for s in after)
        pattern = re.compile(rf"(?<![\w.]){re.escape(var)}\.(\w+)\s*\(")
        called = list(dict.fromkeys(m.group(1) for m in pattern.finditer(code)))
        self.sites.append(Site(stmt, path, top, kind, var, cls, called, inline))


def _mark_text(site: Site, name: str, register: str) -> str:
    if site.kind == "fabric":
        return f'{site.var}.{contract.MARK_METHOD_CALL}("{name}")'
    return f'{register}({site.var}, "{name}")'


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


def _class_ref(index: ProjectIndex, facts: FileFacts, cls: Optional[str]) -> Optional[ClassRef]:
    if not cls:
        return None
    for ref in (cls, cls.rpartition(".")[0]):
        if ref:
            found = index.find_class(_resolve(facts, ref), facts)
            if found is not None:
                return found
    return None


def fix_calls(paths: Sequence[str], index: ProjectIndex, diagnostics: Sequence[Diagnostic]
              ) -> tuple[list[FileFix], list[Unfixed]]:
    """Plan the call-style fixes for a whole run (set-up sites may be in any analysed file),
    with the run's own project index."""
    sources: dict[str, str] = {}
    for path in paths:
        if path not in index.files:
            continue  # unreadable: already reported by the analysis
        try:
            text = decode(Path(path).read_bytes())
        except (OSError, SyntaxError, UnicodeDecodeError, LookupError):
            continue
        if _PREFILTER.search(text):
            sources[path] = text
    by_class: dict[tuple[str, str], list[str]] = {}
    for d in diagnostics:
        by_class.setdefault((d.path, d.symbol.rpartition(".")[0]), []).append(d.symbol.rpartition(".")[2])
    unresolved: dict[str, str] = {}  # method name -> why it could not be registered
    files = [file for path in sorted(sources)
             if (file := _fix_file(path, sources[path], index, by_class, unresolved)) is not None]
    refused = {name: file.path for file in files if file.error is not None for name in file.registered}
    unfixed: list[Unfixed] = []
    for d in diagnostics:
        name = d.symbol.rpartition(".")[2]
        owner = next((f for f in files if f.error is None and name in f.registered), None)
        if owner is not None:
            owner.fixed.append(d)
        elif name in refused:
            unfixed.append(Unfixed(d, f"fix refused in {refused[name]}"))
        elif name in unresolved:
            unfixed.append(Unfixed(d, unresolved[name]))
        else:
            unfixed.append(Unfixed(d, "no fabric.setup() or fully_shard() of its class is followed by a call "
                                      "of it; use --fix-style decorator"))
    return files, unfixed


def _fix_file(path: str, text: str, index: ProjectIndex, by_class: dict[tuple[str, str], list[str]],
              unresolved: dict[str, str]) -> Optional[FileFix]:
    """The registrations for the set-up sites of one file, or ``None`` if it has none to add."""
    old = Path(path).read_bytes()
    try:
        module = cst.parse_module(old)
        facts = index.files[path]
        if not facts.parsed:  # the text prefilter skipped it (a script without classes): read its imports
            module_name, is_package, _ = module_name_for(Path(path))
            facts = extract(text, path, module_name, is_package, locate=False)
    except (cst.ParserSyntaxError, RecursionError):
        return None
    scan = _Scan(module)
    scan.run()
    entry_names = {name for names in by_class.values() for name in names}
    relevant = [s for s in scan.sites if any(name in entry_names for name in s.called)]
    if not relevant:
        return None
    anchors = {s: (s.path_to[-1] if s.inline else s.statement) for s in relevant}
    lines = node_positions(module, set(anchors.values()), module)
    plan: list[tuple[Site, list[str]]] = []
    for site in relevant:
        calls = [name for name in site.called if name in entry_names]
        where = f"{path}:{lines.get(anchors[site], (0, 0))[0]}"
        ref = _class_ref(index, facts, site.cls)
        if ref is None:
            for name in calls:
                unresolved.setdefault(name, f"the class of `{site.var}` set up at {where} cannot be resolved; "
                                            f"register the method there by hand")
            continue
        own = {name for item in index.mro(ref) for name in by_class.get(item.key, ())}
        names = [name for name in calls if name in own]
        if names and site.inline:
            for name in names:
                unresolved.setdefault(name, f"the set-up at {where} shares its line with its block: "
                                            f"no room for a registration")
            continue
        if names:
            plan.append((site, names))
    if not plan:
        return None
    register, edit_module, extended, inserted = contract.FSDP_REGISTER_CALL, module, None, []
    fsdp = [site for site, _ in plan if site.kind == "fsdp2"]
    if fsdp:
        edit = ensure_import(module, FSDP_MODULE, contract.FSDP_REGISTER_CALL, min(s.top for s in fsdp), text)
        edit_module, register, extended = edit.module, edit.reference, edit.extended
        if edit.inserted is not None:
            inserted.append(edit.inserted)
    after: dict[cst.CSTNode, list[cst.SimpleStatementLine]] = {}
    ancestors: set[cst.CSTNode] = set()
    result = FileFix(path, old, old)
    for site, names in plan:
        for name in names:
            call = _mark_text(site, name, register)
            after.setdefault(site.statement, []).append(
                cst.SimpleStatementLine(body=[cst.Expr(cst.parse_expression(call))]))
            inserted.append(call.encode("utf-8"))
            if name not in result.registered:
                result.registered.append(name)
        ancestors.update(site.path_to)
    new = edit_module.visit(_Insert(after, ancestors)).bytes
    try:
        verify(old, new, Plan(inserted=inserted, extended=extended), path)
    except FixRefused as refused:
        result.error = f"fix not applied: {refused}"
        return result
    result.new = new
    return result
