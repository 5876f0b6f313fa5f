"""A finding's evidence chain as located steps, and the set-ups it names, for tools to show (issue 35,
item 3): ``steps`` and ``related`` in JSON, ``codeFlows`` and ``relatedLocations`` in SARIF.

The steps are built where the chain is built (``computation``), so the message's chain is the
steps as they print: every fixture's finding is checked for that, and each located step for
pointing at what it names."""

from __future__ import annotations

import json
import re
import shutil
import unicodedata
from pathlib import Path

import pytest
from fixture_cases import FIXTURES, cli_json, rule_fixture_dirs, run_cli
from test_registration_per_set_up import _project

from lint_rules.discover import python_files
from lint_rules.diagnostics import chain_text
from lint_rules.engine import Run, analyse

CHAINED = [d for d in rule_fixture_dirs() if d.name in ("fwd001", "fwd002", "fwd201")]


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8", errors="replace").splitlines()


@pytest.mark.parametrize("directory", CHAINED, ids=lambda d: d.name)
def test_the_message_shows_the_steps_and_each_step_points_at_what_it_names(
        directory: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    work = tmp_path / directory.name
    shutil.copytree(directory, work, ignore=shutil.ignore_patterns(".fwdlint_cache"))
    monkeypatch.chdir(work)
    result = analyse(list(python_files(["."])), Run(cache=False))
    chained = [d for d in result.diagnostics if d.steps]
    assert len(chained) > 5
    located = 0
    for d in chained:
        assert f"({chain_text(d.steps, d.path)}" in d.message, d
        for step in d.steps:
            if not step.line:
                continue
            located += 1
            text = unicodedata.normalize("NFKC", _lines(work / step.path)[step.line - 1][step.col:])
            head = re.match(r"[\w.]+", text)
            assert head is not None and any(part in step.what for part in head[0].split(".")), (d, step)
    assert located > len(chained)  # most steps have a place: the method and the call at least


def test_a_helper_of_a_base_class_in_another_file_is_located_there(tmp_path: Path) -> None:
    work = tmp_path / "cross_file"
    shutil.copytree(FIXTURES / "fwd001" / "cross_file", work)
    _, payload = cli_json(work, "--no-cache", "pkg")
    [found] = [d for d in payload["diagnostics"] if d["symbol"] == "Model.features"]
    assert found["steps"] == [
        {"message": "features", "path": "pkg/model.py", "line": 14, "col": 9},
        {"message": "_features", "path": "pkg/base.py", "line": 14, "col": 9},
        {"message": "self.trunk(...)", "path": "pkg/base.py", "line": 15, "col": 16},
    ]
    assert found["related"] == []
    # the line of another file is given with its file: "at line 15" would send the reader to pkg/model.py
    assert "(features -> _features -> self.trunk(...) at pkg/base.py:15)" in found["message"]
    _, payload = cli_json(work / "pkg", "--no-cache", ".")  # relative to the working directory
    assert "self.trunk(...) at base.py:15)" in next(d["message"] for d in payload["diagnostics"]
                                                    if d["symbol"] == "Model.features")


def test_set_ups_are_related_places_saying_which_register(tmp_path: Path) -> None:
    root = _project(tmp_path)
    _, payload = cli_json(root, "--no-cache", ".")
    by_code = {d["code"]: d for d in payload["diagnostics"]}
    assert [s["message"] for s in by_code["FWD001"]["steps"]] == ["generate", "self(...)"]
    # a set-up statement's line is known, its column is not: no col rather than a made-up one
    assert by_code["FWD001"]["related"] == [
        {"message": "ddp set up with DDP: registers generate", "path": "test_model.py", "line": 8},
        {"message": "ddp set up with DDP: does not register generate", "path": "train.py", "line": 7},
    ]
    assert by_code["FWD002"]["related"] == [
        {"message": "ddp set up with DistributedDataParallel: does not register generate", "path": "train.py",
         "line": 7}]

    log = json.loads(run_cli(root, "--no-cache", "--format", "sarif", ".").stdout)
    results = {r["ruleId"]: r for r in log["runs"][0]["results"]}
    [flow] = results["FWD001"]["codeFlows"]
    [thread] = flow["threadFlows"]
    flow = [(step["location"]["message"]["text"], step["location"]["physicalLocation"]["region"])
            for step in thread["locations"]]
    assert flow == [("generate", {"startLine": 13, "startColumn": 9}),
                    ("self(...)", {"startLine": 14, "startColumn": 16})]
    related = results["FWD001"]["relatedLocations"]
    assert [(r["id"], r["message"]["text"], r["physicalLocation"]["artifactLocation"]["uri"],
             r["physicalLocation"]["region"]) for r in related] == [
        (0, "ddp set up with DDP: registers generate", "test_model.py", {"startLine": 8}),
        (1, "ddp set up with DDP: does not register generate", "train.py", {"startLine": 7})]


def test_a_step_without_a_line_says_so(tmp_path: Path) -> None:
    """A function's summary read to follow a call keeps no lines: the step has its file, not a
    made-up place (JSON: no ``line``; SARIF: no region)."""
    work = tmp_path / "super_across_files"
    shutil.copytree(FIXTURES / "fwd001" / "super_across_files", work)
    _, payload = cli_json(work, "--no-cache", ".")
    [found] = [d for d in payload["diagnostics"] if d["symbol"] == "Actor.act"]
    assert found["steps"][-1] == {"message": "encoder(...)", "path": "agents/base.py"}
    log = json.loads(run_cli(work, "--no-cache", "--format", "sarif", ".").stdout)
    [result] = [r for r in log["runs"][0]["results"] if r["ruleId"] == "FWD001"]
    last = result["codeFlows"][0]["threadFlows"][0]["locations"][-1]["location"]
    assert "region" not in last["physicalLocation"] and last["message"]["text"] == "encoder(...)"
