"""Making a name importable in a module with the smallest possible edit, where isort and ruff put it.

Both fix styles need a name from another module (``forward_entry`` from ``runtime_shim``,
``register_fsdp_forward_method`` from ``torch.distributed.fsdp``). The rules, in order:

1. already imported at module level (``from M import name [as alias]``): use that local name;
2. for ``import M [as alias]``: use ``alias.name`` (no new line at all);
3. an existing module-level ``from M import a, b`` without ``# noqa`` or ``as``: extend it, the name
   put where isort and ruff sort it (``from M import a, name, b``), keeping its layout (a
   parenthesised list gets one more item in the same style; a one-line import that would pass
   88 columns is wrapped one name a line, as black, isort's black profile and ruff do);
4. otherwise insert ``from M import name`` as a new line where isort (default and black profiles)
   and ruff's ``I`` rules sort it, so that a file they left clean stays clean.

Where rule 4 puts the line. The imports above the first statement that needs the name form blocks
(runs of import lines; code, ``if TYPE_CHECKING:`` or ``try:`` between imports ends a block, as it
does for isort and ruff); a block's sections are its groups of lines between blank lines. ``M``
is an installed package (``runtime_shim`` is installed with fwdlint), so third-party; each existing
import is ``__future__``, standard library, relative (local), first-party (its top-level name is a
directory or ``.py`` file in the working directory or its ``src/``: isort's and ruff's default
source roots, right when fwdlint runs from the project root as pre-commit does) or third-party.
The target is the last block above the statement that has a group holding ``M``'s top-level
package (``import torch`` for ``torch.distributed.fsdp``), else a group of third-party imports,
else a group with any third-party import; in it the line goes before the first import that sorts
after it: ``import x`` lines first, then ``from`` lines by module, then by first name (natural,
case-insensitive order; names by type: CONSTANTS, Classes, others). ``from M import x as y`` is
its own line, as both tools write it. The project's isort/ruff settings are not read: a file
sorted under other settings (``force_sort_within_sections``, custom sections) gets the line
where the defaults would put it, and a file whose imports were not sorted gets it before the
first import of the section that sorts after it (the end of the section if none does).

With no such group, the line starts a new section: after the standard-library (and
``__future__``) groups, before first-party and relative ones. isort and ruff set a section apart
with a blank line, a second new line. (``separate_sections=False`` makes the import join the group above it instead, below it when it
is the first.) With no import at all above the statement
the line goes right after the docstring (``__future__`` imports, shebang, encoding cookie and
header comments stay first), which both tools accept; the blank lines they want between imports
and code (2 before a ``class``/``def``, else 1) are the file's own: there after a docstring and
two blank lines, missing when the code starts on the next line. They are never added, because
only import lines are edited: the fixers find the statements they edit in the new module by
identity.

Not reproduced: isort's default profile wraps at 79 columns in its grid style, so a one-line
import extended to 80-88 columns satisfies black's profile and ruff only; in a wrapped import
that is not one name a line, the name goes to its sorted place with its neighbours' commas.

The local name never shadows anything: if ``name`` appears anywhere in the module as an
identifier, the import gets an alias (``shim_<name>``, then ``shim_<name>_2``...).

Measured (``tests/test_fix_import_order.py``): 23 files fixed by the decorator and
``patch_forward`` fixers and 4 scripts by the call style (standard-library, third-party,
first-party and relative imports, ``__future__``, docstrings, ``TYPE_CHECKING``, try/except
imports, an existing ``runtime_shim`` import, CRLF, wrapped imports), all clean for isort 9.0.2
(default and black profiles) and ruff 0.17.5 (``check --select I``) before the fix, are still
clean after it; so are 6 files that need a new section.
"""

from __future__ import annotations

import os
import re
import sys
import sysconfig
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Optional, Sequence, Union

import libcst as cst

from lint_rules.fix.locate import dotted_name as dotted
from lint_rules.fix.verify import encoded
from lint_rules.positions import node_positions
from lint_rules.source import line_breaks, split_lines

FUTURE, STDLIB, THIRD_PARTY, FIRST_PARTY, LOCAL = range(5)  # isort's and ruff's section order
WRAP_AT = 88  # black's, isort's black profile's and ruff's line length


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


def _is_import_line(stmt: cst.CSTNode) -> bool:
    """A line of imports only (``import os; x = 1`` is code: it ends a block)."""
    found = _imports(stmt)
    return bool(found) and len(found) == len(stmt.body)  # type: ignore[attr-defined]


# --- sort keys, as isort's defaults and ruff's define them ------------------------------------

