"""Paths as flake8 users expect them (``lint_rules/discover.py``): ``--exclude`` patterns match the
paths fwdlint prints (``mymodels/vae.py``, ``mymodels/*``, ``sub/``...) with flake8's semantics,
also in the project view; ``--per-file-ignores`` in flake8's syntax; no paths means the current
directory. flake8's own functions are the oracle where they exist."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

import pytest
from flake8 import utils as flake8_utils
from flake8.exceptions import ExecutionError

from fixture_cases import run_cli

from lint_rules.cli import main
from lint_rules.discover import matches, normalize_pattern, normalize_patterns
from lint_rules.settings import parse_per_file_ignores

BAD = "import torch.nn as nn\n\nclass M(nn.Module):\n    def gen(self, x):\n        return self(x)\n"
TREE = ("mymodels/vae.py", "sub/a.py", "sub/deep/b.py", "top.py")

Lint = Callable[..., "tuple[int, str, str]"]


@pytest.fixture
def lint(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Lint:
    def run(cwd: Path, *args: str) -> tuple[int, str, str]:
        monkeypatch.chdir(cwd)
        code = main(["--no-cache", "--isolated", *args])
        out, err = capsys.readouterr()
        return code, out, err
    return run


def reported(out: str) -> list[str]:
    return sorted({line.split(":")[0] for line in out.splitlines()})


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text("")
    for name in TREE:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(BAD)
    return tmp_path


# Each row was checked against flake8 7.5 (`flake8 --exclude PATTERN .` on the same tree).
@pytest.mark.parametrize("pattern, left", [
    ("mymodels/vae.py", ["sub/a.py", "sub/deep/b.py", "top.py"]),
    ("./mymodels/vae.py", ["sub/a.py", "sub/deep/b.py", "top.py"]),
    ("mymodels/*", ["sub/a.py", "sub/deep/b.py", "top.py"]),
    ("*/vae.py", ["sub/a.py", "sub/deep/b.py", "top.py"]),
    ("vae.py", ["sub/a.py", "sub/deep/b.py", "top.py"]),
    ("sub/", ["mymodels/vae.py", "top.py"]),
    ("sub", ["mymodels/vae.py", "top.py"]),
    ("./sub", ["mymodels/vae.py", "top.py"]),
    ("sub/deep", ["mymodels/vae.py", "sub/a.py", "top.py"]),
    ("sub/*.py", ["mymodels/vae.py", "top.py"]),  # as in flake8, * also crosses /
    ("deep", ["mymodels/vae.py", "sub/a.py", "top.py"]),
    ("s*", ["mymodels/vae.py", "top.py"]),
    ("other/vae.py", ["mymodels/vae.py", "sub/a.py", "sub/deep/b.py", "top.py"]),
])
def test_exclude_patterns_match_the_printed_paths(tree: Path, lint: Lint, pattern: str, left: list[str]) -> None:
    code, out, err = lint(tree, "--exclude", pattern)
    assert reported(out) == left and err == ""
    # files named on the command line: excluded by a pattern that names the file itself, not by one
    # naming only its directory (flake8's rule; its own predicate is the oracle)
    theirs = flake8_utils.normalize_paths([pattern])
    named = [f for f in TREE if not flake8_utils.matches_filename(f, theirs, "%(path)s %(whether)s", _NoLog())]
    assert reported(lint(tree, "--exclude", pattern, *TREE)[1]) == named
    assert set(named) >= set(left)
    # from a subdirectory, a pattern with a / is relative to the working directory
    if "/" in pattern and not pattern.startswith("*"):
        assert "vae.py" in lint(tree / "mymodels", "--exclude", pattern)[1]


def test_matching_agrees_with_flake8(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Our matcher against flake8's ``normalize_paths`` + ``matches_filename`` on every path of the tree."""
    monkeypatch.chdir(tree / "sub")
    paths = [os.path.relpath(tree / p) for p in (*TREE, "sub", "sub/deep", "mymodels")] + [".", "a.py", "deep"]
    patterns = ["../mymodels/vae.py", "../mymodels/*", "deep/", "deep", "*.py", "./a.py", "*/b.py", "a.py",
                "../sub/*", ".", "*", "d*", "../*/vae.py"]
    for pattern in patterns:
        theirs = flake8_utils.normalize_paths([pattern])
        assert list(normalize_patterns([pattern])) == theirs
        for path in paths:
            expected = flake8_utils.matches_filename(path, theirs, "%(path)s %(whether)s", _NoLog())
            assert matches(path, normalize_patterns([pattern])) == expected, (pattern, path)
    assert normalize_pattern(normalize_pattern("../x/")) == normalize_pattern("../x/")  # idempotent


