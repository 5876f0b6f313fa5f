"""``runtime_shim.mark_forward_method`` routes by itself when called after wrapping (2 real gloo
ranks): given the wrapper or the model, with the shim only imported, after ``uninstall()``, or
with ``install("error")``. It used to be a no-op unless ``auto``/``guard`` was active, and DDP's
ranks diverged silently (the unmarked baseline below shows the divergence, so the test can fail).

Also here: a routed method that leaves DDP parameters unused, and ``uninstall()`` leaving the
guards the user made."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from _mark_after_workers import CASES, fsdp2_imported_before_shim, mark_after, unused_parameters
from _shim_dist import run_ranks

pytestmark = pytest.mark.timeout(300)


def _close(got: dict, want: dict) -> bool:
    return got.keys() == want.keys() and all(
        torch.allclose(torch.tensor(got[k]), torch.tensor(want[k]), atol=1e-5) for k in want)


@pytest.mark.parametrize("kind", ["ddp", "fsdp1", "fsdp2"])
def test_mark_after_wrapping_routes(kind: str) -> None:
    ranks = run_ranks(mark_after, kind, timeout=240)
    for setup, given in CASES:
        for method in ("generate", "score"):
            key = f"{setup}/{given}/{method}"
            for rank, result in enumerate(ranks):
                outcome = result[key]
                assert "error" not in outcome, f"{key} rank {rank}: {outcome.get('error')}"
                assert _close(outcome["grads"], outcome["reference"]), f"{key}: rank {rank} is not the averaged step"


def test_fully_shard_imported_before_the_shim_is_routed() -> None:
    for rank, result in enumerate(run_ranks(fsdp2_imported_before_shim, timeout=180)):
        assert "error" not in result, result.get("error")  # was: mixed torch.Tensor and DTensor
        assert _close(result["grads"], result["reference"]), f"rank {rank} is not the averaged step"


def test_unmarked_baseline_diverges() -> None:
    """Control: the same DDP step with no mark at all is the hazard (rank-local gradients)."""
    ranks = run_ranks(_unmarked_ddp, timeout=120)
    assert not _close(ranks[0]["grads"], ranks[0]["reference"])


def _unmarked_ddp(rank: int, world: int) -> dict:
    from torch.nn.parallel import DistributedDataParallel as DDP

    import unmarked_lm as lm
    from _shim_workers_fixed import _batch, _full_grads, _reference

    torch.manual_seed(0)
    model = lm.TinyLM()
    DDP(model).module.generate(_batch(rank)).sum().backward()
    return {"grads": _full_grads(model), "reference": _reference(lm, "generate", world)}


def test_unused_parameters_raise_a_clear_error_on_every_rank() -> None:
    ranks = run_ranks(unused_parameters, timeout=180)
    for result in ranks:
        assert result["default"].startswith("UnusedParametersError: fwdlint: EncoderDecoder.encode ran through "
                                            "DistributedDataParallel's forward"), result["default"]
        assert "2 parameter(s)" in result["default"] and "dec.weight, dec.bias" in result["default"]
        assert "find_unused_parameters=True" in result["default"]
        assert result["combined_synchronised"] is True
        assert result["find_unused_synchronised"] is True
        later = result["later"]
        assert "Expected to have finished reduction" in later[0], later
        assert any("EncoderDecoder.maybe_decode" in note and "find_unused_parameters=True" in note
                   for note in later[1:]), later


class _Marked(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(2, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(x)

    def generate(self, x: torch.Tensor) -> torch.Tensor:
        return self(x)


def test_uninstall_removes_only_what_install_added(one_rank_group: None) -> None:
    from torch.nn.parallel import DistributedDataParallel as DDP

    from lint_rules.contract import GUARD_KEY
    from runtime_shim import guard, install, mark_forward_method, uninstall

    install("warn")
    mine = DDP(_Marked())
    guard(mine, mode="error")  # the user's guard, over the one install made
    theirs = DDP(_Marked())  # install's alone
    mark_forward_method(theirs, "generate")
    uninstall()
    assert GUARD_KEY not in theirs.__dict__ and GUARD_KEY not in theirs.module.__dict__
    record = mine.__dict__.get(GUARD_KEY)
    assert record is not None and record.active and record.mode == "error"
    calls = []
    mine.register_forward_pre_hook(lambda *a: calls.append(1))
    mark_forward_method(mine, "generate")
    mine.module.generate(torch.ones(1, 2))
    assert calls == [1]  # still routed through DDP's forward
