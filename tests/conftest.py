from __future__ import annotations

import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from slow_tests import FAST_ONLY, SAMPLES, SLOW, slow_reason

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # tests run against this checkout even before `pip install -e .`
    sys.path.insert(0, str(ROOT))

NOBODY = 65534


def _relative(path: Path) -> str | None:
    tests = Path(__file__).parent
    return path.relative_to(tests).as_posix() if path.is_relative_to(tests) else None


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Under -m "not slow", files that hold only slow tests are not even imported (tests/runtime/
    would import torch into the pytest process)."""
    relative = _relative(collection_path)
    if config.getoption("markexpr") != FAST_ONLY or relative is None:
        return None
    key = relative + "/" if collection_path.is_dir() else relative
    if key in SLOW and not any(sample.startswith(key) for sample in SAMPLES):
        return True
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        relative = _relative(item.path)
        if relative is not None and slow_reason(f"{relative}::{item.nodeid.partition('::')[2]}"):
            item.add_marker(pytest.mark.slow)


def _caches_in_fixtures() -> list[str]:
    return sorted(str(p.relative_to(ROOT)) for p in (ROOT / "fixtures").rglob(".fwdlint_cache"))


def pytest_sessionstart(session: pytest.Session) -> None:
    session.config.stash[_CACHES_BEFORE] = _caches_in_fixtures()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fixture tests run on copies: a test that lints ``fixtures/`` in place (and leaves a facts
    cache there) fails the run, named by what it left (the controller checks, once)."""
    if hasattr(session.config, "workerinput"):
        return
    left = sorted(set(_caches_in_fixtures()) - set(session.config.stash.get(_CACHES_BEFORE, [])))
    if left:
        print(f"\na test wrote a facts cache into fixtures/ (lint a copy instead): {', '.join(left)}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


_CACHES_BEFORE = pytest.StashKey[list]()


# -- acting as "nobody" ------------------------------------------------------------------------------
# The checkout, its .venv and even the interpreter may sit under a mode-700 home directory that uid
# 65534 cannot search. So the code under test and the packages it needs are copied into a fresh
# mode-755 directory under /tmp, and nobody runs an interpreter it can actually execute.


def _become_nobody() -> None:
    os.setuid(NOBODY)


def _requirements(name: str, seen: set[str]) -> Iterator[importlib.metadata.Distribution]:
    """The installed distributions ``name`` needs at run time (no extras), recursively."""
    try:
        dist = importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        return  # an optional or marker-excluded requirement (tomli on 3.11+)
    key = dist.metadata["Name"].lower()
    if key in seen:
        return
    seen.add(key)
    yield dist
    for requirement in dist.requires or []:
        if "extra ==" not in requirement:
            yield from _requirements(re.split(r"[\s;<>=!~\[(]", requirement, maxsplit=1)[0], seen)


def _copy_dependencies(target: Path) -> None:
    for dist in _requirements("fwdlint", set()):
        if dist.metadata["Name"].lower() == "fwdlint":
            continue  # the checkout itself is copied from ROOT, not from an (editable) install
        for file in dist.files or []:
            if file.parts[0] == ".." or "__pycache__" in file.parts:
                continue  # scripts outside site-packages, byte code
            (target / file).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(dist.locate_file(file), target / file)


def _open_to_all(top: Path) -> None:
    for directory, _, files in os.walk(top):
        os.chmod(directory, 0o755)
        for name in files:
            os.chmod(os.path.join(directory, name), 0o644)


@dataclass(frozen=True)
class Nobody:
    python: str
    env: dict[str, str]

    def run(self, args: list[str], cwd: Path) -> subprocess.CompletedProcess:
        """``python args`` as uid 65534, with this checkout's code."""
        return subprocess.run([self.python, *args], cwd=cwd, env=self.env, capture_output=True, text=True,
                              timeout=120, preexec_fn=_become_nobody)

    @staticmethod
    def workdir() -> Path:
        """A fresh mode-755 directory nobody can reach (pytest's tmp_path is under a mode-700 one)."""
        path = Path(tempfile.mkdtemp(prefix="fwdlint-nobody-"))
        path.chmod(0o755)
        return path


def _interpreters() -> Iterator[str]:
    """This interpreter, the one its venv was made from, then any of the same version on PATH."""
    base = getattr(sys, "_base_executable", "")
    same_version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    on_path = [os.path.join(d, same_version) for d in os.environ.get("PATH", "").split(os.pathsep) if d]
    seen = set()
    for python in (sys.executable, os.path.realpath(sys.executable), base, os.path.realpath(base), *on_path):
        if python and python not in seen and os.path.isfile(python):
            seen.add(python)
            yield python


@pytest.fixture(scope="session")
def nobody() -> Iterator[Nobody]:
    """Runs this checkout's fwdlint as ``nobody``. Its code is imported from a copy under /tmp: the
    probe checks that, so the test cannot silently run some other installed fwdlint."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        pytest.skip("switching users needs root")
    top = Path(tempfile.mkdtemp(prefix="fwdlint-code-"))
    try:
        for package in ("lint_rules", "runtime_shim"):
            shutil.copytree(ROOT / package, top / "src" / package, ignore=shutil.ignore_patterns("__pycache__"))
        _copy_dependencies(top / "deps")
        _open_to_all(top)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(top / "src"), str(top / "deps")]),
               "PYTHONDONTWRITEBYTECODE": "1"}
        env.pop("VIRTUAL_ENV", None)  # an activated venv under a mode-700 home is unreadable for nobody
        probe = "import sys, libcst, lint_rules.cli; print(sys.version_info[:2], lint_rules.__file__)"
        expected = f"{tuple(sys.version_info[:2])} {top / 'src' / 'lint_rules' / '__init__.py'}"
        tried = []
        for python in _interpreters():
            try:
                proc = subprocess.run([python, "-c", probe], cwd=top, env=env, capture_output=True, text=True,
                                      timeout=60, preexec_fn=_become_nobody)
            except OSError as error:  # nobody cannot execute it (a mode-700 directory above it)
                tried.append(f"{python}: {error}")
                continue
            if proc.stdout.strip() == expected:
                yield Nobody(python, env)
                break
            tried.append(f"{python}: {proc.stdout.strip()} {proc.stderr.strip()[-300:]}")
        else:
            message = "no interpreter of this Python version runs this checkout's copy as nobody:\n" + "\n".join(tried)
            if all(": [Errno" in line for line in tried):  # none can even be executed: a property of the machine
                pytest.skip(message)
            pytest.fail(message)
    finally:
        shutil.rmtree(top, ignore_errors=True)
