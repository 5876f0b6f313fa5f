"""Finding, in a freshly parsed file, the nodes a fix edits: by the line the facts give.

Fixers get positions from the facts (a def's line, a set-up statement's line) and must find the
same node in the tree they edit, plus the path of ancestors the transformer descends along.
Only statements are walked (a full LibCST visit of a 3,000-line model file costs more than
parsing it); positions come from the ``def`` regex or from code generation, never from
LibCST's PositionProvider.
"""

from __future__ import annotations

from typing import Iterator

import libcst as cst

from lint_rules.positions import code_line, def_positions, node_positions

Path_ = tuple[cst.CSTNode, ...]  # ancestors, outermost first


def dotted_name(expr: cst.BaseExpression) -> str | None:
    """``torch.nn.Module`` as written, or None for anything but names and attributes."""
    parts: list[str] = []
    while isinstance(expr, cst.Attribute):
        parts.append(expr.attr.value)
        expr = expr.value
    if not isinstance(expr, cst.Name):
        return None
    return ".".join((expr.value, *reversed(parts)))


def _blocks(stmt: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """The suites directly inside a compound statement (body, else, except, finally, cases)."""
    for name in ("body", "orelse", "finalbody"):
        child = getattr(stmt, name, None)
        if isinstance(child, (cst.BaseSuite, cst.If, cst.Else, cst.Finally)):
            yield child
    yield from getattr(stmt, "handlers", ())
    yield from getattr(stmt, "cases", ())


def statements(module: cst.Module) -> list[tuple[cst.CSTNode, Path_, int]]:
    """Every statement (simple lines, one-line suites, compound statements) in document order,
    with its ancestors and the index of the top-level statement that holds it."""
    found: list[tuple[cst.CSTNode, Path_, int]] = []

    def statement(stmt: cst.CSTNode, path: Path_, top: int) -> None:
        found.append((stmt, path, top))
        if isinstance(stmt, cst.SimpleStatementLine):
            return
        inner = (*path, stmt)
        for block in _blocks(stmt):
            suite(block, inner, top)

    def suite(node: cst.CSTNode, path: Path_, top: int) -> None:
        if isinstance(node, cst.IndentedBlock):
            for stmt in node.body:
                statement(stmt, (*path, node), top)
        elif isinstance(node, cst.SimpleStatementSuite):
            found.append((node, path, top))
        elif isinstance(node, (cst.If, cst.Else, cst.Finally, cst.ExceptHandler, cst.ExceptStarHandler,
                               cst.MatchCase)):
            statement(node, path, top)

    for index, stmt in enumerate(module.body):
        statement(stmt, (), index)
    return found


def defs_by_line(module: cst.Module, code: str) -> dict[int, tuple[cst.FunctionDef, Path_, int]]:
    """Every ``def`` by the line of its name (two defs never share a line)."""
    defs = [(node, path, top) for node, path, top in statements(module) if isinstance(node, cst.FunctionDef)]
    positions = def_positions(code, [node.name.value for node, _, _ in defs])
    if positions is None:  # a `def` inside a string fooled the regex: locate them by codegen
        found = node_positions(module, [node.name for node, _, _ in defs], module)
        positions = [found[node.name] for node, _, _ in defs]
    return {line: entry for entry, (line, _) in zip(defs, positions)}


def simple_statements_by_line(module: cst.Module) -> dict[int, tuple[cst.CSTNode, Path_, int]]:
    """Simple statement lines and one-line suites by the line their code starts on (after the
    blank and comment lines LibCST counts as the statement's ``leading_lines``)."""
    simple = [entry for entry in statements(module)
              if isinstance(entry[0], (cst.SimpleStatementLine, cst.SimpleStatementSuite))]
    lines = node_positions(module, [node for node, _, _ in simple], module)
    return {code_line(node, lines[node][0]): (node, path, top) for node, path, top in simple if node in lines}


def parse_for_edit(old: bytes) -> tuple[cst.Module, bytes]:
    """The tree a fixer edits and the trailing whitespace to append to the edited code.

    LibCST 1.9 loses some trailing whitespace on its round trip (``b"x = 1\\n\\n "`` prints as
    ``b"x = 1\\n "``; a file with lone-CR line ends loses its final ``\\r``), and the verify gate
    would then refuse every fix of such a file. Only then is the tree parsed without that
    whitespace (it holds no code), if that round trip is exact, and the whitespace put back
    unchanged. (Always stripping it is worse: comment lines with mixed line ends before it then
    print differently; found by the 10,000-program fuzz run.)"""
    module = cst.parse_module(old)
    body = old.rstrip()
    tail = old[len(body):]
    if not tail or module.bytes == old:
        return module, b""
    try:
        stripped = cst.parse_module(body)
    except cst.ParserSyntaxError:  # e.g. a backslash continuation ending the file
        return module, b""
    return (stripped, tail) if stripped.bytes == body else (module, b"")
