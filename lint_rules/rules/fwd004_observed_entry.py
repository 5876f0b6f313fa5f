"""FWD004 observed-unmarked-entry: a run recorded this method computing outside the wrapper's forward.

Static analysis cannot see every entry point: a method or submodule looked up by name at run time
(``getattr(self, self.head_name)(x)``), a module chosen by configuration, a library's dynamic
dispatch. ``runtime_shim`` sees each of them in the run where it happens. Record a run, then lint
from the record::

    pytest --fwd-record .fwdlint-record.json          # or FWD_SHIM_MODE=record FWD_RECORD=PATH
    fwdlint --from-record .fwdlint-record.json src/

Each recorded unmarked entry is reported where you can act on it:

* a method of a class in the linted code: at its ``def`` (found by the class's qualified name and
  the method's, so a record of older code still applies after the ``def`` moved). ``--fix``
  decorates it with ``@forward_entry``;
* a method of a class you cannot edit (an installed package): at the statement of the linted code
  that created its wrapper (``DDP(model)``, ``fabric.setup(model)``, ``fully_shard(model)``).
  ``--fix`` registers it right after that statement, as FWD002's fix does.

A method FWD001 reports as well is reported once, as FWD001 (this code then only counts it, see
``--statistics``). A method that is marked by now, a record entry whose method or class no longer
exists (one "stale" line on stderr, never applied) and entries of code outside the linted paths
(counted on stderr) give no finding. Without ``--from-record`` the rule reports nothing.

``fwdlint --from-record PATH --statistics`` also prints the static analysis' recall on this
project's own run: unmarked entries the run saw, how many of them FWD001 found, how many only the
run saw, and the marked entries the run confirmed.

The record (``lint_rules/run_record.py``) is JSON with a schema version, written by
``runtime_shim`` under ``pytest --fwd-record PATH`` or ``FWD_SHIM_MODE=record`` with
``FWD_RECORD=PATH``; a missing, truncated, foreign or newer record is an error (exit 2).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import groupby
from typing import Iterator, Mapping, Optional, Sequence

from lint_rules import contract, marks
from lint_rules.diagnostics import Diagnostic, below
from lint_rules.facts.model import ClassFacts, FileFacts, MethodFacts, WrapSite
from lint_rules.fix.result import FileFix, FixContext, Unfixed
from lint_rules.project import ClassRef, ProjectIndex
from lint_rules.rules.base import Invalid, Valid
from lint_rules.run_record import Entry

CODE = "FWD004"
NAME = "observed-unmarked-entry"
#: A finding FWD001 also makes (same line and symbol) is FWD001's: the engine keeps that one.
DEFERS_TO = "FWD001"

# An example's ``# observed: Class.method`` comments are the entries of the record it is linted
# with (an unmarked entry of the example's module, first run by a test; tests/test_rules.py).
VALID = (
    Valid("""
import torch.nn as nn
from runtime_shim import forward_entry


class Tagger(nn.Module):  # observed: Tagger.predict (marked since the run)
    def forward(self, x):
        return x

    @forward_entry
    def predict(self, x):
        return getattr(self, self.head)(x)
"""),
    Valid("""
import torch.nn as nn


class Tagger(nn.Module):  # observed: Tagger.decode (renamed since the run: stale, said on stderr)
    def forward(self, x):
        return x

    def predict(self, x):
        return getattr(self, self.head)(x)
"""),
)

INVALID = (
    Invalid("""
import torch.nn as nn


class Tagger(nn.Module):  # observed: Tagger.predict
    def __init__(self, head):
        super().__init__()
        self.cls = nn.Linear(2, 2)
        self.head = head

    def forward(self, x):
        return self.cls(x)

    def predict(self, x):  # expect: FWD004 "Tagger.predict ran forward computation outside the ddp wrapper's forward"
        return getattr(self, self.head)(x)
