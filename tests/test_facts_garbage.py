"""Reading a file's facts leaves no reference cycle behind: its tree is freed as soon as its facts
are made. A cycle kept every tree alive until the cyclic collector ran, and its traversals of them
cost a parser process 15-25% of its CPU on a real package."""

from __future__ import annotations

import ast
import gc
from pathlib import Path

from lint_rules.facts.extract import extract

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def test_extracting_facts_leaves_no_cycles() -> None:
    files = sorted(FIXTURES.rglob("*.py"))
    assert len(files) > 50
    was_enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        for path in files:
            try:
                text = path.read_text(encoding="utf-8")
            except UnicodeDecodeError:  # the fixtures of other encodings
                continue
            for locate in (True, False):
                try:
                    extract(text, str(path), "pkg.mod", path.name == "__init__.py", locate)
                except SyntaxError:
                    pass
        gc.set_debug(gc.DEBUG_SAVEALL)  # what the collector finds, kept to be looked at
        gc.collect()
        # another thread of the process (xdist's) may leave garbage of its own meanwhile: only ours counts
        ours = [o for o in gc.garbage if isinstance(o, ast.AST) or type(o).__module__.startswith("lint_rules")]
        assert ours == []
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        if was_enabled:
            gc.enable()
