"""The edits ``--fix`` would make, per finding, for the JSON report of a check run (an editor's
quick fix, as ruff's JSON ``fix.edits``).

The fix is computed as ``--fix`` computes it (``run.fix_in_passes``: every pass, every gate), but
each pass's text goes into ``source.OVERLAY`` instead of onto disk. Each changed file's first and
last text are compared line by line (``file_edits``); each changed block is an edit in the file's
text (its own encoding, decoded). An edit goes to the findings fixed in that file whose line it
touches or sits right above (a decorator above a ``def``); an edit near none of them (an import, a
registration after a set-up) goes to every finding its file's fix fixed. So one finding's edits
fix it (with the import it needs), and the distinct edits of all findings, applied to the files
as they were, give exactly the bytes ``--fix`` writes (``tests/test_fix_edits.py``).
"""

from __future__ import annotations

import difflib
import os
import re
from dataclasses import dataclass
from typing import Iterable, Optional, Sequence

from lint_rules.diagnostics import Diagnostic
from lint_rules.engine import Run
from lint_rules.fix.result import FileFix
from lint_rules.source import OVERLAY, source_encoding

# lines as editors and Python count them: \n, \r\n and a lone \r end a line
_LINES = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")
Position = tuple[int, int]  # 1-based row and column, columns in code points


@dataclass(frozen=True, order=True)
class Edit:
    path: str
    start: Position
    end: Position  # exclusive; == start for an insertion
    content: str


def lines(text: str) -> list[str]:
    return _LINES.findall(text)


def text_of(data: bytes) -> str:
    """A file's text as edits address it: decoded with its own encoding (``encoded`` reverses it)."""
    return data.decode(source_encoding(data), "surrogateescape")


def encoded(text: str, like: bytes) -> bytes:
    return text.encode(source_encoding(like), "surrogateescape")


def _position(old: list[str], index: int) -> Position:
    """Where line ``index`` (0-based) starts; past the last line: the end of the text."""
    if index < len(old) or not old or old[-1].endswith(("\n", "\r")):
        return index + 1, 1
    return len(old), len(old[-1]) + 1


def file_edits(path: str, old: str, new: str) -> list[Edit]:
    """The blocks of lines that differ between ``old`` and ``new``, as edits of ``old``."""
    before, after = lines(old), lines(new)
    matcher = difflib.SequenceMatcher(None, before, after, autojunk=False)
    return [Edit(path, _position(before, i1), _position(before, i2), "".join(after[j1:j2]))
            for tag, i1, i2, j1, j2 in matcher.get_opcodes() if tag != "equal"]


def apply(text: str, edits: Iterable[Edit]) -> str:
    """``text`` with non-overlapping ``edits`` applied (what an editor does with them)."""
    starts = [0]
    for line in lines(text):
        starts.append(starts[-1] + len(line))

    def offset(position: Position) -> int:
        row, col = position
        return starts[row - 1] + col - 1 if row <= len(starts) else len(text)

    for edit in sorted(edits, reverse=True):
        text = text[:offset(edit.start)] + edit.content + text[offset(edit.end):]
    return text


def _decorating(old: list[str], edit: Edit, line: int) -> bool:
    """Does ``edit`` touch line ``line`` (1-based), or sit above it with only decorators, comments
    and blank lines in between?"""
    first, last = edit.start[0], max(edit.end[0] - (edit.end[1] == 1 and edit.end != edit.start), edit.start[0])
    if first <= line <= last:
        return True
    return first < line and all(not text.strip() or text.lstrip().startswith(("@", "#"))
                                for text in old[first - 1:line - 1])


def attribute(files: Sequence[FileFix], findings: Sequence[Diagnostic]) -> dict[Diagnostic, list[Edit]]:
    """Each finding of ``findings`` that the passes in ``files`` fixed -> the edits that fix it.
    ``files``: every pass's ``FileFix`` of changed files, in pass order (a later pass reads the
    text an earlier one made: its findings are matched to ``findings`` by file, code and symbol)."""
    first: dict[str, bytes] = {}
    last: dict[str, bytes] = {}
    fixed: dict[str, list[Diagnostic]] = {}
    unused = list(findings)
    for file in files:
        first.setdefault(file.path, file.old)
        last[file.path] = file.new
        for done in file.fixed:
            found = done if done in unused else next(
                (d for d in unused if (d.path, d.code, d.symbol) == (done.path, done.code, done.symbol)), None)
            if found is not None:
                unused.remove(found)
                fixed.setdefault(file.path, []).append(found)
    result: dict[Diagnostic, list[Edit]] = {}
    for path, old in first.items():
        owners = fixed.get(path, [])
        if not owners:
            continue
        before = lines(text_of(old))
        for edit in file_edits(path, text_of(old), text_of(last[path])):
            near = [d for d in owners if _same_file(d.path, path) and _decorating(before, edit, d.line)]
            for finding in near or owners:
                result.setdefault(finding, []).append(edit)
    return result


def _same_file(a: str, b: str) -> bool:
    return a == b or os.path.realpath(a) == os.path.realpath(b)


def planned(paths: Sequence[str], run: Run, findings: Sequence[Diagnostic],
            style: str = "decorator") -> dict[Diagnostic, list[Edit]]:
    """The edits ``fwdlint --fix`` would make on ``paths``, by the finding of ``findings`` each
    fixes; nothing is written (the passes' texts stand in for the files, then are dropped). Only
    when a finding's rule has a fix: it costs what ``--fix`` costs (``fixtures/fwd001``, warm:
    1.7 s, against 0.15 s for the findings alone), hence ``--fix-edits`` asks for it."""
    from lint_rules.fix.run import FixRun, fix_in_passes
    from lint_rules.rules import RULES

    fixable = {rule.CODE for rule in RULES if getattr(rule, "fix", None) is not None}
    findings = [d for d in findings if d.code in fixable]
    if not findings:
        return {}
    run = run._replace(progress=None, coverage=False)  # the check run drew and counted already
    kept = dict(OVERLAY)  # standard input may stand for a file already
    passes: list[FileFix] = []

    def into_overlay(current: FixRun, root: Optional[object] = None) -> None:
        for file in current.changed:
            OVERLAY[os.path.realpath(file.path)] = file.new
            passes.append(file)

    try:
        fix_in_passes(paths, run, style=style, writer=into_overlay)
    finally:
        OVERLAY.clear()
        OVERLAY.update(kept)
    return attribute(passes, findings)
