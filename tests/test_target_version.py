"""Syntax is judged for the Python the checked project runs on (its environment, or ``--python``),
not the interpreter running fwdlint: PEP 695 code is valid for a project whose ``.venv`` is 3.12
although fwdlint runs on 3.11, and invalid for one whose ``.venv`` is 3.11. Real ``python -m venv``
environments of pyenv's interpreters; fwdlint runs in a fresh process each time."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Optional

import pytest

PEP_695 = "type Vec[T] = list[T]\n\n\ndef first[T](xs: list[T]) -> T:\n    return xs[0]\n"
MODEL_695 = ("import torch.nn as nn\n\n\nclass Box[T](nn.Module):\n    def generate(self, x: T) -> T:\n"
             "        return self(x)\n")


def _interpreter(version: str) -> Optional[str]:
    """pyenv's interpreter of that version, else one on PATH (not pyenv's shim: it runs only the
    versions a project selects)."""
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    for found in sorted(glob.glob(str(pyenv / "versions" / f"{version}.*" / "bin" / f"python{version}"))):
        return found
    found = shutil.which(f"python{version}")
    return found if found and "shims" not in Path(found).parts else None


def _need(version: str) -> str:
    found = _interpreter(version)
    if found is None:
        if os.environ.get("CI"):  # CI's machine has pyenv's interpreters: their absence is a failure there
            pytest.fail(f"no Python {version} found (PATH, pyenv)")
        pytest.skip(f"no Python {version} on this machine")
    return found


def _project(tmp_path: Path, venv_version: str) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "pyproject.toml").write_text("")
    (root / "typed.py").write_text(PEP_695)
    (root / "model.py").write_text(MODEL_695)
    subprocess.run([_need(venv_version), "-m", "venv", "--without-pip", str(root / ".venv")], check=True)
    return root


def _fwdlint(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX")}
    return subprocess.run([sys.executable, "-m", "lint_rules", *args], cwd=cwd, capture_output=True, text=True,
                          env=env, timeout=120)


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="fwdlint must run on an interpreter older than 3.12")
def test_pep_695_is_valid_for_a_312_project(tmp_path: Path) -> None:
    root = _project(tmp_path, "3.12")
    proc = _fwdlint(root, ".")
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr == ""
    assert [line.split(" ", 2)[:2] for line in proc.stdout.splitlines()] == [["model.py:5:9:", "FWD001"]]


def test_pep_695_is_a_syntax_error_for_a_311_project(tmp_path: Path) -> None:
    root = _project(tmp_path, "3.11")
    proc = _fwdlint(root, ".")
    assert proc.returncode == 2, proc.stderr
    assert [line.split(":")[0] for line in proc.stderr.splitlines()] == ["model.py", "typed.py"], proc.stderr
    assert "syntax error" in proc.stderr


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="fwdlint must run on an interpreter older than 3.12")
def test_the_cached_verdict_follows_the_target(tmp_path: Path) -> None:
    """One cache, two targets in turn (``--python``): each gets its own verdict, in either order."""
    root = _project(tmp_path, "3.11")
    subprocess.run([_need("3.12"), "-m", "venv", "--without-pip", str(tmp_path / "venv312")], check=True)
    for _ in range(2):
        newer = _fwdlint(root, "--python", str(tmp_path / "venv312" / "bin" / "python"), "typed.py")
        older = _fwdlint(root, "--python", str(root / ".venv" / "bin" / "python"), "typed.py")
        assert (newer.returncode, newer.stderr) == (0, "")
        assert older.returncode == 2 and older.stderr.startswith("typed.py: error: syntax error"), older.stderr
