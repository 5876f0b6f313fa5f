"""FSDP2 (``fully_shard``) on 2 real gloo ranks."""

from __future__ import annotations

import pytest
import torch

from _shim_dist import run_ranks
from _shim_workers_fsdp import fsdp2
from lint_rules.contract import unmarked_entry_error
from shim_models import batch, make, reference_grads

pytestmark = pytest.mark.timeout(240)


def _close(d: dict, ref: dict) -> bool:
    return d.keys() == ref.keys() and all(
        torch.allclose(torch.tensor(d[k]), ref[k].flatten(), atol=1e-5) for k in d
    )


@pytest.mark.parametrize("how", ["guard", "install"])
def test_fsdp2_routes_marked_and_rejects_unmarked(how: str) -> None:
    ranks = run_ranks(fsdp2, how)
    for r in ranks:
        # Without the shim, the direct submodule call fails with FSDP2's cryptic error.
        kind, message = r["bare.score"]
        assert kind != "ok" and "UnmarkedEntry" not in kind and "DTensor" in message, r["bare.score"]
        assert r["unmarked_first"][0] == "UnmarkedEntryError"
        for method in ("generate", "score", "forward"):
            assert _close(r[method], reference_grads(method, world=2)), method
        assert _close(r["generate_unmarked"], reference_grads("generate", world=2))
        cases = (("score_unmarked", "self.embed(...)"), ("sub_forward_unmarked", "self.head.forward(...)"))
        for name, chain in cases:
            kind, message = r[name]
            assert kind == "UnmarkedEntryError", r[name]
            prefix = unmarked_entry_error("Toy", name, "X").split("(X)")[0]
            assert message.startswith(prefix + f"({name} -> {chain}")
        assert r["nested"] == ["dict", ["gen", "score", "tag"], "list"]
        assert r["describe"].startswith("Toy(")
    ref = [make()(batch(rank)).flatten().tolist() for rank in range(2)]
    for rank, r in enumerate(ranks):
        assert torch.allclose(torch.tensor(r["after_errors"]), torch.tensor(ref[rank]), atol=1e-5)
        with torch.no_grad():
            expected = make().score(batch(rank)).flatten()
        assert torch.allclose(torch.tensor(r["fsdp_registered"]), expected, atol=1e-5)
