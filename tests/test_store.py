"""The facts store and its on-disk cache: reused between runs, safe with concurrent runs, never
fatal when damaged, JSON only, and the project view it feeds in every front end."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from fixture_cases import ROOT, cli_json, flake8_rows, run_cli, run_flake8

from lint_rules.engine import Run, analyse

MODEL = ("import torch.nn as nn\n\n\nclass GPT(nn.Module):\n    def forward(self, x):\n        return x\n\n"
         "    def generate(self, x):\n        return self(x)\n\n    def sample(self, x):\n        return self(x)\n")
TRAIN = 'from model import GPT\n\nmodel = GPT()\nmodel.mark_forward_method("generate")\n'


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "model.py").write_text(MODEL)
    (tmp_path / "train.py").write_text(TRAIN)
    (tmp_path / "util.py").write_text("def helper(x):\n    return x\n")
    return tmp_path


def _db(directory: Path) -> Path:
    """The one facts database of this fwdlint's schema in a cache directory."""
    (path,) = [p for p in directory.glob("facts-*.sqlite")]
    return path


def _symbols(result) -> list[str]:
    return [d.symbol for d in result.diagnostics]


def test_second_run_parses_nothing_and_an_edit_parses_one_file(project: Path) -> None:
    paths = [str(project / n) for n in ("model.py", "train.py", "util.py")]
    cold = analyse(paths, Run())  # and torch's files that resolve nn.Linear (installed, read once)
    assert cold.files_parsed - cold.installed_read == 3 and _symbols(cold) == ["GPT.sample"]
    assert (project / ".fwdlint_cache" / ".gitignore").read_text().splitlines()[-1] == "*"
    warm = analyse(paths, Run())
    assert warm.files_parsed == 0 and warm.diagnostics == cold.diagnostics
    (project / "util.py").write_text("def helper(x):\n    return x + 1\n")
    edited = analyse(paths, Run())
    assert edited.files_parsed == 1 and edited.diagnostics == cold.diagnostics


def test_a_file_name_that_is_not_utf8_is_cached_too(project: Path) -> None:
    """A Linux file name may hold any bytes (Python keeps them as surrogates); SQLite holds text as
    UTF-8. Its facts, and an error naming it, are cached and read back as they were."""
    name = os.fsdecode(b"latin\xe9.py")
    (project / name).write_text(MODEL)
    (project / os.fsdecode(b"bad\xe9.py")).write_text("class A(:\n")
    paths = [str(project / name), str(project / os.fsdecode(b"bad\xe9.py"))]
    cold = analyse(paths, Run())
    # 3 of them the view; torch's files that resolve its names besides
    assert cold.files_parsed - cold.installed_read == 5 and cold.diagnostics and len(cold.errors) == 1
    warm = analyse(paths, Run())
    assert warm.files_parsed == 0 and warm.diagnostics == cold.diagnostics and warm.errors == cold.errors


def test_cache_holds_json_only(project: Path) -> None:
    analyse([str(project / "model.py")], Run())
    db = sqlite3.connect(_db(project / ".fwdlint_cache"))
    values = [value for (value,) in db.execute("SELECT value FROM facts")]
    assert values and all(isinstance(json.loads(v), list) for v in values)


@pytest.mark.parametrize("damage", ["garbage", "truncated", "foreign", "old_format", "empty"])
def test_damaged_cache_is_rebuilt(project: Path, damage: str) -> None:
    paths = [str(project / "model.py"), str(project / "train.py")]
    expected = _symbols(analyse(paths, Run()))
    db_path = _db(project / ".fwdlint_cache")
    for suffix in ("-wal", "-shm"):
        Path(str(db_path) + suffix).unlink(missing_ok=True)
    if damage == "garbage":
        db_path.write_bytes(b"\x80not a database at all" * 100)
    elif damage == "truncated":
        db_path.write_bytes(db_path.read_bytes()[:700])
    elif damage == "empty":
        db_path.write_bytes(b"")
    elif damage == "foreign":
        db_path.unlink()
        other = sqlite3.connect(db_path)
        other.execute("CREATE TABLE users (name TEXT)")
        other.commit()
        other.close()
    else:
        db = sqlite3.connect(db_path)
        db.execute("UPDATE meta SET value = 'fwdlint-facts-0' WHERE key = 'schema'")
        db.execute("UPDATE facts SET value = '[1, 2]'")
        db.commit()
        db.close()
    again = analyse(paths, Run())
    assert _symbols(again) == expected and again.errors == []
    assert analyse(paths, Run()).files_parsed == 0  # rebuilt, and used again


