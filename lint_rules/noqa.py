"""``# noqa`` exactly as flake8 applies it (flake8/violation.py): on the reported physical line,
a bare ``# noqa`` silences every code, ``# noqa: A1,B2`` silences codes equal to or starting
with a listed code, compared case-sensitively."""

from __future__ import annotations

import re

_SPLIT = re.compile(r"[,\s]")


def is_suppressed(noqa: tuple[tuple[int, str], ...], line: int, code: str) -> bool:
    for noqa_line, codes in noqa:
        if noqa_line != line:
            continue
        if not codes:
            return True
        listed = tuple(c for c in _SPLIT.split(codes) if c)
        return code in listed or code.startswith(listed)
    return False
