"""DDP on 2 real gloo ranks: the hazard is real, routing fixes it, unmarked entries raise."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from _shim_dist import run_ranks
from _shim_workers_ddp import bypass_then_guard, installed
from lint_rules.contract import unmarked_entry_error
from shim_models import reference_grads

pytestmark = pytest.mark.timeout(240)


def _t(d: dict) -> dict[str, torch.Tensor]:
    return {k: torch.tensor(v) for k, v in d.items()}


def _equal(a: dict, b: dict, atol: float = 1e-6) -> bool:
    a, b = _t(a), _t(b)
    return a.keys() == b.keys() and all(torch.allclose(a[k], b[k], atol=atol) for k in a)


def _close_to(d: dict, ref: dict[str, torch.Tensor]) -> bool:
    got = _t(d)
    return got.keys() == ref.keys() and all(torch.allclose(got[k], ref[k].flatten(), atol=1e-5) for k in got)


def _check_probe(probe: dict) -> None:
    chains = {
        "generate_unmarked": "generate_unmarked -> self(...) at line",
        "score_unmarked": "score_unmarked -> self.embed(...) at line",
        "sub_forward_unmarked": "sub_forward_unmarked -> self.head.forward(...) at line",
    }
    for name, chain in chains.items():
        for holder in ("raw", "ddp.module"):
            message = probe[f"{holder}.{name}"]
            prefix = unmarked_entry_error("Toy", name, "CHAIN", "ddp").split("(CHAIN)")[0]
            suffix = unmarked_entry_error("Toy", name, "CHAIN", "ddp").split("(CHAIN)")[1]
            assert message.startswith(prefix + "(" + chain), message
            assert message.endswith(")" + suffix), message
    assert probe["describe"].startswith("Toy(")


def test_ddp_bypass_desyncs_and_guard_routes() -> None:
    r0, r1 = run_ranks(bypass_then_guard)
    # The hazard is real: without the shim the bypassed backward leaves each rank its own gradient.
    assert not _equal(r0["unguarded"], r1["unguarded"])
    ref = reference_grads("generate", world=2)
    for key in ("guarded.raw", "guarded.ddp.module"):
        assert _equal(r0[key], r1[key]), key
        assert _close_to(r0[key], ref), key
    assert _equal(r0["guarded.score"], r1["guarded.score"])
    assert _close_to(r0["guarded.score"], reference_grads("score", world=2))
    assert r0["nested"]["tag"] == "n" and _equal(r0["nested"]["grads"], r1["nested"]["grads"])
    for probe in (r0["probe"], r1["probe"]):  # raised on both ranks, nothing hung
        _check_probe(probe)
    assert _equal(r0["probe"]["after"], r1["probe"]["after"])
    assert _close_to(r0["probe"]["after"], reference_grads("forward", world=2))


@pytest.mark.parametrize("how,env", [("install", {}), ("auto", {"FWD_SHIM_MODE": "error"})])
def test_ddp_install_and_auto(how: str, env: dict) -> None:
    r0, r1 = run_ranks(installed, how, env=env)
    ref = reference_grads("generate", world=2)
    assert _equal(r0["generate"], r1["generate"]) and _close_to(r0["generate"], ref)
    for r in (r0, r1):
        _check_probe(r["probe"])
        assert r["restored_init"] and r["ddp_forward_restored"] and r["restored_attrs"] == []
        assert r["warnings"] == []
    assert r0["auto"] == (how == "auto")
    assert not _equal(r0["after_uninstall"], r1["after_uninstall"])


_WORKERS = Path(__file__).with_name("_shim_workers_ddp.py")
_CALL_SITE = next(f"{_WORKERS.name}:{number}" for number, line in enumerate(_WORKERS.read_text().splitlines(), 1)
                  if "the entry's call site" in line)


def test_ddp_auto_warn_mode_warns_once_and_runs() -> None:
    r0, r1 = run_ranks(installed, "auto", env={"FWD_SHIM_MODE": "warn"})
    for r in (r0, r1):
        assert r["mode"] == "warn"
        assert all(v == "no error" for k, v in r["probe"].items() if "." in k and k != "describe")
        # one warning per method (3 probed methods + score_unmarked already warned by the probe)
        assert len(r["warnings"]) == 3, r["warnings"]
        assert any("Toy.score_unmarked" in w for w in r["warnings"])
        assert r["warned_at"] == [_CALL_SITE] * 3  # the user's call of the entry, not a line of torch


def test_ddp_auto_off_is_a_noop() -> None:
    r0, r1 = run_ranks(installed, "auto", env={"FWD_SHIM_MODE": "off"})
    for r in (r0, r1):
        assert r["auto"] and all(v == "no error" for k, v in r["probe"].items() if "." in k)
    assert not _equal(r0["generate"], r1["generate"])  # nothing routed: the hazard remains
