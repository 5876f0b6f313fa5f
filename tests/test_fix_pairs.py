"""Every rule's fix, through one harness (TorchFix's and Fixit's shape): hand-written pairs in
``fixtures/<rule>/fix/<case>/``.

A case holds ``before.py`` and ``after.py`` (one file, checked as ``<case>.py``) or ``before/`` and
``after/`` (a project, checked as ``.``), and optionally:

* ``options.toml``: the rule's fix options (``style = "call"``, see its ``FIX_OPTIONS``);
* ``before/record.json``: a run record the run reads (``--from-record``, FWD004);
* ``not_fixed.txt``: the "not fixed" lines ``--fix`` must print, exactly.

On a temporary copy, ``--fix`` (what the CLI runs: ``fix_in_passes``, only the rule selected)
must turn ``before`` into ``after`` byte for byte, fix every other finding of the rule, report
nothing else, and leave a tree where a second ``--fix`` changes nothing and the rule reports only
the findings left unfixed. Adding a case is adding a folder.
"""

from __future__ import annotations

import os
import shutil
import tomllib
from collections import Counter
from pathlib import Path

import pytest
from fixture_cases import FIXTURES

from lint_rules import run_record
from lint_rules.discover import python_files
from lint_rules.engine import Run, analyse
from lint_rules.fix import run as fix
from lint_rules.settings import Config

CASES = sorted(case for case in FIXTURES.glob("fwd[0-9][0-9][0-9]/fix/*") if case.is_dir())


def _id(case: Path) -> str:
    return f"{case.parent.parent.name.upper()}-{case.name}"


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*.py"))}


def _copy(case: Path, work: Path) -> tuple[list[str], Path]:
    """The case's ``before`` in ``work``; the paths to give and where ``after`` is."""
    if (case / "before.py").is_file():
        work.mkdir()
        shutil.copyfile(case / "before.py", work / f"{case.name}.py")
        return [f"{case.name}.py"], case / "after.py"
    shutil.copytree(case / "before", work)
    return ["."], case / "after"


def _found(paths: list[str], run: Run) -> Counter:
    return Counter((d.path, d.symbol) for d in analyse(list(python_files(paths)), run).diagnostics)


def test_every_fixable_rule_has_pairs() -> None:
    from lint_rules.rules import RULES

    fixable = {rule.CODE for rule in RULES if hasattr(rule, "fix")}
    assert fixable <= {_id(case).split("-")[0] for case in CASES}
    for case in CASES:
        assert (case / "before.py").is_file() == (case / "after.py").is_file(), case
        assert (case / "before.py").is_file() or (case / "before").is_dir() and (case / "after").is_dir(), case


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_fix_pair(case: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    work = tmp_path / "work"
    given, after = _copy(case, work)
    monkeypatch.chdir(work)
    code = case.parent.parent.name.upper()
    record = work / "record.json"
    observed = tuple(run_record.load(str(record))) if record.is_file() else ()
    run = Run(select=(code,), cache_dir=tmp_path / "cache", config=Config(observed=observed, record=str(record)))
    options = tomllib.loads((case / "options.toml").read_text()) if (case / "options.toml").is_file() else {}
    style = options.get("style", "decorator")
    expected = (case / "not_fixed.txt").read_text().splitlines() if (case / "not_fixed.txt").is_file() else []
    before = _found(given, run)
    assert before, "a pair without a finding tests nothing"

    result = fix.fix_in_passes(list(python_files(given)), run, style=style)
    if after.is_file():
        assert (work / given[0]).read_bytes() == after.read_bytes()
    else:
        assert _tree(work) == _tree(after)
    assert result.errors == []
    assert fix.report_lines(result) == expected
    assert Counter((d.path, d.symbol) for d in result.fixed) + Counter(
        (u.diagnostic.path, u.diagnostic.symbol) for u in result.unfixed) == before
    # a fixed point: fixing again changes nothing, and only the findings not fixed remain
    again = fix.fix_in_passes(list(python_files(given)), run, style=style)
    assert again.changed == [] and again.errors == []
    where = [(u.diagnostic.path, u.diagnostic.line, u.diagnostic.code) for u in result.unfixed]
    assert [(u.diagnostic.path, u.diagnostic.line, u.diagnostic.code) for u in again.unfixed] == where
    assert sum(_found(given, run).values()) == len(expected)
    assert not any(name.startswith(".fwdlint") for name in os.listdir(work))


def test_two_runs_in_one_process_from_different_directories_find_the_same(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A process that checks one project and then another (the pytest plugin, an editor, these
    tests under xdist) answers the second from its own files: FWD004 once kept the first run's
    resolved file for a relative path, and the second run found nothing."""
    case = FIXTURES / "fwd004" / "fix" / "at_set_up"
    found = []
    for name in ("first", "second"):
        work = tmp_path / name
        given, _ = _copy(case, work)
        monkeypatch.chdir(work)
        record = work / "record.json"
        config = Config(observed=tuple(run_record.load(str(record))), record=str(record))
        found.append(_found(given, Run(select=("FWD004",), cache_dir=tmp_path / f"cache-{name}", config=config)))
    assert found[0] and found[0] == found[1]
