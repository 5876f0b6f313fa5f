"""Where fwdlint's time goes: start-up against bare Python, a cold run phase by phase against a bare
``libcst.parse_module``, the scaling of ``-j``, and the flake8 plugin's share. Not a test: it prints
numbers (the targets are issue 24's); no timing is asserted anywhere in the test suite.

Each measure runs fresh interpreters, the compared commands alternately (``--reps`` times), and
reports the minimum and the median of the per-repetition ratios, so that the noise of a shared
machine hits both sides. CPU time is the process's and its children's (``RUSAGE_CHILDREN`` of a
runner process): the parsing happens in ``lint_rules.workers`` processes.

* ``startup``: ``python -c pass``, ``fwdlint --version``, ``fwdlint --help``, a warm run that changes
  nothing, and "bare Python reading the cache" (every row of the facts database read and
  JSON-decoded, which is the least a warm run has to do).
* ``warm``: issue 37's yardstick, ``python -c pass`` against a warm run that changes nothing, CPU
  seconds (median of the repetitions, and the ratio of the medians). With ``--package`` the package
  is linted in place as the project root (``cd site/PACKAGE && fwdlint --project-root . .``), else
  the labelled files as ``startup`` runs them. Issue 37's three: the labelled files, ``--package timm``
  and ``--package transformers/models`` (a directory of a package is linted in place the same way;
  its target is an absolute one, under 0.3 s). The cache is filled first, and filled again once the
  files are older than ``stamps.SETTLED_NS`` (files younger than that are hashed on every run).
* ``phases``: one cold ``-j 1`` run in this process, instrumented: parent wall time per phase
  (exclusive: a phase's time excludes the phases it calls) and the workers' CPU per phase
  (parse, facts; for a tree from before the ``ast`` facts: syntax check, LibCST parse, facts), each
  worker writing its own counts to a file; then the CPU ratio of a whole cold ``fwdlint -j 1``
  process to a bare parse of the same files (``ast``'s, issue 37's yardstick, and LibCST's, which
  ``--no-libcst`` leaves out: it takes minutes on transformers' ``models/``).
* ``jobs``: cold runs with ``-j 1`` up to every CPU, and the default (no ``-j``).
* ``flake8``: ``flake8 -j 2`` with a warm cache against the same run with ``--extend-ignore FWD``.

The files: ``--labels`` (default ``benchmarks/corpus_labels.tsv``: the hand-labelled files) under
``--site`` (a directory the pinned packages are installed in, e.g. by ``corpus_eval.py --keep``; by
default they are installed into a temporary one, ``--no-deps``), or ``--package timm`` for a whole
installed package. ``--tree`` runs another fwdlint source tree (``git archive <commit> lint_rules |
tar -x -C <dir>``) for a before/after comparison.

Usage (from the repository root)::

    .venv/bin/python benchmarks/phases.py --site DIR [--package timm|transformers/models] [--reps 5] [--tree DIR]
        [--only startup,warm,phases,jobs,flake8]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
PINS = ("timm==1.0.31", "transformers==5.23.0", "diffusers==0.42.1", "lightning==2.6.6")
PHASES_FILE = "FWDLINT_BENCH_PHASES"  # where the workers append their per-task counts
PACKAGE: list[str] = []  # --package, if given

# Runs argv[2:] as a command after putting argv[1] first on sys.path; prints its own and its children's CPU.
RUNNER = """
import resource, subprocess, sys, time
start = time.perf_counter()
code = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
wall = time.perf_counter() - start
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
print(code, wall, usage.ru_utime + usage.ru_stime)
"""
LINT = "import sys; sys.path.insert(0, sys.argv.pop(1)); from lint_rules.cli import main; sys.exit(main())"
FLAKE8 = "import sys; sys.path.insert(0, sys.argv.pop(1)); from flake8.main.cli import main; sys.exit(main())"
PARSE = "import sys, libcst\nfor p in sys.argv[1:]:\n    libcst.parse_module(open(p, 'rb').read())\n"
AST_PARSE = "import ast, sys\nfor p in sys.argv[1:]:\n    ast.parse(open(p, 'rb').read())\n"
READ_CACHE = ("import json, sqlite3, sys\nfor d in sys.argv[1:]:\n    db = sqlite3.connect(d)\n"
              "    for (v,) in db.execute('SELECT value FROM facts'):\n"
              "        json.loads(v[1:] if v[:1] == '!' else v)\n")


# --- measuring commands -------------------------------------------------------------------------

def measure(cmd: list[str], cwd: Path, before: Callable[[], None] | None = None) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the command and its children) of one run."""
    if before is not None:
        before()
    proc = subprocess.run([sys.executable, "-c", RUNNER, *cmd], cwd=cwd, capture_output=True, text=True, check=True)
    code, wall, cpu = proc.stdout.split()
    if int(code) not in (0, 1):
        raise SystemExit(f"failed ({code}): {' '.join(cmd[:8])}")
    return float(wall), float(cpu)


