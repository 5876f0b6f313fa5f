"""Agreement on real execution for the hazard rules' fixtures: what FWD101 and FWD301 report is
exactly what running the fixture code does.

* FWD101 (``fixtures/fwd101``): every module class of the fixtures is built (and its own
  materialising or copying method run); the attributes that end up as registered submodules with
  meta tensors are exactly the reported ``Class.attr`` symbols, ``model.to("cpu")`` fails with
  "Cannot copy out of meta tensor" exactly for the classes with a finding, and
  ``runtime_shim.check_no_meta`` names exactly those submodules.
* FWD201 (``fixtures/fwd201``): the fixtures' functions run with a real Fabric and Trainer (the
  compile backend set to eager) under a line tracer that counts the graphs Dynamo compiles while a
  line runs with a TorchFunctionMode active (``_EmptyInit``, ``torch.device("meta")``); those lines
  are exactly the reported ones (a LightningModule's ``configure_model`` is run the way the Trainer
  runs it, inside ``strategy.tensor_init_context()``).
* FWD301 (``fixtures/fwd301``): the fixture's functions run on real modules under a line tracer
  that notes, after every line, whether an instance got a ``forward`` of its own or a class was
  renamed (then undoes it, so every line is judged on its own); those lines are exactly the
  reported ones, and the lines that patch a class are not reported.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from types import FrameType, ModuleType
from typing import Any, Callable, Optional

import pytest
import torch
from torch import nn

from runtime_shim import MetaDeviceError, check_no_meta

pytestmark = pytest.mark.timeout(240)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.path.join(ROOT, "fixtures")


def _lint(cwd: str, *paths: str) -> list[dict[str, Any]]:
    proc = subprocess.run([sys.executable, "-m", "lint_rules.cli", "--format", "json", "--no-cache", *paths],
                          cwd=cwd, capture_output=True, text=True, timeout=120)
    report = json.loads(proc.stdout)
    assert report["errors"] == [], report["errors"]
    return report["diagnostics"]


def _import_from(directory: str, name: str) -> ModuleType:
    """Module ``name`` of the fixture project at ``directory``, imported as its code imports it."""
    sys.path.insert(0, directory)
    try:
        return importlib.import_module(name)
    finally:
        sys.path.pop(0)


def _load(path: str, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


# -- FWD101 --------------------------------------------------------------------------------

def _meta_children(model: nn.Module) -> set[str]:
    return {name for name, child in model.named_children()
            if any(t.is_meta for t in (*child.parameters(), *child.buffers()))}


def _fwd101_runtime() -> dict[str, set[str]]:
    """Class -> its attributes that are registered submodules holding meta tensors."""
    fixture = _load(os.path.join(FIXTURES, "fwd101", "meta_submodules.py"), "fwd101_meta_submodules")
    net = _import_from(os.path.join(FIXTURES, "fwd101", "package_template"), "models.net")
    runs: dict[str, Callable[[], nn.Module]] = {
        "Model": fixture.Model,
        "SelfCopy": lambda: _then(fixture.SelfCopy(), lambda m: m.keep_shape_copy()),
        "Deferred": lambda: _then(fixture.Deferred(), lambda m: m.load(fixture.Block().state_dict())),
        "WholeDeferred": lambda: _then(fixture.WholeDeferred(), lambda m: m.materialise("cpu")),
        "Block": fixture.Block,
        "Net": net.Net,
    }
    found = {}
    for name, build in runs.items():
        model = build()
        found[name] = _meta_children(model)
        if found[name]:
            with pytest.raises(NotImplementedError, match="Cannot copy out of meta tensor"):
                model.to("cpu")
            with pytest.raises(MetaDeviceError) as raised:
                check_no_meta(model)
            for attr in found[name]:
                assert attr in str(raised.value), (attr, str(raised.value))
        else:
            model.to("cpu")
            check_no_meta(model)
    fixture.build()  # the deliberate deferred init at top level works
    return found


def _then(model: nn.Module, step: Callable[[nn.Module], Any]) -> nn.Module:
    step(model)
    return model


def test_fwd101_reports_exactly_the_meta_submodules() -> None:
    runtime = _fwd101_runtime()
    reported = _lint(os.path.join(FIXTURES, "fwd101"), "meta_submodules.py")
    reported += _lint(os.path.join(FIXTURES, "fwd101", "package_template"), ".")
    static: dict[str, set[str]] = {name: set() for name in runtime}
    for d in reported:
        assert d["code"] == "FWD101"
        cls, _, attr = d["symbol"].partition(".")
        static.setdefault(cls, set()).add(attr)
    assert static == runtime


def test_fwd101_forms_real_code_writes_report_exactly_the_meta_submodules() -> None:
    """``fixtures/fwd101/registered_forms.py``: locals, device variables, add_module and the other
    registrations, accelerate's contexts (accelerate installed), set_default_device, a network a
    subclass's method builds, a class taken out of a mapping."""
    fixture = _load(os.path.join(FIXTURES, "fwd101", "registered_forms.py"), "fwd101_registered_forms")
    runtime = {}
    for name, build in {"Model": lambda: fixture.Model(fixture.Block()), "DefaultDevice": fixture.DefaultDevice,
                        "Silent": fixture.Silent, "Builder": fixture.MLPBuilder,  # Builder is abstract
                        "Chosen": fixture.Chosen}.items():
        model = build()
        runtime[name] = _meta_children(model)
        if runtime[name]:
            with pytest.raises(NotImplementedError, match="Cannot copy out of meta tensor"):
                model.to("cpu")
        else:
            model.to("cpu")
    fixture.deferred()  # a whole model built empty, then materialised: fine
    static: dict[str, set[str]] = {name: set() for name in runtime}
    for d in _lint(os.path.join(FIXTURES, "fwd101"), "registered_forms.py"):
        cls, _, attr = d["symbol"].partition(".")
        static.setdefault(cls, set()).add(attr)
    assert static == runtime
    assert len(runtime["Model"]) == 14 and runtime["Silent"] == set()


