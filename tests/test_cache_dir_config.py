"""A configured cache directory stays inside the project (issue 36, item 7): ``fwd-cache-dir =
cachelink`` (a link to ``../victimhome/.config``) in a checked-in ``setup.cfg`` made flake8 create
its cache there, and ``fwd-cache-dir = ../x`` created directories outside the project. The rule is
``--output-file``'s: inside the project and no link on the way, else one line naming the file and
the key, exit 2, from ``fwdlint`` and from flake8. ``--cache-dir`` on the command line is the user's
and may point anywhere, as ruff's ``--cache-dir``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from fixture_cases import run_cli, run_flake8

MODEL = "import torch.nn as nn\n\nclass M(nn.Module):\n    def gen(self, x):\n        return self(x)\n"
RULE = "a configured cache directory stays inside the project, with no link on its path"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "victimhome" / ".config").mkdir(parents=True)
    project = tmp_path / "project"
    project.mkdir()
    (project / "m.py").write_text(MODEL)
    (project / "cachelink").symlink_to(os.path.join("..", "victimhome", ".config"))
    return project


def _run(front: str, project: Path, *args: str):
    return run_cli(project, *args, "m.py") if front == "cli" else run_flake8(project, *args, "m.py")


@pytest.mark.parametrize("front", ["cli", "flake8"])
@pytest.mark.parametrize("file,text,said", [
    ("setup.cfg", "[flake8]\nfwd-cache-dir = cachelink\n",
     "setup.cfg: error: [flake8] bad value for 'fwd-cache-dir': cachelink is a symlink (to ../victimhome/.config)"),
    ("setup.cfg", "[flake8]\nfwd-cache-dir = ../x\n",
     "setup.cfg: error: [flake8] bad value for 'fwd-cache-dir': ../x is outside the project ("),
    ("pyproject.toml", '[tool.fwdlint]\ncache-dir = "cachelink/sub"\n',
     "pyproject.toml: error: [tool.fwdlint] bad value for 'cache-dir': cachelink/sub goes through the symlink "
     "cachelink (to ../victimhome/.config)"),
    ("setup.cfg", "[fwdlint]\ncache-dir = ../x/.fwdlint_cache\n",
     "setup.cfg: error: [fwdlint] bad value for 'cache-dir': ../x/.fwdlint_cache is outside the project ("),
], ids=["flake8-key-link", "flake8-key-outside", "toml-through-link", "ini-outside"])
def test_a_configured_cache_dir_out_of_the_project_is_refused(project: Path, front: str, file: str, text: str,
                                                              said: str) -> None:
    (project / file).write_text(text)
    proc = _run(front, project)
    assert proc.returncode == 2 and proc.stdout == "", (proc.returncode, proc.stdout, proc.stderr)
    assert len(proc.stderr.splitlines()) == 1 and proc.stderr.startswith(said) and RULE in proc.stderr, proc.stderr
    assert os.listdir(project.parent / "victimhome" / ".config") == []
    assert sorted(os.listdir(project.parent)) == ["project", "victimhome"]  # no ../x


@pytest.mark.parametrize("front", ["cli", "flake8"])
@pytest.mark.parametrize("file,text", [("setup.cfg", "[flake8]\nfwd-cache-dir = build/cache\n"),
                                       ("pyproject.toml", '[tool.fwdlint]\ncache-dir = "build/cache"\n')])
def test_a_configured_cache_dir_inside_the_project_is_used(project: Path, front: str, file: str, text: str) -> None:
    (project / file).write_text(text)
    proc = _run(front, project)
    assert proc.returncode == 1 and proc.stderr == "", proc.stderr
    assert (project / "build" / "cache" / "CACHEDIR.TAG").is_file()
    assert not (project / ".fwdlint_cache").exists()


@pytest.mark.parametrize("front", ["cli", "flake8"])
def test_the_command_line_s_cache_dir_may_point_anywhere(project: Path, front: str) -> None:
    """The user's own choice, as ruff's ``--cache-dir`` (and ``RUFF_CACHE_DIR``): outside the project
    and through a link too. (A configured one that is refused is an error even then, as any bad key.)"""
    option = "--cache-dir" if front == "cli" else "--fwd-cache-dir"
    outside = project.parent / "elsewhere"
    proc = _run(front, project, f"{option}={outside}")
    assert proc.returncode == 1 and proc.stderr == "", proc.stderr
    assert (outside / "CACHEDIR.TAG").is_file()
    proc = _run(front, project, f"{option}=cachelink")
    assert proc.returncode == 1 and proc.stderr == "", proc.stderr
    assert (project.parent / "victimhome" / ".config" / ".fwdlint_cache" / "CACHEDIR.TAG").is_file()
