"""``--fix-style call`` is verified by running the fixed program: each script of
``fixtures/fix_call_runtime`` sets a model up (DDP, FSDP1, FSDP2, Fabric, accelerate) and calls its unmarked
``generate`` and ``score``; ``fwdlint --fix --fix-style call train_<wrapper>.py``, given the script
alone (the model's class is in ``model.py``), registers both right after the set-up. The fixed
script then runs as ``python train_<wrapper>.py`` on 2 gloo ranks, each a fresh interpreter that
imports torch and ``runtime_shim`` in the script's own order, with torchrun's environment
variables; the gradients must agree across ranks and equal the average of each rank's own
gradient. The unfixed DDP script, run the same way, is shown to desynchronise."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from _shim_dist import MODELS, ROOT, free_port

pytestmark = pytest.mark.timeout(400)

SCRIPTS = Path(ROOT) / "fixtures" / "fix_call_runtime"
METHODS = ("generate", "score")
WORLD = 2
#: What the fix must insert, by hand: the import (DDP, FSDP1) and one registration per method.
REGISTRATIONS = {
    "ddp": ["from runtime_shim import mark_forward_method",
            'mark_forward_method(ddp, "generate")', 'mark_forward_method(ddp, "score")'],
    "fsdp1": ["from runtime_shim import mark_forward_method",
              'mark_forward_method(fsdp, "generate")', 'mark_forward_method(fsdp, "score")'],
    "fsdp2": ["from torch.distributed.fsdp import fully_shard, register_fsdp_forward_method",
              'register_fsdp_forward_method(model, "generate")', 'register_fsdp_forward_method(model, "score")'],
    "fabric": ['model.mark_forward_method("generate")', 'model.mark_forward_method("score")'],
    # accelerate's prepare wraps in DDP here (2 CPU processes): runtime_shim's function, as for DDP
    "accelerate": ["from runtime_shim import mark_forward_method",
                   'mark_forward_method(model, "generate")', 'mark_forward_method(model, "score")'],
}


def _project(directory: Path, wrapper: str) -> Path:
    (directory / "pyproject.toml").write_text("")
    shutil.copyfile(Path(MODELS) / "unmarked_lm.py", directory / "model.py")
    shutil.copyfile(SCRIPTS / f"train_{wrapper}.py", directory / f"train_{wrapper}.py")
    return directory / f"train_{wrapper}.py"


def _lint(directory: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lint_rules.cli", *args], cwd=directory,
                          capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": ROOT})


def _fix(script: Path, wrapper: str) -> None:
    before = script.read_text().splitlines()
    proc = _lint(script.parent, "--fix", "--fix-style", "call", script.name)  # the script alone
    assert proc.returncode == 0, proc.stderr
    after = script.read_text().splitlines()
    added = [line.strip() for line in after if line not in before]
    assert sorted(added) == sorted(REGISTRATIONS[wrapper]), added
    assert _lint(script.parent, ".").returncode == 0  # lint clean; the run below says whether it is correct


def _run(script: Path, timeout: float = 300) -> list[dict[str, Any]]:
    """``python <script>`` on each rank (fresh interpreters), as torchrun would start it."""
    port = str(free_port())
    procs = []
    for rank in range(WORLD):
        env = {**os.environ, "PYTHONPATH": ROOT, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port,
               "RANK": str(rank), "LOCAL_RANK": str(rank), "NODE_RANK": "0", "WORLD_SIZE": str(WORLD),
               "OMP_NUM_THREADS": "1", "PYTHONFAULTHANDLER": "1"}  # an abort shows where each thread was
        procs.append(subprocess.Popen([sys.executable, script.name], cwd=script.parent, env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    try:
        outputs = [proc.communicate(timeout=timeout) for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    for rank, (proc, (_, err)) in enumerate(zip(procs, outputs)):
        assert proc.returncode == 0, f"rank {rank} failed:\n{err[-4000:]}"
    return [json.loads(out.splitlines()[-1]) for out, _ in outputs]


def _reference(model_file: Path, method: str) -> dict[str, torch.Tensor]:
    """The average of each rank's own gradient, on one process: what a synchronised step gives."""
    spec = importlib.util.spec_from_file_location("fix_call_reference_model", model_file)
    assert spec is not None and spec.loader is not None
    lm = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(lm)
    total: dict[str, torch.Tensor] = {}
    for rank in range(WORLD):
        torch.manual_seed(0)
        model = lm.TinyLM()
        x = torch.randn(4, 4, generator=torch.Generator().manual_seed(1000 + rank))
        getattr(model, method)(x).sum().backward()
        for name, p in model.named_parameters():
            total[name] = total.get(name, 0) + p.grad.flatten() / WORLD
    return total


def _same(grads: dict[str, list], reference: dict[str, torch.Tensor]) -> bool:
    return grads.keys() == reference.keys() and all(
        torch.allclose(torch.tensor(grads[k]), reference[k], atol=1e-5) for k in reference)


@pytest.mark.parametrize("wrapper", ["ddp", "fsdp1", "fsdp2", "fabric", "accelerate"])
def test_the_call_style_fix_makes_the_script_correct(wrapper: str, tmp_path: Path) -> None:
    script = _project(tmp_path, wrapper)
    _fix(script, wrapper)
    r0, r1 = _run(script)
    for method in METHODS:
        reference = _reference(tmp_path / "model.py", method)
        assert _same(r0[method], reference), f"{wrapper} {method}: rank 0 is not the averaged gradient"
        assert _same(r1[method], reference), f"{wrapper} {method}: rank 1 is not the averaged gradient"


def test_the_unfixed_ddp_script_desynchronises(tmp_path: Path) -> None:
    script = _project(tmp_path, "ddp")
    assert _lint(script.parent, ".").returncode == 1  # reported (FWD001 in model.py)...
    r0, r1 = _run(script)
    reference = _reference(tmp_path / "model.py", "generate")
    assert r0["generate"] != r1["generate"]  # ...and its ranks' gradients differ
    assert not _same(r0["generate"], reference)
