"""Lightning Fabric (``strategy="ddp"``, 2 CPU ranks): the decorator is honoured without marking."""

from __future__ import annotations

import pytest
import torch

from _shim_dist import run_ranks
from _shim_workers_fabric import fabric_run
from shim_models import reference_grads

pytestmark = pytest.mark.timeout(300)


def _close(d: dict, ref: dict) -> bool:
    return d.keys() == ref.keys() and all(
        torch.allclose(torch.tensor(d[k]), ref[k].flatten(), atol=1e-5) for k in d
    )


@pytest.mark.parametrize("how", ["guard", "install"])
def test_fabric_honours_decorator(how: str) -> None:
    ranks = run_ranks(fabric_run, how, timeout=240)
    gen_ref = reference_grads("generate", world=2)
    for r in ranks:
        assert r["fabric_type"] == "_FabricModule"
        if how == "guard":
            kind, message = r["bare.generate"]
            assert kind == "RuntimeError" and "mark_forward_method" in message  # Fabric's own error
        for holder in ("fabric", "module", "raw"):
            assert _close(r[f"generate.{holder}"], gen_ref), holder
        for name in ("generate_unmarked", "score_unmarked", "sub_forward_unmarked"):
            assert r[name][0] == "UnmarkedEntryError", r[name]
            assert "from outside the model" not in r[name][1]
        assert r["describe"].startswith("Toy(")
        assert _close(r["fabric_marked"], gen_ref)
        score_ref, fwd_ref = reference_grads("score", world=2), reference_grads("forward", world=2)
        both = {k: 2 * score_ref.get(k, torch.zeros_like(v)) + v for k, v in fwd_ref.items()}
        assert _close(r["ours_marked"], both)
        assert _close(r["forward"], reference_grads("forward", world=2))
        assert not any("outside the model" in w for w in r["warnings"])
