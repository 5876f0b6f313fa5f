"""Sweep fwdlint over whole installed packages: does it crash, what does it find, what does it cost.

Runs ``python -m lint_rules.cli <dir> --format json --no-cache -j 2 --python <env python>`` (cold,
in place, in a fresh subprocess per target) over the complete installed sources of torch,
transformers, lightning, diffusers and the standard library of one environment, and prints one
table: files, legitimate syntax/encoding errors, crashes, findings by code, wall time and peak
memory. Then runs the flake8 plugin (``python -m flake8 --select FWD``) over one target (lightning)
to check that it does not crash either and reports the same findings. Not a test: it prints
numbers and asserts nothing.

What counts as what:

* **files**: ``.py`` files on disk under the target, and how many of them fwdlint's own directory
  walk checks (``lint_rules.discover``; the difference is listed: folders it skips by name such as
  ``site-packages``, ``venv``, ``__pycache__``).
* **syntax/encoding (legit)**: an ``errors`` entry of the JSON for a file that the swept
  environment's own interpreter also refuses (``compile(bytes, path, "exec", PyCF_ONLY_AST)``:
  syntax errors, bad encodings, NUL bytes), or that cannot be read. The stdlib ships such files on
  purpose (``lib2to3/tests/data``, ``test/bad*``, ``test/tokenizedata``); they are linted, not
  excluded, and are listed below the table.
* **crashes**: a traceback on stderr, an exit status that is not the one the output implies (2 if
  any error, else 1 if any finding, else 0), output that is not the documented JSON, or an error
  entry for a file that the interpreter compiles (a valid file fwdlint could not handle: LibCST
  limits, recursion depth, an exception text). Each is printed with its message.
* **wall**: seconds of the fwdlint process; **max RSS**: ``ru_maxrss`` of ``RUSAGE_CHILDREN``,
  measured in a fresh wrapper process per target, i.e. the largest single process (the main one or
  one of the ``-j`` workers); **tree RSS**: the sum of the resident memory of the fwdlint process
  and its workers, sampled every 0.1 s from ``/proc`` (Linux; ``-`` elsewhere).
* **load**: the 1-minute load average when the run ended; this machine is shared, and wall times
  taken at a load above the core count are inflated accordingly.
* **resolved (inst.)**: ``stats.files_read_to_resolve_names`` (of them ``installed_files_read``).
* **project roots**: fwdlint checks each file with the view of its project (the nearest directory
  up from the file holding ``pyproject.toml``, ``setup.cfg``, ``setup.py`` or ``.git``) and reads
  every Python file under that root. The roots met and how many files lie under them are listed,
  since a root far above the target (``.git`` of a pyenv checkout) multiplies the work.
* **slowest files** (``--slowest N``, default 10; 0 skips the pass): each file's facts extracted
  alone (``FactsStore(None).facts``: read, parse with LibCST, extract), sequentially in one
  process. Rule checking is not included: fwdlint does not time it per file.

Environment (a throwaway one, never the repository's)::

    python3 -m venv <env>                             # any directory outside the repository
    <env>/bin/pip install torch==2.13.0               # always pinned: unpinned pulls CUDA builds
    <env>/bin/pip install --no-deps transformers==5.23.0 diffusers==0.42.1 lightning==2.6.6

fwdlint never imports the swept code, so no further dependency is needed. fwdlint itself and
flake8 run from the interpreter given by ``--fwdlint-python`` (default: the one running this
script, e.g. the repository's ``.venv``). All commands run with an empty temporary working
directory, so no ``setup.cfg``/``.flake8`` of the caller changes the result.

Usage (from the repository root)::

    .venv/bin/python benchmarks/sweep.py --python <env>/bin/python \\
        [--targets torch,transformers,lightning,diffusers,stdlib] [--jobs 2] [--slowest 10] \\
        [--flake8-target lightning | --flake8-target ''] [--keep DIR]
    .venv/bin/python benchmarks/sweep.py --python <env>/bin/python --dir NAME=PATH [--dir NAME=PATH ...] \\
        [--flake8-target NAME,NAME] [--timeout SECONDS] [--own-root] [--slowest 0]

``--dir NAME=PATH`` (repeatable) sweeps any directory as a target named NAME (with ``--dir``,
``--targets`` defaults to none). A ``MANIFEST.tsv`` in PATH or a directory above it (written by
``benchmarks/pathological.py``) gives CPython's verdict on its files (``ok`` or why not) instead of
the swept interpreter's compile; for those targets flake8's ``FWD000``/``E902``/``E999`` lines are
classified as the CLI's error entries. ``--flake8-target`` takes a comma-separated list.
``--timeout`` kills a run (its whole process group) after that many seconds: a crash ("hang").
An error entry that says a file's check timed out or its worker was killed is a crash too,
unless CPython itself crashes or hangs on that file (manifest verdict ``crash``/``timeout``).

One complete run on this shared 2-core machine (Python 3.11.7, torch 2.13.0+cpu, transformers
5.23.0, diffusers 0.42.1, lightning 2.6.6; cold, ``-j 2``; a 10,000-program fuzz run shared the
machine), ``--slowest 0 --own-root``::

    fwdlint 0.1.0 at 861c18e; Python 3.11.7 (the sweep environment); cold (--no-cache), -j 2, --project-root <target>

    | target | files (disk/linted) | syntax/enc | crashes | FWD001 | FWD002 | FWD003 | FWD101 | FWD201 | FWD301 | exit | wall s | load | max RSS MiB | tree RSS MiB | resolved (inst.) |
    |---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|
    | torch | 2285/2285 | 0 | 0 | 21 | 0 | 0 | 0 | 0 | 19 | 1 | 252.0 | 3.0 | 877 | 1194 | 17 (17) |
    | transformers | 2860/2860 | 0 | 0 | 1109 | 0 | 0 | 0 | 0 | 15 | 1 | 233.2 | 3.2 | 256 | 503 | 11 (11) |
    | lightning | 266/266 | 0 | 0 | 7 | 0 | 0 | 0 | 0 | 6 | 1 | 9.7 | 3.2 | 78 | 127 | 14 (14) |
    | diffusers | 1105/1105 | 0 | 0 | 157 | 0 | 0 | 0 | 0 | 4 | 1 | 157.9 | 4.0 | 146 | 351 | 51 (51) |
    | stdlib | 1790/1788 | 9 | 0 | 0 | 0 | 0 | 0 | 0 | 0 | 2 | 537.1 | 4.6 | 259 | 605 | 12 (0) |
    | flake8 lightning | 266/? | 0 | 0 | 7 | 0 | 0 | 0 | 0 | 6 | 1 | 22.3 | 4.2 | 77 | 181 | - |
    | total (fwdlint) | 8306/8304 | 9 | 0 | 1294 | 0 | 0 | 0 | 0 | 44 |  | 1189.9 |  | 877 | 1194 |  |

    Zero crashes (no traceback, no error for a file Python compiles, every exit status the one the
    output implies). The 9 stdlib errors are files CPython refuses too (lib2to3's Python 2 test data,
    tokenizedata's bad encodings). The first run of this script found the only crash class so far:
    two stdlib files with a parenthesised annotated target (``(x): int = 1``) that LibCST cannot
    parse; they are analysed now (facts are read from ``ast`` since, fixture
    ``fixtures/fwd001/libcst_grammar_gaps.py``). Without ``--own-root`` the stdlib files belong to the
    project of a ``.git`` far above (pyenv's checkout: 14,800 Python files in the view) and the same
    run took 2,614 s. flake8 over lightning reports the CLI's findings (7 + 6).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

CODES = ("FWD001", "FWD002", "FWD003", "FWD101", "FWD201", "FWD301")
PACKAGES = ("torch", "transformers", "lightning", "diffusers")
TARGETS = (*PACKAGES, "stdlib")

# Where each target lives, asked of the swept interpreter without importing any package
# (find_spec of a top-level name only locates it).
LOCATE = """
import importlib.util, json, sys, sysconfig
out = {}
for name in sys.argv[1:]:
    if name == "stdlib":
        out[name] = sysconfig.get_paths()["stdlib"]
    else:
        spec = importlib.util.find_spec(name)
        locations = list(spec.submodule_search_locations or []) if spec else []
        out[name] = locations[0] if locations else None
