"""The facts of a tree of files, in instructions: what a change to the collectors costs, measured
without the noise of a shared machine. Not a test.

One process per fwdlint source tree (``--tree``, one or more: ``git archive <commit> lint_rules |
tar -x -C <dir>``) reads every ``--step``-th ``.py`` file under ``--root``, parses each with ``ast``
and extracts its facts (``facts.extract.extract``, evidence lines on, as for the files a run is
given), under valgrind's callgrind. A process that only reads and parses gives the
baseline, subtracted from each. ``PYTHONHASHSEED=0``; the counts still move by about 0.5% between
identical runs (sets of nodes are ordered by address). The parser processes of a real run do the
same work, so this is the part of a cold run that the collectors decide; ``phases.py`` gives the rest.
With ``--whole``, also issue 37's yardstick in instructions: a whole cold run of every file under
``--root`` (linted in place, every rule, parsed in its own process; a few minutes for timm under
callgrind) against a bare ``ast.parse`` of each.

Usage (from the repository root)::

    .venv/bin/python benchmarks/facts_instructions.py --root DIR [--step 6] [--whole] --tree OLD --tree NEW
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
import sys
sys.path[:] = [sys.argv[1], *(path for path in sys.path if path)]  # not the linted directory (a typing.py)
import ast, os
from lint_rules.facts.extract import extract
files = sorted(os.path.join(d, f) for d, _, fs in os.walk(sys.argv[2]) for f in fs if f.endswith(".py"))
for path in files[::int(sys.argv[3])]:  # one file at a time, as a parser process takes them
    text = open(path, encoding="utf-8").read()
    tree = ast.parse(text)
    if sys.argv[4] == "facts":
        extract(text, path, "package.module", False, True, tree=tree)
"""


# argv: tree, root, step. A whole cold run (every rule, ``--no-cache``) of the files, linted in
# place, its parsing done in this process (as a run does for a few small files) so that callgrind,
# which follows one process, counts all of it; the parser processes' pickling is left out.
WHOLE = """
import sys
sys.path[:] = [sys.argv[1], *(path for path in sys.path if path)]
import os
from pathlib import Path
from lint_rules import engine, parse_here
parse_here.here_budget = lambda: 1 << 62
files = sorted(os.path.join(d, f) for d, _, fs in os.walk(".") for f in fs if f.endswith(".py"))
engine.analyse(files[::int(sys.argv[3])], engine.Run(jobs=1, cache=False, project_root=Path(".")))
"""
# argv: tree, root, step. Issue 37's yardstick for the same files: a bare ``ast.parse`` of each.
BARE = """
import sys
sys.path[:] = [path for path in sys.path if path]
import ast, os
files = sorted(os.path.join(d, f) for d, _, fs in os.walk(".") for f in fs if f.endswith(".py"))
for path in files[::int(sys.argv[3])]:
    ast.parse(open(path, "rb").read())
"""


def instructions(tree: Path, root: Path, step: int, what: str) -> int:
    env = {**os.environ, "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1"}
    code = {"whole": WHOLE, "bare": BARE}.get(what, CHILD)
    proc = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, "-c",
                           code, str(tree), str(root), str(step), what], capture_output=True, text=True, env=env,
                          cwd=root)
    found = re.search(r"Collected : (\d+)", proc.stderr)
    if proc.returncode != 0 or found is None:
        raise SystemExit(f"{tree}: {proc.stderr[-2000:]}")
    return int(found.group(1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, required=True, help="the directory whose .py files are read")
    parser.add_argument("--step", type=int, default=6, help="read every step-th file (callgrind runs ~50x slower)")
    parser.add_argument("--tree", type=Path, action="append", required=True, help="a source tree holding lint_rules/")
    parser.add_argument("--whole", action="store_true", help="also a whole cold run against a bare ast.parse")
    args = parser.parse_args()
    args.root, args.tree = args.root.resolve(), [tree.resolve() for tree in args.tree]
    for tree in args.tree:  # compiled once, outside the counts
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(tree / "lint_rules")], check=True)
    baseline = instructions(args.tree[0], args.root, args.step, "parse")
    print(f"{args.root}, every {args.step}th file; reading and parsing them: {baseline / 1e9:.3f}G instructions")
    first = None
    for tree in args.tree:
        facts = instructions(tree, args.root, args.step, "facts") - baseline
        first = first or facts
        print(f"  {tree}: facts {facts / 1e9:.3f}G instructions, {facts / first:.3f}x the first tree")
    if args.whole:  # every file: a run's project view reads all of them whichever it is given
        bare = instructions(args.tree[0], args.root, 1, "bare")
        print(f"every file; a bare ast.parse of each, in a fresh interpreter: {bare / 1e9:.3f}G instructions")
        for tree in args.tree:
            whole = instructions(tree, args.root, 1, "whole")
            print(f"  {tree}: a whole cold run {whole / 1e9:.3f}G instructions, {whole / bare:.2f}x the bare parse")
    return 0


if __name__ == "__main__":
    sys.exit(main())
