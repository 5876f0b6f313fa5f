"""Issue 36, items 2 and 3: ``--fix`` does bounded work. The gate's check that a fix keeps every old line
is linear (it was ``difflib.SequenceMatcher(autojunk=False)``, quadratic in repeated lines: one finding
and 20,000 ``x = 1`` lines took 43 s), and every fix is parsed in a parser worker, as a lint parse is
(a file LibCST needs too much memory for aborted the whole run). ``benchmarks/fix_scaling.py`` measures
``--fix`` against file size."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lint_rules.fix.verify import FixRefused, first_line_not_kept, verify

ROOT = Path(__file__).resolve().parent.parent
MODEL = "import torch.nn as nn\n\n\nclass Net(nn.Module):\n    def generate(self, x):\n        return self(x)\n"


def test_the_kept_lines_check_is_linear_in_repeated_lines() -> None:
    old = (MODEL + "x = 1\n" * 20_000).encode()
    new = old.replace(b"    def generate", b"    @forward_entry\n    def generate", 1)
    new = b"from runtime_shim import forward_entry\n" + new
    started = time.perf_counter()
    verify(old, new, frozenset(), "m.py")
    assert time.perf_counter() - started < 2.0  # 0.01 s; difflib took tens of seconds here


@pytest.mark.parametrize("old,new,may_change,lost", [
    ([b"a\n", b"b\n"], [b"b\n", b"a\n"], set(), 2),  # moved: b kept before a, a's b is gone
    ([b"a\n", b"b\n"], [b"x\n", b"a\n", b"y\n", b"b\n", b"z\n"], set(), None),  # only new lines
    ([b"a\n", b"b\n", b"c\n"], [b"a\n", b"c\n"], {2}, None),  # a declared line deleted
    ([b"a\n", b"b\n", b"c\n"], [b"a\n", b"c\n"], set(), 2),  # an undeclared one
    ([b"x\n"] * 3, [b"x\n"] * 2, set(), 3),  # one of three equal lines lost
    ([b"x\n"] * 3, [b"y\n", b"x\n", b"x\n", b"x\n"], set(), None),
])
def test_first_line_not_kept(old: list[bytes], new: list[bytes], may_change: set[int], lost: int | None) -> None:
    assert first_line_not_kept(old, new, may_change) == lost
    if lost is not None:
        with pytest.raises(FixRefused, match=f"change existing line {lost}"):
            verify(b"".join(old), b"".join(new), may_change, "m.py")


@pytest.mark.parametrize("mib", [1000, 500])
def test_a_fix_that_needs_more_memory_than_the_machine_has_costs_only_its_file(tmp_path: Path, mib: int) -> None:
    """Under a 1000 MiB address-space limit (a small machine), LibCST's parse of a 240 kB file in the
    main process aborted the run (SIGABRT, 'memory allocation ... failed'): nothing was fixed. In a
    worker, the file is fixed or gets one error line, and the other file is fixed. Under 500 MiB (and
    under 1000 MiB on a busy machine, with more of the process mapped) the fixes' own 512 MiB thread
    stack did not fit: "can't start new thread" ended the run with a traceback; a smaller stack now."""

    def _soft_limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (mib * 2**20, resource.getrlimit(resource.RLIMIT_AS)[1]))

    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "big.py").write_text(MODEL + "x = 1\n" * 40_000)
    (tmp_path / "small.py").write_text(MODEL.replace("Net", "Small"))
    run = subprocess.run([sys.executable, "-m", "lint_rules.cli", "--no-cache", "--fix", "big.py", "small.py"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=600, preexec_fn=_soft_limit,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert run.returncode in (0, 2), (run.returncode, run.stderr[-3000:])
    assert "@forward_entry" in (tmp_path / "small.py").read_text()
    errors = [line for line in run.stderr.splitlines() if ": error:" in line]
    assert all(line.startswith("big.py: error: fix not applied:") for line in errors), run.stderr[-3000:]
    assert "Traceback" not in run.stderr and "memory allocation" not in run.stderr
