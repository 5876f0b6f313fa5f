"""FWD002 against the real runtime, on 2 gloo ranks: every scenario of a training script is
linted and run. A call FWD002 reports is exactly a call that Fabric (strategy ddp) or a guarded
DDP model (``runtime_shim.guard``) refuses at run time; every other call runs. The verdicts are
the ones both sides produce: the diagnostics' lines, and what each rank raised."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from _shim_dist import ROOT, run_ranks
from _shim_workers_agreement import run_scenarios

pytestmark = pytest.mark.timeout(300)

MODEL = '''
import torch
from torch import nn

from runtime_shim import forward_entry


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(4, 8)
        self.head = nn.Linear(8, 3)

    def forward(self, x):
        return self.head(torch.tanh(self.embed(x)))

    def generate(self, x):
        return self(x) * 2

    def score(self, x):
        return self.head(self.embed(x)).sum(-1)

    @forward_entry
    def sample(self, x):
        return self(x)

    def describe(self):
        return "tiny"
'''

TRAIN = '''
import torch
from torch.nn.parallel import DistributedDataParallel as DDP

from runtime_shim import guard, mark_forward_method
from vendor.lm import TinyLM


def fabric_generate(fabric, x):
    model = fabric.setup(TinyLM())
    return model.generate(x)  # scenario: fabric_generate


class Runner:
    def __init__(self, fabric):
        self.model = fabric.setup(TinyLM())

    def run(self, x):
        return self.model.score(x)  # scenario: fabric_attribute


def fabric_attribute(fabric, x):
    return Runner(fabric).run(x)


def helper(net, x):
    return net.score(x)  # scenario: fabric_function


def fabric_function(fabric, x):
    net = TinyLM()
    model, _ = fabric.setup(net, torch.optim.SGD(net.parameters(), lr=0.1))
    return helper(model, x)


def fabric_sample(fabric, x):
    model = fabric.setup(TinyLM())
    return model.sample(x)  # scenario: fabric_sample


def fabric_describe(fabric, x):
    model = fabric.setup(TinyLM())
    return model.describe()  # scenario: fabric_describe


def fabric_registered(fabric, x):
    model = fabric.setup(TinyLM())
    model.mark_forward_method("generate")
    return model.generate(x)  # scenario: fabric_registered


def ddp_generate(_, x):
    ddp = guard(DDP(TinyLM()))
    return ddp.module.generate(x)  # scenario: ddp_generate


def ddp_wrapped_module(_, x):
    model = TinyLM()
    ddp = guard(DDP(model))
    return model.score(x)  # scenario: ddp_wrapped_module


def ddp_registered(_, x):
    ddp = guard(DDP(TinyLM()))
    mark_forward_method(ddp, "score")
    return ddp.module.score(x)  # scenario: ddp_registered


def ddp_describe(_, x):
    ddp = guard(DDP(TinyLM()))
    return ddp.module.describe()  # scenario: ddp_describe
'''


@pytest.fixture(scope="module")
def program(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("script")
    (directory / "pyproject.toml").write_text("")
    (directory / "vendor").mkdir()
    (directory / "vendor" / "setup.py").write_text("# a vendored project of its own\n")
    (directory / "vendor" / "lm.py").write_text(MODEL)
    (directory / "train.py").write_text(TRAIN)
    return directory


def _static(directory: Path) -> dict[str, bool]:
    proc = subprocess.run([sys.executable, "-m", "lint_rules.cli", "--format", "json", "--select", "FWD002",
                           "train.py"], cwd=directory, capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": ROOT, "PATH": ""})
    report = json.loads(proc.stdout)
    assert report["errors"] == []
    lines = TRAIN.splitlines()
    scenario_of = {number: match.group(1) for number, line in enumerate(lines, 1)
                   if (match := re.search(r"# scenario: (\w+)", line))}
    reported = {scenario_of[d["line"]] for d in report["diagnostics"]}
    return {name: name in reported for name in scenario_of.values()}


def test_fwd002_is_what_fabric_and_the_guard_refuse(program: Path) -> None:
    static = _static(program)
    r0, r1 = run_ranks(run_scenarios, str(program), timeout=240)
    assert r0.keys() == r1.keys() == static.keys()
    runtime = {name: verdict.startswith("raises") for name, verdict in r0.items()}
    assert all(r1[name].startswith("raises") == raised for name, raised in runtime.items())  # both ranks
    assert runtime == static, {name: (static[name], r0[name]) for name in static}
    assert sum(static.values()) >= 4 and sum(not v for v in static.values()) >= 4
    assert all("mark_forward_method" in r0[name] for name in r0 if name.startswith("fabric_") and runtime[name])
    assert all("UnmarkedEntryError" in r0[name] for name in r0 if name.startswith("ddp_") and runtime[name])
