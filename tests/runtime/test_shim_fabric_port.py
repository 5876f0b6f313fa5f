"""Behaviours of Fabric's ``tests_fabric/test_wrappers.py`` (lookup, marking, step methods, forward
restored), re-stated for our guard. In process: Fabric on one CPU device, DDP on a 1-rank group."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

from runtime_shim import UnmarkedEntryError, forward_entry, guard, mark_forward_method
from runtime_shim._forwards import is_shim_bound
from runtime_shim._state import STATE
from runtime_shim.api import unguard

lightning = pytest.importorskip("lightning")
from lightning.fabric import Fabric  # noqa: E402
from lightning.fabric.wrappers import _FabricModule  # noqa: E402

pytestmark = [pytest.mark.usefixtures("one_rank_group"), pytest.mark.timeout(120)]


class Original(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layer = nn.Linear(2, 3)
        self.attribute = 1
        self.seen_depth: list[int] = []
        self.seen_forward: list[object] = []

    def forward(self, x):
        return self.layer(x)

    def method(self):
        return 2

    @forward_entry
    def generate(self, x):
        self.seen_depth.append(STATE.depth)
        self.seen_forward.append(self.__dict__.get("forward"))
        return self(x) * 2

    def third_party(self, x):
        self.seen_depth.append(STATE.depth)
        self.seen_forward.append(self.__dict__.get("forward"))
        return self(x) + 1


class Steps(lightning.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.layer = nn.Linear(2, 1)
        self.depths: list[int] = []

    def forward(self, x):
        return self.layer(x)

    def training_step(self, batch, batch_idx=0):
        self.depths.append(STATE.depth)
        if batch_idx < 0:
            raise ValueError("step failed")
        return self(batch).sum()

    def validation_step(self, batch, batch_idx=0):
        self.depths.append(STATE.depth)
        return self(batch).sum()


def _fabric_module(model: nn.Module) -> _FabricModule:
    fabric = Fabric(accelerator="cpu", devices=1)
    return guard(fabric.setup_module(model))


def test_attribute_and_method_lookup_pass_through() -> None:
    original = Original()
    fmodel = _fabric_module(original)
    assert isinstance(fmodel, _FabricModule) and type(fmodel).__name__ == "_FabricModule"
    assert fmodel.attribute == 1
    assert fmodel.layer is original.layer
    assert fmodel.method() == 2
    assert isinstance(fmodel.forward.__self__, _FabricModule)
    with pytest.raises(AttributeError):
        _ = fmodel.not_exists
    assert set(fmodel.state_dict()) == {"layer.weight", "layer.bias"}
    fmodel.new_attribute = 42  # setattr still lands on the original (Fabric's behaviour)
    assert original.new_attribute == 42


def test_mark_validation_through_the_fabric_module() -> None:
    fmodel = _fabric_module(Original())
    with pytest.raises(TypeError, match="Expected a method or a string, but got: int"):
        mark_forward_method(fmodel, 1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="You cannot mark the forward method itself"):
        mark_forward_method(fmodel, "forward")
    with pytest.raises(AttributeError, match="`Original.not_exist` does not exist or is not a method"):
        mark_forward_method(fmodel, "not_exist")
    with pytest.raises(AttributeError, match="`Original.attribute` does not exist or is not a method"):
        mark_forward_method(fmodel, "attribute")
    mark_forward_method(fmodel, "third_party")
    assert "third_party" in fmodel._forward_methods  # Fabric knows it too


@pytest.mark.parametrize("marker", ["ours", "fabric"])
def test_marked_methods_run_inside_the_fabric_forward(marker: str) -> None:
    """Under DDP, as Fabric's DDP strategy builds it: Fabric redirects its own marks only when a
    wrapper sits between it and the model (its tests check that one device gets no redirection)."""
    original = Original()
    fmodel = guard(_FabricModule(DDP(original), Fabric(accelerator="cpu", devices=1).strategy,
                                 original_module=original))
    calls = [0]
    fmodel.register_forward_pre_hook(lambda *_: calls.__setitem__(0, calls[0] + 1))
    x = torch.randn(4, 2)
    assert torch.allclose(fmodel.generate(x), original.layer(x) * 2)
    assert calls[0] == 1  # through the _FabricModule's forward (precision context)
    if marker == "ours":
        mark_forward_method(fmodel, fmodel.third_party)
    else:
        fmodel.mark_forward_method("third_party")
    assert torch.allclose(fmodel.third_party(x), original.layer(x) + 1)
    assert calls[0] == 2
    assert len(original.seen_depth) == 2 and min(original.seen_depth) > 0  # inside a wrapper forward
    # Our routing never patches forward during the call (Fabric's does): the permanent portal stays.
    assert all(is_shim_bound(f) for f in original.seen_forward)


def test_step_methods_redirected_by_default_under_ddp_and_fabric() -> None:
    model = Steps()
    ddp = guard(DDP(model))
    calls = [0]
    ddp.register_forward_pre_hook(lambda *_: calls.__setitem__(0, calls[0] + 1))
    x = torch.randn(3, 2)
    model.training_step(x)
    model.validation_step(x)
    assert calls[0] == 2 and len(model.depths) == 2 and min(model.depths) > 0
    unguard(ddp)
    model2 = Steps()
    fmodel = _fabric_module(model2)
    fmodel.training_step(x)
    model2.training_step(x)  # on the raw module too
    assert len(model2.depths) == 2 and min(model2.depths) > 0


def test_forward_restored_after_calls_and_errors() -> None:
    model = Steps()
    fmodel = _fabric_module(model)
    x = torch.randn(3, 2)
    with pytest.raises(ValueError, match="step failed"):
        fmodel.training_step(x, batch_idx=-1)
    assert STATE.depth == 0 and STATE.redirect is None
    assert torch.allclose(fmodel(x), model.layer(x))  # the real forward, not the step
    assert torch.allclose(model(x), model.layer(x))
    assert type(model).forward is Steps.forward
    unguard(fmodel)
    assert "forward" not in model.__dict__ and "training_step" not in model.__dict__
    assert type(fmodel) is _FabricModule


def test_single_device_fabric_does_not_report_unmarked_methods() -> None:
    """One device: nothing to synchronise (Fabric's own false error with torch.compile is a weakness)."""
    original = Original()
    fmodel = _fabric_module(original)
    x = torch.randn(4, 2)
    assert torch.allclose(fmodel.third_party(x), original.layer(x) + 1)


def test_unmarked_method_through_guarded_ddp_fabric_module_reports_ours() -> None:
    original = Original()
    ddp = DDP(original)
    fabric = Fabric(accelerator="cpu", devices=1)
    fmodel = _FabricModule(ddp, fabric.strategy, original_module=original)  # as the DDP strategy builds it
    guard(fmodel)
    with pytest.raises(UnmarkedEntryError, match=r"Original\.third_party runs forward computation"):
        fmodel.third_party(torch.randn(2, 2))
    assert not any(m._forward_hooks for m in original.modules())  # no tracker hooks leaked
    assert torch.allclose(fmodel.generate(torch.ones(1, 2)), original.layer(torch.ones(1, 2)) * 2)


def test_install_patches_fabric_setup_and_uninstall_restores() -> None:
    from runtime_shim import install, uninstall

    uninstall()  # also the routing that importing runtime_shim started: start from Lightning's own class
    original_init = _FabricModule.__init__
    class_attributes = dict(vars(_FabricModule))
    install("error")
    try:
        fabric = Fabric(accelerator="cpu", devices=1)
        original = Original()
        fmodel = fabric.setup_module(original)
        assert type(fmodel) is _FabricModule  # the class is patched once, the instance keeps it
        assert "generate" in fmodel._forward_methods  # the decorator marks it on the _FabricModule
        x = torch.randn(2, 2)
        assert torch.allclose(fmodel.generate(x), original.layer(x) * 2)
    finally:
        uninstall()
    assert _FabricModule.__init__ is original_init
    assert dict(vars(_FabricModule)) == class_attributes  # forward and __getattr__ restored
    assert type(fmodel) is _FabricModule and "forward" not in original.__dict__
