"""Rank bodies for ``test_shim_faults.py`` (run in spawned processes by ``_shim_dist.run_ranks``)."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any


def compiled_generate(rank: int, world: int, backend: str) -> dict[str, Any]:
    """``torch.compile(model.generate)`` on a guarded DDP model: routed once per call through the
    DDP forward, so the gradients are all-reduced (equal on every rank, equal to the reference)."""
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP

    from runtime_shim import guard
    from shim_models import batch, grads, make

    model = make()
    ddp = guard(DDP(model))
    calls = [0]
    ddp.register_forward_pre_hook(lambda *_: calls.__setitem__(0, calls[0] + 1))
    compiled = torch.compile(model.generate, backend=backend)
    compiled(batch(rank)).sum().backward()
    return {"calls": calls[0], "grads": {k: v.flatten().tolist() for k, v in grads(model).items()}}


class _Failing:
    """Builds the model inside the rank (spawn pickles functions by name, not local classes)."""

    @staticmethod
    def make(rank: int) -> Any:
        import torch

        from runtime_shim import forward_entry
        from shim_models import Toy

        class Sampler(Toy):
            @forward_entry
            def sample(self, x: torch.Tensor) -> torch.Tensor:
                if rank == 0:  # a data-dependent failure on one rank, before any module computes
                    raise ValueError("rank 0: bad batch")
                return self(x)

        torch.manual_seed(0)
        return Sampler()


def one_rank_raises(rank: int, world: int, stay_alive: float, pg_timeout: float) -> dict[str, Any]:
    """Rank 0's marked method raises; rank 1 goes on to backward (an all-reduce rank 0 never joins).

    With ``stay_alive`` > 0 rank 0 catches the error and lives on for that long, so rank 1 is
    released only by its process group's timeout; with 0 rank 0 returns at once and its process
    ends, which releases rank 1. Returns what each rank saw.
    """
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    from runtime_shim import guard
    from runtime_shim._state import STATE
    from shim_models import batch

    group = dist.new_group(backend="gloo", timeout=timedelta(seconds=pg_timeout))
    model = _Failing.make(rank)
    guard(DDP(model, process_group=group))
    out: dict[str, Any] = {}
    start = time.monotonic()
    try:
        model.sample(batch(rank)).sum().backward()
        out["result"] = "ok"
    except Exception as exc:  # reported: what the error and its notes say
        out.update(error=type(exc).__name__, message=str(exc), notes=list(getattr(exc, "__notes__", [])))
        out["state_clean"] = STATE.depth == 0 and STATE.redirect is None and not STATE.records
        if rank == 0:
            time.sleep(stay_alive)
    out["seconds"] = time.monotonic() - start
    return out


def compiled_generate_then_rank_0_exits(rank: int, world: int) -> dict[str, Any]:
    """Both 2-rank checks that need no living failed rank, in one spawn (each spawn costs ~8 s)."""
    return {"compiled": compiled_generate(rank, world, "eager"),
            "failure": one_rank_raises(rank, world, 0.0, 60.0)}