def natural(text: str) -> list[Union[str, int]]:
    """Case-insensitive natural order (``f2`` before ``f10``); str and int parts alternate, so two
    keys always compare part by part."""
    parts: list[Union[str, int]] = re.split(r"(\d+)", text.lower())
    parts[1::2] = [int(p) for p in parts[1::2]]  # type: ignore[arg-type]
    return parts


def member_key(name: str) -> tuple[int, list[Union[str, int]]]:
    """isort's and ruff's ``order_by_type``: CONSTANTS, then Classes, then everything else."""
    kind = 0 if len(name) > 1 and name.isupper() else 1 if name[:1].isupper() else 2
    return kind, natural(name)


def _module_of(small: Union[cst.Import, cst.ImportFrom]) -> str:
    if isinstance(small, cst.Import):
        return dotted(small.names[0].name) or ""
    return "." * len(small.relative) + ((dotted(small.module) or "") if small.module is not None else "")


def statement_key(stmt: cst.SimpleStatementLine) -> tuple:
    """Where a line of imports sorts within its section: ``import`` lines before ``from`` lines
    (isort's and ruff's default ``force_sort_within_sections = false``), then the module, then
    the first imported name."""
    small = _imports(stmt)[0]
    if isinstance(small, cst.Import):
        return (0, natural(_module_of(small)))
    first = "*" if isinstance(small.names, cst.ImportStar) else dotted(small.names[0].name) or ""
    return (1, natural(_module_of(small)), member_key(first))


# --- sections -------------------------------------------------------------------------------

@lru_cache(maxsize=None)
def _stdlib_dirs() -> tuple[Path, ...]:
    paths = sysconfig.get_paths()
    dirs = {Path(paths["stdlib"]), Path(paths["platstdlib"])}
    return tuple(sorted(dirs | {d / "lib-dynload" for d in dirs}))


@lru_cache(maxsize=4096)
def is_stdlib(top: str) -> bool:
    names = getattr(sys, "stdlib_module_names", None)  # Python 3.10+
    if names is not None:
        return top in names
    if top in sys.builtin_module_names:
        return True
    for directory in _stdlib_dirs():  # 3.9: a module file or package in the standard library's own folders
        if (directory / top).is_dir() or (directory / f"{top}.py").is_file():
            return True
        if directory.name == "lib-dynload" and directory.is_dir() and any(
                p.name.split(".")[0] == top for p in directory.iterdir()):
            return True
    return False


@lru_cache(maxsize=4096)
def _in_source_root(top: str, cwd: str) -> bool:
    for root in (Path(cwd), Path(cwd) / "src"):
        if (root / top).is_dir() or (root / f"{top}.py").is_file():
            return True
    return False


def section_of(module: str, installed: str) -> int:
    """The section isort and ruff (default settings, run from the working directory) give
    ``module``; the top-level package ``installed`` (the one being imported) is third-party."""
    if module.startswith("."):
        return LOCAL
    top = module.partition(".")[0]
    if top == "__future__":
        return FUTURE
    if top == installed:
        return THIRD_PARTY
    if is_stdlib(top):
        return STDLIB
    try:
        cwd = os.getcwd()
    except OSError:  # the working directory was removed: nothing is first-party
        return THIRD_PARTY
    return FIRST_PARTY if _in_source_root(top, cwd) else THIRD_PARTY


@dataclass
class _Group:
    """Consecutive import lines without a blank line between them (one isort section)."""

    indices: list[int]
    sections: set[int]
    tops: set[str]


def _groups(body: Sequence[cst.BaseStatement], run: range, installed: str) -> list[_Group]:
    groups: list[_Group] = []
    for index in run:
        stmt = body[index]
        assert isinstance(stmt, cst.SimpleStatementLine)
        if not groups or any(line.comment is None for line in stmt.leading_lines):
            groups.append(_Group([], set(), set()))
        group = groups[-1]
        group.indices.append(index)
        for small in _imports(stmt):
            modules = [dotted(a.name) or "" for a in small.names] if isinstance(small, cst.Import) \
                else [_module_of(small)]
            for module in modules:
                group.sections.add(section_of(module, installed))
                if not module.startswith("."):
                    group.tops.add(module.partition(".")[0])
    return groups


def _target(groups: list[_Group], top: str) -> Optional[_Group]:
    """The group the new ``from <top>... import`` line belongs to, if there is one."""
    for test in (lambda g: top in g.tops, lambda g: g.sections == {THIRD_PARTY},
                 lambda g: THIRD_PARTY in g.sections):
        found = next((g for g in groups if test(g)), None)
        if found is not None:
            return found
    return None


