"""``install``/``uninstall``: guard every wrapper created afterwards in this process.

Patches the constructors (``DistributedDataParallel.__init__``, ``FullyShardedDataParallel.__init__``,
``_FabricModule.__init__``) and the public re-exports of ``fully_shard`` (never the function in its
defining module, whose own globals refer to it), and makes ``register_fsdp_forward_method`` also
record our mark, so that registration routes under every wrapper. Lightning is not imported: if
it is not loaded yet, a meta-path hook patches ``_FabricModule`` when it is. ``uninstall``
restores every patched attribute, unguards every wrapper guarded by ``install`` and stops the
routing that importing ``runtime_shim`` started.

Meta tensors (``meta.py``): the patched ``DistributedDataParallel.__init__`` runs
``check_before_ddp`` before DDP's own code, and ``module_to_device`` of Fabric's DDP, single-device
and DP strategies (patched with ``_FabricModule``: the wrappers module imports the strategies
before it completes) runs ``check_before_fabric_move`` before ``fabric.setup`` moves the model: a
clear ``MetaDeviceError`` on every rank instead of DDP's or ``.to()``'s cryptic failure. FSDP1 and
FSDP2 are not checked at construction (deferred init is legitimate there).

Modes rank ``route`` < ``warn`` < ``error``: importing ``runtime_shim`` installs ``route`` (wrappers
of models with marks are guarded for routing only) and never lowers a mode ``install`` was given.

Every wrapper created while installed is remembered (weakly) by the model it wraps, guarded or
not, so that a mark registered *after* wrapping (``mark_forward_method(ddp.module, "generate")``)
finds its wrapper and routes from then on (``guard_for_mark``). ``install`` owns only the guards it
made: a wrapper the user guards explicitly (``guard``) is the user's, and ``uninstall`` leaves it.
"""

from __future__ import annotations

import functools
import importlib
import sys
import threading
import weakref
from typing import Any, Callable, Optional

from lint_rules.contract import FSDP_REGISTER_CALL, GUARD_KEY, MARKS_KEY, check_mode
from runtime_shim import fabric
from runtime_shim.api import guard_by, has_marks, unguard
from runtime_shim.import_hooks import AfterImport
from runtime_shim.meta import FABRIC_MOVING_STRATEGIES, check_before_ddp, check_before_fabric_move
from runtime_shim.wrappers import FABRIC_MODULES, is_fabric_module, root_of

ROUTE = "route"
_RANK = {ROUTE: 0, "warn": 1, "error": 2}

_lock = threading.RLock()
_patches: list[tuple[Any, str, Any]] = []  # (owner, attribute, original)
_guarded: "weakref.WeakSet[Any]" = weakref.WeakSet()  # wrappers whose guard install made (and owns)
_wrapper_of: "weakref.WeakKeyDictionary[Any, weakref.ref[Any]]" = weakref.WeakKeyDictionary()  # model -> outermost
_mode: Optional[str] = None
_finder: Optional[AfterImport] = None

_FULLY_SHARD_EXPORTS = ("torch.distributed.fsdp", "torch.distributed.fsdp._fully_shard",
                        "torch.distributed._composable.fsdp")
_FULLY_SHARD_DEFINED = "torch.distributed.fsdp._fully_shard._fully_shard"
_FULLY_SHARD_STEP = "_apply_to_module"  # (modules, ...) -> None: the modules' classes become FSDP ones


def installed_mode() -> Optional[str]:
    """The mode ``install`` is active with, or None."""
    return _mode


def _guard_new(obj: Any) -> None:
    if _mode is None:
        return
    root = root_of(obj)
    if root is None:  # something the wrapper accepts but we cannot route (a Mock in Fabric's tests)
        return
    _wrapper_of[root] = weakref.ref(obj)  # Fabric's _FabricModule is made after its DDP: outermost wins
    if _mode == ROUTE and not has_marks(obj):
        return
    guard_by(obj, _mode, owner="install")
    _guarded.add(obj)


def wrapper_of(module: Any) -> Optional[Any]:
    """The outermost live wrapper created (while installed) around ``module`` or a model holding it
    (FSDP units and ``fully_shard``-ed children have wrappers of their own inside the root's)."""
    best, size = None, -1
    for root, ref in list(_wrapper_of.items()):
        wrapper = ref()
        modules = list(root.modules()) if wrapper is not None else []
        if any(m is module for m in modules) and len(modules) > size:
            best, size = wrapper, len(modules)
    return best


def guard_for_mark(wrapper: Any) -> None:
    """A mark was registered after ``wrapper`` was made without a guard: route through it now.
    While installed the guard is install's (as if the mark had been there at construction);
    otherwise the user named the wrapper, and the guard is theirs."""
    with _lock:
        if _mode is not None:
            guard_by(wrapper, _mode, owner="install")
            _guarded.add(wrapper)
        else:
            guard_by(wrapper, ROUTE, owner="user")


def disown(wrapper: Any) -> None:
    """The user guarded ``wrapper`` explicitly: ``install``/``uninstall`` no longer touch its guard."""
    with _lock:
        _guarded.discard(wrapper)


def _patch(owner: Any, attr: str, make: Callable[[Any], Any]) -> None:
    original = getattr(owner, attr)
    if getattr(original, "_fwd_shim_patch", False):
        return
    replacement = make(original)
    replacement._fwd_shim_patch = True
    setattr(owner, attr, replacement)
    _patches.append((owner, attr, original))


def _patched_init(original: Callable[..., None]) -> Callable[..., None]:
    @functools.wraps(original)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        _guard_new(self)

    return __init__


