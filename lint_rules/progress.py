"""A progress line on a terminal for a cold run (``fwdlint`` only): files read of the total, and how
many came from the facts cache. Shown once the run has taken ``FWDLINT_PROGRESS_AFTER`` seconds
(default 2: a warm run, or a small cold one, never shows it), at most ten times a second, on the
same line (``\\r``), and cleared when the run is done, so nothing of it stays in the terminal's text.
Never when stderr is not a terminal or with ``--quiet`` (the CLI decides: ``for_stderr``)."""

from __future__ import annotations

import os
import sys
import _thread
import time
from typing import IO, Optional

_ENV = "FWDLINT_PROGRESS_AFTER"


class ProgressLine:
    """``Run.progress``: called as files are read, with (done, total, from the cache)."""

    def __init__(self, stream: IO[str], after: float) -> None:
        self.stream = stream
        self.start = time.monotonic()
        self.after = after
        self.shown = 0.0  # when the line was last drawn
        self.width = 0  # of what is on the line now
        # the pool's threads report files as they finish (threading's Lock, without its import: ~1 ms a run)
        self.lock = _thread.allocate_lock()

    def __call__(self, done: int, total: int, cached: int) -> None:
        now = time.monotonic()
        if not total or now - self.start < self.after or (now - self.shown < 0.1 and done < total):
            return
        with self.lock:
            text = f"fwdlint: {done:,}/{total:,} files read, {cached / total:.0%} from the cache"
            self.stream.write("\r" + text.ljust(self.width))
            self.stream.flush()
            self.width, self.shown = len(text), now

    def close(self) -> None:
        """Clear the line, if one was drawn."""
        with self.lock:
            if self.width:
                self.stream.write("\r" + " " * self.width + "\r")
                self.stream.flush()
                self.width = 0


def for_stderr(quiet: bool) -> Optional[ProgressLine]:
    """The progress line for this run, or None (not a terminal, ``--quiet``, or a bad setting)."""
    isatty = getattr(sys.stderr, "isatty", None)  # a stream put in its place may have none
    if quiet or isatty is None or not isatty():
        return None
    try:
        after = float(os.environ.get(_ENV, "2"))
    except ValueError:
        after = 2.0
    return ProgressLine(sys.stderr, after)
