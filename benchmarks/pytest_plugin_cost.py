"""What the pytest plugin costs a suite that does not use it (issue 23): a 200-test suite run with
the plugin loaded (as every pytest run in an environment with fwdlint installed loads it) against
the same run with ``-p no:fwdlint``, alternately, in fresh processes. Not a test: it prints the
ratio; nothing is asserted.

    .venv/bin/python benchmarks/pytest_plugin_cost.py [--reps 7] [--tests 200]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--tests", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        suite = Path(work)
        body = "".join(f"\n\ndef test_{i}():\n    assert {i} + 1 == {i + 1}\n" for i in range(args.tests))
        (suite / "test_suite.py").write_text("import math" + body)
        runs: dict[str, list[float]] = {"plugin loaded": [], "-p no:fwdlint": []}
        for rep in range(args.reps):
            for name in (list(runs) if rep % 2 == 0 else list(reversed(runs))):
                extra = ["-p", "no:fwdlint"] if name.startswith("-p") else []
                start = time.perf_counter()
                proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *extra],
                                      cwd=suite, capture_output=True, text=True)
                runs[name].append(time.perf_counter() - start)
                if f"{args.tests} passed" not in proc.stdout:
                    raise SystemExit(proc.stdout + proc.stderr)
    ratios = [a / b for a, b in zip(runs["plugin loaded"], runs["-p no:fwdlint"])]
    for name, values in runs.items():
        print(f"{name:<16} median {statistics.median(values) * 1000:7.1f} ms  min {min(values) * 1000:7.1f} ms")
    print(f"plugin loaded / -p no:fwdlint: median of pairs {statistics.median(ratios):.3f}x "
          f"(range {min(ratios):.3f}-{max(ratios):.3f}, {args.reps} pairs, {args.tests} tests)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
