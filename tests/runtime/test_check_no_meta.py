"""``runtime_shim.check_no_meta`` and where the shim runs it (FWD101 at run time).

Unit cases in process (1-rank gloo group for DDP/FSDP), Fabric on one device in fresh
interpreters (import order matters), and the real cases on 2 spawned gloo ranks: Fabric ``ddp``
with a meta template refused on every rank before any collective, the list-template fix training,
the cryptic control without the shim, DDP construction, and FSDP2 deferred init left alone.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

from _meta_workers import Block, WithListTemplate, WithMetaTemplate, two_ranks
from _shim_dist import HERE, ROOT, run_ranks
from runtime_shim import MetaDeviceError, check_no_meta, install, uninstall

pytestmark = pytest.mark.timeout(300)

CRYPTIC = "Cannot copy out of meta tensor; no data!"


def raised(module: nn.Module) -> MetaDeviceError:
    with pytest.raises(MetaDeviceError) as info:
        check_no_meta(module)
    return info.value


# -- what the message says ------------------------------------------------------------------------
def test_template_named_by_path_and_owner_with_both_fixes() -> None:
    error = raised(WithMetaTemplate())
    text = str(error)
    assert "WithMetaTemplate has 4 parameters and 0 buffers on the meta device" in text
    assert "in 1 module: tpl (Block): parameters tpl.fc.weight, tpl.fc.bias, tpl.norm.weight, tpl.norm.bias." in text
    assert "net." not in text  # the real submodule is not blamed
    assert "to_empty(device=...)" in text and "load a state dict" in text
    assert "self._tpl = [Block(...)]" in text
    assert "object.__setattr__(self, 'tpl', Block(...)) in WithMetaTemplate" in text
    assert error.report.parameters == ["tpl.fc.weight", "tpl.fc.bias", "tpl.norm.weight", "tpl.norm.bias"]
    assert "\n" not in text  # one line: greppable in rank logs


def test_meta_buffer_is_owned_by_the_module_holding_it() -> None:
    model = WithListTemplate()
    model.net.register_buffer("stats", torch.empty(3, device="meta"))
    text = str(raised(model))
    assert "0 parameters and 1 buffer" in text and "net (Block): buffers net.stats." in text
    assert "module tree" not in text and "to_empty" in text  # a stray buffer, not a template


def test_nested_template_and_partly_meta_module() -> None:
    class Inner(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.keep = nn.Linear(2, 2)
            self.ema = Block().to("meta")  # noqa: FWD101  # as copy.deepcopy(...).to("meta") in real code

    class Outer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.enc = nn.Sequential(Inner())
            self.head = nn.Linear(2, 2)
            self.head.weight = nn.Parameter(torch.empty(2, 2, device="meta"))  # bias stays real

    error = raised(Outer())
    groups = [(g.path, g.cls, g.parent_cls) for g in error.report.groups]
    assert groups == [("enc.0.ema", "Block", "Inner"), ("head", "Linear", "Outer")]
    text = str(error)
    assert "enc.0.ema (Block): parameters enc.0.ema.fc.weight" in text
    assert "head (Linear): parameters head.weight." in text
    assert "object.__setattr__(self, 'ema', Block(...)) in Inner" in text


def test_clean_model_passes_and_materialised_template_passes() -> None:
    assert check_no_meta(WithListTemplate()) is None  # meta template out of the tree: not seen
    model = WithMetaTemplate()
    raised(model)
    model.tpl.to_empty(device="cpu")
    assert check_no_meta(model) is None


def test_shared_parameter_listed_once_with_its_other_path() -> None:
    model = nn.ModuleDict({"emb": nn.Embedding(5, 4, device="meta"), "out": nn.Linear(4, 5, bias=False)})
    model["out"].weight = model["emb"].weight  # tied
    error = raised(model)
    assert error.report.parameters == ["emb.weight"]
    assert "1 parameter and 0 buffers" in str(error) and "emb.weight (also out.weight)" in str(error)


def test_ignore_list_covers_every_path_of_a_shared_tensor() -> None:
    from runtime_shim.meta import find_meta

    model = WithMetaTemplate()
    model.alias = nn.Linear(4, 4)
    model.alias.weight = model.tpl.fc.weight  # the same meta tensor under a second path
    assert find_meta(model).groups[0].aliases == {"tpl.fc.weight": ["alias.weight"]}
    # DDP's ignore list holds named_parameters() names: one per tensor, so the alias goes with it.
    assert not find_meta(model, ignore=[n for n, _ in model.named_parameters() if n.startswith("tpl.")])


def test_long_lists_are_truncated_with_counts() -> None:
    class Big(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.net = nn.Linear(2, 2)
            with torch.device("meta"):
                self.tpl = nn.Sequential(*[nn.Linear(2, 2) for _ in range(5000)])  # noqa: FWD101

    error = raised(Big())
    text = str(error)
    assert "10,000 parameters" in text and "tpl (Sequential): parameters tpl.0.weight" in text
    assert "tpl.4.bias (+9,990 more)." in text and "tpl.5.weight" not in text
    assert len(error.report.parameters) == 10_000 and len(text) < 1500
    many = nn.ModuleDict({f"t{i}": nn.Linear(2, 2, device="meta") for i in range(20)})
    many["real"] = nn.Linear(2, 2)
    text = str(raised(many))
    assert "in 20 modules" in text and "t7 (Linear): parameters t7.weight, t7.bias |" in text
    assert "(+12 more modules with 24 tensors: t8 (Linear)," in text and "t15 (Linear), ...)" in text
    assert "t16" not in text and len(text) < 1500


@pytest.mark.usefixtures("one_rank_group")
def test_fsdp1_wrapper_prefixes_and_flat_params_become_user_names() -> None:
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    from torch.distributed.fsdp.wrap import ModuleWrapPolicy

    model = nn.Sequential(nn.Linear(4, 4), nn.Sequential(nn.Linear(4, 4), nn.LayerNorm(4)))
    fsdp = FSDP(model, device_id=torch.device("cpu"), use_orig_params=False,
                auto_wrap_policy=ModuleWrapPolicy({nn.Linear}))
    fsdp.to("meta")  # flat parameters on meta: what a guard of such a wrapper would see
    error = raised(fsdp)
    assert sorted(error.report.parameters) == sorted(
        ["0.weight", "0.bias", "1.0.weight", "1.0.bias", "1.1.weight", "1.1.bias"])
    assert "_fsdp_wrapped_module" not in str(error) and "_flat_param" not in str(error)
    assert "the whole model (Sequential)" in str(error)


@pytest.mark.usefixtures("one_rank_group")
def test_fsdp2_dtensor_parameters_named_then_pass_once_materialised() -> None:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    with torch.device("meta"):
        model = nn.Sequential(Block(), nn.Linear(4, 1))
    fully_shard(model, mesh=init_device_mesh("cpu", (1,)))  # legitimate: deferred init
    error = raised(model)
    assert "the whole model (Sequential): parameters 0.fc.weight, 0.fc.bias" in str(error)
    assert "1.bias." in str(error)
    model.to_empty(device="cpu")
    assert check_no_meta(model) is None


# -- where the shim runs it -------------------------------------------------------------------------
@pytest.mark.usefixtures("one_rank_group")
def test_ddp_construction_checked_where_ddp_would_fail_only() -> None:
    # Routing only (what importing runtime_shim gives): the constructor is patched.
    with pytest.raises(MetaDeviceError, match=r"^DistributedDataParallel\(WithMetaTemplate\) would fail: .*tpl \("):
        DDP(WithMetaTemplate())
    ignored = WithMetaTemplate()
    ignored._ddp_params_and_buffers_to_ignore = [n for n, _ in ignored.named_parameters() if n.startswith("tpl.")]
    DDP(ignored)  # DDP leaves ignored tensors alone, so do we
    buffer_only = WithListTemplate()
    buffer_only.register_buffer("stats", torch.empty(2, device="meta"))
    DDP(buffer_only)(torch.randn(2, 4))  # measured: DDP constructs and runs with meta buffers
    with torch.device("meta"):
        whole = WithListTemplate()
    DDP(whole, init_sync=False)  # no verification, one device type: DDP constructs
    with pytest.raises(MetaDeviceError):
        DDP(whole)
    uninstall()
    with pytest.raises(ValueError, match="same type of devices") as info:  # DDP's own, cryptic
        DDP(WithMetaTemplate())
    assert not isinstance(info.value, MetaDeviceError)
    install("warn")
    with pytest.raises(MetaDeviceError):
        DDP(WithMetaTemplate())


@pytest.mark.usefixtures("one_rank_group")
def test_guard_lazy_check_uses_the_grouped_message() -> None:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    from runtime_shim import guard

    with torch.device("meta"):
        model = WithListTemplate()
    fully_shard(model, mesh=init_device_mesh("cpu", (1,)))
    guard(model)  # no check at guard time: FSDP2 models are legitimately meta until to_empty
    with pytest.raises(MetaDeviceError, match=r"^guarded model cannot run: WithListTemplate has 4 parameters .*"
                                              r"the whole model \(WithListTemplate\): parameters net\.fc\.weight"):
        model(torch.randn(2, 4))
    model.to_empty(device="cpu")
    assert model(torch.randn(2, 4)).shape == (2, 4)


_FABRIC_ONE_DEVICE = """
import runtime_shim
import torch
from lightning.fabric import Fabric
from lightning.fabric.strategies import SingleDeviceStrategy, DDPStrategy
from _meta_workers import WithListTemplate, WithMetaTemplate

