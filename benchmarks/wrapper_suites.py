#!/usr/bin/env python3
"""The wrappers' own test suites with the runtime shim loaded: same outcomes as without it?

    python benchmarks/wrapper_suites.py --lightning <lightning-checkout> --pytorch <pytorch-checkout>
        [--modes baseline,default,auto-warn] [--timeout 3600] [--tail 6] [--json out.json]

Not a test (no assertions). A patch of a wrapper must accept everything the wrapper accepts and
change nothing the wrapper's own tests observe. This runs selected test files of Lightning Fabric
and PyTorch, each in a fresh ``python -m pytest`` per mode, and prints a table (file x mode ->
passed / failed / skipped / errors) and every test whose outcome differs from the baseline, with
the last lines of its failure message.

Modes:

* ``baseline``  -- no shim (``FWD_SHIM_MODE`` removed from the environment).
* ``default``   -- ``import runtime_shim`` first (default routing).
* ``auto-warn`` -- ``import runtime_shim.auto`` first, ``FWD_SHIM_MODE=warn``.

How the shim is loaded "first": a ``sitecustomize.py`` in a temporary directory put first on
``PYTHONPATH`` imports it before anything else in *every* interpreter of the run, including the
ranks PyTorch's ``MultiProcessTestCase`` spawns (a ``python -c "import runtime_shim; pytest.main()"``
or a pytest plugin would load it in the pytest process only, and the DDP tests build their DDP in
the spawned ranks). If that import fails, the interpreter exits with code 97 and prints the
traceback: a broken shim can never pass for the baseline. A preflight per mode checks, in the
interpreter and in a spawned child, that the shim is (or, for the baseline, is not) loaded.

The suites are not in the wheels; bring them outside this repository (never copy them in):

* ``--lightning DIR``: a Lightning checkout (``DIR/tests/tests_fabric``, ``DIR/tests/tests_pytorch``
  and ``DIR/pyproject.toml``, which holds Lightning's pytest settings: strict markers, strict xfail,
  ``FutureWarning`` as an error), at the tag matching the installed ``lightning`` (2.6.6 is not tagged
  in the snapshot; 2.6.5's ``src/lightning/fabric`` is byte-identical to the installed 2.6.6 package,
  so its tests are used): ``git archive 2.6.5 tests pyproject.toml | tar -x -C DIR``. Run from
  ``DIR/tests`` as rootdir so the suites' ``conftest.py`` and helpers are used. Needs
  ``pytest-rerunfailures`` (PyPI; Lightning's ``flaky`` marks) in the environment. The Lightning set:
  Fabric's ``test_wrappers.py`` and ``test_fabric.py``, all of Fabric's ``strategies/`` and
  ``utilities/`` and all of ``tests_pytorch/strategies/`` (Lightning's own ``module_to_device`` tests
  are there: they hand ``Mock`` objects to what the shim patches), one pytest run per directory.
  Expect 5 failures in every mode, baseline included: ``utilities/test_optimizer.py::test_optimizer_to_device``
  after ``test_distributed.py`` renamed torch's private backend to ``pcu`` in the same process.
* ``--pytorch DIR``: a directory laid out like PyTorch's repository with ``test/distributed/...``
  files matching the installed torch. The DDP tests live in the wheel
  (``torch.testing._internal.distributed.distributed_test``); ``test_distributed_spawn.py`` is
  their driver. Needs ``expecttest`` (PyPI) in the environment.

How the PyTorch set was chosen (2 CPU cores, a few minutes per mode): of the 79 DDP tests of
``distributed_test`` only the 5 selected run on gloo/CPU (the others need >= 1-2 CUDA devices;
checked by running them: "Need at least 2 CUDA devices"); each spawns 2 ranks (8-30 s each here, by load).
FSDP2: ``test_fully_shard_state.py`` runs on CPU in threads (``FSDPTestMultiThread``) and pins
what ``fully_shard`` does to the module's class, state and copies. FSDP1: every test of PyTorch's
``test/distributed/fsdp`` needs CUDA (``skip_if_lt_x_gpu``), so FSDP1 is covered here only by
Lightning's strategy tests.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STARTUP_FAILED = 97  # exit code of an interpreter whose shim import failed

DDP_CPU_TESTS = (
    "test_DistributedDataParallelCPU",  # also selects test_DistributedDataParallelCPU_grad_is_view
    "test_DistributedDataParallel_requires_grad",
    "test_ddp_create_graph",
    "test_ddp_logging_data_cpu",
)


@dataclass(frozen=True)
class Suite:
    """One test file of one repository, run from ``rootdir`` (relative to the checkout)."""

    repo: str
    rootdir: str
    path: str
    pytest_args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()


LIGHTNING = tuple(
    Suite("lightning", "tests", path)
    for path in ("tests_fabric/test_wrappers.py", "tests_fabric/test_fabric.py", "tests_fabric/strategies/",
                 "tests_fabric/utilities/", "tests_pytorch/strategies/")
)

PYTORCH = (
    Suite("pytorch", "test/distributed", "test_distributed_spawn.py",
          ("-k", " or ".join(DDP_CPU_TESTS)),
          # INIT_METHOD must not be env://: the driver names its class after it, and setUp sets a
          # file:// one, so the spawned ranks would look for a class of another name.
          # TEMP_DIR: the driver wants a directory holding "barrier" ({tmp} is this run's temp dir)
          (("BACKEND", "gloo"), ("WORLD_SIZE", "2"), ("INIT_METHOD", "file:///nonexistent"),
           ("TEMP_DIR", "{tmp}"))),
    Suite("pytorch", "test/distributed/_composable/fsdp", "test_fully_shard_state.py"),
)

MODES: dict[str, tuple[str | None, str | None]] = {  # mode -> (import line, FWD_SHIM_MODE)
    "baseline": (None, None),
    "default": ("import runtime_shim", None),
    "auto-warn": ("import runtime_shim.auto", "warn"),
}

SITECUSTOMIZE = """\
# Written by fwdlint's benchmarks/wrapper_suites.py: load the shim before anything else.
import os, sys, traceback
try:
    {line}
