"""A few small files are parsed in fwdlint's own process (``lint_rules/parse_here.py``) as a worker
parses them: the same facts (deep nesting included), the same failures, within the same time limit;
and no parser process is started for them. Anything bigger still goes to the workers
(``tests/test_isolation.py`` covers those)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from lint_rules import parse_here, workers
from lint_rules.facts import codec
from lint_rules.facts.model import FileFacts
from lint_rules.store import _extract

ROOT = Path(__file__).resolve().parent.parent
MODEL = "import torch.nn as nn\n\n\nclass M(nn.Module):\n    def generate(self, x):\n        return self(x)\n"
# Syntax newer than this interpreter (3.12's ``type``, read for a 3.12 target) is parsed by LibCST,
# whose native parser overflowed the main thread's stack on this 10,000-operand chain (SIGSEGV)
CHAIN = MODEL.replace("return self(x)", "return self(x) and " + " and ".join(["x"] * 10_000))
NEWER = "type Alias = int\n" + CHAIN


def _task(path: str, data: bytes, target: tuple[int, int] = sys.version_info[:2]) -> tuple:
    return (path, data, "", False, True, target)


def _tasks() -> list[tuple]:
    files = sorted((ROOT / "fixtures").rglob("*.py"))
    return [_task(str(path), path.read_bytes()) for path in files] + [
        _task("chain.py", CHAIN.encode()), _task("newer.py", NEWER.encode(), (3, 12))]


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="the chain's file is parsed by LibCST only before 3.12")
def test_the_facts_are_the_workers_facts() -> None:
    """Every fixture and the chain: byte for byte what a worker makes of them, on a stack as deep."""
    tasks = _tasks()
    here = [parse_here.here(_extract, task, None) for task in tasks]
    there = workers.Pool(1, ("lint_rules.facts.extract",))
    try:
        theirs = there.map(_extract, tasks)
    finally:
        there.close()
    assert len(tasks) > 50 and isinstance(here[-1], FileFacts)
    for task, mine, other in zip(tasks, here, theirs):
        assert type(mine) is type(other), task[0]
        assert (codec.encode(mine) if isinstance(mine, FileFacts) else mine) == (
            codec.encode(other) if isinstance(other, FileFacts) else other), task[0]


def test_a_task_that_outlives_the_timeout_is_a_failure() -> None:
    limit = sys.getrecursionlimit()
    started = time.monotonic()
    outcome = parse_here.here(time.sleep, 5, 0.2)
    assert time.monotonic() - started < 3
    assert outcome == workers.Failure(workers.timed_out(0.2))
    assert sys.getrecursionlimit() == limit


def test_an_error_is_a_failure_of_one_line() -> None:
    outcome = parse_here.here(lambda task: {}[task], "missing", None)
    assert outcome == workers.Failure("internal error (KeyError: 'missing'); please report it")


def test_a_memory_limit_lowers_what_is_parsed_here(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FWDLINT_WORKER_MEMORY", "48")  # MiB: the trees of 32 KiB of source, at most
    assert parse_here.here_budget() == 32 * 2**10
    monkeypatch.setenv("FWDLINT_WORKER_MEMORY", "0")  # none
    assert parse_here.here_budget() == parse_here.HERE_BYTES


def test_a_process_under_an_address_space_limit_parses_nothing_itself() -> None:
    """There the workers, each with its own limit, keep the process's room for its own threads."""
    probe = "import resource\nresource.setrlimit(resource.RLIMIT_AS, (8 * 2**30, resource.RLIM_INFINITY))\n" \
            "from lint_rules import parse_here\nprint(parse_here.here_budget())\n"
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60,
                          env={"PYTHONPATH": str(ROOT), "PATH": ""})
    assert proc.stdout.split() == ["0"], proc.stderr


# runs the CLI in this interpreter, then prints whether it started a parser process
PROBE = ("import sys\nfrom lint_rules import workers\nfrom lint_rules.cli import main\ntry:\n"
         "    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
         "print(sum(len(pool.workers) for pool in workers._shared.values()))\n")


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_small_files_start_no_parser_process(tmp_path: Path, jobs: str) -> None:
    """Cold, then after an edit: parsed here. The control: a file over ``HERE_BYTES`` starts one."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "model.py").write_text(MODEL)
    (tmp_path / "chain.py").write_text(CHAIN.replace("class M", "class C"))

    def parser_processes() -> tuple[int, str]:
        proc = subprocess.run([sys.executable, "-c", PROBE, "-j", jobs, "."], cwd=tmp_path, capture_output=True,
                              text=True, timeout=120, env={"PYTHONPATH": str(ROOT), "PATH": ""})
        assert "Traceback" not in proc.stderr, proc.stderr
        return int(proc.stdout.splitlines()[-1]), proc.stdout

    started, out = parser_processes()
    assert started == 0 and "model.py:5:9: FWD001 M.generate" in out and "chain.py:5:9: FWD001 C.generate" in out
    (tmp_path / "model.py").write_text(MODEL.replace("x)", "y)").replace("(self, x", "(self, y"))
    assert parser_processes()[0] == 0
    (tmp_path / "big.py").write_text(MODEL + "y = 1\n" * (parse_here.HERE_BYTES // 6))
    assert parser_processes()[0] == 1


def _no_room_for(names: tuple[str, ...], monkeypatch: pytest.MonkeyPatch) -> None:
    """Threads of these names cannot start, as under an address-space limit the process has nearly
    reached; a spawner started earlier in this process is forgotten."""
    real = workers.started_on_stack

    def started(target, stack_bytes, name):  # type: ignore[no-untyped-def]
        return None if name in names else real(target, stack_bytes, name)

    monkeypatch.setattr(workers, "started_on_stack", started)
    monkeypatch.setattr(workers._Spawner, "_instance", None)


def test_no_room_for_a_thread_costs_the_files_one_line_each(monkeypatch: pytest.MonkeyPatch) -> None:
    """No thread can start the parser processes: each file gets a one-line failure; nothing raises
    ("can't start new thread" ended a loaded machine's ``--fix`` under ``ulimit -v`` with a traceback)."""
    _no_room_for(("fwdlint-spawner", "fwdlint-drain"), monkeypatch)
    pool = workers.Pool(2, ("lint_rules.facts.extract",))
    try:
        outcomes = pool.map(_extract, [_task("a.py", MODEL.encode()), _task("b.py", MODEL.encode())])
    finally:
        pool.close()
    assert [type(outcome) for outcome in outcomes] == [workers.Failure] * 2
    assert all("no room to start a thread" in str(outcome) for outcome in outcomes), outcomes


def test_no_room_for_a_second_thread_leaves_the_tasks_to_the_first(monkeypatch: pytest.MonkeyPatch) -> None:
    _no_room_for(("fwdlint-drain",), monkeypatch)
    pool = workers.Pool(2, ("lint_rules.facts.extract",))
    try:
        outcomes = pool.map(_extract, [_task(f"{name}.py", MODEL.encode()) for name in "abc"])
    finally:
        pool.close()
    assert [type(outcome) for outcome in outcomes] == [FileFacts] * 3
