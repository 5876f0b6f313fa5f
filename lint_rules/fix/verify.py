"""The last gate before a fixed file is written: is the new source exactly the old one plus
the lines we meant to insert, and does it still parse and compile?

A codemod that reformats a line, drops a BOM or normalises CRLF would turn a one-line fix into
a noisy diff (or a broken file). Rather than trusting LibCST's round trip, every result is
compared with the original bytes line by line: only whole new lines whose text we planned may
appear, the one existing statement we may extend (an existing ``from X import ...`` that
gets one more name) may change, a statement planned to be rewritten in place (FWD301's
``m.forward = MethodType(f, m)`` -> ``patch_forward(m, f)``) may become exactly its planned text,
and lines planned to go (the ``import types`` that rewrite left unused) may be deleted.
Anything else refuses the fix.
"""

from __future__ import annotations

import codecs
import difflib
import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional, Sequence

from lint_rules.diagnostics import Diagnostic
from lint_rules.fix.result import FileFix, Unfixed
from lint_rules.source import decode, one_line, source_encoding

BOM = b"\xef\xbb\xbf"


class FixRefused(Exception):
    """The computed fix is unsafe; the file is left untouched."""


@dataclass
class Plan:
    """What a codemod intends: the stripped text of each inserted line (bytes, without
    indentation or line ending, repeated as often as inserted) and the 1-based old line range
    of an import statement it may extend."""

    inserted: list[bytes] = field(default_factory=list)
    extended: Optional[tuple[int, int]] = None
    # 1-based old line -> the stripped text that replaces it (a statement rewritten in place)
    replaced: dict[int, bytes] = field(default_factory=dict)
    # 1-based old lines deleted (an import the fix left unused, and its section's blank line)
    removed: frozenset[int] = frozenset()


def planned(text: str, encoding: str) -> bytes:
    """A planned line as the file will hold it: in the file's encoding (a latin-1 file gets
    latin-1 bytes), without a BOM (that belongs to the file, not the line)."""
    codec = codecs.lookup(encoding).name
    return text.encode("utf-8" if codec == "utf-8-sig" else codec)


def verify(old: bytes, new: bytes, plan: Plan, path: str) -> None:
    """Raise ``FixRefused`` unless ``new`` is ``old`` plus the planned lines and still valid."""
    if old.startswith(BOM) != new.startswith(BOM):
        raise FixRefused("the fix would change the byte order mark")
    try:
        if source_encoding(old) != source_encoding(new):
            raise FixRefused("the fix would change the source encoding")
    except SyntaxError as error:
        raise FixRefused(f"the fixed source has an unreadable encoding: {error.msg}") from None
    old_lines = old.removeprefix(BOM).splitlines(keepends=True)
    new_lines = new.removeprefix(BOM).splitlines(keepends=True)
    wanted = sorted(plan.inserted)
    got: list[bytes] = []
    matcher = difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        span = plan.extended
        if tag == "insert" and span is not None and span[0] <= i1 < span[1]:
            continue  # a new line inside the parenthesised import being extended
        if tag == "insert":
            got.extend(line.strip() for line in new_lines[j1:j2])
            continue
        if tag == "replace" and span is not None and span[0] - 1 <= i1 and i2 <= span[1]:
            continue
        if tag == "replace" and span is not None and i1 < span[1] and span[0] <= i2 and all(
                span[0] <= line <= span[1] or line in plan.removed for line in range(i1 + 1, i2 + 1)):
            continue  # the extended import next to a removed one (difflib joins them into one change)
        if tag in ("replace", "delete") and all(line in plan.replaced or line in plan.removed
                                                for line in range(i1 + 1, i2 + 1)):
            got.extend(line.strip() for line in new_lines[j1:j2])
            continue
        raise FixRefused(f"the fix would change existing line {i1 + 1}")
    replacing = sorted(plan.replaced.values())
    if replacing:  # each replaced line's new text appears once among the changed lines
        for text in replacing:
            if text not in got:
                raise FixRefused("the fix would not rewrite the planned statement")
            got.remove(text)
    if plan.extended is None and sorted(got) != wanted:
        raise FixRefused("the fix would insert unexpected lines")
    if plan.extended is not None and not set(got) <= set(wanted):
        raise FixRefused("the fix would insert unexpected lines")
    try:  # CPython's own parser and compiler are the authority (a LibCST re-parse would double the cost)
        compile(new, path, "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as error:
        raise FixRefused(f"the fixed source does not compile: {error}") from None


def checked(result: FileFix, new: bytes, plan: Plan) -> FileFix:
    """``result`` carrying ``new`` if it passes ``verify``; otherwise the fix is refused: the file is
    left untouched and every finding it would have fixed is reported as not fixed."""
    try:
        verify(result.old, new, plan, result.path)
    except FixRefused as refused:
        result.error = f"fix not applied: {refused}"
        result.unfixed.extend(Unfixed(d, f"fix refused: {refused}") for d in result.fixed)
        result.fixed = []
        return result
    result.new = new
    return result


def fix_file(fix_source: Callable[[str, bytes, Sequence[Diagnostic]], FileFix],
             task: tuple[str, tuple[Diagnostic, ...]]) -> FileFix:
    """Run a fixer's ``fix_source`` on one file; a file that cannot be read or parsed becomes an error
    line and its findings unfixed. Module-level with a module-level ``fix_source``, so ``-j N``
    workers can run it (``fix_files``)."""
    import libcst as cst

    path, diagnostics = task
    data = b""
    try:
        data = Path(path).read_bytes()
        return fix_source(path, data, diagnostics)
    except (OSError, cst.ParserSyntaxError, RecursionError, SyntaxError, UnicodeDecodeError) as error:
        try:
            source: Optional[str] = decode(data)
        except (SyntaxError, UnicodeDecodeError, LookupError):
            source = None
        return _not_applied(path, one_line(error, source, path), diagnostics)


def _not_applied(path: str, reason: str, diagnostics: Sequence[Diagnostic]) -> FileFix:
    """A file left untouched: the error line says why, its findings are unfixed."""
    return FileFix(path, error=f"fix not applied: {reason}", unfixed=[Unfixed(d, "fix failed") for d in diagnostics])


def fix_files(fix_source: Callable[[str, bytes, Sequence[Diagnostic]], FileFix],
              tasks: Sequence[tuple[str, tuple[Diagnostic, ...]]], jobs: int) -> list[FileFix]:
    """``fix_file`` over ``tasks`` in order; with ``jobs`` > 1 in ``workers`` processes, where a
    worker that dies costs its file only."""
    from lint_rules import workers

    function = functools.partial(fix_file, fix_source)
    if jobs <= 1 or len(tasks) <= 1:
        return [function(task) for task in tasks]
    pool = workers.Pool(jobs, preload=(fix_source.__module__,))
    try:
        results = pool.map(function, tasks)
    finally:
        pool.close()
    return [_not_applied(path, result.reason, found) if isinstance(result, workers.Failure) else result
            for (path, found), result in zip(tasks, results)]
