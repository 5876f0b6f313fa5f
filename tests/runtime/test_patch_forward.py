"""``patch_forward`` / ``unpatch_forward``: a named per-instance subclass instead of an instance patch.

Models and patch functions live in ``_patch_workers`` (module level, so pickling finds them). The
patched forwards shift a block's output by +1 and double the root's, so ``expected(...)`` tells
whether the patched forward ran.
"""

from __future__ import annotations

import copy
import functools
import gc
import io
import pickle
import types
import weakref

import pytest
import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

from _patch_workers import (
    Block,
    Net,
    batch,
    block_extra_repr,
    block_forward_scaled,
    block_forward_shifted,
    ddp_ranks,
    expected,
    make,
    net_forward_doubled,
    plain_block,
)
from _shim_dist import run_ranks
from lint_rules.contract import GUARD_KEY, route_not_consumed_message, unmarked_entry_error
from runtime_shim import UnmarkedEntryError, guard, patch_forward, unguard, unpatch_forward

pytestmark = pytest.mark.timeout(300)

X = batch(0)


def _roundtrip(net: nn.Module, how: str) -> nn.Module:
    if how == "deepcopy":
        return copy.deepcopy(net)
    if how == "pickle":
        return pickle.loads(pickle.dumps(net))
    buffer = io.BytesIO()
    torch.save(net, buffer)
    return torch.load(io.BytesIO(buffer.getvalue()), weights_only=False)


def _unmarked_prefix(cls: str, method: str) -> str:
    return unmarked_entry_error(cls, method, "CHAIN").split("(CHAIN)")[0]


# -- what the user sees ---------------------------------------------------------------------------
def test_print_shows_the_new_name_and_isinstance_holds() -> None:
    net = make("patched")
    text = str(net)
    assert text.startswith("PatchedNet(")  # default name
    assert "(block): LigerBlock(" in text and "(other): Block(" in text
    assert repr(net.block).startswith("LigerBlock(")
    assert isinstance(net, Net) and isinstance(net.block, Block)
    assert type(net.block).forward is block_forward_shifted and type(net).forward is net_forward_doubled
    assert torch.allclose(net(X), expected(net, X))
    assert not torch.allclose(net(X), expected(net, X, block_patched=False, root_patched=False))


def test_state_dict_unchanged_and_other_instances_untouched() -> None:
    plain = make("plain")
    net = make("patched")
    assert list(net.state_dict()) == list(plain.state_dict())
    assert all(torch.equal(a, b) for a, b in zip(net.state_dict().values(), plain.state_dict().values()))
    net.load_state_dict(plain.state_dict())  # strict: same keys both ways
    # The other instance of the same class inside the model, a fresh one, and the class itself.
    for block in (net.other, plain.block, Block()):
        assert type(block) is Block and "forward" not in block.__dict__
    assert Block.__name__ == "Block" and Net.__name__ == "Net"
    assert Block.forward is not block_forward_shifted and Net.forward is not net_forward_doubled
    assert torch.allclose(plain(X), expected(plain, X, block_patched=False, root_patched=False))


def test_extra_repr_and_a_callable_object_as_forward() -> None:
    block = patch_forward(Block(), block_forward_shifted, "LigerBlock", extra_repr=block_extra_repr)
    assert repr(block).startswith("LigerBlock(shift=1.0)")
    scaled = patch_forward(Block(), functools.partial(block_forward_scaled, scale=3.0), "ScaledBlock")
    ref = plain_block(scaled, X) * 3.0
    assert torch.allclose(scaled(X), ref)
    assert torch.allclose(pickle.loads(pickle.dumps(scaled))(X), ref)  # a partial pickles itself


# -- copies, pickling, torch.save -----------------------------------------------------------------
@pytest.mark.parametrize("how", ["deepcopy", "pickle", "torch.save"])
def test_roundtrip_keeps_the_patch(how: str) -> None:
    net = make("patched")
    patch_forward(net.block, block_forward_shifted, "LigerBlock", extra_repr=block_extra_repr)
    copied = _roundtrip(net, how)
    assert type(copied) is type(net) and type(copied.block) is type(net.block)  # the cached classes
    assert type(copied.other) is Block
    assert str(copied) == str(net) and "(block): LigerBlock(shift=1.0)" in str(copied)
    assert type(copied.block).forward is block_forward_shifted
    assert copied.block.weight is not net.block.weight
    assert torch.allclose(copied(X), net(X)) and torch.allclose(copied(X), expected(net, X))
    assert unpatch_forward(copied.block) is copied.block and type(copied.block) is Block


