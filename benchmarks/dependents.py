"""Which files' findings depend on each file, and does the analysis know it? Not a test: it prints numbers.

Issue 37 asks that after an edit only the findings that depend on the edited file are computed
again. ``lint_rules.reads`` records what each check read (through the answers it reused from
other checks too). This script lints a package in place once with the log on, then, for each
file of a sample, empties that file's facts (its classes, imports, functions, set-ups and
registrations gone: the strongest edit of it) and checks every file again in a new view. Every
file whose findings changed must have been recorded as depending on the emptied one: it read the
file's facts, or a scan that the file takes part in (``reads.contributions``). It prints the misses
(which would make reuse wrong) and how many files a reuse would check again after each edit.

Usage (from the repository root; DIR is an installed package, e.g. ``site/timm``)::

    .venv/bin/python benchmarks/dependents.py DIR [--sample 40] [--seed 1]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lint_rules.diagnostics import Diagnostic  # noqa: E402
from lint_rules.engine import Run, Session  # noqa: E402
from lint_rules.facts.model import FileFacts  # noqa: E402
from lint_rules.layout import module_name_for  # noqa: E402
from lint_rules.project import ProjectIndex  # noqa: E402
from lint_rules.reads import SCAN, ReadLog, contributions  # noqa: E402

#: The fields of a file's facts that an edit can empty (everything but its name and path).
EMPTIED = {field: () for field in FileFacts._fields if field not in ("path", "module", "parsed")}


class Recorded(NamedTuple):
    session: Session
    view: ProjectIndex
    checked: list[FileFacts]
    found: dict[str, list[Diagnostic]]  # each checked file's findings
    reads: dict[str, set[str]]  # ... and what its check read (``ReadLog.tokens``)


def recorded_run(paths: list[str], cache: Path) -> Recorded:
    """Check ``paths`` (under the working directory, the project root) as one run with the log on."""
    session = Session(Run(jobs=2, cache=True, cache_dir=cache, project_root=Path(".")), paths[0])
    checked = [o for o in session.store.facts_many(paths, jobs=2) if isinstance(o, FileFacts)]
    view = session.view(session.root_for(checked[0].path), paths)
    for facts in checked:
        view.add(facts, module_name_for(Path(facts.path), session.store.packages, session.store.directories)[2])
    view.reads = log = ReadLog()
    found, stretches = {}, {}
    for facts in checked:
        start = log.begin()
        log.read(facts.path)
        found[facts.path] = session.check(view, facts)
        stretches[facts.path] = (start, log.begin())
    reads = {path: set(tokens) for path, tokens in log.tokens(stretches).items()}
    return Recorded(session, view, checked, found, reads)


def after_emptying(run: Recorded, emptied: FileFacts) -> tuple[list[str], set[str], set[str]]:
    """Every file checked again with ``emptied``'s facts emptied: the other files whose findings
    changed, those recorded as reading its facts, and those recorded as reading a scan it is in."""
    other = run.view.with_files({emptied.path: emptied._replace(**EMPTIED)})
    changed = [f.path for f in run.checked if f.path != emptied.path
               and run.session.check(other, other.files[f.path]) != run.found[f.path]]
    direct = {path for path, read in run.reads.items() if emptied.path in read and path != emptied.path}
    scans = set(contributions(emptied))
    through_scans = {path for path, read in run.reads.items() if path != emptied.path and read & scans}
    return changed, direct, through_scans


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("directory", type=Path)
    parser.add_argument("--sample", type=int, default=40, help="files emptied, one at a time (default 40)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    os.chdir(args.directory)
    paths = sorted(os.path.join(d, f) for d, _, names in os.walk(".") for f in names if f.endswith(".py"))
    with tempfile.TemporaryDirectory() as cache:
        began = time.perf_counter()
        run = recorded_run(paths, Path(cache))
        print(f"{len(run.checked)} files checked with the log on in {time.perf_counter() - began:.1f} s; "
              f"{sum(any(t.startswith(SCAN) for t in r) for r in run.reads.values())} of them read a scan")
        sample = random.Random(args.seed).sample(run.checked, min(args.sample, len(run.checked)))
        misses, told_all, told_direct, changed_counts = [], [], [], []
        for emptied in sample:
            changed, direct, through_scans = after_emptying(run, emptied)
            misses.extend((emptied.path, path) for path in changed if path not in direct | through_scans)
            changed_counts.append(len(changed))
            told_direct.append(len(direct))
            told_all.append(len(direct | through_scans))
            print(f"  {emptied.path}: {len(changed)} files changed; recorded {len(direct)} directly, "
                  f"{len(direct | through_scans)} with the scans", flush=True)
    print(f"\n{len(sample)} files emptied one at a time, {len(run.checked)} files checked after each")
    print(f"  files whose findings changed: median {statistics.median(changed_counts)}, max {max(changed_counts)}")
    print(f"  recorded as depending on it, directly: median {statistics.median(told_direct)}, "
          f"max {max(told_direct)}; with the scans: median {statistics.median(told_all)}")
    print(f"  changed but not recorded (reuse would be wrong): {len(misses)}")
    for emptied_path, path in misses[:20]:
        print(f"    {path} after emptying {emptied_path}")


if __name__ == "__main__":
    main()
