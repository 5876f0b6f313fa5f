"""Lightning Fabric support: the ``_FabricModule`` becomes the outermost routing entry.

``guard`` swaps the ``_FabricModule`` instance to a subclass (same name, cached per class) whose
``forward`` counts the thread as inside and whose ``__getattr__`` routes marked methods (ours and
those in Fabric's ``_forward_methods``) through our thread-safe redirect, instead of Fabric's
temporary ``forward`` patch, and returns unmarked methods unwrapped: our O(1) detection replaces
Fabric's per-call hook tracker. In routing-only mode (no detection of ours) unmarked methods keep
Fabric's tracker. ``unguard`` restores the original class; pickling or deep-copying a guarded
``_FabricModule`` gives the original class, unguarded (the subclass has no importable name).
"""

from __future__ import annotations

import functools
from typing import Any, Callable

from torch import nn

from runtime_shim import _forwards
from runtime_shim._state import STATE, inside, routed_here
from lint_rules.contract import GUARD_KEY

_DYNAMIC: dict[type, type] = {}


def _fabric_routed(record: Any, owner: nn.Module, name: str, func: Callable[..., Any]) -> Callable[..., Any]:
    """A method named in Fabric's ``_forward_methods`` (its own marks, step methods), routed by us."""

    @_forwards.opaque
    @functools.wraps(func)
    def call(*args: Any, **kwargs: Any) -> Any:
        if STATE.depth and routed_here(record):
            return func(owner, *args, **kwargs)
        return record.route(owner, name, func, args, kwargs)

    return call


def _guarded_class(base: type) -> type:
    cls = _DYNAMIC.get(base)
    if cls is not None:
        return cls

    def forward(self: Any, *args: Any, **kwargs: Any) -> Any:
        record = self.__dict__.get(GUARD_KEY)
        if record is not None and record.meta_pending:
            record.check_meta()
        with inside(record):
            return base.forward(self, *args, **kwargs)

    def __getattr__(self: Any, item: str) -> Any:
        try:
            return nn.Module.__getattr__(self, item)
        except AttributeError:
            pass
        original = nn.Module.__getattr__(self, "_original_module")
        record = self.__dict__.get(GUARD_KEY)
        attr = getattr(original, item)
        if record is not None and record.active and item != "forward":
            forward_methods = self.__dict__.get("_forward_methods", ())
            if item in forward_methods and not record.is_marked(original, item):
                func = getattr(type(original), item, None)
                if callable(func):
                    return _fabric_routed(record, original, item, func)
            if not record.detect and not record.is_marked(original, item):
                # Routing only (what importing runtime_shim gives): our detection is off, so an
                # unmarked method keeps Fabric's own check rather than losing all protection.
                return base.__getattr__(self, item)
        return attr

    def __reduce_ex__(self: Any, protocol: Any) -> Any:
        # pickle / deepcopy as the plain class (importable by name), without our attributes: the
        # copy is unguarded, like a copied guarded module
        reduced = list(object.__reduce_ex__(self, max(2, protocol)))  # (__newobj__, (cls,), state, ...)
        reduced[0], reduced[1] = _new_instance, (base,)
        if len(reduced) > 2:
            reduced[2] = _forwards.strip_state(reduced[2])
        return tuple(reduced)

    cls = type(base.__name__, (base,), {
        "forward": _forwards.opaque(forward),
        "__getattr__": __getattr__,
        "__reduce_ex__": __reduce_ex__,
        "__module__": base.__module__,
        "__qualname__": base.__qualname__,
        "_fwd_shim_dynamic": True,
    })
    _DYNAMIC[base] = cls
    return cls


def _new_instance(cls: type) -> Any:
    """Unpickling entry point (importable by name): an empty instance of ``cls``."""
    return cls.__new__(cls)


def guard_fabric(fabric_module: nn.Module, record: Any) -> None:
    """Make ``fabric_module`` the routing entry of ``record`` (idempotent)."""
    fabric_module.__dict__[GUARD_KEY] = record
    record.entry = fabric_module
    record.fabric = fabric_module
    forward_methods = fabric_module.__dict__.get("_forward_methods")
    if isinstance(forward_methods, set):  # decorated methods are marked on the _FabricModule too
        forward_methods.update(record.marked.get(id(record.root), ()))
    base = type(fabric_module)
    if not base.__dict__.get("_fwd_shim_dynamic", False):
        object.__setattr__(fabric_module, "__class__", _guarded_class(base))


def unguard_fabric(fabric_module: nn.Module) -> None:
    cls = type(fabric_module)
    if cls.__dict__.get("_fwd_shim_dynamic", False):
        object.__setattr__(fabric_module, "__class__", cls.__bases__[0])
    fabric_module.__dict__.pop(GUARD_KEY, None)
