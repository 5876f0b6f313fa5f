"""``pytest --fwd-guard`` (``lint_rules/pytest_plugin.py``), as a user runs it: pytest as a
subprocess on a small project whose tests set up DDP (a 1-rank gloo group), FSDP2 and Fabric and
call an unmarked ``generate``."""

from __future__ import annotations

from pathlib import Path

import pytest
from _pytest_runs import run_pytest

pytestmark = pytest.mark.timeout(600)

MODELS = '''
import sys

import pytest
import torch
import torch.distributed as dist
import torch.nn as nn


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(2, 2)

    def forward(self, x):
        return self.lin(x)

    def generate(self, x):  # a submodule outside the wrapper's forward: an entry under every wrapper
        return self.lin(x)


@pytest.fixture(scope="module")
def group():
    import socket

    with socket.socket() as probe:  # a port of its own per process (pytest-xdist workers)
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    if not dist.is_initialized():
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def test_ddp(group):
    from torch.nn.parallel import DistributedDataParallel as DDP

    ddp = DDP(GPT())
    ddp.module.generate(torch.zeros(1, 2))


def test_fsdp2(group):
    from torch.distributed.fsdp import fully_shard

    model = GPT()
    fully_shard(model)
    model.generate(torch.zeros(1, 2))


def test_fabric(group):
    from lightning.fabric import Fabric

    fabric = Fabric(accelerator="cpu", devices=1, strategy="ddp")  # a DDP of one rank
    fabric.launch()
    fabric.setup(GPT()).generate(torch.zeros(1, 2))


def test_fabric_one_device():
    from lightning.fabric import Fabric

    fabric = Fabric(accelerator="cpu", devices=1)  # no wrapper: passes, and would fail under DDP
    fabric.setup(GPT()).generate(torch.zeros(1, 2))


def test_marked(group):
    from torch.nn.parallel import DistributedDataParallel as DDP

    from runtime_shim import forward_entry

    class Marked(GPT):
        @forward_entry
        def generate(self, x):
            return self.lin(x)

    DDP(Marked()).module.generate(torch.zeros(1, 2))


def test_unwrapped():
    GPT().generate(torch.zeros(1, 2))
'''

CONFTEST = '''
import sys


def pytest_sessionstart(session):
    print(f"loaded at start: runtime_shim={'runtime_shim' in sys.modules} torch={'torch' in sys.modules}")
'''


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("guarded")
    (root / "test_models.py").write_text(MODELS)
    (root / "conftest.py").write_text(CONFTEST)
    return root


def _summary(out: str) -> list[str]:
    lines = out.splitlines()
    start = next((i for i, line in enumerate(lines) if "fwdlint: unmarked forward entries" in line), None)
    return [] if start is None else [line for line in lines[start + 1:start + 3] if "first run by" in line]


def test_without_the_option_nothing_is_guarded_or_imported(project: Path) -> None:
    """What the suite does unguarded: DDP runs the entry silently (the ranks' gradients would part),
    FSDP2 fails with a DTensor error, Fabric with its own message."""
    run = run_pytest(project, "-s")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "loaded at start: runtime_shim=False torch=False" in run.stdout
    assert "PASSED test_models.py::test_ddp" in run.stdout
    assert "FAILED test_models.py::test_fsdp2 - RuntimeError: aten.addmm.default got mixed torch.Tensor and DTensor" \
        in run.stdout
    assert "FAILED test_models.py::test_fabric - RuntimeError: You are calling the method" in run.stdout
    assert "PASSED test_models.py::test_fabric_one_device" in run.stdout
    assert _summary(run.stdout) == []


def test_guard_fails_the_tests_that_run_an_unmarked_entry(project: Path) -> None:
    run = run_pytest(project, "--fwd-guard")
    assert run.returncode == 1, run.stdout + run.stderr
    for name in ("test_ddp", "test_fsdp2", "test_fabric", "test_fabric_one_device"):
        assert f"FAILED test_models.py::{name} - runtime_shim.errors.UnmarkedEntryError: GPT.generate" in run.stdout
    assert "PASSED test_models.py::test_marked" in run.stdout
    assert "PASSED test_models.py::test_unwrapped" in run.stdout
    assert _summary(run.stdout) == ["GPT.generate  first run by test_models.py::test_ddp"]


def test_warn_mode_runs_the_tests_and_lists_the_entries(project: Path) -> None:
    run = run_pytest(project, "--fwd-guard=warn")
    assert "PASSED test_models.py::test_ddp" in run.stdout, run.stdout + run.stderr
    assert "UnmarkedEntryError" not in run.stdout
    assert _summary(run.stdout) == ["GPT.generate  first run by test_models.py::test_ddp"]


def test_the_summary_is_the_same_under_xdist(project: Path) -> None:
    run = run_pytest(project, "--fwd-guard", "-n", "2", "-p", "xdist")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "4 failed, 2 passed" in run.stdout
    summary = _summary(run.stdout)
    assert len(summary) == 1 and summary[0].startswith("GPT.generate  first run by test_models.py::test_")


