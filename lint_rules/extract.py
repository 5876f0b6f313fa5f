"""The one LibCST pass over a file: source text -> ``FileFacts``.

Names are resolved through the file's own imports (a small alias map, no scope analysis);
method bodies are read by ``method_scan``; lines come from ``positions``.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Optional, Sequence

import libcst as cst

from lint_rules import contract
from lint_rules.cst_walk import dotted_name, nested_statements, statements, string_value
from lint_rules.facts import (
    DELEGATE_CALL, SRC_ANNOTATION, SRC_MODULE, ClassFacts, FileFacts, Mark, MethodFacts, Source, Use,
)
from lint_rules.method_scan import MethodScan
from lint_rules.noqa import noqa_lines
from lint_rules.positions import def_positions, node_positions

_QUOTED_PRIVATE_RE = re.compile(r"""["'](_[A-Za-z]\w*)["']""")


class FileScan:
    def __init__(self, source: str, module: str, is_package: bool):
        self.source = source
        self.module = module
        self.package = module if is_package else module.rpartition(".")[0]
        self.imports: dict[str, str] = {}
        self.stars: list[str] = []
        self.top_classes: set[str] = set()
        self.def_names: list[cst.FunctionDef] = []
        self.functions: dict[str, cst.FunctionDef] = {}  # module-level functions by name
        self.classes: list[tuple[cst.ClassDef, str, list, list, list]] = []
        self.marks: list[tuple[cst.CSTNode, str]] = []
        self.mark_text = contract.MARK_METHOD_CALL in source or contract.FSDP_REGISTER_CALL in source

    # -- names -----------------------------------------------------------------------------
    def resolve(self, dotted: str) -> str:
        head, _, rest = dotted.partition(".")
        target = self.imports.get(head)
        if target is None:
            if head in self.top_classes:
                target = f"{self.module}.{head}" if self.module else head
            else:
                return dotted
        return f"{target}.{rest}" if rest else target

    def dotted_ref(self, expr: Optional[cst.BaseExpression]) -> Optional[str]:
        if expr is None:
            return None
        dotted = dotted_name(expr)
        return self.resolve(dotted) if dotted else None

    def annotation_ref(self, annotation: Optional[cst.Annotation]) -> str:
        if annotation is None:
            return ""
        expr: cst.BaseExpression = annotation.annotation
        if isinstance(expr, cst.SimpleString):  # "nn.Module | None", "Optional[Encoder]"
            names = re.findall(r"[A-Za-z_][\w.]*", string_value(expr) or "")
            names = [n for n in names if n.rsplit(".", 1)[-1] not in ("None", "Optional", "Union")]
            return self.resolve(names[0]) if names else ""
        while True:
            if isinstance(expr, cst.BinaryOperation):  # X | None
                left = self.dotted_ref(expr.left)
                expr = expr.right if left in (None, "None") else expr.left
            elif isinstance(expr, cst.Subscript) and (dotted_name(expr.value) or "").rsplit(".", 1)[-1] in (
                    "Optional", "Union") and expr.slice:
                first = expr.slice[0].slice
                expr = first.value if isinstance(first, cst.Index) else expr.value
            else:
                return self.dotted_ref(expr) or ""

    def absolute(self, module: Optional[cst.BaseExpression], dots: int) -> str:
        name = dotted_name(module) if module is not None else ""
        if not dots:
            return name or ""
        parts = self.package.split(".") if self.package else []
        base = parts[: len(parts) - (dots - 1)] if dots > 1 else parts
        return ".".join([*base, name] if name else base)

    def on_import(self, node: cst.CSTNode) -> None:
        if isinstance(node, cst.Import):
            for alias in node.names:
                full = dotted_name(alias.name) or ""
                if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                    self.imports[alias.asname.name.value] = full
                else:
                    head = full.split(".", 1)[0]
                    self.imports.setdefault(head, head)
        elif isinstance(node, cst.ImportFrom):
            base = self.absolute(node.module, len(node.relative))
            if isinstance(node.names, cst.ImportStar):
                self.stars.append(base)
                return
            for alias in node.names:
                name = dotted_name(alias.name) or ""
                local = alias.asname.name.value if alias.asname is not None and isinstance(
                    alias.asname.name, cst.Name) else name
                self.imports[local] = f"{base}.{name}" if base else name

    def on_mark(self, call: cst.Call, func_name: str) -> None:
        args = [a for a in call.args if a.keyword is None]
        is_method = isinstance(call.func, cst.Attribute) and func_name == contract.MARK_METHOD_CALL
        arg = args[0] if is_method and args else (args[1] if len(args) > 1 else None)
        keyword = next((a for a in call.args if a.keyword is not None and a.keyword.value in (
            "method", "method_name", "method_or_name")), None)
        arg = arg or keyword
        if arg is None:
            return
        value = arg.value
        name = string_value(value)
        if name is None and isinstance(value, cst.Attribute):
            name = value.attr.value
        if name:
            self.marks.append((call, name))

    # -- structure -------------------------------------------------------------------------
    def scan_module(self, module: cst.Module) -> None:
        for stmt in module.body:
            if isinstance(stmt, cst.ClassDef):
                self.top_classes.add(stmt.name.value)
        self.scan_statements(module.body, "")

    def scan_statements(self, body: Sequence[cst.CSTNode], prefix: str) -> None:
        """Statements outside classes: only imports, classes, defs (and marks) matter, and those
        are statements, so expressions are walked only when the text has a registration call."""
        for stmt in body:
            kind = type(stmt)
            if kind is cst.ClassDef:
                self.scan_class(stmt, prefix)  # type: ignore[arg-type]
            elif kind is cst.FunctionDef:
                self.def_names.append(stmt)  # type: ignore[arg-type]
                if not prefix:
                    self.functions[stmt.name.value] = stmt  # type: ignore[attr-defined]
                inner = f"{prefix}{stmt.name.value}.<locals>."  # type: ignore[attr-defined]
                if self.mark_text:
                    MethodScan(self, None, {}, inner).scan(stmt.body)  # type: ignore[attr-defined]
                else:
                    self.scan_statements(statements(stmt.body), inner)  # type: ignore[attr-defined]
            elif kind is cst.SimpleStatementLine:
                for small in stmt.body:  # type: ignore[attr-defined]
                    if isinstance(small, (cst.Import, cst.ImportFrom)):
                        self.on_import(small)
                    elif self.mark_text:
                        MethodScan(self, None, {}, prefix).scan(small)
            else:  # if / try / with / for / while / match: their bodies hold statements
                if self.mark_text:
                    MethodScan(self, None, {}, prefix).scan(stmt)
                else:
                    for block in nested_statements(stmt):
                        self.scan_statements(block, prefix)

    def scan_class(self, node: cst.ClassDef, prefix: str) -> None:
        qualname = prefix + node.name.value
        bases = [self.resolve(d) for d in (dotted_name(a.value) for a in node.bases if a.keyword is None) if d]
        methods: list = []
        attrs: list[tuple[str, list[Source]]] = []
        self.classes.append((node, qualname, bases, methods, attrs))
        body = node.body.body if isinstance(node.body, cst.IndentedBlock) else ()
        for stmt in body:
            if isinstance(stmt, cst.FunctionDef):
                self.def_names.append(stmt)
                methods.append(self.scan_method(stmt, attrs, qualname + "."))
            elif isinstance(stmt, cst.ClassDef):
                self.scan_class(stmt, qualname + ".")
            elif isinstance(stmt, cst.SimpleStatementLine):
                for small in stmt.body:
                    if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name):
                        ref = self.annotation_ref(cst.Annotation(small.annotation.annotation))
                        attrs.append((small.target.value, [Source(SRC_ANNOTATION, ref)]))
                    elif isinstance(small, (cst.Import, cst.ImportFrom)):
                        self.on_import(small)
            else:  # if/try blocks in a class body: scan for defs and marks, not as methods
                MethodScan(self, None, {}, qualname + ".").scan(stmt)

    def scan_method(self, node: cst.FunctionDef, attrs: list, prefix: str) -> tuple:
        decorators = tuple(self.resolve(dotted_name(_decorator_callee(d)) or "?") for d in node.decorators)
        kind = "method"
        for dec in decorators:
            last = dec.rsplit(".", 1)[-1]
            if last in ("staticmethod", "classmethod"):
                kind = last
            elif last in ("property", "cached_property", "setter", "getter", "deleter"):
                kind = "property"
        params = node.params
        positional = [*params.posonly_params, *params.params]
        self_name = positional[0].name.value if positional and kind != "staticmethod" else None
        if kind == "classmethod":
            self_name = None
        all_params = [*positional, *params.kwonly_params]
        for extra in (params.star_arg, params.star_kwarg):
            if isinstance(extra, cst.Param):
                all_params.append(extra)
        by_name = {p.name.value: p for p in all_params if p.name.value != self_name}
        scan = MethodScan(self, self_name, by_name, f"{prefix}{node.name.value}.<locals>.")
        scan.scan(node.body)
        scan.resolve_local_calls()
        for name, value in scan.assigned:
            attrs.append((name, scan.sources(value)))
        for name in scan.registered:
            attrs.append((name, [Source(SRC_MODULE)]))
        return (node, kind, decorators, scan.uses, tuple(dict.fromkeys(scan.returns)))

    # -- result ----------------------------------------------------------------------------
    def facts(self, path: str, module_node: cst.Module, locate: bool) -> FileFacts:
        defs = def_positions(self.source, [d.name.value for d in self.def_names])
        if defs is None:  # a `def` inside a string fooled the regex: locate them by codegen
            found = node_positions(module_node, [d.name for d in self.def_names], module_node)
            defs = [found[d.name] for d in self.def_names]
        def_pos = dict(zip(self.def_names, defs))
        classes = []
        for _, qualname, bases, methods, attrs in self.classes:
            method_facts = tuple(
                MethodFacts(name=fn.name.value, line=def_pos[fn][0], col=def_pos[fn][1], kind=kind,
                            decorators=decorators, uses=_located(fn, kind, uses, def_pos[fn][0], module_node)
                            if locate else tuple(use for _, use in uses),
                            returns=returns)
                for fn, kind, decorators, uses, returns in methods
            )
            merged: dict[str, list[Source]] = {}
            for name, sources in attrs:
                merged.setdefault(name, []).extend(sources)
            classes.append(ClassFacts(
                qualname=qualname, bases=tuple(bases), methods=method_facts,
                attrs=tuple((k, tuple(dict.fromkeys(v))) for k, v in merged.items()),
            ))
        imports = tuple(self.imports.items()) + tuple(("*", star) for star in self.stars)
        delegates = self.delegates(def_pos, module_node, locate)
        mark_pos = node_positions(module_node, [n for n, _ in self.marks], module_node) if self.marks else {}
        marks = tuple(Mark(name, mark_pos[node][0]) for node, name in self.marks)
        return FileFacts(path=path, module=self.module, imports=imports, classes=tuple(classes),
                         marks=marks, noqa=noqa_lines(self.source),
                         quoted=tuple(sorted(set(_QUOTED_PRIVATE_RE.findall(self.source)))),
                         delegates=delegates)

    def delegates(self, def_pos: dict, module_node: cst.Module, locate: bool) -> tuple[tuple[int, MethodFacts], ...]:
        """Read the module-level functions that methods pass ``self`` to, with that parameter
        standing for self (SpeechT5's ``generate`` is ``return _generate_speech(self, ...)``)."""
        wanted = {(use.name, int(use.method)) for *_, methods, _ in self.classes
                  for method in methods for _, use in method[3] if use.kind == DELEGATE_CALL}
        found = []
        for name, position in sorted(wanted):
            fn = self.functions.get(name)
            params = [*fn.params.posonly_params, *fn.params.params] if fn is not None else []
            if position >= len(params):
                continue
            self_name = params[position].name.value
            others = {p.name.value: p for p in [*params, *fn.params.kwonly_params] if p.name.value != self_name}
            scan = MethodScan(self, self_name, others, f"{name}.<locals>.")
            scan.scan(fn.body)
            scan.resolve_local_calls()
            uses = _located(fn, "method", scan.uses, def_pos[fn][0], module_node) if locate else tuple(
                use for _, use in scan.uses)
            kind = f"delegate:{position}"  # distinct per position: analysed once per self parameter
            found.append((position, MethodFacts(name, def_pos[fn][0], def_pos[fn][1], kind, (), uses)))
        return tuple(found)