def alternate(commands: dict[str, tuple[list[str], Callable[[], None] | None]], cwd: Path,
              reps: int) -> dict[str, list[tuple[float, float]]]:
    """Every command once per repetition, in turn; the order rotates between repetitions."""
    names = list(commands)
    runs: dict[str, list[tuple[float, float]]] = {name: [] for name in names}
    for rep in range(reps):
        for name in names[rep % len(names):] + names[:rep % len(names)]:
            cmd, before = commands[name]
            runs[name].append(measure(cmd, cwd, before))
    return runs


def ratio_line(runs: dict[str, list[tuple[float, float]]], name: str, base: str, what: int = 0) -> str:
    """min and median of ``name``, and the median of its per-repetition ratio to ``base``."""
    values = [r[what] for r in runs[name]]
    ratios = [a[what] / b[what] for a, b in zip(runs[name], runs[base])]
    kind = "wall" if what == 0 else "cpu"
    return (f"{name:<34} {kind} min {min(values) * 1000:8.1f} ms  median {statistics.median(values) * 1000:8.1f} ms"
            f"  {statistics.median(ratios):5.2f}x {base} (median of pairs; range {min(ratios):.2f}-{max(ratios):.2f})")


# --- the measures -------------------------------------------------------------------------------

def startup(tree: Path, files: list[str], site: Path, reps: int) -> None:
    with tempfile.TemporaryDirectory() as work:
        cache = Path(work, "cache")
        lint = [sys.executable, "-c", LINT, str(tree)]
        warm = [*lint, "-q", "-j", "1", "--cache-dir", str(cache), *files]
        subprocess.run(warm, cwd=site, capture_output=True, check=False)  # fill the cache
        (database,) = cache.glob("facts-*.sqlite")
        runs = alternate({
            "python -c pass": ([sys.executable, "-c", "pass"], None),
            "fwdlint --version": ([*lint, "--version"], None),
            "fwdlint --help": ([*lint, "--help"], None),
            "python reading the cache": ([sys.executable, "-c", READ_CACHE, str(database)], None),
            "fwdlint warm, nothing changed": (warm, None),
        }, site, reps)
    print(f"\nstart-up ({len(files)} files in the warm run; {reps} alternating repetitions):")
    for what in (0, 1):
        for name in ("fwdlint --version", "fwdlint --help", "python reading the cache"):
            print("  " + ratio_line(runs, name, "python -c pass", what))
        print("  " + ratio_line(runs, "fwdlint warm, nothing changed", "python reading the cache", what))


