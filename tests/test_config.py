"""Configuration as flake8/ruff users expect it (``lint_rules/settings.py``): ``[tool.fwdlint]`` in
pyproject.toml and ``[fwdlint]`` in setup.cfg/tox.ini/.flake8, found from the checked paths upwards;
``--config``/``--isolated``; every unusable setting an error naming the file and the key (exit 2),
unknown codes too; paths in a file relative to that file; ``--mark-decorators`` adding to
runtime_shim's marks. Most runs are in-process (``cli.main``) to keep the file fast."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable

import pytest
from fixture_cases import run_cli

from lint_rules import settings
from lint_rules.cli import main

BAD = "import torch.nn as nn\n\nclass M(nn.Module):\n    def gen(self, x):\n        return self(x)\n"
FINDING = "model.py:4:9: FWD001"

Lint = Callable[..., "tuple[int, str, str]"]


@pytest.fixture
def lint(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Lint:
    """``fwdlint --no-cache ARGS`` run in ``cwd``: (exit status, stdout, stderr)."""
    def run(cwd: Path, *args: str) -> tuple[int, str, str]:
        monkeypatch.chdir(cwd)
        code = main(["--no-cache", *args])
        out, err = capsys.readouterr()
        return code, out, err
    return run


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "model.py").write_text(BAD)
    return tmp_path / "proj"


@pytest.mark.parametrize("name, text", [
    ("pyproject.toml", '[tool.black]\nline-length = 99\n\n[tool.fwdlint]\nignore = ["FWD001"]\n'),
    ("pyproject.toml", '[tool.fwdlint]\nignore = "FWD001, FWD3"\n'),  # TOML: a comma string is a list too
    ("setup.cfg", "[metadata]\nname = x\n\n[fwdlint]\nignore = FWD001\n"),
    ("tox.ini", "[fwdlint]\nignore = FWD001\n"),
    (".flake8", "[fwdlint]\nignore = FWD001\n"),
])
def test_each_config_file_is_read(project: Path, lint: Lint, name: str, text: str) -> None:
    assert lint(project)[0] == 1
    (project / name).write_text(text)
    assert lint(project) == (0, "", "")
    assert lint(project, "--ignore", "")[1].startswith(FINDING)  # an option replaces the key


def test_found_from_the_given_paths_upwards(project: Path, lint: Lint) -> None:
    (project / "pkg" / "deep").mkdir(parents=True)
    (project / "pkg" / "deep" / "model.py").write_text(BAD)
    (project / "setup.cfg").write_text("[fwdlint]\nignore = FWD001\n")
    # a nearer file without a fwdlint section does not stop the search
    (project / "pkg" / "pyproject.toml").write_text("[tool.black]\nline-length = 99\n")
    assert lint(project / "pkg" / "deep") == (0, "", "")  # no paths: from the working directory
    # from outside the project: the common parent of the paths, not the working directory
    assert lint(project.parent, "proj/pkg/deep/model.py", "proj/model.py") == (0, "", "")
    # the first file with a section wins: pyproject.toml before setup.cfg in one directory...
    (project / "pyproject.toml").write_text("[tool.fwdlint]\nselect = ['FWD1']\n")
    assert lint(project.parent, "proj/model.py") == (0, "", "")
    (project / "pyproject.toml").write_text("[tool.fwdlint]\nselect = 'FWD'\n")
    assert lint(project.parent, "proj/model.py")[0] == 1
    # ...and a nearer directory before a farther one; nothing is merged across files
    (project / "pkg" / "tox.ini").write_text("[fwdlint]\nmodule-bases = Base\n")
    assert lint(project / "pkg", "deep/model.py")[1].startswith("deep/model.py:4:9: FWD001")


def test_flake8_plugin_keys_are_the_fallback(project: Path, lint: Lint) -> None:
    marked = BAD.replace("    def gen", "    @my_mark\n    def gen")
    (project / "model.py").write_text("from marks import my_mark\n" + marked)
    assert lint(project)[0] == 1
    (project / "setup.cfg").write_text("[flake8]\nmax-line-length = 99\nfwd-mark-decorators = my_mark\n")
    assert lint(project) == (0, "", "")
    # [fwdlint] wins over [flake8] key by key
    (project / "setup.cfg").write_text("[flake8]\nfwd-mark-decorators = my_mark\n[fwdlint]\nmark-decorators = other\n")
    assert lint(project)[0] == 1


@pytest.mark.parametrize("name, text, message", [
    ("pyproject.toml", "[tool.fwdlint]\nselectt = 'FWD'\n",
     "pyproject.toml: error: [tool.fwdlint] unknown key 'selectt'"),
    ("setup.cfg", "[fwdlint]\nignroe = FWD001\n", "setup.cfg: error: [fwdlint] unknown key 'ignroe'"),
    ("pyproject.toml", "[tool.fwdlint]\nselect = 3\n",
     "pyproject.toml: error: [tool.fwdlint] bad value for 'select': expected a string or an array of strings, "
     "got an integer"),
    ("pyproject.toml", "[tool.fwdlint]\nexclude = ['a', 1]\n",
     "pyproject.toml: error: [tool.fwdlint] bad value for 'exclude'"),
    ("pyproject.toml", "[tool.fwdlint]\npython-executable = ['a']\n",
     "pyproject.toml: error: [tool.fwdlint] bad value for 'python-executable': expected a string, got an array"),
    ("pyproject.toml", "[tool]\nfwdlint = 'FWD'\n", "pyproject.toml: error: [tool.fwdlint] must be a table"),
    ("tox.ini", "[fwdlint]\nper-file-ignores = tests/*\n",
     "tox.ini: error: [fwdlint] bad value for 'per-file-ignores': 'tests/*' has no ':CODES'"),
    ("tox.ini", "[fwdlint]\nmodule-bases = my-base\n",
     "tox.ini: error: [fwdlint] bad value for 'module-bases': 'my-base' is not a (dotted) Python name"),
    ("pyproject.toml", "[tool.fwdlint]\nforward-helpers = 'skp'\n",
     "pyproject.toml: error: [tool.fwdlint] bad value for 'forward-helpers': expected one of report, skip, got 'skp'"),
    ("pyproject.toml", "[tool.fwdlint]\nforward-helpers = false\n",
     "pyproject.toml: error: [tool.fwdlint] bad value for 'forward-helpers': expected one of report, skip, got False"),
    (".flake8", "[flake8]\nfwd-mark-decorators = @entry\n",
     ".flake8: error: [flake8] bad value for 'fwd-mark-decorators': '@entry' is not a (dotted) Python name"),
    ("setup.cfg", "[fwdlint]\nselect = FWD\nselect_ = x\nselect = FWD1\n",
     "setup.cfg: error: [fwdlint] key 'select' given twice (line 4)"),
    ("setup.cfg", "[fwdlint]\nselect = FWD\nselect_ = FWD\n", "setup.cfg: error: [fwdlint] unknown key 'select_'"),
    ("setup.cfg", "[fwdlint]\nselect = FWD\nSelect = FWD\n", "setup.cfg: error: [fwdlint] key 'select' given twice"),
    ("setup.cfg", "[fwdlint]\nper_file_ignores = a:FWD1\nper-file-ignores = b:FWD1\n",
     "setup.cfg: error: [fwdlint] key 'per-file-ignores' given twice (as 'per_file_ignores' and 'per-file-ignores')"),
    ("pyproject.toml", "[tool.fwdlint\nselect = 'FWD'\n", "pyproject.toml: error: invalid TOML: Expected ']'"),
    ("setup.cfg", "[fwdlint]\nselect\n", "setup.cfg: error: invalid INI syntax at line 2: 'select'"),
    ("setup.cfg", "select = FWD\n[fwdlint]\n", "setup.cfg: error: invalid INI syntax at line 1: no [section] header"),
    ("setup.cfg", "[fwdlint]\nmodule-bases = Bas\xe9\n".encode("latin-1"), "setup.cfg: error: cannot decode as UTF-8"),
])
def test_unusable_configuration_is_one_error_line(project: Path, lint: Lint, name: str, text: "str | bytes",
                                                  message: str) -> None:
    (project / name).write_bytes(text if isinstance(text, bytes) else text.encode())
    code, out, err = lint(project)
    assert (code, out) == (2, "")
    assert err.startswith(message) and err.count("\n") == 1, err
    # also when the file is found from a subdirectory: the name says where it is
    (project / "sub").mkdir()
    assert lint(project / "sub")[2].startswith("../" + message)


def test_config_error_end_to_end_has_no_traceback(project: Path) -> None:
    (project / "pyproject.toml").write_text("[tool.fwdlint]\nselectt = 'FWD'\n")
    proc = run_cli(project, "model.py")
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr.startswith("pyproject.toml: error: [tool.fwdlint] unknown key 'selectt'")
    assert proc.stderr.count("\n") == 1


def test_files_without_a_fwdlint_section_are_not_errors(project: Path, lint: Lint) -> None:
    (project / "tox.ini").write_text("[tox\nbroken = yes\n")  # another tool's broken file, no 'fwd' in it
    (project / "pyproject.toml").write_text("[tool.black]\nline-length = 99\n")
    (project / "setup.cfg").write_text("[flake8]\nmax-line-length = 99\n")
    assert lint(project)[0] == 1
    # a broken file that mentions fwdlint may be its configuration: an error, not a guess
    (project / ".flake8").write_text("[fwdlint\nselect = FWD\n")
    assert lint(project)[2].startswith(".flake8: error: invalid INI syntax at line 1")


def test_config_option_reads_exactly_that_file(project: Path, lint: Lint) -> None:
    (project / "setup.cfg").write_text("[fwdlint]\nselect = FWD1\n")  # would hide the finding
    (project / "conf").mkdir()
    (project / "conf" / "lint.toml").write_text("[tool.fwdlint]\nselect = 'FWD0'\n")
    (project / "conf" / "lint.ini").write_text("[fwdlint]\nselect = FWD0\n")
    assert lint(project)[0] == 0
    assert lint(project, "--config", "conf/lint.toml")[1].startswith(FINDING)
    assert lint(project, "--config", "conf/lint.ini")[1].startswith(FINDING)
    assert lint(project, "--config", "conf/missing.cfg")[:2] == (2, "")
    assert lint(project, "--config", "conf/missing.cfg")[2].startswith("conf/missing.cfg: error: cannot read")
    (project / "conf" / "empty.cfg").write_text("[flake8]\nmax-line-length = 99\n")
    assert lint(project, "--config", "conf/empty.cfg")[2] == (
        "conf/empty.cfg: error: no [fwdlint] section (nor fwd- keys in [flake8])\n")
    (project / "conf" / "empty.toml").write_text("[tool.black]\n")
    assert lint(project, "--config", "conf/empty.toml")[2] == "conf/empty.toml: error: no [tool.fwdlint] section\n"


def test_isolated_reads_no_configuration(project: Path, lint: Lint) -> None:
    (project / "setup.cfg").write_text("[fwdlint]\nselect = FWD1\n")
    assert lint(project)[0] == 0
    assert lint(project, "--isolated")[1].startswith(FINDING)
    (project / "setup.cfg").write_text("[fwdlint]\nselectt = FWD1\n")  # not even parsed
    assert lint(project, "--isolated")[0] == 1
    assert lint(project, "--isolated", "--config", "setup.cfg")[0] == 1  # as in flake8, --isolated wins


def test_paths_in_a_config_file_are_relative_to_it(project: Path, lint: Lint) -> None:
    for folder in ("pkg/generated", "pkg/tests", "pkg/src"):
        (project / folder).mkdir(parents=True)
        (project / folder / "model.py").write_text(BAD)
    (project / "setup.cfg").write_text("[fwdlint]\nexclude = pkg/generated/*\nper-file-ignores = pkg/tests/*:FWD001\n"
                                       "python-executable = venv-here/bin/python\n")
    code, out, err = lint(project / "pkg", "--python", sys.executable)
    assert code == 1 and err == ""
    assert [line.split(":")[0] for line in out.splitlines()] == ["src/model.py"]
    # the same patterns given on the command line are relative to the working directory
    code, out, _ = lint(project, "--isolated", "--exclude", "pkg/generated/*",
                        "--per-file-ignores", "pkg/tests/*:FWD001", "pkg")
    assert [line.split(":")[0] for line in out.splitlines()] == ["pkg/src/model.py"]
    # python-executable too: named in the error with the file and the key, resolved from the file's directory
    code, out, err = lint(project / "pkg")
    assert code == 2 and err.startswith("../setup.cfg: error: [fwdlint] 'python-executable': cannot run it")
    assert str(project / "venv-here" / "bin" / "python") in err and err.count("\n") == 1


CODES = "(codes: FWD001, FWD002, FWD003, FWD004, FWD005, FWD101, FWD201, FWD301)"


def test_known_codes_and_prefixes(project: Path, lint: Lint) -> None:
    for select in ("FWD", "FWD0", "FWD00", "FWD001", "FW,FWD3"):
        assert lint(project, "--select", select)[0] == 1, select
    assert lint(project, "--select", "FWD", "--ignore", "FWD001,FWD10,FWD3")[1:] == ("", "")
    assert lint(project, "--ignore", "")[0] == 1  # an empty --ignore clears a configured one


@pytest.mark.parametrize("args, message", [
    (("--select", "FWD01"), f"--select FWD01: no rule code starts with 'FWD01' {CODES}"),
    (("--select", "FWD0,FWD999"), f"--select FWD0,FWD999: no rule code starts with 'FWD999' {CODES}"),
    (("--select", "fwd001"), "--select fwd001: no rule code starts with 'fwd001'; did you mean 'FWD001'? "
                             "(codes are upper case; codes: FWD001,"),
    (("--select", "ALL"), f"--select ALL: no rule code starts with 'ALL'; 'FWD' selects every rule {CODES}"),
    (("--select", ""), "--select '': selects no rule (give codes or prefixes; 'FWD' selects every rule:"),
    (("--ignore", "FWD3,E501"), f"--ignore FWD3,E501: no rule code starts with 'E501' {CODES}"),
    (("--per-file-ignores", "tests/*:FWD001 x.py:FWD01"),
     f"--per-file-ignores: no rule code starts with 'FWD01' {CODES}"),
    # a slip gets the code meant (difflib's close matches, fewest edits)
    (("--select", "FDW001"), f"--select FDW001: no rule code starts with 'FDW001'; did you mean 'FWD001'? {CODES}"),
    (("--select", "FDW"), f"--select FDW: no rule code starts with 'FDW'; did you mean 'FWD'? {CODES}"),
    (("--extend-select", "FWD0O1"),
     f"--extend-select FWD0O1: no rule code starts with 'FWD0O1'; did you mean 'FWD001'? {CODES}"),
    (("--ignore", "FWD3,FWD10l"), "--ignore FWD3,FWD10l: no rule code starts with 'FWD10l'; did you mean 'FWD101'?"),
    (("--extend-ignore", "FD201"), "--extend-ignore FD201: no rule code starts with 'FD201'; did you mean 'FWD201'?"),
    (("--per-file-ignores", "tests/*:FWD001 x.py:FDW301"),
     f"--per-file-ignores: no rule code starts with 'FDW301'; did you mean 'FWD301'? {CODES}"),
])
def test_unknown_codes_on_the_command_line_are_errors(project: Path, lint: Lint, args: tuple[str, ...],
                                                      message: str) -> None:
    """A selection that selects nothing would pass forever: exit 2 before any file is read, as ruff."""
    code, out, err = lint(project, *args)
    assert (code, out) == (2, "")
    assert err.startswith("fwdlint: error: " + message) and err.count("\n") == 1, err


@pytest.mark.parametrize("name, text, message", [
    ("pyproject.toml", "[tool.fwdlint]\nselect = ['FWD001', 'FWD9']\n",
     f"pyproject.toml: error: [tool.fwdlint] bad value for 'select': no rule code starts with 'FWD9' {CODES}"),
    ("pyproject.toml", "[tool.fwdlint]\nselect = []\n",
     "pyproject.toml: error: [tool.fwdlint] bad value for 'select': selects no rule"),
    ("pyproject.toml", "[tool.fwdlint]\nper-file-ignores = {'x/*' = 'fwd001'}\n",
     "pyproject.toml: error: [tool.fwdlint] bad value for 'per-file-ignores': no rule code starts with 'fwd001'; "
     "did you mean 'FWD001'?"),
    ("setup.cfg", "[fwdlint]\nignore = E501, FWD001\n",
     f"setup.cfg: error: [fwdlint] bad value for 'ignore': no rule code starts with 'E501' {CODES}"),
    ("tox.ini", "[fwdlint]\nper-file-ignores =\n    tests/*:FWD001\n    x.py:FWD7\n",
     f"tox.ini: error: [fwdlint] bad value for 'per-file-ignores': no rule code starts with 'FWD7' {CODES}"),
    ("pyproject.toml", "[tool.fwdlint]\nselect = ['FDW001']\n",
     "pyproject.toml: error: [tool.fwdlint] bad value for 'select': no rule code starts with 'FDW001'; "
     f"did you mean 'FWD001'? {CODES}"),
])
def test_unknown_codes_in_a_config_file_are_errors(project: Path, lint: Lint, name: str, text: str,
                                                   message: str) -> None:
    (project / name).write_text(text)
    code, out, err = lint(project)
    assert (code, out) == (2, "")
    assert err.startswith(message) and err.count("\n") == 1, err


def test_unknown_code_end_to_end(project: Path) -> None:
    (project / "setup.cfg").write_text("[fwdlint]\nselect = FWD01\n")
    proc = run_cli(project, "model.py")
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == ("setup.cfg: error: [fwdlint] bad value for 'select': "
                           f"no rule code starts with 'FWD01' {CODES}\n")


def test_mark_decorators_add_to_runtime_shims_marks(project: Path, lint: Lint) -> None:
    (project / "model.py").write_text(
        "import torch.nn as nn\nfrom runtime_shim import forward_entry, inference_entry\nfrom marks import my_mark\n\n"
        "class M(nn.Module):\n"
        "    @my_mark\n    def a(self, x):\n        return self(x)\n\n"
        "    @forward_entry\n    def b(self, x):\n        return self(x)\n\n"
        "    @inference_entry\n    def c(self, x):\n        return self(x)\n\n"
        "    def d(self, x):\n        return self(x)\n")
    reported = lambda out: [line.split()[2] for line in out.splitlines()]  # noqa: E731
    assert reported(lint(project)[1]) == ["M.a", "M.d"]
    assert reported(lint(project, "--mark-decorators", "my_mark")[1]) == ["M.d"]
    assert reported(lint(project, "--mark-decorators", "other.my_mark")[1]) == ["M.a", "M.d"]  # dotted: exact
    assert reported(lint(project, "--mark-decorators", "marks.my_mark")[1]) == ["M.d"]
    (project / "setup.cfg").write_text("[fwdlint]\nmark-decorators = my_mark\n")
    assert reported(lint(project)[1]) == ["M.d"]
    assert lint(project, "--mark-decorators", "a-b")[2] == (
        "fwdlint: error: --mark-decorators: 'a-b' is not a (dotted) Python name\n")


def test_toml_lists_and_per_file_ignores_forms(project: Path, lint: Lint) -> None:
    (project / "tests").mkdir()
    (project / "tests" / "model.py").write_text(BAD)
    for form in ('"tests/*:FWD001"', '["tests/*:FWD001", "x.py: FWD002"]', '{"tests/*" = ["FWD001"]}',
                 '{"tests/*" = "FWD001,FWD002"}'):
        (project / "pyproject.toml").write_text(f"[tool.fwdlint]\nper-file-ignores = {form}\n")
        assert lint(project)[1:] == (lint(project, "--isolated", "model.py")[1], ""), form
    assert lint(project, "--isolated")[1].count("FWD001") == 2


def test_python_3_9_reads_toml_with_tomli(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Below 3.11 tomllib does not exist; the same parser comes from the tomli package."""
    tomllib = pytest.importorskip("tomllib")
    monkeypatch.setattr(sys, "version_info", (3, 9, 0))
    monkeypatch.setitem(sys.modules, "tomli", tomllib)
    monkeypatch.setitem(sys.modules, "tomllib", None)  # importing it now fails, as on 3.9
    (project / "pyproject.toml").write_text("[tool.fwdlint]\nignore = ['FWD001']\n")
    assert settings.read_config_file(project / "pyproject.toml", required=True).values == {"ignore": ["FWD001"]}


