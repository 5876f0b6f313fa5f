"""fwdlint's speed side by side with a bare parse, TorchFix and flake8, in one run, as one table.

Installs, into a work directory (``--work``, default a temporary one):

* ``site/``: pinned timm and transformers releases (``--no-deps``: no torch, no third-party code
  in this repository);
* three virtual environments: ``fwdlint`` (this checkout: libcst + flake8 + fwdlint), ``plain``
  (the same flake8 release alone) and ``torchfix`` (TorchFix 0.7.0, its own libcst).

Then measures, on the whole installed ``timm`` package linted in place (its project root is the
package directory, so the whole-package view and its cache are part of every fwdlint run):

* bare ``libcst.parse_module`` of the same files (the floor any LibCST linter pays);
* ``fwdlint -j 1`` cold (empty cache), warm (nothing changed), and warm after one file changed;
* ``torchfix -j 1`` (one process, as fwdlint);
* ``flake8 --select E,F,W`` without and with fwdlint installed (FWD not selected: the plugin must
  do nothing), and flake8's default selection (FWD on, warm cache) without and with fwdlint;
* peak memory (max RSS) of fwdlint cold on transformers' ``models/`` tree.

Wall clock on these shared machines moves by about 30% between identical runs, so each pair of
commands runs alternately ``--pairs`` times and the median of the per-pair ratios is reported.
``--instructions`` also counts executed instructions with valgrind (deterministic) for the parse
and fwdlint's cold, warm and one-changed runs on a subset (``--subset``, default ``timm/layers``;
``.`` for the whole package takes about 25 minutes: valgrind runs about 50x slower). Not a test: it
prints numbers; targets are in the README and issue 7.

Usage (from the repository root)::

    python3 benchmarks/lint_speed.py [--work DIR] [--pairs 3] [--instructions [--subset DIR]]
    python3 benchmarks/lint_speed.py --work DIR --only-instructions --instructions --subset .
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PINS = ("timm==1.0.31", "transformers==5.23.0")
TORCHFIX = "torchfix==0.7.0"
FLAKE8_DEFAULT_IGNORE = "E121,E123,E126,E226,E24,E704,W503,W504"

PARSE = """
import sys, libcst
for path in sys.argv[1:]:
    with open(path, "rb") as fh:
        libcst.parse_module(fh.read())
"""
# Runs a command and prints the peak resident memory (KiB) of it and its children.
PEAK = """
import resource, subprocess, sys
subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


def sh(cmd: list[str], **kwargs) -> subprocess.CompletedProcess:
    print("+ " + " ".join(cmd[:8]) + (" ..." if len(cmd) > 8 else ""), flush=True)
    return subprocess.run(cmd, check=True, **kwargs)


def venv(path: Path, *requirements: str) -> Path:
    if not (path / "bin" / "python").exists():
        sh([sys.executable, "-m", "venv", str(path)])
        sh([str(path / "bin" / "pip"), "install", "-q", "--disable-pip-version-check", *requirements])
    return path / "bin"


def setup(work: Path) -> dict[str, Path]:
    site = work / "site"
    if not (site / "timm").is_dir():
        sh([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--disable-pip-version-check",
            "--target", str(site), *PINS])
    lint = venv(work / "fwdlint", str(REPO))
    version = subprocess.run([str(lint / "python"), "-c", "import flake8; print(flake8.__version__)"],
                             capture_output=True, text=True, check=True).stdout.strip()
    return {"site": site, "fwdlint": lint, "plain": venv(work / "plain", f"flake8=={version}"),
            "torchfix": venv(work / "torchfix", TORCHFIX)}


def timed(cmd: list[str], cwd: Path, before=None) -> float:
    if before is not None:
        before()
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    elapsed = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        raise SystemExit(f"failed ({proc.returncode}): {' '.join(cmd[:6])}\n{proc.stderr[-3000:]}")
    return elapsed