except BaseException:
    traceback.print_exc()
    sys.stderr.write("wrapper_suites: '{line}' failed at interpreter start\\n")
    sys.stderr.flush()
    os._exit({code})
"""

PREFLIGHT = """\
import multiprocessing as mp, sys
def loaded(q):
    q.put("runtime_shim" in sys.modules)
if __name__ == "__main__":
    ctx = mp.get_context("spawn"); q = ctx.Queue(); p = ctx.Process(target=loaded, args=(q,))
    p.start(); child = q.get(timeout=60); p.join(60)
    print("runtime_shim" in sys.modules, child)
"""


@dataclass
class Result:
    """Outcomes of one suite file in one mode: test id -> outcome, and failure texts."""

    outcomes: dict[str, str] = field(default_factory=dict)
    messages: dict[str, str] = field(default_factory=dict)
    note: str = ""
    seconds: float = 0.0

    def count(self, outcome: str) -> int:
        return sum(1 for value in self.outcomes.values() if value == outcome)


def mode_env(mode: str, site_dir: Path, extra: tuple[tuple[str, str], ...] = ()) -> dict[str, str]:
    """The environment of one mode: the shim's sitecustomize first on PYTHONPATH (none for the
    baseline), the repo next (this checkout's shim, not another installed copy)."""
    line, shim_mode = MODES[mode]
    env = {k: v for k, v in os.environ.items() if k not in ("FWD_SHIM_MODE", "PYTHONPATH")}
    paths = ([str(site_dir / mode)] if line else []) + [str(ROOT)]
    env["PYTHONPATH"] = os.pathsep.join(paths + [p for p in [os.environ.get("PYTHONPATH")] if p])
    if shim_mode:
        env["FWD_SHIM_MODE"] = shim_mode
    env.update((key, value.format(tmp=site_dir)) for key, value in extra)
    return env


def write_site_dirs(site_dir: Path) -> None:
    (site_dir / "barrier").mkdir()
    for mode, (line, _) in MODES.items():
        if line:
            (site_dir / mode).mkdir(parents=True, exist_ok=True)
            (site_dir / mode / "sitecustomize.py").write_text(SITECUSTOMIZE.format(line=line, code=STARTUP_FAILED))


def preflight(mode: str, site_dir: Path) -> str:
    """'ok' when the shim is loaded in the interpreter and in a spawned child exactly when the mode
    says so; else what was seen."""
    script = site_dir / "preflight.py"  # a file: a spawned child re-imports its parent's main module
    script.write_text(PREFLIGHT)
    proc = subprocess.run([sys.executable, str(script)], check=False, capture_output=True, text=True, timeout=180,
                          env=mode_env(mode, site_dir), cwd=site_dir)
    want = "False False" if MODES[mode][0] is None else "True True"
    got = proc.stdout.strip()
    return "ok" if got == want else f"expected {want!r}, got {got!r} rc={proc.returncode} {_tail(proc.stderr, 3)}"


def _tail(text: str, lines: int) -> str:
    return " | ".join(line.rstrip() for line in text.strip().splitlines()[-lines:])


def parse_junit(path: Path) -> Result:
    result = Result()
    for case in ET.parse(path).getroot().iter("testcase"):
        test_id = f"{case.get('classname')}::{case.get('name')}"
        outcome, text = "passed", ""
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                outcome = {"failure": "failed", "error": "errors", "skipped": "skipped"}[child.tag]
                text = (child.text or child.get("message") or "").strip()
                break
        result.outcomes[test_id] = outcome
        if text:
            result.messages[test_id] = text
    return result


def run_suite(suite: Suite, checkout: Path, mode: str, site_dir: Path, timeout: float) -> Result:
    """One fresh ``python -m pytest`` of one file in one mode; a hang is killed with its process
    group (spawned ranks included) and reported as such."""
    junit = site_dir / f"junit-{mode}-{abs(hash((suite.path, mode)))}.xml"
    junit.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "pytest", suite.path, "-q", "--color=no", "-p", "no:cacheprovider",
           f"--rootdir={checkout / suite.rootdir}", f"--junitxml={junit}", "-o", "junit_family=xunit1",
           *suite.pytest_args]
    env = mode_env(mode, site_dir, suite.env)
    start = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=checkout / suite.rootdir, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
        note = ""
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        note = f"TIMEOUT after {timeout:.0f}s"
    result = parse_junit(junit) if junit.exists() and not note else Result()
    if proc.returncode == STARTUP_FAILED:
        note = "shim import failed at start: " + _tail(out, 4)
    elif not result.outcomes and not note:
        note = f"no results (rc={proc.returncode}): " + _tail(out, 4)
    result.note, result.seconds = note, time.monotonic() - start
    return result