def test_forward_helpers_option_replaces_the_key(project: Path, lint: Lint) -> None:
    """``forward-helpers``: the command line replaces the file's key, in both directions."""
    (project / "model.py").write_text(BAD + "\n    def forward(self, x):\n        return self.gen(x)\n")
    assert lint(project)[1].count("called in this project only from M.forward") == 1
    (project / "pyproject.toml").write_text("[tool.fwdlint]\nforward-helpers = 'skip'\n")
    assert lint(project) == (0, "", "")
    assert lint(project, "--forward-helpers", "report")[0] == 1
    (project / "pyproject.toml").write_text("[tool.fwdlint]\nforward-helpers = 'report'\n")
    assert lint(project, "--forward-helpers", "skip") == (0, "", "")


def test_extend_select_and_extend_ignore_add_to_select_and_ignore(project: Path, lint: Lint) -> None:
    """ruff's and flake8's habit: extend-* adds codes, the file's then the command line's; select
    and ignore (file or option) are kept."""
    (project / "model.py").write_text(BAD)  # FWD001
    (project / "pyproject.toml").write_text("[tool.fwdlint]\nselect = ['FWD3']\nextend-select = ['FWD0']\n")
    assert lint(project)[1].startswith(FINDING)  # FWD3 alone would say nothing
    assert lint(project, "--select", "FWD3")[0] == 1  # the option replaces select; extend-select stays
    assert lint(project, "--extend-ignore", "FWD001") == (0, "", "")
    (project / "pyproject.toml").write_text("[tool.fwdlint]\nignore = ['FWD0']\nextend-ignore = ['FWD3']\n")
    assert lint(project) == (0, "", "")
    assert lint(project, "--extend-select", "FWD001")[0] == 1  # the longer prefix wins, as with select
    (project / "pyproject.toml").write_text("[tool.fwdlint]\nextend-select = ['FWD9']\n")
    code, out, err = lint(project)
    assert (code, out) == (2, "") and err.startswith(
        "pyproject.toml: error: [tool.fwdlint] bad value for 'extend-select': no rule code starts with 'FWD9'")
    (project / "pyproject.toml").unlink()
    code, out, err = lint(project, "--extend-ignore", "E501")
    assert (code, out) == (2, "") and err.startswith("fwdlint: error: --extend-ignore E501: no rule code starts with")
