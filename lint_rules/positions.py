"""Line and column numbers of LibCST nodes, for the fixers, without LibCST's PositionProvider.

PositionProvider costs about twice the parse itself (measured on timm's model files). A fixer
needs positions for few nodes, so:

* ``def`` lines come from a regular expression over the source, accepted only when the
  sequence of names it finds equals the sequence of functions in the tree (then it cannot have
  matched text inside a string); otherwise we fall back to the codegen pass below.
* Evidence lines come from code generation of single methods, stopped as soon as every wanted
  node was seen; run only for methods whose evidence can be reported (a whole-module pass
  costs about a third of a parse).
"""

from __future__ import annotations

import re
from typing import Iterable, Sequence

import libcst as cst
from libcst._nodes.internal import CodegenState

from lint_rules.source import line_breaks, line_start

# A def at the start of a line; Python's line ends are \n, \r\n and a lone \r (re's ^ knows \n only).
_DEF_RE = re.compile(r"(?:\A|(?<=[\r\n]))([ \t]*(?:async[ \t]+)?def[ \t]+)([A-Za-z_]\w*)")

Position = tuple[int, int]  # 1-based line, 0-based column


def def_positions(source: str, names: Sequence[str]) -> list[Position] | None:
    """Positions of the names of all ``def`` statements, in document order, or ``None``."""
    found: list[tuple[str, int]] = [(m.group(2), m.start(2)) for m in _DEF_RE.finditer(source)]
    if [name for name, _ in found] != list(names):
        return None
    positions: list[Position] = []
    line, last = 1, 0
    for _, offset in found:
        line += line_breaks(source, last, offset)
        last = offset
        positions.append((line, offset - line_start(source, offset)))
    return positions


class _AllSeen(Exception):
    pass


class _RecordingState(CodegenState):
    """Codegen state that remembers the token index at which each wanted node starts."""

    __slots__ = ("wanted", "starts")

    def before_codegen(self, node: cst.CSTNode) -> None:
        if node in self.wanted and node not in self.starts:
            self.starts[node] = len(self.tokens)
            if len(self.starts) == len(self.wanted):
                raise _AllSeen


def node_positions(root: cst.CSTNode, nodes: Iterable[cst.CSTNode], module: cst.Module) -> dict[cst.CSTNode, Position]:
    """Positions of ``nodes`` relative to the start of ``root``'s code (absolute if ``root`` is
    the module). Generation stops once every wanted node was seen."""
    state = _RecordingState(default_indent=module.default_indent, default_newline=module.default_newline)
    state.wanted = set(nodes)
    state.starts = {}
    try:
        root._codegen(state)
    except _AllSeen:
        pass
    by_index: dict[int, list[cst.CSTNode]] = {}
    for node, index in state.starts.items():
        by_index.setdefault(index, []).append(node)
    result: dict[cst.CSTNode, Position] = {}
    line, col = 1, 0
    for index, token in enumerate([*state.tokens, ""]):
        for node in by_index.get(index, ()):
            result[node] = (line, col)
        newlines = line_breaks(token)
        if newlines:
            line += newlines
            col = len(token) - line_start(token, len(token))
        else:
            col += len(token)
    return result


def code_line(statement: cst.CSTNode, first: int) -> int:
    """The line a statement's code starts on, given the line its node starts on (``node_positions``):
    a ``SimpleStatementLine`` starts with its ``leading_lines``, blank or comment lines, one each."""
    return first + len(getattr(statement, "leading_lines", ()))
