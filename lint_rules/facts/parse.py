"""LibCST's parse, with a way around the one gap in its grammar that real code hits.

LibCST 1.9 rejects a parenthesised simple target of an annotated assignment, ``(x): int = 1``
(valid since PEP 526, ``ast`` marks it ``simple=0``). The sweep of the standard library met it in
``test/test_grammar.py`` and ``test/typinganndata/ann_module.py``; without a way around, the whole
file went unchecked. When the parse fails and CPython's parser finds such targets, their
parentheses go (the target moves left to where the opening one was, spaces after it keep the
rest of the line in place, every line stays where it was), and the altered text is parsed. Facts never print source text, so nothing shows the change. Fixers do
not use this: they would write the altered text back (``fix.verify`` would refuse it anyway).
"""

from __future__ import annotations

import ast
from typing import Optional

import libcst as cst

from lint_rules.source import LINE_END


def parse(source: str) -> cst.Module:
    """``cst.parse_module(source)``; raises ``ParserSyntaxError`` as it does when no way round helps."""
    try:
        return cst.parse_module(source)
    except cst.ParserSyntaxError:
        altered = _unparenthesised_targets(source)
        if altered is None:
            raise
    try:
        return cst.parse_module(altered)
    except cst.ParserSyntaxError:
        return cst.parse_module(source)  # raise the error of the text as written


def _unparenthesised_targets(source: str) -> Optional[str]:
    """``source`` with the parentheses round annotated-assignment targets blanked, or ``None``."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    starts = [0, *(match.end() for match in LINE_END.finditer(source))]  # where each line begins

    def offset(line: int, col: int) -> int:  # ast columns count UTF-8 bytes
        text = source[starts[line - 1]:starts[line] if line < len(starts) else len(source)]
        return starts[line - 1] + len(text.encode("utf-8")[:col].decode("utf-8", "ignore"))

    edits: list[tuple[int, int, str]] = []  # (start, end, replacement), non-overlapping
    for node in ast.walk(tree):
        if not isinstance(node, ast.AnnAssign) or node.simple:
            continue
        target, annotation = node.target, node.annotation
        start, name = offset(node.lineno, node.col_offset), offset(target.lineno, target.col_offset)
        end, colon = (offset(target.end_lineno or target.lineno, target.end_col_offset or 0),
                      offset(annotation.lineno, annotation.col_offset))
        if not set(source[start:name]) <= set("( \t") or not set(source[end:colon]) <= set(") \t:"):
            return None  # a comment or line break inside the parentheses: leave it to LibCST
        opening = source[start:name]
        # the target moves left to where "(" was (a leading space would be an indent); the
        # spaces added after it keep the rest of the line in place
        edits.append((start, name, ""))
        edits.append((end, colon, " " * len(opening) + source[end:colon].replace(")", " ")))
    if not edits:
        return None
    text = source
    for start, end, replacement in sorted(edits, reverse=True):
        text = text[:start] + replacement + text[end:]
    return text
