"""Editors pipe the buffer on standard input: ``fwdlint --stdin-filename PATH -`` and ``flake8
--stdin-display-name PATH -`` lint that text as the file at PATH (its configuration, per-file-ignores
and project), in place of what is on disk; ``--fix -`` prints the fixed text."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from fixture_cases import FLAKE8_FORMAT, flake8_rows

ON_DISK = ("import torch.nn as nn\nfrom runtime_shim import forward_entry\n\n\nclass GPT(nn.Module):\n"
           "    def forward(self, x):\n        return x\n\n    @forward_entry\n    def generate(self, x):\n"
           "        return self(x)\n")
BUFFER = ("import torch.nn as nn\n\n\nclass GPT(nn.Module):\n    def forward(self, x):\n        return x\n\n"
          "    def generate(self, x):\n        return self(x)\n\n    def sample(self, x):\n        return self(x)\n")
TRAIN = ("from lightning.fabric import Fabric\n\nfrom mypkg.model import GPT\n\n\ndef main(fabric: Fabric):\n"
         "    model = fabric.setup(GPT())\n    model.mark_forward_method(\"sample\")\n    model.sample(1)\n")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "mypkg").mkdir()
    (tmp_path / "mypkg" / "__init__.py").write_text("")
    (tmp_path / "mypkg" / "model.py").write_text(ON_DISK)
    (tmp_path / "train.py").write_text(TRAIN)  # registers sample: the project view must be the file's
    return tmp_path


def _run(project: Path, *args: str, text: str = BUFFER) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], cwd=project, input=text, capture_output=True, text=True,
                          timeout=120)


def test_the_buffer_is_linted_as_the_file_it_stands_for(project: Path) -> None:
    cli = _run(project, "-m", "lint_rules.cli", "--stdin-filename", "mypkg/model.py", "-")
    assert cli.returncode == 1, cli.stderr
    # generate is unmarked in the buffer (marked on disk); sample is registered in train.py
    assert [line.split(" ", 2)[:2] for line in cli.stdout.splitlines()] == [["mypkg/model.py:8:9:", "FWD001"]]
    flake8 = _run(project, "-m", "flake8", f"--format={FLAKE8_FORMAT}", "--select", "FWD", "--stdin-display-name",
                  "mypkg/model.py", "-")
    assert [(p, r, c, code) for p, r, c, code, _ in flake8_rows(flake8)] == [("mypkg/model.py", 8, 9, "FWD001")]
    assert (project / "mypkg" / "model.py").read_text() == ON_DISK


def test_the_configuration_and_per_file_ignores_of_that_path_apply(project: Path) -> None:
    (project / "pyproject.toml").write_text('[tool.fwdlint]\nper-file-ignores = { "mypkg/*" = ["FWD001"] }\n')
    assert _run(project, "-m", "lint_rules.cli", "--stdin-filename", "mypkg/model.py", "-").returncode == 0
    other = _run(project, "-m", "lint_rules.cli", "--stdin-filename", "scripts/gen.py", "-")
    assert other.returncode == 1 and other.stdout.startswith("scripts/gen.py:8:9: FWD001")


def test_fix_prints_the_fixed_text_and_writes_nothing(project: Path) -> None:
    fixed = _run(project, "-m", "lint_rules.cli", "--fix", "--stdin-filename", "mypkg/model.py", "-")
    assert (fixed.returncode, fixed.stderr) == (0, "")
    imported = "import torch.nn as nn\nfrom runtime_shim import forward_entry\n"
    marked = BUFFER.replace("import torch.nn as nn\n", imported)
    assert fixed.stdout == marked.replace("    def generate", "    @forward_entry\n    def generate")
    assert (project / "mypkg" / "model.py").read_text() == ON_DISK
    clean = _run(project, "-m", "lint_rules.cli", "--fix", "--stdin-filename", "mypkg/model.py", "-", text=fixed.stdout)
    assert (clean.returncode, clean.stdout) == (0, fixed.stdout)  # nothing left: the text comes back as it was
    generator = BUFFER.replace("        return self(x)\n\n    def sample", "        yield self(x)\n\n    def sample")
    left = _run(project, "-m", "lint_rules.cli", "--fix", "--stdin-filename", "mypkg/model.py", "-", text=generator)
    assert left.returncode == 1 and left.stdout == generator
    assert left.stderr.startswith("mypkg/model.py:8:9: FWD001 not fixed: @forward_entry cannot mark generator")


@pytest.mark.parametrize("args, message", [
    (("-", "mypkg"), "fwdlint: error: - (standard input) must be the only path"),
    (("--stdin-filename", "m.py", "mypkg"), "fwdlint: error: --stdin-filename names what - (standard input) stands "
                                            "for: give - as the path"),
    (("--fix", "--format", "json", "-"), "fwdlint: error: --fix of standard input prints the fixed text: --format "
                                         "must be text"),
])
def test_standard_input_used_wrongly_is_one_line_and_exit_2(project: Path, args: tuple[str, ...],
                                                            message: str) -> None:
    proc = _run(project, "-m", "lint_rules.cli", *args)
    assert (proc.returncode, proc.stdout, proc.stderr) == (2, "", message + "\n")
