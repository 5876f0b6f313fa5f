"""What bounds one parsing task, in a parser process (``workers``) or in fwdlint's own
(``parse_here``): its stack and recursion limit, its time (``FWDLINT_FILE_TIMEOUT``), its memory
(``FWDLINT_WORKER_MEMORY``), and how its failure reads in one line. Imports nothing that starts
processes, so a run that parses in its own process loads none of that.
"""

from __future__ import annotations

import os
import sys
import threading
from dataclasses import dataclass
from typing import Any, Callable, Optional

#: Nesting is followed recursively (LibCST's visitors, the collectors, the fixers): on a
#: ``STACK_BYTES`` stack, 400,000 levels of an ``and`` chain were measured to fit, so this limit
#: ends the recursion (a "too deeply nested" error line) long before the stack could overflow.
RECURSION_LIMIT = 100_000
STACK_BYTES = 512 * 2**20
_DEFAULT_TIMEOUT = 60.0
_MIN_MEMORY = 2 * 2**30


@dataclass(frozen=True)
class Failure:
    """A task whose worker crashed, ran out of memory or time, or raised: why, in one line."""

    reason: str


def file_timeout() -> Optional[float]:
    value = _env_number("FWDLINT_FILE_TIMEOUT", _DEFAULT_TIMEOUT)
    return value if value > 0 else None


def memory_limit() -> Optional[int]:
    """Bytes of address space per worker, or ``None`` for none (not Linux, or asked for 0)."""
    if not sys.platform.startswith("linux"):
        return None
    asked = _env_number("FWDLINT_WORKER_MEMORY", -1)
    if asked >= 0:
        return _within_inherited(int(asked * 2**20) or None)
    try:
        physical = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        return _within_inherited(None)
    return _within_inherited(max(_MIN_MEMORY, physical // ((os.cpu_count() or 1) + 1)))


def _within_inherited(limit: Optional[int]) -> Optional[int]:
    """``limit``, lowered to the address-space limit this process inherited (``ulimit -v``): a worker
    may lower its limit, never raise it (raising above the hard limit is a ``ValueError``)."""
    inherited = [value for value in _address_space_limits() if value is not None]
    return min([*inherited, *([limit] if limit else [])], default=None)


def process_limited() -> bool:
    """Does this process run under an address-space limit (``ulimit -v``)?"""
    return _address_space_limits()[0] is not None


def _address_space_limits() -> tuple[Optional[int], Optional[int]]:
    """This process's (soft, hard) address-space limits, ``None`` for none (or unknown here)."""
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    except (ImportError, OSError, ValueError):
        return None, None
    return (None if soft == resource.RLIM_INFINITY else soft), (None if hard == resource.RLIM_INFINITY else hard)


def _env_number(name: str, default: float) -> float:
    try:
        return float(os.environ.get(name, "") or default)
    except ValueError:
        return default


def timed_out(timeout: Optional[float]) -> str:
    return f"timed out: parsing took more than {timeout:g} s (FWDLINT_FILE_TIMEOUT)"


def out_of_memory(limit: Optional[int]) -> str:
    limit_text = f" (limit {limit / 2**30:.1f} GiB per parser process; FWDLINT_WORKER_MEMORY)" if limit else ""
    return "out of memory" + limit_text


def outcome_of(function: Callable[[Any], Any], task: Any, memory: Optional[int]) -> tuple[bool, Any]:
    """``(True, function(task))``, or ``(False, why not)`` in one line."""
    try:
        return True, function(task)
    except MemoryError:
        return False, out_of_memory(memory)
    except Exception as error:  # a bug of fwdlint's: this file's error line says so, the run goes on
        text = str(error).strip().splitlines()
        return False, f"internal error ({type(error).__name__}: {text[0] if text else ''}); please report it"


#: The stack of threads that only start processes or wait on their pipes. The default (8 MiB) did not
#: always fit under a 1000 MiB address-space limit beside what a ``--fix`` had mapped: how much that is
#: depends on how the threads' allocations overlapped, so a loaded machine ended such runs with
#: "can't start new thread".
SMALL_STACK = 2 * 2**20
# ``threading.stack_size`` is the process's: one thread at a time sets it, starts its thread, restores it.
_STACK_SIZE = threading.Lock()


def started_on_stack(target: Callable[[], None], stack_bytes: int, name: str) -> Optional[threading.Thread]:
    """A daemon thread running ``target`` on a stack of ``stack_bytes``, started; ``None`` if the
    process has no room for such a stack ("can't start new thread", under an address-space limit).
    A run's threads all start here (a parser process starts its one thread itself)."""
    with _STACK_SIZE:
        previous = threading.stack_size(stack_bytes)
        try:
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            return thread
        except RuntimeError:
            return None
        finally:
            threading.stack_size(previous)