def warm(tree: Path, files: list[str], site: Path, reps: int) -> None:
    settled = subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv[1]); "
                              "from lint_rules.stamps import SETTLED_NS; print(SETTLED_NS)", str(tree)],
                             capture_output=True, text=True).stdout.strip()  # a tree from before: no stamps

    with tempfile.TemporaryDirectory() as work:
        cache = Path(work, "cache")
        lint = [sys.executable, "-c", LINT, str(tree), "-q", "-j", "1", "--cache-dir", str(cache)]
        cwd, run = (site / PACKAGE[0], [*lint, "--project-root", ".", "."]) if PACKAGE else (site, [*lint, *files])
        subprocess.run(run, cwd=cwd, capture_output=True, check=False)  # cold: fills the cache
        newest = max(max(s.st_mtime_ns, s.st_ctime_ns) for s in (os.stat(cwd / f) for f in _checked(cwd, files)))
        time.sleep(max(0.0, (newest + int(settled or 0) - time.time_ns()) / 1e9))
        subprocess.run(run, cwd=cwd, capture_output=True, check=False)  # settled files: their stamps are kept
        runs = alternate({"python -c pass": ([sys.executable, "-c", "pass"], None),
                          "fwdlint warm, nothing changed": (run, None)}, cwd, reps)
    floor = statistics.median(cpu for _, cpu in runs["python -c pass"])
    ours = statistics.median(cpu for _, cpu in runs["fwdlint warm, nothing changed"])
    where = f"{PACKAGE[0]} in place, its own project root" if PACKAGE else "the labelled files"
    print(f"\nwarm, nothing changed ({len(files)} files, {where}; {reps} alternating repetitions; "
          f"load average {os.getloadavg()[0]:.2f} at the end):")
    print(f"  python -c pass                  cpu median {floor * 1000:7.1f} ms")
    print(f"  fwdlint warm, nothing changed   cpu median {ours * 1000:7.1f} ms   {ours / floor:5.2f}x python -c pass")
    print("  " + ratio_line(runs, "fwdlint warm, nothing changed", "python -c pass", 1))


def _checked(cwd: Path, files: list[str]) -> list[str]:
    return files if not PACKAGE else [str(p.relative_to(cwd)) for p in cwd.rglob("*.py")]


