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


def test_a_summary_replays_what_the_walk_kept() -> None:
    """``entry_uses`` replays, for a function's summary, the nodes the file's walk kept for it; a
    function whose body the walk did not visit is walked by ``_handled_nodes``. Both give the same
    nodes in the same order, for every method and module-level function of the fixtures."""
    from lint_rules.facts import entry_uses
    from lint_rules.facts.extract import COLLECTORS
    from lint_rules.facts.traversal import FileWalk

    kept: list[tuple[ast.FunctionDef, list[ast.AST]]] = []
    functions = [0]  # module-level functions among them
    real_finish = entry_uses.EntryUses.finish

    def finish(self, results):  # type: ignore[no-untyped-def]
        kept.extend((fn, nodes) for fn, (_, _, nodes) in self.scans.items())
        kept.extend(self.kept_of.items())
        functions[0] += len(self.kept_of)
        return real_finish(self, results)

    entry_uses.EntryUses.finish = finish  # type: ignore[method-assign]
    try:
        for source in [_NESTED, *_sources()]:
            FileWalk(source, "m", False, COLLECTORS).run(ast.parse(source))
            FileWalk(source, "m", False, COLLECTORS[:1]).run(ast.parse(source))  # entry_uses alone
    finally:
        entry_uses.EntryUses.finish = real_finish  # type: ignore[method-assign]
    assert len(kept) > 500 and functions[0] > 20, (len(kept), functions)
    assert sum(len(nodes) for _, nodes in kept) > 2_000
    for fn, nodes in kept:
        assert nodes == entry_uses._handled_nodes(fn), fn.name


# Decorated and nested functions, a nested class, lambdas and comprehensions, in a method and a function.
_NESTED = """
import functools
class Net:
    def run(self, model, x=make()):
        @functools.wraps(model)
        @register(self.head)
        def inner(y=model.default()):
            return model(y)
        class Local:
            built = build(self)
        return [inner(v) for v in x] + (lambda: self.enc(x))()
def helper(model, xs):
    @cache(model.name)
    def step(v):
        w = model.encode(v)
        return w
    for v in xs:
        model.fit(step(v))
    return model
"""


def _sources() -> list[str]:
    found = []
    for path in sorted(FIXTURES.rglob("*.py")):
        try:
            source = path.read_text(encoding="utf-8")
            ast.parse(source)
        except (SyntaxError, UnicodeDecodeError):
            continue
        found.append(source)
    return found
