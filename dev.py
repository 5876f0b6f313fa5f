#!/usr/bin/env python3
"""Set-up and entry commands; needs nothing but Python.

    python3 dev.py demo          install the linter into .venv and run fwdlint on fixtures/demo_project
    python3 dev.py test          install everything the suite needs into .venv and run the whole suite,
                                 spread over the CPUs with pytest-xdist
    python3 dev.py test --fast   the same without the tests marked ``slow`` (pytest -m "not slow"):
                                 no torch processes, real environments, pre-commit or sweeps;
                                 under 2 minutes on 2 cores. Every rule's fixtures and examples,
                                 the CLI, configuration, the flake8 plugin and the store are in it.

Both are idempotent: the virtual environment is created once and reinstalled only when
setup.cfg (or the requested extra) changes. Extra arguments are passed on (to fwdlint or pytest).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PYTHON = BIN / ("python.exe" if os.name == "nt" else "python")


def ensure_installed(extra: str) -> None:
    target = f".[{extra}]" if extra else "."
    digest = hashlib.sha256((ROOT / "setup.cfg").read_bytes() + target.encode()).hexdigest()
    stamp = VENV / f".installed-{extra or 'base'}"
    if stamp.exists() and stamp.read_text() == digest:
        return
    if not PYTHON.exists():
        print(f"creating {VENV.name}/", flush=True)
        venv.create(VENV, with_pip=True)
    print(f"installing {target} into {VENV.name}/ (first run only)", flush=True)
    pip = [str(PYTHON), "-m", "pip", "install", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "-e", target], cwd=ROOT, check=True)
    stamp.write_text(digest)


FAST = ["-m", "not slow"]  # tests/conftest.py says which tests are slow
# pytest-xdist over the CPUs. The tests that start gloo ranks run beside each other too: each takes
# free ports. (They were meant to run one at a time, as one ``--dist loadgroup`` group; with pytest 9.2
# that mark silently stopped grouping, pytest-xdist issue 1386, and the suite stayed green without it.)
PARALLEL = ["-n", "auto"]


def pytest_args(rest: list[str]) -> list[str]:
    """pytest's arguments for ``dev.py test REST``: spread over the CPUs; ``--fast`` (anywhere)
    selects the tests not marked slow. Arguments given come last (``-n 0``: one process)."""
    return [*FAST, *PARALLEL, *(arg for arg in rest if arg != "--fast")] if "--fast" in rest else [*PARALLEL, *rest]


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in {"demo", "test"}:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    command, rest = argv[0], argv[1:]
    if command == "demo":
        ensure_installed("")
        cmd = [str(BIN / "fwdlint"), *(rest or ["fixtures/demo_project"])]
        print("$ fwdlint " + " ".join(cmd[1:]), flush=True)
        code = subprocess.run(cmd, cwd=ROOT).returncode
        if code == 1:
            print("(exit status 1: fwdlint found the problems the demo project contains)")
            return 0
        return code
    ensure_installed("test")
    code = subprocess.run([str(PYTHON), "-m", "pytest", *pytest_args(rest)], cwd=ROOT).returncode
    if code == 5 and "--fast" in rest:  # pytest: no tests collected
        print("every test selected is marked slow: run it without --fast", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