"""),
)


def _real(path: str) -> str:
    # a relative path is resolved against the current directory first: a cache keyed by it alone
    # answered a second run in the same process (another directory) with the first one's file
    return _real_absolute(os.path.abspath(path))


@lru_cache(maxsize=4096)
def _real_absolute(path: str) -> str:
    return os.path.realpath(path)


def _class_of(entry: Entry, facts: FileFacts) -> Optional[ClassFacts]:
    """The class of ``facts`` that defines the entry: by module and qualified name, or by the
    qualified name in the same file (a script run as ``__main__``)."""
    same_file = bool(entry.file) and _real(entry.file) == _real(facts.path)
    best: Optional[ClassFacts] = None
    for cls in facts.classes:
        if facts.module and entry.defined_in == f"{facts.module}.{cls.qualname}":
            return cls
        if same_file and entry.defined_in.endswith("." + cls.qualname):
            if best is None or len(cls.qualname) > len(best.qualname):
                best = cls
    return best


def _method(cls: ClassFacts, name: str) -> Optional[MethodFacts]:
    return next((m for m in cls.methods if m.name == name), None)


def _where(entry: Entry) -> str:
    """Where the run first met the entry: its test, else its call site (relative when below here)."""
    if entry.test:
        return entry.test
    path, _, line = entry.site.rpartition(":")
    return f"{below(path) or path}:{line}" if path else "the recorded run"


def _wrap_site(entry: Entry, facts: FileFacts) -> Optional[tuple[int, Optional[WrapSite]]]:
    """(recorded line, set-up statement) where the entry's wrapper was created, if in this file. The
    statement is the nearest one of the entry's wrapper that sets up its class (lines move as the
    file is edited, ``--fix`` included: on a tie the later one, as lines inserted above push it
    down), else the nearest of that wrapper starting on or just above the recorded line."""
    path, _, line = entry.wrapped_at.rpartition(":")
    if not path or not line.isdigit() or _real(path) != _real(facts.path):
        return None
    number = int(line)
    kinds = {entry.wrapper, "accelerate"} if entry.wrapper != "fabric" else {"fabric"}
    sites = [s for s in facts.wrap_sites if s.kind in kinds]
    candidates = [s for s in sites if s.cls == entry.cls] or [s for s in sites if 0 <= number - s.line < 10]
    nearest = min(candidates, key=lambda s: (abs(s.line - number), s.line < number), default=None)
    return number, nearest


def _registered(facts: FileFacts, site: WrapSite, method: str) -> bool:
    index = facts.wrap_sites.index(site)
    return any(mark.site == index and mark.name == method for mark in facts.marks)


def check(view: ProjectIndex, facts: FileFacts) -> Iterator[Diagnostic]:
    at_def: dict[tuple[ClassFacts, MethodFacts], list[Entry]] = {}  # one finding for all wrappers it ran under
    at_set_up: dict[tuple[int, str], list[tuple[Entry, Optional[WrapSite]]]] = {}
    for entry in view.config.observed:
        if entry.marked:
            continue
        cls = _class_of(entry, facts)
        if cls is not None:
            method = _method(cls, entry.method)
            if method is not None and not marks.is_marked(view, method, facts, ClassRef(facts, cls)):
                at_def.setdefault((cls, method), []).append(entry)
            continue  # gone (stale: said once per run, ``summary``) or marked since
        if entry.file and view.holds(entry.file):
            continue  # a class of the project: reported at its def, in its own file
        found = _wrap_site(entry, facts)
        if found is None or (found[1] is not None and _registered(facts, found[1], entry.method)):
            continue
        line, site = found
        at_set_up.setdefault((site.line if site else line, entry.defined_in), []).append((entry, site))
    for (cls, method), entries in at_def.items():
        yield Diagnostic(facts.path, method.line, method.col, CODE,
                         f"{cls.qualname}.{method.name} ran forward computation outside the {_wrappers(entries)} "
                         f"forward at run time ({_where(entries[0])}) but is not marked",
                         f"{cls.qualname}.{method.name}",
                         f"decorate it with @{contract.DECORATOR_NAME} from {contract.DECORATOR_MODULE}")
    for (line, defined_in), pairs in at_set_up.items():
        entry, site = pairs[0]
        owner = defined_in.rpartition(".")[2]
        yield Diagnostic(facts.path, line, 0, CODE,
                         f"{owner}.{entry.method} ({defined_in.rpartition('.')[0]}) ran forward computation outside "
                         f"the {_wrappers([e for e, _ in pairs])} forward at run time ({_where(entry)}) but is not "
                         f"marked", f"{owner}.{entry.method}",
                         f"register it right after this set-up: "
                         f"{_registration(entry.wrapper, site.var if site else 'model', entry.method)}")


def _wrappers(entries: Sequence[Entry]) -> str:
    """``ddp wrapper's``, ``ddp and fabric wrappers'``."""
    names = list(dict.fromkeys(e.wrapper for e in entries))
    if len(names) == 1:
        return f"{names[0]} wrapper's"
    return f"{', '.join(names[:-1])} and {names[-1]} wrappers'"


def _registration(wrapper: str, var: str, method: str) -> str:
    """The call that marks ``method`` on the set-up model ``var`` (what the fix inserts)."""
    if wrapper == "fabric":
        return f"{var}.{contract.MARK_METHOD_CALL}('{method}')"
    if wrapper == "fsdp2":
        return f"{contract.FSDP_REGISTER_CALL}({var}, '{method}')"
    return f"{contract.DECORATOR_MODULE}.{contract.MARK_METHOD_CALL}({var}, '{method}')"


# -- the run's summary: stale and outside entries, and the static analysis' recall --------------------
@dataclass
class Summary:
    # Counted per method (``Class.method``), whatever wrappers it ran under.
    applied: list[Entry] = field(default_factory=list)  # unmarked entries of the linted code, still unmarked
    stale: list[Entry] = field(default_factory=list)
    marked_since: int = 0  # unmarked entries of the linted code that are marked now
    outside: int = 0  # unmarked entries neither defined nor wrapped in the linted code
    marked: int = 0  # marked entries the run routed
    static: int = 0  # of ``applied``: reported by FWD001

    def lines(self, record: str, statistics: bool) -> list[str]:
        record = below(record) or record
        said = [f"fwdlint: {record}: stale entry {e.defined_in}.{e.method} (recorded at {below(e.file) or e.file}:"
                f"{e.line}): no such method in the linted code now; record again" for e in self.stale]
        if self.outside:
            said.append(f"fwdlint: {record}: {_entries(self.outside, 'unmarked')} of code outside the linted paths "
                        "ignored")
        if statistics:
            seen = len(self.applied)
            recall = f"{self.static / seen:.0%}" if seen else "n/a"
            said.append(f"fwdlint: {record}: {_entries(seen, 'unmarked')} ran in the linted code: {self.static} found "
                        f"statically (FWD001), {seen - self.static} seen only at run time (FWD004); static recall "
                        f"{recall}; {self.marked_since} marked since the run; {_entries(self.marked, 'marked')} "
                        "confirmed")
        return said


def _entries(count: int, kind: str) -> str:
    return contract.counted(count, f"{kind} entry", f"{kind} entries")


def summary(entries: Sequence[Entry], views: Sequence[ProjectIndex], diagnostics: Sequence[Diagnostic],
            paths: Sequence[str]) -> Summary:
    """What the record amounts to for the linted ``paths`` (after the analysis: ``views`` hold their facts)."""
    result = Summary(marked=len({(e.defined_in, e.method) for e in entries if e.marked}))
    files = [(view, view.files[path]) for view in views for path in paths if path in view.files]
    static = {(d.path, d.symbol) for d in diagnostics if d.code == DEFERS_TO}
    methods: dict[tuple[str, str], Entry] = {}  # one per method: its first entry
    for entry in entries:
        if not entry.marked:
            methods.setdefault((entry.defined_in, entry.method), entry)
    for entry in methods.values():
        home = next(((view, facts, cls) for view, facts in files for cls in [_class_of(entry, facts)]
                     if cls is not None), None)
        method = _method(home[2], entry.method) if home is not None else None
        if home is None and entry.file and any(_real(entry.file) == _real(facts.path) for _, facts in files):
            result.stale.append(entry)  # its file is linted, its class is gone
        elif home is None:
            if any(_wrap_site(entry, facts) is not None for _, facts in files):
                result.applied.append(entry)
            else:
                result.outside += 1
        elif method is None:
            result.stale.append(entry)
        elif marks.is_marked(home[0], method, home[1], ClassRef(home[1], home[2])):
            result.marked_since += 1
        else:
            result.applied.append(entry)
            result.static += (home[1].path, f"{home[2].qualname}.{entry.method}") in static
    return result


# -- the fix -----------------------------------------------------------------------------------------
def fix(context: FixContext, findings: Sequence[Diagnostic],
        options: Mapping[str, str]) -> tuple[list[FileFix], list[Unfixed]]:
    """At a ``def``: FWD001's decorator; at a set-up statement: a registration right after it."""
    from lint_rules.fix.registrations import register_after_sites
    from lint_rules.rules.fwd001_unmarked_entry import fix_decorator

    at_def, at_site = [], []
    for finding in findings:
        facts = context.analysis.facts_for(finding.path)
        cls = facts.class_named(finding.symbol.rpartition(".")[0]) if facts is not None else None
        (at_def if cls is not None and _method(cls, finding.symbol.rpartition(".")[2]) else at_site).append(finding)
    files, unfixed = fix_decorator.fix(context, at_def) if at_def else ([], [])
    for path, group in groupby(sorted(at_site), key=lambda d: d.path):
        facts = context.analysis.facts_for(path)
        plan: dict[WrapSite, list[str]] = {}
        planned: list[Diagnostic] = []
        for finding in group:
            site = next((s for s in facts.wrap_sites if s.line == finding.line), None) if facts else None
            if site is None or site.inline:
                why = ("the set-up shares its line with its block: no room for a registration" if site else
                       "no set-up statement fwdlint recognises starts on this line")
                unfixed.append(Unfixed(finding, f"{why}; register the method by hand"))
                continue
            plan.setdefault(site, []).append(finding.symbol.rpartition(".")[2])
            planned.append(finding)
        if plan:
            file = register_after_sites(path, sorted(plan.items(), key=lambda item: item[0].line))
            file.fixed.extend(planned)
            files.append(file)
    return files, unfixed
