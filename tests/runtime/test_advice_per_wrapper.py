"""The runtime names the registration of the wrapper actually in use (issue 34, item 2).

``UnmarkedEntryError`` used to advise ``model.mark_forward_method('generate') after fabric.setup()``
under every wrapper: DDP has no such method, and FSDP2 registers with
``register_fsdp_forward_method``. One fresh interpreter, a 1-rank gloo group, ``runtime_shim.auto``
(mode error): an unmarked ``generate`` under DDP, FSDP1, FSDP2 and Fabric; each error offers the
decorator first, then that wrapper's own call, and no other wrapper's. All four fail on the
previous code."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from _shim_dist import ROOT, free_port
from lint_rules.contract import unmarked_entry_error

pytestmark = pytest.mark.timeout(300)  # about 20 s alone on the shared 2-core machine

PROGRAM = r'''
import json, sys
import runtime_shim.auto
import torch
import torch.distributed as dist
import torch.nn as nn
from runtime_shim import UnmarkedEntryError


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(2, 2)

    def forward(self, x):
        return self.lin(x)

    def generate(self, x):
        return self.lin(x)


def ddp():
    from torch.nn.parallel import DistributedDataParallel as DDP
    return DDP(GPT()).module


def fsdp1():
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    return FSDP(GPT(), device_id=torch.device("cpu")).module


def fsdp2():
    from torch.distributed.fsdp import fully_shard
    model = GPT()
    fully_shard(model)
    return model


def fabric():
    from lightning.fabric import Fabric
    fabric = Fabric(accelerator="cpu", devices=1, strategy="ddp")
    fabric.launch()
    return fabric.setup(GPT())


dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{sys.argv[1]}", rank=0, world_size=1)
messages = {}
for make in (ddp, fsdp1, fsdp2, fabric):
    try:
        make().generate(torch.zeros(1, 2))
        messages[make.__name__] = ""
    except UnmarkedEntryError as error:
        messages[make.__name__] = str(error)
dist.destroy_process_group()
print(json.dumps(messages))
'''

SHIM = "runtime_shim.mark_forward_method"
ADVICE = {
    "ddp": f"{SHIM}(ddp, 'generate') after ddp = DDP(model)",
    "fsdp1": f"{SHIM}(fsdp_model, 'generate') after fsdp_model = FSDP(model)",
    "fsdp2": (f"torch.distributed.fsdp.register_fsdp_forward_method(model, 'generate') or "
              f"{SHIM}(model, 'generate') after fully_shard(model)"),
    "fabric": "fabric_model.mark_forward_method('generate') after fabric_model = fabric.setup(model)",
}


@pytest.fixture(scope="module")
def messages() -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": ROOT, "FWD_SHIM_MODE": "error", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-c", PROGRAM, str(free_port())], capture_output=True, text=True,
                          timeout=240, env=env)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.splitlines()[-1])


@pytest.mark.parametrize("wrapper", sorted(ADVICE))
def test_the_error_names_the_registration_of_its_wrapper(messages: dict[str, str], wrapper: str) -> None:
    message = messages[wrapper]
    assert message.startswith("GPT.generate runs forward computation outside forward"), message
    advice = message.split("but is not marked; ", 1)[1]
    assert advice == (
        "decorate it with @forward_entry from runtime_shim (importing runtime_shim routes marked methods "
        f"through DDP, FSDP and Fabric), or register it on every set-up model: {ADVICE[wrapper]}")
    assert advice.index("@forward_entry") < advice.index("register")  # the decorator first
    for other in set(ADVICE) - {wrapper}:
        assert ADVICE[other] not in message
    chain = message.split("outside forward (", 1)[1].split(") but is not marked", 1)[0]
    assert message == unmarked_entry_error("GPT", "generate", chain, wrapper)  # the linter's words