def _patched_ddp_init(original: Callable[..., None]) -> Callable[..., None]:
    @functools.wraps(original)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        if _mode is not None:  # before DDP's device checks and collectives: every rank raises, none hangs
            check_before_ddp(original, self, args, kwargs)
        original(self, *args, **kwargs)
        _guard_new(self)

    return __init__


def _patched_module_to_device(original: Callable[..., None]) -> Callable[..., None]:
    @functools.wraps(original)
    def module_to_device(self: Any, module: Any) -> None:
        if _mode is not None:
            check_before_fabric_move(self, module)
        original(self, module)

    return module_to_device


def _patched_fully_shard(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)  # also copies fully_shard.state
    def fully_shard(module: Any, *args: Any, **kwargs: Any) -> Any:
        result = original(module, *args, **kwargs)
        for item in result if isinstance(result, (list, tuple)) else (result,):
            _guard_new(item)  # a later fully_shard on an ancestor absorbs this guard
        return result

    return fully_shard


def _patched_apply_to_module(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def _apply_to_module(modules: Any, *args: Any, **kwargs: Any) -> Any:
        result = original(modules, *args, **kwargs)
        for module in modules:
            _guard_new(module)  # a later fully_shard on an ancestor absorbs this guard
        return result

    return _apply_to_module


def _patched_register(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def register_fsdp_forward_method(module: Any, method_name: str) -> None:
        original(module, method_name)  # FSDP2 itself: a no-op unless module is an FSDPModule
        if not callable(getattr(type(module), method_name, None)) or not hasattr(module, "__dict__"):
            return  # FSDP2 raised above for its own modules; elsewhere FSDP2 does nothing, nor do we
        module.__dict__.setdefault(MARKS_KEY, set()).add(method_name)  # routed under every wrapper
        record = module.__dict__.get(GUARD_KEY)
        if record is not None and record.active:
            record.add_mark(module, method_name)

    return register_fsdp_forward_method


def _patch_torch() -> None:
    from torch.nn.parallel import DistributedDataParallel

    _patch(DistributedDataParallel, "__init__", _patched_ddp_init)
    if "torch.distributed.fsdp" not in sys.modules and _mode == ROUTE:
        return  # routing waits for FSDP's own import (routing.WATCHED) rather than causing it
    from torch.distributed.fsdp import FullyShardedDataParallel

    _patch(FullyShardedDataParallel, "__init__", _patched_init)
    defining = _try_import(_FULLY_SHARD_DEFINED)
    # fully_shard looks its step that turns modules into FSDP modules up in its own globals: patched
    # there, a `fully_shard` the user imported before runtime_shim is covered too
    hook_step = defining is not None and callable(getattr(defining, _FULLY_SHARD_STEP, None))
    if hook_step:
        _patch(defining, _FULLY_SHARD_STEP, _patched_apply_to_module)
    for name in _FULLY_SHARD_EXPORTS:
        module = sys.modules.get(name) or _try_import(name)
        if not hook_step and module is not None and hasattr(module, "fully_shard"):
            _patch(module, "fully_shard", _patched_fully_shard)  # other torch versions
        if module is not None and hasattr(module, FSDP_REGISTER_CALL):
            _patch(module, FSDP_REGISTER_CALL, _patched_register)


def _try_import(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def _patch_fabric(module: Any) -> None:
    cls = getattr(module, "_FabricModule", None)
    if cls is not None:
        _patch(cls, "__init__", _patched_init)
    package = module.__name__.rpartition(".")[0]  # lightning.fabric or lightning_fabric
    for sub, name in FABRIC_MOVING_STRATEGIES:  # imported by the wrappers module before it completes
        strategy = getattr(sys.modules.get(f"{package}.{sub}"), name, None)
        if strategy is not None:
            _patch(strategy, "module_to_device", _patched_module_to_device)


def _after_fabric_import(name: str, module: Any) -> None:
    with _lock:
        if _mode is not None:
            _patch_fabric(module)


def install(mode: str = "error", keep_stronger: bool = False) -> None:
    """Guard every DDP/FSDP1/FSDP2/Fabric wrapper created from now on (idempotent; changes mode,
    or with ``keep_stronger`` only raises it)."""
    global _mode, _finder
    check_mode(mode)
    with _lock:
        if keep_stronger and _mode is not None and _RANK[_mode] >= _RANK[mode]:
            mode = _mode
        _mode = mode
        for obj in list(_guarded):  # change the mode of live guards only (absorbed ones stay absorbed)
            record = obj.__dict__.get(GUARD_KEY)
            if record is None or not record.active or record.mode == mode:
                continue
            if (record.mode == ROUTE) != (mode == ROUTE) and (record.wrapper is obj or is_fabric_module(obj)):
                guard_by(obj, mode, owner="install")  # detection is installed at guard time: guard again
            else:
                record.mode = mode
        _patch_torch()
        for name in FABRIC_MODULES:
            if name in sys.modules:
                _patch_fabric(sys.modules[name])
        if _finder is None:
            _finder = AfterImport(FABRIC_MODULES, _after_fabric_import)
            _finder.add()


def uninstall() -> None:
    """Restore every patched attribute, unguard everything ``install`` guarded, and stop the
    routing that importing ``runtime_shim`` started."""
    global _mode, _finder
    from runtime_shim import routing

    routing.disable()
    with _lock:
        _mode = None
        if _finder is not None:
            _finder.remove()
        _finder = None
        while _patches:
            owner, attr, original = _patches.pop()
            setattr(owner, attr, original)
        fabric.restore_classes()
        for obj in list(_guarded):
            unguard(obj)
        _guarded.clear()
        _wrapper_of.clear()
