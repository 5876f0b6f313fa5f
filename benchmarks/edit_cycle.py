"""What a user waits for after saving one file (issue 37): a warm run after one edit, against a cold
run of the same tree. Not a test: it prints numbers.

A copy of an installed package (``--site DIR --package NAME``) is linted as its own project, as
users lint in place (``fwdlint -j 1 -q .`` inside it), by each fwdlint source tree given
(``--tree``, default this checkout), the trees alternated within each repetition. Per repetition
and tree: a cold run (``--no-cache``), the first run with the cache (``first``: it fills it and
stores the findings), a warm run that changes nothing, then three edits of ``--file``,
each followed by a run:

* ``comment``: a comment line appended at the end (the issue's yardstick; the facts stay the same);
* ``code``: a function inserted after the first import, named after the repetition (its facts are
  new in every repetition, so no earlier run's findings can be reused; every line below it moves);
* ``broken``: a line that does not parse appended (every file is checked again).

CPU seconds of each fwdlint process with its parser processes (``RUSAGE_CHILDREN`` of this
process around each run), medians over ``--reps``; each edit's share of the cold run is the ratio
of the medians. The copy's files are left 4 s to settle before the warm runs (``stamps.SETTLED_NS``).

Usage (from the repository root)::

    .venv/bin/python benchmarks/edit_cycle.py --site DIR --package timm [--file models/resnet.py]
        [--reps 3] [--tree OTHER_CHECKOUT ...]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SETTLE = 4.0  # seconds: files younger than stamps.SETTLED_NS (3 s) are hashed on every run


def cpu(tree: Path, package: Path, *args: str) -> float:
    """CPU seconds of one ``fwdlint`` process (and its parser processes) run from ``tree``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-m", "lint_rules.cli", "-q", "-j", "1", *args, "."], cwd=package,
                   capture_output=True, env={**os.environ, "PYTHONPATH": str(tree)}, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def cycle(tree: Path, package: Path, target: Path, rep: int) -> dict[str, float]:
    """One repetition for one tree: cold, warm, and a run after each edit."""
    shutil.rmtree(package / ".fwdlint_cache", ignore_errors=True)  # the last repetition's runs
    times = {"cold": cpu(tree, package, "--no-cache")}
    times["first"] = cpu(tree, package)  # fills the cache
    time.sleep(SETTLE)
    cpu(tree, package)  # ... and the stamps, now that the files are old enough
    times["warm"] = cpu(tree, package)
    with target.open("a") as stream:
        stream.write(f"# edited {rep}\n")
    times["comment"] = cpu(tree, package)
    text = target.read_text()
    target.write_text(text.replace("\nimport ", f"\ndef _edited_{rep}(x):\n    return x + {rep}\nimport ", 1))
    times["code"] = cpu(tree, package)
    target.write_text(target.read_text() + "def broken(:\n")
    times["broken"] = cpu(tree, package)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--site", type=Path, required=True)
    parser.add_argument("--package", default="timm")
    parser.add_argument("--file", default="models/resnet.py", help="the file edited, relative to the package")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--tree", type=Path, action="append", help="fwdlint source trees (default: this one)")
    args = parser.parse_args()
    trees = [tree.resolve() for tree in args.tree or [REPO]]
    with tempfile.TemporaryDirectory(prefix="fwd-edit-cycle-") as scratch:
        copies = {}
        for index, tree in enumerate(trees):  # one copy per tree: the caches and edits stay apart
            copy = Path(scratch) / f"{index}" / args.package
            shutil.copytree(args.site / args.package, copy, ignore=shutil.ignore_patterns("__pycache__"))
            (copy / "pyproject.toml").write_text("")  # the package is the project, as in place
            copies[tree] = copy
        original = {tree: (copy / args.file).read_text() for tree, copy in copies.items()}
        samples: dict[Path, list[dict[str, float]]] = {tree: [] for tree in trees}
        for rep in range(args.reps):
            for tree in trees if rep % 2 == 0 else reversed(trees):
                (copies[tree] / args.file).write_text(original[tree])
                samples[tree].append(cycle(tree, copies[tree], copies[tree] / args.file, rep))
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"{args.package} ({sum(1 for _ in (args.site / args.package).rglob('*.py'))} files), edited "
          f"{args.file}, {args.reps} repetitions, {os.cpu_count()} CPUs, load {load:.1f} at the end")
    print(f"{'tree':<40} {'cold':>7} {'first':>7} {'warm':>7} {'comment':>16} {'code':>16} {'broken':>16}")
    for tree in trees:
        median = {kind: statistics.median(s[kind] for s in samples[tree]) for kind in samples[tree][0]}
        share = {kind: median[kind] / median["cold"] for kind in ("comment", "code", "broken")}
        print(f"{str(tree)[-40:]:<40} {median['cold']:6.2f}s {median['first']:6.2f}s {median['warm']:6.3f}s "
              f"{median['comment']:6.3f}s ({share['comment']:5.1%}) {median['code']:6.3f}s ({share['code']:5.1%}) "
              f"{median['broken']:6.3f}s ({share['broken']:5.1%})")
        print(f"{'':<40} each repetition: " + "; ".join(
            f"{kind} {', '.join(f'{s[kind]:.2f}' for s in samples[tree])}" for kind in samples[tree][0]))


if __name__ == "__main__":
    main()
