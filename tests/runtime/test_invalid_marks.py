"""FWD003 against the real runtime: each program is linted (``--select FWD003``) and run (class
definitions, then ``main(fabric)`` with a real single-device Lightning Fabric). Where fwdlint says a
mark fails with ``<Error>: <message>``, running it raises exactly that; where it says a mark does
nothing, running it raises nothing and nothing is routed; where it says nothing, nothing fails."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, Optional

import pytest

from _shim_dist import ROOT

pytestmark = pytest.mark.timeout(120)

HEADER = """
import functools
import torch
import torch.nn as nn
from runtime_shim import forward_entry, inference_entry, mark_forward_method


class Base(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(2, 2)
        self.size = 2

    def forward(self, x):
        return self.lin(x)

"""

PROGRAMS = {
    "decorated_forward": """
class M(Base):
    @forward_entry
    def forward(self, x):
        return self.lin(x)
""",
    "over_staticmethod": """
class M(Base):
    @forward_entry
    @staticmethod
    def build(x):
        return x
""",
    "over_classmethod": """
class M(Base):
    @inference_entry
    @classmethod
    def build(cls, x):
        return x
""",
    "over_property": """
class M(Base):
    @forward_entry
    @property
    def width(self):
        return self.lin(torch.ones(2))
""",
    "over_cached_property": """
class M(Base):
    @forward_entry
    @functools.cached_property
    def width(self):
        return 2
""",
    "under_staticmethod": """
class M(Base):
    @staticmethod
    @forward_entry
    def build(x):
        return x
""",
    "generator": """
class M(Base):
    @forward_entry
    def stream(self, x):
        yield self(x)
""",
    "not_a_module": """
class Helper:
    @forward_entry
    def run(self, x):
        return x
""",
    "fine": """
class M(Base):
    @forward_entry
    def generate(self, x):
        return self(x)


def main(fabric):
    model = fabric.setup(M())
    model.mark_forward_method("generate")
    mark_forward_method(M(), "generate")
""",
    "fabric_forward": """
def main(fabric):
    model = fabric.setup(Base())
    model.mark_forward_method("forward")
""",
    "shim_forward": """
def main(fabric):
    model = Base()
    mark_forward_method(model, "forward")
""",
    "fabric_missing": """
def main(fabric):
    model = fabric.setup(Base())
    model.mark_forward_method("generate")
""",
    "fabric_attribute": """
def main(fabric):
    model = fabric.setup(Base())
    model.mark_forward_method("size")
""",
    "fabric_staticmethod": """
class M(Base):
    @staticmethod
    def build(x):
        return x


def main(fabric):
    model = fabric.setup(M())
    model.mark_forward_method("build")
""",
    "shim_classmethod": """
class M(Base):
    @classmethod
    def build(cls, x):
        return x


def main(fabric):
    model = M()
    mark_forward_method(model, "build")
""",
    "fabric_other_class": """
class Other(Base):
    def sample(self, x):
        return self(x)


def main(fabric):
    model = fabric.setup(Base())
    model.mark_forward_method("sample")
""",
}

_FAILS = re.compile(r"; it raises (TypeError|ValueError|AttributeError): (.*)$")  # FWD003's help quotes the error


def _static(tmp_path: Path, name: str) -> list[str]:
    directory = tmp_path / name
    directory.mkdir()
    (directory / "pyproject.toml").write_text("")
    (directory / "program.py").write_text(HEADER + textwrap.dedent(PROGRAMS[name]))
    proc = subprocess.run([sys.executable, "-m", "lint_rules.cli", "--format", "json", "--select", "FWD003",
                           "program.py"], cwd=directory, capture_output=True, text=True, timeout=100,
                          env={"PYTHONPATH": ROOT, "PATH": ""})
    report = json.loads(proc.stdout)
    assert report["errors"] == []
    return [f"{d['message']}; {d['help']}" if d["help"] else d["message"] for d in report["diagnostics"]]


def _runtime(name: str) -> tuple[Optional[str], Optional[str], dict[str, Any]]:
    from lightning.fabric import Fabric

    namespace: dict[str, Any] = {"__name__": f"program_{name}"}
    try:
        exec(compile(HEADER + textwrap.dedent(PROGRAMS[name]), f"{name}.py", "exec"), namespace)
        if "main" in namespace:
            namespace["main"](Fabric(accelerator="cpu", devices=1))
    except (TypeError, ValueError, AttributeError) as error:
        return type(error).__name__, str(error), namespace
    return None, None, namespace


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_static_verdict_is_the_runtime_verdict(name: str, tmp_path: Path) -> None:
    from runtime_shim.record import class_marks

    messages = _static(tmp_path, name)
    kind, text, namespace = _runtime(name)
    if not messages:
        assert kind is None, (name, kind, text)
        return
    [message] = messages
    failing = _FAILS.search(message)
    if failing is not None:
        assert (kind, text) == (failing.group(1), failing.group(2)), message
    else:  # "does nothing": accepted, and nothing is routed
        assert "does nothing" in message and kind is None, (message, kind, text)
        module_classes = [v for v in namespace.values() if isinstance(v, type) and "nn.Module" in str(v.__mro__)]
        assert all(not class_marks(cls) for cls in module_classes if cls.__module__ == namespace["__name__"])


def test_every_kind_of_case_is_covered(tmp_path: Path) -> None:
    verdicts = {name: _static(tmp_path, name) for name in PROGRAMS}
    assert sum(1 for m in verdicts.values() if m and _FAILS.search(m[0])) >= 10
    assert sum(1 for m in verdicts.values() if m and "does nothing" in m[0]) >= 2
    assert verdicts["fine"] == []