def _runs(body: Sequence[cst.BaseStatement], before: int) -> list[range]:
    """The blocks of import lines that start above ``body[before]``."""
    runs: list[range] = []
    start: Optional[int] = None
    for index in range(min(before, len(body)) + 1):
        is_import = index < min(before, len(body)) and _is_import_line(body[index])
        if is_import and start is None:
            start = index
        elif not is_import and start is not None:
            runs.append(range(start, index))
            start = None
    return runs


def _split_leading(lines: Sequence[cst.EmptyLine]) -> tuple[list[cst.EmptyLine], list[cst.EmptyLine]]:
    """(up to and including the last blank line, the comment lines directly above the statement)."""
    last = max((i for i, line in enumerate(lines) if line.comment is None), default=-1)
    return list(lines[:last + 1]), list(lines[last + 1:])


def _insert(module: cst.Module, statement: cst.SimpleStatementLine, top: str, before: int,
            separate: bool) -> tuple[cst.Module, int]:
    """``module`` with ``statement`` (a new import line of package ``top``) where isort and ruff
    put it, and the number of blank lines added to set it apart."""
    body = list(module.body)
    runs = _runs(body, before)
    if not runs:  # no import above: right after the docstring (header comments stay above)
        body.insert(1 if body and _is_docstring(body[0]) else 0, statement)
        return module.with_changes(body=body), 0
    chosen = runs[-1]
    for run in reversed(runs):
        if _target(_groups(body, run, top), top) is not None:
            chosen = run
            break
    groups = _groups(body, chosen, top)
    group = _target(groups, top)
    blanks = 0
    if group is not None:
        key = statement_key(statement)
        at = next((i for i in group.indices if statement_key(body[i]) > key), None)  # type: ignore[arg-type]
        if at is None:
            body.insert(group.indices[-1] + 1, statement)
            return module.with_changes(body=body), 0
        first = at == group.indices[0]
    else:  # a new section: before the first group of first-party or relative imports
        later = next((g for g in groups if min(g.sections) > THIRD_PARTY), None)
        if later is None:
            if separate:
                statement = statement.with_changes(leading_lines=[cst.EmptyLine()])
                blanks = 1
            body.insert(chosen[-1] + 1, statement)
            return module.with_changes(body=body), blanks
        if not separate and later is not groups[0]:  # joins the group above
            body.insert(later.indices[0], statement)
            return module.with_changes(body=body), 0
        at, first = later.indices[0], True
    following = body[at]
    assert isinstance(following, cst.SimpleStatementLine)
    if first:  # the blank lines above the group go above the new line; comments stay on their import
        above, attached = _split_leading(following.leading_lines)
        if group is None and separate:
            attached = [cst.EmptyLine(), *attached]
            blanks = 1
        statement = statement.with_changes(leading_lines=above)
        body[at] = following.with_changes(leading_lines=attached)
    body.insert(at, statement)
    return module.with_changes(body=body), blanks


# --- extending an existing ``from M import ...`` --------------------------------------------

def _vertical(indent: str) -> cst.ParenthesizedWhitespace:
    return cst.ParenthesizedWhitespace(first_line=cst.TrailingWhitespace(), empty_lines=[], indent=True,
                                       last_line=cst.SimpleWhitespace(indent))


def _middle_comma(node: cst.ImportFrom) -> cst.Comma:
    """The comma between two names in this statement's layout (without any comment after it)."""
    names = list(node.names)  # type: ignore[arg-type]
    if len(names) >= 2 and isinstance(names[0].comma, cst.Comma):
        comma = names[0].comma
        if isinstance(comma.whitespace_after, cst.ParenthesizedWhitespace):
            return comma.with_changes(whitespace_after=_vertical(comma.whitespace_after.last_line.value))
        return comma
    if node.lpar is not None and isinstance(node.lpar.whitespace_after, cst.ParenthesizedWhitespace):
        return cst.Comma(whitespace_after=_vertical(node.lpar.whitespace_after.last_line.value))
    return cst.Comma(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(" "))


