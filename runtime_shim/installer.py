"""``install``/``uninstall``: guard every wrapper created afterwards in this process.

Patches the constructors (``DistributedDataParallel.__init__``, ``FullyShardedDataParallel.__init__``,
``_FabricModule.__init__``) and the public re-exports of ``fully_shard`` (never the function in its
defining module, whose own globals refer to it), and makes ``register_fsdp_forward_method`` also
record our mark, so that registration routes under every wrapper. Lightning is not imported: if
it is not loaded yet, a meta-path hook patches ``_FabricModule`` when it is. ``uninstall``
restores every patched attribute, unguards every wrapper guarded by ``install`` and stops the
routing that importing ``runtime_shim`` started (through ``_installed``, without importing ``routing``).

Meta tensors (``meta.py``): the patched ``DistributedDataParallel.__init__`` runs
``check_before_ddp`` before DDP's own code, and ``module_to_device`` of Fabric's DDP, single-device
and DP strategies (patched with ``_FabricModule``: the wrappers module imports the strategies
before it completes) runs ``check_before_fabric_move`` before ``fabric.setup`` moves the model: a
clear ``MetaDeviceError`` on every rank instead of DDP's or ``.to()``'s cryptic failure. FSDP1 and
FSDP2 are not checked at construction (deferred init is legitimate there).

Only real modules are the shim's business (``wrappers.is_module``): every patched entry point is
made by ``_entry``, which hands a call whose module argument is anything else (a ``Mock``, even a
``Mock(spec=nn.Module)``, as Lightning's own tests pass) to the original alone, untouched.

Modes rank ``route`` < ``record`` < ``warn`` < ``error`` (``record`` detects like ``warn``, silently;
the entries go to ``recorder``): importing ``runtime_shim`` installs ``route`` (wrappers
of models with marks are guarded for routing only) and never lowers a mode ``install`` was given.

Every wrapper created while installed is remembered (weakly) by the model it wraps, guarded or
not, so that a mark registered *after* wrapping (``mark_forward_method(ddp.module, "generate")``)
finds its wrapper and routes from then on (``api.mark_forward_method``). ``install`` owns only the
guards it made: a wrapper the user guards explicitly (``guard``) is the user's, and ``uninstall``
leaves it. That state lives in ``_installed``, which ``api`` reads without importing this module.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import sys
import weakref
from typing import Any, Callable, Optional

from lint_rules.contract import FSDP_REGISTER_CALL, GUARD_KEY, MARKS_KEY, check_mode
from runtime_shim import _installed, fabric
from runtime_shim._installed import LOCK as _lock
from runtime_shim._installed import RANK as _RANK
from runtime_shim._installed import ROUTE
from runtime_shim.api import guard_by, has_marks, unguard
from runtime_shim.import_hooks import AfterImport
from runtime_shim.meta import check_before_ddp, check_before_fabric_move
from runtime_shim.vocabulary import (
    FABRIC_MODULES, FABRIC_MOVING_STRATEGIES, FULLY_SHARD_DEFINED, FULLY_SHARD_EXPORTS, FULLY_SHARD_STEP,
)
from runtime_shim.wrappers import is_fabric_module, is_module, root_of

_patches: list[tuple[Any, str, Any]] = []  # (owner, attribute, original)
_finder: Optional[AfterImport] = None


def installed_mode() -> Optional[str]:
    """The mode ``install`` is active with, or None."""
    return _installed.mode


def _guard_new(obj: Any) -> None:
    mode = _installed.mode
    if mode is None:
        return
    root = root_of(obj)
    if root is None:  # something the wrapper accepts but we cannot route (a Mock in Fabric's tests)
        return
    _installed.wrappers[root] = weakref.ref(obj)  # Fabric's _FabricModule is made after its DDP: outermost wins
    if mode == ROUTE and not has_marks(obj):
        return
    guard_by(obj, mode, owner="install")
    _installed.guarded.add(obj)


def _patch(owner: Any, attr: str, make: Callable[[Any], Any]) -> None:
    original = getattr(owner, attr)
    if getattr(original, "_fwd_shim_patch", False):
        return
    replacement = make(original)
    replacement._fwd_shim_patch = True
    setattr(owner, attr, replacement)
    _patches.append((owner, attr, original))


_ABSENT = object()


def _real_modules(value: Any, lists: bool) -> bool:
    """``value`` is a real module (``wrappers.is_module``), or with ``lists`` a list or tuple of them."""
    if lists and isinstance(value, (list, tuple)):
        return all(is_module(item) for item in value)
    return is_module(value)


def _entry(original: Callable[..., Any], patched: Callable[..., Any], *names: str,
           lists: bool = False) -> Callable[..., Any]:
    """Every patched entry point is made here: ``patched`` runs when each argument named is a real
    module (with ``lists``, or a list or tuple of them; an argument with a default may be left out
    or None); for anything else, ``original`` runs alone, exactly as unpatched: nothing is read from
    the argument, nothing is checked or guarded. Names are read off ``original``'s signature (``self``
    included), once."""
    parameters = list(inspect.signature(original).parameters.values())
    slots = [(parameters.index(p), p.name, p.default is not inspect.Parameter.empty)
             for p in parameters if p.name in names]
    if len(slots) != len(names):  # a torch or Lightning whose signature moved: say so at patch time
        raise TypeError(f"runtime_shim cannot patch {original.__qualname__}: it takes no argument {names}")

    @functools.wraps(original)  # also copies fully_shard.state
    def entry(*args: Any, **kwargs: Any) -> Any:
        for index, name, optional in slots:
            value = args[index] if index < len(args) else kwargs.get(name, _ABSENT)
            if optional and (value is _ABSENT or value is None):
                continue
            if not _real_modules(value, lists):
                return original(*args, **kwargs)
        return patched(*args, **kwargs)

    return entry


def _patched_init(*names: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """A wrapper's constructor that guards the new wrapper; ``names``: its module arguments."""

    def make(original: Callable[..., None]) -> Callable[..., None]:
        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            original(self, *args, **kwargs)
            _guard_new(self)

        return _entry(original, __init__, *names)

    return make


