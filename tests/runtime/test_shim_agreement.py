"""Agreement: for every method of the fixture models, the runtime verdict equals FWD001's."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch
from torch.nn.parallel import DistributedDataParallel as DDP

from shim_agreement_models import Agree, register_marks
from runtime_shim import UnmarkedEntryError, guard

pytestmark = [pytest.mark.usefixtures("one_rank_group"), pytest.mark.timeout(120)]

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURE = os.path.join("fixtures", "runtime_models", "shim_agreement_models.py")

X = torch.randn(3, 4)

#: symbol -> (expected verdict, how the runtime probe calls it on the guarded raw module)
EXPECTED: dict[str, tuple[str, object]] = {
    "Agree.generate": ("routes", lambda m: m.generate(X)),
    "Agree.sample": ("routes", lambda m: m.sample(X)),
    "Agree.registered": ("routes", lambda m: m.registered(X)),
    "Agree.proposal_name": ("routes", lambda m: m.proposal_name(X)),
    "Agree.qualified_mark": ("routes", lambda m: m.qualified_mark(X)),
    "Agree.registered_bound": ("routes", lambda m: m.registered_bound(X)),
    "Agree.registered_fsdp": ("routes", lambda m: m.registered_fsdp(X)),
    "Encoder.encode_marked": ("routes", lambda m: m.enc.encode_marked(X)),
    "Agree.loop_blocks": ("raises", lambda m: m.loop_blocks(X)),
    "Agree.index_block": ("raises", lambda m: m.index_block(X)),
    "Agree.dict_head": ("raises", lambda m: m.dict_head(X)),
    "Agree.alias_call": ("raises", lambda m: m.alias_call(X)),
    "Agree.sub_forward": ("raises", lambda m: m.sub_forward(X)),
    "Agree.self_forward": ("raises", lambda m: m.self_forward(X)),
    "Agree.indirect": ("raises", lambda m: m.indirect(X)),
    "Agree.uses_helper": ("raises", lambda m: m.uses_helper(X)),
    "Agree.checkpointed": ("raises", lambda m: m.checkpointed(X)),
    "Agree.lambda_call": ("raises", lambda m: m.lambda_call(X)),
    "Agree.sub_method": ("raises", lambda m: m.sub_method(X)),
    "Encoder.encode": ("raises", lambda m: m.enc.encode(X)),
    "Agree.describe": ("clean", lambda m: m.describe()),
    "Agree.param_count": ("clean", lambda m: m.param_count()),
    "Agree.get_encoder": ("clean", lambda m: m.get_encoder()),
    "Agree.functional": ("clean", lambda m: m.functional(X)),
    "Agree.static_helper": ("clean", lambda m: m.static_helper(X)),
    # A private helper called from forward is reached only through its callers: the linter does not
    # report it, and the runtime does not complain when forward (or a caller) runs it.
    "Agree._trunk": ("clean", lambda m: m(X)),
}


def runtime_verdict(probe) -> str:
    model = Agree()
    register_marks(model)
    ddp = guard(DDP(model, find_unused_parameters=True))
    calls = [0]
    ddp.register_forward_pre_hook(lambda *_: calls.__setitem__(0, calls[0] + 1))
    try:
        probe(model)
    except UnmarkedEntryError:
        return "raises"
    if probe is EXPECTED["Agree._trunk"][1]:
        return "clean" if calls[0] == 0 else "routes"
    return "routes" if calls[0] else "clean"


def test_every_method_is_in_the_table() -> None:
    import inspect

    from shim_agreement_models import Encoder

    names = {f"{cls.__name__}.{n}" for cls in (Agree, Encoder) for n, v in vars(cls).items()
             if (inspect.isfunction(v) or isinstance(v, staticmethod)) and n not in ("__init__", "forward")}
    assert names == set(EXPECTED)


@pytest.mark.parametrize("symbol", sorted(EXPECTED))
def test_runtime_verdict(symbol: str) -> None:
    expected, probe = EXPECTED[symbol]
    assert runtime_verdict(probe) == expected


def _lint_verdicts() -> dict[str, str]:
    proc = subprocess.run([sys.executable, "-m", "lint_rules.cli", "--format", "json", "--no-cache", FIXTURE],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    report = json.loads(proc.stdout)
    assert report["errors"] == [], report["errors"]
    return {d["symbol"]: d["code"] for d in report["diagnostics"]}


def test_static_verdict_equals_runtime_verdict() -> None:
    reported = _lint_verdicts()
    assert set(reported.values()) <= {"FWD001"}, reported
    static = {
        symbol: "raises" if symbol in reported else ("routes" if expected == "routes" else "clean")
        for symbol, (expected, _) in EXPECTED.items()
    }
    runtime = {symbol: runtime_verdict(probe) for symbol, (_, probe) in EXPECTED.items()}
    assert set(reported) <= set(EXPECTED), set(reported) - set(EXPECTED)
    assert static == runtime
