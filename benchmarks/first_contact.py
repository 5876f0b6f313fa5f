#!/usr/bin/env python3
"""Score FWD001 (and count FWD005) on packages labelled at first contact, linted in place.

Unlike ``corpus_eval.py`` (pinned packages without their dependencies, in a ``--target``
directory), this lints the way a user runs fwdlint: inside a real virtual environment that holds
the labelled packages *with* their dependencies and torch, from the environment's site-packages
directory, with ``--python`` naming that environment. The labels were written by hand before
fwdlint first ran on these packages (``corpus_labels_first_contact.md`` says how and when).

    PYTHONPATH=. .venv/bin/python benchmarks/first_contact.py --env DIR [--make] [--labels TSV]

``--make`` creates the environment at DIR first (torch 2.13.0 pinned, then the labelled packages
with their dependencies under a constraint that keeps that torch). Prints per-package precision and
recall of FWD001, every miss and false finding, and each FWD005 finding on a labelled class (a
method it names as unchecked is neither a hit nor a false finding: it is said, not silent).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from corpus_eval import Diagnostic, EvalError, lint_env, print_table, read_labels, relpath, score  # noqa: E402

LABELS = HERE / "corpus_labels_first_contact.tsv"
#: torchvision 0.29.1 needs torch >= 2.14; 0.28.0 is the newest that installs beside torch 2.13.0.
CONSTRAINTS = ("torch==2.13.0", "torchvision==0.28.0")


def make_env(env: Path, pins: list[str]) -> None:
    subprocess.run([sys.executable, "-m", "venv", str(env)], check=True)
    pip = [str(env / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, "torch==2.13.0"], check=True)
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as fh:
        fh.write("\n".join(CONSTRAINTS) + "\n")
    subprocess.run([*pip, "-c", fh.name, *pins], check=True)


def site_of(env: Path) -> Path:
    found = sorted(env.glob("lib/python3.*/site-packages"))
    if not found:
        raise EvalError(f"{env}: no lib/python3.*/site-packages")
    return found[0]


def lint(env: Path, site: Path, files: list[str]) -> tuple[list[Diagnostic], list[dict], list[str]]:
    cmd = [sys.executable, "-m", "lint_rules.cli", "--python", str(env), "--format", "json", "-j", "2",
           "--no-cache", *files]
    proc = subprocess.run(cmd, cwd=site, env=lint_env(), capture_output=True, text=True)
    if proc.returncode not in (0, 1, 2):
        raise EvalError(f"fwdlint exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    data = json.loads(proc.stdout)
    found = [Diagnostic(relpath(d["path"], site), d["line"], d.get("symbol", ""), d["message"])
             for d in data["diagnostics"] if d["code"] == "FWD001"]
    unresolved = [f"{relpath(d['path'], site)}:{d['line']} {d['message']}"
                  for d in data["diagnostics"] if d["code"] == "FWD005"]
    return found, data["errors"], unresolved


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", type=Path, required=True)
    parser.add_argument("--make", action="store_true")
    parser.add_argument("--labels", type=Path, default=LABELS)
    args = parser.parse_args(argv)
    labels = read_labels(args.labels)
    if args.make:
        make_env(args.env, sorted({lab.package for lab in labels}))
    site = site_of(args.env)
    files = sorted({lab.path for lab in labels})
    missing = [f for f in files if not (site / f).is_file()]
    if missing:
        raise EvalError(f"labelled files missing from {site}: {missing[:5]}")
    found, errors, unresolved = lint(args.env, site, files)
    rows, fps, unlabeled, fns = score(labels, found)
    print_table(rows)
    for line in (*fps, *unlabeled, *fns):
        print(line)
    print(f"FWD005 findings: {len(unresolved)}")
    for line in unresolved:
        print(f"  {line}")
    for error in errors:
        print(f"  error: {error}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