def outcome(model):
    try:
        Fabric(accelerator="cpu", devices=1).setup(model)
        return "ok"
    except Exception as exc:
        return type(exc).__name__ + ": " + str(exc)

strategies = (SingleDeviceStrategy, DDPStrategy)
print("PATCHED", all(getattr(c.module_to_device, "_fwd_shim_patch", False) for c in strategies))
print("META", outcome(WithMetaTemplate()))
print("LIST", outcome(WithListTemplate()))
runtime_shim.uninstall()
print("RESTORED", not hasattr(SingleDeviceStrategy.module_to_device, "_fwd_shim_patch"))
print("AFTER", outcome(WithMetaTemplate()))
"""


def test_fabric_one_device_checked_before_the_move_when_routing_patched_it_at_import() -> None:
    """``import runtime_shim`` before torch and Lightning (routing only, patched from import hooks:
    the hardest order) checks Fabric's move; ``uninstall`` restores it. (Installing after
    Lightning was imported is covered by the 2-rank Fabric test.)"""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, HERE]), FWD_SHIM_MODE="error")  # not "off"
    proc = subprocess.run([sys.executable, "-c", _FABRIC_ONE_DEVICE],
                          capture_output=True, text=True, env=env, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = dict(line.split(" ", 1) for line in proc.stdout.splitlines() if " " in line)
    assert lines["PATCHED"] == "True"
    assert lines["META"].startswith("MetaDeviceError: Fabric cannot move WithMetaTemplate to cpu "
                                    "(SingleDeviceStrategy.module_to_device, run by fabric.setup): "), lines["META"]
    assert "tpl (Block): parameters tpl.fc.weight, tpl.fc.bias" in lines["META"]
    assert lines["LIST"] == "ok"
    assert lines["RESTORED"] == "True"
    assert lines["AFTER"].startswith("NotImplementedError: " + CRYPTIC)


# -- 2 real ranks (one spawn, several verdicts) ---------------------------------------------------------
@pytest.fixture(scope="module")
def ranks() -> list:
    return run_ranks(two_ranks, timeout=240)


def test_fabric_ddp_control_without_shim_fails_cryptically(ranks: list) -> None:
    for rank in ranks:
        assert rank["shim_loaded"] is False
        # Recorded text (torch 2.13, Lightning 2.6.6): "Cannot copy out of meta tensor; no data! Please use
        # torch.nn.Module.to_empty() instead of torch.nn.Module.to() when moving module from meta to a
        # different device." -- no path, no owner.
        kind, message = rank["fabric_control"]
        assert (kind, message.split(" Please")[0]) == ("NotImplementedError", CRYPTIC) and "tpl" not in message


def test_fabric_ddp_refuses_meta_template_on_every_rank_and_trains_list_template(ranks: list) -> None:
    for rank in ranks:
        kind, message = rank["fabric_meta"]
        assert kind == "MetaDeviceError", rank["fabric_meta"]
        assert message.startswith("Fabric cannot move WithMetaTemplate to cpu (DDPStrategy.module_to_device")
        assert "tpl (Block): parameters tpl.fc.weight, tpl.fc.bias, tpl.norm.weight, tpl.norm.bias." in message
        assert rank["all_reduce"] == 3.0  # no rank stuck in a collective
        assert rank["strategy"] == "DDPStrategy"
    # The fix trains, and DDP synchronised the gradients of the two ranks' different data.
    assert ranks[0]["list_template"] == ranks[1]["list_template"]
    assert set(ranks[0]["list_template"]) == {"net.fc.weight", "net.fc.bias", "net.norm.weight", "net.norm.bias"}


def test_ddp_construction_refused_naming_the_template(ranks: list) -> None:
    for rank in ranks:
        # Controls, recorded: DDP's own errors name no parameter.
        kind, message = rank["ddp_control"]
        assert kind == "ValueError" and "must be on the same type of devices" in message and "tpl" not in message
        assert rank["ddp_control_all_meta"] == ("RuntimeError", "Tensor.item() cannot be called on meta tensors")
        kind, message = rank["ddp_meta"]
        assert kind == "MetaDeviceError" and message.startswith("DistributedDataParallel(WithMetaTemplate) would fail")
        assert "tpl.norm.bias" in message


def test_fsdp2_deferred_init_is_not_refused(ranks: list) -> None:
    for rank in ranks:
        # Meta before materialising is legitimate; only running it then is refused (the lazy check).
        assert rank["fsdp2_meta_before"] is True and rank["fsdp2_guarded"] is True
        kind, message = rank["fsdp2_forward_on_meta"]
        assert kind == "MetaDeviceError" and message.startswith("guarded model cannot run: Sequential has 8 parameters")
        assert rank["fsdp2_trained"] is True
