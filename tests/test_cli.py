"""fwdlint's command-line contract: exit codes, bad input, selection, discovery, formats, -j."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any, Callable, Sequence

import pytest
from fixture_cases import FIXTURES, cli_json, flake8_rows, run_cli, run_flake8

FWD001 = FIXTURES / "fwd001"
BAD_MODULE = "import torch.nn as nn\n\nclass M(nn.Module):\n    def gen(self, x):\n        return self(x)\n"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "good.py").write_text(BAD_MODULE)
    (tmp_path / "clean.py").write_text("x = 1\n")
    return tmp_path


def test_exit_codes(project: Path) -> None:
    assert run_cli(project, "clean.py").returncode == 0
    found = run_cli(project, "good.py")
    assert found.returncode == 1
    assert found.stdout == (  # what and where, one line: the remedy is the help (--show-source, json)
        "good.py:4:9: FWD001 M.gen runs forward computation outside forward (gen -> self(...) "
        "at line 5) but is not marked [unmarked-forward-entry]\n"
    )


def test_no_paths_checks_the_current_directory(project: Path) -> None:
    """As in flake8 and ruff (pre-commit never runs a hook with no files, so nothing relied on the
    old "no paths: nothing to do"); a directory without Python files is a clean run."""
    proc = run_cli(project)
    assert (proc.returncode, proc.stdout, proc.stderr) == (1, run_cli(project, ".").stdout, "")
    assert proc.stdout.startswith("good.py:4:9: FWD001")
    (project / "empty").mkdir()
    proc = run_cli(project / "empty")
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")


def test_unparsable_and_undecodable_files_are_reported_and_the_rest_checked(project: Path) -> None:
    (project / "broken.py").write_text("class M(nn.Module):\n    def f(self:\n")
    (project / "latin1.py").write_bytes(b"x = '\xe9'\n")
    (project / "missing_dir").mkdir()
    proc = run_cli(project, "broken.py", "latin1.py", "good.py", "nonexistent.py")
    assert proc.returncode == 2
    assert "good.py:4:9: FWD001" in proc.stdout
    errors = proc.stderr.splitlines()
    assert len(errors) == 3, proc.stderr
    assert errors[0].startswith("broken.py: error: syntax error at line")
    assert errors[1].startswith("latin1.py: error: cannot decode")
    assert errors[2].startswith("nonexistent.py: error: cannot read")
    assert "Traceback" not in proc.stderr


def test_json_errors_and_schema(project: Path) -> None:
    (project / "broken.py").write_text("class A:\n    def (:\n")
    (project / "layers.py").write_text("from torch import nn\n\n\nclass Wide(nn.Linear):\n    pass\n")
    code, payload = cli_json(project, ".")
    assert code == 2
    assert set(payload) == {"version", "diagnostics", "errors", "stats"}
    stats = payload["stats"]  # torch's own files, read to resolve nn.Linear's subclass
    assert set(stats) == {"files_read_to_resolve_names", "installed_files_read"}
    assert stats["files_read_to_resolve_names"] == stats["installed_files_read"] > 0
    assert payload["errors"] == [{"path": "broken.py", "message": payload["errors"][0]["message"]}]
    [diagnostic] = payload["diagnostics"]
    assert diagnostic == {
        "path": "good.py", "line": 4, "col": 9, "code": "FWD001", "name": "unmarked-forward-entry", "symbol": "M.gen",
        "message": diagnostic["message"], "help": diagnostic["help"], "severity": "error",
        "steps": [{"message": "gen", "path": "good.py", "line": 4, "col": 9},
                  {"message": "self(...)", "path": "good.py", "line": 5, "col": 16}],
        "related": [],
    }


def test_select_and_ignore(project: Path) -> None:
    assert run_cli(project, "--select", "FWD", "good.py").returncode == 1
    assert run_cli(project, "--select", "FWD001", "good.py").returncode == 1
    assert run_cli(project, "--select", "E", "good.py").returncode == 2  # no rule code starts with E
    assert run_cli(project, "--ignore", "FWD001", "good.py").returncode == 0
    assert run_cli(project, "--ignore", "FWD", "good.py").returncode == 0
    assert run_cli(project, "--select", "FWD001", "--ignore", "FWD", "good.py").returncode == 1


@pytest.mark.parametrize("args, code", [
    (("--select", "FWD01"), "FWD01"), (("--select", "fwd001"), "fwd001"), (("--select", "FWD999"), "FWD999"),
    (("--select", "FWD,E501"), "E501"), (("--ignore", "FWD0O1"), "FWD0O1"),
    (("--per-file-ignores", "good.py:FWD01"), "FWD01"),
    (("--select", "FWD01", "--exit-zero"), "FWD01"), (("--select", "FWD01", "--fix"), "FWD01"),
])
def test_unknown_code_is_a_usage_error(project: Path, args: tuple[str, ...], code: str) -> None:
    """Not a warning and exit 0 (a CI check green forever): exit 2, one line naming the option and
    the code, before any file is read (so --fix changes nothing) and whatever --exit-zero says."""
    proc = run_cli(project, *args, ".")
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr.startswith(f"fwdlint: error: {args[0]}") and proc.stderr.count("\n") == 1, proc.stderr
    assert f"no rule code starts with '{code}'" in proc.stderr
    assert (project / "good.py").read_text() == BAD_MODULE


def test_config_file_settings(project: Path) -> None:
    (project / "setup.cfg").write_text("[fwdlint]\nignore = FWD001\n")
    assert run_cli(project, "good.py").returncode == 0
    assert run_cli(project, "--ignore", "", "good.py").returncode == 1


def test_discovery_skips_vcs_venv_and_excluded(project: Path) -> None:
    for folder in (".git", "venv_custom", "build_out", "__pycache__"):
        (project / folder).mkdir()
        (project / folder / "inner.py").write_text(BAD_MODULE)
    (project / "venv_custom" / "pyvenv.cfg").write_text("home = /usr\n")
    code, payload = cli_json(project, ".", "--exclude", "build_*")
    assert code == 1
    assert [d["path"] for d in payload["diagnostics"]] == ["good.py"]
    # A file named explicitly is read even where recursion would skip it...
    code, payload = cli_json(project, os.path.join(".git", "inner.py"))
    assert code == 1 and len(payload["diagnostics"]) == 1
    # ...unless the user's own --exclude names it.
    assert run_cli(project, "--exclude", "good.py", "good.py").returncode == 0


def test_parallel_gives_identical_output(tmp_path: Path) -> None:
    shutil.copytree(FWD001, tmp_path / "fixtures")
    serial = run_cli(tmp_path / "fixtures", "--format", "json", "-j", "1", ".")
    parallel = run_cli(tmp_path / "fixtures", "--format", "json", "-j", "2", ".")
    assert serial.returncode == parallel.returncode == 1
    assert serial.stdout == parallel.stdout
    assert len(json.loads(serial.stdout)["diagnostics"]) > 50


def test_usage_errors(project: Path) -> None:
    assert run_cli(project, "--format", "xml").returncode == 2
    assert run_cli(project, "-j", "-1", "good.py").returncode == 2
    assert run_cli(project, "--no-such-option").returncode == 2


def test_every_given_file_is_checked_for_syntax(project: Path) -> None:
    """A file with no class and no registration cannot hold a finding, but a syntax error in it
    is still reported (exit 2), with the position Python gives; the other files are checked."""
    (project / "no_classes.py").write_text("x = 1\ndef (:\n")
    proc = run_cli(project, "no_classes.py", "good.py")
    assert proc.returncode == 2
    assert proc.stderr == "no_classes.py: error: syntax error at line 2, column 5: invalid syntax\n"
    assert "good.py:4:9: FWD001" in proc.stdout


def test_checking_never_parses_with_libcst(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Facts come from CPython's ``ast`` (about 9x faster to parse); LibCST is the fixers' alone."""
    import libcst

    from lint_rules.engine import Run, analyse

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("LibCST parse")

    monkeypatch.setattr(libcst, "parse_module", refuse)
    (project / "plain.py").write_text("import os\n\ndef f(x):\n    return os.path.join(x, 'a')\n")
    result = analyse([str(project / "plain.py"), str(project / "good.py")], Run(cache=False))
    assert result.errors == [] and result.files_parsed - result.installed_read == 2
    assert [(d.path, d.line, d.code) for d in result.diagnostics] == [(str(project / "good.py"), 4, "FWD001")]


