"""``fwdlint --fix`` / ``--diff``: turn FWD001 findings into marks.

Data flow: the engine's diagnostics (path, def line, ``Class.method``) -> per-file codemods
(``fix_decorator`` or ``fix_call``) -> ``fix_verify`` (only planned lines added, still parses and
compiles) -> a unified diff or an atomic write (``atomic``). Files without findings are never
parsed again, and a file whose fix is refused is left untouched and reported.

Per-file work is independent in the decorator style, so ``-j N`` runs it in worker processes;
results are collected in path order, so the output does not depend on ``N``.
"""

from __future__ import annotations

import difflib
import re
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from itertools import groupby
from pathlib import Path
from typing import Iterable, Sequence

import libcst as cst

from lint_rules.atomic import ChangedOnDisk, atomic_write
from lint_rules.diagnostics import Diagnostic, FileError
from lint_rules.engine import analyse, decode
from lint_rules.fix_decorator import fix_source
from lint_rules.fix_result import FileFix, Unfixed
from lint_rules.project import Config

FIXABLE = "FWD001"
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")  # Python's line ends only (not \f, \u2028)
STYLES = ("decorator", "call")


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


def _decorate(task: tuple[str, tuple[Diagnostic, ...]]) -> FileFix:
    """One file of the decorator style (a top-level function: it runs in worker processes)."""
    path, diagnostics = task
    try:
        old = Path(path).read_bytes()
        return fix_source(path, old, diagnostics)
    except (OSError, cst.ParserSyntaxError, RecursionError, SyntaxError, UnicodeDecodeError) as error:
        text = str(error).strip()
        message = f"fix not applied: {type(error).__name__}: {text.splitlines()[0] if text else ''}"
        return FileFix(path, error=message, unfixed=[Unfixed(d, "fix failed") for d in diagnostics])


def _map(function, tasks: list, jobs: int) -> list:
    if jobs > 1 and len(tasks) > 1:
        with ProcessPoolExecutor(max_workers=min(jobs, len(tasks))) as pool:
            return list(pool.map(function, tasks))
    return [function(task) for task in tasks]


def plan(paths: Iterable[str], config: Config, select: Sequence[str] = ("FWD",), ignore: Sequence[str] = (),
         jobs: int = 1, style: str = "decorator") -> FixRun:
    """Analyse ``paths`` and compute (not write) the fixes."""
    paths = list(paths)
    analysis = analyse(paths, config, select=select, ignore=ignore, jobs=jobs)
    run = FixRun(errors=list(analysis.errors))
    fixable = [d for d in analysis.diagnostics if d.code == FIXABLE]
    run.unfixed.extend(Unfixed(d, f"no automatic fix for {d.code}")
                       for d in analysis.diagnostics if d.code != FIXABLE)
    if style == "call":
        from lint_rules.fix_call import fix_calls  # only the call style needs the whole project

        files, unfixed = fix_calls(paths, analysis.index, fixable)
        run.files.extend(files)
        run.unfixed.extend(unfixed)
    else:
        tasks = [(path, tuple(group)) for path, group in groupby(sorted(fixable), key=lambda d: d.path)]
        run.files.extend(_map(_decorate, tasks, jobs))
    for file in run.files:
        run.unfixed.extend(file.unfixed)
        if file.error is not None:
            run.errors.append(FileError(file.path, file.error))
    run.unfixed.sort(key=lambda u: u.diagnostic)
    run.errors.sort()
    return run


def write(run: FixRun) -> None:
    """Write every changed file atomically; a file that cannot be written becomes an error and
    its findings unfixed."""
    for file in run.changed:
        try:
            atomic_write(file.path, file.new, expected_old=file.old)
        except (OSError, ChangedOnDisk) as error:
            file.error = f"not written: {error}"
            run.errors.append(FileError(file.path, file.error))
            run.unfixed.extend(Unfixed(d, "could not write the file") for d in file.fixed)
            file.fixed = []
    run.unfixed.sort(key=lambda u: u.diagnostic)
    run.errors.sort()


def _text(data: bytes) -> str:
    try:
        return decode(data)
    except (SyntaxError, LookupError, UnicodeDecodeError):
        return data.decode("utf-8", "replace")


def unified_diff(file: FileFix) -> str:
    """``--- a/path`` / ``+++ b/path`` so ``git apply`` and ``patch -p1`` take the output."""
    name = Path(file.path).as_posix()
    old = _LINE.findall(_text(file.old))
    new = _LINE.findall(_text(file.new))
    lines = []
    for line in difflib.unified_diff(old, new, f"a/{name}", f"b/{name}"):
        lines.append(line if line.endswith(("\n", "\r")) else line + "\n\\ No newline at end of file\n")
    return "".join(lines)


def report_lines(run: FixRun) -> list[str]:
    """``path:line:col: FWD001 not fixed: <reason>`` per finding that remains (1-based col)."""
    return [f"{u.diagnostic.path}:{u.diagnostic.line}:{u.diagnostic.col + 1}: {u.diagnostic.code} "
            f"not fixed: {u.reason}" for u in run.unfixed]


def exit_status(run: FixRun, diff: bool) -> int:
    """2 on errors; 1 if findings remain (or, for ``--diff``, if anything would change); else 0."""
    if run.errors:
        return 2
    if run.unfixed or (diff and run.changed):
        return 1
    return 0
