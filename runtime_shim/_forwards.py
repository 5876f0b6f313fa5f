"""Functions the shim binds into a guarded module's ``__dict__`` (installed once, at guard time).

Hot path: inside a wrapper forward (``STATE.depth`` > 0) a checked forward costs one frame and
one thread-local read, whatever the size of the model. Everything else (finding the entry
method, warning, raising) happens only on the slow path, i.e. when module computation is reached
outside any wrapper forward in this thread.

They are module-level functions bound with ``types.MethodType`` and read the guard record from
the module's ``__dict__`` rather than closing over it. Copying and pickling never carry them:
every guarded object also gets ``__getstate__`` (``shim_getstate``), which returns the object's
own state without the shim's attributes, so ``copy.deepcopy``, ``pickle`` and ``torch.save``
give an unguarded model that ``guard`` treats like a fresh one. ``torch.jit.script`` gets the
same clean view through ``__prepare_scriptable__`` (``shim_prepare_scriptable``).

``torch.compile`` (``opaque``/``frame_skipped``): Dynamo never compiles a frame of the shim's
own functions, and a call to one that changes the thread state (routing a marked method,
counting the thread inside a wrapper, the slow path) is a graph break when met while Dynamo
traces other code -- eager, like the DDP forward it accompanies. The read-only fast paths
(``portal_forward`` inside a wrapper, the checked forward) are inlined into the user's graph:
compiling a guarded DDP model adds no graph break (``tests/runtime/test_shim_faults.py``,
``benchmarks/shim_compile.py``). The marks are the two that ``torch._dynamo``'s own ``skip``
sets, applied through ``torch._C`` so that importing the shim does not import Dynamo (1.7 s).
"""

from __future__ import annotations

import inspect
import types
from typing import Any, Callable, TypeVar

from runtime_shim._state import STATE, inside, routed_here
from lint_rules.contract import GUARD_KEY

F = TypeVar("F", bound=Callable[..., Any])

try:  # the code-object flag behind torch._dynamo's skip(); absent from old torch: nothing to do then
    from torch._C._dynamo.eval_frame import (  # type: ignore[import-not-found]
        _FrameAction,
        _FrameExecStrategy,
        set_code_exec_strategy,
    )
except (ImportError, AttributeError):  # pragma: no cover - torch without Dynamo
    set_code_exec_strategy = None


def frame_skipped(fn: F, recursive: bool = False) -> F:
    """Dynamo never compiles a frame of ``fn`` (it may still inline ``fn`` into a traced caller);
    with ``recursive`` the frames ``fn`` calls are not compiled either."""
    if set_code_exec_strategy is not None:
        nested = _FrameAction.SKIP if recursive else _FrameAction.DEFAULT
        set_code_exec_strategy(fn.__code__, _FrameExecStrategy(_FrameAction.SKIP, nested))
    return fn


def opaque(fn: F, recursive: bool = False) -> F:
    """``frame_skipped``, and a call to ``fn`` met while Dynamo traces is a graph break (``fn`` runs
    eagerly): for code that changes the thread state, which a graph cannot replay."""
    fn._torchdynamo_disable = True  # type: ignore[attr-defined]
    return frame_skipped(fn, recursive)


# Entering and leaving a wrapper forward is bookkeeping: never compiled, from wherever it runs.
frame_skipped(inside.__enter__)
frame_skipped(inside.__exit__)
frame_skipped(routed_here)

_checked_by_class: dict[Any, Callable[..., Any]] = {}


