"""Routing and detection semantics, in process (a 1-rank gloo group; DDP is a real DDP)."""

from __future__ import annotations

import copy
import threading
import warnings

import pytest
import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

from runtime_shim import (
    MetaDeviceError,
    UnmarkedEntryError,
    UnmarkedEntryWarning,
    forward_entry,
    guard,
    install,
    mark_forward_method,
    uninstall,
)
from runtime_shim._state import STATE
from runtime_shim.api import unguard
from shim_models import Toy, batch, make

pytestmark = [pytest.mark.usefixtures("one_rank_group"), pytest.mark.timeout(60)]

SHIM_KEYS = {"forward", "generate", "score", "nested", "_fwd_shim_guard"}


def count_wrapper_forwards(ddp: nn.Module) -> list[int]:
    calls = [0]
    ddp.register_forward_pre_hook(lambda *_: calls.__setitem__(0, calls[0] + 1))
    return calls


def assert_clean_state() -> None:
    assert STATE.depth == 0 and STATE.redirect is None


def test_routed_through_wrapper_forward_once_and_reentrant() -> None:
    model = make()
    ddp = guard(DDP(model))
    calls = count_wrapper_forwards(ddp)
    x = batch(0)
    assert torch.allclose(model.generate(x), make().generate(x))
    assert calls[0] == 1  # two self(...) inside, one wrapper forward
    out = model.nested(x)  # marked -> marked -> marked: still one wrapper forward
    assert calls[0] == 2 and out["tag"] == "n" and isinstance(out["score"], list)
    ddp(x)
    assert calls[0] == 3
    assert_clean_state()


def test_arguments_and_structures() -> None:
    class Rich(Toy):
        @forward_entry
        def rich(self, x, *rest, scale=1.0, **extra):
            return {"a": (self(x) * scale,), "b": [rest, extra], "none": None, "s": "text"}

    model = Rich()
    guard(DDP(model))
    out = model.rich(batch(0), 1, 2, scale=3.0, flag=True)
    assert out["b"] == [(1, 2), {"flag": True}] and out["none"] is None and out["s"] == "text"
    assert torch.allclose(out["a"][0], Toy.forward(model, batch(0)) * 3.0)


def test_no_grad_and_inference_mode_in_either_order() -> None:
    class G(Toy):
        @torch.no_grad()
        @forward_entry
        def a(self, x):
            return self(x)

        @forward_entry
        @torch.inference_mode()
        def b(self, x):
            return self.head(torch.tanh(self.embed(x)))

    model = G()
    ddp = guard(DDP(model, find_unused_parameters=True))
    calls = count_wrapper_forwards(ddp)
    assert not model.a(batch(0)).requires_grad
    assert model.b(batch(0)).is_inference()
    assert calls[0] == 2
    ddp(batch(0)).sum().backward()  # DDP still trains normally afterwards
    ddp(batch(1)).sum().backward()


def test_generator_returned_at_run_time_is_rejected() -> None:
    class R(Toy):
        @forward_entry
        def lazy(self, x):
            return (self(x) for _ in range(2))

    model = R()
    guard(DDP(model))
    with pytest.raises(TypeError, match=r"R.lazy is routed .* returned a generator"):
        model.lazy(batch(0))
    assert_clean_state()


class Boom(Toy):
    @forward_entry
    def fails_inside(self, x):
        self(x)
        raise KeyError("inside the method")


def test_no_state_left_after_errors_in_wrapper_and_method() -> None:
    model = Boom()
    ddp = guard(DDP(model))
    x = batch(0)
    expected = Toy.forward(model, x)
    with pytest.raises(KeyError, match="inside the method"):
        model.fails_inside(x)
    assert_clean_state()
    ddp.register_forward_pre_hook(lambda *_: (_ for _ in ()).throw(ValueError("wrapper failed")))
    with pytest.raises(ValueError, match="wrapper failed"):
        model.generate(x)  # the wrapper raises before reaching the module
    assert_clean_state()
    with pytest.raises(UnmarkedEntryError):
        model.score_unmarked(x)
    assert_clean_state()
    assert torch.allclose(model(x), expected)  # plain call runs the real forward
    assert type(model).forward is Toy.forward
    assert not any(h for m in model.modules() for h in (m._forward_hooks, m._forward_pre_hooks))


