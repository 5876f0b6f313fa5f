"""Every fix is computed in a parser worker (``workers``), as every lint parse is: LibCST needs far
more memory than a file's size suggests (6 MB of ``x = 1`` lines: 8.8 GiB), and a fix parsed in the
main process under a smaller limit aborted the whole run (SIGABRT, no output, the other files not
fixed). In a worker, such a file costs its own fix one error line ("out of memory", "timed out": the
same per-file limits as a parse, ``FWDLINT_FILE_TIMEOUT`` and ``FWDLINT_WORKER_MEMORY``), and the
text gate (``verify.text_problem``: the kept lines, compile) runs there too, next to the parse.

The workers are the process's (``workers.shared``): every pass and every fix uses them. The
text a fixer edits is read here and sent, so a buffer standing for a file (``source.OVERLAY``,
``--fix -``) is what is fixed.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Optional, Sequence

from lint_rules import workers
from lint_rules.diagnostics import Diagnostic
from lint_rules.fix.result import FileFix, Unfixed
from lint_rules.source import read_source

FixSource = Callable[[str, bytes, Sequence[Diagnostic]], FileFix]

#: Compute fixes in this process instead (for tests that replace a fixer's function in this process).
IN_PROCESS = False


def not_applied(path: str, reason: str, diagnostics: Sequence[Diagnostic], old: bytes = b"") -> FileFix:
    """A file left untouched: the error line says why, its findings are unfixed."""
    return FileFix(path, old, old, error=f"fix not applied: {reason}",
                   unfixed=[Unfixed(d, "fix failed") for d in diagnostics])


def run(function: Callable[..., FileFix], tasks: Sequence[tuple[str, tuple[Any, ...]]], jobs: int,
        diagnostics: Sequence[Sequence[Diagnostic]], check: Callable[[FileFix], Optional[str]]) -> list[FileFix]:
    """``function(path, old, *rest)`` for each ``(path, rest)`` in a worker, ``old`` read here, then
    ``check`` (``verify.text_problem``, whose verdict ``verify.check_text`` applies later); a file
    that cannot be read, or whose worker failed, becomes an error line and its ``diagnostics`` unfixed."""
    from lint_rules.source import one_line

    sent: list[tuple[str, bytes, tuple[Any, ...]]] = []
    results: list[Optional[FileFix]] = []
    for (path, rest), found in zip(tasks, diagnostics):
        try:
            sent.append((path, read_source(path), rest))
            results.append(None)
        except OSError as error:
            results.append(not_applied(path, one_line(error), found))
    if sent:
        apply = functools.partial(_apply, function, check)
        answers = iter(list(map(apply, sent)) if IN_PROCESS else workers.shared(("lint_rules.fix.verify",)).map(
            apply, sent, jobs=workers.auto_jobs(len(sent)) if jobs == workers.AUTO else jobs))
        for index, (path, _), found in zip(range(len(results)), tasks, diagnostics):
            if results[index] is None:
                answer = next(answers)
                results[index] = not_applied(path, answer.reason, found) if isinstance(answer, workers.Failure) \
                    else answer
    return results  # type: ignore[return-value]


def _apply(function: Callable[..., FileFix], check: Callable[[FileFix], Optional[str]],
           task: tuple[str, bytes, tuple[Any, ...]]) -> FileFix:
    """The worker's side: the fix, then the text gate's verdict on it (applied by ``run._plan``)."""
    path, old, rest = task
    result = function(path, old, *rest)
    if result.changed:
        result.text_problem, result.checked = check(result), True
    return result
