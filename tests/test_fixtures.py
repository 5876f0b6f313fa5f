"""Every fixture case of every rule through both front ends: the fwdlint CLI and real flake8
(entry point). Both check a file with its whole project's view, so they must agree exactly.

Each case runs in a copy of its project directory under tmp_path: a run writes its facts cache
into the project, and nothing may be written into ``fixtures/``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fixture_cases import FIXTURES, Case, cases, check_reported, cli_json, flake8_rows, rule_fixture_dirs, run_flake8

DEMO = FIXTURES / "demo_project"
CASES = [case for directory in rule_fixture_dirs() for case in cases(directory)] + [
    Case("demo_project", DEMO, (".",), tuple(sorted(DEMO.glob("*.py"))), DEMO)]


def _tree(top: Path) -> dict[str, tuple[int, int]]:
    """Every path under ``top``, git-ignored ones included, with its size and modification time."""
    return {path.relative_to(top).as_posix(): (stat.st_size, stat.st_mtime_ns)
            for path in (top, *top.rglob("*")) for stat in (path.lstat(),)}


@pytest.fixture(scope="module", autouse=True)
def _fixtures_stay_untouched() -> Iterator[None]:
    """Fails (at the teardown of the module's last test) if any test here wrote into fixtures/."""
    before = _tree(FIXTURES)
    yield
    after = _tree(FIXTURES)
    changed = sorted(path for path in before.keys() | after.keys() if before.get(path) != after.get(path))
    assert changed == [], f"the fixture tests wrote into fixtures/: {changed[:10]}"


Reported = list[tuple[str, int, int, str, str, str, str]]  # ..., message, symbol, help
_REPORTED: dict[tuple[Path, tuple[str, ...]], Reported] = {}  # a copied case's CLI run serves both of its tests


def _cli(case: Case) -> Reported:
    key = (case.cwd, case.args)
    if key not in _REPORTED:
        _REPORTED[key] = _run_cli(case)
    return _REPORTED[key]


def _run_cli(case: Case) -> Reported:
    code, payload = cli_json(case.cwd, *case.args)
    assert payload["version"] == 1 and payload["errors"] == []
    assert code == (1 if payload["diagnostics"] else 0)
    return [(Path(d["path"]).as_posix().removeprefix("./"), d["line"], d["col"], d["code"], d["message"], d["symbol"],
             d["help"]) for d in payload["diagnostics"]]


def test_enough_cases() -> None:
    expected = sum(len(c.expected()) for c in CASES)
    silent = sum(1 for c in CASES if not c.expected())
    assert len(CASES) >= 25 and expected >= 60 and silent >= 1
    assert len({c.id for c in CASES}) == len(CASES)
    assert {c.id.split("-")[0] for c in CASES if c.root != DEMO} == {d.name.upper() for d in rule_fixture_dirs()}


def test_a_case_runs_in_a_copy_of_its_project(tmp_path: Path) -> None:
    """The copy is what gets linted (its cache appears there), and fixtures/ is left as it was."""
    [case] = [c for c in CASES if c.id == "FWD001-cross-file"]
    before = _tree(FIXTURES)
    _check_cli(case, tmp_path)
    assert (tmp_path / "fwd001" / "cross_file" / ".fwdlint_cache").is_dir()
    assert _tree(FIXTURES) == before


def _check_cli(case: Case, copies: Path) -> None:
    copy = case.copied_to(copies)
    check_reported(copy.cwd, copy.expected(), _cli(copy))


@pytest.fixture(scope="module")
def copies(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the fixture projects are copied, once each: the cases of one project share its cache."""
    return tmp_path_factory.mktemp("fixtures")


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_cli(case: Case, copies: Path) -> None:
    _check_cli(case, copies)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_flake8_agrees_with_cli(case: Case, copies: Path) -> None:
    copy = case.copied_to(copies)
    proc = run_flake8(copy.cwd, "--select", "FWD", *copy.args)
    assert proc.returncode in (0, 1), proc.stderr
    rows = sorted((p, r, c, code, text) for p, r, c, code, text in flake8_rows(proc))
    assert rows == sorted((p, r, c, code, m) for p, r, c, code, m, *_ in _cli(copy))