class _NoLog:
    def debug(self, *args: object) -> None:
        pass


def test_excluded_files_are_left_out_of_the_project_view(tree: Path, lint: Lint) -> None:
    """A registration in an excluded file no longer hides the finding it would mark."""
    (tree / "scripts").mkdir()
    (tree / "scripts" / "train.py").write_text('from top import M\n\nm = M()\nm.mark_forward_method("gen")\n')
    assert lint(tree, "top.py")[0] == 0  # the registration, in a file not given, counts
    for pattern in ("scripts/train.py", "scripts/*", "scripts", "./scripts/", "train.py"):
        assert reported(lint(tree, "--exclude", pattern, "top.py")[1]) == ["top.py"], pattern
    # also from below: the view covers the project root, patterns stay relative to the working directory
    assert lint(tree / "sub", "--exclude", "../scripts/*", "../top.py")[0] == 1
    assert lint(tree / "sub", "--exclude", "scripts/*", "../top.py")[0] == 0  # names sub/scripts: nothing


def test_config_exclude_reaches_the_project_view(tree: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    (tree / "scripts").mkdir()
    (tree / "scripts" / "train.py").write_text('from top import M\n\nm = M()\nm.mark_forward_method("gen")\n')
    (tree / "setup.cfg").write_text("[fwdlint]\nexclude = scripts/*\n")
    monkeypatch.chdir(tree / "sub")  # the pattern is relative to setup.cfg, not to the working directory
    assert main(["--no-cache", "../top.py"]) == 1
    assert capsys.readouterr().out.startswith("../top.py:4:9: FWD001")


@pytest.mark.parametrize("value", [
    "tests/*:FWD001",
    "tests/*:FWD001 scripts/*.py, x.py: FWD002,FWD003",
    "\n  tests/*,scripts/*.py : FWD001\n  a.py:FWD3 FWD1\n",
    "a.py:FWD001,b.py:FWD002",
    "",
])
def test_per_file_ignores_syntax_is_flake8s(value: str) -> None:
    expected = [(name, tuple(codes)) for name, codes in flake8_utils.parse_files_to_codes_mapping(value)]
    assert parse_per_file_ignores(value) == expected


@pytest.mark.parametrize("value", ["tests/*", "a.py:FWD1 b.py", "a.py::FWD1"])
def test_per_file_ignores_errors_are_flake8s(value: str) -> None:
    with pytest.raises(ExecutionError):
        flake8_utils.parse_files_to_codes_mapping(value)
    with pytest.raises(ValueError):
        parse_per_file_ignores(value)


@pytest.mark.parametrize("value", [":FWD001", "tests/*:", "a.py:FWD1, tests/*:"])
def test_per_file_ignores_that_would_do_nothing_are_errors(value: str) -> None:
    """flake8 drops codes without a pattern and patterns without codes in silence; a setting that
    silently does nothing is what strict configuration is for."""
    assert [pair for pair in flake8_utils.parse_files_to_codes_mapping(value) if pair[0] == "tests/*"] == []
    with pytest.raises(ValueError):
        parse_per_file_ignores(value)


def test_per_file_ignores_apply_to_matching_files_only(tree: Path, lint: Lint) -> None:
    (tree / "sub" / "patch.py").write_text("import types\n\ndef f(self, x):\n    return x\n\n"
                                           "def setup(m):\n    m.forward = types.MethodType(f, m)\n")
    everything = ["mymodels/vae.py", "sub/a.py", "sub/deep/b.py", "sub/patch.py", "top.py"]
    assert reported(lint(tree)[1]) == everything
    assert reported(lint(tree, "--per-file-ignores", "sub/*:FWD001")[1]) == [
        "mymodels/vae.py", "sub/patch.py", "top.py"]
    assert reported(lint(tree, "--per-file-ignores", "sub/*:FWD")[1]) == ["mymodels/vae.py", "top.py"]
    assert reported(lint(tree, "--per-file-ignores", "vae.py top.py:FWD001, sub/deep/*:FWD0")[1]) == [
        "sub/a.py", "sub/patch.py"]
    # only the code named: FWD301 in sub/patch.py is still reported
    assert "FWD301" in lint(tree, "--per-file-ignores", "sub/*:FWD001", "sub")[1]
    # a more specific --select wins over a per-file prefix, as it does over --ignore
    assert reported(lint(tree, "--select", "FWD001", "--per-file-ignores", "sub/*:FWD", "sub")[1]) == [
        "sub/a.py", "sub/deep/b.py"]
    assert lint(tree, "--per-file-ignores", "sub/*")[2] == (
        "fwdlint: error: --per-file-ignores: 'sub/*' has no ':CODES' (expected 'pattern:CODES' pairs)\n")


def test_fix_honours_per_file_ignores(tree: Path, lint: Lint) -> None:
    code, _, err = lint(tree, "--fix", "--per-file-ignores", "sub/*:FWD001 mymodels/*:FWD001", "sub", "top.py")
    assert code == 0, err
    assert "forward_entry" in (tree / "top.py").read_text()
    assert (tree / "sub" / "a.py").read_text() == BAD


def test_no_paths_means_the_current_directory(tree: Path, lint: Lint) -> None:
    code, out, err = lint(tree)
    assert (code, out, err) == lint(tree, ".")
    assert reported(out) == sorted(TREE)
    assert reported(lint(tree / "sub")[1]) == ["a.py", "deep/b.py"]
    (tree / "empty").mkdir()
    assert lint(tree / "empty") == (0, "", "")


def test_a_root_far_above_gives_a_bounded_view(tmp_path: Path) -> None:
    """``.git`` far above the checked file, 6,000 files under it: the view reads the 5,000 nearest
    the checked file (its neighbours first, so a registration beside it still counts), says so in
    one line, and the cache holds no more than that."""
    import sqlite3

    from lint_rules.layout import VIEW_LIMIT

    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    for d in range(60):
        (repo / "huge" / f"d{d:02}").mkdir(parents=True)
        for f in range(100):
            (repo / "huge" / f"d{d:02}" / f"f{f:02}.py").write_text("x = 1\n")
    pkg = repo / "deep" / "pkg"
    pkg.mkdir(parents=True)
    (pkg / "model.py").write_text("import torch.nn as nn\n\n\nclass Net(nn.Module):\n    def forward(self, x):\n"
                                  "        return x\n\n    def generate(self, x):\n        return self(x)\n")
    (pkg / "train.py").write_text("from lightning.fabric import Fabric\n\nfrom model import Net\n\nfabric = Fabric()\n"
                                  "model = fabric.setup(Net())\nmodel.mark_forward_method('generate')\n")
    proc = run_cli(repo, "deep/pkg/model.py")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stderr.splitlines() == [
        f"fwdlint: warning: {repo} holds more than 5,000 Python files; the project view reads the 5,000 nearest "
        "the checked files (name a smaller root with --project-root)"]
    (database,) = (repo / ".fwdlint_cache").glob("facts-*.sqlite")
    with sqlite3.connect(database) as db:
        (rows,) = db.execute("SELECT COUNT(*) FROM facts").fetchone()
    assert rows <= VIEW_LIMIT + 1


def test_walks_shared_within_a_run_agree_with_fresh_ones(tmp_path: Path) -> None:
    """A run remembers the directories it walked up (module names, project roots): sibling files,
    nested packages and a nested project get what a walk of their own gives, in any order."""
    from lint_rules.layout import find_root, module_name_for

    for name in ("pkg/__init__.py", "pkg/a.py", "pkg/sub/__init__.py", "pkg/sub/m.py", "pkg/sub/x/n.py",
                 "pkg/nested/pyproject.toml", "pkg/nested/__init__.py", "pkg/nested/q.py", "loose/r.py",
                 "pyproject.toml"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    files = sorted(tmp_path.rglob("*.py"))
    fresh = {path: (module_name_for(path), find_root(path)) for path in files}
    assert fresh[tmp_path / "pkg/sub/m.py"] == (("pkg.sub.m", False, tmp_path), tmp_path)
    assert fresh[tmp_path / "pkg/nested/q.py"] == (("pkg.nested.q", False, tmp_path), tmp_path / "pkg/nested")
    assert fresh[tmp_path / "pkg/sub/x/n.py"][0] == ("n", False, tmp_path / "pkg/sub/x")
    for order in (files, files[::-1], files[1::2] + files[::2]):
        packages: dict = {}
        roots: dict = {}
        assert {path: (module_name_for(path, packages), find_root(path, roots)) for path in order} == fresh
