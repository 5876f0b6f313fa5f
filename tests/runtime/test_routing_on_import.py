"""What importing ``runtime_shim`` does by itself (each case in a fresh interpreter): routing for
wrappers created afterwards, torch never imported by it, nothing left patched after ``uninstall``,
and ``FWD_SHIM_MODE=off`` as the way out."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from _shim_dist import MODELS, ROOT

pytestmark = pytest.mark.timeout(120)


def _run(code: str, **env: str) -> subprocess.CompletedProcess:
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([ROOT, MODELS]), **env}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=100, env=environment)


PRELUDE = """
import sys, torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
dist.init_process_group("gloo", init_method="tcp://127.0.0.1:0", rank=0, world_size=1)
"""


def test_import_is_torch_free_and_routes_wrappers_created_after_torch_loads() -> None:
    code = (
        "import sys\n"
        "import runtime_shim\n"
        "assert 'torch' not in sys.modules, 'runtime_shim imported torch'\n"
        + PRELUDE +
        "from shim_models import make, batch\n"
        "model = make()\n"
        "ddp = DDP(model)\n"
        "calls = []\n"
        "ddp.register_forward_pre_hook(lambda *a: calls.append(1))\n"
        "model.generate(batch(0))\n"  # decorated: routed through DDP's forward
        "model.describe()\n"
        "plain = torch.nn.Linear(2, 2)\n"
        "plain_ddp = DDP(plain)\n"
        "print(len(calls), '_fwd_shim_guard' in plain_ddp.__dict__, '_fwd_shim_guard' in ddp.__dict__)\n"
    )
    proc = _run(code)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["1", "False", "True"]  # a model without marks is left alone


def test_uninstall_leaves_nothing_patched() -> None:
    code = (
        "import sys, runtime_shim\n" + PRELUDE +
        "import torch.distributed.fsdp as fsdp\n"
        "from shim_models import make\n"
        "DDP(make())\n"
        "from runtime_shim import uninstall, routing\n"
        "uninstall()\n"
        "from torch.distributed.fsdp._fully_shard import _fully_shard as defining\n"
        "patched = [o for o in (DDP.__init__, fsdp.FullyShardedDataParallel.__init__, fsdp.fully_shard,\n"
        "           fsdp.register_fsdp_forward_method, defining._apply_to_module)\n"
        "           if getattr(o, '_fwd_shim_patch', False)]\n"
        "hooks = [h for h in sys.meta_path if type(h).__module__.startswith('runtime_shim')]\n"
        "model = make(); ddp = DDP(model)\n"
        "print(len(patched), len(hooks), '_fwd_shim_guard' in ddp.__dict__, 'forward' in model.__dict__)\n"
    )
    proc = _run(code)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["0", "0", "False", "False"]


def test_mode_off_routes_nothing() -> None:
    code = "import runtime_shim\n" + PRELUDE + (
        "from shim_models import make\n"
        "ddp = DDP(make())\n"
        "print('_fwd_shim_guard' in ddp.__dict__, getattr(DDP.__init__, '_fwd_shim_patch', False))\n")
    proc = _run(code, FWD_SHIM_MODE="off")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["False", "False"]


def test_fsdp_registration_routes_under_ddp_too() -> None:
    """register_fsdp_forward_method, which FSDP2 alone honours, is honoured under DDP once
    runtime_shim is imported: the linter counts it as a mark, so the runtime must too."""
    code = "import runtime_shim\n" + PRELUDE + (
        "from torch.distributed.fsdp import register_fsdp_forward_method\n"
        "from shim_models import make, batch\n"
        "model = make()\n"
        "register_fsdp_forward_method(model, 'generate_unmarked')\n"
        "ddp = DDP(model)\n"
        "calls = []\n"
        "ddp.register_forward_pre_hook(lambda *a: calls.append(1))\n"
        "model.generate_unmarked(batch(0))\n"
        "print(len(calls))\n")
    proc = _run(code)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["1"]