def differences(base: Result, other: Result) -> list[tuple[str, str, str]]:
    """(test, baseline outcome, this mode's outcome) for every test whose outcome changed; a test
    missing from a run counts as 'not run'."""
    names = sorted(set(base.outcomes) | set(other.outcomes))
    return [(n, base.outcomes.get(n, "not run"), other.outcomes.get(n, "not run")) for n in names
            if base.outcomes.get(n, "not run") != other.outcomes.get(n, "not run")]


def print_table(rows: list[tuple[Suite, str, Result]]) -> None:
    print(f"{'suite file':58} {'mode':10} {'pass':>5} {'fail':>5} {'skip':>5} {'err':>4} {'secs':>6}  note")
    for suite, mode, res in rows:
        name = f"{suite.repo}:{suite.path}"
        print(f"{name:58} {mode:10} {res.count('passed'):5} {res.count('failed'):5} {res.count('skipped'):5} "
              f"{res.count('errors'):4} {res.seconds:6.1f}  {res.note}")


def print_comparison(rows: list[tuple[Suite, str, Result]]) -> None:
    """Per suite and mode: tests compared with the baseline (ran in either), same outcome, differing."""
    base = {suite: res for suite, mode, res in rows if mode == "baseline"}
    print(f"\n{'suite':58} {'mode':10} {'compared':>8} {'same':>6} {'differ':>6}")
    totals: dict[str, list[int]] = {}
    for suite, mode, res in rows:
        if mode == "baseline" or suite not in base:
            continue
        compared = len(set(base[suite].outcomes) | set(res.outcomes))
        differ = len(differences(base[suite], res)) if res.outcomes else compared
        total = totals.setdefault(mode, [0, 0])
        total[0] += compared
        total[1] += differ
        print(f"{suite.repo + ':' + suite.path:58} {mode:10} {compared:8} {compared - differ:6} {differ:6}")
    for mode, (compared, differ) in totals.items():
        print(f"{'all':58} {mode:10} {compared:8} {compared - differ:6} {differ:6}")


