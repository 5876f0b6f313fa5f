"""End to end with the real ``pre-commit`` tool: this checkout's ``.pre-commit-hooks.yaml``
used by a throwaway git repository.

pre-commit installs hook repositories from git, so the package files of the working tree
(uncommitted changes included) are copied into a temporary repository and committed there;
the user repository points ``repo:`` at that path. pre-commit then builds its own virtualenv
and pip-installs the package (libcst and flake8 only: no torch). Everything lives under
``tmp_path`` (``PRE_COMMIT_HOME`` too); git identity comes from the environment.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from fixture_cases import ROOT

pytest.importorskip("pre_commit")

#: What pip needs to install the package (see setup.cfg), plus the hook definitions.
PACKAGE_FILES = ("setup.cfg", "pyproject.toml", "README.md", ".pre-commit-hooks.yaml")
PACKAGE_DIRS = ("lint_rules", "runtime_shim")
BAD = "import torch.nn as nn\n\n\nclass GPT(nn.Module):\n    def generate(self, x):\n        return self(x)\n"
FIXED = ("import torch.nn as nn\nfrom runtime_shim import forward_entry\n\n\nclass GPT(nn.Module):\n"
         "    @forward_entry\n    def generate(self, x):\n        return self(x)\n")


def _env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "PRE_COMMIT"))}
    env.update({
        "HOME": str(tmp / "home"),
        "PRE_COMMIT_HOME": str(tmp / "pre-commit-home"),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid",
        "PRE_COMMIT_COLOR": "never",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    })
    (tmp / "home").mkdir(exist_ok=True)
    return env


def _run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def _git(cwd: Path, env: dict[str, str], *args: str) -> str:
    proc = _run(["git", "-c", "init.defaultBranch=main", *args], cwd, env)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def _hook_repo(tmp: Path, env: dict[str, str]) -> tuple[Path, str]:
    repo = tmp / "hooks"
    repo.mkdir()
    for name in PACKAGE_FILES:
        shutil.copy2(ROOT / name, repo / name)
    for name in PACKAGE_DIRS:
        shutil.copytree(ROOT / name, repo / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    _git(repo, env, "init", "-q")
    _git(repo, env, "add", "-A")
    _git(repo, env, "commit", "-q", "-m", "hooks")
    return repo, _git(repo, env, "rev-parse", "HEAD")


def _git_project(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """pre-commit's environment and an empty git repository ``project`` under ``tmp_path``."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    env = _env(tmp_path)
    project = tmp_path / "project"
    project.mkdir()
    _git(project, env, "init", "-q")
    return env, project


def _install_hooks(tmp_path: Path, env: dict[str, str], project: Path, *ids: str, verbose: bool = False) -> list[str]:
    """Configure this repository's hooks ``ids`` in ``project`` (``verbose``: with ``args: [-v]``,
    which says the environment read) and install their environment; returns the pre-commit command."""
    hooks, rev = _hook_repo(tmp_path, env)
    listed = "".join(f"  - id: {hook}\n" + ("    args: [-v]\n" if verbose else "") for hook in ids)
    config = f"repos:\n- repo: {hooks.as_posix()}\n  rev: {rev}\n  hooks:\n{listed}"
    (project / ".pre-commit-config.yaml").write_text(config)
    pre_commit = [sys.executable, "-m", "pre_commit"]
    installed = _run([*pre_commit, "install-hooks"], project, env, timeout=480)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    return pre_commit


