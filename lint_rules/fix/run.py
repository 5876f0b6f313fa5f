"""``fwdlint --fix`` / ``--diff``: turn findings into edits.

Data flow: the engine's analysis (diagnostics, facts, project views) -> each rule's fixer for the
chosen style (``rules/*.FIXERS``) -> ``verify`` (only planned lines added, still parses and
compiles) -> a unified diff or an atomic write (``atomic``). Files without findings are never
parsed again, and a file whose fix is refused is left untouched and reported.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

from lint_rules.diagnostics import Diagnostic, FileError
from lint_rules.engine import Result, Run, Session, analyse
from lint_rules.fix.atomic import ChangedOnDisk, atomic_write
from lint_rules.facts.model import FileFacts
from lint_rules.fix.result import FileFix, FixContext, Unfixed
from lint_rules.project import ClassRef, ProjectIndex
from lint_rules.report import below, shown
from lint_rules.rules import RULES, selected_codes
from lint_rules.rules import fwd001_unmarked_entry as fwd001
from lint_rules.workers import on_deep_stack

# a diff's lines end at LF only, as git and patch read them: a CR (CRLF, or a lone-CR file, which is
# then one line) stays part of its line, else the context would not match what they read
_DIFF_LINES = re.compile(rb"[^\n]*\n|[^\n]+$")
_C_ESCAPES = {0x07: b"\\a", 0x08: b"\\b", 0x09: b"\\t", 0x0A: b"\\n", 0x0B: b"\\v", 0x0C: b"\\f",
              0x0D: b"\\r", 0x22: b'\\"', 0x5C: b"\\\\"}
STYLES: tuple[str, ...] = tuple(dict.fromkeys(style for rule in RULES for style in rule.FIXERS))


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
    """Analyse ``paths`` and compute (not write) the fixes. The fixers parse the files with
    findings again, in this process: on a stack as deep as the parser workers' (``workers``)."""
    return on_deep_stack(_plan, list(dict.fromkeys(paths)), run, style)


def _plan(paths: list[str], run: Run, style: str) -> FixRun:
    analysis = analyse(paths, run)
    result = FixRun(errors=list(analysis.errors))
    context = FixContext(paths, analysis, run.jobs)
    related = set(_set_up_findings(analysis, paths, run)) if style == "call" else set()
    for rule in RULES:
        found = [d for d in [*analysis.diagnostics, *sorted(related)] if d.code == rule.CODE]
        if not found:
            continue
        fixer = rule.FIXERS.get(style)
        if fixer is None:
            result.unfixed.extend(Unfixed(d, f"no automatic fix for {d.code} in the {style} style") for d in found)
            continue
        files, unfixed = fixer(context, found)
        result.files.extend(files)
        result.unfixed.extend(unfixed)
    result.files = _first_fix_per_file(result)
    for file in result.files:
        result.unfixed.extend(file.unfixed)
        if file.error is not None:
            result.errors.append(FileError(file.path, file.error))
    # a finding of a file the run was not given is reported only if a given file fixes it
    result.unfixed = [u for u in result.unfixed if u.diagnostic not in related]
    result.unfixed.sort(key=lambda u: u.diagnostic)
    result.errors.sort()
    return result


def _set_up_findings(analysis: Result, paths: Sequence[str], run: Run) -> list[Diagnostic]:
    """FWD001 findings in project files the run was not given, on the classes (their bases and
    subclasses) that the given files set up and call methods on: ``--fix-style call train.py``
    registers the methods of ``model.py``'s class after ``ddp = DDP(Net())`` in ``train.py``, as
    ``fwdlint --fix --fix-style call .`` does. The engine checks those files (noqa and per-file
    ignores apply); which classes are set up comes from the facts and the project view."""
    if fwd001.CODE not in selected_codes(run.select, run.ignore):
        return []
    given = set(paths)
    related: dict[str, tuple[ProjectIndex, FileFacts]] = {}
    for path in paths:
        view = analysis.view_for(path)
        if view is None:
            continue
        for ref in _set_up_classes(view, view.files[path]):
            for item in [*view.mro(ref), *view.subclasses(ref)]:
                if item.file.path not in given and item.file.path in view.files:
                    related[item.file.path] = (view, item.file)
    if not related:
        return []
    session = Session(dataclasses.replace(run, cache=False))
    try:
        return [d for view, facts in related.values() for d in session.check(view, facts) if d.code == fwd001.CODE]
    finally:
        session.store.close()


