"""Functions handed a module: ``fn(self.encoder, x)``, ``multi_apply(self.loss_single, ...)``.

A function's summary (``FunctionFacts.summary``) says, for one parameter, what its body does with
it as if it were ``self``. ``computation`` reads it against the class of what was handed over; when
that class is unknown, ``runs_unknown`` answers whether the function runs it at all.
"""

from __future__ import annotations

from typing import Optional

from lint_rules.diagnostics import Chain, Step
from lint_rules.facts.model import (
    ATTR_CALL, ELEMENT_METHOD, PASS_CALL, SELF_CALL, SUB_CALL, SUB_METHOD, FileFacts, MethodFacts,
)
from lint_rules.project import ProjectIndex
from lint_rules.vocabulary import ENTRY_METHOD_NAMES, FORWARD_NAMES


def unknown_entry(method: str) -> bool:
    """A method name that runs the model on any module class: ``generate``, ``encode``, ``forward_*``."""
    return method in ENTRY_METHOD_NAMES or method.startswith("forward") or method in FORWARD_NAMES


def keyed_summary(summary: MethodFacts, file: FileFacts) -> MethodFacts:
    """A function's summary, named apart from methods and from same-named functions elsewhere."""
    return MethodFacts(f"{file.path}:{summary.name}", summary.line, summary.col, summary.kind,
                       summary.decorators, summary.uses)


def runs_unknown(index: ProjectIndex, summary: MethodFacts, origin: FileFacts, depth: int = 0) -> Optional[Chain]:
    """A function's summary for a parameter given a module whose class is unknown. Kept per summary
    and depth: helpers that pass the parameter on to each other were walked again on every path
    (on transformers, 34,000 calls for 83 questions). The entry holds the summary and the file, so
    their ``id`` stays theirs."""
    known = index.derived.setdefault("runs unknown", {})
    key = (id(summary), id(origin), depth)
    entry = known.get(key)
    reads = index.reads
    if reads is not None:
        reads.read(origin.path)
        if key in known:
            reads.reused("runs unknown", key)
    if entry is None:
        start = reads.begin() if reads is not None else 0
        entry = known[key] = (summary, origin, _runs_unknown_walk(index, summary, origin, depth))
        if reads is not None:
            reads.done("runs unknown", key, start)
    return entry[2]


def _runs_unknown_walk(index: ProjectIndex, summary: MethodFacts, origin: FileFacts, depth: int) -> Optional[Chain]:
    head = Step(summary.name, origin.path, summary.line, summary.col)
    for use in summary.uses:
        if use.kind in (SELF_CALL, SUB_CALL) or (use.kind in (ATTR_CALL, SUB_METHOD, ELEMENT_METHOD)
                                                 and unknown_entry(use.method or use.name)):
            return [head, Step(use.text, origin.path, use.line, use.col)]  # named without its line
        if use.kind == PASS_CALL and not use.name and depth < 8:
            ref, _, slot = use.method.rpartition("#")
            found = index.find_function(ref, origin)
            inner = found[1].summary(slot) if found is not None else None
            deeper = runs_unknown(index, inner, found[0], depth + 1) if found and inner else None
            if deeper:
                return [head, Step(use.text, origin.path, use.line, use.col), *deeper[1:]]
    return None
