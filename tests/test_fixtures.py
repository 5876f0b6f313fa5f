"""Every fixture case of every rule through both front ends: the fwdlint CLI and real flake8
(entry point). Both check a file with its whole project's view, so they must agree exactly."""

from __future__ import annotations

from pathlib import Path

import pytest
from fixture_cases import FIXTURES, Case, cases, check_reported, cli_json, flake8_rows, rule_fixture_dirs, run_flake8

DEMO = FIXTURES / "demo_project"
CASES = [case for directory in rule_fixture_dirs() for case in cases(directory)] + [
    Case("demo_project", DEMO, (".",), tuple(sorted(DEMO.glob("*.py"))))]


def _cli(case: Case) -> list[tuple[str, int, int, str, str, str]]:
    code, payload = cli_json(case.cwd, *case.args)
    assert payload["version"] == 1 and payload["errors"] == []
    assert code == (1 if payload["diagnostics"] else 0)
    return [(Path(d["path"]).as_posix().removeprefix("./"), d["line"], d["col"], d["code"], d["message"], d["symbol"])
            for d in payload["diagnostics"]]


def test_enough_cases() -> None:
    expected = sum(len(c.expected()) for c in CASES)
    silent = sum(1 for c in CASES if not c.expected())
    assert len(CASES) >= 25 and expected >= 60 and silent >= 1


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_cli(case: Case) -> None:
    check_reported(case.cwd, case.expected(), _cli(case))


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_flake8_agrees_with_cli(case: Case) -> None:
    proc = run_flake8(case.cwd, "--select", "FWD", *case.args)
    assert proc.returncode in (0, 1), proc.stderr
    rows = sorted((p, r, c, code, text) for p, r, c, code, text in flake8_rows(proc))
    assert rows == sorted((p, r, c, code, m) for p, r, c, code, m, _ in _cli(case))
