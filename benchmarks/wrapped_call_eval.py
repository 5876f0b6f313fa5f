#!/usr/bin/env python3
"""Accuracy of FWD002 (with FWD001 at the ``def``) on hand-labelled third-party code (not a test).

    python benchmarks/wrapped_call_eval.py --python ENV/bin/python [--labels benchmarks/wrapped_call_labels.tsv]
        [--scripts DIR] [--tree DIR]

The labels were made by reading the sources, before fwdlint ran on them (install commands, sources
and conventions in each file's header): ``wrapped_call_labels.tsv`` on installed packages (paths
relative to site-packages), ``wrapped_call_script_labels.tsv`` on example training scripts of
repositories (paths relative to ``--scripts``/<repository name>, e.g. ``DIR/accelerate``, made by
``git archive`` of the commit named). One row per set-up of a model
(``setup``) and per method call on a set-up model after it, with the verdict ``report`` (runs
forward computation behind the wrapper, not registered), ``silent``, or ``guarded`` (runs it, but
inside a context that makes it safe, or only without gradients: a reader may count it either way).
Every labelled file is linted in place, inside its environment, by the fwdlint of ``--tree``
(default: this checkout), with FWD001 and FWD002 selected:

* a ``report`` row is found by FWD002 at its line, or by FWD001 at its method's ``def``;
* FWD002 on a ``silent`` row is a false positive; on a ``guarded`` row it is counted apart
  (strict: a false positive; lenient: a true positive), on a line nobody labelled it is listed;
* set-ups: the literal ones (notes not starting with "INDIRECT") the file's facts hold as set-up
  sites, counted apart for ``prepare_model(..., evaluation_mode=True)``, which wraps nothing.

Prints the counts, precision and recall (strict and lenient), then every disagreement.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys

from hazard_eval import ROOT, lint, site_packages

#: Prints the set-up lines of each file given, as fwdlint's facts hold them (``--tree``'s code).
SITES = """
import json, sys
from lint_rules.facts.extract import extract
print(json.dumps({p: [s.line for s in extract(open(p, encoding="utf-8").read(), p).wrap_sites] for p in sys.argv[1:]}))
"""


def read_labels(path: str) -> list[dict[str, str]]:
    with open(path, encoding="utf-8") as handle:
        return list(csv.DictReader([line for line in handle if not line.startswith("#")], delimiter="\t"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", required=True, help="interpreter of the environment holding the packages")
    parser.add_argument("--labels", default=os.path.join(ROOT, "benchmarks", "wrapped_call_labels.tsv"))
    parser.add_argument("--scripts", help="where the repositories of script labels are unpacked, one directory each")
    parser.add_argument("--tree", default=ROOT, help="the source tree holding the lint_rules/ to measure")
    args = parser.parse_args()
    labels = read_labels(args.labels)
    for row in labels:  # each file is linted in place, from the directory its path is relative to
        row["base"] = (os.path.join(args.scripts or "", row["repo"].rpartition("/")[2]) if "repo" in row
                       else site_packages(args.python))
    missing = [f"{row['base']}/{row['path']}" for row in labels
               if not os.path.isfile(os.path.join(row["base"], row["path"]))]
    if missing:
        print(f"missing: {', '.join(missing[:5])}", file=sys.stderr)
        return 2
    found, sites = [], {}
    for base in sorted({row["base"] for row in labels}):
        files = sorted({row["path"] for row in labels if row["base"] == base})
        found += lint(args.python, base, files, ("FWD001", "FWD002"), args.tree)
        proc = subprocess.run([sys.executable, "-c", SITES, *files], cwd=base, capture_output=True, text=True,
                              env={**os.environ, "PYTHONPATH": args.tree}, check=True)
        sites.update(json.loads(proc.stdout))
    files = {row["path"] for row in labels}
    fwd002 = {(d["path"], d["line"]): d for d in found if d["code"] == "FWD002"}
    fwd001 = {f"{d['path']}:{d['line']}" for d in found if d["code"] == "FWD001"}
    by_place = {(row["path"], int(row["line"])): row for row in labels if row["verdict"] != "setup"}
    counts = {"tp": 0, "fn": 0, "fp": 0, "guarded reported": 0, "guarded silent": 0, "unlabelled": 0}
    problems: list[str] = []
    for row in labels:
        place = (row["path"], int(row["line"]))
        if row["verdict"] == "report":
            hit = place in fwd002 or row["def"] in fwd001
            counts["tp" if hit else "fn"] += 1
            if not hit:
                problems.append(f"FN {row['path']}:{row['line']} {row['call']}  ({row['note'][:100]})")
        elif row["verdict"] == "guarded":
            counts["guarded reported" if place in fwd002 else "guarded silent"] += 1
    for place, diagnostic in sorted(fwd002.items()):
        row = by_place.get(place)
        if row is not None and row["verdict"] in ("report", "guarded"):
            continue
        kind = "fp" if row is not None else "unlabelled"
        counts[kind] += 1
        problems.append(f"{kind.upper()} {place[0]}:{place[1]}  ({row['note'][:80] if row else 'not labelled'})"
                        f"  -- {diagnostic['message'][:90]}")
    literal = [row for row in labels if row["verdict"] == "setup" and not row["note"].startswith("INDIRECT")]
    wrapping = [row for row in literal if "evaluation_mode=True" not in row["note"]]
    seen = [row for row in wrapping if int(row["line"]) in sites.get(row["path"], [])]
    false_sites = [row for row in literal if row not in wrapping and int(row["line"]) in sites.get(row["path"], [])]
    print(f"{len(files)} files, {len(labels)} labels; tree {args.tree}")
    print(f"set-ups: {len(seen)} of {len(wrapping)} literal ones that wrap recognised; "
          f"{len(false_sites)} of {len(literal) - len(wrapping)} evaluation_mode=True ones (which wrap nothing) "
          "taken for set-ups")
    print("  ".join(f"{k}: {v}" for k, v in counts.items()))
    strict_flagged = counts["tp"] + counts["fp"] + counts["unlabelled"] + counts["guarded reported"]
    lenient_tp = counts["tp"] + counts["guarded reported"]
    for name, tp, flagged, positives in (
            ("strict", counts["tp"], strict_flagged, counts["tp"] + counts["fn"]),
            ("lenient", lenient_tp, strict_flagged, lenient_tp + counts["fn"])):
        precision = f"{tp / flagged:.3f}" if flagged else "n/a"
        recall = f"{tp / positives:.3f}" if positives else "n/a"
        print(f"{name:8} precision {precision} ({tp}/{flagged})  recall {recall} ({tp}/{positives})")
    for row in literal:
        if row in wrapping and row not in seen:
            problems.append(f"SET-UP MISSED {row['path']}:{row['line']} {row['call']}")
    for row in false_sites:
        problems.append(f"SET-UP WRONG {row['path']}:{row['line']} {row['call']} (evaluation_mode=True)")
    for line in problems:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
