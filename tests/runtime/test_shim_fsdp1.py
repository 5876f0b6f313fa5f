"""FSDP1 (``FullyShardedDataParallel``, ``device_id=cpu``) on 2 real gloo ranks."""

from __future__ import annotations

import pytest
import torch

from _shim_dist import run_ranks
from _shim_workers_fsdp import fsdp1
from shim_models import batch, make, reference_grads

pytestmark = pytest.mark.timeout(240)


@pytest.mark.parametrize("use_orig_params", [True, False])
@pytest.mark.parametrize("how", ["guard", "install"])
def test_fsdp1_marked_matches_reference_unmarked_raises(use_orig_params: bool, how: str) -> None:
    ranks = run_ranks(fsdp1, use_orig_params, how)
    for rank, r in enumerate(ranks):
        x = batch(rank)
        if use_orig_params:  # the cryptic failure the shim replaces
            assert r["bare.generate"][0] == "RuntimeError" and "UnmarkedEntry" not in r["bare.generate"][1]
        for method in ("generate", "score"):
            expected = getattr(make(), method)(x).detach().flatten()
            assert torch.allclose(torch.tensor(r[method]["out"]), expected, atol=1e-5), method
            if use_orig_params:
                ref = reference_grads(method, world=2)
                got = {k: torch.tensor(v) for k, v in r[method]["grads"].items()}
                assert set(ref) <= set(got)  # FSDP1's flat gradient also holds zeros for unused ones
                full = {k: ref[k].flatten() if k in ref else torch.zeros_like(v) for k, v in got.items()}
                assert all(torch.allclose(got[k], full[k], atol=1e-5) for k in got), method
        with torch.no_grad():
            assert torch.allclose(torch.tensor(r["generate_nograd"]), make().generate(x).flatten(), atol=1e-5)
        for name in ("generate_unmarked", "score_unmarked", "sub_forward_unmarked"):
            assert r[name][0] == "UnmarkedEntryError", r[name]
            assert r[name][1].startswith(f"Toy.{name} runs forward computation outside forward")
        with torch.no_grad():
            assert torch.allclose(torch.tensor(r["after_errors"]), make()(x).flatten(), atol=1e-5)