def _decorator_callee(decorator: cst.Decorator) -> cst.BaseExpression:
    """``@torch.no_grad()`` -> ``torch.no_grad``; ``@forward_entry`` -> itself."""
    node = decorator.decorator
    return node.func if isinstance(node, cst.Call) else node


def _located(fn: cst.FunctionDef, kind: str, uses: list[tuple[cst.CSTNode, Use]], def_line: int,
             module: cst.Module) -> tuple[Use, ...]:
    """Give lines to the uses that can end an evidence chain: the first of each distinct use
    (a later twin is never chosen), in methods that can be reported or called. ``forward``,
    dunders and non-methods are never reported and never walked into, so they keep line 0."""
    if not uses:
        return ()
    name = fn.name.value
    if kind != "method" or name in contract.NEVER_ENTRY or contract.is_dunder(name):
        return tuple(use for _, use in uses)
    first: dict[tuple[str, str, str, str], cst.CSTNode] = {}
    for node, use in uses:
        first.setdefault((use.kind, use.name, use.method, use.text), node)
    found = node_positions(fn, [fn.name, *first.values()], module)
    offset = def_line - found[fn.name][0]
    return tuple(
        dataclasses.replace(use, line=found[node][0] + offset) if node in found else use
        for node, use in uses
    )


def extract(source: str, path: str, module: str = "", is_package: bool = False,
            locate: bool = True) -> FileFacts:
    """Parse ``source`` once and return its facts. Raises ``libcst.ParserSyntaxError``.

    ``locate=False`` leaves evidence lines at 0: for files read only to resolve names."""
    tree = cst.parse_module(source)
    scan = FileScan(source, module, is_package)
    scan.scan_module(tree)
    return scan.facts(path, tree, locate)


def empty_facts(path: str, module: str = "") -> FileFacts:
    """Facts of a file the text prefilter ruled out (no module classes, no marks)."""
    return FileFacts(path=path, module=module, imports=(), classes=(), marks=(), parsed=False)
