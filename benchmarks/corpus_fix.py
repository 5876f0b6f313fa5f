"""Run ``fwdlint --fix`` over the real-code corpus, in a copy, and check the result.

Same corpus as ``corpus_eval.py`` (pinned timm / transformers / diffusers / lightning, installed
``--no-deps``, the files listed in ``corpus_labels.tsv``). The installed tree is copied twice (the
original is never touched) and fixed with ``-j 1`` and ``-j 2``. Checks:

* every changed file compiles, and differs from the original only by inserted lines
  (``@forward_entry`` decorators and the ``from runtime_shim import forward_entry`` import);
* ``-j 1`` and ``-j 2`` give byte-identical trees;
* a second ``--fix`` changes nothing;
* ``fwdlint`` reports no FWD001 on the fixed files.

Usage (from the repository root)::

    PYTHONPATH=. python benchmarks/corpus_fix.py [--site DIR]
"""

from __future__ import annotations

import argparse
import difflib
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from corpus_eval import LABELS, EvalError, check_tree, install, lint_env, read_labels  # noqa: E402


def _cli(site: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lint_rules.cli", *args], cwd=site, env=lint_env(),
                          capture_output=True, text=True, timeout=1800)


def _copy(site: Path, dest: Path) -> Path:
    shutil.copytree(site, dest, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"), symlinks=True)
    return dest


def _inserted(old: bytes, new: bytes) -> list[bytes]:
    """The lines ``new`` adds to ``old``; raises if anything else changed."""
    old_lines, new_lines = old.splitlines(keepends=True), new.splitlines(keepends=True)
    added: list[bytes] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False).get_opcodes():
        if tag == "insert":
            added += [line.strip() for line in new_lines[j1:j2]]
        elif tag != "equal":
            if not all(b"runtime_shim import" in line for line in old_lines[i1:i2]):
                raise EvalError(f"existing lines changed: {old_lines[i1:i2]!r} -> {new_lines[j1:j2]!r}")
    return added


def evaluate(site: Path, work: Path) -> int:
    files = check_tree(site, read_labels(LABELS))
    before = json.loads(_cli(site, "--format", "json", *files).stdout)["diagnostics"]
    trees = {}
    for jobs in (1, 2):
        copy = _copy(site, work / f"j{jobs}")
        start = time.perf_counter()
        proc = _cli(copy, "--fix", "-j", str(jobs), *files)
        elapsed = time.perf_counter() - start
        print(f"--fix -j {jobs}: exit {proc.returncode} in {elapsed:.2f} s; {proc.stderr.strip().splitlines()[-1:]}")
        if proc.returncode == 2:
            raise EvalError(f"--fix failed:\n{proc.stderr[-4000:]}")
        trees[jobs] = {rel: (copy / rel).read_bytes() for rel in files}
    if trees[1] != trees[2]:
        differ = [rel for rel in files if trees[1][rel] != trees[2][rel]]
        raise EvalError(f"-j 1 and -j 2 differ: {differ}")
    copy = work / "j1"
    changed = decorators = imports = 0
    for rel in files:
        old, new = (site / rel).read_bytes(), (copy / rel).read_bytes()
        if old == new:
            continue
        changed += 1
        compile(new, rel, "exec", dont_inherit=True)
        for line in _inserted(old, new):
            if line == b"@forward_entry":
                decorators += 1
            elif line.startswith(b"from runtime_shim import"):
                imports += 1
            else:
                raise EvalError(f"{rel}: unexpected inserted line {line!r}")
    second = _cli(copy, "--fix", *files)
    unchanged = all((copy / rel).read_bytes() == trees[1][rel] for rel in files)
    after = json.loads(_cli(copy, "--format", "json", *files).stdout)["diagnostics"]
    remaining = [d for d in after if d["code"] == "FWD001"]
    print(f"files: {len(files)} labeled, {changed} fixed; FWD001 before: {len(before)}; "
          f"decorators inserted: {decorators}; imports inserted: {imports}")
    print("all fixed files compile: yes; only inserted lines: yes; -j 1 == -j 2: yes")
    print(f"second --fix: exit {second.returncode}, files unchanged: {'yes' if unchanged else 'NO'}")
    print(f"FWD001 after --fix: {len(remaining)}")
    ok = unchanged and not remaining and second.returncode == 0 and decorators == len(before)
    print(f"result: {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--site", help="an existing install directory (read only; default: pip install into a temp dir)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="fwdlint-corpus-fix-") as tmp:
        try:
            if args.site:
                site = Path(args.site).resolve()
            else:
                site = Path(tmp) / "site"
                install(site)
            return evaluate(site, Path(tmp))
        except (EvalError, SyntaxError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2


if __name__ == "__main__":
    sys.exit(main())
