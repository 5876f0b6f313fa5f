"""The facts cache touches only its own files, in a directory of its own, never through a link;
it is keyed by all the code that shapes stored facts; two fwdlint versions share a directory; a
damaged database is set aside and rebuilt; edits and deleted files do not grow it without bound."""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fixture_cases import ROOT, run_cli

from lint_rules import cache_file
from lint_rules.engine import Run, analyse
from lint_rules.store import FactsStore

MODEL = ("import torch.nn as nn\n\n\nclass GPT(nn.Module):\n    def forward(self, x):\n        return x\n\n"
         "    def generate(self, x):\n        return self(x)\n\n    def sample(self, x):\n        return self(x)\n")
TRAIN = 'from model import GPT\n\nmodel = GPT()\nmodel.mark_forward_method("generate")\n'
SIGNATURE = "Signature: 8a477f597d28d172789f06886806bc55"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "pyproject.toml").write_text("")
    (root / "model.py").write_text(MODEL)
    (root / "train.py").write_text(TRAIN)
    return root


def _databases(directory: Path) -> list[Path]:
    return sorted(p for p in directory.glob("facts*.sqlite") if not p.is_symlink())


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _foreign_db(path: Path) -> None:
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE users (name TEXT)")
    db.execute("INSERT INTO users VALUES ('ada')")
    db.commit()
    db.close()


def _is_fwdlint_cache(directory: Path) -> bool:
    tag = directory / "CACHEDIR.TAG"
    return tag.is_file() and tag.read_text().startswith(SIGNATURE) and "fwdlint" in tag.read_text()


# -- the cache directory is fwdlint's own ---------------------------------------------------------

def test_cache_dir_dot_leaves_the_project_visible_to_git(project: Path) -> None:
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    assert run_cli(project, "--cache-dir", ".", "model.py").returncode == 1
    assert not (project / ".gitignore").exists() and not (project / "CACHEDIR.TAG").exists()
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=project,
                            capture_output=True, text=True, check=True).stdout
    assert "model.py" in status and "train.py" in status and ".fwdlint_cache" not in status
    assert _is_fwdlint_cache(project / ".fwdlint_cache") and _databases(project / ".fwdlint_cache")


def test_someone_elses_facts_sqlite_is_left_alone(project: Path) -> None:
    other = project / "somedir"
    other.mkdir()
    _foreign_db(other / "facts.sqlite")
    before = _digest(other / "facts.sqlite")
    for _ in range(2):
        analyse([str(project / "model.py")], Run(cache_dir=other))
    assert _digest(other / "facts.sqlite") == before
    assert sorted(os.listdir(other)) == [".fwdlint_cache", "facts.sqlite"]  # no tag, no .gitignore
    assert _is_fwdlint_cache(other / ".fwdlint_cache")
    assert analyse([str(project / "model.py")], Run(cache_dir=other)).files_parsed == 0  # and it caches


def test_no_usable_directory_means_no_cache_and_one_warning(project: Path) -> None:
    taken = project / "taken" / ".fwdlint_cache"
    taken.mkdir(parents=True)
    (taken / "notes.txt").write_text("mine")
    (project / "taken" / "notes.txt").write_text("mine too")
    proc = run_cli(project, "--cache-dir", "taken", "model.py")
    assert proc.returncode == 1 and "GPT.sample" in proc.stdout
    (warning,) = [line for line in proc.stderr.splitlines() if "cache" in line]
    assert warning.startswith("fwdlint: warning:")
    assert os.listdir(taken) == ["notes.txt"] and sorted(os.listdir(taken.parent)) == [".fwdlint_cache", "notes.txt"]


