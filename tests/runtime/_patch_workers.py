"""Models, patch functions and the 2-rank body for ``test_patch_forward.py``.

Everything here is module-level so that pickling a patched module (and spawn) finds it by name.
The patched forwards change the output visibly (+1 in a block, x2 at the root), so a result
tells whether the patched forward ran.
"""

from __future__ import annotations

import io
import types
from typing import Any

import torch
from torch import nn

from runtime_shim import forward_entry


class Block(nn.Module):
    """A leaf, like the RMSNorm Liger-Kernel patches: its forward uses its own parameters."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(4, 4) / 2)
        self.bias = nn.Parameter(torch.randn(4) / 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return plain_block(self, x)


def plain_block(block: Block, x: torch.Tensor) -> torch.Tensor:
    return torch.tanh(nn.functional.linear(x, block.weight, block.bias))


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.block = Block()
        self.other = Block()  # same class, never patched: must stay as it is
        self.head = nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.other(self.block(x)))

    @forward_entry
    def generate(self, x: torch.Tensor) -> torch.Tensor:
        return self(x).pow(2)

    def score(self, x: torch.Tensor) -> torch.Tensor:  # noqa: FWD001  (unmarked on purpose: reaches only self.block)
        return self.block(x).pow(2).sum(-1)


def block_forward_shifted(self: Block, x: torch.Tensor) -> torch.Tensor:
    return plain_block(self, x) + 1.0


def net_forward_doubled(self: Net, x: torch.Tensor) -> torch.Tensor:
    return self.head(self.other(self.block(x))) * 2.0


def block_extra_repr(self: Block) -> str:
    return "shift=1.0"


def block_forward_scaled(self: Block, x: torch.Tensor, scale: float = 1.0) -> torch.Tensor:
    return plain_block(self, x) * scale


def expected(net: Net, x: torch.Tensor, block_patched: bool = True, root_patched: bool = True) -> torch.Tensor:
    """What ``net(x)`` returns, computed from its parameters without calling any forward."""
    h = plain_block(net.block, x)
    h = h + 1.0 if block_patched else h
    h = plain_block(net.other, h)
    out = nn.functional.linear(h, net.head.weight, net.head.bias)
    return out * 2.0 if root_patched else out


def make(how: str = "patched") -> Net:
    """``patched`` (patch_forward on root and block), ``instance`` (MethodType on both) or ``plain``."""
    from runtime_shim import patch_forward

    torch.manual_seed(0)
    net = Net()
    if how == "patched":
        patch_forward(net.block, block_forward_shifted, "LigerBlock")
        patch_forward(net, net_forward_doubled)
    elif how == "instance":
        block = net.block
        block.forward = types.MethodType(block_forward_shifted, block)  # type: ignore[method-assign]  # noqa: FWD301
        net.forward = types.MethodType(net_forward_doubled, net)  # type: ignore[method-assign]  # noqa: FWD301
    return net


def batch(rank: int) -> torch.Tensor:
    return torch.randn(5, 4, generator=torch.Generator().manual_seed(100 + rank))


def _grads(net: nn.Module) -> dict[str, list[float]]:
    return {k: p.grad.flatten().tolist() for k, p in net.named_parameters() if p.grad is not None}


def ddp_ranks(rank: int, world: int, saved: bytes) -> dict[str, Any]:
    """Load a torch.save'd patched model in this fresh process; then guard(DDP(...)) a patched and
    an instance-patched model and report what routing and detection did."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    from lint_rules.contract import GUARD_KEY
    from runtime_shim import UnmarkedEntryError, guard, patching

    out: dict[str, Any] = {"classes_before_load": len(patching._classes)}
    loaded = torch.load(io.BytesIO(saved), weights_only=False)
    x = batch(rank)
    out["loaded"] = {
        "root": type(loaded).__name__,
        "block": type(loaded.block).__name__,
        "other": type(loaded.other).__name__,
        "forwards_are_fns": type(loaded).forward is net_forward_doubled
        and type(loaded.block).forward is block_forward_shifted,
        "output_patched": bool(torch.allclose(loaded(x), expected(loaded, x))),
    }

    net = make("patched")
    ddp = guard(DDP(net))
    out["patched.skipped"] = list(net.__dict__[GUARD_KEY].skipped)
    net.generate(x).sum().backward()  # marked: routed through DDP's forward, gradients all-reduced
    out["patched.grads"] = _grads(net)
    with torch.no_grad():
        out["patched.output"] = bool(torch.allclose(net.generate(x), expected(net, x).pow(2)))
    try:
        net.score(x)
        out["patched.score"] = "no error"
    except UnmarkedEntryError as exc:
        out["patched.score"] = str(exc)
    del ddp

    bare = make("instance")
    guard(DDP(bare))
    out["instance.skipped"] = list(bare.__dict__[GUARD_KEY].skipped)
    bare.score(x).sum().backward()  # unmarked bypass reaching a skipped module: nothing notices
    out["instance.score_grads"] = _grads(bare)
    try:
        bare.generate(x)
        out["instance.generate"] = "no error"
    except RuntimeError as exc:  # the root's instance forward never reaches the portal
        out["instance.generate"] = str(exc)
    return out
