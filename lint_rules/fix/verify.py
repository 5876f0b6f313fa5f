"""The gate every fix passes before it is written, the same for every rule.

1. The bytes: the byte order mark and the source encoding stay; no existing line changes except
   those the fix declared (``FileFix.may_change``: an import it extends, a statement it rewrites,
   an import it removes). A codemod that reformats a line, drops a BOM or normalises CRLF would
   turn a one-line fix into a noisy diff, so LibCST's round trip is not trusted.
2. The program: the new text compiles (CPython is the authority) and parses again into facts
   (through the store's parser workers, as any file is read).
3. The findings: the changed files, and the files whose findings a fix claims, are linted again
   with every fix of the pass in the project view. Each finding the fix claims must be gone and
   no new finding may appear. Since a fixed finding no longer exists, fixing the fixed text again
   has nothing to do: this is what makes ``--fix`` idempotent.

A fix that fails any of them is refused: the file is left untouched and its findings are
reported as not fixed, with the reason.
"""

from __future__ import annotations

import codecs
import functools
from collections import Counter
from typing import TYPE_CHECKING, AbstractSet, Callable, Optional, Sequence

from lint_rules.diagnostics import Diagnostic, FileError
from lint_rules.facts.model import FileFacts
from lint_rules.fix import isolated
from lint_rules.fix.result import FileFix, Unfixed
from lint_rules.source import decode, one_line, source_encoding

if TYPE_CHECKING:
    from lint_rules.engine import Result, Run

BOM = b"\xef\xbb\xbf"


class FixRefused(Exception):
    """The computed fix is unsafe; the file is left untouched."""


def encoded(text: str, encoding: str) -> bytes:
    """A new line as the file will hold it: in the file's encoding (a latin-1 file gets latin-1
    bytes), without a BOM (that belongs to the file, not the line)."""
    codec = codecs.lookup(encoding).name
    return text.encode("utf-8" if codec == "utf-8-sig" else codec)