def test_a_tag_being_written_by_another_run_is_waited_for(project: Path) -> None:
    """Concurrent first runs: one creates the tag, another finds it still empty. Seen in CI with eight
    runs at once: the second warned and went without the cache. It waits for the tag instead."""
    cache = project / ".fwdlint_cache"
    cache.mkdir()
    (cache / "CACHEDIR.TAG").write_text("")  # created, not yet written
    proc = subprocess.Popen([sys.executable, "-m", "lint_rules.cli", "model.py"], cwd=project, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(ROOT)})
    time.sleep(1.5)  # longer than the old wait (0.5 s) after the run's start-up
    (cache / "CACHEDIR.TAG").write_text(cache_file.TAG_TEXT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1 and "GPT.sample" in out and err == ""
    assert len(_databases(cache)) == 1


def test_an_empty_chosen_directory_becomes_the_cache(project: Path) -> None:
    chosen = project / "chosen"
    chosen.mkdir()
    analyse([str(project / "model.py")], Run(cache_dir=chosen))
    assert _is_fwdlint_cache(chosen) and (chosen / ".gitignore").read_text().splitlines()[-1] == "*"
    assert len(_databases(chosen)) == 1


def test_an_older_fwdlint_cache_is_adopted(project: Path) -> None:
    legacy = project / ".fwdlint_cache"
    legacy.mkdir()
    (legacy / ".gitignore").write_text("# Created by fwdlint.\n*\n")
    _foreign_db(legacy / "facts.sqlite")  # whatever it holds, it is not read nor removed
    before = _digest(legacy / "facts.sqlite")
    analyse([str(project / "model.py")], Run())
    assert _is_fwdlint_cache(legacy) and _digest(legacy / "facts.sqlite") == before
    assert analyse([str(project / "model.py")], Run()).files_parsed == 0


def test_a_linked_cache_directory_is_not_followed(project: Path, tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.mkdir()
    (project / ".fwdlint_cache").symlink_to(victim)
    result = analyse([str(project / "model.py")], Run())
    assert [d.symbol for d in result.diagnostics] == ["GPT.sample"] and result.errors == []
    assert os.listdir(victim) == []


@pytest.mark.parametrize("suffix", ["", "-wal", "-shm"])
def test_linked_database_files_are_not_written_through(project: Path, tmp_path: Path, suffix: str) -> None:
    analyse([str(project / "model.py")], Run())
    (db,) = _databases(project / ".fwdlint_cache")
    victim = tmp_path / "victim"
    victim.write_bytes(b"")  # an empty file is a valid empty database to SQLite
    target = Path(str(db) + suffix)
    target.unlink(missing_ok=True)
    target.symlink_to(victim)
    (project / "model.py").write_text(MODEL + "\n# edited\n")  # a write is due
    result = analyse([str(project / "model.py"), str(project / "train.py")], Run())
    assert [d.symbol for d in result.diagnostics] == ["GPT.sample"] and result.errors == []
    assert victim.read_bytes() == b"" and target.is_symlink()


def test_a_linked_gitignore_is_not_written_through(project: Path, tmp_path: Path) -> None:
    cache = project / ".fwdlint_cache"
    cache.mkdir()
    (cache / "CACHEDIR.TAG").write_text(f"{SIGNATURE}\n# This file is a cache directory tag created by fwdlint.\n"
                                        "# For information about cache directory tags see "
                                        "https://bford.info/cachedir/\n")
    (cache / ".gitignore").symlink_to(tmp_path / "elsewhere")
    analyse([str(project / "model.py")], Run())
    assert not (tmp_path / "elsewhere").exists()


# -- the key: every module that shapes stored facts -----------------------------------------------

def _schema(package_parent: Path) -> str:
    code = "import lint_rules, lint_rules.store as s; print(lint_rules.__file__); print(s._SCHEMA)"
    proc = subprocess.run([sys.executable, "-c", code], cwd=package_parent, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(package_parent)}, check=True)
    where, schema = proc.stdout.split()
    assert Path(where).resolve().is_relative_to(package_parent.resolve())  # the copy, not the checkout
    return schema


def _copy_package(target: Path) -> Path:
    shutil.copytree(ROOT / "lint_rules", target / "lint_rules", ignore=shutil.ignore_patterns("__pycache__"))
    return target


@pytest.fixture(scope="module")
def original_schema(tmp_path_factory: pytest.TempPathFactory) -> str:
    return _schema(_copy_package(tmp_path_factory.mktemp("original")))


@pytest.mark.parametrize("module, changes", [
    ("facts/extract.py", True), ("noqa.py", True), ("contract.py", True), ("source.py", True),
    ("facts/walk.py", True), ("store.py", True), ("positions.py", False), ("cli.py", False), ("report.py", False)])
def test_the_key_covers_the_code_that_shapes_stored_facts(tmp_path: Path, original_schema: str, module: str,
                                                          changes: bool) -> None:
    copy = _copy_package(tmp_path)
    with open(copy / "lint_rules" / module, "a") as handle:
        handle.write("\n# edited\n")
    assert (_schema(copy) != original_schema) is changes


def test_every_module_the_extraction_imports_is_in_the_key() -> None:
    """A new import in a collector must not escape the key: every ``lint_rules`` module loaded by
    extraction is covered, but for those that shape no stored value (names and paths are in the key)."""
    code = ("import sys, lint_rules.store, lint_rules.facts.extract\n"
            "print('\\n'.join(m.__file__ for n, m in sys.modules.items() if n.startswith('lint_rules')))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    package = ROOT / "lint_rules"
    loaded = {Path(line).resolve().relative_to(package).as_posix() for line in proc.stdout.split()}
    from lint_rules.store import _FACTS_CODE
    covered = {p.relative_to(package).as_posix() for pattern in _FACTS_CODE for p in package.glob(pattern)}
    assert loaded - covered == {"__init__.py", "layout.py", "discover.py", "diagnostics.py"}


# -- two versions, damage, growth -----------------------------------------------------------------

def test_two_versions_sharing_a_cache_keep_their_entries(project: Path, tmp_path: Path) -> None:
    other = _copy_package(tmp_path / "other")
    with open(other / "lint_rules" / "store.py", "a") as handle:
        handle.write("\n# another version\n")
    cache = tmp_path / "cache"
    paths = [str(project / "model.py"), str(project / "train.py")]
    code = ("import sys; from pathlib import Path; from lint_rules.engine import analyse, Run\n"
            f"r = analyse({paths!r}, Run(cache_dir=Path({str(cache)!r}))); print(r.files_parsed, r.installed_read)")

    def run_other() -> tuple[int, ...]:
        return tuple(int(n) for n in subprocess.run(
            [sys.executable, "-c", code], cwd=other, capture_output=True, text=True, check=True,
            env={**os.environ, "PYTHONPATH": str(other)}).stdout.split())

    cold = analyse(paths, Run(cache_dir=cache))  # and torch's files that resolve nn.Module's subclasses
    assert (cold.files_parsed, cold.installed_read) == run_other() == (2 + cold.installed_read, cold.installed_read)
    assert analyse(paths, Run(cache_dir=cache)).files_parsed == 0 and run_other()[0] == 0
    assert len(_databases(cache)) == 2


def test_page_damage_is_set_aside_and_rebuilt(project: Path) -> None:
    for index in range(30):  # enough rows for several pages
        (project / f"m{index}.py").write_text(MODEL.replace("GPT", f"M{index}"))
    paths = sorted(str(p) for p in project.glob("*.py"))
    expected = analyse(paths, Run()).diagnostics
    (db,) = _databases(project / ".fwdlint_cache")
    assert not Path(str(db) + "-wal").exists()  # the last connection folded the WAL in
    data = bytearray(db.read_bytes())
    middle = len(data) // 2
    data[middle:middle + 8192] = os.urandom(8192)
    db.write_bytes(bytes(data))
    damaged = analyse(paths, Run())
    assert damaged.diagnostics == expected and damaged.errors == []
    assert analyse(paths, Run()).files_parsed == 0  # rebuilt once, warm again
    assert [p.name.rsplit(".", 1)[1] for p in (project / ".fwdlint_cache").glob("*.corrupt-*")] == ["corrupt-1"]


def test_edits_of_one_file_do_not_pile_up(project: Path) -> None:
    cache = project / ".fwdlint_cache"
    for index in range(40):
        (project / "model.py").write_text(MODEL + f"\nEDIT = {index}\n")
        store = FactsStore(cache)
        store.facts(str(project / "model.py"))
        store.close()
    (db,) = _databases(cache)
    assert sqlite3.connect(db).execute("SELECT count(*) FROM facts").fetchone()[0] <= 3


def test_entries_of_deleted_files_are_pruned(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("lint_rules.cache_file._MAINTAIN_EVERY", 1)
    cache = project / ".fwdlint_cache"
    for name in ("gone.py", "model.py"):
        if name == "gone.py":
            (project / name).write_text("x = 1\n")
        store = FactsStore(cache)
        store.facts(str(project / name))
        store.close()
        (project / "gone.py").unlink(missing_ok=True)
    (db,) = _databases(cache)
    values = [v for (v,) in sqlite3.connect(db).execute("SELECT value FROM facts")]
    assert len(values) == 1 and "gone" not in values[0]


def test_a_run_that_wrote_folds_the_log_even_while_another_run_has_the_cache_open(tmp_path: Path) -> None:
    """SQLite folds the write-ahead log into the file only when the last connection closes; two
    ``flake8 -j 2`` workers ending together can each still see the other open (CI saw a 2 MB log
    left behind). A run that wrote folds it itself."""
    directory = tmp_path / "cache"
    directory.mkdir()
    writer = cache_file.Cache(directory, "schema")
    writer.put("key", "value" * 1000, "f:slot")
    other = sqlite3.connect(writer.path)  # another process, still closing
    other.execute("SELECT count(*) FROM facts").fetchone()
    writer.close()
    log = Path(f"{writer.path}-wal")
    assert not log.exists() or log.stat().st_size == 0
    other.close()


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_flake8_closes_its_cache(project: Path, jobs: str) -> None:
    """Each flake8 process that wrote closes the cache when it ends: the run is counted for the
    periodic maintenance, and the write-ahead log is folded into the database."""
    for name in ("b", "c", "d"):
        (project / f"{name}.py").write_text(MODEL.replace("GPT", name.upper()))
    proc = subprocess.run([sys.executable, "-m", "flake8", "--select", "FWD", "-j", jobs, "."], cwd=project,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stderr
    (database,) = _databases(project / ".fwdlint_cache")
    with sqlite3.connect(database) as db:
        (writes,) = db.execute("SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'writes'").fetchone()
    assert writes >= 1
    assert not Path(f"{database}-wal").exists() or Path(f"{database}-wal").stat().st_size == 0


def test_a_tag_written_by_another_run_while_this_one_looks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two runs claim one new cache directory: the other run tags it just as this one lists it. The
    tag is then seen (and waited for), not taken for a stranger's file: no warning, the cache is used."""
    directory = tmp_path / cache_file.CACHE_DIR_NAME
    directory.mkdir()
    listdir = os.listdir

    def tagged_meanwhile(path: "str | os.PathLike[str]") -> list[str]:
        if Path(path) == directory and not (directory / cache_file.TAG_NAME).exists():
            (directory / cache_file.TAG_NAME).write_text(cache_file.TAG_TEXT)  # the other run, at that moment
        return listdir(path)

    monkeypatch.setattr(os, "listdir", tagged_meanwhile)
    assert cache_file.cache_directory(directory) == directory
