"""Rank bodies for the FSDP2 and FSDP1 tests (run in spawned processes by ``_shim_dist.run_ranks``)."""

from __future__ import annotations

from typing import Any


def _full_grads(model: Any) -> dict[str, list]:
    out = {}
    for name, p in model.named_parameters():
        if p.grad is None:
            continue
        grad = p.grad.full_tensor() if hasattr(p.grad, "full_tensor") else p.grad
        out[name.replace("_fsdp_wrapped_module.", "")] = grad.detach().flatten().tolist()
    return out


def _call(fn: Any, *args: Any) -> tuple[str, str]:
    """('ok', '') or (exception type, message)."""
    try:
        fn(*args)
        return ("ok", "")
    except Exception as exc:  # recorded for the parent's assertions
        return (type(exc).__name__, str(exc))


def fsdp2(rank: int, world: int, how: str) -> dict[str, Any]:
    import torch
    from torch.distributed.device_mesh import init_device_mesh

    import torch.distributed.fsdp as fsdp_pkg
    from runtime_shim import guard, install, routing, uninstall
    from shim_models import batch, make

    mesh = init_device_mesh("cpu", (world,))
    x = batch(rank)
    result: dict[str, Any] = {}

    # The hazard (no shim): a method calling a root-owned submodule directly.
    uninstall()  # as if runtime_shim were never imported
    bare = make()
    for block in bare.blocks:
        fsdp_pkg.fully_shard(block, mesh=mesh)
    fsdp_pkg.fully_shard(bare, mesh=mesh)
    bare(x).sum().backward()  # after backward the root is resharded
    result["bare.score"] = _call(bare.score, x)
    routing.enable()

    if how == "install":
        install("error")
    model = make()
    for block in model.blocks:
        fsdp_pkg.fully_shard(block, mesh=mesh)
    fsdp_pkg.fully_shard(model, mesh=mesh)
    if how == "guard":
        guard(model)
    result["unmarked_first"] = _call(model.score_unmarked, x)  # before any forward: still ours
    for method in ("generate", "score"):
        model.zero_grad()
        getattr(model, method)(x).sum().backward()
        result[method] = _full_grads(model)
    model.zero_grad()
    model.generate_unmarked(x).sum().backward()  # only self(...): FSDP2's own hooks handle it
    result["generate_unmarked"] = _full_grads(model)
    model.zero_grad()
    model(x).sum().backward()
    result["forward"] = _full_grads(model)
    for name in ("score_unmarked", "sub_forward_unmarked"):
        result[name] = _call(getattr(model, name), x)
    nested = model.nested(x)
    result["nested"] = [type(nested).__name__, sorted(nested), type(nested["score"]).__name__]
    result["describe"] = model.describe()
    with torch.no_grad():
        result["after_errors"] = model(x).flatten().tolist()
    # FSDP2's own registration is respected (delegation): no report, FSDP's pre/post-forward run.
    fsdp_pkg.register_fsdp_forward_method(model, "score_unmarked")
    with torch.no_grad():
        result["fsdp_registered"] = model.score_unmarked(x).flatten().tolist()
    return result


def fsdp1(rank: int, world: int, use_orig_params: bool, how: str) -> dict[str, Any]:
    import torch
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

    from runtime_shim import guard, install, routing, uninstall
    from shim_models import batch, make

    x = batch(rank)
    result: dict[str, Any] = {}
    kwargs = dict(device_id=torch.device("cpu"), use_orig_params=use_orig_params)

    uninstall()  # as if runtime_shim were never imported
    bare = FSDP(make(), **kwargs)
    bare(x)
    result["bare.generate"] = _call(bare.module.generate, x)  # the cryptic failure (or an accident)
    routing.enable()

    if how == "install":
        install("error")
    model = make()
    wrapped = FSDP(model, **kwargs)
    if how == "guard":
        guard(wrapped)
    inner = wrapped.module
    for method in ("generate", "score"):
        wrapped.zero_grad()
        out = getattr(inner, method)(x)
        out.sum().backward()
        result[method] = {"out": out.detach().flatten().tolist()}
        with FSDP.summon_full_params(wrapped, with_grads=use_orig_params):
            result[method]["grads"] = _full_grads(wrapped) if use_orig_params else {}
    with torch.no_grad():
        result["generate_nograd"] = inner.generate(x).flatten().tolist()
    for name in ("generate_unmarked", "score_unmarked", "sub_forward_unmarked"):
        result[name] = _call(getattr(inner, name), x)
    with torch.no_grad():
        result["after_errors"] = wrapped(x).flatten().tolist()
    return result
