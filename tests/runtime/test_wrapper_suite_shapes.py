"""What Lightning's own ``tests_fabric/test_wrappers.py`` observes of ``_FabricModule`` must not change
when the shim is loaded (``benchmarks/wrapper_suites.py`` runs the real suites; this pins, in CI,
the shapes its failures showed).

Each mode runs one observation program in a fresh interpreter: the baseline without the shim
(``FWD_SHIM_MODE=off``), ``import runtime_shim`` first (default routing) and ``import
runtime_shim.auto`` first with ``FWD_SHIM_MODE=warn``. The program builds ``_FabricModule`` as
Fabric's tests build it -- with ``Mock()`` forward modules and strategies, with a plain wrapper
module around an original one, with a fake DDP around a module with step methods -- and records
what those tests assert (identities, types, method names, results, raised errors). Every record
must equal the baseline's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from _shim_dist import ROOT

pytestmark = pytest.mark.timeout(180)

OBSERVE = r'''
import json, sys
from unittest.mock import Mock
import torch
from lightning.fabric.plugins import Precision
from lightning.fabric.wrappers import _FabricModule

seen = {}

def check(name, fn):
    """Record fn()'s value, or the error it raised (so one difference does not hide the others)."""
    try:
        seen[name] = fn()
    except BaseException as exc:
        seen[name] = f"raised {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"

def raises(fn, kind, text):
    try:
        fn()
    except kind as exc:
        return text in str(exc)
    return "no error"

# test_fabric_module_wraps: Mock forward module and strategy
module = Mock()
check("mock.module_is_forward_module", lambda: _FabricModule(module, Mock()).module is module)
original = Mock()
check("mock.module_is_original", lambda: _FabricModule(Mock(), Mock(), original_module=original).module is original)

# test_fabric.py::test_setup_module: DDP mocked, so the forward module is a Mock around a real model
def mocked_ddp():
    model = torch.nn.Linear(1, 2)
    fm = _FabricModule(Mock(), Mock(), original_module=model)
    return [fm.module is model, fm.weight is model.weight, fm.forward != model.forward]
check("mock.ddp_mocked_setup", mocked_ddp)

# test_fabric_module_setattr (end): monkeypatching a Mock-built wrapper
def mock_patch():
    fm = _FabricModule(Mock(), Mock())
    before = id(fm.forward)
    fm.forward = lambda *_: None
    return [id(fm.forward) != before, "__repr__" in dir(fm), "__repr__" in fm.__dict__,
            "__repr__" in _FabricModule.__dict__, repr(fm)]
check("mock.patch_forward_and_repr", mock_patch)

