"""Rank bodies for the Lightning Fabric tests.

The ranks are spawned by ``_shim_dist.run_ranks``; Fabric sees ``LOCAL_RANK``/``WORLD_SIZE`` and treats
them as externally launched (no second launch), and reuses the initialised gloo group.
"""

from __future__ import annotations

import os
import warnings
from typing import Any


def _fabric(rank: int, world: int) -> Any:
    import torch.distributed as dist
    from lightning.fabric import Fabric

    os.environ.update(LOCAL_RANK=str(rank), RANK=str(rank), NODE_RANK="0", WORLD_SIZE=str(world),
                      MASTER_ADDR="127.0.0.1", MASTER_PORT="1")  # group already initialised
    assert dist.is_initialized()
    fabric = Fabric(accelerator="cpu", devices=world, strategy="ddp")
    fabric.launch()
    return fabric


def _grads(model: Any) -> dict[str, list]:
    return {n: p.grad.flatten().tolist() for n, p in model.named_parameters() if p.grad is not None}


def _call(fn: Any, *args: Any) -> tuple[str, str]:
    try:
        fn(*args)
        return ("ok", "")
    except Exception as exc:
        return (type(exc).__name__, str(exc))


def fabric_run(rank: int, world: int, how: str) -> dict[str, Any]:
    from runtime_shim import guard, install, mark_forward_method, routing, uninstall
    from shim_models import batch, make

    if how == "install":
        install("error")
    fabric = _fabric(rank, world)
    x = batch(rank)
    result: dict[str, Any] = {}

    if how == "guard":  # Fabric alone (runtime_shim never imported): Fabric's own error fires
        uninstall()
        bare = fabric.setup_module(make())
        result["bare.generate"] = _call(bare.generate, x)
        routing.enable()

    model = make()
    fmodel = fabric.setup_module(model)
    if how == "guard":
        guard(fmodel)
    result["fabric_type"] = type(fmodel).__name__
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for holder, target in (("fabric", fmodel), ("module", fmodel.module), ("raw", model)):
            model.zero_grad()
            fabric.backward(target.generate(x).sum())
            result[f"generate.{holder}"] = _grads(model)
        model.zero_grad()
        out = fmodel.nested(x)
        fabric.backward(out["gen"].sum() + out["score"][0].sum())
        result["nested"] = _grads(model)
        for name in ("generate_unmarked", "score_unmarked", "sub_forward_unmarked"):
            result[name] = _call(getattr(fmodel, name), x)
        result["describe"] = fmodel.describe()
        # A third-party style method marked at run time, through Fabric's own API and ours.
        fmodel.mark_forward_method("generate_unmarked")
        model.zero_grad()
        fabric.backward(fmodel.generate_unmarked(x).sum())
        result["fabric_marked"] = _grads(model)
        mark_forward_method(fmodel, "score_unmarked")
        model.zero_grad()
        # (+ a forward so that every parameter is used: strategy="ddp" has find_unused_parameters=False)
        fabric.backward(fmodel.score_unmarked(x).sum() + model.score_unmarked(x).sum() + fmodel(x).sum())
        result["ours_marked"] = _grads(model)
        model.zero_grad()
        fabric.backward(fmodel(x).sum())
        result["forward"] = _grads(model)
    result["warnings"] = [str(w.message) for w in caught]
    return result