def _extend(node: cst.ImportFrom, alias: cst.ImportAlias) -> cst.ImportFrom:
    """``from M import a, c`` + ``b`` -> ``from M import a, b, c`` in the same layout; a comment
    after a name stays after that name."""
    names = list(node.names)  # type: ignore[arg-type]
    key = member_key(alias.name.value)  # type: ignore[union-attr]
    at = next((i for i, a in enumerate(names) if member_key(dotted(a.name) or "") > key), len(names))
    middle = _middle_comma(node)
    if at < len(names):
        names.insert(at, alias.with_changes(comma=middle))
        return node.with_changes(names=names)
    last = names[-1]
    after = last.comma.whitespace_after if isinstance(last.comma, cst.Comma) else None
    vertical = isinstance(middle.whitespace_after, cst.ParenthesizedWhitespace)
    if vertical and isinstance(after, cst.ParenthesizedWhitespace):
        # one name a line with a trailing comma: the old last keeps its comment, the new one ends the list
        names[-1] = last.with_changes(comma=last.comma.with_changes(  # type: ignore[union-attr]
            whitespace_after=after.with_changes(last_line=middle.whitespace_after.last_line)))  # type: ignore
        names.append(alias.with_changes(comma=middle.with_changes(whitespace_after=_vertical(after.last_line.value))))
    else:  # the last name's comma (none, or a trailing one) moves to the new last name
        names[-1] = last.with_changes(comma=middle)
        names.append(alias.with_changes(comma=last.comma))
    return node.with_changes(names=names)


def _wrapped(node: cst.ImportFrom, indent: str) -> cst.ImportFrom:
    """One name a line with a trailing comma: black's, isort's black profile's and ruff's wrap."""
    names = [a.with_changes(comma=cst.Comma(whitespace_after=_vertical(indent))) for a in node.names]  # type: ignore
    names[-1] = names[-1].with_changes(comma=cst.Comma(whitespace_after=_vertical("")))
    return node.with_changes(names=names, lpar=cst.LeftParen(whitespace_after=_vertical(indent)),
                             rpar=cst.RightParen(), whitespace_before_import=cst.SimpleWhitespace(" "))


@dataclass
class ImportEdit:
    """The result of ``ensure_import``: the new module, how to refer to the name, and what
    changed (a new line's text and the blank lines added to set it apart, or the 1-based line
    range of an extended import)."""

    module: cst.Module
    reference: str
    inserted: Optional[bytes] = None
    extended: Optional[tuple[int, int]] = None
    blank_lines: int = 0

    @property
    def may_change(self) -> frozenset[int]:
        """The old lines of the import statement it extends (``FileFix.may_change``)."""
        return frozenset(range(self.extended[0], self.extended[1] + 1)) if self.extended else frozenset()


def _free_name(name: str, code: str) -> str:
    if not is_taken(name, code):
        return name
    candidate, n = f"shim_{name}", 2
    while is_taken(candidate, code):
        candidate, n = f"shim_{name}_{n}", n + 1
    return candidate


def _has_noqa(code: str, lines: tuple[int, int]) -> bool:
    text = split_lines(code)[lines[0] - 1:lines[1]]
    return any("noqa" in line.lower() for line in text)


def _plain_names(node: cst.ImportFrom) -> bool:
    """``from M import a, b``: no ``*``, no ``as`` (isort and ruff keep ``as`` imports on lines of
    their own, so a name is never merged into one)."""
    return not isinstance(node.names, cst.ImportStar) and all(a.asname is None for a in node.names)


def ensure_import(module: cst.Module, source_module: str, name: str, before: int, code: str, *,
                  separate_sections: bool = True) -> ImportEdit:
    """Make ``source_module.name`` usable in ``module`` (whose source text is ``code``) above
    top-level statement ``before``. A new section gets the blank line isort wants above it
    (unless ``separate_sections`` is false): callers plan ``ImportEdit.lines``, not ``inserted``."""
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
                if extendable is None and index < before and _plain_names(small):
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
    if extendable is not None and local == name:
        index, position, small = extendable
        start = node_positions(module, [small], module)[small][0]
        lines = (start, start + line_breaks(module.code_for_node(small)))
        if not _has_noqa(code, lines):
            stmt = module.body[index]
            assert isinstance(stmt, cst.SimpleStatementLine)
            new = _extend(small, alias)
            one_line = small.lpar is None and len(stmt.body) == 1 and stmt.trailing_whitespace.comment is None
            if one_line and len(module.code_for_node(new)) > WRAP_AT:
                new = _wrapped(new, module.default_indent)  # ruff's choice; isort's is 4 spaces
            body = list(stmt.body)
            body[position] = new
            new_body = list(module.body)
            new_body[index] = stmt.with_changes(body=body)
            return ImportEdit(module.with_changes(body=new_body), local, extended=lines)
    statement = cst.SimpleStatementLine(body=[cst.ImportFrom(module=expression(source_module), names=[alias])])
    text = encoded(module.code_for_node(statement).strip(), module.encoding)
    new_module, blanks = _insert(module, statement, source_module.partition(".")[0], before, separate_sections)
    return ImportEdit(new_module, local, inserted=text, blank_lines=blanks)


