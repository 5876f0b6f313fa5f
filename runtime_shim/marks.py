"""``@forward_entry``: mark a method as a forward entry point at class definition (torch-free).

The decorator only sets an attribute: an unwrapped model pays nothing. Routing is installed
later, once, when the wrapped model is guarded (``runtime_shim.guard``/``install``).
"""

from __future__ import annotations

import inspect
from typing import Any, Callable, TypeVar

from lint_rules.contract import (
    DECORATOR_ON_DESCRIPTOR,
    DECORATOR_NOT_FUNCTION,
    DECORATOR_ON_FORWARD,
    MARK_ATTRIBUTE,
    generator_message,
)

F = TypeVar("F", bound=Callable[..., Any])


def _any_layer(fn: object, test: Callable[[object], bool]) -> bool:
    """``test`` holds for ``fn`` or a function it wraps (``functools.wraps`` layers, at most 20)."""
    seen = 0
    while fn is not None and seen < 20:
        if test(fn):
            return True
        fn = getattr(fn, "__wrapped__", None)
        seen += 1
    return False


def is_generator_function(fn: object) -> bool:
    """True for generator functions, also behind ``functools.wraps`` layers (``@torch.no_grad()``)."""
    return _any_layer(fn, lambda f: inspect.isgeneratorfunction(f) or inspect.isasyncgenfunction(f))


def is_coroutine_function(fn: object) -> bool:
    """True for ``async def`` functions, also behind ``functools.wraps`` layers."""
    return _any_layer(fn, inspect.iscoroutinefunction)


def forward_entry(fn: F) -> F:
    """Mark ``fn`` as a method that runs forward computation.

    The function is returned unchanged apart from the mark attribute, so stacking with
    ``@torch.no_grad()`` works in either order (``functools.wraps`` copies ``__dict__``).
    """
    if isinstance(fn, (staticmethod, classmethod, property)):
        raise TypeError(DECORATOR_ON_DESCRIPTOR.format(kind=type(fn).__name__))
    if not callable(fn):
        raise TypeError(DECORATOR_NOT_FUNCTION.format(kind=type(fn).__name__))
    if getattr(fn, "__name__", None) == "forward":
        raise ValueError(DECORATOR_ON_FORWARD)
    if is_generator_function(fn):
        raise TypeError(generator_message(fn.__qualname__))
    if is_coroutine_function(fn):
        raise TypeError(generator_message(fn.__qualname__, asynchronous=True))
    setattr(fn, MARK_ATTRIBUTE, True)
    return fn


def is_marked(fn: object) -> bool:
    return bool(getattr(fn, MARK_ATTRIBUTE, False))


#: The name of Lightning's proposed decorator, accepted by fwdlint's default ``mark-decorators``:
#: the same mark, so every name the linter counts is honoured at run time.
inference_entry = forward_entry
