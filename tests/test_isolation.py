"""A file that crashes, exhausts or hangs the parser costs that file one error line, never the run
(``lint_rules.workers``), for the CLI and flake8 at ``-j 1`` and ``-j 2``; killing fwdlint leaves
no parser process behind. Every case runs the real command in a fresh process on a real project.

The crash that started this: LibCST's native parser segfaults on a valid file whose ``forward``
returns a 10,000-operand ``and`` chain (its recursion overflows an 8 MiB stack); ``fwdlint .``
then exited 139 with no output, ``-j 2`` died with ``BrokenProcessPool`` and ``flake8 -j 2`` hung.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc; limits are Linux's")

FINDING = "import torch.nn as nn\n\n\nclass N(nn.Module):\n    def generate(self, x):\n        return self(x)\n"
CHAIN = " and ".join(["x"] * 10_000)
# about 2 s and 500 MiB of Python's parser and the facts on the 2-core CI machine: long enough to be
# caught in the act
BIG = ("import torch.nn as nn\n\n\nclass Big(nn.Module):\n    def forward(self, x):\n        return x\n\n\n"
       + "y = 1\n" * 200_000)


def _project(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "pyproject.toml").write_text("")
    for name, text in files.items():
        (root / name).write_text(text)
    return root


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FWDLINT_")}
    return {**env, **extra}


def _run(command: list[str], cwd: Path, timeout: float, env: dict[str, str]) -> subprocess.CompletedProcess:
    """``subprocess.run`` that also ends the command's own children when it hangs: a hung
    ``flake8 -j 2`` leaves pool workers that hold its output open."""
    with subprocess.Popen(command, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                          start_new_session=True) as proc:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise AssertionError(f"{' '.join(command[2:])} hung for {timeout} s") from None
    return subprocess.CompletedProcess(command, proc.returncode, out, err)


def _fwdlint(root: Path, *args: str, timeout: float = 240, **env: str) -> subprocess.CompletedProcess:
    return _run([sys.executable, "-m", "lint_rules", *args, "."], root, timeout, _env(**env))


def _flake8(root: Path, *args: str, timeout: float = 240, **env: str) -> subprocess.CompletedProcess:
    return _run([sys.executable, "-m", "flake8", "--select", "FWD", *args, "."], root, timeout, _env(**env))


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_chain_that_crashed_the_parser_is_analysed(jobs: str, tmp_path: Path) -> None:
    chained = FINDING.replace("return self(x)", f"return self(x) and {CHAIN}")
    root = _project(tmp_path, {"gen.py": chained.replace("class N", "class G"), "ok.py": FINDING})
    proc = _fwdlint(root, "-j", jobs)
    assert proc.returncode == 1, proc.stderr
    assert "gen.py:5:9: FWD001 G.generate" in proc.stdout and "ok.py:5:9: FWD001 N.generate" in proc.stdout
    assert proc.stderr == ""


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_flake8_survives_the_chain(jobs: str, tmp_path: Path) -> None:
    root = _project(tmp_path, {"gen.py": FINDING.replace("return self(x)", f"return {CHAIN}"), "ok.py": FINDING})
    proc = _flake8(root, "-j", jobs, timeout=120)  # the old plugin hung here at -j 2
    assert proc.returncode == 1, proc.stderr
    assert [line.split(" ", 2)[:2] for line in proc.stdout.splitlines()] == [["./ok.py:5:9:", "FWD001"]]


def test_fix_of_a_file_with_the_chain(tmp_path: Path) -> None:
    """The fixer parses the file again in fwdlint's own process: on a stack as deep as the workers'."""
    root = _project(tmp_path, {"gen.py": FINDING.replace("return self(x)", f"return self(x) and {CHAIN}")})
    proc = _fwdlint(root, "--fix")
    assert proc.returncode == 0, proc.stderr
    fixed = (root / "gen.py").read_text()
    assert "    @forward_entry\n    def generate" in fixed
    compile(fixed, "gen.py", "exec")


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def _wait_for_children(pid: int, count: int, limit: float = 60) -> list[int]:
    end = time.monotonic() + limit
    while time.monotonic() < end:
        children = _children(pid)
        if len(children) >= count:
            return children
        time.sleep(0.02)
    raise AssertionError(f"no {count} worker(s) of {pid} appeared")


def _rss_mib(pid: int) -> int:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    return next((int(line.split()[1]) // 1024 for line in status.splitlines() if line.startswith("VmRSS:")), 0)


def _parsing_the_big_file(pid: int, limit: float = 120) -> int:
    """The worker whose memory grows past 200 MiB (a fresh one holds about 40 MiB): it is parsing BIG."""
    end = time.monotonic() + limit
    while time.monotonic() < end:
        for child in _children(pid):
            if _rss_mib(child) > 200:
                return child
        time.sleep(0.02)
    raise AssertionError("no worker of {pid} grew while parsing the big file")


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_parser_that_crashes_costs_its_file(jobs: str, tmp_path: Path) -> None:
    """The worker parsing the big file is killed with SIGSEGV, as a native crash would: that file
    gets one error line, every other file is checked, the status is the one they earn (2)."""
    root = _project(tmp_path, {"a_big.py": BIG, "ok.py": FINDING})
    command = [sys.executable, "-m", "lint_rules", "--no-cache", "-j", jobs, "a_big.py", "ok.py"]
    with subprocess.Popen(command, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          env=_env()) as proc:
        os.kill(_parsing_the_big_file(proc.pid), signal.SIGSEGV)
        out, err = proc.communicate(timeout=240)
    assert proc.returncode == 2, err
    assert err.splitlines() == ["a_big.py: error: the parser crashed (SIGSEGV)"]
    assert out.startswith("ok.py:5:9: FWD001 N.generate")


def test_out_of_memory_costs_its_file(tmp_path: Path) -> None:
    """Python's parser needs about 1 GiB for these 400,000 lines (LibCST's needed 0.9 GiB for 100,000)."""
    root = _project(tmp_path, {"a_big.py": BIG + "y = 1\n" * 200_000, "ok.py": FINDING})
    proc = _fwdlint(root, "--no-cache", FWDLINT_WORKER_MEMORY="700")
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines() == [
        "a_big.py: error: out of memory (limit 0.7 GiB per parser process; FWDLINT_WORKER_MEMORY)"]
    assert proc.stdout.startswith("ok.py:5:9: FWD001 N.generate")


def test_flake8_reports_a_file_that_ran_out_of_time(tmp_path: Path) -> None:
    """flake8 reports syntax errors itself; a file fwdlint could not check is FWD000, never clean."""
    root = _project(tmp_path, {"a_big.py": BIG, "ok.py": FINDING})
    proc = _flake8(root, "--fwd-no-cache", FWDLINT_FILE_TIMEOUT="0.5")
    assert proc.returncode == 1, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == ("./a_big.py:1:1: FWD000 fwdlint cannot check this file: timed out: parsing took more than "
                        "0.5 s (FWDLINT_FILE_TIMEOUT)")
    assert lines[1].startswith("./ok.py:5:9: FWD001 N.generate")


def test_timeout_with_the_cli(tmp_path: Path) -> None:
    root = _project(tmp_path, {"a_big.py": BIG, "ok.py": FINDING})
    proc = _fwdlint(root, "--no-cache", "-j", "2", FWDLINT_FILE_TIMEOUT="0.5")
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines() == [
        "a_big.py: error: timed out: parsing took more than 0.5 s (FWDLINT_FILE_TIMEOUT)"]


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _gone_within(pids: list[int], limit: float) -> Optional[list[int]]:
    end = time.monotonic() + limit
    while time.monotonic() < end:
        alive = [pid for pid in pids if _alive(pid)]
        if not alive:
            return None
        time.sleep(0.05)
    return alive


def test_kill_9_of_fwdlint_leaves_no_worker(tmp_path: Path) -> None:
    """Each worker parses a file for seconds when fwdlint dies: the kernel ends them at once."""
    root = _project(tmp_path, {"a_big.py": BIG, "b_big.py": BIG.replace("Big", "Bigger")})
    command = [sys.executable, "-m", "lint_rules", "--no-cache", "-j", "2", "."]
    proc = subprocess.Popen(command, cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_env(),
                            start_new_session=True)
    workers = _wait_for_children(proc.pid, 2)
    time.sleep(0.5)  # both are parsing now
    proc.kill()
    proc.wait()
    left = _gone_within(workers, 2.0)
    for pid in left or ():
        os.kill(pid, signal.SIGKILL)
    assert left is None, f"workers still running after their parent was killed: {left}"
