"""``fwdlint --fix`` time against file size: one finding plus N copies of ``x = 1`` (issue 36: the gate's
``difflib.SequenceMatcher(autojunk=False)`` made this quadratic, 43 s at N = 20,000 where checking took
0.83 s). Each size runs ``fwdlint --no-cache`` (check) and ``fwdlint --no-cache --fix`` on a fresh copy in a
fresh interpreter, the sizes interleaved, ``--reps`` rounds; medians. The last columns divide each time by
N, and the time of each size by the previous one's: doubling N, a linear ``--fix`` is at most 2x (less
while start-up still counts), a quadratic one tends to 4x.

    PYTHONPATH=. .venv/bin/python benchmarks/fix_scaling.py [--sizes 5000,10000,20000,40000,80000] [--reps 3]

Measured (2 cores, load 0.8 at the start, 1.9 at the end; 3 reps)::

      lines  check s  --fix s fix/check fix ms/1k lines fix x previous
      5,000     0.57     1.82      3.21           363.7
     10,000     0.58     3.20      5.48           320.2           1.76
     20,000     0.89     4.76      5.37           238.2           1.49
     40,000     1.14     7.72      6.75           193.0           1.62
     80,000     1.83    12.61      6.90           157.6           1.63

Linear: no doubling above 1.76x. The 3.85x of 80,000 over 40,000 lines measured before is taken for
load: at load 5, --fix's CPU time (the processes' user + system) went from 7.5-9.3 s at 40,000 lines to
14.4-15.5 s at 80,000 (1.8x). Profiled in one process (``isolated.IN_PROCESS``), 10,000 -> 40,000
lines: LibCST's code generation, the largest part, 4.0x; its parse 1.7x; nothing grows faster.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODEL = "import torch.nn as nn\n\n\nclass Net(nn.Module):\n    def generate(self, x):\n        return self(x)\n"


def timed(cwd: Path, *args: str) -> float:
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "lint_rules.cli", "--no-cache", *args, "m.py"], cwd=cwd,
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    elapsed = time.perf_counter() - started
    if proc.returncode not in (0, 1):
        sys.exit(f"fwdlint {' '.join(args)} failed ({proc.returncode}): {proc.stderr[-500:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="5000,10000,20000,40000,80000")
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    check: dict[int, list[float]] = {n: [] for n in sizes}
    fix: dict[int, list[float]] = {n: [] for n in sizes}
    with tempfile.TemporaryDirectory() as scratch:
        for rep in range(args.reps):
            for n in sizes if rep % 2 == 0 else reversed(sizes):
                work = Path(scratch) / f"n{n}-{rep}"
                work.mkdir()
                (work / "pyproject.toml").write_text("")
                (work / "m.py").write_text(MODEL + "x = 1\n" * n)
                check[n].append(timed(work))
                fix[n].append(timed(work, "--fix"))
                assert "@forward_entry" in (work / "m.py").read_text()
    print(f"{'lines':>7} {'check s':>8} {'--fix s':>8} {'fix/check':>9} {'fix ms/1k lines':>15} {'fix x previous':>14}")
    previous = None
    for n in sizes:
        c, f = statistics.median(check[n]), statistics.median(fix[n])
        growth = f"{f / previous:>14.2f}" if previous else f"{'':>14}"
        print(f"{n:>7,} {c:>8.2f} {f:>8.2f} {f / c:>9.2f} {1000 * f / n * 1000:>15.1f} {growth}")
        previous = f


if __name__ == "__main__":
    main()
