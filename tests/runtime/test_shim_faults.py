"""The runtime shim under faults: compile, TorchScript, pickling, two wrappers, one failing rank,
and repeated errors, threads and guard cycles.

In process (a 1-rank gloo group; DDP is a real DDP) unless a test says "2 ranks" (spawned gloo
ranks through ``_shim_dist.run_ranks``, which fails on a hang instead of blocking).
"""

from __future__ import annotations

import copy
import gc
import io
import os
import pickle
import re
import threading
import weakref
from typing import Any, Callable

import pytest
import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

from _fault_workers import compiled_generate_then_rank_0_exits, one_rank_raises
from _shim_dist import run_ranks
from lint_rules.contract import GUARD_KEY
from runtime_shim import UnmarkedEntryError, forward_entry, guard, mark_forward_method, uninstall
from runtime_shim._state import STATE
from runtime_shim.api import unguard
from shim_models import Toy, batch, grads, make, reference_grads

pytestmark = [pytest.mark.usefixtures("one_rank_group"), pytest.mark.timeout(300)]

SHIM_DIR = os.path.dirname(os.path.abspath(__import__("runtime_shim").__file__))


def counted(ddp: nn.Module) -> list[int]:
    """How many times the wrapper's forward ran (a pre-hook on the wrapper)."""
    calls = [0]
    ddp.register_forward_pre_hook(lambda *_: calls.__setitem__(0, calls[0] + 1))
    return calls


def assert_clean_state() -> None:
    assert STATE.depth == 0 and STATE.redirect is None and not STATE.records


def dict_keys(model: nn.Module) -> list[set[str]]:
    return [set(m.__dict__) for m in model.modules()]


def assert_detects_and_routes(model: Toy, ddp: nn.Module) -> None:
    calls = counted(ddp)
    assert model.__dict__[GUARD_KEY].skipped == []  # every module checked: none looks patched
    x = batch(0)
    with torch.no_grad():
        assert torch.allclose(model.generate(x), make().generate(x), atol=1e-6)  # same weights as make()
    assert calls[0] == 1
    with pytest.raises(UnmarkedEntryError):
        model.generate_unmarked(x)
    assert_clean_state()


# -- 1. torch.compile of a marked method -----------------------------------------------------
def _explain(fn: Callable[..., Any], *args: Any) -> Any:
    import torch._dynamo as dynamo

    dynamo.reset()
    return dynamo.explain(fn)(*args)


def test_compiled_marked_method_is_routed_through_the_wrapper() -> None:
    """``torch.compile(model.generate)`` (default backend): once through DDP's forward per call,
    the same output and gradients as the unguarded model; the method is one graph, no break."""
    model, reference = make(), make()
    ddp = guard(DDP(model))
    calls = counted(ddp)
    x = batch(0)
    compiled = torch.compile(model.generate)
    out = compiled(x)
    out.sum().backward()
    reference.generate(x).sum().backward()
    assert calls[0] == 1
    assert torch.allclose(out, reference.generate(x), atol=1e-5)
    expected = grads(reference)
    assert all(torch.allclose(g, expected[k], atol=1e-5) for k, g in grads(model).items())
    compiled(batch(1))
    assert calls[0] == 2
    assert_clean_state()
    guarded, plain = _explain(model.generate, x), _explain(reference.generate, x)
    assert (guarded.graph_count, guarded.graph_break_count) == (plain.graph_count, plain.graph_break_count) == (1, 0)
    assert guarded.op_count == plain.op_count  # the whole method, compiled, and nothing of ours


@pytest.fixture(scope="module")
def two_ranks() -> list[dict[str, Any]]:
    """One 2-rank run for the compiled method's gradients and for a failed rank that exits
    (``_fault_workers.compiled_generate_then_rank_0_exits``); the 120 s limit fails a hang."""
    return run_ranks(compiled_generate_then_rank_0_exits, timeout=120)


def test_compiled_marked_method_on_two_ranks_all_reduces(two_ranks: list[dict[str, Any]]) -> None:
    """2 ranks: the compiled, routed method's gradients are all-reduced (equal to the average);
    backend "eager" here (Dynamo's capture), inductor in the 1-rank test above."""
    r0, r1 = (result["compiled"] for result in two_ranks)
    assert r0["calls"] == r1["calls"] == 1
    ref = reference_grads("generate", world=2)
    for result in (r0, r1):
        got = {k: torch.tensor(v) for k, v in result["grads"].items()}
        assert got.keys() == ref.keys()
        assert all(torch.allclose(got[k], ref[k].flatten(), atol=1e-5) for k in got)


