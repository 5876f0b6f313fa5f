"""Issue 33's first-contact kinds as users meet them: the same fixture project with the package it
imports missing (FWD005, checked by ``test_fixtures``) and installed (the real verdicts, here), in a
real virtual environment read with ``--python``, from the CLI and from flake8; and an environment
without torch, as a pre-commit hook without the project's environment has."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from fixture_cases import FIXTURES, flake8_rows, python_with_package, run_cli, run_flake8

VIT = """\
import torch.nn as nn


class PatchEmbed(nn.Module):
    def __init__(self, dim=8):
        super().__init__()
        self.proj = nn.Conv2d(3, dim, 4, 4)

    def forward(self, x):
        return self.proj(x).flatten(2).transpose(1, 2)


class VisionTransformer(nn.Module):
    def __init__(self, dim=8, depth=2):
        super().__init__()
        self.patch_embed = PatchEmbed(dim)
        self.blocks = nn.Sequential(*[nn.Linear(dim, dim) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, 10)

    def forward_features(self, x):
        return self.norm(self.blocks(self.patch_embed(x)))

    def forward_head(self, x, pre_logits=False):
        x = x.mean(dim=1)
        return x if pre_logits else self.head(x)

    def forward(self, x):
        return self.forward_head(self.forward_features(x))
"""
#: A stand-in for timm 1.0's VisionTransformer: its submodules and its two forward halves.
TIMM_VIT = {"timm/__init__.py": "", "timm/models/__init__.py": "from .vision_transformer import VisionTransformer\n",
            "timm/models/vision_transformer.py": VIT}
#: A stand-in for torchvision's ``box_iou``: a plain function.
TORCHVISION_BOXES = {"torchvision/__init__.py": "", "torchvision/ops/__init__.py": "from .boxes import box_iou\n",
                     "torchvision/ops/boxes.py": "def box_iou(boxes1, boxes2):\n    return boxes1 @ boxes2.T\n"}


def _findings(cwd: Path, *args: str) -> list[tuple[str, int, str]]:
    proc = run_cli(cwd, "-q", *args, ".")
    assert proc.returncode in (0, 1), proc.stderr
    rows = [line.split(":", 3) for line in proc.stdout.splitlines()]
    return sorted((path, int(line), rest.split()[0]) for path, line, _, rest in rows)


def _flake8(cwd: Path, *args: str) -> list[tuple[str, int, str]]:
    proc = run_flake8(cwd, "--select", "FWD", *args, ".")
    assert proc.returncode in (0, 1), proc.stderr
    return sorted((path, line, code) for path, line, _, code, _ in flake8_rows(proc))


@pytest.fixture
def backbone(tmp_path: Path) -> Path:
    return Path(shutil.copytree(FIXTURES / "fwd005" / "backbone_not_installed", tmp_path / "project"))


def test_with_the_backbone_installed_its_four_methods_are_found(tmp_path: Path, backbone: Path) -> None:
    model = "captioner/model.py"
    assert _findings(backbone) == [(model, 3, "FWD005"), (model, 32, "FWD001")]  # timm is not where it reads
    python = python_with_package(tmp_path / "env", TIMM_VIT)
    found = [(model, line, "FWD001") for line in (17, 20, 26, 29, 32)]  # patches, encode, pooled, features, caption
    assert _findings(backbone, "--python", str(python)) == found
    assert _flake8(backbone, f"--fwd-python-executable={python}") == found


def test_a_plain_function_installed_is_no_module(tmp_path: Path) -> None:
    project = Path(shutil.copytree(FIXTURES / "fwd005" / "dynamic_imports", tmp_path / "project"))
    loss = "detection/loss.py"
    python = python_with_package(tmp_path / "env", TORCHVISION_BOXES)
    # box_iou is read and is a function: overlaps is clean; the optional import stays unread
    assert _findings(project, "--python", str(python)) == [(loss, 25, "FWD005"), (loss, 31, "FWD001")]


NO_TORCH_PROJECT = """\
import torch.nn as nn


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.head = nn.Linear(2, 2)

    def forward(self, x):
        return self.head(x)

    def generate(self, x):
        return self(x)

    def logits(self, x):
        return self.head(x)
"""


def test_without_torch_where_it_reads_the_gap_is_said(tmp_path: Path) -> None:
    """A pre-commit hook's environment has no torch: ``self(...)`` needs none to be found, whether
    ``nn.Linear`` is a module does, and the finding says where to point fwdlint instead."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "gpt.py").write_text(NO_TORCH_PROJECT)
    python = python_with_package(tmp_path / "env", {"placeholder.py": ""}, torch=False)
    proc = run_cli(tmp_path, "-q", "--python", str(python), "--show-source", "gpt.py")
    assert proc.stdout.count("gpt.py:") == 2, proc.stdout
    assert "gpt.py:12:9: FWD001 GPT.generate" in proc.stdout
    assert "gpt.py:1:1: FWD005 package 'torch' is not installed in venv" in proc.stdout
    assert "GPT.logits is unchecked" in proc.stdout and "point --python" in proc.stdout
    assert _findings(tmp_path) == [("gpt.py", 12, "FWD001"), ("gpt.py", 15, "FWD001")]  # fwdlint's own has torch


def test_statistics_count_classes_checked_completely(tmp_path: Path, backbone: Path) -> None:
    for _ in range(2):  # the second run reuses the first's findings, and its count
        proc = run_cli(backbone, "--statistics", ".")
        assert proc.stdout.endswith("module classes: 1 checked completely, 1 partly unchecked (FWD005)\n"), proc.stdout