print(json.dumps([out, sys.version.split()[0]]))
"""

# Runs a command (argv after the first two) with stdout/stderr to files, and prints its exit
# status, wall time, ru_maxrss of its waited-for process tree (KiB) and the peak of the summed
# RSS of the tree sampled from /proc (KiB, -1 without /proc). A fresh process per target, so
# RUSAGE_CHILDREN holds that target's command only.
MEASURE = r"""
import json, os, resource, subprocess, sys, time
out_path, err_path, timeout, cmd = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4:]
page_kib = os.sysconf("SC_PAGE_SIZE") // 1024

def tree_rss(root):
    parents = {}
    rss = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(entry)] = int(fields[1])
        rss[int(entry)] = int(fields[21]) * page_kib
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += rss.get(pid, 0)
        todo.extend(child for child, parent in parents.items() if parent == pid)
    return total

with open(out_path, "wb") as out, open(err_path, "wb") as err:
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                            start_new_session=bool(timeout))  # own group only to kill it whole
    peak = -1 if not os.path.isdir("/proc") else 0
    timed_out = False
    while proc.poll() is None:
        if peak >= 0:
            peak = max(peak, tree_rss(proc.pid))
        if timeout and time.perf_counter() - start > timeout:  # a hang: its workers go too
            timed_out = True
            os.killpg(proc.pid, 9)
            proc.wait()
            break
        time.sleep(0.1)
    wall = time.perf_counter() - start
