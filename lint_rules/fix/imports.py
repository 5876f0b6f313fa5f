"""Making a name importable in a module with the smallest possible edit.

Both fix styles need a name from another module (``forward_entry`` from ``runtime_shim``,
``register_fsdp_forward_method`` from ``torch.distributed.fsdp``). The rules, in order:

1. already imported at module level (``from M import name [as alias]``): use that local name;
2. for ``import M [as alias]``: use ``alias.name`` (no new line at all);
3. an existing module-level ``from M import a, b`` without ``# noqa``: extend it
   (``from M import a, b, name``), keeping its layout (parenthesised lists get one more item
   in the same style);
4. otherwise insert ``from M import name`` as a new line after the last module-level import
   above the first statement that needs it, else after the docstring and ``from __future__``
   imports, else at the top (after leading comments: shebang, encoding cookie, licence).

The local name never shadows anything: if ``name`` appears anywhere in the module as an
identifier, the import gets an alias (``shim_<name>``, then ``shim_<name>_2``...).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional, Union

import libcst as cst

from lint_rules.facts.walk import dotted_name as dotted
from lint_rules.fix.verify import planned
from lint_rules.positions import node_positions
from lint_rules.source import line_breaks


def expression(text: str) -> Union[cst.Name, cst.Attribute]:
    """``"a.b"`` -> ``Attribute(Name("a"), Name("b"))``."""
    head, *rest = text.split(".")
    node: Union[cst.Name, cst.Attribute] = cst.Name(head)
    for part in rest:
        node = cst.Attribute(value=node, attr=cst.Name(part))
    return node


def is_taken(name: str, code: str) -> bool:
    """Does ``name`` occur in the source as a word at all? Deliberately conservative (comments,
    strings count, attribute names do not): a needless alias is harmless, shadowing is not, and a
    text search costs nothing next to a LibCST visit of a large file."""
    return re.search(rf"(?<![\w.]){re.escape(name)}\b", code) is not None


def _is_docstring(stmt: cst.CSTNode) -> bool:
    return (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1
            and isinstance(stmt.body[0], cst.Expr)
            and isinstance(stmt.body[0].value, (cst.SimpleString, cst.ConcatenatedString)))


def _imports(stmt: cst.CSTNode) -> list[Union[cst.Import, cst.ImportFrom]]:
    if isinstance(stmt, cst.SimpleStatementLine):
        return [s for s in stmt.body if isinstance(s, (cst.Import, cst.ImportFrom))]
    return []


def _is_future(stmt: cst.CSTNode) -> bool:
    found = _imports(stmt)
    return bool(found) and all(isinstance(s, cst.ImportFrom) and s.module is not None
                               and dotted(s.module) == "__future__" for s in found)


def insert_index(module: cst.Module, before: int) -> int:
    """Where a new import statement goes in ``module.body`` (see the module docstring)."""
    body = module.body
    start = 0
    if body and _is_docstring(body[0]):
        start = 1
    while start < len(body) and _is_future(body[start]):
        start += 1
    last = None
    for index in range(start, min(before, len(body))):
        if _imports(body[index]):
            last = index
    return last + 1 if last is not None else start


@dataclass
class ImportEdit:
    """The result of ``ensure_import``: the new module, how to refer to the name, and what
    changed (a new line's text, or the 1-based line range of an extended import)."""

    module: cst.Module
    reference: str
    inserted: Optional[bytes] = None
    extended: Optional[tuple[int, int]] = None


def _free_name(name: str, code: str) -> str:
    if not is_taken(name, code):
        return name
    candidate, n = f"shim_{name}", 2
    while is_taken(candidate, code):
        candidate, n = f"shim_{name}_{n}", n + 1
    return candidate


def _extend(node: cst.ImportFrom, alias: cst.ImportAlias) -> cst.ImportFrom:
    """``from M import a, b`` + alias -> ``from M import a, b, alias`` in the same layout."""
    names = list(node.names)  # type: ignore[arg-type]
    last = names[-1]
    if len(names) >= 2 and isinstance(names[-2].comma, cst.Comma):
        separator = names[-2].comma
    else:
        separator = cst.Comma(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(" "))
    names[-1] = last.with_changes(comma=separator)
    names.append(alias.with_changes(comma=last.comma))
    return node.with_changes(names=names)


def _has_noqa(code: str, lines: tuple[int, int]) -> bool:
    text = re.split(r"\r\n|\r|\n", code)[lines[0] - 1:lines[1]]
    return any("noqa" in line.lower() for line in text)


def ensure_import(module: cst.Module, source_module: str, name: str, before: int, code: str) -> ImportEdit:
    """Make ``source_module.name`` usable in ``module`` (whose source text is ``code``) above
    top-level statement ``before``."""
    plain: Optional[str] = None
    extendable: Optional[tuple[int, int, cst.ImportFrom]] = None
    for index, stmt in enumerate(module.body):
        for position, small in enumerate(_imports(stmt)):
            if isinstance(small, cst.ImportFrom):
                if small.relative or small.module is None or dotted(small.module) != source_module:
                    continue
                if isinstance(small.names, cst.ImportStar):
                    continue
                for alias in small.names:
                    if dotted(alias.name) == name:
                        local = alias.asname.name if alias.asname else alias.name
                        if isinstance(local, cst.Name):
                            return ImportEdit(module, local.value)
                if extendable is None and index < before:
                    extendable = (index, position, small)
            else:
                for alias in small.names:
                    if dotted(alias.name) == source_module and plain is None and index < before:
                        local = alias.asname.name if alias.asname else None
                        if local is None:
                            plain = source_module
                        elif isinstance(local, cst.Name):
                            plain = local.value
    if plain is not None:
        return ImportEdit(module, f"{plain}.{name}")
    local = _free_name(name, code)
    alias = cst.ImportAlias(name=cst.Name(name),
                            asname=cst.AsName(name=cst.Name(local)) if local != name else None)
    if extendable is not None:
        index, position, small = extendable
        start = node_positions(module, [small], module)[small][0]
        lines = (start, start + line_breaks(module.code_for_node(small)))
        if not _has_noqa(code, lines):
            stmt = module.body[index]
            body = list(stmt.body)  # type: ignore[attr-defined]
            body[position] = _extend(small, alias)
            new_body = list(module.body)
            new_body[index] = stmt.with_changes(body=body)
            return ImportEdit(module.with_changes(body=new_body), local, extended=lines)
    statement = cst.SimpleStatementLine(body=[cst.ImportFrom(module=expression(source_module), names=[alias])])
    new_body = list(module.body)
    new_body.insert(insert_index(module, before), statement)
    text = planned(module.code_for_node(statement).strip(), module.encoding)
    return ImportEdit(module.with_changes(body=new_body), local, inserted=text)
