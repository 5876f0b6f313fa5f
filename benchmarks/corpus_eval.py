"""Score fwdlint's FWD001 against hand-written labels on pinned real-world releases.

Installs timm / transformers / diffusers / lightning (pinned, ``--no-deps``, never torch) into a
throwaway directory, checks that every file named in ``benchmarks/corpus_labels.tsv`` exists and
that the installed versions match the labels, runs ``python -m lint_rules.cli --format json`` over
the labeled files and scores FWD001 per labeled class: TP / FP / FN, precision and recall per
package. Also times fwdlint against a bare ``libcst.parse_module`` of the same files.

Usage (from the repository root)::

    PYTHONPATH=. python benchmarks/corpus_eval.py [--site DIR] [--keep] [--no-fail]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
LABELS = HERE / "corpus_labels.tsv"
PINS: tuple[str, ...] = (
    "timm==1.0.31",
    "transformers==5.23.0",
    "diffusers==0.42.1",
    "lightning==2.6.6",
)
#: Label sets of packages beyond PINS: what to install besides the labelled packages themselves
#: (the packages that hold their bases and attribute types; never torch: fwdlint knows torch by name).
SET_PINS: dict[str, tuple[str, ...]] = {
    "corpus_labels_unseen.tsv": (
        "mmcv-lite==2.2.0", "transformers==5.23.0", "timm==1.0.31", "accelerate==1.15.0",
        "huggingface-hub==2.4.0", "einops==0.8.2", "hyperpyyaml==1.2.3", "encodec==0.1.1",
        "ema-pytorch==0.8.3", "fvcore==0.1.5.post20221221", "iopath==0.1.10", "tiktoken==0.14.0",
    ),
}
CODE = "FWD001"
THRESHOLD = 0.95
TIMING_RUNS = 5
VERDICTS = frozenset({"report", "clean"})


class EvalError(Exception):
    """A problem with the setup (labels, install, linter output): not a score."""


@dataclass(frozen=True)
class Label:
    package: str  # "name==version"
    path: str
    symbol: str  # "Class.method" (nested: "Outer.Inner.method")
    verdict: str
    reason: str

    @property
    def cls(self) -> str:
        return self.symbol.rsplit(".", 1)[0]


@dataclass(frozen=True)
class Diagnostic:
    path: str
    line: int
    symbol: str
    message: str

    @property
    def cls(self) -> str:
        return self.symbol.rsplit(".", 1)[0] if "." in self.symbol else ""


def read_labels(path: Path) -> list[Label]:
    """Parse the TSV; reject malformed rows and duplicate symbols."""
    labels: list[Label] = []
    seen: set[tuple[str, str]] = set()
    with path.open(encoding="utf-8", newline="") as fh:
        reader = csv.reader(fh, delimiter="\t", quoting=csv.QUOTE_NONE)
        header = next(reader, None)
        if header != ["package", "path", "symbol", "verdict", "reason"]:
            raise EvalError(f"{path}: unexpected header {header!r}")
        for lineno, row in enumerate(reader, start=2):
            if not row or (len(row) == 1 and not row[0].strip()):
                continue
            if len(row) != 5:
                raise EvalError(f"{path}:{lineno}: expected 5 columns, got {len(row)}")
            package, rel, symbol, verdict, reason = (c.strip() for c in row)
            if "==" not in package:
                raise EvalError(f"{path}:{lineno}: package must be name==version, got {package!r}")
            if verdict not in VERDICTS:
                raise EvalError(f"{path}:{lineno}: verdict must be report|clean, got {verdict!r}")
            if "." not in symbol:
                raise EvalError(f"{path}:{lineno}: symbol must be Class.method, got {symbol!r}")
            key = (rel, symbol)
            if key in seen:
                raise EvalError(f"{path}:{lineno}: duplicate label {rel} {symbol}")
            seen.add(key)
            labels.append(Label(package, normpath(rel), symbol, verdict, reason))
    if not labels:
        raise EvalError(f"{path}: no labels")
    return labels


def normpath(p: str) -> str:
    p = p.replace("\\", "/")
    while p.startswith("./"):
        p = p[2:]
    return p


def canon(name: str) -> str:
    """PEP 503 normalisation, so ``Lightning`` and ``lightning`` compare equal."""
    return re.sub(r"[-_.]+", "-", name).lower()


def pins_for(labels_path: Path, labels: list["Label"]) -> tuple[str, ...]:
    if labels_path.name in SET_PINS:
        return tuple(sorted({lab.package for lab in labels})) + SET_PINS[labels_path.name]
    return PINS


def install(site: Path, pins: tuple[str, ...] = PINS) -> None:
    """pip-install the pinned releases into ``site`` without dependencies (so never torch)."""
    cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
           "--disable-pip-version-check", "--target", str(site), *pins]
    print("+ " + " ".join(cmd), flush=True)
    proc = subprocess.run(cmd)
    if proc.returncode != 0:
        raise EvalError(f"pip install failed with exit code {proc.returncode}")


def installed_versions(site: Path) -> dict[str, str]:
    """Map canonical distribution name -> version, from ``*.dist-info/METADATA``."""
    out: dict[str, str] = {}
    for meta in site.glob("*.dist-info/METADATA"):
        name = version = None
        with meta.open(encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if not line.strip():
                    break  # end of the header block
                if line.startswith("Name:"):
                    name = line.split(":", 1)[1].strip()
                elif line.startswith("Version:"):
                    version = line.split(":", 1)[1].strip()
        if name and version:
            out[canon(name)] = version
    return out


def check_tree(site: Path, labels: list[Label]) -> list[str]:
    """Verify versions and paths; return the sorted list of labeled files."""
    versions = installed_versions(site)
    problems: list[str] = []
    for pkg in sorted({lab.package for lab in labels}):
        name, want = pkg.split("==", 1)
        have = versions.get(canon(name))
        if have is None:
            problems.append(f"{name} is not installed in {site} (labels are for {pkg})")
        elif have != want:
            problems.append(f"{name}: installed {have}, labels are for {want}")
    files = sorted({lab.path for lab in labels})
    for rel in files:
        if not (site / rel).is_file():
            problems.append(f"labeled file missing from the installed tree: {rel}")
    if problems:
        raise EvalError("installed tree does not match the labels:\n  " + "\n  ".join(problems))
    return files


def lint_cmd(files: list[str]) -> list[str]:
    """A cold run every time: the site directory is in no project, and fwdlint caches such files
    under the directory it is given."""
    return [sys.executable, "-m", "lint_rules.cli", "--format", "json", "-j", "1", "--no-cache", *files]


def lint_env() -> dict[str, str]:
    """Make ``lint_rules`` importable from the repository even though cwd is the site dir."""
    env = dict(os.environ)
    parts = [str(REPO)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(parts)
    return env


def run_linter(site: Path, files: list[str]
               ) -> tuple[list[Diagnostic], list[Diagnostic], list[dict[str, str]], float]:
    """FWD001's findings, FWD005's (verdicts left unchecked, said), the file errors and the time."""
    start = time.perf_counter()
    proc = subprocess.run(lint_cmd(files), cwd=site, env=lint_env(), capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if proc.returncode not in (0, 1, 2):
        raise EvalError(f"fwdlint exited {proc.returncode}\nstderr:\n{proc.stderr[-4000:]}")
    try:
        data = json.loads(proc.stdout)
    except json.JSONDecodeError as exc:
        raise EvalError(f"fwdlint did not print JSON ({exc}); exit {proc.returncode}\n"
                        f"stdout:\n{proc.stdout[:2000]}\nstderr:\n{proc.stderr[-4000:]}") from None
    if data.get("version") != 1:
        raise EvalError(f"unexpected JSON version {data.get('version')!r}")
    diags = [
        Diagnostic(relpath(str(d["path"]), site), int(d.get("line", 0)), str(d.get("symbol") or ""),
                   str(d.get("message", "")))
        for d in data.get("diagnostics", [])
        if d.get("code") == CODE
    ]
    said = [Diagnostic(relpath(str(d["path"]), site), int(d.get("line", 0)), str(d.get("symbol") or ""),
                       str(d.get("message", ""))) for d in data.get("diagnostics", []) if d.get("code") == "FWD005"]
    errors = [{"path": relpath(str(e.get("path", "")), site), "message": str(e.get("message", ""))}
              for e in data.get("errors", [])]
    return diags, said, errors, elapsed


def relpath(p: str, site: Path) -> str:
    """Normalise a reported path to be relative to the site dir."""
    path = Path(p)
    if path.is_absolute():
        try:
            return normpath(str(path.resolve().relative_to(site.resolve())))
        except ValueError:
            return normpath(p)
    return normpath(os.path.normpath(p))


@dataclass
class Row:
    labeled: int = 0
    reports: int = 0
    tp: int = 0
    fp: int = 0
    fn: int = 0

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else 1.0

    @property
    def recall(self) -> float:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else 1.0


def score(
    labels: list[Label], diags: list[Diagnostic]
) -> tuple[dict[str, Row], list[str], list[str], list[str]]:
    """Return per-package rows and the FP / unlabeled-FP / FN lines."""
    by_key = {(lab.path, lab.symbol): lab for lab in labels}
    pkg_of_path = {lab.path: lab.package for lab in labels}
    classes = {(lab.path, lab.cls) for lab in labels}
    rows: dict[str, Row] = defaultdict(Row)
    for lab in labels:
        rows[lab.package].labeled += 1
        rows[lab.package].reports += lab.verdict == "report"
    fps: list[str] = []
    unlabeled: list[str] = []
    hit: set[tuple[str, str]] = set()
    for d in sorted(set(diags), key=lambda d: (d.path, d.line, d.symbol)):
        if (d.path, d.cls) not in classes:
            continue  # outside the labeled classes: not scored
        key = (d.path, d.symbol)
        if key in hit:
            continue  # several diagnostics for one method count once
        hit.add(key)
        lab = by_key.get(key)
        row = rows[pkg_of_path[d.path]]
        if lab is not None and lab.verdict == "report":
            row.tp += 1
        elif lab is not None:
            row.fp += 1
            fps.append(f"  FP  {d.path}:{d.line} {d.symbol}  [label: {lab.reason}]\n"
                       f"       linter: {d.message}")
        else:
            row.fp += 1
            unlabeled.append(f"  FP? {d.path}:{d.line} {d.symbol}  (method not in labels)\n"
                             f"       linter: {d.message}")
    fns = [f"  FN  {lab.path} {lab.symbol}  [label: {lab.reason}]"
           for lab in labels if lab.verdict == "report" and (lab.path, lab.symbol) not in hit]
    for lab in labels:
        if lab.verdict == "report" and (lab.path, lab.symbol) not in hit:
            rows[lab.package].fn += 1
    return dict(rows), fps, unlabeled, fns


def print_table(rows: dict[str, Row]) -> Row:
    total = Row()
    head = f"{'package':<24}{'methods':>8}{'report':>8}{'TP':>6}{'FP':>6}{'FN':>6}{'prec':>8}{'recall':>8}"
    print(head)
    print("-" * len(head))
    for pkg in sorted(rows):
        r = rows[pkg]
        for f in ("labeled", "reports", "tp", "fp", "fn"):
            setattr(total, f, getattr(total, f) + getattr(r, f))
        print(f"{pkg:<24}{r.labeled:>8}{r.reports:>8}{r.tp:>6}{r.fp:>6}{r.fn:>6}"
              f"{r.precision:>8.3f}{r.recall:>8.3f}")
    print("-" * len(head))
    print(f"{'total':<24}{total.labeled:>8}{total.reports:>8}{total.tp:>6}{total.fp:>6}{total.fn:>6}"
          f"{total.precision:>8.3f}{total.recall:>8.3f}")
    return total


PARSE_SNIPPET = """\
import sys, libcst
for p in sys.argv[1:]:
    with open(p, "rb") as fh:
        libcst.parse_module(fh.read())