def test_raises_before_the_first_submodule_computes() -> None:
    """The error comes at the first module-forward boundary, before that forward's body runs.

    (Forward pre-hooks registered by the user on that module do run first: they precede ``forward``.)
    """
    from torch.overrides import TorchFunctionMode

    class Log(TorchFunctionMode):
        def __init__(self):
            super().__init__()
            self.ops: list[str] = []

        def __torch_function__(self, func, types, args=(), kwargs=None):
            self.ops.append(getattr(func, "__name__", str(func)))
            return func(*args, **(kwargs or {}))

    model = make()
    guard(DDP(model))
    for name in ("generate_unmarked", "score_unmarked", "sub_forward_unmarked"):
        with Log() as log, pytest.raises(UnmarkedEntryError):
            getattr(model, name)(batch(0))
        assert not any(op in ("linear", "tanh") for op in log.ops), (name, log.ops)
    with Log() as log:
        model.score(batch(0))
    assert log.ops.count("linear") == 2  # the instrument does see module computation


def test_thread_safety() -> None:
    """A forward running in another thread neither trips nor hides an unmarked call here."""
    model = make()
    ddp = guard(DDP(model))
    inside, release = threading.Event(), threading.Event()

    class Blocker(nn.Module):
        def forward(self, x):
            if threading.current_thread() is not threading.main_thread():
                inside.set()
                assert release.wait(10)
            return x

    model.blocks.append(Blocker())  # not guarded: added after guard; blocks the other thread's forward
    reference = copy.deepcopy(model)  # a deep copy is unguarded
    worker_out: list = []
    worker = threading.Thread(target=lambda: worker_out.append(ddp(batch(1))))
    worker.start()
    assert inside.wait(10)
    try:
        with pytest.raises(UnmarkedEntryError):
            model.score_unmarked(batch(0))  # the other thread is inside forward: still an error here
        with torch.no_grad():
            assert torch.allclose(model.generate(batch(0)), reference.generate(batch(0)), atol=1e-6)
    finally:
        release.set()
        worker.join(10)
    assert len(worker_out) == 1
    assert_clean_state()


def test_forward_in_this_thread_does_not_leak_to_another() -> None:
    model = make()
    guard(DDP(model))
    errors: list[BaseException] = []

    class Probe(nn.Module):
        def forward(self, x):
            if not errors:
                t = threading.Thread(target=lambda: _expect_error(model, errors))
                t.start()
                t.join(10)
            return x

    model.blocks.append(Probe())
    model.generate(batch(0))  # while this thread is routed, the other thread's unmarked call still fails
    assert len(errors) == 1 and isinstance(errors[0], UnmarkedEntryError)


def _expect_error(model: Toy, errors: list) -> None:
    try:
        model.score_unmarked(batch(0))
    except BaseException as exc:  # recorded for the main thread
        errors.append(exc)


def test_direct_module_call_is_allowed() -> None:
    model = make()
    ddp = guard(DDP(model))
    x = batch(0)
    assert torch.allclose(ddp.module(x), Toy.forward(model, x))  # e.g. rank-0-only evaluation
    assert torch.allclose(model.head(x), nn.Linear.forward(model.head, x))
    assert model.describe().startswith("Toy(")


def test_warn_mode_warns_once_per_method_and_runs() -> None:
    model = make()
    guard(DDP(model), mode="warn")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            model.score_unmarked(batch(0))
            model.generate_unmarked(batch(0))
    messages = [str(w.message) for w in caught if w.category is UnmarkedEntryWarning]
    assert len(messages) == 2 and any("Toy.score_unmarked" in m for m in messages)
    assert_clean_state()


def test_mode_can_change_by_guarding_again() -> None:
    model = make()
    ddp = guard(DDP(model), mode="warn")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.score_unmarked(batch(0))
    guard(ddp, mode="error")
    with pytest.raises(UnmarkedEntryError):
        model.score_unmarked(batch(0))


