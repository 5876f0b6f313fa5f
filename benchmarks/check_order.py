"""Does a file's check depend on which files were checked before it? Not a test: it prints numbers.

The checks of one run share what they computed (class analyses, verdicts of method names), and the
flake8 plugin checks files one at a time, in several processes, each in its own order. So a file
checked alone must get exactly the findings it gets in a run of its whole package.
``tests/test_check_order.py`` checks that on the fixtures; this script checks it on real packages,
linted in place: one run of every file (the reference), then each file (or a random ``--sample``
of them) checked alone with the same project view, from the same facts cache. Steps' paths are
compared as absolute paths: a file given to the run is named as given, one only in the view by its
absolute path.

Usage (from the repository root; DIR is an installed package, e.g. ``site/timm``)::

    .venv/bin/python benchmarks/check_order.py DIR [--sample 150] [--seed 1]
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lint_rules.diagnostics import Diagnostic  # noqa: E402
from lint_rules.engine import Run, analyse  # noqa: E402


def _absolute(found: list[Diagnostic]) -> list[Diagnostic]:
    return sorted(d._replace(steps=tuple(s._replace(path=os.path.abspath(s.path)) for s in d.steps),
                             related=tuple(s._replace(path=os.path.abspath(s.path)) for s in d.related))
                  for d in found)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("package", type=Path)
    parser.add_argument("--sample", type=int, default=0, help="files checked alone (default: every file)")
    parser.add_argument("--seed", type=int, default=1)
    options = parser.parse_args()
    os.chdir(options.package)
    files = sorted(os.path.join(d, f) for d, _, names in os.walk(".") for f in names if f.endswith(".py"))
    with tempfile.TemporaryDirectory() as cache:
        run = Run(project_root=Path(".").resolve(), cache_dir=Path(cache), jobs=1)
        by_file: dict[str, list[Diagnostic]] = {}
        for diagnostic in analyse(files, run).diagnostics:
            by_file.setdefault(diagnostic.path, []).append(diagnostic)
        chosen = random.Random(options.seed).sample(files, options.sample) if options.sample else files
        start, differ = time.perf_counter(), 0
        for path in chosen:
            alone = _absolute([d for d in analyse([path], run).diagnostics if d.path == path])
            together = _absolute(by_file.get(path, []))
            if alone != together:
                differ += 1
                print(f"differs: {path}: {len(alone)} findings alone, {len(together)} in the whole run", flush=True)
                for text in sorted({str(d) for d in alone} ^ {str(d) for d in together})[:4]:
                    print("   ", text[:300])
    print(f"{options.package}: {len(chosen)} of {len(files)} files checked alone, {differ} differ "
          f"({sum(len(v) for v in by_file.values())} findings in the whole run; {time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