print(json.dumps({"rc": proc.returncode, "wall": wall, "maxrss": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss,
                  "tree": peak, "timed_out": timed_out}))
"""

# What fwdlint's own walk checks under a target, and the project roots those files belong to,
# with the number of Python files under each root (what each view reads). Runs with fwdlint's
# interpreter (the public functions the CLI uses).
DISCOVER = """
import json, sys
from collections import Counter
from pathlib import Path
from lint_rules.discover import python_files
from lint_rules.layout import find_root, project_files
files = [str(Path(p).resolve()) for p in python_files([sys.argv[1]])]
roots = Counter(str(find_root(Path(p))) for p in files)
sizes = {root: (sum(1 for _ in project_files(Path(root))) if root != "None" else None) for root in roots}
print(json.dumps({"files": files, "roots": {r: [n, sizes[r]] for r, n in roots.items()}}))
"""

# The swept interpreter's verdict on the files fwdlint reported errors for: None if it compiles
# the file, else why not (bytes given, so encoding cookies and BOMs count as when importing).
VERDICT = """
import ast, json, sys
out = {}
for path in json.load(sys.stdin):
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        out[path] = ["unreadable", f"{type(exc).__name__}: {exc}", None]
        continue
    try:
        compile(data, path, "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
        out[path] = None
    except (SyntaxError, ValueError, UnicodeError, LookupError) as exc:
        line = getattr(exc, "lineno", None)
        out[path] = [type(exc).__name__, str(exc).splitlines()[0] if str(exc) else "", line]
print(json.dumps(out))
"""

# Each file's facts extracted alone, timed (parse + extraction; one process, no cache).
SLOWEST = r"""
import json, sys, time
from lint_rules.store import FactsStore
import lint_rules.facts.extract, libcst  # imported before timing: the first file must not pay for them
libcst.parse_module("x = 1\n")
times = []
for path in json.load(sys.stdin):
    start = time.perf_counter()
    FactsStore(None).facts(path)
    times.append((time.perf_counter() - start, path))
times.sort(reverse=True)
print(json.dumps({"total": sum(t for t, _ in times), "top": times[:int(sys.argv[1])]}))
"""

# Which fwdlint is measured: the commit of its checkout, and whether lint_rules differs from it.
REVISION = """
import os, subprocess, lint_rules
here = os.path.dirname(os.path.dirname(os.path.abspath(lint_rules.__file__)))
def git(*args):
    proc = subprocess.run(["git", "-C", here, *args], capture_output=True, text=True)
    return proc.stdout.strip() if proc.returncode == 0 else ""
commit = git("rev-parse", "--short", "HEAD")
dirty = git("status", "--porcelain", "--", "lint_rules")
print(f"fwdlint {lint_rules.__version__} at {commit or 'no git checkout'}"
      + (" + uncommitted lint_rules changes" if dirty else ""))
"""

FLAKE8_LINE = re.compile(r"^(?P<path>.+?):(?P<line>\d+):(?P<col>\d+): (?P<code>FWD\d{3}) ")
FLAKE8_ERROR = re.compile(r"^(?P<path>.+?):\d+:\d+: (?P<message>(?:FWD000|E902|E999) .*)$")


@dataclass
class Outcome:
    """One fwdlint (or flake8) run over one target."""

    name: str
    directory: str
    on_disk: int = 0
    linted: int = 0
    skipped: Counter = field(default_factory=Counter)  # directories fwdlint's walk leaves out
    roots: dict[str, list] = field(default_factory=dict)
    rc: Optional[int] = None
    wall: float = 0.0
    maxrss_kib: int = 0
    tree_kib: int = -1
    load: float = -1.0  # 1-minute load average when the run ended (others' work slows wall time)
    codes: Counter = field(default_factory=Counter)
    legit: list[tuple[str, str, str]] = field(default_factory=list)  # path, fwdlint's message, Python's
    crashes: list[str] = field(default_factory=list)
    odd: list[str] = field(default_factory=list)
    resolved: Optional[int] = None
    installed: Optional[int] = None
    slowest: list[tuple[float, str]] = field(default_factory=list)
    extract_total: Optional[float] = None


def run(cmd: list[str], cwd: str, **kwargs: Any) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, **kwargs)


def run_measured(outcome: "Outcome", cmd: list[str], out: Path, err: Path, cwd: str, timeout: float = 0) -> str:
    """Run ``cmd`` under ``measure``, record exit status, time, memory, load and the crashes on
    stderr in ``outcome``; its stderr."""
    measured = measure(sys.executable, cmd, out, err, cwd, timeout)
    if measured.get("timed_out"):
        outcome.crashes.append(f"hang: killed after {timeout:g} s (--timeout)")
    outcome.load = os.getloadavg()[0] if hasattr(os, "getloadavg") else -1.0
    outcome.rc, outcome.wall = measured["rc"], measured["wall"]
    outcome.maxrss_kib, outcome.tree_kib = measured["maxrss"], measured["tree"]
    stderr = err.read_text(errors="replace")
    outcome.crashes.extend(stderr_crashes(stderr))
    return stderr


def measure(python: str, cmd: list[str], out: Path, err: Path, cwd: str, timeout: float = 0) -> dict[str, Any]:
    proc = run([python, "-c", MEASURE, str(out), str(err), str(timeout), *cmd], cwd)
    if proc.returncode != 0:
        raise SystemExit(f"sweep: measuring wrapper failed:\n{proc.stderr}")
    return json.loads(proc.stdout)


def count_on_disk(directory: str, skip: tuple[str, ...] = ()) -> list[str]:
    found = []
    for root, dirs, files in os.walk(directory):
        dirs[:] = [d for d in dirs if d not in skip]
        found.extend(os.path.realpath(os.path.join(root, f)) for f in files if f.endswith(".py"))
    return found


def skipped_dirs(directory: str, on_disk: list[str], linted: set[str]) -> Counter:
    """Files on disk that the walk leaves out, by their first left-out directory below the target."""
    base = os.path.realpath(directory)
    linted_dirs = {os.path.dirname(p) for p in linted}
    out: Counter = Counter()
    for path in on_disk:
        if path in linted:
            continue
        parts = os.path.relpath(path, base).split(os.sep)
        prefix = base
        where = os.path.relpath(path, base)
        for part in parts[:-1]:  # the highest directory none of whose files are linted
            prefix = os.path.join(prefix, part)
            if not any(d == prefix or d.startswith(prefix + os.sep) for d in linted_dirs):
                where = os.path.relpath(prefix, base) + os.sep
                break
        out[where] += 1
    return out


def read_manifest(directory: str) -> dict[str, list]:
    """CPython's verdicts from the nearest ``MANIFEST.tsv`` at or above ``directory`` (written by
    ``benchmarks/pathological.py``), keyed by real path: None for ``ok``, else as VERDICT gives."""
    for folder in (Path(directory).resolve(), *Path(directory).resolve().parents):
        manifest = folder / "MANIFEST.tsv"
        if manifest.is_file():
            out: dict[str, list] = {}
            for row in manifest.read_text(encoding="utf-8").splitlines()[1:]:
                name, _family, _kind, _size, _bytes, kind, reason = row.split("\t")
                out[os.path.realpath(folder / name)] = None if kind == "ok" else [kind, reason, None]
            return out
    return {}


# A per-file error saying the check was stopped rather than the file refused (worker isolation).
KILLED = re.compile(r"timed? ?out|timeout|killed|signal \d|SIG[A-Z]{2,}|segmentation|worker (died|crashed)"
                    r"|terminated abruptly|BrokenProcessPool", re.IGNORECASE)


def classify_errors(outcome: Outcome, errors: list[dict], env_python: str, cwd: str,
                    manifest: Optional[dict[str, list]] = None) -> None:
    manifest = manifest or {}
    paths = sorted({e.get("path", "") for e in errors if e.get("path")})
    unknown = [p for p in paths if os.path.realpath(p) not in manifest]
    proc = run([env_python, "-I", "-c", VERDICT], cwd, input=json.dumps(unknown))
    verdicts = json.loads(proc.stdout) if proc.returncode == 0 else {}
    verdicts.update({p: manifest[os.path.realpath(p)] for p in paths if os.path.realpath(p) in manifest})
    for error in errors:
        path, message = error.get("path", ""), error.get("message", "")
        verdict = verdicts.get(path, "missing") if path else "missing"
        if KILLED.search(message) and not (verdict and verdict != "missing" and verdict[0] in ("crash", "timeout")):
            outcome.crashes.append(f"check stopped (timeout/kill): {path}: {message}")
        elif verdict == "missing":
            outcome.crashes.append(f"error entry not checkable: {path}: {message}")
        elif verdict is None:
            outcome.crashes.append(f"error for a file Python compiles: {path}: {message}")
        else:
            kind, text, line = verdict
            outcome.legit.append((path, message, f"{kind}: {text}"))
            reported = re.search(r"line (\d+)", message)
            if line is not None and reported and int(reported.group(1)) != line and "NUL" not in message:
                outcome.odd.append(f"error line differs from Python's ({line}): {path}: {message}")


def stderr_crashes(text: str) -> list[str]:
    """Tracebacks and lines that are neither ``path: error: ...`` nor the resolve-names notice."""
    found = []
    if "Traceback (most recent call last)" in text:
        block = text[text.index("Traceback (most recent call last)"):]
        found.append("traceback: " + " | ".join(block.strip().splitlines()[-3:]))
    return found


def sweep_target(name: str, directory: str, args: argparse.Namespace, work: Path, cwd: str,
                 manifest: Optional[dict[str, list]] = None) -> Outcome:
    outcome = Outcome(name, directory)
    # The stdlib directory holds the interpreter's own site-packages: installed packages, not stdlib.
    disk = count_on_disk(directory, ("site-packages",) if name == "stdlib" else ())
    outcome.on_disk = len(disk)
    found = run([args.fwdlint_python, "-c", DISCOVER, directory], cwd)
    if found.returncode != 0:
        raise SystemExit(f"sweep: cannot list {directory} with fwdlint's walk:\n{found.stderr}")
    discovered = json.loads(found.stdout)
    linted = set(discovered["files"])
    outcome.linted = len(linted)
    outcome.skipped = skipped_dirs(directory, disk, linted)
    # with --own-root every file is checked with the target's view, whatever marker lies above
    outcome.roots = ({directory: [len(linted), len(linted)]} if args.own_root else discovered["roots"])

    out, err = work / f"{name}.json", work / f"{name}.stderr"
    cmd = [args.fwdlint_python, "-m", "lint_rules.cli", directory, "--format", "json", "--no-cache",
           "-j", str(args.jobs), "--python", args.python, *(["--project-root", directory] if args.own_root else [])]
    print(f"sweep: {name}: {outcome.linted} files, {' '.join(cmd[1:])}", file=sys.stderr, flush=True)
    stderr = run_measured(outcome, cmd, out, err, cwd, args.timeout)
    try:
        payload = json.loads(out.read_text(errors="replace"))
        diagnostics, errors, stats = payload["diagnostics"], payload["errors"], payload["stats"]
    except (ValueError, KeyError, TypeError) as exc:
        outcome.crashes.append(f"output is not fwdlint's JSON ({type(exc).__name__}: {exc}); exit {outcome.rc}")
        return outcome
    outcome.codes = Counter(d["code"] for d in diagnostics)
    outcome.resolved, outcome.installed = stats.get("files_read_to_resolve_names"), stats.get("installed_files_read")
    classify_errors(outcome, errors, args.python, cwd, manifest)
    if manifest:  # not a crash, but a file accepted that Python refuses (--dir targets)
        reported = {os.path.realpath(e.get("path", "")) for e in errors}
        outcome.odd.extend(f"no error for a file Python refuses ({manifest[p][0]}): {p}"
                           for p in sorted(linted) if manifest.get(p) and p not in reported)
    expected = 2 if errors else 1 if diagnostics else 0
    if outcome.rc != expected:
        outcome.crashes.append(f"exit status {outcome.rc}, expected {expected} from the output")
    error_lines = {f"{e['path']}: error: {e['message']}" for e in errors}
    for line in stderr.splitlines():
        if line and line not in error_lines and not line.startswith(("Traceback", " ")):
            outcome.odd.append(f"stderr: {line[:300]}")
    base = os.path.realpath(directory) + os.sep
    outside = [d["path"] for d in diagnostics if not os.path.realpath(d["path"]).startswith(base)]
    if outside:
        outcome.odd.append(f"{len(outside)} finding(s) outside the target, e.g. {outside[0]}")

    if args.slowest > 0:
        timed = run([args.fwdlint_python, "-c", SLOWEST, str(args.slowest)], cwd, input=json.dumps(sorted(linted)))
        if timed.returncode == 0:
            result = json.loads(timed.stdout)
            outcome.slowest = [(t, p) for t, p in result["top"]]
            outcome.extract_total = result["total"]
        else:
            outcome.odd.append("slowest-files pass failed: " + " | ".join(timed.stderr.strip().splitlines()[-2:]))
    return outcome


def sweep_flake8(name: str, directory: str, args: argparse.Namespace, work: Path, cwd: str,
                 manifest: Optional[dict[str, list]] = None) -> Outcome:
    """The plugin over one target: cold, same environment; crashes and per-code counts. With a
    ``manifest`` (a ``--dir`` target) its ``FWD000``/``E902``/``E999`` lines are classified as
    the CLI's error entries."""
    outcome = Outcome(f"flake8 {name}", directory)
    out, err = work / f"flake8-{name}.txt", work / f"flake8-{name}.stderr"
    cmd = [args.fwdlint_python, "-m", "flake8", "--select", "FWD", "--fwd-no-cache",
           "--fwd-python-executable", args.python, "-j", str(args.jobs), directory]
    if args.own_root and manifest is not None:  # --dir targets only: the package targets' runs stay as they were
        cmd[-1:-1] = ["--fwd-project-root", directory]
    print(f"sweep: {outcome.name}: {' '.join(cmd[1:])}", file=sys.stderr, flush=True)
    stderr = run_measured(outcome, cmd, out, err, cwd, args.timeout)
    if "critical error" in stderr.lower() or "PluginExecutionFailed" in stderr:
        outcome.crashes.append("flake8: " + " | ".join(stderr.strip().splitlines()[-2:]))
    lines = out.read_text(errors="replace").splitlines()
    errors = []
    for line in lines:
        match = FLAKE8_LINE.match(line)
        unchecked = FLAKE8_ERROR.match(line) if manifest is not None else None
        if unchecked:
            errors.append({"path": unchecked["path"], "message": unchecked["message"]})
        elif match:
            outcome.codes[match["code"]] += 1
        elif line.strip():
            outcome.odd.append(f"stdout: {line[:300]}")
    if manifest is not None:
        classify_errors(outcome, errors, args.python, cwd, manifest)
    if outcome.rc not in (0, 1) or (outcome.rc == 1) != bool(outcome.codes or errors):
        outcome.crashes.append(f"exit status {outcome.rc} with {sum(outcome.codes.values())} finding(s)")
    for line in stderr.splitlines():
        if line.strip() and not line.startswith(("Traceback", " ")):
            outcome.odd.append(f"stderr: {line[:300]}")
    outcome.on_disk, outcome.linted = len(count_on_disk(directory)), -1  # flake8's own walk: not counted
    return outcome


