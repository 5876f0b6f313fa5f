"""Peak memory of a cold run (issue 37): ``fwdlint --no-cache -q -j N .`` inside a tree, for each N
given. Not a test: it prints numbers.

Two figures per run: the largest single process (``ru_maxrss`` of the reaped children: the main
process or one parser process, whichever peaked higher), and the peak of the sum over the whole
process tree (the main process and its parser processes), sampled from ``/proc`` every 20 ms (Linux
only; a peak shorter than that can be missed).

Usage (from the repository root)::

    .venv/bin/python benchmarks/memory.py --target DIR [--jobs 1 2] [--tree FWDLINT_SOURCE]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PAGE = os.sysconf("SC_PAGE_SIZE")


def _tree_rss(root: int) -> int:
    """Bytes resident in ``root`` and its descendants, now."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stream:
                fields = stream.read().rpartition(")")[2].split()
            with open(f"/proc/{entry}/statm") as stream:
                rss[int(entry)] = int(stream.read().split()[1]) * PAGE
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(int(fields[1]), []).append(int(entry))
    total, stack = 0, [root]
    while stack:
        pid = stack.pop()
        total += rss.get(pid, 0)
        stack.extend(children.get(pid, ()))
    return total


def measure(tree: Path, target: Path, jobs: int) -> tuple[float, float, float]:
    """(largest process MiB, peak tree sum MiB, wall seconds) of one cold run."""
    start = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "lint_rules.cli", "--no-cache", "-q", "-j", str(jobs), "."],
                            cwd=target, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "PYTHONPATH": str(tree)})
    peak = 0
    while True:
        pid, _, usage = os.wait4(proc.pid, os.WNOHANG)  # this child's own rusage, its parser processes'
        if pid:  # included (they are reaped by it)
            break
        peak = max(peak, _tree_rss(proc.pid))
        time.sleep(0.02)
    proc.returncode = 0  # reaped above
    return usage.ru_maxrss * 1024 / 2**20, peak / 2**20, time.monotonic() - start  # ru_maxrss: KiB on Linux


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", type=Path, required=True, help="the directory linted (as the project root)")
    parser.add_argument("--jobs", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--tree", type=Path, default=REPO, help="the fwdlint source tree run")
    args = parser.parse_args()
    files = sum(1 for _ in args.target.rglob("*.py"))
    print(f"{args.target.name}: {files} files, cold (--no-cache), {os.cpu_count()} CPUs")
    for jobs in args.jobs:
        largest, peak, wall = measure(args.tree.resolve(), args.target, jobs)
        print(f"-j {jobs}: largest process {largest:.0f} MiB, peak of the process tree {peak:.0f} MiB, {wall:.0f} s wall")


if __name__ == "__main__":
    main()
