"""Issue 36, items 5 and 6: a cache never replays what the files do not say. A failure (a timeout, a
worker killed by its memory limit) is never a stored result, and everything a finding depends on is
part of a stored run's key: each rule's inputs besides the file (the configuration, the environment
and the installed versions it reads, the run record) are walked below, and each changes the key."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from lint_rules import environment, results
from lint_rules.engine import Run, Session
from lint_rules.run_record import Entry
from lint_rules.settings import Config

ROOT = Path(__file__).resolve().parent.parent
MODEL = "import torch.nn as nn\n\n\nclass Net(nn.Module):\n    def generate(self, x):\n        return self(x)\n"
PADDING = "".join(f"\ndef helper_{i}(x):\n    return [x, {i}, (x, x + {i})]\n" for i in range(3000))
COMPILED = """import torch
from lightning.fabric.utilities.init import _EmptyInit


@torch.compile
def fused(x):
    return x + 1


with _EmptyInit():
    fused(1)
"""


def lint(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lint_rules.cli", "-v", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT), **env})


@pytest.mark.parametrize("limit", [{"FWDLINT_FILE_TIMEOUT": "0.001"}, {"FWDLINT_WORKER_MEMORY": "40"}],
                         ids=["timeout", "memory"])
def test_a_failure_is_never_replayed(tmp_path: Path, limit: dict[str, str]) -> None:
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "model.py").write_text(MODEL + PADDING)
    failed = lint(tmp_path, "model.py", **limit)
    assert failed.returncode == 2 and "model.py: error:" in failed.stderr, failed.stderr
    again = lint(tmp_path, "model.py")
    assert again.returncode == 1 and "FWD001 Net.generate" in again.stdout, (again.stdout, again.stderr)
    assert "error" not in again.stderr, again.stderr


def _prefix(tmp_path: Path, torch_version: str) -> Path:
    prefix = tmp_path / "env"
    site = prefix / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    site.mkdir(parents=True, exist_ok=True)
    (prefix / "pyvenv.cfg").write_text("home = /usr/bin\n")
    for old in site.glob("torch-*.dist-info"):
        old.rename(site / f"torch-{torch_version}.dist-info")
    (site / f"torch-{torch_version}.dist-info").mkdir(exist_ok=True)
    return prefix


def test_a_new_torch_version_is_not_answered_with_the_old_severity(tmp_path: Path) -> None:
    project = tmp_path / "p"
    project.mkdir()
    (project / "pyproject.toml").write_text("")
    (project / "m.py").write_text(COMPILED)
    args = ("--format", "json", "--python", str(_prefix(tmp_path, "2.5.1")), "m.py")
    first = json.loads(lint(project, *args).stdout)["diagnostics"]
    assert [d["severity"] for d in first] == ["error"]
    _prefix(tmp_path, "2.13.0")
    second = lint(project, *args)
    assert [d["severity"] for d in json.loads(second.stdout)["diagnostics"]] == ["warning"], second.stderr


def test_every_installed_version_a_rule_reads_is_in_the_key() -> None:
    """The rules' calls of ``installed_version`` name distributions that ``results.VERSIONED`` keys runs by."""
    read = set()
    for module in (ROOT / "lint_rules" / "rules").rglob("*.py"):
        read.update(re.findall(r"installed_version\(\s*[\"']([^\"']+)[\"']", module.read_text()))
        assert "installed_version(" not in re.sub(r"installed_version\(\s*[\"'][^\"']+[\"']", "", module.read_text()), \
            f"{module}: installed_version with a name the test cannot read"
    assert read and read <= set(results.VERSIONED)


#: What a rule reads besides the file, by the Run / Config field it comes through, with a second value.
ENTRY = Entry("m.Net", "run", False, "ddp", "m.Net", "/x/m.py", 4)
CONFIG_VARIANTS = {
    "module_bases": ("pkg.Base",), "mark_decorators": ("pkg.entry",), "forward_helpers": "skip",
    "observed": (ENTRY,), "record": "/x/record.json",
}
RUN_VARIANTS = {
    "select": ("FWD001",), "ignore": ("FWD002",), "exclude": ("x.py",),
    "per_file_ignores": (("x.py", ("FWD001",)),), "project_root": Path("/elsewhere"),
}
#: Run fields that change how a run is done, never what it finds (``coverage``: a stored run that did
#: not count module classes is not reused by one that asks, ``engine.analyse``).
NOT_INPUTS = {"config", "jobs", "cache", "cache_dir", "start", "progress", "environment", "coverage"}


def _key(tmp_path: Path, run: Run) -> str:
    session = Session(run, str(tmp_path / "m.py"))
    try:
        return results.Lookup(session, [str(tmp_path / "m.py")]).key
    finally:
        session.store.close()


def test_each_input_of_the_rules_changes_the_key(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "m.py").write_text(MODEL)
    env = environment.find(str(_prefix(tmp_path, "2.5.1")))
    base = Run(environment=env, cache=False)
    assert set(Config._fields) == set(CONFIG_VARIANTS)
    assert set(Run._fields) == set(RUN_VARIANTS) | NOT_INPUTS
    key = _key(tmp_path, base)
    for name, value in CONFIG_VARIANTS.items():
        assert _key(tmp_path, base._replace(config=Config(**{name: value}))) != key, name
    for name, value in RUN_VARIANTS.items():
        assert _key(tmp_path, base._replace(**{name: value})) != key, name
    for variant in (env._replace(python="/other/python"), env._replace(version=(3, 8)),
                    env._replace(roots=())):
        assert _key(tmp_path, base._replace(environment=variant)) != key, variant
    _prefix(tmp_path, "2.13.0")  # the same environment, another torch
    assert _key(tmp_path, base) != key, "torch's version"
    assert _key(tmp_path, base._replace(config=Config(observed=(dataclasses.replace(ENTRY, count=2),)))) \
        != _key(tmp_path, base._replace(config=Config(observed=(ENTRY,)))), "the record's content"