def mib(kib: int) -> str:
    return "-" if kib < 0 else f"{kib / 1024:.0f}"


def table(outcomes: list[Outcome]) -> list[str]:
    head = ["target", "files (disk/linted)", "syntax/enc", "crashes", *CODES, "exit", "wall s", "load",
            "max RSS MiB", "tree RSS MiB", "resolved (inst.)"]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for o in outcomes:
        files = f"{o.on_disk}/{o.linted if o.linted >= 0 else '?'}"
        resolved = "-" if o.resolved is None else f"{o.resolved} ({o.installed})"
        cells = [o.name, files, str(len(o.legit)), str(len(o.crashes)), *(str(o.codes.get(c, 0)) for c in CODES),
                 str(o.rc), f"{o.wall:.1f}", f"{o.load:.1f}", mib(o.maxrss_kib), mib(o.tree_kib), resolved]
        rows.append("| " + " | ".join(cells) + " |")
    if len(outcomes) > 1:
        total = [o for o in outcomes if not o.name.startswith("flake8")]
        rows.append("| " + " | ".join([
            "total (fwdlint)", f"{sum(o.on_disk for o in total)}/{sum(o.linted for o in total)}",
            str(sum(len(o.legit) for o in total)), str(sum(len(o.crashes) for o in total)),
            *(str(sum(o.codes.get(c, 0) for o in total)) for c in CODES), "", f"{sum(o.wall for o in total):.1f}", "",
            mib(max(o.maxrss_kib for o in total)), mib(max(o.tree_kib for o in total)), ""]) + " |")
    return rows