def test_fwd101_meta_copies_of_constructor_arguments() -> None:
    """``fixtures/fwd101/constructor_arguments``: ``copy.deepcopy(arg).to("meta")`` is a meta submodule
    exactly when a module is passed. Reported where the project shows one is (a module class builds
    the class with its submodule, or the class keeps it as one); conditional where nothing does,
    and then it is one for a module and not for a tensor."""
    directory = os.path.join(FIXTURES, "fwd101", "constructor_arguments")
    distill, trainer = _import_from(directory, "distill"), _import_from(directory, "trainer")
    built = trainer.Trainer()
    runtime = {"Student": _meta_children(built.student), "Distiller": _meta_children(distill.Distiller(trainer.Teacher())),
               "Averaged": _meta_children(distill.Averaged(trainer.Teacher())),
               "Masked": _meta_children(distill.Masked(torch.ones(3)))}
    with pytest.raises(NotImplementedError, match="Cannot copy out of meta tensor"):
        built.to("cpu")
    assert _meta_children(distill.Averaged(torch.ones(3))) == set()  # a tensor copied: no submodule
    reported = {d["symbol"]: d["message"] for d in _lint(directory, ".")}
    static: dict[str, set[str]] = {name: set() for name in runtime}
    for symbol in reported:
        cls, _, attr = symbol.partition(".")
        static.setdefault(cls, set()).add(attr)
    assert static == runtime == {"Student": {"shadow"}, "Distiller": {"frozen"}, "Averaged": {"template"}, "Masked": set()}
    assert "if `model` is a module" in reported["Averaged.template"]
    assert "if `" not in reported["Student.shadow"] + reported["Distiller.frozen"]


# -- FWD301 --------------------------------------------------------------------------------

class _PatchTracer:
    """After each line of the traced functions, what it did to the watched objects: an instance
    ``forward`` ("instance"), a renamed class ("rename") or a patched class ``forward`` ("class");
    each effect is undone at once so the next line is judged on its own."""

    def __init__(self, instances: list[nn.Module], classes: list[type], filename: str,
                 functions: Optional[set[str]] = None) -> None:
        self.functions = functions  # only these functions' lines (a helper's effect counts at its call)
        self.instances = instances
        self.classes = {cls: (cls.__name__, cls.__qualname__, cls.__dict__.get("forward")) for cls in classes}
        self.filename = filename
        self.effects: dict[int, set[str]] = {}
        self.previous: Optional[int] = None

    def _settle(self) -> None:
        if self.previous is None:
            return
        effects = self.effects.setdefault(self.previous, set())
        for module in self.instances:
            if "forward" in vars(module):
                effects.add("instance")
                del vars(module)["forward"]
        for cls, (name, qualname, forward) in self.classes.items():
            if (cls.__name__, cls.__qualname__) != (name, qualname):
                effects.add("rename")
                cls.__name__, cls.__qualname__ = name, qualname
            if cls.__dict__.get("forward") is not forward:
                effects.add("class")
                type.__setattr__(cls, "forward", forward)
        if not effects:
            del self.effects[self.previous]

    def trace(self, frame: FrameType, event: str, arg: Any) -> Any:
        if frame.f_code.co_filename != self.filename or (
                self.functions is not None and frame.f_code.co_name not in self.functions):
            return None
        if event in ("line", "return"):
            self._settle()
            self.previous = frame.f_lineno if event == "line" else None
        return self.trace


