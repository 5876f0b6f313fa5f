"""The progress line of a cold run (``lint_rules/progress.py``): on a terminal only, never with
``--quiet``, and cleared before the report, so the report reads as without it. The run is made to
count as long with ``FWDLINT_PROGRESS_AFTER=0`` (the default, 2 s, would make the test slow)."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

MODEL = "import torch.nn as nn\n\n\nclass M{n}(nn.Module):\n    def gen(self, x):\n        return self(x)\n"


def _run(project: Path, *args: str, terminal: bool) -> tuple[int, str, str]:
    """(exit status, stdout, stderr), stderr a pseudo-terminal if ``terminal``."""
    env = {**os.environ, "FWDLINT_PROGRESS_AFTER": "0"}
    command = [sys.executable, "-m", "lint_rules.cli", "--no-cache", *args]
    if not terminal:
        proc = subprocess.run(command, cwd=project, capture_output=True, text=True, env=env, timeout=120)
        return proc.returncode, proc.stdout, proc.stderr
    master, slave = pty.openpty()
    proc = subprocess.Popen(command, cwd=project, stdout=subprocess.PIPE, stderr=slave, env=env)
    os.close(slave)
    err = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # the other end closed
            break
        if not chunk:
            break
        err += chunk
    out = proc.stdout.read() if proc.stdout else b""
    os.close(master)
    return proc.wait(timeout=120), out.decode(), err.decode()


def test_a_terminal_gets_a_progress_line_that_is_gone_at_the_end(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("")
    for n in range(30):
        (tmp_path / f"m{n}.py").write_text(MODEL.format(n=n))
    code, out, err = _run(tmp_path, ".", terminal=True)
    assert code == 1 and len(out.splitlines()) == 30
    draws = err.split("\r")
    assert "fwdlint: 30/30 files read, 0% from the cache" in draws, err
    assert err.endswith("\r") and draws[-2].strip() == ""  # cleared: spaces over the last line, back to its start
    assert "files read" not in _run(tmp_path, ".", terminal=False)[2]  # a pipe: never
    assert _run(tmp_path, "--quiet", ".", terminal=True)[2] == ""  # --quiet: never
