"""What a check read (``lint_rules.reads``) covers everything its findings depend on.

Re-checking after an edit only the files whose findings depend on it (issue 37) is sound only if
the log misses nothing: the checks share what they computed, so a check's findings can depend on
files that another check read. For every file of every fixture project, its facts are emptied
(its classes, imports, functions, set-ups and registrations gone) and every other file is checked
again: each file whose findings changed must have been recorded as reading the emptied file's
facts, or a scan of every file that the emptied file takes part in. ``benchmarks/dependents.py``
does the same on real packages."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from benchmarks.dependents import after_emptying, recorded_run
from test_check_order import PROJECTS

WITH_FILES = [project for project in PROJECTS if project[2]]  # FWD004's cases are all directories


@pytest.mark.parametrize("name,root,files", WITH_FILES, ids=[p[0] for p in WITH_FILES])
def test_every_file_whose_findings_change_was_recorded_as_depending(
        name: str, root: Path, files: list[Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(root)
    run = recorded_run([os.path.relpath(path, root) for path in files], tmp_path)
    missed = []
    for emptied in run.checked:
        changed, direct, through_scans = after_emptying(run, emptied)
        missed.extend(f"{path} after emptying {emptied.path}" for path in changed if path not in direct | through_scans)
    assert not missed


def test_an_answer_reused_from_another_check_counts_what_it_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``first.py``'s check finds ``base.Base`` (reading ``base.py``); ``second.py``'s reuses that
    answer without reading ``base.py`` itself: its findings still depend on ``base.py``, and the log
    says so. A file nothing reads is not recorded (a log of everything would pass the test above)."""
    (tmp_path / "base.py").write_text("import torch.nn as nn\n\nclass Base(nn.Module):\n"
                                      "    def forward(self, x):\n        return x\n")
    for name in ("first", "second"):
        (tmp_path / f"{name}.py").write_text("import base\n\nclass Model(base.Base):\n"
                                             "    def sample(self, x):\n        return self(x)\n")
    (tmp_path / "other.py").write_text("def helper(x):\n    return x\n")
    monkeypatch.chdir(tmp_path)
    run = recorded_run(["first.py", "second.py", "base.py", "other.py"], tmp_path / "cache")
    assert [f.path for f in run.checked] == ["first.py", "second.py", "base.py", "other.py"]
    assert all("base.py" in run.reads[path] and "other.py" not in run.reads[path] for path in ("first.py", "second.py"))
    changed, direct, _ = after_emptying(run, run.checked[2])  # base.py emptied: no Model is a module then
    assert changed == ["first.py", "second.py"] and {"first.py", "second.py"} <= direct
