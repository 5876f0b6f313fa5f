"""``pytest --fwd-record`` and ``fwdlint --from-record`` as a user runs them: pytest as a subprocess
on a small project whose tests set up DDP (1 gloo rank in the pytest process, and 2 ranks started
with ``torch.multiprocessing.spawn``), FSDP2 and Fabric, with entries FWD001 sees and dynamic ones it
cannot (``getattr(self, self.head)(x)``); then the whole loop: the guard fails, the record is
linted and fixed, the guard passes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from _pytest_runs import clean_env, run_fwdlint, run_pytest

pytestmark = pytest.mark.timeout(900)

MODELS = '''
import torch.nn as nn
from runtime_shim import forward_entry


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(2, 2)

    def forward(self, x):
        return self.lin(x)

    def generate(self, x):  # FWD001 sees this one
        return self.lin(x)

    @forward_entry
    def encode(self, x):
        return self.lin(x)


class Tagger(nn.Module):
    def __init__(self, head="lin"):
        super().__init__()
        self.lin = nn.Linear(2, 2)
        self.head = head

    def forward(self, x):
        return self.lin(x)

    def predict(self, x):  # the submodule is named at run time: only the run sees it
        return getattr(self, self.head)(x)

    def score(self, x):
        return getattr(self, self.head)(x).sum()
'''

RANKS = '''
import socket

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from proj.models import Tagger


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def rank_main(rank, port, calls):
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    try:
        model = DDP(Tagger())
        for _ in range(calls):
            model.module.score(torch.ones(1, 2))
    finally:
        dist.destroy_process_group()


def two_ranks(calls=1):
    torch.multiprocessing.spawn(rank_main, args=(free_port(), calls), nprocs=2)
'''

TESTS = '''
import pytest
import torch
import torch.distributed as dist

from proj.models import GPT, Tagger
from proj.ranks import free_port, two_ranks


@pytest.fixture(scope="module")
def group():
    if not dist.is_initialized():
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def test_ddp(group):
    from torch.nn.parallel import DistributedDataParallel as DDP

    model = DDP(GPT())
    model.module.generate(torch.zeros(1, 2))
    model.module.encode(torch.zeros(1, 2))
    model.module.encode(torch.zeros(1, 2))


def test_dynamic(group):
    from torch.nn.parallel import DistributedDataParallel as DDP

    DDP(Tagger()).module.predict(torch.zeros(1, 2))


def test_fsdp2(group):
    from torch.distributed.fsdp import fully_shard

    model = GPT()
    fully_shard(model)
    model.generate(torch.zeros(1, 2))


def test_fabric(group):
    from lightning.fabric import Fabric

    fabric = Fabric(accelerator="cpu", devices=1, strategy="ddp")
    fabric.launch()
    fabric.setup(Tagger()).predict(torch.zeros(1, 2))


def test_two_ranks():
    two_ranks(calls=3)
'''


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "__init__.py").write_text("")
    (tmp_path / "proj" / "models.py").write_text(MODELS)
    (tmp_path / "proj" / "ranks.py").write_text(RANKS)
    (tmp_path / "test_models.py").write_text(TESTS)
    return tmp_path


def _entries(path: Path) -> dict[tuple[str, str, str], dict]:
    record = json.loads(path.read_text())
    assert record["format"] == "fwdlint-record" and record["schema"] == 1
    return {(e["class"], e["method"], e["wrapper"]): e for e in record["entries"]}


def test_the_record_holds_every_entry_of_every_process(project: Path) -> None:
    """One pytest run: entries from the pytest process and from two spawned ranks, merged, with the
    test that first ran each; the program itself runs unchanged (FSDP2 still fails its own way)."""
    run = run_pytest(project, "--fwd-record", "record.json")
    assert "FAILED test_models.py::test_fsdp2 - RuntimeError: aten.addmm.default got mixed torch.Tensor and " \
           "DTensor" in run.stdout, run.stdout + run.stderr
    assert "4 passed" in run.stdout and "UnmarkedEntryError" not in run.stdout
    entries = _entries(project / "record.json")
    models = str(project / "proj" / "models.py")
    assert sorted(entries) == [
        ("proj.models.GPT", "encode", "ddp"), ("proj.models.GPT", "generate", "ddp"),
        ("proj.models.GPT", "generate", "fsdp2"), ("proj.models.Tagger", "predict", "ddp"),
        ("proj.models.Tagger", "predict", "fabric"), ("proj.models.Tagger", "score", "ddp")]
    generate = entries[("proj.models.GPT", "generate", "ddp")]
    assert generate["marked"] is False and generate["file"] == models and generate["line"] == 14
    assert generate["test"] == "test_models.py::test_ddp" and generate["count"] == 1
    assert generate["site"] == f"{project / 'test_models.py'}:22"
    assert generate["wrapped_at"] == f"{project / 'test_models.py'}:21"
    encode = entries[("proj.models.GPT", "encode", "ddp")]
    assert encode["marked"] is True and encode["count"] == 2
    score = entries[("proj.models.Tagger", "score", "ddp")]  # 2 ranks x 3 calls, each rank its own process
    assert score["count"] == 6 and score["test"] == "test_models.py::test_two_ranks"
    assert score["wrapped_at"] == f"{project / 'proj' / 'ranks.py'}:20"
    assert entries[("proj.models.Tagger", "predict", "fabric")]["test"] == "test_models.py::test_fabric"
    assert f"fwdlint: recorded 6 forward entries (5 unmarked, 1 marked) in {project / 'record.json'}" in run.stdout
    assert "Tagger.score  first run by test_models.py::test_two_ranks" in run.stdout
    assert [p.name for p in project.iterdir() if p.name.startswith(".")] == []  # no lock or temporary files left
    assert (project / "record.json").stat().st_mode & 0o777 == 0o644


def test_the_guard_fails_a_test_whose_spawned_ranks_run_an_unmarked_entry(project: Path) -> None:
    run = run_pytest(project, "--fwd-guard", "-k", "two_ranks")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "FAILED test_models.py::test_two_ranks - torch.multiprocessing.spawn.ProcessRaisedException" in run.stdout
    assert "Tagger.score  first run by test_models.py::test_two_ranks" in run.stdout


def test_guard_record_lint_fix_guard(project: Path) -> None:
    """The whole loop, as the README tells it."""
    guarded = run_pytest(project, "--fwd-guard")
    assert "5 failed" in guarded.stdout, guarded.stdout + guarded.stderr

    run_pytest(project, "--fwd-record", "record.json")
    static = run_fwdlint(project, "--isolated", "proj")
    assert [line.split(" ", 2)[:2] for line in static.stdout.splitlines() if line.startswith("proj/")] == [
        ["proj/models.py:14:9:", "FWD001"]]
    lint = run_fwdlint(project, "--isolated", "--from-record", "record.json", "--statistics", "proj")
    assert lint.returncode == 1, lint.stdout + lint.stderr
    found = [line.split(" ", 2)[:2] for line in lint.stdout.splitlines() if line.startswith("proj/")]
    assert found == [["proj/models.py:14:9:", "FWD001"], ["proj/models.py:31:9:", "FWD004"],
                     ["proj/models.py:34:9:", "FWD004"]]
    assert "Tagger.predict ran forward computation outside the ddp and fabric wrappers' forward at run time " \
           "(test_models.py::test_dynamic)" in lint.stdout
    assert "fwdlint: record.json: 3 unmarked entries ran in the linted code: 1 found statically (FWD001), " \
           "2 seen only at run time (FWD004); static recall 33%; 0 marked since the run; 1 marked entry confirmed" \
           in lint.stderr

    fixed = run_fwdlint(project, "--isolated", "--from-record", "record.json", "--fix", "proj")
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert (project / "proj" / "models.py").read_text().count("@forward_entry") == 4

    again = run_pytest(project, "--fwd-guard")
    assert again.returncode == 0 and "5 passed" in again.stdout, again.stdout + again.stderr
    assert "fwdlint: unmarked forward entries" not in again.stdout


STRESS = '''
import pytest
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from proj.ranks import free_port
from proj.nets import NETS


def rank_main(rank, port, index):
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    try:
        model = DDP(NETS[index]())
        for _ in range(5):
            model.module.score(torch.ones(1, 2))
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("index", range(4))
def test_net(index):
    torch.multiprocessing.spawn(rank_main, args=(free_port(), index), nprocs=2)
'''

NETS = '''
import torch.nn as nn


class Base(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(2, 2)

    def forward(self, x):
        return self.lin(x)

    def score(self, x):
        return getattr(self, "lin")(x).sum()


NETS = [type(f"Net{i}", (Base,), {"__module__": __name__}) for i in range(4)]
'''


def test_two_ranks_under_four_xdist_workers_lose_nothing(project: Path) -> None:
    """4 pytest-xdist workers, each test 2 spawned ranks, all merging into one record at once."""
    (project / "proj" / "nets.py").write_text(NETS)
    (project / "test_stress.py").write_text(STRESS)
    run = run_pytest(project, "--fwd-record", "record.json", "-n", "4", "-p", "xdist", "test_stress.py")
    assert run.returncode == 0 and "4 passed" in run.stdout, run.stdout + run.stderr
    entries = _entries(project / "record.json")
    assert sorted(entries) == [(f"proj.nets.Net{i}", "score", "ddp") for i in range(4)]
    for (cls, _, _), entry in entries.items():
        assert entry["count"] == 10 and entry["defined_in"] == "proj.nets.Base"  # 2 ranks x 5 calls
        assert entry["test"] == f"test_stress.py::test_net[{cls[-1]}]"


SCRIPT = '''
import runtime_shim.auto  # FWD_SHIM_MODE=record, FWD_RECORD=PATH: each rank re-imports this script
import sys

import torch

sys.path.insert(0, sys.argv[1])
from proj.ranks import two_ranks

if __name__ == "__main__":
    two_ranks(calls=2)
    print("ran unchanged")
'''


def test_outside_pytest_the_environment_records_two_ranks(project: Path) -> None:
    (project / "train.py").write_text(SCRIPT)
    env = clean_env({"FWD_SHIM_MODE": "record", "FWD_RECORD": "record.json"})
    run = subprocess.run([sys.executable, "train.py", str(project)], cwd=project, capture_output=True, text=True,
                         timeout=300, env=env)
    assert run.returncode == 0 and "ran unchanged" in run.stdout, run.stdout + run.stderr
    (entry,) = _entries(project / "record.json").values()
    assert (entry["class"], entry["method"], entry["count"], entry["test"]) == ("proj.models.Tagger", "score", 4, "")

    env.pop("FWD_RECORD")
    run = subprocess.run([sys.executable, "train.py", str(project)], cwd=project, capture_output=True, text=True,
                         timeout=300, env=env)
    assert run.returncode == 1
    assert run.stderr.splitlines()[-1] == "ValueError: FWD_SHIM_MODE=record: set FWD_RECORD=PATH, the file to record " \
                                          "the entries in"


def test_a_file_that_is_not_a_record_is_never_replaced(project: Path) -> None:
    (project / "notes.json").write_text('{"mine": true}')
    run = run_pytest(project, "--fwd-record", "notes.json", "-k", "nothing")
    assert run.returncode == 4
    assert run.stderr.strip() == (f"ERROR: --fwd-record: {project / 'notes.json'}: not a fwdlint record "
                                  "(no \"format\": \"fwdlint-record\"); not replacing it")
    assert (project / "notes.json").read_text() == '{"mine": true}'


COUNTED = '''
import runtime_shim.auto  # FWD_SHIM_MODE and FWD_RECORD from the environment
import socket

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import runtime_shim


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(2, 2)
        self.block = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2))

    def forward(self, x):
        return self.lin(x)

    def generate(self, x):  # 3 module calls a call: lin twice through the helper, block once
        return self.block(self._twice(x))

    def _twice(self, x):
        return self.lin(self.lin(x))

    @runtime_shim.forward_entry
    def score(self, x):
        return self.lin(self.lin(x))


with socket.socket() as probe:
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
ddp = DDP(GPT())
for _ in range(5):
    try:
        ddp.module.generate(torch.zeros(1, 2))
    except runtime_shim.UnmarkedEntryError:
        pass
for _ in range(2):
    ddp.module.score(torch.zeros(1, 2))
dist.destroy_process_group()
'''


def test_count_is_what_the_readme_says(tmp_path: Path) -> None:
    """``count`` (README, ``run_record``'s docstring): a marked entry's routed calls; an unmarked
    entry's module calls outside the wrapper (submodule calls it reaches, not those inside them), 1 a
    call under error, where the first raises; summed over the runs that write the file."""
    (tmp_path / "counted.py").write_text(COUNTED)

    def counts(mode: str, record: str) -> dict[str, int]:
        env = clean_env({"FWD_SHIM_MODE": mode, "FWD_RECORD": record})
        run = subprocess.run([sys.executable, "counted.py"], cwd=tmp_path, capture_output=True, text=True,
                             timeout=300, env=env)
        assert run.returncode == 0, run.stdout + run.stderr
        return {method: entry["count"] for (_, method, _), entry in _entries(tmp_path / record).items()}

    assert counts("record", "record.json") == {"generate": 15, "score": 2}
    assert counts("record", "record.json") == {"generate": 30, "score": 4}  # the same file: summed
    assert counts("error", "error.json") == {"generate": 5, "score": 2}