# --- removing an import the fix left unused ---------------------------------------------------

@dataclass
class ImportRemoval:
    """``remove_unused_import``'s result: the new module and the 1-based old lines it deletes (the
    import, and the blank lines that set its section apart)."""

    module: cst.Module
    removed: list[int]


class _Names(cst.CSTVisitor):
    """Every identifier used outside import statements (an attribute's own name is not one)."""

    def __init__(self) -> None:
        self.names: set[str] = set()

    def visit_Import(self, node: cst.Import) -> bool:
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        return False

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        node.value.visit(self)
        return False

    def visit_Name(self, node: cst.Name) -> None:
        self.names.add(node.value)


def used_names(module: cst.Module) -> set[str]:
    visitor = _Names()
    module.visit(visitor)
    return visitor.names


def _binds(stmt: cst.CSTNode, source_module: str, name: str, local: str) -> bool:
    """Is ``stmt`` exactly one import binding ``local`` to ``source_module`` (``name`` empty) or
    to ``source_module.name``: ``import types``, ``import types as t``, ``from types import
    MethodType [as M]``?"""
    found = _imports(stmt)
    if len(found) != 1 or len(stmt.body) != 1 or isinstance(found[0].names, cst.ImportStar):  # type: ignore[attr-defined]
        return False
    small = found[0]
    if len(small.names) != 1:
        return False
    alias = small.names[0]
    bound = alias.asname.name if alias.asname else alias.name
    if not isinstance(bound, cst.Name) or bound.value != local:
        return False
    if isinstance(small, cst.Import):
        return not name and dotted(alias.name) == source_module
    return (bool(name) and not small.relative and small.module is not None
            and dotted(small.module) == source_module and dotted(alias.name) == name)


def remove_unused_import(module: cst.Module, original: cst.Module, own_lines: dict[cst.CSTNode, int],
                         source_module: str, name: str, local: str, inserted: Optional[bytes] = None,
                         inserted_blanks: int = 0) -> Optional[ImportRemoval]:
    """Delete the module-level import that binds ``local`` (see ``_binds``) if ``module`` no longer
    uses ``local``; ``None`` if it is used, absent, changed by the fix or the last statement.

    ``own_lines`` gives the old line of each statement's code (leading lines excluded) by node:
    ``module`` keeps untouched statements of ``original`` by identity (``inserted`` and
    ``inserted_blanks``: the import line the fix just added and its planned blank lines), and the statement below
    the import, which gets new leading lines, is entered under its new node (so a second call
    finds it). When the import was its section's only line, the blank lines below it that set
    that section apart go too, so isort's layout stays."""
    if local in used_names(module):
        return None
    body = list(module.body)
    index = next((i for i, stmt in enumerate(body) if _binds(stmt, source_module, name, local)), None)
    if index is None or index + 1 == len(body) or body[index] not in own_lines:
        return None
    stmt, after = body[index], body[index + 1]
    assert isinstance(stmt, cst.SimpleStatementLine)
    own = own_lines[stmt]
    code = original.code_for_node(stmt.with_changes(leading_lines=[]))
    removed = list(range(own, own + len(split_lines(code)) - 1))
    below = list(getattr(after, "leading_lines", ()))
    alone = (below and all(line.comment is None for line in below)
             and (index == 0 or not _is_import_line(body[index - 1]) or bool(stmt.leading_lines)))
    known = after in own_lines
    fresh = inserted is not None and not known and encoded(
        module.code_for_node(after.with_changes(leading_lines=[])).strip(), module.encoding) == inserted
    unplanned = 0
    if alone and known:
        removed.extend(range(own_lines[after] - len(below), own_lines[after]))
    elif alone and fresh:  # the import just inserted below it: its blank lines are planned or moved old ones
        unplanned = min(len(below), inserted_blanks)
        moved = len(below) - unplanned  # taken from the old statement after the import (``_insert``)
        removed.extend(range(removed[-1] + 1, removed[-1] + 1 + moved))
    leading = list(stmt.leading_lines) if alone and (known or fresh) else [*stmt.leading_lines, *below]
    body[index + 1] = after.with_changes(leading_lines=leading)
    if known:
        own_lines[body[index + 1]] = own_lines[after]
    del body[index]
    return ImportRemoval(module.with_changes(body=body), removed)