def test_fwd301_receivers_and_helpers() -> None:
    path = os.path.join(FIXTURES, "fwd301", "receivers.py")
    fixture = _load(path, "fwd301_receivers")
    model = nn.Linear(2, 2)
    hooked = fixture.Hooked()
    registry = fixture.Registry(model)
    registry.add()
    registry.add()
    tracer = _PatchTracer([model, hooked, registry._blocks[0]], [fixture.Hooked, nn.Linear], path,
                          {"apply", "install", "use_fast", "__init_subclass__", "__init__", "remove"})
    sys.settrace(tracer.trace)
    try:
        type("Sub", (fixture.Hooked,), {})  # runs __init_subclass__
        fixture.Hooked.install()
        hooked.use_fast()
        fixture.apply(model, nn.Linear, nn.Linear, nn.Linear)
        registry.remove(0)  # a plain reference's forward, then a module's
        fixture.PatchingMeta("Made", (), {})  # patches the class it makes
    finally:
        sys.settrace(None)
    runtime = {line for line, effects in tracer.effects.items() if effects & {"instance", "rename"}}
    class_lines = {line for line, effects in tracer.effects.items() if "class" in effects}
    reported = {d["line"] for d in _lint(os.path.join(FIXTURES, "fwd301"), "receivers.py")}
    # Sub, patched by __init_subclass__, is made by the test and not watched: 5 class lines, not 6
    assert len(runtime) == 5 and len(class_lines) == 5, (runtime, class_lines)
    assert reported == runtime


def test_fwd301_reports_exactly_the_instance_patches_and_renames() -> None:
    path = os.path.join(FIXTURES, "fwd301", "instance_patches.py")
    fixture = _load(path, "fwd301_instance_patches")
    model = fixture.Model()
    fused = fixture.Model.__new__(fixture.Model)
    nn.Module.__init__(fused)
    norm = model.norm
    hooked, relayed, copied = nn.Linear(2, 2), nn.Linear(2, 2), fixture.Model()
    tracer = _PatchTracer([model, norm, fused, hooked, relayed, copied], [nn.LayerNorm, fixture.Model], path)
    sys.settrace(tracer.trace)
    try:
        fixture.Model.__init__(fused, fused=True)
        fixture.apply_kernels(model)
        fixture.rename(norm)
        fixture.class_patches(norm)
        fixture.add_hook(hooked)  # accelerate's hooks: saved in an attribute, then put back
        fixture.remove_hook(hooked)
        fixture.add_hook_through_a_local(relayed)
        fixture.remove_hook_through_a_local(relayed)
        fixture.copy_attribute(copied)
    finally:
        sys.settrace(None)
    runtime = {line for line, effects in tracer.effects.items() if effects & {"instance", "rename"}}
    class_lines = {line for line, effects in tracer.effects.items() if "class" in effects}
    reported = {d["line"] for d in _lint(os.path.join(FIXTURES, "fwd301"), "instance_patches.py")}
    assert len(runtime) >= 12 and len(class_lines) >= 3
    assert reported == runtime
    assert not reported & class_lines
    assert isinstance(norm, nn.LayerNorm) and nn.LayerNorm.__name__ == "LayerNorm"
    assert "forward" not in nn.LayerNorm.__dict__ or nn.LayerNorm.forward is not fixture.fast_norm


def test_fwd301_at_the_call_that_hands_a_model_to_a_library() -> None:
    """``fixtures/fwd301/handed_to_a_library``: the script's lines after which the model it handed
    over has an instance forward are exactly the reported calls (the library's own line is
    reported in the library)."""
    project = os.path.join(FIXTURES, "fwd301", "handed_to_a_library")
    train = _import_from(project, "train")
    identity_forward = nn.Identity.forward
    model = nn.Linear(2, 2)
    tracer = _PatchTracer([model], [], train.__file__, {"setup", "classes_only"})
    sys.settrace(tracer.trace)
    try:
        train.setup(model)
        train.classes_only(model)
    finally:
        sys.settrace(None)
        nn.Identity.forward = identity_forward  # the library patches a class too
    runtime = {line for line, effects in tracer.effects.items() if "instance" in effects}
    reported = {d["line"] for d in _lint(project, "train.py")}
    assert len(runtime) == 2 and reported == runtime


# -- FWD201 --------------------------------------------------------------------------------

