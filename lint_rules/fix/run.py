"""``fwdlint --fix`` / ``--diff``: turn findings into edits.

Data flow: the engine's analysis (diagnostics, facts, project views) -> each selected rule's
``fix`` with its options (``rules/base.py``) -> the gate every fix passes (``verify``: the bytes,
compile, re-parse, re-lint) -> a unified diff (``diff``) or an atomic write (``atomic``). A file
whose fix is refused is left untouched and reported. ``fix_in_passes`` repeats until no fixable
finding is left, re-analysing only what the last pass changed and the files that import it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Mapping, Optional, Sequence

from lint_rules.diagnostics import Diagnostic, FileError, shown
from lint_rules.engine import Result, Run, analyse
from lint_rules.fix import verify
from lint_rules.fix.atomic import ChangedOnDisk, atomic_write
from lint_rules.fix.diff import unified_diff  # noqa: F401  (the front ends' name for it)
from lint_rules.fix.result import FileFix, FixContext, Unfixed
from lint_rules.rules import RULES, selected
from lint_rules.source import OVERLAY
from lint_rules.workers import on_deep_stack

#: ``--fix-style`` choices: the ``style`` option of the rules that have one (FWD001's).
STYLES: tuple[str, ...] = tuple(dict.fromkeys(
    choice for rule in RULES for choice in getattr(rule, "FIX_OPTIONS", {}).get("style", ())))


@dataclass
class FixRun:
    """Everything a front end prints after ``--fix`` or ``--diff``."""

    files: list[FileFix] = field(default_factory=list)  # files with something to fix, path order
    unfixed: list[Unfixed] = field(default_factory=list)
    errors: list[FileError] = field(default_factory=list)

    @property
    def changed(self) -> list[FileFix]:
        return [f for f in self.files if f.changed]

    @property
    def fixed(self) -> list[Diagnostic]:
        return [d for f in self.changed for d in f.fixed]


def plan(paths: Iterable[str], run: Run = Run(), style: str = "decorator") -> FixRun:
    """Analyse ``paths`` and compute (not write) the verified fixes. The fixes parse the files with
    findings again, in this process: on a stack as deep as the parser workers' (``workers``)."""
    return on_deep_stack(_plan, list(dict.fromkeys(paths)), run, {"style": style})[0]


def _plan(paths: list[str], run: Run, options: Mapping[str, str]) -> tuple[FixRun, Result]:
    analysis = analyse(paths, run)
    result = FixRun(errors=list(analysis.errors))
    context = FixContext(paths, analysis, run)
    for rule in selected(run.select, run.ignore):
        found = [d for d in analysis.diagnostics if d.code == rule.CODE]
        fix = getattr(rule, "fix", None)
        if fix is None:
            result.unfixed.extend(Unfixed(d, by_hand(d)) for d in found)
            continue
        choices = getattr(rule, "FIX_OPTIONS", {})
        own = {name: options[name] if options.get(name) in values else values[0] for name, values in choices.items()}
        files, unfixed = fix(context, found, own)
        result.files.extend(files)
        result.unfixed.extend(unfixed)
    result.files = _first_fix_per_file(result)
    for file in result.files:
        if file.changed:
            verify.check_text(file)
    verify.relint(result.files, analysis, run)
    for file in result.files:
        result.unfixed.extend(file.unfixed)
        if file.error is not None:
            result.errors.append(FileError(file.path, file.error))
    result.unfixed.sort(key=lambda u: u.diagnostic)
    result.errors.sort()
    return result, analysis


def by_hand(diagnostic: Diagnostic) -> str:
    """Why a finding of a rule without a fix stays, and what to do instead."""
    how = diagnostic.help or f"fwdlint --explain {diagnostic.code} says how"
    return f"no automatic fix for {diagnostic.code}; by hand: {how}"


#: Why a finding waits: two rules' fixes of one file are computed from the same old text, so only
#: the first (in rule order) is applied; the next pass of ``fix_in_passes`` computes the other.
PENDING = "another rule's fix of this file comes first; run --fix again"


def _first_fix_per_file(result: FixRun) -> list[FileFix]:
    """One ``FileFix`` per path (rule order); the findings of the others are pending."""
    kept: dict[str, FileFix] = {}
    for file in result.files:
        first = kept.get(file.path)
        if first is None or not first.changed:
            kept[file.path] = file
            if first is not None:
                file.unfixed.extend(first.unfixed)
        elif file.changed:
            first.unfixed.extend(Unfixed(d, PENDING) for d in file.fixed)
            first.unfixed.extend(file.unfixed)
        else:
            first.unfixed.extend(file.unfixed)
    return sorted(kept.values(), key=lambda f: f.path)


