"""Parsing a few small files in fwdlint's own process, as a worker parses them.

Starting a parser process (``workers``) costs about 0.1 s of CPU, an interpreter and its imports:
a seventh of a run after one edit of a timm model file. A worker's bounds hold without one for a
few small files (together at most ``HERE_BYTES``): the task runs on a thread with a worker's stack
and recursion limit (the same facts; LibCST's parser, which reads syntax newer than the
interpreter, overflowed the main thread's stack), it is waited for at most ``file_timeout()``,
and what its trees can take stays far below the workers' memory limit (``here_budget``).
"""

from __future__ import annotations

import sys
from typing import Any, Callable, Optional, Sequence

from lint_rules.parse_limits import (RECURSION_LIMIT, STACK_BYTES, Failure, file_timeout, memory_limit, outcome_of,
                                     process_limited, started_on_stack, timed_out)


def run_tasks(function: Callable[[Any], Any], tasks: Sequence[Any], sizes: Sequence[int], preload: Sequence[str],
              jobs: int = 1, done: Optional[Callable[[], None]] = None) -> list[Any]:
    """``function`` over ``tasks`` (``sizes``: the bytes of the file each parses): in this process
    when together they are small enough to keep within the workers' bounds without one (``here``),
    else in the process's shared pool (``workers.shared(preload).map``; ``jobs``: as there, or
    ``workers.AUTO``)."""
    results: list[Any] = []
    if sum(sizes) <= here_budget():
        timeout = file_timeout()
        for task in tasks:
            result = here(function, task, timeout)
            if result is _NO_THREAD:
                break
            results.append(result)
            if done is not None:
                done()
    rest = tasks[len(results):]
    if not rest:
        return results
    from lint_rules import workers  # starting processes: loaded only when they are needed

    jobs = workers.auto_jobs(len(rest)) if jobs == workers.AUTO else jobs
    return results + workers.shared(preload).map(function, rest, jobs=jobs, done=done)


#: Bytes of source a run parses in its own process.
HERE_BYTES = 256 * 2**10
#: What parsing may need per byte of source, at most: CPython's tree of a 2.4 MB file took 1 GiB,
#: LibCST's (syntax newer than this interpreter) of 6 MB 8.8 GiB.
_TREE_BYTES_PER_BYTE = 1536
_NO_THREAD = object()


def here_budget() -> int:
    """Bytes of source this process may parse itself: ``HERE_BYTES``, fewer under a memory limit
    (``FWDLINT_WORKER_MEMORY``) that their trees could exceed, none when this process itself runs
    under an address-space limit (``ulimit -v``): there a tree parsed here took the room a thread
    started later needed ("can't start new thread" ended a ``--fix`` under 1000 MiB)."""
    if process_limited():
        return 0
    memory = memory_limit()
    return HERE_BYTES if memory is None else min(HERE_BYTES, memory // _TREE_BYTES_PER_BYTE)


def here(function: Callable[[Any], Any], task: Any, timeout: Optional[float]) -> Any:
    """``function(task)`` in this process as a worker runs it, or a ``Failure``; ``_NO_THREAD`` if
    no thread with a worker's stack can start here (then a worker must). A task that outlives
    ``timeout`` is a ``Failure`` and left to end on its own: nothing waits for its thread."""
    outcome: list[tuple[bool, Any]] = []
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, RECURSION_LIMIT))  # here, not in the thread: restored even if it runs on
    try:
        thread = started_on_stack(lambda: outcome.append(outcome_of(function, task, None)), STACK_BYTES,
                                  "fwdlint-parser")
        if thread is None:
            return _NO_THREAD
        thread.join(timeout)
    finally:
        sys.setrecursionlimit(limit)
    if not outcome:
        return Failure(timed_out(timeout))
    ok, value = outcome[0]
    return value if ok else Failure(value)
