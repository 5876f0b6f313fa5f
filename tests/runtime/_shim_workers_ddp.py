"""Rank bodies for the DDP tests (run in spawned processes by ``_shim_dist.run_ranks``)."""

from __future__ import annotations

import os
import warnings
from typing import Any


def _grads_list(model: Any) -> dict[str, list]:
    from shim_models import grads

    return {k: v.flatten().tolist() for k, v in grads(model).items()}


def _unmarked_probe(model: Any, ddp: Any, x: Any) -> dict[str, Any]:
    """Call unmarked entry points; record the errors; then check a normal step still works."""
    from runtime_shim import UnmarkedEntryError

    out: dict[str, Any] = {}
    for name in ("generate_unmarked", "score_unmarked", "sub_forward_unmarked"):
        for holder in ("raw", "ddp.module"):
            target = model if holder == "raw" else ddp.module
            try:
                getattr(target, name)(x)  # the entry's call site: where a warning points
                out[f"{holder}.{name}"] = "no error"
            except UnmarkedEntryError as exc:
                out[f"{holder}.{name}"] = str(exc)
    out["describe"] = model.describe()
    model.zero_grad()
    ddp(x).sum().backward()  # a normal step afterwards: no hang, no leftover state
    out["after"] = _grads_list(model)
    return out


def bypass_then_guard(rank: int, world: int) -> dict[str, Any]:
    """Unguarded bypass desynchronises; the guarded call does not; unmarked calls raise."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    from runtime_shim import guard, routing, uninstall
    from shim_models import batch, make

    x = batch(rank)
    plain = make()
    uninstall()  # as if runtime_shim were never imported: no routing at all
    plain_ddp = DDP(plain)
    plain_ddp.module.generate(x).sum().backward()  # the hazard: no all-reduce happens
    result: dict[str, Any] = {"unguarded": _grads_list(plain)}
    routing.enable()

    model = make()
    ddp = guard(DDP(model, find_unused_parameters=True))  # score uses a subset of the parameters
    for holder in ("raw", "ddp.module"):
        model.zero_grad()
        target = model if holder == "raw" else ddp.module
        target.generate(x).sum().backward()
        result[f"guarded.{holder}"] = _grads_list(model)
    model.zero_grad()
    model.score(x).sum().backward()
    result["guarded.score"] = _grads_list(model)
    model.zero_grad()
    out = model.nested(x)
    (out["gen"].sum() + out["score"][0].sum()).backward()
    result["nested"] = {"tag": out["tag"], "grads": _grads_list(model)}
    result["probe"] = _unmarked_probe(model, ddp, x)
    return result


def installed(rank: int, world: int, how: str) -> dict[str, Any]:
    """The same through ``install()`` or ``import runtime_shim.auto`` (env set by the parent)."""
    import sys

    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP

    if how == "install":
        from runtime_shim import install

        install("error")
    else:
        import runtime_shim.auto  # noqa: F401  (the enforcement import)

        assert runtime_shim.auto.MODE == os.environ["FWD_SHIM_MODE"]
    from shim_models import batch, make

    x = batch(rank)
    model = make()
    ddp = DDP(model)
    result: dict[str, Any] = {
        "mode": os.environ.get("FWD_SHIM_MODE"),
        "auto": "runtime_shim.auto" in sys.modules,
    }
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.generate(x).sum().backward()
        result["generate"] = _grads_list(model)
        result["probe"] = _unmarked_probe(model, ddp, x)
        model.zero_grad()
        if os.environ.get("FWD_SHIM_MODE") in ("warn", "off"):
            model.score_unmarked(x)  # warned already by the probe: no second warning
            model.score_unmarked(x)
    result["warnings"] = [str(w.message) for w in caught if w.category.__name__ == "UnmarkedEntryWarning"]
    result["warned_at"] = [f"{os.path.basename(w.filename)}:{w.lineno}" for w in caught
                           if w.category.__name__ == "UnmarkedEntryWarning"]
    from runtime_shim import uninstall

    uninstall()
    result["restored_init"] = DDP.__init__.__qualname__ == "DistributedDataParallel.__init__" and not hasattr(
        DDP.__init__, "_fwd_shim_patch")
    result["restored_attrs"] = sorted(k for m in model.modules() for k in m.__dict__ if k in (
        "forward", "generate", "score", "nested", "_fwd_shim_guard"))
    result["ddp_forward_restored"] = "forward" not in ddp.__dict__
    model.zero_grad()
    torch.manual_seed(0)
    model.generate(x).sum().backward()  # unguarded again: local gradients only
    result["after_uninstall"] = _grads_list(model)
    return result
