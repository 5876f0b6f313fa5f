"""Shared fixtures for the runtime-shim tests."""

from __future__ import annotations

import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
for _path in (ROOT, os.path.join(ROOT, "fixtures", "runtime_models"), HERE):
    if _path not in sys.path:
        sys.path.insert(0, _path)


@pytest.fixture(scope="session")
def one_rank_group():
    """A 1-rank gloo group in the pytest process, for single-process DDP/FSDP cases."""
    import torch.distributed as dist

    from _shim_dist import free_port

    if not dist.is_initialized():
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1)
    yield
    if dist.is_initialized():
        dist.destroy_process_group()


@pytest.fixture(autouse=True)
def _no_install_leak():
    """Every test leaves the process as importing runtime_shim leaves it (routing only), whatever
    it installed or uninstalled."""
    yield
    from runtime_shim import routing, uninstall

    uninstall()
    routing.enable()
