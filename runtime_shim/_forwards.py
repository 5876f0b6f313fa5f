"""Functions the shim binds into a guarded module's ``__dict__`` (installed once, at guard time).

Hot path: inside a wrapper forward (``STATE.depth`` > 0) a checked forward costs one frame and
one thread-local read, whatever the size of the model. Everything else (finding the entry
method, warning, raising) happens only on the slow path, i.e. when module computation is reached
outside any wrapper forward in this thread.

They are module-level functions bound with ``types.MethodType`` and read the guard record from
the module's ``__dict__`` rather than closing over it, so ``copy.deepcopy`` of a guarded module
rebinds them to the copy, and the copy (whose record deep-copies to ``None``) runs unchecked.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable

from runtime_shim._state import STATE, inside, routed_here
from lint_rules.contract import GUARD_KEY


_checked_by_class: dict[Any, Callable[..., Any]] = {}


def checked_forward_for(cls_forward: Callable[..., Any]) -> Callable[..., Any]:
    """The checked ``forward`` for modules of one class: unchecked inside a wrapper forward.

    One closure per class forward (cached), so the hot path does no attribute lookup.

    It closes over the class's function only -- never a module -- so a deep copy of a guarded
    module still rebinds it to the copy.
    """
    cached = _checked_by_class.get(cls_forward)
    if cached is not None:
        return cached
    state = STATE

    def forward(self: Any, *args: Any, **kwargs: Any) -> Any:
        if state.depth:
            return cls_forward(self, *args, **kwargs)
        return forward_outside(self, args, kwargs)

    forward._fwd_shim_checked = True  # type: ignore[attr-defined]
    _checked_by_class[cls_forward] = forward
    return forward


def portal_forward(self: Any, *args: Any, **kwargs: Any) -> Any:
    """Forward of a portal (the module a wrapper calls): also takes a pending routed method."""
    pending = STATE.redirect
    if pending is not None and pending[0] is self:
        STATE.redirect = None
        with inside(self.__dict__.get(GUARD_KEY)):
            return pending[1](pending[2], *args, **kwargs)
    if STATE.depth:
        return type(self).forward(self, *args, **kwargs)
    return forward_outside(self, args, kwargs)


portal_forward.__name__ = "forward"


def wrapper_forward(self: Any, *args: Any, **kwargs: Any) -> Any:
    """Forward of a DDP/FSDP1 wrapper: everything under it counts as routed."""
    record = self.__dict__.get(GUARD_KEY)
    if record is not None and record.meta_pending:
        record.check_meta()
    with inside(record):
        return type(self).forward(self, *args, **kwargs)


wrapper_forward.__name__ = "forward"


def forward_outside(module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Slow path: module computation reached with no wrapper forward active in this thread."""
    record = module.__dict__.get(GUARD_KEY)
    if record is None or not record.active:
        return type(module).forward(module, *args, **kwargs)
    record.on_outside_call(module)  # raises in mode "error" if an unmarked method is the caller
    with inside(record):
        return type(module).forward(module, *args, **kwargs)


def make_routed(name: str, func: Callable[..., Any]) -> Callable[..., Any]:
    """A routed stand-in for method ``name`` (``func`` is the class's function)."""

    def routed(self: Any, *args: Any, **kwargs: Any) -> Any:
        record = self.__dict__.get(GUARD_KEY)
        if record is None or not record.active:
            return func(self, *args, **kwargs)
        if STATE.depth and routed_here(record):  # re-entrant: do not nest a second wrapper forward
            return func(self, *args, **kwargs)
        return record.route(self, name, func, args, kwargs)

    routed.__name__ = name
    routed.__qualname__ = getattr(func, "__qualname__", name)
    routed.__doc__ = getattr(func, "__doc__", None)
    routed.__wrapped__ = func  # type: ignore[attr-defined]
    try:
        routed.__signature__ = inspect.signature(func)  # type: ignore[attr-defined]
    except (TypeError, ValueError):
        pass
    routed._fwd_shim_routed = True  # type: ignore[attr-defined]
    return routed


SHIM_FUNCTIONS = (portal_forward, wrapper_forward)


def is_shim_bound(value: object) -> bool:
    """True if ``value`` is one of our bound stand-ins (so removal never takes a user's attribute)."""
    func = getattr(value, "__func__", None)
    return func in SHIM_FUNCTIONS or bool(
        getattr(func, "_fwd_shim_routed", False) or getattr(func, "_fwd_shim_checked", False)
    )
