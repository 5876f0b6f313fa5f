"""Recognising the wrappers the shim supports, without importing Lightning.

Each returns (kind, wrapper, root): ``root`` is the user's module the wrapper calls, ``wrapper``
the object whose forward sets up gradient reduction / unsharding.
"""

from __future__ import annotations

from typing import Any, Optional

from torch import nn

from runtime_shim.vocabulary import FABRIC_MODULES, WRAPPER_PREFIXES


def is_module(obj: Any) -> bool:
    """Is ``obj`` a real ``nn.Module``? The shim's one rule for what is its business: every entry point
    it patches passes anything else straight to the original, untouched. ``isinstance`` alone is not
    enough: ``Mock(spec=nn.Module)`` fakes ``__class__`` (Lightning's own tests hand such mocks to
    ``module_to_device``), but not ``type()``, whose MRO must hold ``nn.Module``."""
    return isinstance(obj, nn.Module) and nn.Module in type(obj).__mro__


def is_fabric_module(obj: Any) -> bool:
    return any(
        k.__name__ == "_FabricModule" and k.__module__ in FABRIC_MODULES for k in type(obj).__mro__
    )


def _unwrap_compiled(obj: Any) -> Any:
    return getattr(obj, "_orig_mod", obj) if type(obj).__name__ == "OptimizedModule" else obj


def identify(obj: Any) -> Optional[tuple[str, nn.Module, nn.Module]]:
    """(kind, wrapper, root) for DDP, FSDP1 and FSDP2; None for anything else."""
    from torch.nn.parallel import DistributedDataParallel

    obj = _unwrap_compiled(obj)
    if isinstance(obj, DistributedDataParallel):
        return "ddp", obj, obj.module
    try:
        from torch.distributed.fsdp import FSDPModule, FullyShardedDataParallel
    except ImportError:  # pragma: no cover
        return None
    if isinstance(obj, FullyShardedDataParallel):
        return "fsdp1", obj, obj.module
    if isinstance(obj, FSDPModule):
        return "fsdp2", obj, obj
    return None


def root_of(obj: Any) -> Optional[nn.Module]:
    """The user's model inside a supported wrapper (the wrapper's ``_original_module`` for Fabric),
    or None when there is none to route: not a wrapper, or one built around something that is not a
    module (Fabric's own tests build ``_FabricModule`` around ``Mock`` objects)."""
    if is_fabric_module(obj):
        original = getattr(obj, "_original_module", None)
        return original if is_module(original) else None
    found = identify(obj)
    return found[2] if found is not None and is_module(found[2]) else None


def clean_name(name: str) -> str:
    """A submodule's path as the user wrote it: wrapper prefixes (FSDP1 units, activation
    checkpointing, ``torch.compile``) removed."""
    for prefix in WRAPPER_PREFIXES:
        name = name.replace(prefix, "").replace(prefix[:-1], "")
    return name.strip(".")


def describe_supported() -> str:
    return (
        "DistributedDataParallel, FullyShardedDataParallel (FSDP1), a fully_shard-ed module (FSDP2) "
        "or a Lightning _FabricModule"
    )