class _CompileTracer:
    """Per line of the traced functions: does it run compiled code under one of the init contexts
    FWD201 names (Lightning's ``_EmptyInit``, torch's meta ``DeviceContext``)? Dynamo's caches are
    emptied before every line, so each compiled call on that line traces afresh (as the first
    call in a program does) and shows as a new graph, or as Dynamo's own error."""

    def __init__(self, functions: set[str], filename: str) -> None:
        from torch._dynamo.utils import counters

        self.counters = counters
        self.functions = functions
        self.filename = filename
        self.compiled_in_mode: set[int] = set()
        self.previous: Optional[tuple[int, bool]] = None  # line, an init context was active

    @staticmethod
    def _in_init_context() -> bool:
        from lightning.fabric.utilities.init import _EmptyInit
        from torch.overrides import _get_current_function_mode_stack
        from torch.utils._device import DeviceContext

        return any(isinstance(mode, _EmptyInit) or (isinstance(mode, DeviceContext) and mode.device.type == "meta")
                   for mode in _get_current_function_mode_stack())

    def _settle(self) -> None:
        if self.previous is not None:
            line, in_mode = self.previous
            if in_mode and self.counters["stats"]["unique_graphs"]:
                self.compiled_in_mode.add(line)

    def trace(self, frame: FrameType, event: str, arg: Any) -> Any:
        if frame.f_code.co_filename != self.filename or frame.f_code.co_name not in self.functions:
            return None
        if event in ("line", "return", "exception"):
            self._settle()
            self.previous = None
            if event == "line":
                torch._dynamo.reset()
                self.counters.clear()
                self.previous = (frame.f_lineno, self._in_init_context())
        return self.trace


def _eager_compile(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fixtures call torch.compile with the default backend; eager makes the same Dynamo
    traces without a C++ build per graph."""
    compile_ = torch.compile

    def eager(*args: Any, **kwargs: Any) -> Any:
        kwargs["backend"] = "eager"
        return compile_(*args, **kwargs)

    monkeypatch.setattr(torch, "compile", eager)
    torch._dynamo.reset()


def _run_traced(tracer: _CompileTracer, step: Callable[[], Any]) -> None:
    sys.settrace(tracer.trace)
    try:
        step()
    finally:
        sys.settrace(None)


def test_fwd201_reports_exactly_the_compiled_calls_inside_init_contexts(tmp_path, monkeypatch) -> None:
    from lightning.fabric import Fabric
    from lightning.pytorch import Trainer

    _eager_compile(monkeypatch)
    path = os.path.join(FIXTURES, "fwd201", "compiled_calls.py")
    fixture = _load(path, "fwd201_compiled_calls")
    checkpoint = tmp_path / "last.ckpt"
    torch.save({"state_dict": fixture.LitModel().state_dict(), "pytorch-lightning_version": "2.6.6"}, checkpoint)
    fabric = Fabric(accelerator="cpu", devices=1)
    trainer = Trainer(accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                      enable_progress_bar=False, enable_model_summary=False)
    torch._dynamo.reset()
    tracer = _CompileTracer({"main", "build", "configure_model", "factories", "passed_in"}, path)
    lit = fixture.LitModel()  # compiles and runs its block outside any context: not a finding
    _run_traced(tracer, lambda: fixture.main(fabric, trainer, str(checkpoint)))
    _run_traced(tracer, lambda: fixture.Warm().build())
    _run_traced(tracer, lambda: fixture.factories(fabric))  # built through the project's factories
    _run_traced(tracer, lambda: fixture.passed_in(fabric))  # compiled modules handed to constructors

    def configure() -> None:  # what the Trainer does with configure_model (lightning.pytorch.trainer.call)
        with trainer.strategy.tensor_init_context():
            lit.configure_model()

    _run_traced(tracer, configure)
    reported = {d["line"] for d in _lint(os.path.join(FIXTURES, "fwd201"), "compiled_calls.py")}
    runtime = tracer.compiled_in_mode
    configure_line = {line for line in reported if "def configure_model" in _line(path, line)}
    runtime_configure = {line for line in runtime if "def configure_model" in _line(path, line - 1)
                         or "self._warm_up()" in _line(path, line)}
    assert configure_line and runtime_configure  # the Trainer's hook compiled under the mode
    assert reported - configure_line == runtime - runtime_configure


def _line(path: str, number: int) -> str:
    with open(path, encoding="utf-8") as handle:
        return handle.read().splitlines()[number - 1]


def test_fwd201_across_files(monkeypatch) -> None:
    from lightning.fabric import Fabric

    _eager_compile(monkeypatch)
    project = os.path.join(FIXTURES, "fwd201", "compiled_across_files")
    train = _import_from(project, "app.train")
    torch._dynamo.reset()
    tracer = _CompileTracer({"run"}, train.__file__)
    _run_traced(tracer, lambda: train.run(Fabric(accelerator="cpu", devices=1)))
    reported = {d["line"] for d in _lint(project, ".") if d["path"].endswith("train.py")}
    assert reported == tracer.compiled_in_mode