class Phases:
    """Exclusive wall time per phase of the parent process: a wrapped function's time, minus that
    of the wrapped functions it calls."""

    def __init__(self) -> None:
        self.total: dict[str, float] = defaultdict(float)
        self.stack: list[list[float]] = []

    def wrap(self, owner: Any, name: str, phase: str) -> None:
        original = getattr(owner, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            self.stack.append([0.0])
            start = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                elapsed = time.perf_counter() - start
                inner = self.stack.pop()[0]
                self.total[phase] += elapsed - inner
                if self.stack:
                    self.stack[-1][0] += elapsed

        setattr(owner, name, timed)


def timed_extract(task: Any) -> Any:
    """``store._extract`` in a worker (or in the parent, ``parse_here``), its parse (and syntax check) timed
    (CPU), appended to a file."""
    from lint_rules import store
    from lint_rules.facts import extract

    counts = {"syntax": 0.0, "parse": 0.0}

    def counted(function: Callable[..., Any], key: str) -> Callable[..., Any]:
        def run(*args: Any, **kwargs: Any) -> Any:
            start = time.process_time()
            try:
                return function(*args, **kwargs)
            finally:
                counts[key] += time.process_time() - start
        return run

    if hasattr(store, "python_parse"):  # facts from ``ast``: its parse is the syntax check too
        hooks = [(store, "python_parse", "parse")]
    else:  # a tree from before: CPython's syntax check, then LibCST's parse
        hooks = [(store, "python_syntax_error", "syntax"), (extract, "parse", "parse")]
    saved = [getattr(owner, name) for owner, name, _ in hooks]
    for owner, name, key in hooks:
        setattr(owner, name, counted(getattr(owner, name), key))
    extract_task = getattr(store, "original_extract", store._extract)  # here in the parent, which patched it
    start = time.process_time()
    try:
        return extract_task(task)
    finally:
        total = time.process_time() - start
        for (owner, name, _), function in zip(hooks, saved):
            setattr(owner, name, function)
        with open(os.environ[PHASES_FILE], "a") as out:
            out.write(json.dumps({"locate": task[4], "syntax": counts["syntax"], "parse": counts["parse"],
                                  "facts": total - counts["syntax"] - counts["parse"]}) + "\n")


def phases(tree: Path, files: list[str], site: Path, reps: int, with_libcst: bool = True) -> None:
    """One instrumented cold run in a child interpreter (``--phases-child``), then whole-process CPU."""
    with tempfile.TemporaryDirectory() as work:
        counts = Path(work, "counts.jsonl")
        proc = subprocess.run([sys.executable, __file__, "--phases-child", str(tree), str(counts), *files], cwd=site,
                              capture_output=True, text=True, env={**os.environ, PHASES_FILE: str(counts)})
        if proc.returncode != 0:
            raise SystemExit(proc.stderr[-3000:])
        parent = json.loads(proc.stdout.splitlines()[-1])
        resolved = parent.pop("resolved")
        tasks = [json.loads(line) for line in counts.read_text().splitlines()]
    lint = [sys.executable, "-c", LINT, str(tree), "-q", "-j", "1", "--no-cache", *files]
    commands = {"bare libcst.parse_module": ([sys.executable, "-c", PARSE, *files], None),
                "fwdlint cold -j 1": (lint, None),
                "bare ast.parse": ([sys.executable, "-c", AST_PARSE, *files], None),
                "bare parse, also of the files resolved": ([sys.executable, "-c", PARSE, *files, *resolved], None)}
    if not with_libcst:  # LibCST parses transformers' models/ in minutes
        commands = {name: command for name, command in commands.items() if "ast.parse" in name or "fwdlint" in name}
    runs = alternate(commands, site, reps)
    print(f"\ncold -j 1, {len(files)} files given, phase by phase (one instrumented run):")
    print(f"  parent process, wall, exclusive: total {parent.pop('total'):.2f} s")
    for phase, seconds in sorted(parent.items(), key=lambda kv: -kv[1]):
        print(f"    {phase:<40} {seconds:7.3f} s")
    for locate, title in ((True, "given files"), (False, "files read to resolve names")):
        chosen = [t for t in tasks if t["locate"] is locate]
        if chosen:
            parse = sum(t["parse"] for t in chosen)
            print(f"  workers, CPU, {len(chosen)} {title}: " + ", ".join(
                f"{key} {sum(t[key] for t in chosen):.2f} s" for key in ("parse", "syntax", "facts"))
                + f"; all / parse {sum(t['parse'] + t['syntax'] + t['facts'] for t in chosen) / parse:.2f}")
    print("  whole processes (fresh interpreters, children included):")
    for what in (0, 1):
        print("    " + ratio_line(runs, "fwdlint cold -j 1", "bare ast.parse", what))
    if not with_libcst:
        return
    for what in (0, 1):
        print("    " + ratio_line(runs, "fwdlint cold -j 1", "bare libcst.parse_module", what))
    print(f"  against a bare parse of the given files and the {len(resolved)} files fwdlint read to resolve names:")
    for what in (0, 1):
        print("    " + ratio_line(runs, "fwdlint cold -j 1", "bare parse, also of the files resolved", what))


def phases_child(tree: str, counts: str, files: list[str]) -> None:
    sys.path.insert(0, tree)
    sys.path.insert(0, str(HERE))  # the workers import this module by name for ``timed_extract``
    from lint_rules import engine, store, workers
    from lint_rules.facts import codec

    import phases as me  # by name, not __main__: the workers unpickle ``timed_extract`` from it

    clock = Phases()
    store.original_extract = store._extract  # type: ignore[attr-defined]  # few small files are parsed here
    store._extract = me.timed_extract
    clock.wrap(workers.Pool, "map", "waiting for the parser processes")
    clock.wrap(workers, "_Worker", "starting parser processes")
    clock.wrap(store.FactsStore, "facts_many", "reading files, hashing keys")
    cache = getattr(store, "_Cache", None)  # a tree from before lint_rules/cache_file.py
    if cache is None:
        from lint_rules.cache_file import Cache as cache
    for method in ("get", "put", "close"):
        clock.wrap(cache, method, "cache I/O")
    clock.wrap(codec, "encode", "cache I/O")
    clock.wrap(codec, "decode", "cache I/O")
    clock.wrap(engine.Session, "view", "project view")
    clock.wrap(engine, "check_file", "rules")
    start = time.perf_counter()
    result = engine.analyse(files, engine.Run(cache_dir=Path(counts).parent / "cache", jobs=1))
    print(json.dumps({**clock.total, "total": time.perf_counter() - start, "resolved": list(result.resolved)}))


def jobs(tree: Path, files: list[str], site: Path, reps: int) -> None:
    from os import sched_getaffinity

    cpus = len(sched_getaffinity(0))
    lint = [sys.executable, "-c", LINT, str(tree), "-q", "--no-cache"]
    commands: dict[str, tuple[list[str], Callable[[], None] | None]] = {
        f"-j {n}": ([*lint, "-j", str(n), *files], None) for n in range(1, cpus + 1)}
    commands["default (no -j)"] = ([*lint, *files], None)
    runs = alternate(commands, site, reps)
    print(f"\n-j scaling, cold, {len(files)} files ({cpus} CPUs here; {reps} alternating repetitions):")
    for name in commands:
        print("  " + ratio_line(runs, name, "-j 1"))


def flake8(tree: Path, files: list[str], site: Path, reps: int) -> None:
    with tempfile.TemporaryDirectory() as work:
        cache = Path(work, "cache")
        base = [sys.executable, "-c", FLAKE8, str(tree), "-j", "2"]
        root = [f"--fwd-project-root={site / PACKAGE[0]}"] if PACKAGE else []  # the whole package is the view
        on = [*base, f"--fwd-cache-dir={cache}", *root, *files]
        subprocess.run(on, cwd=site, capture_output=True, check=False)  # warm the cache
        runs = alternate({"flake8 -j 2 --extend-ignore FWD": ([*base, "--extend-ignore", "FWD", *files], None),
                          "flake8 -j 2, FWD on, warm": (on, None)}, site, reps)
    print(f"\nflake8 ({len(files)} files; {reps} alternating repetitions):")
    for what in (0, 1):
        print("  " + ratio_line(runs, "flake8 -j 2, FWD on, warm", "flake8 -j 2 --extend-ignore FWD", what))


# --- files --------------------------------------------------------------------------------------

def install(site: Path) -> None:
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--disable-pip-version-check",
                    "--target", str(site), *PINS], check=True)