def test_compiled_unmarked_method_is_still_detected() -> None:
    model = make()
    guard(DDP(model))
    for name in ("score_unmarked", "generate_unmarked", "sub_forward_unmarked"):
        with pytest.raises(UnmarkedEntryError, match=f"Toy.{name} "):
            torch.compile(getattr(model, name), backend="eager")(batch(0))
        assert_clean_state()
    assert torch.compile(model.describe, backend="eager")().startswith("Toy(")


# -- 5. torch.compile of a guarded DDP model ---------------------------------------------------
def test_compiling_a_guarded_ddp_adds_no_graph_break() -> None:
    """``torch._dynamo.explain``: the same graphs and breaks as the unguarded DDP (the shim's
    wrapper forward used to add one), none of them in the shim's code."""
    uninstall()  # the unguarded side: no routing on import either (the fixture restores it)
    x = batch(0)
    plain = _explain(DDP(make()), x)
    ddp = guard(DDP(make()))
    guarded = _explain(ddp, x)
    assert (guarded.graph_count, guarded.graph_break_count) == (plain.graph_count, plain.graph_break_count)
    shim_frames = [frame for reason in guarded.break_reasons for frame in reason.user_stack
                   if os.path.abspath(frame.filename).startswith(SHIM_DIR)]
    assert shim_frames == []
    compiled = torch.compile(ddp, backend="eager")
    assert torch.allclose(compiled(x), make()(x), atol=1e-6)
    assert_clean_state()


# -- 2. TorchScript ----------------------------------------------------------------------------
def test_jit_script_of_a_guarded_model_compiles_its_own_code() -> None:
    """``torch.jit.script`` compiles a clean view (same parameters); the model stays guarded."""
    model = make()
    ddp = guard(DDP(model))
    before = [dict(m.__dict__) for m in model.modules()]
    scripted = torch.jit.script(model)
    x = batch(0)
    assert torch.allclose(scripted(x), Toy.forward(model, x))
    assert scripted.head.weight is model.head.weight  # shares parameters, as scripting a plain model does
    after = [dict(m.__dict__) for m in model.modules()]
    assert [d.keys() for d in after] == [d.keys() for d in before]
    assert all(a[k] is b[k] for a, b in zip(after, before) for k in a)
    assert torch.allclose(torch.jit.script(model.head)(x), model.head(x))
    assert_detects_and_routes(model, ddp)


# -- 3. pickle / torch.save / deepcopy ---------------------------------------------------------
def _pickled(obj: Any) -> Any:
    return pickle.loads(pickle.dumps(obj))


def _saved(obj: Any) -> Any:
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    buffer.seek(0)
    return torch.load(buffer, weights_only=False)


@pytest.mark.parametrize("how", [_pickled, _saved, copy.deepcopy], ids=["pickle", "torch.save", "deepcopy"])
def test_copied_guarded_model_comes_back_unguarded_and_guards_again(how: Callable[[Any], Any]) -> None:
    model = make()
    ddp = guard(DDP(model))
    mark_forward_method(ddp, "score_unmarked")  # a mark is the user's, not the guard's: it travels
    clean = dict_keys(make())
    clean[0].add("_fwd_shim_marks")
    copied = how(model)
    assert dict_keys(copied) == clean
    assert isinstance(copied, Toy) and copied.score_unmarked(batch(0)).shape == (4, 1)  # unguarded
    assert_detects_and_routes(copied, guard(DDP(copied)))
    assert_detects_and_routes(model, ddp)  # the original keeps its guard


def test_pickled_guarded_wrapper_comes_back_unguarded() -> None:
    model = make()
    ddp = guard(DDP(model))
    copied = _pickled(ddp)
    assert "forward" not in copied.__dict__ and GUARD_KEY not in copied.__dict__
    assert dict_keys(copied.module) == dict_keys(make())
    assert_detects_and_routes(copied.module, guard(copied))


