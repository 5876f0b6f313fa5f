#!/usr/bin/env python3
"""Accuracy of FWD101 / FWD201 / FWD301 on hand-labelled third-party code (not a test).

    python benchmarks/hazard_eval.py --python ENV/bin/python [--labels benchmarks/hazard_labels.tsv]

The labels (package, version, path relative to site-packages, line, pattern, verdict, note) were
made by reading the installed sources, before fwdlint's new rules ever ran on them; the install
commands are in the file's header. Every labelled file is linted in place, inside the
environment that holds it (``--python``), with the three codes selected, and each finding is
matched to the labels by (path, line, code):

* true positive: labelled ``report`` for that code and reported;
* false negative: labelled ``report`` and not reported;
* false positive: reported on a line labelled ``silent`` (any pattern, e.g. a class patch), or on
  a line nobody labelled (listed, so a reader can judge it).

Prints a table of counts, precision and recall per code, then every disagreement.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
from collections import defaultdict
from dataclasses import dataclass

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CODES = ("FWD101", "FWD201", "FWD301")


@dataclass(frozen=True)
class Label:
    path: str
    line: int
    pattern: str
    verdict: str
    note: str


def read_labels(path: str) -> list[Label]:
    with open(path, encoding="utf-8") as handle:
        rows = [line for line in handle if not line.startswith("#")]
    return [Label(r["path"], int(r["line"]), r["pattern"], r["verdict"], r["note"])
            for r in csv.DictReader(rows, delimiter="\t")]


def site_packages(python: str) -> str:
    out = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         capture_output=True, text=True, check=True)
    return out.stdout.strip()


def lint(python: str, base: str, files: list[str], codes: tuple[str, ...] = CODES, tree: str = ROOT) -> list[dict]:
    """The findings of ``codes`` on ``files`` (relative to ``base``), linted in place by the
    fwdlint of ``tree``."""
    cmd = [sys.executable, "-m", "lint_rules.cli", "--format", "json", "--select", ",".join(codes),
           "--python", python, *files]
    proc = subprocess.run(cmd, cwd=base, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": tree})
    report = json.loads(proc.stdout)
    for error in report["errors"]:
        print(f"error: {error['path']}: {error['message']}", file=sys.stderr)
    return report["diagnostics"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", required=True, help="interpreter of the environment holding the packages")
    parser.add_argument("--labels", default=os.path.join(ROOT, "benchmarks", "hazard_labels.tsv"))
    args = parser.parse_args()
    labels = read_labels(args.labels)
    base = site_packages(args.python)
    files = sorted({label.path for label in labels})
    missing = [f for f in files if not os.path.isfile(os.path.join(base, f))]
    if missing:
        print(f"not installed in {args.python}: {', '.join(missing[:5])}", file=sys.stderr)
        return 2
    found = lint(args.python, base, files)
    reported = {(d["path"], d["line"], d["code"]): d for d in found}
    by_place: dict[tuple[str, int], list[Label]] = defaultdict(list)
    for label in labels:
        by_place[(label.path, label.line)].append(label)
    counts = {code: {"tp": 0, "fn": 0, "fp": 0, "unlabelled": 0} for code in CODES}
    problems: list[str] = []
    for label in labels:
        if label.verdict == "report" and label.pattern in CODES:
            hit = (label.path, label.line, label.pattern) in reported
            counts[label.pattern]["tp" if hit else "fn"] += 1
            if not hit:
                problems.append(f"FN {label.pattern} {label.path}:{label.line}  ({label.note})")
    for (path, line, code), diagnostic in sorted(reported.items()):
        here = by_place.get((path, line), [])
        if any(lab.pattern == code and lab.verdict == "report" for lab in here):
            continue
        kind = "fp" if here else "unlabelled"
        counts[code][kind] += 1
        why = "; ".join(f"{lab.pattern} {lab.verdict}: {lab.note}" for lab in here) or "not labelled"
        problems.append(f"{kind.upper()} {code} {path}:{line}  ({why})  -- {diagnostic['message'][:90]}")
    print(f"{len(files)} files, {len(labels)} labels")
    print(f"{'code':8} {'TP':>4} {'FN':>4} {'FP':>4} {'unlab.':>6} {'precision':>9} {'recall':>7}")
    for code, c in counts.items():
        flagged = c["tp"] + c["fp"] + c["unlabelled"]
        precision = c["tp"] / flagged if flagged else float("nan")
        recall = c["tp"] / (c["tp"] + c["fn"]) if c["tp"] + c["fn"] else float("nan")
        print(f"{code:8} {c['tp']:>4} {c['fn']:>4} {c['fp']:>4} {c['unlabelled']:>6} {precision:>9.3f} {recall:>7.3f}")
    for line in problems:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