@pytest.mark.timeout(600)
def test_pre_commit_check_and_fix_hooks(tmp_path: Path) -> None:
    env, project = _git_project(tmp_path)
    pre_commit = _install_hooks(tmp_path, env, project, "fwdlint", "fwdlint-fix")
    install = _run([*pre_commit, "install"], project, env)
    assert install.returncode == 0, install.stdout + install.stderr
    # the hook environment must not have torch
    envs = list((tmp_path / "pre-commit-home").glob("repo*/py_env-*"))
    assert envs and not list(envs[0].glob("lib/python*/site-packages/torch"))
    # the installed command with no paths checks the current directory, which has no Python file yet
    # (pre-commit itself never runs a hook with an empty file list: it skips it)
    for args in ([], ["--fix"], ["--diff"]):
        empty_list = _run([str(envs[0] / "bin" / "fwdlint"), *args], project, env)
        assert (empty_list.returncode, empty_list.stdout, empty_list.stderr) == (0, "", ""), args

    # an empty file list (no Python file in the commit) passes
    (project / "notes.txt").write_text("hello\n")
    _git(project, env, "add", "notes.txt", ".pre-commit-config.yaml")
    empty = _run(["git", "commit", "-m", "notes"], project, env, timeout=240)
    assert empty.returncode == 0, empty.stdout + empty.stderr

    # a bad commit is refused, the FWD001 line is shown, the fix hook rewrites the file
    (project / "model.py").write_text(BAD)
    _git(project, env, "add", "model.py")
    refused = _run(["git", "commit", "-m", "model"], project, env, timeout=240)
    output = refused.stdout + refused.stderr
    assert refused.returncode != 0, output
    assert "model.py:5:9: FWD001 GPT.generate runs forward computation" in output
    assert "files were modified by this hook" in output
    assert (project / "model.py").read_text() == FIXED

    # the next commit (with the fix staged) passes
    _git(project, env, "add", "model.py")
    passed = _run(["git", "commit", "-m", "model"], project, env, timeout=240)
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert _git(project, env, "show", "HEAD:model.py") + "\n" == FIXED

    # the whole project counts, not only the staged files: a registration in train.py (committed
    # earlier, not part of this commit) marks the method of a model file that is the only one staged
    (project / "train.py").write_text('from vae import VAE\n\nmodel = VAE()\nmodel.mark_forward_method("sample")\n')
    _git(project, env, "add", "train.py")
    assert _run(["git", "commit", "-m", "train"], project, env, timeout=240).returncode == 0
    (project / "vae.py").write_text(BAD.replace("GPT", "VAE").replace("generate", "sample"))
    _git(project, env, "add", "vae.py")
    with_registration = _run(["git", "commit", "-m", "vae"], project, env, timeout=240)
    assert with_registration.returncode == 0, with_registration.stdout + with_registration.stderr
    assert (project / "vae.py").read_text() == BAD.replace("GPT", "VAE").replace("generate", "sample")
    assert _git(project, env, "status", "--porcelain") == ""  # the cache directory ignores itself

    # pre-commit stashes unstaged changes: a registration not staged is not seen (the commit would
    # not have it), and staging it makes the commit pass
    (project / "train.py").write_text((project / "train.py").read_text() + 'model.mark_forward_method("decode")\n')
    (project / "vae.py").write_text(BAD.replace("GPT", "VAE").replace("generate", "sample") +
                                    "\n    def decode(self, x):\n        return self(x)\n")
    _git(project, env, "add", "vae.py")
    unstaged = _run(["git", "commit", "-m", "decode"], project, env, timeout=240)
    assert unstaged.returncode != 0, unstaged.stdout + unstaged.stderr
    assert "vae.py:8:9: FWD001 VAE.decode runs" in unstaged.stdout + unstaged.stderr
    (project / "vae.py").write_text(BAD.replace("GPT", "VAE").replace("generate", "sample") +
                                    "\n    def decode(self, x):\n        return self(x)\n")  # undo the fix hook
    _git(project, env, "add", "vae.py", "train.py")
    staged = _run(["git", "commit", "-m", "decode"], project, env, timeout=240)
    assert staged.returncode == 0, staged.stdout + staged.stderr


INSTALLED_BASE = "from torch import nn\n\n\nclass Base(nn.Module):\n    pass\n"
USES_INSTALLED = ("from extpkg.base import Base\n\n\nclass Model(Base):\n    def generate(self, x):\n"
                  "        return self(x)\n")


@pytest.mark.timeout(600)
def test_pre_commit_hook_reads_the_projects_venv(tmp_path: Path) -> None:
    """pre-commit runs the hook in its own environment (and sets $VIRTUAL_ENV to it); the base class
    is installed only in the project's .venv. Both environments' bin/python link to the same base
    interpreter, so only their files tell them apart."""
    env, project = _git_project(tmp_path)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(project / ".venv")], check=True)
    site = subprocess.run([str(project / ".venv" / "bin" / "python"), "-c",
                           "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    (Path(site) / "extpkg").mkdir()
    (Path(site) / "extpkg" / "__init__.py").write_text("")
    (Path(site) / "extpkg" / "base.py").write_text(INSTALLED_BASE)
    (project / ".gitignore").write_text(".venv/\n")
    pre_commit = _install_hooks(tmp_path, env, project, "fwdlint", verbose=True)
    (project / "model.py").write_text(USES_INSTALLED)
    _git(project, env, "add", "model.py", ".gitignore", ".pre-commit-config.yaml")
    proc = _run([*pre_commit, "run"], project, env, timeout=240)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1, output
    assert "model.py:5:9: FWD001 Model.generate runs forward computation" in output
    assert "fwdlint: environment: venv .venv (from the project root)" in output  # not the hook's own