def test_pickled_guarded_fabric_module_comes_back_unguarded() -> None:
    from lightning.fabric import Fabric
    from lightning.fabric.wrappers import _FabricModule

    fabric_model = guard(Fabric(accelerator="cpu", devices=1).setup(make()))
    assert type(fabric_model) is _FabricModule and GUARD_KEY in fabric_model.__dict__  # the class is patched
    for how in (_pickled, copy.deepcopy):
        copied = how(fabric_model)
        assert type(copied) is _FabricModule and GUARD_KEY not in copied.__dict__
        assert dict_keys(copied._original_module) == dict_keys(make())
        assert copied.generate(batch(0)).shape == (4, 1)


# -- 4. two wrappers of one model --------------------------------------------------------------
def test_unguarding_a_superseded_wrapper_keeps_the_current_guard() -> None:
    """The latest guard owns the model; unguard only undoes a wrapper's own guard."""
    model = make()
    clean = dict_keys(model)
    first = guard(DDP(model))
    second = guard(DDP(model))
    unguard(first)
    assert model.__dict__[GUARD_KEY].wrapper is second
    assert_detects_and_routes(model, second)
    unguard(second)
    assert dict_keys(model) == clean and "forward" not in second.__dict__
    guard(first)  # guarding the first again takes the model back
    assert_detects_and_routes(model, first)
    unguard(model)  # the model itself: whatever guard it has
    assert dict_keys(model) == clean and "forward" not in first.__dict__


# -- 6. one rank fails inside a marked method (2 ranks) ---------------------------------------
def test_one_rank_failing_in_a_marked_method_that_stays_alive() -> None:
    """Rank 0 catches its error and lives on: rank 1 waits in backward's all-reduce until the
    process group's timeout (2 s here), no longer; rank 0's error says so and what bounds it."""
    r0, r1 = run_ranks(one_rank_raises, 4.0, 2.0, timeout=90)
    assert r0["error"] == "ValueError" and r0["message"] == "rank 0: bad batch"
    (note,) = r0["notes"]
    assert "Sampler.sample raised on rank 0 of 2 inside DistributedDataParallel's forward" in note
    assert "process-group timeout (0:00:02)" in note and "init_process_group(" in note
    assert r1["error"] == "RuntimeError" and "Timed out" in r1["message"]
    assert r0["state_clean"] and r1["state_clean"]


def test_one_rank_failing_in_a_marked_method_that_exits(two_ranks: list[dict[str, Any]]) -> None:
    """Rank 0's process ends after its error: rank 1 is released by the closed connection, not by
    its 60 s process-group timeout (whose error would say "Timed out"). Gloo says "closed" or
    "reset" by peer, as the socket was shut down before or after rank 1's bytes reached it."""
    r0, r1 = (result["failure"] for result in two_ranks)
    assert r0["error"] == "ValueError" and "timeout (0:01:00)" in r0["notes"][0]
    assert r1["error"] == "RuntimeError" and re.search("Connection (closed|reset) by peer", r1["message"]), r1
    assert "Timed out" not in r1["message"] and r1["seconds"] < 60
    assert r1["state_clean"]


# -- what already held: repeated faults, threads, guard cycles ---------------------------------
class Faulty(Toy):
    """A model whose entry points fail in every way the shim must survive."""

    def __init__(self) -> None:
        super().__init__()
        self.fail: str = ""
        self.head.register_forward_pre_hook(self._head_hook)

    def _head_hook(self, module: nn.Module, args: Any) -> None:
        if self.fail == "submodule":
            raise ValueError("submodule failed")

    @forward_entry
    def after_compute(self, x: torch.Tensor) -> torch.Tensor:
        self(x)
        raise KeyError("after computing")

    @forward_entry
    def before_compute(self, x: torch.Tensor) -> torch.Tensor:
        raise KeyError("before computing")

    @forward_entry
    def interrupted(self, x: torch.Tensor) -> torch.Tensor:
        raise KeyboardInterrupt

    @forward_entry
    def lazy(self, x: torch.Tensor) -> Any:
        return (self(x) for _ in range(2))

    @forward_entry
    def outer(self, x: torch.Tensor) -> torch.Tensor:
        return self.before_compute(x)  # a nested routed call that fails