def labelled_files(labels: Path) -> list[str]:
    with labels.open(newline="") as handle:
        return sorted({row["path"] for row in csv.DictReader(handle, delimiter="\t")})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--site", type=Path, help="directory holding the installed pinned packages")
    parser.add_argument("--labels", type=Path, default=HERE / "corpus_labels.tsv")
    parser.add_argument("--package", help="lint this whole installed package instead of the labelled files")
    parser.add_argument("--tree", type=Path, default=REPO, help="the source tree holding lint_rules/")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--only", default="startup,warm,phases,jobs,flake8")
    parser.add_argument("--no-libcst", action="store_true", help="phases: compare with ast.parse only")
    args = parser.parse_args(argv)
    temporary = None
    if args.site is None:
        temporary = tempfile.mkdtemp(prefix="fwdlint-phases-")
        args.site = Path(temporary, "site")
        install(args.site)
    site = args.site.resolve()
    PACKAGE[:] = [args.package] if args.package else []
    try:
        files = (sorted(str(p.relative_to(site)) for p in (site / args.package).rglob("*.py")) if args.package
                 else labelled_files(args.labels))
        lines = sum(len((site / f).read_bytes().splitlines()) for f in files)
        print(f"tree {args.tree.resolve()}; {len(files)} files, {lines} lines under {site}")
        # byte-compiled first: with PYTHONDONTWRITEBYTECODE set, every run would compile the modules again
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(args.tree.resolve() / "lint_rules")], check=True)
        measures: dict[str, Callable[..., None]] = {
            "startup": startup, "warm": warm, "jobs": jobs, "flake8": flake8,
            "phases": lambda *given: phases(*given, with_libcst=not args.no_libcst)}
        for name in args.only.split(","):
            measures[name](args.tree.resolve(), files, site, args.reps)
    finally:
        if temporary is not None:
            shutil.rmtree(temporary, ignore_errors=True)
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--phases-child"]:
        phases_child(sys.argv[2], sys.argv[3], sys.argv[4:])
        sys.exit(0)
    sys.exit(main())