"""


def _run_once(cmd: list[str], cwd: Path, env: dict[str, str] | None) -> float:
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    elapsed = time.perf_counter() - start
    if proc.returncode not in (0, 1, 2):
        raise EvalError(f"timing run failed ({proc.returncode}): {' '.join(cmd[:6])} ...\n{proc.stderr[-2000:]}")
    return elapsed


def _time_pair(site: Path, files: list[str], runs: int, title: str, parse_files: list[str] | None = None) -> None:
    """Parse and fwdlint alternate, so a slow phase of the machine hits both; the ratio reported
    is the median of the per-pair ratios (robust to the noise of a shared machine)."""
    parse_files = parse_files or files
    lines = 0
    for rel in parse_files:
        with open(site / rel, encoding="utf-8", errors="replace") as fh:
            lines += sum(1 for _ in fh)
    parse_cmd = [sys.executable, "-c", PARSE_SNIPPET, *parse_files]
    parses, lints = [], []
    for _ in range(runs):
        parses.append(_run_once(parse_cmd, site, None))
        lints.append(_run_once(lint_cmd(files), site, lint_env()))
    ratios = sorted(lint / parse for parse, lint in zip(parses, lints))
    print(f"\nspeed, {title} ({len(parse_files)} files parsed, {lines} lines, {runs} alternating pairs):")
    print(f"  libcst.parse_module only : {min(parses):7.2f} s (fastest)")
    print(f"  fwdlint -j 1             : {min(lints):7.2f} s (fastest)")
    print(f"  ratio fwdlint/parse      : {ratios[len(ratios) // 2]:7.2f} median of pairs "
          f"(range {ratios[0]:.2f}-{ratios[-1]:.2f}; target <= 1.5)")


_COLLECTED = re.compile(r"Collected\s*:\s*(\d+)")


def _instructions(cmd: list[str], cwd: Path, env: dict[str, str] | None) -> int:
    """Instructions executed, counted by valgrind's callgrind: the same for the same inputs,
    whatever else the machine is doing (wall-clock ratios here vary by +-30%)."""
    proc = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *cmd], cwd=cwd,
                          env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    match = _COLLECTED.search(proc.stderr)
    if match is None:
        raise EvalError(f"valgrind printed no instruction count:\n{proc.stderr[-2000:]}")
    return int(match.group(1))


def instruction_ratio(site: Path, files: list[str]) -> None:
    parse = _instructions([sys.executable, "-c", PARSE_SNIPPET, *files], site, None)
    lint = _instructions(lint_cmd(files), site, lint_env())
    print(f"\ninstructions, labeled files ({len(files)} files, callgrind):")
    print(f"  libcst.parse_module only : {parse / 1e9:7.2f} G")
    print(f"  fwdlint -j 1             : {lint / 1e9:7.2f} G")
    print(f"  ratio fwdlint/parse      : {lint / parse:7.2f}  (target <= 1.5)")


READ_SNIPPET = """\
import json, sys
from lint_rules.engine import Run, analyse
print(json.dumps(analyse(sys.argv[1:], Run(cache=False)).resolved))
"""


def files_read(site: Path, files: list[str]) -> list[str]:
    """The files fwdlint reads only to resolve names (bases, attribute types, functions)."""
    proc = subprocess.run([sys.executable, "-c", READ_SNIPPET, *files], cwd=site, env=lint_env(),
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise EvalError(f"listing the files read failed:\n{proc.stderr[-2000:]}")
    return [relpath(p, site) for p in json.loads(proc.stdout)]


def timing(site: Path, files: list[str], runs: int, packages: list[str]) -> None:
    """Two measurements: the labeled files alone, where fwdlint also reads the files they import
    (base classes, submodule types) that the bare parse does not; and whole packages, where
    almost everything fwdlint reads is also in the parse set."""
    _time_pair(site, files, runs, "labeled files (fwdlint also reads their imports)")
    read = files_read(site, files)
    _time_pair(site, files, runs, f"labeled files against a parse of them and the {len(read)} files "
               "read to resolve names", parse_files=[*files, *read])
    for package in packages:
        tree = sorted(p.relative_to(site).as_posix() for p in (site / package).rglob("*.py"))
        _time_pair(site, tree, max(1, runs // 2), f"whole package {package}")


def evaluate(site: Path, args: argparse.Namespace) -> int:
    labels = read_labels(Path(args.labels))
    files = check_tree(site, labels)
    n_cls = len({(lab.path, lab.cls) for lab in labels})
    print(f"labels: {len(labels)} methods in {n_cls} classes, {len(files)} files, "
          f"{sum(lab.verdict == 'report' for lab in labels)} report")
    diags, said, errors, _ = run_linter(site, files)
    if errors:
        print(f"\nfwdlint reported {len(errors)} file error(s):")
        for e in errors:
            print(f"  ERR {e['path']}: {e['message']}")
    rows, fps, unlabeled, fns = score(labels, diags)
    print()
    total = print_table(rows)
    for title, items in (("false positives (labeled clean)", fps),
                         ("false positives (method not labeled)", unlabeled),
                         ("false negatives", fns)):
        print(f"\n{title}: {len(items)}")
        for item in items:
            print(item)
    print(f"\nverdicts left unchecked and said (FWD005): {len(said)}")
    for d in said:
        print(f"  {d.path}:{d.line} {d.message}")
    if not args.no_timing:
        timing(site, files, args.runs, [p for p in args.packages.split(",") if p])
    if args.instructions:
        instruction_ratio(site, files)
    ok = total.precision >= THRESHOLD and total.recall >= THRESHOLD
    print(f"\nresult: precision {total.precision:.3f}, recall {total.recall:.3f} "
          f"(threshold {THRESHOLD}) -> {'PASS' if ok else 'FAIL'}")
    return 0 if ok or args.no_fail else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--site", help="reuse an existing install directory (skip pip install)")
    ap.add_argument("--keep", action="store_true", help="do not delete the temporary install directory")
    ap.add_argument("--no-fail", action="store_true", help="exit 0 whatever the score")
    ap.add_argument("--no-timing", action="store_true", help="skip the speed comparison")
    ap.add_argument("--runs", type=int, default=TIMING_RUNS, help="alternating parse/fwdlint timing pairs")
    ap.add_argument("--instructions", action="store_true",
                    help="also count instructions with valgrind (deterministic; takes ~10 minutes)")
    ap.add_argument("--packages", default="timm,lightning",
                    help="comma-separated installed packages to time whole (default: timm,lightning)")
    ap.add_argument("--labels", default=str(LABELS), help="label file (default: %(default)s)")
    args = ap.parse_args(argv)
    tmp: str | None = None
    try:
        if args.site:
            site = Path(args.site).resolve()
            if not site.is_dir():
                raise EvalError(f"--site {site} is not a directory")
        else:
            tmp = tempfile.mkdtemp(prefix="fwdlint-corpus-")
            site = Path(tmp) / "site"
            install(site, pins_for(Path(args.labels), read_labels(Path(args.labels))))
        return evaluate(site, args)
    except EvalError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    finally:
        if tmp is not None:
            if args.keep:
                print(f"kept {tmp}")
            else:
                shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