def test_unusable_cache_dir_is_not_an_error(project: Path) -> None:
    (project / "blocked").write_text("a file where the cache directory would go")
    result = analyse([str(project / "model.py")], Run(cache_dir=project / "blocked" / "cache"))
    assert _symbols(result) == ["GPT.sample"] and result.errors == []


def test_no_cache_and_cache_dir_options(project: Path) -> None:
    assert run_cli(project, "--no-cache", "model.py").returncode == 1
    assert not (project / ".fwdlint_cache").exists()
    assert run_cli(project, "--cache-dir", "elsewhere", "model.py").returncode == 1
    assert _db(project / "elsewhere").is_file() and not (project / ".fwdlint_cache").exists()


def test_concurrent_runs_share_the_cache_safely(project: Path) -> None:
    """Eight processes fill one cold cache at once (many files each); every run gets the right
    verdict and the cache is intact afterwards."""
    for index in range(40):
        (project / f"m{index}.py").write_text(MODEL.replace("GPT", f"M{index}"))
    command = [sys.executable, "-m", "lint_rules.cli", "--format", "json", "."]
    procs = [subprocess.Popen(command, cwd=project, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(8)]
    outputs = [proc.communicate(timeout=300) for proc in procs]
    counts = {len(json.loads(out)["diagnostics"]) for out, _ in outputs}
    assert counts == {81}, counts  # only GPT.generate is registered
    assert [err for _, err in outputs if err] == []
    db = sqlite3.connect(_db(project / ".fwdlint_cache"))
    assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    assert analyse([str(project / "model.py")], Run()).files_parsed == 0


def test_registration_in_another_file_counts_in_every_front_end(project: Path) -> None:
    """train.py registers GPT.generate: checking model.py alone (flake8 on one file, the CLI on
    one file, as pre-commit does with staged files) gives the verdict of the whole project."""
    assert _symbols(analyse([str(project / "model.py")], Run())) == ["GPT.sample"]
    code, payload = cli_json(project, "model.py")
    assert [d["symbol"] for d in payload["diagnostics"]] == ["GPT.sample"]
    rows = flake8_rows(run_flake8(project, "--select", "FWD", "model.py"))
    assert [(p, r, c) for p, r, c, *_ in rows] == [("model.py", 11, 9)]
    # outside the project (its marker gone, no --project-root) only the given files count
    os.unlink(project / "pyproject.toml")
    assert _symbols(analyse([str(project / "model.py")], Run())) == ["GPT.generate", "GPT.sample"]
    assert _symbols(analyse([str(project / "model.py")], Run(project_root=project))) == ["GPT.sample"]


def test_flake8_exclude_keeps_files_out_of_the_view(project: Path) -> None:
    rows = flake8_rows(run_flake8(project, "--select", "FWD", "--exclude", "train.py", "model.py"))
    assert [r for _, r, *_ in rows] == [8, 11]


def test_nested_project_is_its_own(project: Path) -> None:
    """A directory with its own marker is another project: its registrations do not count here."""
    nested = project / "vendor"
    nested.mkdir()
    (nested / "setup.py").write_text("")
    (nested / "train.py").write_text(TRAIN.replace("generate", "sample"))
    assert _symbols(analyse([str(project / "model.py")], Run())) == ["GPT.sample"]


def test_repository_checkout_is_one_project() -> None:
    """This repository's own fixtures each mark themselves as projects (pyproject.toml)."""
    assert (ROOT / "fixtures" / "demo_project" / "pyproject.toml").is_file()


def test_files_in_no_project_are_cached_under_the_directory_given(tmp_path: Path) -> None:
    """No marker above: the cache goes where the run was pointed (as ruff's goes to the working
    directory), so a warm run reads it instead of parsing again; nothing is written elsewhere."""
    checked, elsewhere = tmp_path / "scripts", tmp_path / "elsewhere"
    checked.mkdir()
    elsewhere.mkdir()
    (checked / "model.py").write_text(MODEL)
    assert run_cli(elsewhere, str(checked)).returncode == 1
    assert _db(checked / ".fwdlint_cache").is_file() and os.listdir(elsewhere) == []
    rerun = subprocess.run([sys.executable, "-c", "import sys\nfrom lint_rules.engine import Run, analyse\n"
                            "print(analyse(sys.argv[1:], Run(start=None)).files_parsed)", str(checked / "model.py")],
                           cwd=elsewhere, capture_output=True, text=True, timeout=120)
    assert rerun.stdout.split() == ["0"], rerun.stderr