def print_differences(rows: list[tuple[Suite, str, Result]], tail: int) -> int:
    base = {suite: res for suite, mode, res in rows if mode == "baseline"}
    count = 0
    for suite, mode, res in rows:
        if mode == "baseline" or suite not in base:
            continue
        if not res.outcomes:  # the run itself failed (startup, timeout): one line, not one per test
            count += len(base[suite].outcomes)
            print(f"\n[{mode}] {suite.repo}:{suite.path}: none of {len(base[suite].outcomes)} tests ran: {res.note}")
            continue
        for name, was, now in differences(base[suite], res):
            count += 1
            print(f"\n[{mode}] {suite.repo}:{suite.path} {name}: {was} -> {now}")
            message = res.messages.get(name) or res.note
            for line in message.strip().splitlines()[-tail:]:
                print(f"    {line}")
    return count


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lightning", type=Path, help="Lightning checkout (contains tests/tests_fabric)")
    parser.add_argument("--pytorch", type=Path, help="PyTorch-like tree (contains test/distributed)")
    parser.add_argument("--modes", default=",".join(MODES), help="comma-separated, of: " + ", ".join(MODES))
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds per pytest run")
    parser.add_argument("--tail", type=int, default=6, help="lines of each differing test's message")
    parser.add_argument("--only", default="", help="run only suite files whose path contains this")
    parser.add_argument("--json", type=Path, help="also write all outcomes here")
    args = parser.parse_args(argv)
    modes = [m for m in args.modes.split(",") if m]
    if unknown := [m for m in modes if m not in MODES]:
        parser.error(f"unknown mode(s): {unknown}")
    selected = [(s, args.lightning) for s in LIGHTNING if args.lightning] + \
               [(s, args.pytorch) for s in PYTORCH if args.pytorch]
    selected = [(s, c) for s, c in selected if args.only in s.path]
    if not selected:
        parser.error("give --lightning and/or --pytorch")
    with tempfile.TemporaryDirectory(prefix="wrapper_suites-") as tmp:
        site_dir = Path(tmp)
        write_site_dirs(site_dir)
        for mode in modes:
            print(f"preflight {mode}: {preflight(mode, site_dir)}", flush=True)
        rows = []
        for suite, checkout in selected:
            for mode in modes:
                res = run_suite(suite, checkout.resolve(), mode, site_dir, args.timeout)
                print(f"  ran {suite.repo}:{suite.path} [{mode}] in {res.seconds:.0f}s", flush=True)
                rows.append((suite, mode, res))
    print()
    print_table(rows)
    print_comparison(rows)
    changed = print_differences(rows, args.tail)
    print(f"\n{changed} test outcome(s) differ from the baseline")
    if args.json:
        args.json.write_text(json.dumps([{"suite": f"{s.repo}:{s.path}", "mode": m, "note": r.note,
                                          "outcomes": r.outcomes} for s, m, r in rows], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
