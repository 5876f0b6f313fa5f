"""Rule codes as users write them (``--select``, a configuration's ``ignore``, ``per-file-ignores``):
which name no rule, and the rule codes a slip was most likely meant as."""

from __future__ import annotations

from typing import Optional, Sequence

from lint_rules.rules import CODES


def code_problem(code: str) -> Optional[str]:
    """Why a code or prefix names no rule (``FWD``, ``FWD0``, ``FWD001`` name some; ``FWD01``,
    ``FWD999``, ``E501``, ``ALL`` none), None if it names some. Case-sensitive, as flake8's
    matching and ruff are: ``fwd001`` is an error with a hint, never silently another code."""
    if code and any(known.startswith(code) for known in CODES):
        return None
    listed = f"codes: {', '.join(CODES)}"
    if code.upper() != code and code_problem(code.upper()) is None:
        return (f"no rule code starts with '{shown_code(code)}'; did you mean '{shown_code(code.upper())}'? "
                f"(codes are upper case; {listed})")
    hint = "; 'FWD' selects every rule" if code.upper() == "ALL" else ""  # ruff's ALL
    close = close_codes(code)
    if close:
        hint += f"; did you mean {' or '.join(repr(c) for c in close)}?"
    return f"no rule code starts with '{shown_code(code)}'{hint} ({listed})"


def shown_code(code: str) -> str:
    """A code for an error line: a 1 MB one is not echoed whole, nor are control characters."""
    from lint_rules.bounded import printable

    return printable(code)


#: The longest code a suggestion can be for: no name is further than two edits from it
#: (``close_codes``), and one edit changes the length by one at most.
_SUGGEST_UP_TO = max(map(len, CODES)) + 2


def close_codes(code: str) -> list[str]:
    """The rule codes and prefixes ``code`` is most likely a slip for (``FDW001``: ``FWD001``;
    ``FWD01``: ``FWD001``, ``FWD101``): ``difflib``'s close matches, those fewest edits away (a
    transposition is one), at most two edits and three names, else none. A prefix of ``code``
    itself is never offered (``FWD9`` is not a slip for ``FWD``). A code longer than
    ``_SUGGEST_UP_TO`` has none, found without looking: the prefixes below take memory and time
    quadratic in its length (100 kB took 5.7 s; 1 MB a MemoryError under 2 GiB, all memory without)."""
    import difflib

    if len(code) > _SUGGEST_UP_TO:
        return []
    wanted = code.upper()
    known = sorted({c[:n] for c in CODES for n in range(3, len(c) + 1)} - {wanted[:n] for n in range(len(wanted))})
    near = difflib.get_close_matches(wanted, known, n=len(known), cutoff=0.6)
    by_edits = sorted((_edits(wanted, name), name) for name in near)
    best = [name for edits, name in by_edits if edits == by_edits[0][0] <= 2] if by_edits else []
    return best if len(best) <= 3 else []


def _edits(a: str, b: str) -> int:
    """Optimal string alignment distance: insertions, deletions, substitutions, adjacent transpositions."""
    rows = [list(range(len(b) + 1))] + [[i] + [0] * len(b) for i in range(1, len(a) + 1)]
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            rows[i][j] = min(rows[i - 1][j] + 1, rows[i][j - 1] + 1, rows[i - 1][j - 1] + (a[i - 1] != b[j - 1]))
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                rows[i][j] = min(rows[i][j], rows[i - 2][j - 2] + 1)
    return rows[-1][-1]


def first_code_problem(codes: Sequence[str]) -> Optional[str]:
    """``code_problem`` of the first code that names no rule, None if all name some."""
    return next(filter(None, map(code_problem, codes)), None)


#: An empty ``select`` (``--select ""``, ``select = []``) runs no rule: a check green forever.
EMPTY_SELECT = f"selects no rule (give codes or prefixes; 'FWD' selects every rule: {', '.join(CODES)})"