def _patched_ddp_init(original: Callable[..., None]) -> Callable[..., None]:
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        if _installed.mode is not None:  # before DDP's device checks and collectives: every rank raises, none hangs
            check_before_ddp(original, self, args, kwargs)
        original(self, *args, **kwargs)
        _guard_new(self)

    return _entry(original, __init__, "module")


def _patched_module_to_device(original: Callable[..., None]) -> Callable[..., None]:
    def module_to_device(self: Any, module: Any) -> None:
        if _installed.mode is not None:
            check_before_fabric_move(self, module)
        original(self, module)

    return _entry(original, module_to_device, "module")


def _patched_fully_shard(original: Callable[..., Any]) -> Callable[..., Any]:
    def fully_shard(module: Any, *args: Any, **kwargs: Any) -> Any:
        result = original(module, *args, **kwargs)
        for item in result if isinstance(result, (list, tuple)) else (result,):
            _guard_new(item)  # a later fully_shard on an ancestor absorbs this guard
        return result

    return _entry(original, fully_shard, "module", lists=True)


def _patched_apply_to_module(original: Callable[..., Any]) -> Callable[..., Any]:
    def _apply_to_module(modules: Any, *args: Any, **kwargs: Any) -> Any:
        result = original(modules, *args, **kwargs)
        for module in modules:
            _guard_new(module)  # a later fully_shard on an ancestor absorbs this guard
        return result

    return _entry(original, _apply_to_module, "modules", lists=True)


def _patched_register(original: Callable[..., Any]) -> Callable[..., Any]:
    def register_fsdp_forward_method(module: Any, method_name: str) -> None:
        original(module, method_name)  # FSDP2 itself: a no-op unless module is an FSDPModule
        if not callable(getattr(type(module), method_name, None)) or not hasattr(module, "__dict__"):
            return  # FSDP2 raised above for its own modules; elsewhere FSDP2 does nothing, nor do we
        module.__dict__.setdefault(MARKS_KEY, set()).add(method_name)  # routed under every wrapper
        record = module.__dict__.get(GUARD_KEY)
        if record is not None and record.active:
            record.add_mark(module, method_name)

    return _entry(original, register_fsdp_forward_method, "module")


def _patch_torch() -> None:
    from torch.nn.parallel import DistributedDataParallel

    _patch(DistributedDataParallel, "__init__", _patched_ddp_init)
    if "torch.distributed.fsdp" not in sys.modules and _installed.mode == ROUTE:
        return  # routing waits for FSDP's own import (routing.WATCHED) rather than causing it
    from torch.distributed.fsdp import FullyShardedDataParallel

    _patch(FullyShardedDataParallel, "__init__", _patched_init("module"))
    defining = _try_import(FULLY_SHARD_DEFINED)
    # fully_shard looks its step that turns modules into FSDP modules up in its own globals: patched
    # there, a `fully_shard` the user imported before runtime_shim is covered too
    hook_step = defining is not None and callable(getattr(defining, FULLY_SHARD_STEP, None))
    if hook_step:
        _patch(defining, FULLY_SHARD_STEP, _patched_apply_to_module)
    for name in FULLY_SHARD_EXPORTS:
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
        _patch(cls, "__init__", _patched_init("forward_module", "original_module"))
    package = module.__name__.rpartition(".")[0]  # lightning.fabric or lightning_fabric
    for sub, name in FABRIC_MOVING_STRATEGIES:  # imported by the wrappers module before it completes
        strategy = getattr(sys.modules.get(f"{package}.{sub}"), name, None)
        if strategy is not None:
            _patch(strategy, "module_to_device", _patched_module_to_device)


def _after_fabric_import(name: str, module: Any) -> None:
    with _lock:
        if _installed.mode is not None:
            _patch_fabric(module)


def install(mode: str = "error", keep_stronger: bool = False, single_device: Optional[bool] = None) -> None:
    """Guard every DDP/FSDP1/FSDP2/Fabric wrapper created from now on (idempotent; changes mode,
    or with ``keep_stronger`` only raises it). ``single_device=True``: detect on Fabric with one
    device as well (a test suite on one device that would fail under DDP)."""
    global _finder
    check_mode(mode)
    with _lock:
        if single_device is not None:
            _installed.single_device = single_device
        current = _installed.mode
        if keep_stronger and current is not None and _RANK[current] >= _RANK[mode]:
            mode = current
        _installed.mode = mode
        for obj in list(_installed.guarded):  # change the mode of live guards only (absorbed ones stay absorbed)
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
    global _finder
    _installed.stop_routing()
    with _lock:
        _installed.mode = None
        _installed.single_device = False
        if _finder is not None:
            _finder.remove()
        _finder = None
        while _patches:
            owner, attr, original = _patches.pop()
            setattr(owner, attr, original)
        fabric.restore_classes()
        for obj in list(_installed.guarded):
            unguard(obj)
        _installed.guarded.clear()
        _installed.wrappers.clear()
