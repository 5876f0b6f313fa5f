"""Per-thread routing state: the only thing the hot path reads.

``depth`` > 0 means "this thread is inside a guarded wrapper's forward (or a call we allowed)":
module forwards then run unchecked. ``records`` lists the guards whose wrapper forward is active
in this thread, so a marked method of *another* guarded model (a teacher inside a student's
forward) is still routed through its own wrapper. ``redirect`` carries one pending routed method
from the routing call to the portal module's forward. All are thread-local, so a forward running
in another thread never changes what this thread sees.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Optional


class _ThreadState(threading.local):
    depth: int = 0
    #: (portal module, function, owner module) or None.
    redirect: Optional[tuple[Any, Callable[..., Any], Any]] = None

    def __init__(self) -> None:  # runs once per thread
        self.records: list[Any] = []


STATE = _ThreadState()


class inside:
    """Context manager: this thread is inside ``record``'s wrapper forward (re-entrant)."""

    __slots__ = ("record",)

    def __init__(self, record: Any) -> None:
        self.record = record

    def __enter__(self) -> None:
        STATE.depth += 1
        STATE.records.append(self.record)

    def __exit__(self, *exc: object) -> None:
        STATE.records.pop()
        STATE.depth -= 1


def routed_here(record: Any) -> bool:
    """True if ``record``'s wrapper forward is already active in this thread."""
    return record in STATE.records
