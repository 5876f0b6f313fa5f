"""FWD003's word on ``runtime_shim.mark_forward_method`` given a ``torch.nn.DataParallel``: the error
it quotes is the one the shim raises, and the method is not routed (DataParallel is no wrapper the
shim supports, so ``--fix`` never registers there)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

from _shim_dist import ROOT

SCRIPT = """import torch.nn as nn
from runtime_shim import mark_forward_method


class Net(nn.Module):
    def forward(self, x):
        return x

    def generate(self, x):
        return self(x)


dp = nn.DataParallel(Net())
mark_forward_method(dp, "generate")
"""


class Net(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x

    def generate(self, x: torch.Tensor) -> torch.Tensor:
        return self(x)


def test_the_quoted_error_is_the_runtime_error(tmp_path: Path) -> None:
    from runtime_shim import mark_forward_method

    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "train.py").write_text(SCRIPT)
    proc = subprocess.run([sys.executable, "-m", "lint_rules.cli", "--select", "FWD003", "--format", "json",
                           "train.py"], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": ROOT, "PATH": ""})
    assert proc.returncode == 1, proc.stderr
    [finding] = json.loads(proc.stdout)["diagnostics"]
    quoted = finding["help"].split("it raises AttributeError: ", 1)[1]  # the help quotes the error
    with pytest.raises(AttributeError) as raised:
        mark_forward_method(nn.DataParallel(Net()), "generate")
    assert str(raised.value) == quoted
