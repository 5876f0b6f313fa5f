"""A record path that is a symlink (issue 36, item 9): ``FWD_RECORD=link`` and ``pytest --fwd-record
link`` replaced the link by a regular file and left the target stale, two records diverging. The
record is written through the link: its target holds the entries, and the link stays a link. Torch
is not needed: the recorder is handed a plain object, as the shim hands it a module."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fixture_cases import ROOT

from lint_rules import run_record

OLD = ('{"format": "fwdlint-record", "schema": 1, "entries": [{"class": "old.Old", "method": "run", '
       '"marked": false, "wrapper": "ddp", "defined_in": "old.Old", "file": "old.py", "line": 1, '
       '"site": "t.py:1", "test": "", "wrapped_at": "t.py:1", "count": 1}]}')

NOTE = """
import sys
from runtime_shim import recorder


class Net:
    def generate(self):
        pass


def note():
    recorder.ACTIVE.note(Net(), "generate", False, "ddp", sys._getframe(), "t.py:1")
"""


def _linked(tmp_path: Path) -> tuple[Path, Path]:
    """``project/record.json -> ../shared/record.json``, the target an older record."""
    (tmp_path / "shared").mkdir()
    (tmp_path / "project").mkdir()
    target = tmp_path / "shared" / "record.json"
    target.write_text(OLD)
    link = tmp_path / "project" / "record.json"
    link.symlink_to(os.path.join("..", "shared", "record.json"))
    return link, target


def _methods(path: Path) -> list[str]:
    return sorted(f"{e['class']}.{e['method']}" for e in json.loads(path.read_text())["entries"])


def _env(cwd: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FWD_", "PYTEST_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(cwd), str(ROOT)])
    return {**env, **extra}


def test_merge_writes_through_a_linked_record(tmp_path: Path) -> None:
    link, target = _linked(tmp_path)
    (entry,) = run_record.load(str(target))
    run_record.merge(str(link), [entry])
    assert link.is_symlink() and os.readlink(link) == os.path.join("..", "shared", "record.json")
    assert run_record.load(str(target))[0].count == 2
    assert sorted(p.name for p in link.parent.iterdir()) == ["record.json"]  # no temporary file left
    assert sorted(p.name for p in target.parent.iterdir()) == ["record.json"]


def test_a_record_that_is_a_symlink_loop_is_refused_not_replaced(tmp_path: Path) -> None:
    loop = tmp_path / "record.json"
    loop.symlink_to("record.json")
    (entry,) = run_record.parse("r.json", OLD)
    with pytest.raises(run_record.RecordError, match="symlink loop"):
        run_record.merge(str(loop), [entry])
    assert loop.is_symlink() and os.readlink(loop) == "record.json"


def test_fwd_record_in_the_environment_writes_through_a_link(tmp_path: Path) -> None:
    link, target = _linked(tmp_path)
    project = link.parent
    (project / "note.py").write_text(NOTE)
    proc = subprocess.run([sys.executable, "-c", "from runtime_shim import recorder; recorder.start_from_env(); "
                           "import note; note.note(); recorder.stop()"], cwd=project,
                          env=_env(project, FWD_RECORD="record.json"), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert link.is_symlink(), "the link was replaced by a file"
    assert _methods(target) == ["note.Net.generate", "old.Old.run"]  # added to the target's entries


def test_pytest_fwd_record_writes_through_a_link(tmp_path: Path) -> None:
    link, target = _linked(tmp_path)
    project = link.parent
    (project / "note.py").write_text(NOTE)
    (project / "test_note.py").write_text("import note\n\n\ndef test_note():\n    note.note()\n")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--fwd-record",
                           "record.json", "test_note.py"], cwd=project, env=_env(project),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert link.is_symlink(), "the link was replaced by a file"
    assert _methods(target) == ["note.Net.generate"]  # a new record for the session, in the target
    assert sorted(p.name for p in project.iterdir() if not p.name.startswith("__")) == [
        "note.py", "record.json", "test_note.py"]


def test_pytest_fwd_record_refuses_a_symlink_loop(tmp_path: Path) -> None:
    (tmp_path / "record.json").symlink_to("record.json")
    (tmp_path / "test_nothing.py").write_text("def test_nothing():\n    pass\n")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--fwd-record",
                           "record.json", "test_nothing.py"], cwd=tmp_path, env=_env(tmp_path),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 4 and "a symlink loop; not replacing it" in proc.stderr, proc.stdout + proc.stderr
    assert os.readlink(tmp_path / "record.json") == "record.json"
