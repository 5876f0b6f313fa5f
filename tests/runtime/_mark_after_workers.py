"""Rank bodies for ``test_mark_after_wrapping.py``: ``runtime_shim.mark_forward_method`` called
*after* the model was wrapped (a library class, nothing decorated), in each way a user reaches it."""

from __future__ import annotations

from typing import Any

from _shim_workers_fixed import _batch, _full_grads, _reference

#: (set-up, what the mark is given): the shim only imported (routing); after ``uninstall()`` (as
#: if routing were off: only the named wrapper can be found); with ``install("error")`` (auto).
CASES = (("imported", "wrapper"), ("imported", "module"), ("uninstalled", "wrapper"), ("installed", "module"))


def _wrap(kind: str, model: Any, world: int) -> tuple[Any, Any, Any]:
    """(wrapper, the model as the user calls it, what holds the full gradients)."""
    import torch

    if kind == "ddp":
        from torch.nn.parallel import DistributedDataParallel as DDP

        ddp = DDP(model)  # find_unused_parameters=False: generate and score use every parameter
        return ddp, ddp.module, model
    if kind == "fsdp1":
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

        fsdp = FSDP(model, device_id=torch.device("cpu"), use_orig_params=True)
        return fsdp, fsdp.module, fsdp
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh("cpu", (world,))
    for block in model.blocks:
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model, model, model


def _grads(kind: str, holder: Any) -> dict[str, list]:
    if kind == "fsdp1":
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

        with FSDP.summon_full_params(holder, with_grads=True):
            return _full_grads(holder)
    return _full_grads(holder)


def mark_after(rank: int, world: int, kind: str) -> dict[str, Any]:
    import torch

    import runtime_shim
    import unmarked_lm as lm
    from runtime_shim import install, mark_forward_method, routing, uninstall

    result: dict[str, Any] = {}
    for setup, given in CASES:
        if setup == "uninstalled":
            uninstall()
        elif setup == "installed":
            install("error")
        for method in ("generate", "score"):
            torch.manual_seed(0)
            wrapper, model, holder = _wrap(kind, lm.TinyLM(), world)
            mark_forward_method(wrapper if given == "wrapper" else model, method)  # after wrapping
            try:
                getattr(model, method)(_batch(rank)).sum().backward()
                outcome: Any = {"grads": _grads(kind, holder), "reference": _reference(lm, method, world)}
            except Exception as exc:  # the parent asserts on it
                outcome = {"error": f"{type(exc).__name__}: {exc}"}
            result[f"{setup}/{given}/{method}"] = outcome
        uninstall()
        routing.enable()  # back to what importing runtime_shim gives
    assert "runtime_shim" in repr(runtime_shim)
    return result


class _EncoderDecoder:
    """Built lazily (torch is imported in the rank)."""

    @staticmethod
    def make() -> Any:
        from torch import nn

        from runtime_shim import forward_entry

        class EncoderDecoder(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.enc = nn.Linear(4, 4)
                self.dec = nn.Linear(4, 2)

            def forward(self, x: Any) -> Any:
                return self.dec(self.enc(x))

            @forward_entry
            def encode(self, x: Any) -> Any:  # leaves dec unused
                return self.enc(x)

            @forward_entry
            def maybe_decode(self, x: Any, decode: bool) -> Any:
                return self.dec(self.enc(x)) if decode else self.enc(x)

        return EncoderDecoder()


def unused_parameters(rank: int, world: int) -> dict[str, Any]:
    """A routed method that leaves parameters unused: a clear error at backward on every rank (no
    hang, no silent per-rank step); with find_unused_parameters=True it trains; a later call that
    drops parameters gets DDP's own error with a note naming the method."""
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP

    import runtime_shim  # noqa: F401  (routing)

    x = _batch(rank)
    result: dict[str, Any] = {}
    torch.manual_seed(0)
    ddp = DDP(_EncoderDecoder.make())
    try:
        ddp.module.encode(x).sum().backward()
        result["default"] = "no error"
    except Exception as exc:
        result["default"] = f"{type(exc).__name__}: {exc}"
    torch.manual_seed(0)
    ddp = DDP(_EncoderDecoder.make())
    with torch.no_grad():
        ddp.module.encode(x)  # inference: nothing to wait for, no error
    ddp.module.encode(x).argmax()  # never backpropagated: harmless, no error
    (ddp.module.encode(x).sum() + ddp(x).sum()).backward()  # one loss that covers every parameter
    grad = ddp.module.enc.weight.grad.clone()
    gathered = [torch.zeros_like(grad) for _ in range(world)]
    torch.distributed.all_gather(gathered, grad)
    result["combined_synchronised"] = all(torch.allclose(g, gathered[0]) for g in gathered)

    torch.manual_seed(0)
    ddp = DDP(_EncoderDecoder.make(), find_unused_parameters=True)
    ddp.module.encode(x).sum().backward()
    grad = ddp.module.enc.weight.grad.clone()
    gathered = [torch.zeros_like(grad) for _ in range(world)]
    torch.distributed.all_gather(gathered, grad)
    result["find_unused_synchronised"] = all(torch.allclose(g, gathered[0]) for g in gathered)

    torch.manual_seed(0)
    ddp = DDP(_EncoderDecoder.make())
    ddp.module.maybe_decode(x, True).sum().backward()  # first call uses everything
    try:
        ddp.module.maybe_decode(x, False).sum().backward()  # this one does not: DDP notices next time
        ddp(x).sum().backward()
        result["later"] = ["no error"]
    except RuntimeError as exc:
        result["later"] = [str(exc), *getattr(exc, "__notes__", [])]
    return result


def fsdp2_imported_before_shim(rank: int, world: int) -> dict[str, Any]:
    """``from torch.distributed.fsdp import fully_shard`` before ``runtime_shim`` is imported (the
    script's own order): the name the script holds was never patched, yet the decorated method of a
    model it wraps is routed (the shim hooks the step inside ``fully_shard``, not the name)."""
    import sys

    assert "runtime_shim" not in sys.modules
    import torch
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    import unmarked_lm as lm
    from runtime_shim import forward_entry

    class Marked(lm.TinyLM):
        @forward_entry
        def score(self, x: Any) -> Any:
            return super().score(x)

    torch.manual_seed(0)
    model = Marked()
    mesh = init_device_mesh("cpu", (world,))
    for block in model.blocks:
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    try:  # score calls root-owned submodules directly
        model.score(_batch(rank)).sum().backward()
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}
    return {"grads": _full_grads(model), "reference": _reference(lm, "score", world)}
