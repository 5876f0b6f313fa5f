"""The expression walk's fast paths (``walk.EXPANDERS``: through attribute chains and keywords,
no leaves pushed) reach every node a handler can want, in the order of the plain walk over
``child_nodes``: collectors see the same nodes in the same order."""

from __future__ import annotations

import ast

from fixture_cases import FIXTURES

from lint_rules.facts.walk import LEAVES, PASSED_THROUGH, child_nodes, expand_children


def _order(tree: ast.AST, fast: bool) -> list[ast.AST]:
    seen: list[ast.AST] = []
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if type(node) in LEAVES:
            continue
        if type(node) not in PASSED_THROUGH:
            seen.append(node)
        if fast:
            expand_children(node, stack)
        else:
            stack.extend(child_nodes(node))
    return seen


def test_the_fast_walk_keeps_the_plain_walks_nodes_and_order() -> None:
    compared = 0
    for path in sorted(FIXTURES.rglob("*.py")):
        try:
            tree = ast.parse(path.read_bytes())
        except SyntaxError:
            continue
        plain = _order(tree, fast=False)
        assert _order(tree, fast=True) == plain, path
        compared += len(plain)
    assert compared > 5_000
