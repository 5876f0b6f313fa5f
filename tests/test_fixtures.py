"""Every fixture through both front ends: the fwdlint CLI and real flake8 (entry point)."""

from __future__ import annotations

from pathlib import Path

import pytest
from fixture_cases import FIXTURES, Case, cases, cli_json, flake8_rows, run_flake8

DEMO = FIXTURES / "demo_project"
CASES = cases(FIXTURES / "fwd001") + [Case("demo_project", DEMO, (".",), tuple(sorted(DEMO.glob("*.py"))))]


def _name_at(case: Case, path: str, line: int, col: int) -> str:
    text = (case.cwd / path).read_text(encoding="utf-8").splitlines()[line - 1]
    return text[col - 1:].split("(")[0]


def test_enough_cases() -> None:
    expected = sum(len(c.expected("cli")) for c in CASES)
    silent = sum(1 for c in CASES if not c.expected("cli"))
    assert len(CASES) >= 25 and expected >= 60 and silent >= 1


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_cli(case: Case) -> None:
    code, payload = cli_json(case.cwd, *case.args)
    expected = case.expected("cli")
    assert payload["version"] == 1 and payload["errors"] == []
    got = [(Path(d["path"]).as_posix().removeprefix("./"), d["line"], d["code"]) for d in payload["diagnostics"]]
    assert sorted(got) == [(e.path, e.line, e.code) for e in expected]
    assert code == (1 if expected else 0)
    by_place = {(Path(d["path"]).as_posix().removeprefix("./"), d["line"]): d for d in payload["diagnostics"]}
    for e in expected:
        diagnostic = by_place[(e.path, e.line)]
        assert e.text in diagnostic["message"], diagnostic["message"]
        method = diagnostic["symbol"].rsplit(".", 1)[1]
        assert _name_at(case, e.path, e.line, diagnostic["col"]) == method
        assert f"mark_forward_method('{method}')" in diagnostic["message"]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_flake8(case: Case) -> None:
    proc = run_flake8(case.cwd, "--select", "FWD", *case.args)
    assert proc.returncode in (0, 1), proc.stderr
    rows = flake8_rows(proc)
    expected = case.expected("flake8")
    assert sorted((p, r, c) for p, r, _, c, _ in rows) == [(e.path, e.line, e.code) for e in expected], proc.stdout
    for path, row, col, code, text in rows:
        assert text.startswith(code + " ") is False  # flake8 splits the code off the text
        method = _name_at(case, path, row, col)
        assert f"mark_forward_method('{method}')" in text
