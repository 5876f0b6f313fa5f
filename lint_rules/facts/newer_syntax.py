"""Code written for a newer Python than the one running fwdlint, read by this one's ``ast``.

A project whose environment is Python 3.12 may use PEP 695 syntax (``type Vec[T] = list[T]``,
``def first[T](...)``, ``class Box[T](nn.Module)``), which 3.11's parser rejects. LibCST's parser
reads it whatever Python runs it: the type parameters are dropped (a ``type`` statement becomes a
plain assignment) and the text LibCST writes back, every line where it was, is what ``ast`` reads.
Columns after a dropped ``[T]`` on the same line move left; nothing fwdlint reports sits there (a
finding is at a ``def``'s name, which comes before its type parameters). Only this rare path
imports LibCST.
"""

from __future__ import annotations

import ast
import sys
from typing import Optional, Union

import libcst as cst

from lint_rules.source import python_parse


class _WithoutTypeParameters(cst.CSTTransformer):
    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef) -> cst.FunctionDef:
        return updated.with_changes(type_parameters=None) if updated.type_parameters else updated

    def leave_ClassDef(self, original: cst.ClassDef, updated: cst.ClassDef) -> cst.ClassDef:
        return updated.with_changes(type_parameters=None) if updated.type_parameters else updated

    def leave_TypeAlias(self, original: cst.TypeAlias, updated: cst.TypeAlias) -> cst.Assign:
        return cst.Assign(targets=[cst.AssignTarget(updated.name)], value=updated.value)


def parse_newer(source: str, path: str, error: SyntaxError,
                target: tuple[int, int]) -> Union[ast.Module, SyntaxError]:
    """The tree of ``source``, valid for ``target`` but not for this Python, or the error to report."""
    older: Optional[str] = None
    try:
        older = cst.parse_module(source).visit(_WithoutTypeParameters()).code
    except (cst.ParserSyntaxError, RecursionError, ValueError):
        pass
    tree = python_parse(older, path)[0] if older is not None else None
    if tree is not None:
        return tree
    running = "%d.%d" % sys.version_info[:2]
    error.msg = f"{error.msg} (Python {running} runs fwdlint and cannot read this Python {'%d.%d' % target} code)"
    return error