def _nine_faults(model: Faulty, ddp: nn.Module) -> list[tuple[str, Callable[[], Any], type[BaseException]]]:
    x = batch(0)

    def wrapper_fails() -> None:
        model.fail = "wrapper"
        try:
            model.generate(x)
        finally:
            model.fail = ""

    def submodule_fails(call: Callable[[], Any]) -> Callable[[], Any]:
        def run() -> None:
            model.fail = "submodule"
            try:
                call()
            finally:
                model.fail = ""

        return run

    return [
        ("raises after computing", lambda: model.after_compute(x), KeyError),
        ("raises before computing", lambda: model.before_compute(x), KeyError),
        ("BaseException inside", lambda: model.interrupted(x), KeyboardInterrupt),
        ("wrapper forward raises", wrapper_fails, ValueError),
        ("submodule raises when routed", submodule_fails(lambda: model.generate(x)), ValueError),
        ("submodule raises on a direct call", submodule_fails(lambda: model(x)), ValueError),
        ("unmarked entry", lambda: model.score_unmarked(x), UnmarkedEntryError),
        ("returns a generator", lambda: model.lazy(x), TypeError),
        ("nested routed call raises", lambda: model.outer(x), KeyError),
    ]


def test_thousand_rounds_of_nine_faults_leak_nothing() -> None:
    model = Faulty()
    ddp = guard(DDP(model))
    ddp.register_forward_pre_hook(
        lambda *_: (_ for _ in ()).throw(ValueError("wrapper failed")) if model.fail == "wrapper" else None)
    faults = _nine_faults(model, ddp)
    record = model.__dict__[GUARD_KEY]
    keys, installed = dict_keys(model), len(record.installed)
    hooks = [(len(m._forward_hooks), len(m._forward_pre_hooks)) for m in (ddp, *model.modules())]

    def one_round() -> None:
        for name, call, expected in faults:
            with pytest.raises(expected):
                call()
            assert STATE.depth == 0 and STATE.redirect is None and not STATE.records, name

    for _ in range(50):  # warm-up: first-call caches
        one_round()
    gc.collect()
    objects = len(gc.get_objects())
    for _ in range(1000):
        one_round()
    gc.collect()
    assert len(gc.get_objects()) - objects < 200  # a leak of one object per fault would be 9,000
    assert dict_keys(model) == keys and len(record.installed) == installed and record.active
    assert [(len(m._forward_hooks), len(m._forward_pre_hooks)) for m in (ddp, *model.modules())] == hooks
    with torch.no_grad():
        assert torch.allclose(model.generate(batch(0)), copy.deepcopy(model).generate(batch(0)), atol=1e-6)


def test_eight_threads_give_no_wrong_verdict() -> None:
    """Eight threads mixing routed, detected, direct and clean calls on one guarded model."""
    model = make()
    ddp = guard(DDP(model))
    x = batch(0)
    with torch.no_grad():
        expected = make().generate(x)
    start = threading.Barrier(8)
    wrong: list[str] = []

    def work(index: int) -> None:
        start.wait(10)
        for i in range(60):
            kind = (index + i) % 4
            try:
                with torch.no_grad():
                    if kind == 0 and not torch.allclose(model.generate(x), expected, atol=1e-6):
                        wrong.append("routed: wrong value")
                    elif kind == 1:
                        model.score_unmarked(x)
                        wrong.append("unmarked: not detected")
                    elif kind == 2:
                        ddp.module(x)  # direct call: allowed
                    elif kind == 3:
                        ddp(x)
                        model.describe()
            except UnmarkedEntryError:
                if kind != 1:
                    wrong.append(f"kind {kind}: false error")
            if STATE.depth or STATE.redirect is not None:
                wrong.append("state left behind")

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not any(t.is_alive() for t in threads)
    assert wrong == []


def test_guard_unguard_cycles_leave_nothing() -> None:
    model = make()
    clean = dict_keys(model)
    records: list[weakref.ref] = []
    for cycle in range(60):
        ddp = guard(DDP(model), mode="warn" if cycle % 3 == 0 else "error")
        if cycle % 2:
            guard(ddp, mode="error")  # guarding again only changes the mode
        records.append(weakref.ref(model.__dict__[GUARD_KEY]))
        if cycle % 3:
            assert_detects_and_routes(model, ddp)
        unguard(ddp)
        assert dict_keys(model) == clean, cycle
        assert set(ddp.__dict__) & {"forward", GUARD_KEY, "__getstate__"} == set(), cycle
    del ddp
    gc.collect()
    assert [r for r in records if r() is not None] == []  # nothing keeps an old guard alive