# test_fabric_module_attribute_lookup / test_fabric_module_setattr: a plain wrapper module
class OriginalModule(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(2, 3)
        self.attribute = 1
        self._x = None
    @property
    def x(self):
        return self._x
    @x.setter
    def x(self, value):
        self._x = value
    def method(self):
        return 2

class ModuleWrapper(torch.nn.Module):
    def __init__(self, wrapped):
        super().__init__()
        self.wrapped = wrapped

def lookup():
    orig = OriginalModule()
    fm = _FabricModule(ModuleWrapper(orig), Mock(), original_module=orig)
    return {"attribute": fm.attribute, "layer_is_original": fm.layer is orig.layer,
            "type_is_FabricModule": type(fm) is _FabricModule,
            "forward_self_class_is_FabricModule": fm.forward.__self__.__class__ == _FabricModule,
            "not_exists": raises(lambda: fm.not_exists, AttributeError, "not_exists")}
check("plain.lookup", lookup)

def setattr_():
    orig = OriginalModule()
    fm = _FabricModule(ModuleWrapper(orig), Mock(), original_module=orig)
    fm.new_attribute = 100
    fm.attribute = 101
    fm.x = 102
    linear = torch.nn.Linear(2, 2)
    fm.linear = linear
    return [orig.new_attribute, "attribute" in fm.__dict__, fm.attribute, orig.attribute, orig.x,
            linear in fm.modules(), linear in orig.modules()]
check("plain.setattr", setattr_)

# test_step_method_redirection: a fake DDP around a module with Lightning step methods
class DDP(torch.nn.Module):
    def __init__(self, module):
        super().__init__()
        self.module = module
    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

class LightningModule(torch.nn.Module):
    def forward(self):
        return "forward_return"
    def training_step(self, arg, kwarg=None):
        assert self() == "forward_return"
        return ("training_step_return", arg, kwarg)
    def marked_method(self, arg, kwarg=None):
        assert self() == "forward_return"
        return ("marked_method_return", arg, kwarg)
    def normal_method(self):
        pass

strategy = Mock()
strategy.precision = Mock(wraps=Precision())
lm = LightningModule()
fm = _FabricModule(forward_module=DDP(lm), strategy=strategy, original_module=lm)
check("step.normal_method_wrapped", lambda: fm.normal_method.__wrapped__ == lm.normal_method)
for name in ("training_step", "validation_step", "test_step", "predict_step"):
    check(f"step.{name}.__name__", lambda name=name: getattr(fm, name).__name__)
check("step.predict_step_missing", lambda: raises(lambda: fm.predict_step(), AttributeError,
                                                 "has no attribute 'predict_step'"))
check("step.original_forward_name", lambda: lm.forward.__name__)

def training_calls():
    strategy.precision.forward_context.reset_mock()
    out = [fm.training_step("train_arg", kwarg="train_kwarg") for _ in range(2)]
    return [list(out[0]), list(out[1]), strategy.precision.forward_context.call_count]
check("step.training_step_calls", training_calls)

def marked_calls():
    strategy.precision.forward_context.reset_mock()
    unmarked = raises(lambda: fm.marked_method("marked_arg", kwarg="marked_kwarg"), RuntimeError,
                      "from outside the model")
    fm.mark_forward_method("marked_method")
    out = fm.marked_method("marked_arg", kwarg="marked_kwarg")
    return [unmarked, list(out), strategy.precision.forward_context.call_count, lm.forward.__name__]
check("step.marked_method_calls", marked_calls)

def same_module():
    fm2 = _FabricModule(forward_module=lm, strategy=Mock(), original_module=lm)
    return [fm2.training_step == lm.training_step, fm2.marked_method == lm.marked_method]
check("step.forward_module_is_original", same_module)

print(json.dumps(seen, sort_keys=True))
'''

MODES = {  # mode -> (first line, FWD_SHIM_MODE)
    "baseline": ("", "off"),
    "default": ("import runtime_shim", None),
    "auto-warn": ("import runtime_shim.auto", "warn"),
}


def _observe(mode: str) -> dict:
    first, shim_mode = MODES[mode]
    env = {k: v for k, v in os.environ.items() if k != "FWD_SHIM_MODE"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)
    if shim_mode:
        env["FWD_SHIM_MODE"] = shim_mode
    proc = subprocess.run([sys.executable, "-c", first + "\n" + OBSERVE], check=False, capture_output=True, text=True,
                          timeout=150, env=env, cwd=ROOT)
    assert proc.returncode == 0, f"{mode}: the observation program failed:\n{proc.stderr[-3000:]}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def baseline() -> dict:
    seen = _observe("baseline")
    # What Lightning's tests assert of the unpatched wrapper (so a vacuous baseline cannot pass)
    assert seen["mock.module_is_forward_module"] is True and seen["mock.module_is_original"] is True
    assert seen["plain.lookup"]["forward_self_class_is_FabricModule"] is True
    assert seen["step.training_step.__name__"] == "call_forward_module"
    assert seen["step.marked_method_calls"][0] is True  # Fabric's own error for an unmarked method
    return seen


@pytest.mark.parametrize("mode", ["default", "auto-warn"])
def test_fabric_module_as_fabric_tests_build_it_is_unchanged(baseline: dict, mode: str) -> None:
    seen = _observe(mode)
    differ = {k: {"baseline": baseline.get(k), mode: seen.get(k)}
              for k in sorted(set(baseline) | set(seen)) if baseline.get(k) != seen.get(k)}
    assert not differ, json.dumps(differ, indent=1)
