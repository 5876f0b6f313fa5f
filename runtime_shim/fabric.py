"""Lightning Fabric support: the ``_FabricModule`` becomes the outermost routing entry.

``guard`` patches ``_FabricModule.forward`` and ``__getattr__`` once, on the class (the instance
keeps its class: Fabric's own tests check ``type(fm) is _FabricModule``-like facts). On an instance
without a guard both fall straight through to Fabric's own. On a guarded one, ``forward`` counts the
thread as inside, and ``__getattr__`` looks methods up as Fabric does, with our routing behind:

* a name Fabric redirects (in ``_forward_methods``, with a wrapper between the ``_FabricModule`` and
  the model) gives a ``call_forward_module`` function, as Fabric's does, that looks the method up
  when called and routes it through our thread-safe redirect (Fabric patches ``forward`` on the
  instance for the duration of the call);
* a method we mark gives the model's own attribute: our routed stand-in (so on one device
  ``fm.generate == model.generate`` holds, as Fabric's tests require, and still routes through
  Fabric's forward for its precision context);
* anything else: in routing-only mode Fabric's own lookup (its per-call hook tracker for unmarked
  methods); with detection on, the plain attribute (our O(1) detection replaces the tracker).

``unguard`` drops the instance's guard; ``restore_classes`` (run by ``uninstall``) undoes the class
patch.
"""

from __future__ import annotations

from typing import Any, Callable

from torch import nn

from runtime_shim import _forwards
from runtime_shim._state import STATE, inside, routed_here
from runtime_shim.vocabulary import FABRIC_OWN_ATTRIBUTES
from lint_rules.contract import GUARD_KEY

_PATCHED = "_fwd_shim_class_patch"
_restore: list[tuple[type, str, Any]] = []  # (class, attribute, what its __dict__ held before)
_MISSING = object()


def _guarded_record(module: Any) -> Any:
    record = module.__dict__.get(GUARD_KEY)
    return record if record is not None and record.active else None


def _own(module: Any, name: str) -> Any:
    """``_forward_module``/``_original_module``: in ``_modules``, or in ``__dict__`` when Fabric's
    own tests set a ``Mock`` there."""
    found = module.__dict__.get(name)
    return found if found is not None else module.__dict__["_modules"].get(name)


def _call_forward_module(record: Any, original: nn.Module, name: str) -> Callable[..., Any]:
    """What Fabric's ``_redirection_through_forward`` returns (its name, the method looked up only
    when called), routed by us."""

    @_forwards.opaque
    def call_forward_module(*args: Any, **kwargs: Any) -> Any:
        if record.is_marked(original, name):
            return getattr(original, name)(*args, **kwargs)  # our stand-in routes itself
        func = getattr(type(original), name, None)
        if not callable(func):
            return getattr(original, name)(*args, **kwargs)  # raises as Fabric's does
        if STATE.depth and routed_here(record):
            return func(original, *args, **kwargs)
        return record.route(original, name, func, args, kwargs)

    return call_forward_module


def _patch_class(cls: type) -> None:
    """Patch ``forward`` and ``__getattr__`` of ``_FabricModule`` (or a subclass) once."""
    if getattr(cls, _PATCHED, False):
        return
    fabric_forward = cls.forward
    fabric_getattr = cls.__getattr__

    def forward(self: Any, *args: Any, **kwargs: Any) -> Any:
        record = _guarded_record(self)
        if record is None:
            return fabric_forward(self, *args, **kwargs)
        if record.meta_pending:
            record.check_meta()
        with inside(record):
            return fabric_forward(self, *args, **kwargs)

    def __getattr__(self: Any, item: str) -> Any:
        record = _guarded_record(self)
        if record is None or item in FABRIC_OWN_ATTRIBUTES:
            return fabric_getattr(self, item)
        try:
            return nn.Module.__getattr__(self, item)
        except AttributeError:
            pass
        original, forward_module = _own(self, "_original_module"), _own(self, "_forward_module")
        if item in self.__dict__.get("_forward_methods", ()) and forward_module is not original:
            return _call_forward_module(record, original, item)
        if record.is_marked(original, item):
            return getattr(original, item)
        if not record.detect:
            return fabric_getattr(self, item)  # routing only: Fabric's own check stays
        return getattr(original, item)

    forward.__name__ = "forward"
    for attr, value in (("forward", _forwards.opaque(forward)), ("__getattr__", __getattr__), (_PATCHED, True)):
        _restore.append((cls, attr, cls.__dict__.get(attr, _MISSING)))
        setattr(cls, attr, value)


def restore_classes() -> None:
    """Undo every class patch (``uninstall``)."""
    while _restore:
        cls, attr, value = _restore.pop()
        if value is _MISSING:
            delattr(cls, attr)
        else:
            setattr(cls, attr, value)


def guard_fabric(fabric_module: nn.Module, record: Any) -> None:
    """Make ``fabric_module`` the routing entry of ``record`` (idempotent)."""
    _patch_class(type(fabric_module))
    fabric_module.__dict__[GUARD_KEY] = record
    record._put_own(fabric_module, "__getstate__", _forwards.shim_getstate)  # copies carry no guard
    record.entry = fabric_module
    record.fabric = fabric_module
    forward_methods = fabric_module.__dict__.get("_forward_methods")
    if isinstance(forward_methods, set):  # decorated methods are marked on the _FabricModule too
        forward_methods.update(record.marked.get(id(record.root), ()))


def unguard_fabric(fabric_module: nn.Module) -> None:
    fabric_module.__dict__.pop(GUARD_KEY, None)
