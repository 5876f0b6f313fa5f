"""``--python``: bases and attribute types are resolved through another interpreter's installed
packages (read, never imported); a bad interpreter is a one-line usage error."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fixture_cases import python_with_package

from lint_rules import environment

REPO = Path(__file__).resolve().parents[1]

INSTALLED_BASE = '''\
import torch.nn as nn

raise RuntimeError("fwdlint imported an installed package")


class Base(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Linear(2, 2)

    def encode(self, x):
        return self.enc(x)
'''

USER = '''\
from extpkg.base import Base


class Model(Base):
    def run(self, x):
        return self.encode(x)
'''


@pytest.fixture(scope="module")
def other_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtual environment (no pip) with a package fwdlint's own environment does not have."""
    return python_with_package(tmp_path_factory.mktemp("env"), {"extpkg/__init__.py": "",
                                                                 "extpkg/base.py": INSTALLED_BASE})


def _cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "lint_rules.cli", *args], cwd=cwd, capture_output=True,
                          text=True, env=env, stdin=subprocess.DEVNULL)


def test_installed_base_resolved_through_python(tmp_path: Path, other_python: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "user.py").write_text(USER)
    for _ in range(2):  # the second run reads the installed file from the cache
        proc = _cli(tmp_path, "--python", str(other_python), "--format", "json", "user.py")
        payload = json.loads(proc.stdout)
        assert proc.returncode == 1, proc.stderr
        [found] = payload["diagnostics"]
        assert found["symbol"] == "Model.run" and "run -> encode -> self.enc(...)" in found["message"]
        assert payload["stats"]["installed_files_read"] >= 1


def test_without_the_environment_the_base_is_unknown(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "user.py").write_text(USER)
    proc = _cli(tmp_path, "user.py")
    assert (proc.returncode, proc.stdout) == (0, ""), proc.stderr


def test_virtual_env_is_the_default(tmp_path: Path, other_python: Path) -> None:
    found = environment.find(environ={"VIRTUAL_ENV": str(other_python.parent.parent)})
    assert (found.python, found.kind, found.source) == (str(other_python), "venv", "$VIRTUAL_ENV")
    assert found.version == sys.version_info[:2]  # the target Python, from pyvenv.cfg
    assert any((root / "extpkg").is_dir() for root in found.roots)
    assert not any(root.name.startswith("python3") for root in found.roots)  # the standard library is left out


@pytest.mark.parametrize("bad", ["/nonexistent/python", "/etc/hostname"])
def test_bad_interpreter_is_one_line_usage_error(tmp_path: Path, bad: str) -> None:
    (tmp_path / "user.py").write_text(USER)
    proc = _cli(tmp_path, "--python", bad, "user.py")
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"fwdlint: error: --python {bad}: ") and proc.stderr.count("\n") == 1


def test_a_configured_interpreter_is_relative_to_the_config_file(tmp_path: Path, other_python: Path) -> None:
    # `fwd-python-executable = ../env/venv/bin/python` in setup.cfg means the same from any
    # subdirectory, for the CLI and for flake8 (which resolves option paths against the config file)
    project = tmp_path / "project"
    (project / "sub").mkdir(parents=True)
    relative = os.path.relpath(other_python, project)
    (project / "setup.cfg").write_text(f"[flake8]\nfwd-python-executable = {relative}\n")
    (project / "sub" / "user.py").write_text(USER)
    proc = _cli(project / "sub", "user.py")
    assert proc.returncode == 1 and "user.py:5:9: FWD001 Model.run" in proc.stdout, proc.stderr
    flake8 = subprocess.run([sys.executable, "-m", "flake8", "--select", "FWD", "user.py"], cwd=project / "sub",
                            capture_output=True, text=True, stdin=subprocess.DEVNULL,
                            env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)})
    assert flake8.returncode == 1 and "user.py:5:9: FWD001 Model.run" in flake8.stdout, flake8.stderr
