"""The flake8 adapter: gating on --select, syntax errors, options, noqa as flake8 applies it."""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import pytest
from fixture_cases import FIXTURES, flake8_rows, run_cli, run_flake8

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


@pytest.mark.parametrize("args", [
    ("--select", "FDW001"), ("--extend-select", "FDW"), ("--select", "E,FD001"), ("--extend-ignore", "FWD0O1"),
    ("--ignore", "WFD001"), ("--per-file-ignores", "m.py:FDW001"),
])
def test_flake8_a_slip_in_a_code_says_which_was_meant(tmp_path: Path, args: tuple[str, ...]) -> None:
    """``--select FDW001`` (a transposed prefix): flake8 would take it and select nothing. Letters a
    slip away from FWD that no installed plugin owns are fwdlint's to judge, and the error names the code."""
    (tmp_path / "m.py").write_text(SOURCE)
    proc = run_flake8(tmp_path, *args, "m.py")
    assert (proc.returncode, proc.stdout) == (2, "")
    meant = "'FWD'" if args[1] == "FDW" else "'FWD001'"
    assert proc.stderr.startswith(f"fwdlint: error: flake8 {args[0]} ") and proc.stderr.count("\n") == 1
    assert f"; did you mean {meant}? (codes: FWD001" in proc.stderr, proc.stderr


def test_flake8_codes_of_other_plugins_near_fwd_are_left_alone(tmp_path: Path) -> None:
    """Codes of plugins not installed here (pydocstyle's D100, flake8-boolean-trap's FBT001) and of an
    installed one (pyflakes' F401, whose letter is a slip away from FWD) stay flake8's."""
    (tmp_path / "m.py").write_text(SOURCE)
    proc = run_flake8(tmp_path, "--select", "FWD,F401", "--extend-ignore", "D100,FBT001,FS003", "m.py")
    assert [row[3] for row in flake8_rows(proc)] == ["FWD001"] and proc.stderr == "", proc.stderr


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


MARKED = ("import torch.nn as nn\n\nfrom mypkg.marks import entry\n\n\nclass GPT(nn.Module):\n"
          "    def forward(self, x):\n        return x\n\n"
          "    @entry\n    def generate(self, x):\n        return self(x)\n")


def _marked_project(tmp_path: Path, config: tuple[str, str]) -> Path:
    (tmp_path / config[0]).write_text(config[1])
    (tmp_path / "mypkg").mkdir()
    (tmp_path / "mypkg" / "__init__.py").write_text("")
    (tmp_path / "mypkg" / "marks.py").write_text("from runtime_shim import forward_entry\n\n\ndef entry(fn):\n"
                                                 "    return forward_entry(fn)\n")
    (tmp_path / "mypkg" / "model.py").write_text(MARKED)
    return tmp_path


@pytest.mark.parametrize("config", [
    ("pyproject.toml", '[tool.fwdlint]\nmark-decorators = ["mypkg.marks.entry"]\n'),
    ("setup.cfg", "[fwdlint]\nmark-decorators = mypkg.marks.entry\n"),
    ("tox.ini", "[flake8]\nfwd-mark-decorators = mypkg.marks.entry\n"),
    ("setup.cfg", "[fwdlint]\nmark-decorators = mypkg.marks.entry\n\n[flake8]\nfwd-mark-decorators = other.mark\n"),
], ids=["tool.fwdlint", "fwdlint", "flake8-section", "fwdlint-wins-in-one-file"])
def test_flake8_reads_the_configuration_the_cli_reads(tmp_path: Path, config: tuple[str, str]) -> None:
    """A project's own mark decorator, configured once: the CLI and flake8 (pre-commit's) agree.
    Before, flake8 ignored [tool.fwdlint] and [fwdlint], and reported the marked method."""
    project = _marked_project(tmp_path, config)
    cli = run_cli(project, "mypkg")
    assert (cli.returncode, cli.stdout) == (0, "")
    flake8 = run_flake8(project, "--select", "FWD", "mypkg")
    assert (flake8.returncode, flake8.stdout) == (0, ""), flake8.stdout + flake8.stderr


def test_flake8s_command_line_replaces_the_configuration(tmp_path: Path) -> None:
    project = _marked_project(tmp_path, ("pyproject.toml", '[tool.fwdlint]\nmark-decorators = ["mypkg.marks.entry"]\n'))
    rows = flake8_rows(run_flake8(project, "--select", "FWD", "--fwd-mark-decorators", "other.mark", "mypkg"))
    assert [(path, code) for path, _, _, code, _ in rows] == [("mypkg/model.py", "FWD001")]
    assert run_cli(project, "--mark-decorators", "other.mark", "mypkg").returncode == 1  # as the CLI's does


@pytest.mark.parametrize("config, args, message", [
    ("[tool.fwdlint]\nmark-decorators = [\"mypkg.marks.\"]\n", (),
     "pyproject.toml: error: [tool.fwdlint] bad value for 'mark-decorators': 'mypkg.marks.' is not a (dotted) "
     "Python name"),
    ("[tool.fwdlint]\nselectt = [\"FWD\"]\n", (), "pyproject.toml: error: [tool.fwdlint] unknown key 'selectt'"),
    ("", ("--fwd-module-bases", "mypkg.Base."),
     "fwdlint: error: flake8 --fwd-module-bases: 'mypkg.Base.' is not a (dotted) Python name"),
], ids=["bad-name", "unknown-key", "bad-name-on-the-command-line"])
def test_a_configuration_the_cli_refuses_flake8_refuses(tmp_path: Path, config: str, args: tuple[str, ...],
                                                        message: str) -> None:
    project = _marked_project(tmp_path, ("pyproject.toml", config))
    flake8 = run_flake8(project, "--select", "FWD", *args, "mypkg")
    assert flake8.returncode == 2 and flake8.stdout == ""
    assert len(flake8.stderr.splitlines()) == 1 and message in flake8.stderr, flake8.stderr


