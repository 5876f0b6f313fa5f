"""The facts of a tree of files, in instructions: what a change to the collectors costs, measured
without the noise of a shared machine. Not a test.

One process per fwdlint source tree (``--tree``, two or more: ``git archive <commit> lint_rules |
tar -x -C <dir>``) reads every ``--step``-th ``.py`` file under ``--root``, parses each with ``ast``
and extracts its facts (``facts.extract.extract``, evidence lines on, as for the files a run is
given), under valgrind's callgrind. A process that only reads and parses gives the
baseline, subtracted from each. ``PYTHONHASHSEED=0``; the counts still move by about 0.5% between
identical runs (sets of nodes are ordered by address). The parser processes of a real run do the
same work, so this is the part of a cold run that the collectors decide; ``phases.py`` gives the rest.

Usage (from the repository root)::

    .venv/bin/python benchmarks/facts_instructions.py --root DIR [--step 6] --tree OLD --tree NEW
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

# argv: tree, root, step, "facts" or "parse"
CHILD = """
import ast, os, sys
sys.path.insert(0, sys.argv[1])
from lint_rules.facts.extract import extract
files = sorted(os.path.join(d, f) for d, _, fs in os.walk(sys.argv[2]) for f in fs if f.endswith(".py"))
for path in files[::int(sys.argv[3])]:  # one file at a time, as a parser process takes them
    text = open(path, encoding="utf-8").read()
    tree = ast.parse(text)
    if sys.argv[4] == "facts":
        extract(text, path, "package.module", False, True, tree=tree)
"""


def instructions(tree: Path, root: Path, step: int, what: str) -> int:
    env = {**os.environ, "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1"}
    proc = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, "-c",
                           CHILD, str(tree), str(root), str(step), what], capture_output=True, text=True, env=env)
    found = re.search(r"Collected : (\d+)", proc.stderr)
    if proc.returncode != 0 or found is None:
        raise SystemExit(f"{tree}: {proc.stderr[-2000:]}")
    return int(found.group(1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, required=True, help="the directory whose .py files are read")
    parser.add_argument("--step", type=int, default=6, help="read every step-th file (callgrind runs ~50x slower)")
    parser.add_argument("--tree", type=Path, action="append", required=True, help="a source tree holding lint_rules/")
    args = parser.parse_args()
    for tree in args.tree:  # compiled once, outside the counts
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(tree / "lint_rules")], check=True)
    baseline = instructions(args.tree[0], args.root, args.step, "parse")
    print(f"{args.root}, every {args.step}th file; reading and parsing them: {baseline / 1e9:.3f}G instructions")
    first = None
    for tree in args.tree:
        facts = instructions(tree, args.root, args.step, "facts") - baseline
        first = first or facts
        print(f"  {tree}: facts {facts / 1e9:.3f}G instructions, {facts / first:.3f}x the first tree")
    return 0


if __name__ == "__main__":
    sys.exit(main())