def test_pickle_of_a_nested_forward_names_it_deepcopy_does_not_need_it() -> None:
    def nested_forward(self: Block, x: torch.Tensor) -> torch.Tensor:
        return plain_block(self, x)

    block = patch_forward(Block(), nested_forward, "Nested")
    assert type(copy.deepcopy(block)).forward is nested_forward
    for dump in (pickle.dumps, lambda m: torch.save(m, io.BytesIO())):
        with pytest.raises(pickle.PicklingError) as info:
            dump(block)
        assert str(info.value).startswith(
            f"cannot pickle Nested: its forward {nested_forward.__module__}.{nested_forward.__qualname__} "
            "is not a module-level function")
        assert nested_forward.__qualname__.endswith("<locals>.nested_forward")
    lam = patch_forward(Block(), block_forward_shifted, "L", extra_repr=lambda self: "x")
    with pytest.raises(pickle.PicklingError, match=r"^cannot pickle L: its extra_repr .*<lambda> is not"):
        pickle.dumps(lam)


# -- torch.compile ----------------------------------------------------------------------------------
@pytest.mark.parametrize("fullgraph", [False, True])
def test_torch_compile(fullgraph: bool) -> None:
    torch._dynamo.reset()
    net = make("patched")
    compiled = torch.compile(net, backend="eager", fullgraph=fullgraph)
    out = compiled(X)
    assert torch.allclose(out, expected(net, X))
    assert not torch.allclose(out, expected(net, X, block_patched=False, root_patched=False))
    block = patch_forward(Block(), block_forward_shifted)
    assert torch.allclose(torch.compile(block, backend="eager", fullgraph=fullgraph)(X), block(X))


# -- unpatch, patching twice, bad input --------------------------------------------------------------
def test_unpatch_restores_the_class_and_refuses_an_unpatched_module() -> None:
    net = make("patched")
    assert unpatch_forward(net) is net and unpatch_forward(net.block) is net.block
    assert type(net) is Net and type(net.block) is Block and str(net).startswith("Net(")
    assert torch.allclose(net(X), expected(net, X, block_patched=False, root_patched=False))
    with pytest.raises(ValueError, match=r"^unpatch_forward\(\): this Block was not patched by patch_forward$"):
        unpatch_forward(net.block)
    with pytest.raises(TypeError, match=r"^unpatch_forward\(\) expects an nn.Module, got int$"):
        unpatch_forward(3)  # type: ignore[arg-type]


def test_patching_twice_repatches_from_the_original_class() -> None:
    block = patch_forward(Block(), block_forward_shifted, "LigerBlock")
    first = type(block)
    patch_forward(block, functools.partial(block_forward_scaled, scale=2.0))
    assert type(block).__bases__ == (Block,) and type(block).__name__ == "PatchedBlock"  # not stacked
    assert torch.allclose(block(X), plain_block(block, X) * 2.0)
    patch_forward(block, block_forward_shifted, "LigerBlock")
    assert type(block) is first  # same patch, same class: idempotent, shared by all instances
    assert type(patch_forward(Block(), block_forward_shifted, "LigerBlock")) is first
    unpatch_forward(block)
    assert type(block) is Block  # one step back, whatever was applied before


def test_a_class_is_freed_with_its_last_instance() -> None:
    def closure_over(scale: float):  # type: ignore[no-untyped-def]
        def forward(self: Block, x: torch.Tensor) -> torch.Tensor:
            return plain_block(self, x) * scale
        return forward

    blocks = [patch_forward(Block(), closure_over(float(i))) for i in range(3)]
    classes = weakref.WeakSet(type(b) for b in blocks)
    assert len(classes) == 3
    del blocks
    gc.collect()
    assert len(classes) == 0  # the cache keeps neither the classes nor the closures alive


def _gen(self: Block, x: torch.Tensor):  # type: ignore[no-untyped-def]
    yield x


@pytest.mark.parametrize(
    ("args", "error", "message"),
    [
        ((object(), block_forward_shifted), TypeError, r"patch_forward\(\) expects an nn.Module, got object"),
        ((Block(), 3), TypeError, r"fn must be a function taking the module first, got int"),
        ((Block(), Block().forward), TypeError, r"fn _patch_workers.Block.forward is a bound method"),
        ((Block(), _gen), TypeError, r"fn test_patch_forward._gen is a generator function"),
        ((Block(), lambda: 0), TypeError, r"fn .*<lambda> takes no positional argument"),
        ((Block(), block_forward_shifted, "Liger Block"), ValueError, r"name must be a Python identifier"),
    ],
)
def test_bad_input_is_a_one_line_error(args: tuple, error: type, message: str) -> None:
    with pytest.raises(error, match=message) as info:
        patch_forward(*args)
    assert "\n" not in str(info.value)
    if isinstance(args[0], Block):
        assert type(args[0]) is Block  # nothing changed