def _with_environments(root: Path) -> Path:
    """A project with a .venv (pyvenv.cfg), a conda prefix (conda-meta/) and an excluded .tox, each
    holding a module FWD001 reports, so a run that checks them shows it."""
    (root / "src").mkdir()
    (root / "src" / "m.py").write_text(SOURCE)
    (root / "pyproject.toml").write_text("")
    for env, marker in ((".venv", "pyvenv.cfg"), ("envs/base", "conda-meta/"), (".tox/py311", "pyvenv.cfg")):
        site = root / env / "lib" / "python3.11" / "site-packages" / "pkg"
        site.mkdir(parents=True)
        (site / "mod.py").write_text(SOURCE)
        (site / "other.py").write_text(SOURCE)
        (root / env / marker).mkdir() if marker.endswith("/") else (root / env / marker).write_text("home = /usr\n")
    return root


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_flake8_says_once_that_it_will_check_virtual_environments(tmp_path: Path, jobs: str) -> None:
    """flake8's default exclude does not skip .venv (fwdlint's does): the plugin cannot change flake8's
    discovery, so it says so once a run (not once per -j worker), before checking, with the exclude to add."""
    root = _with_environments(tmp_path)
    proc = run_flake8(root, "--select", "FWD", "-j", jobs, ".")
    checked = {path for path, *_ in flake8_rows(proc)}
    assert ".venv/lib/python3.11/site-packages/pkg/mod.py" in checked  # flake8 walks into them
    assert proc.stderr.count("fwdlint: warning:") == 1, proc.stderr
    assert proc.stderr.startswith("fwdlint: warning: flake8 will check the installed packages in .venv, envs/base ")
    assert "--extend-exclude=.venv,base," in proc.stderr and "extend-exclude = .venv,base under [flake8]" in proc.stderr
    # the exclude it names leaves them out, and then it says nothing; so does a run without FWD
    proc = run_flake8(root, "--select", "FWD", "-j", jobs, "--extend-exclude=.venv,base", ".")
    assert {path for path, *_ in flake8_rows(proc)} == {"src/m.py"} and proc.stderr == ""
    (root / "setup.cfg").write_text("[flake8]\nextend-exclude = .venv,base\n")
    proc = run_flake8(root, "--select", "FWD", "-j", jobs, ".")
    assert {path for path, *_ in flake8_rows(proc)} == {"src/m.py"} and proc.stderr == ""
    assert run_flake8(root, "--select", "E", "-j", jobs, ".").stderr == ""


def test_flake8_says_so_for_a_file_given_inside_a_virtual_environment(tmp_path: Path) -> None:
    """A file named on the command line (pre-commit names staged files) inside a .venv: flake8 matches
    it by its name or its whole path, so the exclude named is the environment's path."""
    root = _with_environments(tmp_path)
    given = ".venv/lib/python3.11/site-packages/pkg/mod.py"
    proc = run_flake8(root, "--select", "FWD", given, "src/m.py")
    assert proc.stderr.count("fwdlint: warning:") == 1 and "in .venv (" in proc.stderr, proc.stderr
    assert "--extend-exclude=.venv/*," in proc.stderr
    proc = run_flake8(root, "--select", "FWD", "--extend-exclude=.venv/*", given, "src/m.py")
    assert {path for path, *_ in flake8_rows(proc)} == {"src/m.py"} and proc.stderr == ""


@pytest.mark.parametrize("where", ["setup.cfg", "pyproject.toml", "command line"])
def test_a_python_executable_that_cannot_be_used_is_exit_2_as_in_the_cli(tmp_path: Path, where: str) -> None:
    """The CLI refuses a ``python-executable`` it cannot use (missing, not an interpreter) with one
    line and exit 2; flake8 went on with a warning, rc 0 or 1 by the findings, and read no installed
    package (issue 36, item 10). The same line now, naming the file and key, or the option."""
    (tmp_path / "m.py").write_text(SOURCE)
    args: tuple[str, ...] = ()
    if where == "setup.cfg":
        (tmp_path / "setup.cfg").write_text("[flake8]\nfwd-python-executable = nowhere/bin/python\n")
    elif where == "pyproject.toml":
        (tmp_path / "pyproject.toml").write_text('[tool.fwdlint]\npython-executable = "nowhere/bin/python"\n')
    else:
        args = ("--fwd-python-executable", str(tmp_path / "nowhere" / "bin" / "python"))
    proc = run_flake8(tmp_path, *args, "m.py")
    assert proc.returncode == 2 and proc.stdout == "", (proc.returncode, proc.stdout, proc.stderr)
    assert len(proc.stderr.splitlines()) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "cannot run it: no such file or directory" in proc.stderr
    if where == "command line":
        assert proc.stderr.startswith("fwdlint: error: flake8 --fwd-python-executable "), proc.stderr
    else:
        cli = run_cli(tmp_path, "m.py")
        assert cli.returncode == 2 and proc.stderr == cli.stderr, (proc.stderr, cli.stderr)
