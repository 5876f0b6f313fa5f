"""Two fwdlint source trees side by side on one target, cold and warm: what a change costs.

Each pair runs the ``--before`` tree and this checkout alternately (which goes first alternates
too), each in a fresh interpreter, ``python -m lint_rules`` with the tree first on ``sys.path``,
linting ``--target`` in place; cold is ``--no-cache``, warm reuses a cache directory of its own per
tree that one unmeasured run filled. Reported: the median wall time of each side and the medians
of the per-pair ratios (after / before) of wall time and of CPU time (the run and its parser
workers), per ``-j``. Wall clock on these shared machines moves by
about 30% between identical runs; the ratio of neighbouring runs moves much less. Not a test.

Usage (from the repository root; ``git worktree add <dir> <commit>`` makes the before tree)::

    .venv/bin/python benchmarks/before_after.py --before <dir> --target <package dir> [--pairs 5] [--jobs 1,2]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
RUN = "import sys; sys.path.insert(0, sys.argv.pop(1)); from lint_rules.cli import main; sys.exit(main())"


def timed(tree: Path, args: list[str], cwd: Path) -> tuple[float, float]:
    """(wall seconds, CPU seconds): the CPU of the run and of its parser workers, which it waits for
    (``RUSAGE_CHILDREN`` counts every descendant reaped), so a busy machine moves it less."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", RUN, str(tree), *args], cwd=cwd, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode not in (0, 1, 2) or "Traceback" in proc.stderr:
        raise SystemExit(f"{tree}: exit {proc.returncode}\n{proc.stderr[-2000:]}")
    return elapsed, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, required=True, help="a source tree holding the older lint_rules/")
    parser.add_argument("--target", type=Path, required=True, help="the directory to lint (in place)")
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--jobs", default="1,2")
    args = parser.parse_args()
    trees = {"before": args.before.resolve(), "after": HERE}
    target = args.target.resolve()
    print(f"target {target}; {args.pairs} pairs; before {trees['before']}, after {HERE}")
    print("| mode | -j | before s (median) | after s (median) | after/before wall | after/before CPU |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as work:
        caches = {name: Path(work, name) for name in trees}
        for jobs in args.jobs.split(","):
            for mode in ("cold", "warm"):
                times: dict[str, list[float]] = {name: [] for name in trees}
                cpu: dict[str, list[float]] = {name: [] for name in trees}
                for pair in range(args.pairs + (mode == "warm")):
                    order = list(trees) if pair % 2 == 0 else list(reversed(trees))
                    for name in order:
                        cache = ["--no-cache"] if mode == "cold" else ["--cache-dir", str(caches[name])]
                        elapsed, used = timed(trees[name], ["-q", "-j", jobs, *cache, str(target)], Path(work))
                        if mode == "cold" or pair > 0:  # the first warm pair fills the caches
                            times[name].append(elapsed)
                            cpu[name].append(used)
                ratios = [a / b for a, b in zip(times["after"], times["before"])]
                cpu_ratios = [a / b for a, b in zip(cpu["after"], cpu["before"])]
                print(f"| {mode} | {jobs} | {statistics.median(times['before']):.3f} | "
                      f"{statistics.median(times['after']):.3f} | {statistics.median(ratios):.3f} | "
                      f"{statistics.median(cpu_ratios):.3f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