def test_parenthesised_annotated_targets_are_analysed(project: Path) -> None:
    """`(x): bool = True` is valid Python that LibCST 1.9 rejects; the file is analysed, with every
    position where Python has it."""
    (project / "paren.py").write_text("import torch.nn as nn\n\n(x): bool = True\n\n\nclass M(nn.Module):\n"
                                      "    ((y)) : int = 1\n\n    def gen(self, x):\n        return self(x)\n")
    proc = run_cli(project, "paren.py")
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.startswith("paren.py:9:9: FWD001 M.gen runs forward computation outside forward "
                                  "(gen -> self(...) at line 10)")


def test_valid_python_libcst_cannot_parse_is_checked_and_its_fix_refused_in_one_line(project: Path) -> None:
    """A comment inside the parentheses of an annotated target: LibCST cannot parse it, Python can.
    The file is checked like any other (CLI and flake8); ``--fix``, which edits through LibCST, says
    in one line why it leaves the file alone."""
    text = ("import torch.nn as nn\n\n(x  # why\n): bool = True\n\n\nclass A(nn.Module):\n"
            "    def gen(self, x):\n        return self(x)\n")
    (project / "walrus.py").write_text(text)
    proc = run_cli(project, "walrus.py")
    assert (proc.returncode, proc.stderr) == (1, ""), proc.stderr
    assert proc.stdout.startswith("walrus.py:8:9: FWD001 A.gen")
    rows = flake8_rows(run_flake8(project, "--select", "FWD", "walrus.py"))
    assert [(p, r, c, code) for p, r, c, code, _ in rows] == [("walrus.py", 8, 9, "FWD001")]
    fixed = run_cli(project, "--fix", "walrus.py")
    assert (project / "walrus.py").read_text() == text
    assert "walrus.py" in fixed.stderr and "LibCST cannot parse this file" in fixed.stderr, fixed.stderr
    assert "Traceback" not in fixed.stderr


