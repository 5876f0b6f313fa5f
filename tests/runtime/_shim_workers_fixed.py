"""Rank bodies for ``test_fix_alone.py``: run a model file as ``fwdlint --fix`` left it, wrapped by
DDP, FSDP1, FSDP2 or Fabric, with nothing but that file's own imports (no ``runtime_shim.auto``, no
``guard``, no ``install``). This module itself imports nothing from ``runtime_shim``."""

from __future__ import annotations

import sys
from typing import Any

METHODS = ("generate", "score")


def _batch(rank: int) -> Any:
    import torch

    return torch.randn(4, 4, generator=torch.Generator().manual_seed(1000 + rank))


def _full_grads(model: Any) -> dict[str, list]:
    out = {}
    for name, p in model.named_parameters():
        if p.grad is not None:
            grad = p.grad.full_tensor() if hasattr(p.grad, "full_tensor") else p.grad
            out[name.replace("_fsdp_wrapped_module.", "").replace("_forward_module.", "")] = \
                grad.detach().flatten().tolist()
    return out


def _reference(lm: Any, method: str, world: int, cls: str = "TinyLM") -> dict[str, list]:
    """The average over ranks of each rank's own gradient: what a synchronised step gives."""
    import torch

    total: dict[str, Any] = {}
    for rank in range(world):
        torch.manual_seed(0)
        model = getattr(lm, cls)()
        getattr(model, method)(_batch(rank)).sum().backward()
        for name, p in model.named_parameters():
            if p.grad is not None:
                total[name] = total.get(name, 0) + p.grad / world
    return {k: v.flatten().tolist() for k, v in total.items()}


def run_fixed(rank: int, world: int, wrapper: str, directory: str, cls: str = "TinyLM",
              methods: tuple[str, ...] = METHODS) -> dict[str, Any]:
    import torch

    sys.path.insert(0, directory)
    import lm_under_test as lm  # the file as --fix wrote it

    result: dict[str, Any] = {"shim_imported": "runtime_shim" in sys.modules}
    for method in methods:
        torch.manual_seed(0)
        model = getattr(lm, cls)()
        x = _batch(rank)
        if wrapper == "ddp":
            from torch.nn.parallel import DistributedDataParallel as DDP

            target, grads_of = DDP(model, find_unused_parameters=True).module, model
        elif wrapper == "fsdp1":
            from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

            wrapped = FSDP(model, device_id=torch.device("cpu"), use_orig_params=True)
            target, grads_of = wrapped.module, wrapped
        elif wrapper == "fsdp2":
            from torch.distributed.device_mesh import init_device_mesh
            from torch.distributed.fsdp import fully_shard

            mesh = init_device_mesh("cpu", (world,))
            for block in model.blocks:
                fully_shard(block, mesh=mesh)
            fully_shard(model, mesh=mesh)
            target, grads_of = model, model
        else:
            from _shim_workers_fabric import _fabric

            fabric = _fabric(rank, world)
            target = fabric.setup_module(model)
            grads_of = model
        try:
            getattr(target, method)(x).sum().backward()
        except Exception as exc:  # the parent asserts on it
            result[method] = {"error": f"{type(exc).__name__}: {exc}"}
            continue
        if wrapper == "fsdp1":
            from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

            with FSDP.summon_full_params(grads_of, with_grads=True):
                grads = _full_grads(grads_of)
        else:
            grads = _full_grads(grads_of)
        result[method] = {"grads": grads, "reference": _reference(lm, method, world, cls)}
    return result
