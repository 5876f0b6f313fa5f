"""``FileFacts`` <-> JSON, for the facts store.

JSON, never pickle: a cache file must not be a way to run code. Rows are positional lists
(field order of the dataclasses), which keeps the store small and decoding about 3x faster than
dicts. ``FORMAT`` changes whenever a fact's shape or meaning changes, and old rows are then ignored.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from lint_rules.facts.model import (
    ClassFacts, FileFacts, ForwardPatch, FunctionFacts, InitCall, Mark, MetaSubmodule, MethodFacts, Source, Use,
    WrapSite, WrappedCall,
)

FORMAT = 8


def _method(m: MethodFacts) -> list[Any]:
    return [m.name, m.line, m.col, m.kind, m.decorators, [[u.kind, u.name, u.line, u.text, u.method] for u in m.uses],
            m.returns, m.generator, m.abstract, m.builds, m.asynchronous]


def _method_from(row: list[Any]) -> MethodFacts:
    return MethodFacts(row[0], row[1], row[2], row[3], tuple(row[4]), tuple(Use(*u) for u in row[5]), tuple(row[6]),
                       bool(row[7]), bool(row[8]), tuple(row[9]), bool(row[10]))


def _row(fact: Any) -> list[Any]:
    """A flat dataclass of strings, ints and bools as a positional row."""
    return [getattr(fact, f.name) for f in dataclasses.fields(fact)]


def encode(facts: FileFacts) -> str:
    """Everything but the path (the store is keyed by content; the caller knows the path)."""
    return json.dumps([
        facts.module,
        facts.imports,
        [[c.qualname, c.bases, [_method(m) for m in c.methods],
          [[name, [[s.kind, s.ref] for s in sources]] for name, sources in c.attrs]] for c in facts.classes],
        [[m.name, m.line, m.col, m.via, m.receiver, m.cls, m.site] for m in facts.marks],
        facts.noqa,
        facts.quoted,
        [[f.name, f.params, [_method(m) for m in f.runs], f.builds] for f in facts.functions],
        [[w.kind, w.var, w.cls, w.line, w.scope, w.called, w.inline] for w in facts.wrap_sites],
        [[c.method, c.line, c.col, c.text, c.site] for c in facts.wrapped_calls],
        [_row(m) for m in facts.meta_submodules],
        facts.compiled,
        [_row(c) for c in facts.init_calls],
        [_row(p) for p in facts.forward_patches],
        facts.attr_setters,
        facts.parsed,
    ], separators=(",", ":"))


def decode(text: str, path: str) -> FileFacts:
    """Raises ``ValueError`` (or ``TypeError``/``IndexError``) on anything that is not ours."""
    (module, imports, classes, marks, noqa, quoted, functions, wrap_sites, calls, metas, compiled, init_calls,
     patches, setters, parsed) = json.loads(text)
    return FileFacts(
        path=path,
        module=module,
        imports=tuple((a, b) for a, b in imports),
        classes=tuple(ClassFacts(q, tuple(bases), tuple(_method_from(m) for m in methods),
                                 tuple((name, tuple(Source(k, r) for k, r in sources)) for name, sources in attrs))
                      for q, bases, methods, attrs in classes),
        marks=tuple(Mark(*row) for row in marks),
        noqa=tuple((line, codes) for line, codes in noqa),
        quoted=tuple(quoted),
        functions=tuple(FunctionFacts(name, tuple(params), tuple(_method_from(m) for m in runs), tuple(builds))
                        for name, params, runs, builds in functions),
        wrap_sites=tuple(WrapSite(k, v, c, line, scope, tuple(called), inline)
                         for k, v, c, line, scope, called, inline in wrap_sites),
        wrapped_calls=tuple(WrappedCall(*row) for row in calls),
        meta_submodules=tuple(MetaSubmodule(*row) for row in metas),
        compiled=tuple(compiled),
        init_calls=tuple(InitCall(*row) for row in init_calls),
        forward_patches=tuple(ForwardPatch(*row) for row in patches),
        attr_setters=tuple((name, obj, slot) for name, obj, slot in setters),
        parsed=bool(parsed),
    )