ROUTED = '''
import runtime_shim.auto  # FWD_SHIM_MODE=error; isort's order: before torch
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


class Marked(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(2, 2)

    def forward(self, x):
        return self.lin(x)

    @runtime_shim.forward_entry
    def generate(self, x):
        return self.lin(x)

    def sample(self, x):
        return self.lin(x)


def test_a_marked_method_is_routed_through_ddp():
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    try:
        ddp = DDP(Marked())
        calls = []
        ddp.register_forward_pre_hook(lambda module, args: calls.append(1))
        ddp.module.generate(torch.zeros(1, 2))
        assert calls == [1]
        try:
            ddp.module.sample(torch.zeros(1, 2))
        except runtime_shim.UnmarkedEntryError:
            pass
        else:
            raise AssertionError("sample ran unguarded")
    finally:
        dist.destroy_process_group()
'''


def test_runtime_shim_before_torch_in_a_pytest_process(tmp_path: Path) -> None:
    """pytest loads every module of a distribution that registers a pytest plugin (``runtime_shim``
    too, once fwdlint is installed) through its assertion-rewriting hook, one loader for all of
    them. ``import runtime_shim.auto`` before torch, as isort orders it, still routes a marked
    method through DDP and raises for an unmarked one. (The shared loader itself:
    ``tests/test_import_hooks.py``.)"""
    (tmp_path / "test_routed.py").write_text(ROUTED)
    run = run_pytest(tmp_path, "-W", "error::RuntimeWarning", env={"FWD_SHIM_MODE": "error"})
    assert run.returncode == 0, run.stdout + run.stderr
    assert "PASSED test_routed.py::test_a_marked_method_is_routed_through_ddp" in run.stdout


SPELLED = '''
def test_guarded(request):
    guard = request.config.pluginmanager.get_plugin("fwdlint-guard")
    print(f"guard mode: {guard.mode if guard else None}")
'''


@pytest.fixture(scope="module")
def spelled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project as users lay one out: its tests under tests/ (pytest's testpaths), and a test file
    outside them that must not run."""
    root = tmp_path_factory.mktemp("spelled")
    (root / "tests").mkdir()
    (root / "tests" / "test_guarded.py").write_text(SPELLED)
    (root / "test_elsewhere.py").write_text("def test_elsewhere():\n    raise AssertionError('not asked for')\n")
    (root / "pyproject.toml").write_text('[tool.pytest.ini_options]\ntestpaths = ["tests"]\n')
    return root


@pytest.mark.parametrize(("args", "mode"), [
    (["--fwd-guard", "tests"], "error"),  # the first command most users type (exit 4 before)
    (["--fwd-guard=warn", "tests"], "warn"),
    (["--fwd-guard=error", "tests"], "error"),
    (["tests", "--fwd-guard"], "error"),
    (["--fwd-guard", "tests/test_guarded.py"], "error"),
    (["--fwd-guard"], "error"),  # the README's spellings, testpaths
    (["--fwd-guard=warn"], "warn"),
    (["--fwd-guard", "-n", "1", "-p", "xdist", "tests"], "error"),
    (["tests"], None),
], ids=lambda value: " ".join(value) if isinstance(value, list) else str(value))
def test_the_guard_is_spelled_as_users_type_it(spelled: Path, args: list[str], mode: str) -> None:
    """A bare ``--fwd-guard`` never takes the next argument as its mode; ``--fwd-guard=MODE`` gives one."""
    run = run_pytest(spelled, "-s", *args)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 passed" in run.stdout and "test_elsewhere" not in run.stdout
    if "-n" not in args:  # a worker's output is its own
        assert f"guard mode: {mode}" in run.stdout


def test_the_guard_from_addopts(spelled: Path) -> None:
    run = run_pytest(spelled, "-s", "tests", env={"PYTEST_ADDOPTS": "--fwd-guard"})
    assert run.returncode == 0 and "guard mode: error" in run.stdout, run.stdout + run.stderr


@pytest.mark.parametrize(("args", "said"), [
    (["--fwd-guard", "warn", "tests"], "--fwd-guard takes its mode after '=': --fwd-guard=warn"),
    (["--fwd-guard=bogus", "tests"], "--fwd-guard"),
])
def test_a_mode_spelled_otherwise_is_a_usage_error(spelled: Path, args: list[str], said: str) -> None:
    run = run_pytest(spelled, *args)
    assert run.returncode == 4, run.stdout + run.stderr
    assert said in run.stderr and "passed" not in run.stdout


def test_the_help_shows_both_spellings(spelled: Path) -> None:
    run = run_pytest(spelled, "--help")
    assert run.returncode == 0, run.stderr
    assert "--fwd-guard, --fwd-guard=error" in run.stdout and "--fwd-guard=warn" in run.stdout
