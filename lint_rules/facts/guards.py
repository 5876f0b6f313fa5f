"""Tests of a method's parameters against constants, and constant arguments of calls.

A helper that branches on a flag (``if mode == "forward": return self.net(x)``) computes only on
the branches its callers' constants take: ``self._run("norm", None)`` never reaches ``self.net``.
``FileWalk.conditions`` holds the tests the current statement runs under; ``guards_of`` keeps
those that compare a parameter with constants, as ``Guard`` facts on each use, and
``constant_arguments`` records what a call to a method of self passes. ``computation`` drops
the uses whose guards the caller's constants exclude.
"""

from __future__ import annotations

import ast
from typing import Optional, Sequence

from lint_rules.facts.model import Guard
from lint_rules.facts.walk import Param, call_args

_CONSTANT_TYPES = (str, bytes, int, float, bool, type(None))
_NEGATED = {"in": "not in", "not in": "in", "truthy": "falsy", "falsy": "truthy"}
_OPERATORS = {ast.Eq: "in", ast.Is: "in", ast.NotEq: "not in", ast.IsNot: "not in", ast.In: "in", ast.NotIn: "not in"}


def constant(expr: Optional[ast.expr]) -> str:
    """A constant of a plain type as ``repr`` gives it, numbers that compare equal spelled alike
    (``True == 1 == 1.0``: "1"); "" for anything else."""
    if type(expr) is not ast.Constant or type(expr.value) not in _CONSTANT_TYPES:
        return ""
    value = expr.value
    if type(value) is bool or (type(value) is float and value.is_integer()):
        return repr(int(value))
    return repr(value)


def constant_arguments(call: ast.Call) -> tuple[tuple[str, str], ...]:
    """(slot, constant) for each argument of a call: a position ("0"...) or a keyword, and the
    constant's ``repr`` ("" if it is not one); ("*", "") if the call unpacks arguments, whose
    slots are then unknown."""
    found: list[tuple[str, str]] = []
    position = 0
    for arg in call_args(call):
        if arg.star:
            found.append(("*", ""))
        elif arg.keyword is not None:
            found.append((arg.keyword, constant(arg.value)))
        else:
            found.append((str(position), constant(arg.value)))
            position += 1
    return tuple(found)


class GuardReader:
    """Reads ``FileWalk.conditions`` as guards on the parameters of one method."""

    def __init__(self, params: Sequence[Param], positional: Sequence[str]) -> None:
        self.params = {p.name: p for p in params if not p.star}
        self.positions = {name: index for index, name in enumerate(positional)}
        # (id of the test node, holds) -> its guards: every use under the same ``if`` asks again
        self._read: dict[tuple[int, bool], list[Guard]] = {}

    def guards_of(self, conditions: Sequence[tuple[ast.expr, bool]]) -> tuple[Guard, ...]:
        found: list[Guard] = []
        for test, holds in conditions:
            key = (id(test), holds)
            atoms = self._read.get(key)
            if atoms is None:
                atoms = self._read[key] = self._atoms(test, holds)
            found.extend(atoms)
        return tuple(found)

    def _atoms(self, test: ast.expr, holds: bool, depth: int = 0) -> list[Guard]:
        """Guards implied by ``test`` being ``holds``; a part that is no such test implies none
        (dropping a conjunct only makes the guard weaker, never wrong)."""
        kind = type(test)
        if kind is ast.UnaryOp and type(test.op) is ast.Not:
            return self._atoms(test.operand, not holds, depth + 1)
        if kind is ast.BoolOp and depth < 8:
            # a and b holding, or a or b failing: each part's outcome is known
            if (type(test.op) is ast.And) == holds:
                return [g for value in test.values for g in self._atoms(value, holds, depth + 1)]
            return []
        guard = self._atom(test)
        if guard is None:
            return []
        if not holds:
            guard = Guard(guard.param, guard.position, _NEGATED[guard.test], guard.values, guard.default)
        return [guard]

    def _atom(self, test: ast.expr) -> Optional[Guard]:
        if type(test) is ast.Name:
            return self._guard(test.id, "truthy", ())
        if type(test) is not ast.Compare or len(test.ops) != 1:
            return None
        left, right, op = test.left, test.comparators[0], _OPERATORS.get(type(test.ops[0]))
        if op is None:
            return None
        if type(test.ops[0]) in (ast.In, ast.NotIn):
            if type(left) is not ast.Name or type(right) not in (ast.Tuple, ast.List, ast.Set):
                return None
            values = tuple(constant(element) for element in right.elts)  # type: ignore[attr-defined]
            return None if "" in values else self._guard(left.id, op, values)
        if type(left) is not ast.Name:
            left, right = right, left  # "forward" == mode
        value = constant(right)
        return self._guard(left.id, op, (value,)) if type(left) is ast.Name and value else None

    def _guard(self, name: str, test: str, values: tuple[str, ...]) -> Optional[Guard]:
        param = self.params.get(name)
        if param is None:
            return None
        return Guard(name, self.positions.get(name, -1), test, values, constant(param.default))
