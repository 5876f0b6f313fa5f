"""``runtime_shim.empty_init``: what it skips, that compiled code runs inside it, and its scoping.

Lightning's ``_EmptyInit`` does not fail any more on the pinned torch 2.13.0 (see the docstring of
``runtime_shim/init_context.py`` and ``benchmarks/empty_init.py --only repro``), so there is no
"Lightning's fails, ours passes" test; ours is checked under ``fullgraph=True`` directly.
"""

from __future__ import annotations

import shutil
import threading
from typing import Any, Callable

import pytest
import torch
from lightning.fabric.utilities.init import _EmptyInit
from torch import nn

from runtime_shim import empty_init

pytestmark = pytest.mark.timeout(180)


def stack_depth() -> int:
    return torch._C._len_torch_function_stack()


class Filled(nn.Module):
    """A parameter created as zeros whose ``reset_parameters`` fills 7 through ``torch.nn.init``:
    0 afterwards means the initialisation was skipped, 7 that it ran (no uninitialised memory)."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(3))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.constant_(self.weight, 7.0)


def initialised(m: Filled) -> bool:
    value = float(m.weight[0].detach())
    assert value in (0.0, 7.0)
    return value == 7.0


def linear_draws_random_numbers() -> bool:
    """``nn.Linear`` initialises with kaiming_uniform_/uniform_: skipping them leaves the RNG alone."""
    before = torch.get_rng_state()
    nn.Linear(16, 16)
    return not torch.equal(before, torch.get_rng_state())


def test_initialisation_skipped_inside_and_runs_after() -> None:
    with empty_init():
        assert not initialised(Filled())
        assert not linear_draws_random_numbers()
    assert stack_depth() == 0
    assert initialised(Filled())
    assert linear_draws_random_numbers()


def test_enabled_false_is_a_true_no_op() -> None:
    torch.manual_seed(0)
    expected = nn.Linear(16, 16).weight.detach().clone()
    with empty_init(enabled=False):
        assert stack_depth() == 0  # no mode pushed at all
        assert initialised(Filled())
        torch.manual_seed(0)
        assert torch.equal(nn.Linear(16, 16).weight, expected)


def test_mode_popped_after_exception() -> None:
    with pytest.raises(ValueError, match="inside"):
        with empty_init():
            raise ValueError("inside")
    assert stack_depth() == 0
    assert initialised(Filled())


def test_nested_contexts() -> None:
    with empty_init():
        with empty_init():
            assert stack_depth() == 2
            assert not initialised(Filled())
        # leaving the inner block leaves the outer one in force
        assert stack_depth() == 1
        assert not initialised(Filled())
        # enabled=False does not re-enable initialisation (as _EmptyInit(False) inside _EmptyInit(True))
        with empty_init(enabled=False):
            assert not initialised(Filled())
    assert stack_depth() == 0
    assert initialised(Filled())


def test_other_threads_initialise_normally() -> None:
    entered, built = threading.Event(), threading.Event()
    seen: dict[str, bool] = {}

    def holder() -> None:
        with empty_init():
            entered.set()
            built.wait(30)
            seen["holder"] = initialised(Filled())

    def other() -> None:
        entered.wait(30)
        seen["other"] = initialised(Filled())
        built.set()

    threads = [threading.Thread(target=holder), threading.Thread(target=other)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert seen == {"holder": False, "other": True}


def test_usable_as_decorator() -> None:
    @empty_init()
    def build() -> Filled:
        return Filled()

    assert not initialised(build())
    assert not initialised(build())  # a fresh context per call
    assert stack_depth() == 0


# Every in-place initialiser of torch.nn.init with arguments it accepts.
_INIT_CALLS: dict[str, tuple[tuple[int, ...], dict[str, Any]]] = {
    "constant_": ((4, 4), {"val": 3.0}),
    "dirac_": ((4, 4, 3), {}),
    "sparse_": ((4, 4), {"sparsity": 0.5}),
}


def skipped_initialisers(context: Callable[[], Any]) -> set[str]:
    names = sorted(n for n in vars(nn.init) if n.endswith("_") and not n.startswith("_"))
    assert {"uniform_", "normal_", "kaiming_uniform_", "xavier_uniform_", "trunc_normal_"} <= set(names)
    skipped = set()
    for name in names:
        shape, kwargs = _INIT_CALLS.get(name, ((4, 4), {}))
        tensor = torch.full(shape, 0.5)
        with context():
            getattr(nn.init, name)(tensor, **kwargs)
        if torch.all(tensor == 0.5):
            skipped.add(name)
    return skipped


def test_skips_exactly_what_lightning_skips() -> None:
    ours = skipped_initialisers(empty_init)
    assert ours == skipped_initialisers(lambda: _EmptyInit(enabled=True))
    # what nn.Linear, nn.Conv*, nn.Embedding and the RNNs use; the others do not reach
    # __torch_function__ under their own name in torch 2.13 and run in both helpers.
    assert {"uniform_", "normal_", "constant_", "kaiming_uniform_"} <= ours
    assert skipped_initialisers(lambda: empty_init(enabled=False)) == set()


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(16, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.fc1(x)) + torch.zeros_like(self.fc1.bias)  # a factory call too
        return self.fc2(h) * 2


class Owner(nn.Module):
    """Compiles its submodule in ``__init__`` and runs it there (the pattern of Lightning issue
    #20524), so the compiled call happens inside the init context."""

    def __init__(self, backend: str, source: nn.Module) -> None:
        super().__init__()
        self.block = Block()
        self.block.load_state_dict(source.state_dict())  # stands in for loading a checkpoint
        self.compiled = torch.compile(self.block, fullgraph=True, backend=backend)
        self.probe = self.compiled(torch.ones(2, 8))


_BACKENDS = [
    "eager",
    pytest.param(
        "inductor",
        marks=pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None, reason="no C compiler"),
    ),
]


@pytest.mark.parametrize("backend", _BACKENDS)
def test_compiled_submodule_runs_inside_with_fullgraph(backend: str) -> None:
    torch._dynamo.reset()
    source = Block()
    x = torch.randn(3, 8)
    with empty_init():
        owner = Owner(backend, source)
        assert stack_depth() == 1  # still inside: the compiled calls ran under the mode
        inside = owner.compiled(x)
    torch.testing.assert_close(owner.probe, source(torch.ones(2, 8)))
    torch.testing.assert_close(inside, source(x))