def _set_up_classes(view: ProjectIndex, facts: FileFacts) -> list[ClassRef]:
    """The classes of the models a file sets up and then calls methods on."""
    found = (view.find_constructed(site.cls, facts) for site in facts.wrap_sites if site.cls and site.called)
    return [ref for ref in found if ref is not None]


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


def fix_in_passes(paths: Iterable[str], run: Run = Run(), style: str = "decorator", passes: int = 3) -> FixRun:
    """``plan`` + ``write`` until no finding is pending (a file with findings of several rules is
    fixed one rule per pass); what every pass fixed and wrote, and what the last one left."""
    paths = list(dict.fromkeys(paths))
    total = FixRun()
    for _ in range(passes):
        current = plan(paths, run, style)
        write(current, root=run.project_root)
        total.files.extend(current.changed)
        total.errors = sorted({*total.errors, *current.errors})
        total.unfixed = current.unfixed
        if not any(u.reason == PENDING for u in current.unfixed) or not current.changed:
            break
    return total


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


def diff_name(path: str) -> str:
    """The path a diff header names: relative to the working directory, so that ``git apply`` and
    ``patch -p1`` run where fwdlint ran take the diff, however the file was named (``/abs/m.py``,
    ``../proj/m.py``, ``$PWD/m.py`` through a symlinked directory). A file outside the working
    directory gets a ``../`` path: ``git apply`` takes it with ``--unsafe-paths`` (its switch for
    paths outside the working area), GNU patch refuses it; an absolute name (``a//abs/m.py``, what
    was printed before) is refused by both."""
    try:
        cwd = os.getcwd()
    except OSError:  # the working directory is gone: nothing is relative to it
        return Path(os.path.abspath(path)).as_posix()
    lexical = os.path.abspath(path)
    # the names as given first (a symlinked file keeps its own name), then with symlinks resolved
    # (the shell's $PWD may name the working directory through a symlink, getcwd() never does)
    for base, target in ((cwd, lexical), (os.path.realpath(cwd), os.path.realpath(lexical))):
        try:
            relative = below(target, base)
        except ValueError:  # another drive (Windows)
            return Path(lexical).as_posix()
        if relative is not None:
            return relative
    return Path(os.path.relpath(lexical, cwd)).as_posix()


def unified_diff(file: FileFix) -> bytes:
    """``--- a/path`` / ``+++ b/path`` (``diff_name``) so ``git apply`` and ``patch -p1`` take the output.

    Made of the files' own bytes: re-encoding the lines (a latin-1 file, a UTF-8 BOM on line 1)
    would give context lines that no longer match the file, and the patch would not apply."""
    name = diff_name(file.path).encode("utf-8", "surrogateescape")
    old = _DIFF_LINES.findall(file.old)
    new = _DIFF_LINES.findall(file.new)
    lines = []
    for line in difflib.diff_bytes(difflib.unified_diff, old, new, header_name(b"a/" + name),
                                   header_name(b"b/" + name)):
        lines.append(line if line.endswith(b"\n") else line + b"\n\\ No newline at end of file\n")
    return b"".join(lines)


def header_name(name: bytes) -> bytes:
    """A ``---`` / ``+++`` name as git writes it: C-quoted (``"a/x\\ty.py"``) if it holds a control
    character, ``"`` or ``\\``, which git apply and GNU patch unquote; else as is, with a tab after a
    name holding a space (GNU patch ends an unquoted name at a tab, and otherwise guesses)."""
    if not any(byte < 0x20 or byte in (0x22, 0x5C, 0x7F) for byte in name):
        return name + b"\t" if b" " in name else name
    quoted = (_C_ESCAPES.get(byte) or (b"\\%03o" % byte if byte < 0x20 or byte == 0x7F else bytes([byte]))
              for byte in name)
    return b'"' + b"".join(quoted) + b'"'


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