def test_instance_forward_is_refused_but_fabrics_plain_rebinding_is_dropped() -> None:
    block = Block()
    block.forward = types.MethodType(block_forward_shifted, block)  # type: ignore[method-assign]  # noqa: FWD301
    with pytest.raises(ValueError, match=r"^Block already has a forward of its own on the instance"):
        patch_forward(block, block_forward_shifted)
    assert type(block) is Block
    # Fabric's mark_forward_method restores `forward` by assigning the bound class forward.
    plain = Block()
    plain.forward = plain.forward  # type: ignore[method-assign]  # noqa: FWD301
    patch_forward(plain, block_forward_shifted)
    assert "forward" not in plain.__dict__ and torch.allclose(plain(X), plain_block(plain, X) + 1.0)
    plain.forward = plain.forward  # type: ignore[method-assign]  # noqa: FWD301
    unpatch_forward(plain)
    assert "forward" not in plain.__dict__ and torch.allclose(plain(X), plain_block(plain, X))


# -- runtime_shim.guard on patched modules ------------------------------------------------------------
def _count_wrapper_forwards(ddp: nn.Module) -> list[int]:
    calls = [0]
    ddp.register_forward_pre_hook(lambda *_: calls.__setitem__(0, calls[0] + 1))
    return calls


@pytest.mark.usefixtures("one_rank_group")
def test_guard_routes_and_checks_patched_modules() -> None:
    net = make("patched")
    ddp = guard(DDP(net))
    assert net.__dict__[GUARD_KEY].skipped == []
    calls = _count_wrapper_forwards(ddp)
    out = net.generate(X)
    assert calls[0] == 1  # routed through DDP's forward
    assert torch.allclose(out, expected(net, X).pow(2))  # and the patched forwards ran
    with pytest.raises(UnmarkedEntryError) as info:
        net.score(X)  # unmarked, reaches only the patched block: still caught
    assert str(info.value).startswith(_unmarked_prefix("Net", "score") + "(score -> self.block(...) at line")
    assert calls[0] == 1
    unguard(ddp)
    assert "forward" not in net.__dict__ and "forward" not in net.block.__dict__
    assert torch.allclose(net(X), expected(net, X))


@pytest.mark.usefixtures("one_rank_group")
def test_guard_skips_instance_patched_modules() -> None:
    net = make("instance")
    ddp = guard(DDP(net))
    assert net.__dict__[GUARD_KEY].skipped == ["Net", "block"]
    calls = _count_wrapper_forwards(ddp)
    assert torch.allclose(net.score(X), (plain_block(net.block, X) + 1.0).pow(2).sum(-1))  # unnoticed
    assert calls[0] == 0
    with pytest.raises(RuntimeError) as info:
        net.generate(X)  # the root's instance forward never reaches the portal
    assert str(info.value) == route_not_consumed_message("Net", "generate", "DistributedDataParallel")


@pytest.mark.usefixtures("one_rank_group")
def test_patching_a_guarded_module_is_refused_until_unguarded() -> None:
    net = make("plain")
    ddp = guard(DDP(net))
    with pytest.raises(RuntimeError, match=r"^Block is guarded .*call patch_forward before guard\(\)"):
        patch_forward(net.block, block_forward_shifted)
    assert type(net.block) is Block
    unguard(ddp)
    patch_forward(net.block, block_forward_shifted)
    guard(ddp)
    with pytest.raises(RuntimeError, match=r"^PatchedBlock is guarded .*call unpatch_forward before"):
        unpatch_forward(net.block)
    assert torch.allclose(ddp(X), expected(net, X, root_patched=False))


def test_two_ranks_load_saved_patch_and_route_through_ddp() -> None:
    buffer = io.BytesIO()
    torch.save(make("patched"), buffer)
    r0, r1 = run_ranks(ddp_ranks, buffer.getvalue())
    for r in (r0, r1):
        # A fresh process re-creates the dynamic classes from the file alone.
        assert r["classes_before_load"] == 0
        assert r["loaded"] == {"root": "PatchedNet", "block": "LigerBlock", "other": "Block",
                               "forwards_are_fns": True, "output_patched": True}
        assert r["patched.skipped"] == [] and r["patched.output"]
        assert r["patched.score"].startswith(_unmarked_prefix("Net", "score"))
        assert r["instance.skipped"] == ["Net", "block"]
        assert r["instance.generate"] == route_not_consumed_message("Net", "generate", "DistributedDataParallel")
    # Routed: DDP averaged the gradients, to what one process computes for the two batches.
    assert r0["patched.grads"].keys() == r1["patched.grads"].keys() == dict(make().named_parameters()).keys()
    for name, grad in r0["patched.grads"].items():
        assert torch.allclose(torch.tensor(grad), torch.tensor(r1["patched.grads"][name]), atol=1e-6), name
    ref = make("patched")
    sum(ref.generate(batch(r)).sum() for r in (0, 1)).backward()
    for name, p in ref.named_parameters():
        assert torch.allclose(torch.tensor(r0["patched.grads"][name]), p.grad.flatten() / 2, atol=1e-6), name
    # The instance-patched block's bypass went unnoticed and left each rank its own gradient.
    w0, w1 = (torch.tensor(r["instance.score_grads"]["block.weight"]) for r in (r0, r1))
    assert not torch.allclose(w0, w1, atol=1e-3)
