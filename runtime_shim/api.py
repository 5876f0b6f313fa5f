"""``guard``, ``unguard`` and ``mark_forward_method`` (the torch-side public API)."""

from __future__ import annotations

from types import MethodType
from typing import Any, Optional, TypeVar, Union

from torch import nn

from lint_rules.contract import (
    GUARD_KEY,
    MARKS_KEY,
    MARK_METHOD_CALL,
    MARK_VALIDATION_FORWARD,
    MARK_VALIDATION_MISSING,
    check_mode,
    generator_message,
)
from runtime_shim import _installed
from runtime_shim import fabric as _fabric
from runtime_shim.marks import is_coroutine_function, is_generator_function
from runtime_shim.record import GuardRecord, class_marks, records_in
from runtime_shim.wrappers import describe_supported, identify, is_fabric_module, root_of

W = TypeVar("W", bound=nn.Module)


def guard(wrapper: W, mode: str = "error") -> W:
    """Enable routing and detection on an existing wrapper; returns the same object.

    Installs everything once (O(#modules)); afterwards each call costs O(1) extra. Guarding a
    wrapper again only changes the mode. Guards of wrappers nested inside it (FSDP1 units,
    ``fully_shard`` on children) are absorbed. The guard is yours: ``uninstall()`` leaves it.
    """
    return guard_by(wrapper, mode, owner="user")


def guard_by(wrapper: W, mode: str, owner: str) -> W:
    """``guard`` on behalf of ``owner``: "user" (``guard``, a mark on a named wrapper) or "install"."""
    check_mode(mode)
    if owner == "user":
        _installed.disown(wrapper)
    if is_fabric_module(wrapper):
        return _guard_fabric(wrapper, mode)
    found = identify(wrapper)
    if found is None:
        raise TypeError(f"guard() expects {describe_supported()}, got {type(wrapper).__name__}")
    kind, inner, root = found
    return _guard_distributed(kind, inner, root, mode)  # type: ignore[return-value]


def _guard_distributed(kind: str, wrapper: nn.Module, root: nn.Module, mode: str) -> nn.Module:
    current = wrapper.__dict__.get(GUARD_KEY)
    if isinstance(current, GuardRecord) and current.active and current.wrapper is wrapper:
        if (current.mode == "route") == (mode == "route"):
            current.mode = mode
            return wrapper
        current.unguard()  # detection is installed at guard time: guard again
    for old in records_in(root.modules()):
        old.unguard()
    record = GuardRecord(wrapper, root, kind, mode)
    try:
        record.install()
    except BaseException:
        record.unguard()
        raise
    return wrapper


def _guard_fabric(fabric_module: Any, mode: str) -> Any:
    forward_module = fabric_module._forward_module
    original = fabric_module._original_module
    found = identify(forward_module)
    if found is not None:
        _guard_distributed(*found, mode=mode)
        record = found[1].__dict__[GUARD_KEY]
    else:  # one device: route through Fabric's forward (precision), nothing to detect
        record = original.__dict__.get(GUARD_KEY)
        if not (isinstance(record, GuardRecord) and record.active and record.kind == "plain"
                and (record.mode == "route") == (mode == "route")):
            for old in records_in(original.modules()):
                old.unguard()
            record = GuardRecord(original, original, "plain", mode)
            record.install()
    record.mode = mode
    _fabric.guard_fabric(fabric_module, record)
    return fabric_module


def unguard(wrapper: W) -> W:
    """Undo ``guard``: remove every attribute the shim bound; returns the same object.

    Only this wrapper's own guard is undone. A model has one guard at a time, the latest: guarding
    a second wrapper of the same model (``DDP(model)`` twice, e.g. re-wrapping with other options)
    moves the model's guard to it, and ``unguard`` of the first wrapper then leaves the model as the
    second guard made it (it used to remove that guard too). Passing the model itself (an FSDP2 root,
    or ``ddp.module``) removes whatever guard it has.
    """
    own = {id(wrapper)}
    found = identify(wrapper)
    if found is not None:
        own.add(id(found[1]))  # a compiled wrapper (OptimizedModule) is unguarded through its DDP
    forward_module = getattr(wrapper, "_forward_module", None) if is_fabric_module(wrapper) else None
    if forward_module is not None:
        own.add(id(forward_module))
    for obj in (wrapper, forward_module, getattr(wrapper, "module", None)):
        record = getattr(obj, "__dict__", {}).get(GUARD_KEY) if obj is not None else None
        if not isinstance(record, GuardRecord):
            continue
        if obj is wrapper or id(record.wrapper) in own or record.fabric is wrapper:
            record.unguard()
    if is_fabric_module(wrapper):
        _fabric.unguard_fabric(wrapper)
    return wrapper


