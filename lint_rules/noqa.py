"""``# noqa`` exactly as flake8 applies it (flake8/violation.py): on the reported physical line,
a bare ``# noqa`` silences every code, ``# noqa: A1,B2`` silences codes equal to or starting
with a listed code, compared case-sensitively."""

from __future__ import annotations

import re

from lint_rules.source import split_lines

# flake8's own pattern (flake8/defaults.py), so `# noqa` means exactly what it means there.
NOQA_INLINE = re.compile(r"# noqa(?::[\s]?(?P<codes>([A-Z]+[0-9]+(?:[,\s]+)?)+))?", re.IGNORECASE)
_SPLIT = re.compile(r"[,\s]")


def noqa_lines(source: str) -> tuple[tuple[int, str], ...]:
    """``(line, codes as written)`` for every physical line with a ``# noqa`` ("" = all codes)."""
    if "noqa" not in source.lower():
        return ()
    found = []
    for number, line in enumerate(split_lines(source), 1):  # Python's line ends, not str.splitlines'
        match = NOQA_INLINE.search(line)
        if match:
            found.append((number, match.group("codes") or ""))
    return tuple(found)


def is_suppressed(noqa: tuple[tuple[int, str], ...], line: int, code: str) -> bool:
    for noqa_line, codes in noqa:
        if noqa_line != line:
            continue
        if not codes:
            return True
        listed = tuple(c for c in _SPLIT.split(codes) if c)
        return code in listed or code.startswith(listed)
    return False