def details(outcomes: list[Outcome]) -> list[str]:
    lines = []
    for o in outcomes:
        lines.append(f"\n## {o.name}: {o.directory}")
        if o.skipped:
            skipped = ", ".join(f"{d} ({n})" for d, n in sorted(o.skipped.items()))
            lines.append(f"not linted by the directory walk: {skipped}")
        for root, (files, size) in sorted(o.roots.items()):
            lines.append(f"project root {root}: {files} linted file(s); "
                         + ("no marker: the run's files and what they import" if size is None
                            else f"{size} Python file(s) under it read for the view"))
        for crash in o.crashes:
            lines.append(f"CRASH {crash}")
        for path, message, python in o.legit:
            lines.append(f"syntax/encoding {path}: {message}  [Python: {python}]")
        for odd in o.odd:
            lines.append(f"odd: {odd}")
        if o.slowest:
            lines.append(f"slowest files (facts extraction alone, {o.extract_total:.1f} s for all, one process):")
            lines.extend(f"  {t:6.2f} s  {p}" for t, p in o.slowest)
    return lines


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", required=True,
                        help="interpreter of the environment to sweep (its packages are linted in place)")
    parser.add_argument("--targets", help=f"comma-separated, from {','.join(TARGETS)} (default: all; none with --dir)")
    parser.add_argument("--dir", action="append", default=[], metavar="NAME=PATH",
                        help="also sweep this directory as target NAME (repeatable)")
    parser.add_argument("--timeout", type=float, default=0, help="kill a run after this many seconds (0: never)")
    parser.add_argument("--fwdlint-python", default=sys.executable,
                        help="interpreter with fwdlint and flake8 installed")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--slowest", type=int, default=10, help="list the N slowest files per target (0: skip)")
    parser.add_argument("--flake8-target", default="lightning",
                        help="comma-separated targets to run the flake8 plugin over ('' skips)")
    parser.add_argument("--own-root", action="store_true", help="pass --project-root <target> (the cost of the "
                        "project view without a marker far above the target)")
    parser.add_argument("--keep", type=Path, help="keep raw outputs (JSON, stderr) in this directory")
    args = parser.parse_args(argv)
    targets = [t for t in (args.targets or ("" if args.dir else ",".join(TARGETS))).split(",") if t]
    unknown = sorted(set(targets) - set(TARGETS))
    if unknown:
        parser.error(f"unknown target(s): {', '.join(unknown)}")
    dirs = dict(d.split("=", 1) for d in args.dir if "=" in d)
    if len(dirs) != len(args.dir) or not all(os.path.isdir(p) for p in dirs.values()):
        parser.error("--dir takes NAME=PATH of an existing directory, each NAME once")
    dirs = {name: os.path.abspath(path) for name, path in dirs.items()}

    with tempfile.TemporaryDirectory(prefix="fwdlint-sweep-") as tmp:
        cwd = os.path.join(tmp, "cwd")  # empty: no config file of the caller applies
        os.mkdir(cwd)
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        located = run([args.python, "-I", "-c", LOCATE, *TARGETS], cwd)
        if located.returncode != 0:
            parser.error(f"--python {args.python}: {located.stderr.strip()}")
        where, version = json.loads(located.stdout)
        revision = run([args.fwdlint_python, "-c", REVISION], cwd).stdout.strip()
        outcomes = []
        for name in targets:
            if not where.get(name):
                print(f"sweep: {name} is not installed in {args.python}: skipped", file=sys.stderr)
                continue
            outcomes.append(sweep_target(name, where[name], args, work, cwd))
        for name, path in dirs.items():
            outcomes.append(sweep_target(name, path, args, work, cwd, read_manifest(path)))
        for flake8_name in args.flake8_target.split(","):
            if flake8_name in dirs:
                outcomes.append(sweep_flake8(flake8_name, dirs[flake8_name], args, work, cwd,
                                             read_manifest(dirs[flake8_name])))
            elif flake8_name and where.get(flake8_name):
                outcomes.append(sweep_flake8(flake8_name, where[flake8_name], args, work, cwd))
            else:
                continue
            cli = next((o for o in outcomes if o.name == flake8_name), None)
            if cli is not None and cli.codes != outcomes[-1].codes:
                outcomes[-1].odd.append(f"findings differ from the CLI's: flake8 {dict(outcomes[-1].codes)}, "
                                        f"fwdlint {dict(cli.codes)}")
    print(f"{revision}; Python {version} at {args.python}; cold (--no-cache), -j {args.jobs}"
          + (", --project-root <target>" if args.own_root else "") + "\n")
    print("\n".join(table(outcomes)))
    print("\n".join(details(outcomes)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