def fix_in_passes(paths: Iterable[str], run: Run = Run(), style: str = "decorator",
                  writer: Optional[Callable[[FixRun, Optional[Path]], None]] = None) -> FixRun:
    """``plan`` + ``write`` (or ``writer``) until no fixable finding is pending (a file with findings of several
    rules is fixed one rule per pass). A pass must fix something, so there are at most as many
    passes as pending findings after the first, plus one. Each later pass analyses only the files
    the last one changed and the given files that import them (their findings may change); the
    others keep what the earlier passes said of them."""
    paths = list(dict.fromkeys(paths))
    total = FixRun()
    targets, limit, passes = paths, 1, 0
    while True:
        current, analysis = on_deep_stack(_plan, targets, run, {"style": style})
        (writer or write)(current, run.project_root)
        passes += 1
        fixed = set(current.fixed)
        again = set(targets)
        total.unfixed = [u for u in total.unfixed if u.diagnostic.path not in again and u.diagnostic not in fixed]
        total.unfixed = sorted([*total.unfixed, *current.unfixed], key=lambda u: u.diagnostic)
        total.files.extend(current.changed)
        total.errors = sorted({*total.errors, *current.errors})
        pending = [u for u in current.unfixed if u.reason == PENDING]
        if passes == 1:
            limit = 1 + len(pending)
        if not pending or not current.changed or passes >= limit:
            return total
        targets = _importers([f.path for f in current.changed], paths, analysis)


def _importers(changed: Sequence[str], paths: Sequence[str], analysis: Result) -> list[str]:
    """``changed`` and the given ``paths`` that import one of them, directly or through each other."""
    def module_of(path: str) -> Optional[str]:
        facts = analysis.facts_for(path)
        return facts.module if facts is not None and facts.module else None

    chosen = set(changed)
    modules = {m for m in map(module_of, changed) if m}
    grew = True
    while grew:
        grew = False
        for path in paths:
            facts = analysis.facts_for(path)
            if path in chosen or facts is None:
                continue
            if any(target == m or target.startswith(m + ".") for _, target in facts.imports for m in modules):
                chosen.add(path)
                module = module_of(path)
                if module:
                    modules.add(module)
                grew = True
    return [path for path in paths if path in chosen]


def write(run: FixRun, root: Path | None = None) -> None:
    """Write every changed file atomically; a file that cannot be written (one that leads through
    a symlink outside ``root``, ``--project-root``, or else its own project: ``atomic``) becomes an
    error and its findings unfixed."""
    for file in run.changed:
        try:
            atomic_write(file.path, file.new, expected_old=file.old, root=root)
        except (OSError, ChangedOnDisk) as error:
            file.error = f"not written: {error}"
            run.errors.append(FileError(file.path, file.error))
            run.unfixed.extend(Unfixed(d, "could not write the file") for d in file.fixed)
            file.fixed = []
    run.unfixed.sort(key=lambda u: u.diagnostic)
    run.errors.sort()


def into_overlay(run: FixRun, root: Path | None = None) -> None:
    """The writer for text given on standard input (``source.OVERLAY``): its new text replaces the
    old for the next pass and for the front end to print; nothing is written to disk. A fix that
    would change another file is refused (fix the files themselves for that)."""
    for file in run.changed:
        if os.path.realpath(file.path) in OVERLAY:
            OVERLAY[os.path.realpath(file.path)] = file.new
            continue
        file.error = f"not written: fixing standard input changes no file (run fwdlint --fix {file.path})"
        run.unfixed.extend(Unfixed(d, "the fix would change another file than standard input") for d in file.fixed)
        file.fixed = []
    run.unfixed.sort(key=lambda u: u.diagnostic)
    run.errors.sort()


def report_lines(run: FixRun) -> list[str]:
    """``path:line:col: FWD001 not fixed: <reason>`` per finding that remains (1-based col)."""
    return [f"{shown(u.diagnostic.path)}:{u.diagnostic.line}:{u.diagnostic.col + 1}: {u.diagnostic.code} "
            f"not fixed: {u.reason}" for u in run.unfixed]


def exit_status(run: FixRun, diff: bool) -> int:
    """2 on errors; 1 if findings remain (or, for ``--diff``, if anything would change); else 0."""
    if run.errors:
        return 2
    if run.unfixed or (diff and run.changed):
        return 1
    return 0
