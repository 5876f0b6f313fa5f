"""The flake8 adapter: gating on --select, syntax errors, options, noqa as flake8 applies it."""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import pytest
from fixture_cases import FIXTURES, flake8_rows, run_flake8

from lint_rules.facts import extract as extract_module
from lint_rules.flake8_plugin import Plugin

SOURCE = "import torch.nn as nn\n\nclass M(nn.Module):\n    def gen(self, x):\n        return self(x)\n"


def _options(**overrides: object) -> argparse.Namespace:
    values = dict(select=None, extend_select=None, ignore=None, extend_ignore=None,
                  extended_default_select=["FWD", "E", "F", "W", "C90"], extended_default_ignore=[],
                  fwd_module_bases=[], fwd_mark_decorators=["inference_entry"], filenames=[])
    values.update(overrides)
    return argparse.Namespace(**values)


def test_plugin_does_no_parsing_when_fwd_is_not_selected(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    calls: list[str] = []
    monkeypatch.setattr(extract_module, "extract", lambda *a, **k: calls.append("parsed"))
    Plugin.parse_options(_options(select=["E", "W", "C90"], filenames=[str(tmp_path)]))
    assert list(Plugin(None, SOURCE.splitlines(True), "m.py").run()) == []
    assert calls == [] and Plugin.session is None


def test_plugin_reports_with_zero_based_columns(tmp_path: Path) -> None:
    Plugin.parse_options(_options(filenames=[str(tmp_path)]))
    [(line, col, text, kind)] = list(Plugin(None, SOURCE.splitlines(True), "m.py").run())
    assert (line, col, kind) == (4, 8, Plugin)
    assert text.startswith("FWD001 M.gen runs")


def test_real_flake8_selects_reports_and_gates(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text(SOURCE)
    rows = flake8_rows(run_flake8(tmp_path, "--select", "FWD", "m.py"))
    assert [(p, r, c, code) for p, r, c, code, _ in rows] == [("m.py", 4, 9, "FWD001")]
    # flake8 matches prefixes, so "--select F" would select FWD; fwdlint runs only when a selection
    # names FW... explicitly (or by default): "E,F,W" means pyflakes.
    assert "FWD001" not in run_flake8(tmp_path, "--select", "E,F,W", "m.py").stdout
    assert "FWD001" not in run_flake8(tmp_path, "--select", "E,W", "m.py").stdout
    assert "FWD001" in run_flake8(tmp_path, "--select", "E,F,W", "--extend-select", "FWD", "m.py").stdout
    assert "FWD001" in run_flake8(tmp_path, "--select", "E,F,W,FW", "m.py").stdout
    assert "FWD001" in run_flake8(tmp_path, "m.py").stdout  # the default selection
    assert run_flake8(tmp_path, "--extend-ignore", "FWD001", "--select", "FWD", "m.py").stdout == ""


def test_flake8_syntax_error_does_not_crash(tmp_path: Path) -> None:
    (tmp_path / "broken.py").write_text("class M(nn.Module):\n    def f(self:\n")
    (tmp_path / "m.py").write_text(SOURCE)
    proc = run_flake8(tmp_path, "--select", "FWD,E9", ".")
    assert proc.returncode == 1
    codes = sorted(code for _, _, _, code, _ in flake8_rows(proc))
    assert codes == ["E999", "FWD001"]
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("args", [
    ("--select", "FWD01"), ("--select", "fwd001"), ("--select", "E,FWD999"), ("--extend-select", "FWD01"),
    ("--extend-ignore", "FWD0O1"), ("--per-file-ignores", "m.py:FWD01"),
])
def test_flake8_unknown_fwd_code_is_an_error(tmp_path: Path, args: tuple[str, ...]) -> None:
    """flake8 accepts any code and would select no FWD rule: green forever. A code starting with FW
    is fwdlint's to judge: one line, exit 2; other plugins' codes stay flake8's business."""
    (tmp_path / "m.py").write_text(SOURCE)
    proc = run_flake8(tmp_path, *args, "m.py")
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr.startswith(f"fwdlint: error: flake8 {args[0]} ") and proc.stderr.count("\n") == 1
    assert "no rule code starts with" in proc.stderr and "Traceback" not in proc.stderr


def test_flake8_other_plugins_codes_and_fwd000_are_flake8s(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text(SOURCE)
    proc = run_flake8(tmp_path, "--select", "FWD,E501", "--extend-ignore", "FWD000,X100", "m.py")
    assert [row[3] for row in flake8_rows(proc)] == ["FWD001"] and proc.stderr == ""


def test_flake8_select_fwd_is_not_green_on_an_unparsable_file(tmp_path: Path) -> None:
    """flake8 runs no plugin on a file Python cannot parse (so no FWD000 there) and reports E999,
    which `--select FWD` would filter out: selecting FWD selects E999 and E902 too."""
    (tmp_path / "broken.py").write_text("class M(nn.Module):\n    def f(self:\n")
    proc = run_flake8(tmp_path, "--select", "FWD", "broken.py", "missing.py")
    assert proc.returncode == 1
    assert sorted((path, code) for path, _, _, code, _ in flake8_rows(proc)) == [
        ("broken.py", "E999"), ("missing.py", "E902")]
    # ignoring them by name is the user's choice; a selection without FWD is left alone
    assert run_flake8(tmp_path, "--select", "FWD", "--extend-ignore", "E999", "broken.py").returncode == 0
    assert run_flake8(tmp_path, "--select", "W", "broken.py").returncode == 0


def test_flake8_reads_options_from_config(tmp_path: Path) -> None:
    shutil.copytree(FIXTURES / "fwd001" / "configured", tmp_path / "configured")  # its cache goes there
    rows = flake8_rows(run_flake8(tmp_path / "configured", "--select", "FWD", "."))
    assert [(p, r) for p, r, *_ in rows] == [("model.py", 8)]


def test_flake8_reads_standard_input(tmp_path: Path) -> None:
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "flake8", "--select", "FWD", "-"], input=SOURCE, cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and proc.stdout.startswith("stdin:4:9: FWD001 M.gen runs"), proc.stdout + proc.stderr


# flake8 -j 1 in this interpreter on argv; then how many objects the garbage collector was told to ignore
FROZEN = ("import gc, sys\nfrom flake8.main.cli import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit:\n"
          "    pass\nprint(gc.get_freeze_count())\n")


@pytest.mark.parametrize(("select", "frozen"), [("FWD", True), ("E,W", False)])
def test_the_project_view_is_kept_out_of_the_collectors_reach(tmp_path: Path, select: str, frozen: bool) -> None:
    """flake8's own checks allocate enough to trigger full collections, each of which would walk the
    whole view again (about half of the plugin's cost on timm): the view is frozen once built."""
    import subprocess
    import sys

    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "model.py").write_text(SOURCE)
    proc = subprocess.run([sys.executable, "-c", FROZEN, "-j", "1", f"--select={select}", "model.py"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert (int(proc.stdout.splitlines()[-1]) > 0) is frozen, proc.stderr


def test_files_in_no_project_are_cached_once_under_the_directory_given(tmp_path: Path) -> None:
    """No project marker: one cache where flake8 was pointed, whichever file each -j process met first."""
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        for number in range(3):
            (tmp_path / name / f"m{number}.py").write_text(SOURCE)
    proc = run_flake8(tmp_path, "-j", "2", "--select=FWD", "a", "b")
    assert len(flake8_rows(proc)) == 6, proc.stderr
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob(".fwdlint_cache")) == [".fwdlint_cache"]
