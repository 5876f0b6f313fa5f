"""Rank body for ``test_wrapped_calls_agreement.py``: run every scenario function of a program
on a real 2-rank Fabric (ddp) or a guarded DDP model and record what happened."""

from __future__ import annotations

import sys


def run_scenarios(rank: int, world: int, directory: str) -> dict[str, str]:
    import torch

    sys.path.insert(0, directory)
    import train  # the program under test; it imports runtime_shim through its model

    from _shim_workers_fabric import _fabric

    fabric = _fabric(rank, world)
    x = torch.randn(2, 4, generator=torch.Generator().manual_seed(rank))
    verdicts: dict[str, str] = {}
    for name in sorted(n for n in vars(train) if n.startswith(("fabric_", "ddp_"))):
        try:
            getattr(train, name)(fabric if name.startswith("fabric_") else None, x)
            verdicts[name] = "clean"
        except Exception as error:  # Fabric's RuntimeError, runtime_shim's UnmarkedEntryError
            verdicts[name] = f"raises {type(error).__name__}: {error}"
    return verdicts