def _target_module(obj: Any) -> nn.Module:
    root = root_of(obj)
    if root is not None:
        return root
    if isinstance(obj, nn.Module):
        return obj
    raise TypeError(
        f"{MARK_METHOD_CALL} expects a module or {describe_supported()}, got {type(obj).__name__}"
    )


def mark_forward_method(model_or_wrapper: Any, method: Union[MethodType, str]) -> None:
    """Mark ``method`` of a model you cannot edit as a forward entry point.

    Routes by itself, before or after wrapping, with or without ``install``/``guard``: given a
    wrapper (DDP, FSDP1, an FSDP2 module, a ``_FabricModule``) it is guarded for routing now if it
    is not guarded yet; given the model (``ddp.module``), its wrapper is found if it was created
    after ``runtime_shim`` was imported. Validation mirrors Fabric's ``mark_forward_method``. A
    bound method of a submodule marks it on that submodule.
    """
    if not isinstance(method, (MethodType, str)):
        raise TypeError(f"Expected a method or a string, but got: {type(method).__name__}")
    target = _target_module(model_or_wrapper)
    if isinstance(method, MethodType) and isinstance(method.__self__, nn.Module):
        owner: Optional[nn.Module] = method.__self__
        if owner is not target and not any(owner is m for m in target.modules()):
            raise ValueError(
                f"{type(owner).__name__}.{method.__name__} is a method of a module that is not part of "
                f"{type(target).__name__}"
            )
        target = owner  # type: ignore[assignment]
    name = method if isinstance(method, str) else method.__name__
    if name == "forward":
        raise ValueError(MARK_VALIDATION_FORWARD)
    bound = getattr(target, name, None)
    func = getattr(type(target), name, None)
    if not isinstance(bound, MethodType) or bound.__self__ is not target or not callable(func):
        raise AttributeError(MARK_VALIDATION_MISSING.format(name=name, cls=type(target).__name__))
    if is_generator_function(func) or is_coroutine_function(func):
        raise TypeError(generator_message(getattr(func, "__qualname__", name), is_coroutine_function(func)))
    marks = target.__dict__.setdefault(MARKS_KEY, set())
    marks.add(name)
    if is_fabric_module(model_or_wrapper):
        model_or_wrapper._forward_methods.add(name)  # Fabric honours it too, even if unguarded
    record = target.__dict__.get(GUARD_KEY)
    if isinstance(record, GuardRecord) and record.active:
        record.add_mark(target, name)
        return
    # Registered after wrapping, and the wrapper was made without a guard (no marks then): route
    # through it from now on. Before wrapping, the wrapper's constructor guards by itself.
    wrapper = model_or_wrapper if root_of(model_or_wrapper) is not None else _installed.wrapper_of(target)
    if wrapper is not None:
        _guard_for_mark(wrapper)


def _guard_for_mark(wrapper: Any) -> None:
    """A mark was registered after ``wrapper`` was made without a guard: route through it now.
    While installed the guard is install's (as if the mark had been there at construction);
    otherwise the user named the wrapper, and the guard is theirs."""
    with _installed.LOCK:
        mode = _installed.mode
        if mode is not None:
            guard_by(wrapper, mode, owner="install")
            _installed.guarded.add(wrapper)
        else:
            guard_by(wrapper, _installed.ROUTE, owner="user")


def has_marks(model: Any) -> bool:
    """Does anything in ``model`` (a wrapper or a module) carry a mark: a decorated method, a
    registration by ``mark_forward_method`` or ``register_fsdp_forward_method``, or a Lightning
    step method? (Once per wrap, O(number of modules).)"""
    root = _target_module(model)
    return any(class_marks(type(m)) or m.__dict__.get(MARKS_KEY) for m in root.modules())