def verify(old: bytes, new: bytes, may_change: AbstractSet[int], path: str) -> None:
    """Raise ``FixRefused`` unless ``new`` keeps ``old``'s encoding and every old line outside
    ``may_change`` (1-based), and compiles. New lines may appear anywhere."""
    if old.startswith(BOM) != new.startswith(BOM):
        raise FixRefused("the fix would change the byte order mark")
    try:
        if source_encoding(old) != source_encoding(new):
            raise FixRefused("the fix would change the source encoding")
    except SyntaxError as error:
        raise FixRefused(f"the fixed source has an unreadable encoding: {error.msg}") from None
    lost = first_line_not_kept(old.removeprefix(BOM).splitlines(keepends=True),
                               new.removeprefix(BOM).splitlines(keepends=True), may_change)
    if lost is not None:
        raise FixRefused(f"the fix would change existing line {lost}")
    try:
        compile(new, path, "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as error:
        raise FixRefused(f"the fixed source does not compile: {error}") from None


def first_line_not_kept(old: Sequence[bytes], new: Sequence[bytes], may_change: AbstractSet[int]) -> Optional[int]:
    """The first old line (1-based) outside ``may_change`` that ``new`` does not keep, or None.

    The old lines outside ``may_change`` must appear in ``new``, whole and in their order, with any
    lines between them: only whole lines were added, besides the declared ones. That is a subsequence
    test, and matching each line at its first occurrence from where the last match ended decides it
    in one pass, O(old + new). (``difflib.SequenceMatcher(autojunk=False)``, used before, is quadratic
    in repeated lines: a finding and 20,000 ``x = 1`` lines took 43 s; and its answer depended on
    which of many equal diffs it chose, where the property itself does not.)"""
    position = 0
    for number, line in enumerate(old, 1):
        if number in may_change:
            continue
        while position < len(new) and new[position] != line:
            position += 1
        if position == len(new):
            return number
        position += 1
    return None


def refuse(file: FileFix, reason: str) -> None:
    """Leave ``file`` untouched: the error line says why, every finding it claimed is not fixed."""
    file.error = f"fix not applied: {reason}"
    file.unfixed.extend(Unfixed(d, f"fix refused: {reason}") for d in file.fixed)
    file.fixed = []
    file.new = file.old


def text_problem(file: FileFix) -> Optional[str]:
    """Step 1 and the compile of step 2 for one changed file: why it is refused, or None."""
    try:
        verify(file.old, file.new, file.may_change, file.path)
    except FixRefused as refused:
        return str(refused)
    return None


def check_text(file: FileFix) -> None:
    """``text_problem``, refused in place; the verdict of the worker that made the fix if it gave one."""
    problem = file.text_problem if file.checked else text_problem(file)
    if problem is not None:
        refuse(file, problem)


def relint(files: Sequence[FileFix], analysis: "Result", run: "Run") -> None:
    """Steps 2 and 3 for the changed ``files`` of one pass (each refused in place if it fails)."""
    from lint_rules.engine import Session

    changed = [f for f in files if f.changed]
    if not changed:
        return
    session = Session(run, changed[0].path)
    try:
        new_facts: dict[str, FileFacts] = {}
        for file in changed:
            outcome = session.store.facts(file.path, data=file.new)
            if isinstance(outcome, FileError):
                refuse(file, f"the fixed source cannot be read again: {outcome.message}")
            else:
                new_facts[file.path] = outcome
        views = {id(view): view.with_files(new_facts) for view in analysis.views.values()}
        before = Counter((d.path, d.code, d.symbol) for d in analysis.diagnostics)
        given = {d.path for d in analysis.diagnostics} | {facts.path for facts in new_facts.values()}
        for path in sorted({d.path for f in changed for d in f.fixed} - given):  # files the run was not given
            view = analysis.view_for(path)
            if view is not None:
                before.update((d.path, d.code, d.symbol) for d in session.check(view, view.files[path]))
        for file in changed:
            if file.path not in new_facts:
                continue
            problem = _findings_problem(file, session, analysis, views, before)
            if problem is not None:
                refuse(file, problem)
    finally:
        session.store.close()


def _findings_problem(file: FileFix, session, analysis: "Result", views: dict, before: Counter) -> Optional[str]:
    """Why the findings after ``file``'s fix are wrong, or None: a claimed finding still there, or
    a new one (compared by path, code and symbol: the lines move)."""
    claimed = Counter((d.path, d.code, d.symbol) for d in file.fixed)
    for path in sorted({file.path, *(d.path for d in file.fixed)}):
        view = analysis.view_for(path)
        if view is None:
            continue
        fresh = views[id(view)]
        after = Counter((d.path, d.code, d.symbol) for d in session.check(fresh, fresh.files[path]))
        for key, count in after.items():
            if count > before[key] - claimed[key]:
                _, code, symbol = key
                if claimed[key]:
                    return f"{code} on {symbol} is still reported after the fix"
                return f"the fix would add a finding: {code} on {symbol}"
    return None


def fix_file(fix_source: Callable[[str, bytes, Sequence[Diagnostic]], FileFix], path: str, data: bytes,
             diagnostics: tuple[Diagnostic, ...]) -> FileFix:
    """Run a fixer's ``fix_source`` on one file's text; a file that cannot be parsed becomes an error
    line and its findings unfixed. Module-level with a module-level ``fix_source``, so the workers can
    run it (``fix_files``)."""
    import libcst as cst

    try:
        return fix_source(path, data, diagnostics)
    except (cst.ParserSyntaxError, RecursionError, SyntaxError, UnicodeDecodeError) as error:
        try:
            source: Optional[str] = decode(data)
        except (SyntaxError, UnicodeDecodeError, LookupError):
            source = None
        return isolated.not_applied(path, one_line(error, source, path), diagnostics)


def fix_files(fix_source: Callable[[str, bytes, Sequence[Diagnostic]], FileFix],
              tasks: Sequence[tuple[str, tuple[Diagnostic, ...]]], jobs: int) -> list[FileFix]:
    """``fix_file`` over ``tasks`` in order, each in a parser worker (``isolated``: the same memory,
    time and crash isolation as a parse, at any ``jobs``), where a worker that dies costs its file only."""
    return isolated.run(functools.partial(fix_file, fix_source), [(path, (found,)) for path, found in tasks], jobs,
                        [found for _, found in tasks], text_problem)
