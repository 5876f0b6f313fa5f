"""Models and rank bodies for ``test_check_no_meta.py`` (spawned by ``_shim_dist.run_ranks``).

Nothing from ``runtime_shim`` is imported at module level: unpickling a rank body imports this
module, and the control runs must not have the shim loaded at all.
"""

from __future__ import annotations

import os
from typing import Any

import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, dim: int = 4) -> None:
        super().__init__()
        self.fc = nn.Linear(dim, dim)
        self.norm = nn.LayerNorm(dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(torch.tanh(self.fc(x)))


class WithMetaTemplate(nn.Module):
    """FWD101's hazard: a template built under meta and registered as a submodule."""

    def __init__(self) -> None:
        super().__init__()
        self.net = Block()
        with torch.device("meta"):
            self.tpl = Block()  # noqa: FWD101  # the hazard under test: shapes only, never run

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class WithListTemplate(nn.Module):
    """The fix: the same template kept out of the module tree in a plain list."""

    def __init__(self) -> None:
        super().__init__()
        self.net = Block()
        with torch.device("meta"):
            self._tpl = [Block()]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def _outcome(fn: Any, *args: Any) -> tuple[str, str]:
    """('ok', '') or (exception type, message): the parent asserts on both."""
    try:
        fn(*args)
        return ("ok", "")
    except Exception as exc:  # recorded for the parent's assertions
        return (type(exc).__name__, str(exc))


def _fabric(rank: int, world: int) -> Any:
    import torch.distributed as dist
    from lightning.fabric import Fabric

    os.environ.update(LOCAL_RANK=str(rank), RANK=str(rank), NODE_RANK="0", WORLD_SIZE=str(world),
                      MASTER_ADDR="127.0.0.1", MASTER_PORT="1")  # group already initialised
    assert dist.is_initialized()
    fabric = Fabric(accelerator="cpu", devices=world, strategy="ddp")
    fabric.launch()
    return fabric


def _train_step(fabric: Any, model: nn.Module, rank: int) -> dict[str, list]:
    torch.manual_seed(0)  # same weights on both ranks, different data
    for p in model.parameters():
        nn.init.normal_(p, std=0.5)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    fmodel, fopt = fabric.setup(model, opt)
    x = torch.randn(3, 4, generator=torch.Generator().manual_seed(100 + rank))
    fabric.backward(fmodel(x).pow(2).sum())
    grads = {n: p.grad.flatten().tolist() for n, p in model.named_parameters()}
    fopt.step()
    return grads


def two_ranks(rank: int, world: int) -> dict[str, Any]:
    """Controls first (torch and Lightning alone, ``runtime_shim`` never imported), then
    ``runtime_shim.install()`` (Lightning already imported) and the same setups again; then FSDP2
    deferred init with the shim installed. One spawn for all: starting ranks is the slow part."""
    import sys

    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    fabric = _fabric(rank, world)
    result: dict[str, Any] = {"shim_loaded": "runtime_shim" in sys.modules}
    result["fabric_control"] = _outcome(fabric.setup, WithMetaTemplate())
    result["ddp_control"] = _outcome(DDP, WithMetaTemplate())
    with torch.device("meta"):
        whole = WithListTemplate()
    result["ddp_control_all_meta"] = _outcome(DDP, whole)

    from runtime_shim import MetaDeviceError, install

    install()
    result["fabric_meta"] = _outcome(fabric.setup, WithMetaTemplate())
    result["ddp_meta"] = _outcome(DDP, WithMetaTemplate())
    # No collective was issued by the refused setups: the group still works on both ranks.
    probe = torch.tensor([float(rank + 1)])
    dist.all_reduce(probe)
    result["all_reduce"] = probe.item()
    result["list_template"] = _train_step(fabric, WithListTemplate(), rank)
    result["strategy"] = type(fabric.strategy).__name__

    # FSDP2 deferred init: build under meta, shard, materialise, initialise -- must not be refused.
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh("cpu", (world,))
    with torch.device("meta"):
        big = nn.Sequential(Block(), Block())
    for block in big:
        fully_shard(block, mesh=mesh)
    fully_shard(big, mesh=mesh)
    result["fsdp2_meta_before"] = all(p.to_local().is_meta for p in big.parameters())
    try:  # the guard's lazy check: running before materialising is refused, with the new message
        big(torch.randn(2, 4))
        result["fsdp2_forward_on_meta"] = ("ok", "")
    except MetaDeviceError as exc:
        result["fsdp2_forward_on_meta"] = ("MetaDeviceError", str(exc))
    big.to_empty(device="cpu")
    torch.manual_seed(0)
    for module in big.modules():
        if hasattr(module, "reset_parameters"):
            module.reset_parameters()
    x = torch.randn(2, 4, generator=torch.Generator().manual_seed(rank))
    big(x).sum().backward()
    result["fsdp2_trained"] = all(p.grad is not None for p in big.parameters())
    result["fsdp2_guarded"] = "_fwd_shim_guard" in big.__dict__
    return result