def test_meta_device_error_names_paths() -> None:
    with torch.device("meta"):
        model = make()
    model.embed.to_empty(device="cpu")
    fake_ddp = DDP.__new__(DDP)  # DDP refuses meta modules itself; FSDP2/Fabric do not
    nn.Module.__init__(fake_ddp)
    fake_ddp.module = model
    fake_ddp.forward = lambda *a, **k: model(*a, **k)  # minimal stand-in wrapper
    from runtime_shim.record import GuardRecord

    record = GuardRecord(fake_ddp, model, "ddp", "error")
    with pytest.raises(MetaDeviceError, match=r"blocks\.0\.weight.*head\.bias") as info:
        record.check_meta()
    assert "embed" not in str(info.value) and "to_empty" in str(info.value)


def test_unguard_and_uninstall_restore_everything() -> None:
    model = make()
    before = {id(m): set(m.__dict__) for m in model.modules()}
    ddp = guard(DDP(model))
    assert "forward" in model.__dict__ and "generate" in model.__dict__
    unguard(ddp)
    assert {id(m): set(m.__dict__) for m in model.modules()} == before
    assert "forward" not in ddp.__dict__
    install("error")
    model2 = make()
    ddp2 = DDP(model2)
    assert "generate" in model2.__dict__
    uninstall()
    assert not (SHIM_KEYS & set(model2.__dict__)) and "forward" not in ddp2.__dict__
    assert not hasattr(DDP.__init__, "_fwd_shim_patch")


def test_deepcopy_and_state_dict_of_guarded_model() -> None:
    model = make()
    guard(DDP(model))
    keys = set(make().state_dict())
    assert set(model.state_dict()) == keys
    clone = copy.deepcopy(model)  # e.g. an EMA copy: runs on its own parameters, unguarded
    with torch.no_grad():
        clone.head.weight.add_(1.0)
    x = batch(0)
    assert not torch.allclose(clone(x), model(x))
    assert torch.allclose(clone.score_unmarked(x), Toy.score_unmarked(clone, x))