def pairs(a: list[str], b: list[str], cwd: Path, n: int, before_a=None, before_b=None) -> tuple[float, float, float]:
    """Alternate ``a`` and ``b`` n times: (median a, median b, median of b/a per pair)."""
    times_a, times_b = [], []
    for _ in range(n):
        times_a.append(timed(a, cwd, before_a))
        times_b.append(timed(b, cwd, before_b))
    ratios = [tb / ta for ta, tb in zip(times_a, times_b)]
    return statistics.median(times_a), statistics.median(times_b), statistics.median(ratios)


_COLLECTED = re.compile(r"Collected\s*:\s*(\d+)")


def instructions(cmd: list[str], cwd: Path, before=None) -> int:
    if before is not None:
        before()
    proc = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *cmd], cwd=cwd,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"failed under valgrind ({proc.returncode}): {' '.join(cmd[:6])}\n{proc.stderr[-3000:]}")
    match = _COLLECTED.search(proc.stderr)
    if match is None:
        raise SystemExit(f"valgrind printed no instruction count:\n{proc.stderr[-2000:]}")
    return int(match.group(1))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, help="work directory to create or reuse")
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--instructions", action="store_true", help="also count instructions with valgrind")
    parser.add_argument("--subset", default="layers",
                        help="directory of timm to count instructions on ('.' for all of it: ~25 minutes)")
    parser.add_argument("--only-instructions", action="store_true", help="skip the wall-clock table")
    args = parser.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="fwdlint-speed-"))
    work.mkdir(parents=True, exist_ok=True)
    env = setup(work)
    lint = env["fwdlint"]
    package = env["site"] / "timm"
    files = sorted(str(p.relative_to(package)) for p in package.rglob("*.py"))
    lines = sum(len((package / f).read_bytes().splitlines()) for f in files)
    cache = work / "cache"
    fwdlint = [str(lint / "fwdlint"), "-j", "1", "--project-root", ".", "--cache-dir", str(cache), "."]
    parse = [str(lint / "python"), "-P", "-c", PARSE, *files]  # -P: timm/layers/typing.py must not shadow typing
    edited = package / files[len(files) // 2]
    original = edited.read_bytes()
    counter = iter(range(10 ** 6))

    def cold() -> None:
        shutil.rmtree(cache, ignore_errors=True)

    def edit() -> None:
        edited.write_bytes(original + f"\n# edit {next(counter)}\n".encode())

    if not args.only_instructions:
        wall_clock(args, env, package, files, lines, fwdlint, parse, cache, cold, edit, edited, original)
    if args.instructions:
        count_instructions(args, lint, package, cache, cold)
    print(f"\nwork directory: {work}")
    return 0


def wall_clock(args, env, package, files, lines, fwdlint, parse, cache, cold, edit, edited, original) -> None:
    site, lint, plain, torchfix = env["site"], env["fwdlint"], env["plain"], env["torchfix"]
    rows: list[tuple[str, str, str]] = []
    print(f"\ntimm {PINS[0].split('==')[1]}: {len(files)} files, {lines} lines; {args.pairs} alternating pairs\n",
          flush=True)
    t_parse, t_cold, r_cold = pairs(parse, fwdlint, package, args.pairs, before_b=cold)
    rows.append(("bare libcst.parse_module", f"{t_parse:.2f} s", "1.00 (reference)"))
    rows.append(("fwdlint cold (empty cache)", f"{t_cold:.2f} s", f"{r_cold:.2f} x parse (target <= 1.5)"))
    timed(fwdlint, package)  # fill the cache
    _, t_warm, r_warm = pairs(fwdlint, fwdlint, package, args.pairs, before_a=cold)
    rows.append(("fwdlint warm (nothing changed)", f"{t_warm:.2f} s", f"{r_warm:.1%} of cold (target <= 10%)"))
    _, t_one, r_one = pairs(fwdlint, fwdlint, package, args.pairs, before_a=cold, before_b=edit)
    edited.write_bytes(original)
    rows.append(("fwdlint warm, one file changed", f"{t_one:.2f} s", f"{r_one:.1%} of cold (target <= 15%)"))
    t_tfx = timed([str(torchfix / "torchfix"), "-j", "1", "."], package)
    t_cold_again = timed(fwdlint, package, cold)
    rows.append(("torchfix -j 1 (one run)", f"{t_tfx:.2f} s",
                 f"fwdlint cold is {t_tfx / t_cold_again:.1f}x faster (target >= 10x)"))

    def flake8(bin_dir: Path, *extra: str) -> list[str]:
        own = [f"--fwd-cache-dir={cache}", "--fwd-project-root=."] if bin_dir == lint else []
        return [str(bin_dir / "flake8"), "-j", "1", *own, *extra, "."]

    efw = ("--select", "E,F,W", "--extend-ignore", FLAKE8_DEFAULT_IGNORE)
    t_plain, t_with, r_sel = pairs(flake8(plain, *efw), flake8(lint, *efw), package, args.pairs)
    rows.append(("flake8 --select E,F,W, without fwdlint", f"{t_plain:.2f} s", "1.00 (reference)"))
    rows.append(("flake8 --select E,F,W, fwdlint installed", f"{t_with:.2f} s",
                 f"{r_sel - 1:+.1%} (target <= +5%)"))
    timed(flake8(lint), package)  # warm the cache through flake8
    t_plain_d, t_with_d, r_def = pairs(flake8(plain), flake8(lint), package, args.pairs)
    rows.append(("flake8 default selection, without fwdlint", f"{t_plain_d:.2f} s", "1.00 (reference)"))
    rows.append(("flake8 default selection + FWD, warm", f"{t_with_d:.2f} s", f"{r_def - 1:+.1%} (target <= +10%)"))

    models = site / "transformers" / "models"
    model_files = sum(1 for _ in models.rglob("*.py"))
    peak = subprocess.run([str(lint / "python"), "-c", PEAK, str(lint / "fwdlint"), "-j", "1", "--no-cache",
                           "--project-root", str(models), str(models)], capture_output=True, text=True, check=True)
    rows.append((f"fwdlint cold, transformers models/ ({model_files} files)", "",
                 f"peak memory {int(peak.stdout.strip()) / 1024:.0f} MiB (target <= 1024)"))

    width = max(len(r[0]) for r in rows)
    print(f"{'measure':<{width}}  {'median':>9}  ratio")
    for name, seconds, ratio in rows:
        print(f"{name:<{width}}  {seconds:>9}  {ratio}")


def count_instructions(args, lint, package, cache, cold) -> None:
    """Executed instructions (valgrind): deterministic, whatever else the machine does."""
    subset = (package / args.subset).resolve()
    sub_files = sorted(str(p.relative_to(subset)) for p in subset.rglob("*.py"))
    sub_lint = [str(lint / "fwdlint"), "-j", "1", "--project-root", ".", "--cache-dir", str(cache), "."]
    i_parse = instructions([str(lint / "python"), "-P", "-c", PARSE, *sub_files], subset)
    i_cold = instructions(sub_lint, subset, cold)
    i_warm = instructions(sub_lint, subset)
    target = subset / sub_files[len(sub_files) // 2]
    kept = target.read_bytes()
    try:
        i_one = instructions(sub_lint, subset, lambda: target.write_bytes(kept + b"\n# edited\n"))
    finally:
        target.write_bytes(kept)
    print(f"\ninstructions (valgrind), timm/{args.subset} ({len(sub_files)} files):")
    print(f"  bare parse        {i_parse / 1e9:8.2f} G")
    print(f"  fwdlint cold      {i_cold / 1e9:8.2f} G  {i_cold / i_parse:.2f} x parse (target <= 1.5)")
    print(f"  fwdlint warm      {i_warm / 1e9:8.2f} G  {i_warm / i_cold:.1%} of cold (target <= 10%)")
    print(f"  one file changed  {i_one / 1e9:8.2f} G  {i_one / i_cold:.1%} of cold (target <= 15%)")


if __name__ == "__main__":
    sys.exit(main())
