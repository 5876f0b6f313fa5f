"""The run record (``lint_rules/run_record.py``) from the linter's side: what ``--from-record`` does
with a record that cannot be used, with stale entries and entries of other code, and the merge that
many processes share. (Recording under pytest, ranks and workers: ``tests/runtime/test_pytest_record.py``.)"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from fixture_cases import FIXTURES, run_cli, run_flake8

from lint_rules import run_record

GOOD = {"class": "m.Net", "method": "run", "marked": False, "wrapper": "ddp", "defined_in": "m.Net", "file": "m.py",
        "line": 4, "site": "t.py:3", "test": "", "wrapped_at": "t.py:2", "count": 1}
MODEL = ("import torch.nn as nn\n\n\nclass Net(nn.Module):\n    def run(self, x):\n"
         "        return getattr(self, 'a')(x)\n")


def _project(tmp_path: Path, record: str) -> Path:
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "m.py").write_text(MODEL)
    (tmp_path / "record.json").write_text(record)
    return tmp_path


def _record(*entries: dict, schema: int = 1) -> str:
    return json.dumps({"format": "fwdlint-record", "schema": schema, "entries": list(entries)})


@pytest.mark.parametrize("text,message", [
    (None, "record.json: no such record"),
    (_record(GOOD)[:-9], "record.json: fwdlint record truncated or corrupted"),
    ('{"version": 1, "diagnostics": []}', 'record.json: not a fwdlint record (no "format": "fwdlint-record")'),
    ("[fwdlint]\nselect = FWD\n", "record.json: not a fwdlint record: not JSON"),
    (_record(GOOD, schema=2), "record.json: record schema 2 is newer than this fwdlint reads (1): upgrade fwdlint"),
    (_record({**GOOD, "line": "4"}), "record.json: entry 0: 'line' is missing or not an integer"),
], ids=["missing", "truncated", "foreign-json", "foreign-text", "newer-schema", "bad-entry"])
def test_a_record_that_cannot_be_used_is_one_line_and_exit_2(tmp_path: Path, text: str | None, message: str) -> None:
    project = _project(tmp_path, text or "")
    if text is None:
        (project / "record.json").unlink()
    run = run_cli(project, "--from-record", "record.json", "m.py")
    assert run.returncode == 2 and run.stdout == ""
    assert len(run.stderr.splitlines()) == 1 and run.stderr.startswith(f"fwdlint: error: {message}"), run.stderr
    flake8 = run_flake8(project, "--select", "FWD", "--fwd-from-record", "record.json", "m.py")
    assert flake8.returncode == 2 and flake8.stdout == ""
    assert flake8.stderr.startswith(f"fwdlint: error: flake8 --fwd-from-record {message}"), flake8.stderr
    assert len(flake8.stderr.splitlines()) == 1


def test_stale_and_outside_entries_are_said_once_and_the_statistics_count_methods(tmp_path: Path) -> None:
    project = tmp_path / "case"
    shutil.copytree(FIXTURES / "fwd004" / "observed_at_def", project)
    run = run_cli(project, "--statistics", ".")
    assert run.returncode == 1
    assert run.stderr.splitlines() == [
        "fwdlint: record.json: stale entry models.Tagger.decode (recorded at models.py:50): no such method in the "
        "linted code now; record again",
        "fwdlint: record.json: 1 unmarked entry of code outside the linted paths ignored",
        # GPT.generate (FWD001); Tagger.predict (ddp and fsdp2: one method), Tagger.score, Tagger.Head.probe;
        # Tagger.tag is marked since; GPT.encode ran marked
        "fwdlint: record.json: 4 unmarked entries ran in the linted code: 1 found statically (FWD001), 3 seen only "
        "at run time (FWD004); static recall 25%; 1 marked since the run; 1 marked entry confirmed"]


def test_a_record_is_read_relative_to_its_directory(tmp_path: Path) -> None:
    (tmp_path / "record.json").write_text(_record(GOOD))
    (entry,) = run_record.load(str(tmp_path / "record.json"))
    assert entry.file == str(tmp_path / "m.py") and entry.wrapped_at == f"{tmp_path / 't.py'}:2"


WRITER = """
import sys
from lint_rules.run_record import Entry, merge
worker = int(sys.argv[2])
for step in range(25):
    merge(sys.argv[1], [Entry("m.Net", "run", False, "ddp", "m.Net", "/m.py", 4, count=1),
                        Entry(f"m.Net{worker}", f"step{step}", False, "ddp", "m.Net", "/m.py", 4, count=2)])
"""


def test_processes_merging_at_once_lose_nothing(tmp_path: Path) -> None:
    path = tmp_path / "record.json"
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), str(worker)]) for worker in range(8)]
    assert [writer.wait(timeout=120) for writer in writers] == [0] * 8
    entries = {(e.cls, e.method): e.count for e in run_record.load(str(path))}
    assert entries.pop(("m.Net", "run")) == 8 * 25
    assert entries == {(f"m.Net{w}", f"step{s}"): 2 for w in range(8) for s in range(25)}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["record.json"]


def test_a_foreign_file_is_never_replaced(tmp_path: Path) -> None:
    path = tmp_path / "notes.json"
    path.write_text('{"mine": true}')
    with pytest.raises(run_record.RecordError, match="not a fwdlint record"):
        run_record.merge(str(path), [run_record.Entry("m.Net", "run", False, "ddp", "m.Net", "/m.py", 4)])
    assert path.read_text() == '{"mine": true}'


def test_numbers_agree_with_their_nouns(tmp_path: Path) -> None:
    """'recorded 1 forward entries' was the pytest summary of a record of one entry; every number
    printed with a noun goes through contract.counted."""
    from types import SimpleNamespace

    from lint_rules.contract import counted
    from lint_rules.pytest_plugin import Guard
    from lint_rules.rules.fwd004_observed_entry import Summary

    assert [counted(n, "file") for n in (0, 1, 2, 1024)] == ["0 files", "1 file", "2 files", "1,024 files"]
    assert counted(1, "forward entry", "forward entries") == "1 forward entry"
    record = tmp_path / "record.json"
    run_record.merge(str(record), [run_record.Entry("m.Net", "run", False, "ddp", "m.Net", "/m.py", 4)])
    said = Guard._recorded(SimpleNamespace(record=str(record)), {})  # type: ignore[arg-type]
    assert said.startswith("fwdlint: recorded 1 forward entry (1 unmarked, 0 marked) in "), said
    run_record.merge(str(record), [run_record.Entry("m.Net", "step", True, "ddp", "m.Net", "/m.py", 8)])
    said = Guard._recorded(SimpleNamespace(record=str(record)), {})  # type: ignore[arg-type]
    assert said.startswith("fwdlint: recorded 2 forward entries (1 unmarked, 1 marked) in "), said
    lines = Summary(outside=1, marked=1).lines("r.json", statistics=True)
    assert lines[0] == "fwdlint: r.json: 1 unmarked entry of code outside the linted paths ignored"
    assert "0 unmarked entries ran in the linted code" in lines[1] and "1 marked entry confirmed" in lines[1]