def test_submodule_marks_and_runtime_marks_route() -> None:
    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(8, 8)

        def forward(self, x):
            return self.lin(x)

        @forward_entry
        def encode(self, x):
            return self.lin(x) * 2

        def third_party(self, x):
            return self.lin(x) + 1

    class Outer(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc = Encoder()

        def forward(self, x):
            return self.enc(x)

    model = Outer()
    ddp = guard(DDP(model))
    calls = count_wrapper_forwards(ddp)
    x = batch(0)
    assert torch.allclose(model.enc.encode(x), model.enc.lin(x) * 2)
    assert calls[0] == 1
    expected = r"Encoder\.third_party .*\(third_party -> self\.lin\(\.\.\.\)"
    with pytest.raises(UnmarkedEntryError, match=expected):
        model.enc.third_party(x)
    mark_forward_method(ddp, model.enc.third_party)
    model.enc.third_party(x)
    assert calls[0] == 2


def test_marked_method_called_through_the_class_is_reported() -> None:
    model = make()
    guard(DDP(model))
    with pytest.raises(UnmarkedEntryError, match="is marked as a forward entry point but this call bypassed"):
        Toy.score(model, batch(0))


def test_nested_wrappers_are_absorbed() -> None:
    model = make()
    inner = guard(DDP(model))
    outer = guard(DDP(model))
    assert model.__dict__["_fwd_shim_guard"].wrapper is outer
    assert "forward" not in inner.__dict__
    calls = count_wrapper_forwards(outer)
    model.generate(batch(0))
    assert calls[0] == 1


def test_meta_device_error_under_fsdp2_names_paths_then_runs_once_materialised() -> None:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    with torch.device("meta"):
        model = make()
        model.register_buffer("running", torch.zeros(2))
    fully_shard(model, mesh=init_device_mesh("cpu", (1,)))
    guard(model)
    with pytest.raises(MetaDeviceError, match=r"parameters embed\.weight, .*head\.bias; buffers running"):
        model(batch(0))
    with pytest.raises(MetaDeviceError):
        model.generate(batch(0))
    assert_clean_state()
    model.to_empty(device="cpu")
    with torch.no_grad():
        for p in model.parameters():
            p.fill_(0.01)
    assert model(batch(0)).shape == (4, 1)
    assert model.generate(batch(0)).shape == (4, 1)


def test_fsdp1_auto_wrapped_units_under_install_are_absorbed_by_the_root() -> None:
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    from torch.distributed.fsdp.wrap import ModuleWrapPolicy

    from runtime_shim.record import records_in

    install("error")
    model = make()
    root = FSDP(model, device_id=torch.device("cpu"), auto_wrap_policy=ModuleWrapPolicy({nn.Linear}))
    units = [m for m in root.modules() if isinstance(m, FSDP)]
    assert len(units) == 5  # root + 4 Linear units, each guarded by install() when built
    records = records_in(root.module.modules())
    assert len(records) == 1 and records[0].wrapper is root
    x = batch(0)
    with torch.no_grad():
        expected = make().generate(x)
        assert torch.allclose(root.module.generate(x), expected, atol=1e-6)
    expected = r"Toy\.score_unmarked .*score_unmarked -> self\.embed\(\.\.\.\)"
    with pytest.raises(UnmarkedEntryError, match=expected):
        root.module.score_unmarked(x)
    uninstall()
    assert not any("forward" in m.__dict__ for m in root.modules())


def test_install_again_changes_mode_without_undoing_absorption() -> None:
    from torch.distributed.device_mesh import init_device_mesh

    import torch.distributed.fsdp as fsdp_pkg

    install("error")
    mesh = init_device_mesh("cpu", (1,))
    model = make()
    for block in model.blocks:
        fsdp_pkg.fully_shard(block, mesh=mesh)  # guarded, then absorbed by the root's guard
    fsdp_pkg.fully_shard(model, mesh=mesh)
    record = model.__dict__["_fwd_shim_guard"]
    assert all(b.__dict__["_fwd_shim_guard"] is record for b in model.blocks)
    install("warn")
    assert model.__dict__["_fwd_shim_guard"] is record and record.active and record.mode == "warn"
    model(batch(0))  # root-owned parameters stay unsharded until backward, so the bypass can run
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.score_unmarked(batch(0))  # warned, and allowed to run
    assert [w.category for w in caught] == [UnmarkedEntryWarning]
    assert model.generate(batch(0)).shape == (4, 1)


def test_marked_method_of_another_guarded_model_is_routed_through_its_own_wrapper() -> None:
    teacher = make(1)
    teacher_ddp = guard(DDP(teacher))
    teacher_calls = count_wrapper_forwards(teacher_ddp)

    class Student(Toy):
        @forward_entry
        def distill(self, x):
            with torch.no_grad():
                target = teacher.generate(x)  # another guarded model: its own wrapper forward
            return (self(x) - target).pow(2).mean()

    student = Student()
    student_ddp = guard(DDP(student))
    student_calls = count_wrapper_forwards(student_ddp)
    student.distill(batch(0)).backward()
    assert student_calls[0] == 1 and teacher_calls[0] == 1
    assert_clean_state()


class Chain(nn.Module):
    def __init__(self, n: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(2, 2) for _ in range(n))

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x

    @forward_entry
    def generate(self, x):
        return self(x)

    def probe(self, x):
        return self.layers[0](x)

    def describe(self):
        return len(self.layers)


def _python_calls(fn) -> int:
    """Number of Python function calls made while running ``fn`` (errors swallowed)."""
    import sys

    count = [0]

    def profile(frame, event, arg):
        if event == "call":
            count[0] += 1

    sys.setprofile(profile)
    try:
        fn()
    except UnmarkedEntryError:
        pass
    finally:
        sys.setprofile(None)
    return count[0]


def test_per_call_work_does_not_grow_with_the_number_of_modules() -> None:
    """Structural, not timed: the same Python calls for 10 and 1,000 submodules."""
    x = torch.randn(1, 2)
    small, large = Chain(10), Chain(1000)
    guard(DDP(small))
    guard(DDP(large))
    for name, args in (("probe", (x,)), ("describe", ())):  # unmarked call: detected / clean
        fn_small = lambda: getattr(small, name)(*args)  # noqa: E731
        fn_large = lambda: getattr(large, name)(*args)  # noqa: E731
        _python_calls(fn_small), _python_calls(fn_large)  # warm-up (first-call caches)
        assert _python_calls(fn_small) == _python_calls(fn_large), name