def test_the_parser_names_the_formats_and_fix_styles_there_are() -> None:
    """The CLI names them itself (building its parser imports neither ``report`` nor ``fix.run``)."""
    from lint_rules import cli, report
    from lint_rules.fix import run as fix

    assert cli.FORMATS == report.FORMATS and cli.FIX_STYLES == fix.STYLES


def _recording(asked: list[int]) -> Callable[..., list[Any]]:
    """``Pool.map`` run in this process, noting how many workers the pool was asked for."""
    def map_(pool: Any, function: Callable[[Any], Any], tasks: Sequence[Any], done: Any = None,
             jobs: Any = None) -> list[Any]:
        asked.append(pool.jobs if jobs is None else jobs)
        return [function(task) for task in tasks]
    return map_


@pytest.mark.parametrize(("files", "cpus", "expected"), [(3, 4, 1), (40, 4, 2), (200, 4, 4), (200, 1, 1)])
def test_default_jobs_follow_the_files_to_parse(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, files: int,
                                                cpus: int, expected: int) -> None:
    """No -j: one parser process per ``TASKS_PER_WORKER`` files to parse, at most one per CPU."""
    from lint_rules import cli, parse_here, workers

    for number in range(files):
        (tmp_path / f"m{number}.py").write_text(f"x = {number}\n")
    monkeypatch.setattr(workers, "cpus", lambda: cpus)
    monkeypatch.setattr(workers, "TASKS_PER_WORKER", 16)
    asked: list[int] = []
    monkeypatch.setattr(workers.Pool, "map", _recording(asked))
    monkeypatch.setattr(parse_here, "HERE_BYTES", 0)  # these few bytes would be parsed in this process
    assert cli.main(["-q", "--no-cache", "--isolated", str(tmp_path)]) == 0
    assert asked == [expected]


def test_jobs_zero_means_every_cpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from lint_rules import cli, parse_here, workers

    (tmp_path / "m.py").write_text("x = 1\n")
    monkeypatch.setattr(workers, "cpus", lambda: 3)
    asked: list[int] = []
    monkeypatch.setattr(workers.Pool, "map", _recording(asked))
    monkeypatch.setattr(parse_here, "HERE_BYTES", 0)  # these few bytes would be parsed in this process
    assert cli.main(["-q", "--no-cache", "--isolated", "-j", "0", str(tmp_path)]) == 0
    assert asked == [3]


@pytest.mark.parametrize("enabled", [True, False])
def test_the_collector_is_left_as_the_caller_had_it(project: Path, monkeypatch: pytest.MonkeyPatch,
                                                     enabled: bool) -> None:
    """The facts are read with the collector paused and kept out of its reach while the rules run
    (``few_collections``); a caller in the same process (pytest, flake8) gets it back as it was."""
    import gc

    from lint_rules.engine import Run, Session, analyse

    seen: list[tuple[bool, bool]] = []
    check = Session.check
    monkeypatch.setattr(Session, "check", lambda *args, **kwargs: seen.append(
        (gc.isenabled(), gc.get_freeze_count() > 0)) or check(*args, **kwargs))
    thresholds = gc.get_threshold()
    (gc.enable if enabled else gc.disable)()
    try:
        result = analyse([str(project / "good.py")], Run(cache=False))
        after = (gc.isenabled(), gc.get_threshold(), gc.get_freeze_count())
    finally:
        gc.enable()
    assert [d.code for d in result.diagnostics] == ["FWD001"]
    assert seen == [(enabled, True)]  # the rules ran with the facts frozen, the collector as it was
    assert after == (enabled, thresholds, 0)


def test_the_program_ends_with_its_whole_output_and_status(tmp_path: Path) -> None:
    """Run as the program, fwdlint ends the process itself, without the interpreter's shutdown
    (``cli._exit_now``): what it wrote to a pipe arrives whole (more than a pipe's buffer here), and
    the exit status is the run's."""
    (tmp_path / "pyproject.toml").write_text("")
    classes = "".join(f"\n\nclass M{i}(nn.Module):\n    def gen(self, x):\n        return self(x)\n" for i in range(600))
    (tmp_path / "many.py").write_text("import torch.nn as nn\n" + classes)
    proc = run_cli(tmp_path, "--no-cache", "many.py")
    lines = proc.stdout.splitlines()
    assert proc.returncode == 1 and len(proc.stdout) > 65536, proc.stderr
    assert [line.split(":")[1] for line in lines] == [str(5 + 5 * i) for i in range(600)], lines[-3:]
