"""Public API surface: imports, decorator, mark validation (ported from Fabric's behaviour), modes."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from typing import Any

import pytest
import torch
from torch import nn

import runtime_shim
from lint_rules.contract import MARK_ATTRIBUTE
from runtime_shim import UnmarkedEntryError, forward_entry, guard, mark_forward_method
from lint_rules.contract import mode_from_env

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_decorator_and_error_import_without_torch() -> None:
    code = (
        "import sys; from runtime_shim import forward_entry, UnmarkedEntryError;"
        "\n@forward_entry\ndef generate(self): pass\n"
        "assert 'torch' not in sys.modules, 'torch imported';"
        "assert issubclass(UnmarkedEntryError, RuntimeError)"
    )
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, timeout=60)


def test_public_names() -> None:
    names = ("forward_entry", "mark_forward_method", "guard", "install", "uninstall", "UnmarkedEntryError")
    for name in names:
        assert callable(getattr(runtime_shim, name)), name
    from runtime_shim import install, uninstall

    assert install.__module__ == "runtime_shim.installer" and uninstall.__module__ == "runtime_shim.installer"
    assert issubclass(UnmarkedEntryError, RuntimeError)


class Plain(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.attribute = 1

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(x)

    @forward_entry
    def generate(self, x: torch.Tensor) -> torch.Tensor:
        return self(x) * 2

    @torch.no_grad()
    @forward_entry
    def no_grad_inner(self, x: torch.Tensor) -> torch.Tensor:
        return self(x)

    @forward_entry
    @torch.inference_mode()
    def inference_outer(self, x: torch.Tensor) -> torch.Tensor:
        return self(x)

    def method(self) -> int:
        return 2

    @staticmethod
    def static() -> int:
        return 3

    def gen(self):  # a generator method
        yield self(torch.zeros(1, 3))


def test_decorator_changes_nothing_on_an_unwrapped_module() -> None:
    m = Plain()
    assert Plain.__dict__["generate"].__name__ == "generate"
    assert getattr(Plain.generate, MARK_ATTRIBUTE) is True
    assert "generate" not in m.__dict__ and "forward" not in m.__dict__
    x = torch.randn(2, 3)
    assert torch.equal(m.generate(x), m(x) * 2)
    assert not m.no_grad_inner(x).requires_grad and not m.inference_outer(x).requires_grad
    assert getattr(Plain.no_grad_inner, MARK_ATTRIBUTE) and getattr(Plain.inference_outer, MARK_ATTRIBUTE)


async def _async_method(self: Any, x: Any) -> Any:
    return self(x)


def test_decorator_rejections() -> None:
    with pytest.raises(ValueError, match="cannot mark forward"):
        forward_entry(Plain.forward)
    with pytest.raises(TypeError, match="cannot mark generator .*gen.* cannot be routed"):
        forward_entry(Plain.gen)
    with pytest.raises(TypeError, match="cannot mark generator"):
        @forward_entry
        @torch.no_grad()
        def stream(self):
            yield 1
    with pytest.raises(TypeError, match="cannot mark async method .*agen.* when it is awaited"):
        @forward_entry
        async def agen(self):
            return 1
    with pytest.raises(TypeError, match="cannot mark async method"):
        @forward_entry
        @functools.wraps(Plain.method)
        async def wrapped(self):
            return 1
    with pytest.raises(TypeError, match="not a staticmethod"):
        forward_entry(staticmethod(lambda: 1))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="expects a function"):
        forward_entry(1)  # type: ignore[arg-type]


def test_mark_forward_method_validation() -> None:
    m = Plain()
    with pytest.raises(TypeError, match="Expected a method or a string, but got: int"):
        mark_forward_method(m, 1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Expected a method or a string, but got: function"):
        mark_forward_method(m, Plain.method)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="You cannot mark the forward method itself"):
        mark_forward_method(m, "forward")
    with pytest.raises(ValueError, match="You cannot mark the forward method itself"):
        mark_forward_method(m, m.forward)
    missing = r"You marked 'not_exist' as a forward method, but `Plain.not_exist`"
    with pytest.raises(AttributeError, match=missing):
        mark_forward_method(m, "not_exist")
    with pytest.raises(AttributeError, match=r"`Plain.attribute` does not exist or is not a method"):
        mark_forward_method(m, "attribute")
    with pytest.raises(AttributeError, match=r"`Plain.static` does not exist or is not a method"):
        mark_forward_method(m, "static")
    with pytest.raises(AttributeError, match=r"`Plain.lin` does not exist or is not a method"):
        mark_forward_method(m, "lin")
    with pytest.raises(TypeError, match="cannot mark generator"):
        mark_forward_method(m, "gen")
    m.__class__ = type("WithAsync", (Plain,), {"agen": _async_method})
    with pytest.raises(TypeError, match="cannot mark async method"):
        mark_forward_method(m, "agen")
    m.__class__ = Plain
    with pytest.raises(ValueError, match="not part of"):
        mark_forward_method(m, Plain().method)
    mark_forward_method(m, "method")
    mark_forward_method(m, m.generate)  # a bound method works as well as its name
    mark_forward_method(m.lin, "extra_repr")  # on a submodule (odd but valid)
    with pytest.raises(TypeError, match="expects a module"):
        mark_forward_method(object(), "x")


def test_guard_validation() -> None:
    with pytest.raises(TypeError, match="guard\\(\\) expects DistributedDataParallel"):
        guard(Plain())
    with pytest.raises(ValueError, match="mode must be one of"):
        guard(Plain(), mode="loud")


def test_mode_from_env() -> None:
    assert mode_from_env({}) == "error"
    assert mode_from_env({"FWD_SHIM_MODE": " WARN "}) == "warn"
    assert mode_from_env({"FWD_SHIM_MODE": "off"}) == "off"
    with pytest.raises(ValueError, match="FWD_SHIM_MODE='loud'"):
        mode_from_env({"FWD_SHIM_MODE": "loud"})
