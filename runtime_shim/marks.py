"""``@forward_entry``: mark a method as a forward entry point at class definition (torch-free)."""

from __future__ import annotations

import inspect
from typing import Any, Callable, TypeVar

from lint_rules.contract import DECORATOR_NAME, MARK_ATTRIBUTE

F = TypeVar("F", bound=Callable[..., Any])


def forward_entry(fn: F) -> F:
    """Mark ``fn`` as a method that runs the module's forward computation.

    The function is returned unchanged apart from the mark attribute, so stacking with
    ``@torch.no_grad()`` works in either order (``functools.wraps`` copies ``__dict__``).
    """
    if isinstance(fn, (staticmethod, classmethod, property)):
        raise TypeError(f"@{DECORATOR_NAME} marks instance methods, not a {type(fn).__name__}")
    if not callable(fn):
        raise TypeError(f"@{DECORATOR_NAME} expects a function, got {type(fn).__name__}")
    if getattr(fn, "__name__", None) == "forward":
        raise ValueError(f"@{DECORATOR_NAME} cannot mark forward itself: it is the forward")
    if inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn):
        raise TypeError(
            f"@{DECORATOR_NAME} cannot mark generator {fn.__qualname__}: a generator runs after "
            "the wrapper's forward has returned, so it cannot be routed; return a list instead"
        )
    setattr(fn, MARK_ATTRIBUTE, True)
    return fn