def checked_forward_for(cls_forward: Callable[..., Any]) -> Callable[..., Any]:
    """The checked ``forward`` for modules of one class: unchecked inside a wrapper forward.

    One closure per class forward (cached), so the hot path does no attribute lookup.

    It closes over the class's function only -- never a module -- so the same function serves
    every instance of the class. Under ``torch.compile`` it is inlined (a guard on the thread's
    depth); its own frame is never compiled, so a compiled call starts at the class forward.
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
    frame_skipped(forward)  # one code object for every class: marked once, harmless again
    _checked_by_class[cls_forward] = forward
    return forward


@frame_skipped
def portal_forward(self: Any, *args: Any, **kwargs: Any) -> Any:
    """Forward of a portal (the module a wrapper calls): also takes a pending routed method."""
    pending = STATE.redirect
    if pending is not None and pending[0] is self:
        return run_pending(self, pending, args, kwargs)
    if STATE.depth:
        return type(self).forward(self, *args, **kwargs)
    return forward_outside(self, args, kwargs)


portal_forward.__name__ = "forward"


@opaque
def run_pending(self: Any, pending: tuple[Any, Callable[..., Any], Any], args: tuple[Any, ...],
                kwargs: dict[str, Any]) -> Any:
    """The wrapper called its module: run the routed method there instead of ``forward``."""
    STATE.redirect = None
    with inside(self.__dict__.get(GUARD_KEY)):
        return pending[1](pending[2], *args, **kwargs)


@opaque
def wrapper_forward(self: Any, *args: Any, **kwargs: Any) -> Any:
    """Forward of a DDP/FSDP1 wrapper: everything under it counts as routed."""
    record = self.__dict__.get(GUARD_KEY)
    if record is not None and record.meta_pending:
        record.check_meta()
    try:
        with inside(record):
            return type(self).forward(self, *args, **kwargs)
    except RuntimeError as exc:
        last = getattr(record, "last_routed", None)
        if last is not None and hasattr(exc, "add_note") and "Expected to have finished reduction" in str(exc):
            from runtime_shim.detect import user_class_name
            from runtime_shim.unused import reduction_note

            exc.add_note(reduction_note(user_class_name(last[0]), last[1]))
        raise


wrapper_forward.__name__ = "forward"


@opaque
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
    # torch.compile(model.generate): the routing runs eagerly, the method itself is compiled
    # when the portal calls it (a new frame).
    return opaque(routed)


# -- copies, pickles and TorchScript see the module without the shim --------------------------
def strip_state(state: Any) -> Any:
    """An object's pickled state without the shim's entries."""
    if isinstance(state, dict):
        return {k: v for k, v in state.items() if not is_shim_attribute(k, v)}
    if isinstance(state, tuple) and len(state) == 2 and isinstance(state[0], dict):
        return (strip_state(state[0]), state[1])  # (__dict__, slots) from object.__getstate__
    return state


def shim_getstate(self: Any) -> Any:
    """``__getstate__`` of a guarded object: its class's state minus what the shim bound, so a
    deep copy or an unpickled copy comes back unguarded and clean (marks are kept)."""
    return strip_state(type(self).__getstate__(self))


shim_getstate.__name__ = "__getstate__"


def shim_prepare_scriptable(self: Any) -> Any:
    """``__prepare_scriptable__`` of a guarded module: ``torch.jit.script`` compiles a clean
    shallow copy (same parameters and buffers, its own child table, which TorchScript rewrites
    with the children's clean copies) instead of the shim's ``*args`` forward."""
    cls = type(self)
    clone = cls.__new__(cls)
    state = strip_state(self.__dict__)
    state["_modules"] = type(self._modules)(self._modules)
    clone.__dict__.update(state)
    own = getattr(cls, "__prepare_scriptable__", None)
    return own(clone) if own is not None else clone


shim_prepare_scriptable.__name__ = "__prepare_scriptable__"

SHIM_FUNCTIONS = (portal_forward, wrapper_forward, shim_getstate, shim_prepare_scriptable)


def is_shim_bound(value: object) -> bool:
    """True if ``value`` is one of our bound stand-ins (so removal never takes a user's attribute)."""
    if not isinstance(value, types.MethodType):  # never ask arbitrary objects for attributes
        return False
    func = value.__func__
    return func in SHIM_FUNCTIONS or bool(
        getattr(func, "_fwd_shim_routed", False) or getattr(func, "_fwd_shim_checked", False)
    )


def is_shim_attribute(name: str, value: object) -> bool:
    """An entry of a guarded object's ``__dict__`` that the shim put there."""
    return name == GUARD_KEY or is_shim_bound(value)
