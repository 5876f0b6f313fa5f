"""``--format json --fix-edits``: each finding ``--fix`` would fix carries the edits it would make
(issue 35, item 3). The distinct edits of all findings, applied to the files as they were, must
give exactly the bytes ``--fix`` writes: over every fixer's before/after pair
(``fixtures/<rule>/fix/``, the cases ``tests/test_fix_pairs.py`` checks ``--fix`` on), and through
the CLI on the demo project, both fix styles. The edits are applied here by a reader of the
schema's words alone (rows and 1-based columns in code points of the file's decoded text)."""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import tomllib
from pathlib import Path

import pytest
from fixture_cases import FIXTURES, run_cli
from test_fix_pairs import CASES, _copy, _id, _tree

from lint_rules import report, run_record
from lint_rules.discover import python_files
from lint_rules.engine import Run, analyse
from lint_rules.fix import edits as fix_edits
from lint_rules.settings import Config
from lint_rules.source import source_encoding

_LINES = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


def _schema_errors(document: dict) -> list[str]:
    if sys.version_info < (3, 11):
        pytest.skip("the pinned jsonschema needs Python 3.11+")
    import jsonschema

    import lint_rules

    schema = json.loads((Path(lint_rules.__file__).parent / "report.schema.json").read_text())
    return [error.message for error in jsonschema.Draft202012Validator(schema).iter_errors(document)]


def _applied(root: Path, payload: dict) -> int:
    """Apply every distinct edit of the report to the files under ``root``; how many there were."""
    distinct = {(e["path"], e["location"]["row"], e["location"]["column"], e["end_location"]["row"],
                 e["end_location"]["column"], e["content"])
                for d in payload["diagnostics"] for e in d.get("fix", {}).get("edits", [])}
    for path in {edit[0] for edit in distinct}:
        data = (root / path).read_bytes()
        encoding = source_encoding(data)
        text = data.decode(encoding, "surrogateescape")
        starts = [0]
        for line in _LINES.findall(text):
            starts.append(starts[-1] + len(line))

        def offset(row: int, column: int) -> int:
            return starts[row - 1] + column - 1 if row <= len(starts) else len(text)

        ordered = sorted((edit for edit in distinct if edit[0] == path), reverse=True)
        for _, row, column, end_row, end_column, content in ordered:  # from the end: offsets stay valid
            text = text[:offset(row, column)] + content + text[offset(end_row, end_column):]
        (root / path).write_bytes(text.encode(encoding, "surrogateescape"))
    return len(distinct)


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_json_edits_give_what_fix_writes(case: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``after`` is what ``--fix`` writes (``test_fix_pairs``); one run per process and case (a second
    analysis of a copy in the same process may read what the first one kept)."""
    code = case.parent.parent.name.upper()
    options = tomllib.loads((case / "options.toml").read_text()) if (case / "options.toml").is_file() else {}
    work = tmp_path / "work"
    given, after = _copy(case, work)
    monkeypatch.chdir(work)
    record = work / "record.json"
    observed = tuple(run_record.load(str(record))) if record.is_file() else ()
    run = Run(select=(code,), cache_dir=tmp_path / "cache", config=Config(observed=observed, record=str(record)))
    paths = list(python_files(given))
    result = analyse(paths, run)
    planned = fix_edits.planned(paths, run, result.diagnostics, style=options.get("style", "decorator"))
    payload = json.loads(report.as_json(result, planned))
    assert _schema_errors(payload) == []
    assert _applied(work, payload) > 0
    if after.is_file():
        assert (work / given[0]).read_bytes() == after.read_bytes()
    else:
        assert _tree(work) == _tree(after)
    assert all(not name.startswith(".fwdlint") for name in os.listdir(work))


@pytest.mark.parametrize("style", ["decorator", "call"])
def test_the_cli_edits_of_the_demo_project_give_what_fix_writes(style: str, tmp_path: Path) -> None:
    edited, fixed = tmp_path / "edited", tmp_path / "fixed"
    for work in (edited, fixed):
        shutil.copytree(FIXTURES / "demo_project", work, ignore=shutil.ignore_patterns(".fwdlint_cache"))
    proc = run_cli(edited, "--format", "json", "--fix-edits", "--fix-style", style, ".")
    assert proc.returncode == 1, proc.stderr
    payload = json.loads(proc.stdout)
    assert _schema_errors(payload) == []
    with_fix = [d for d in payload["diagnostics"] if "fix" in d]
    assert with_fix and all(d["fix"]["edits"] for d in with_fix)
    assert _applied(edited, payload) > 0
    assert run_cli(fixed, "--fix", "--fix-style", style, ".").returncode in (0, 1)
    assert _tree(edited) == _tree(fixed)
    # nothing was written by the check run itself: the edits were computed on the side
    plain = json.loads(run_cli(fixed, "--format", "json", "--fix-edits", "--fix-style", style, ".").stdout)
    assert all("fix" not in d for d in plain["diagnostics"])  # fixed already: nothing left to edit


def test_one_findings_edits_fix_it_with_the_import_it_needs(tmp_path: Path) -> None:
    """Two unmarked methods in one file: each carries its own decorator and the shared import."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "m.py").write_text("import torch.nn as nn\n\n\nclass M(nn.Module):\n"
                                   "    def forward(self, x):\n        return x\n\n"
                                   "    def gen(self, x):\n        return self(x)\n\n"
                                   "    def sample(self, x):\n        return self(x)\n")
    proc = run_cli(tmp_path, "--format", "json", "--fix-edits", "--no-cache", "m.py")
    gen, sample = json.loads(proc.stdout)["diagnostics"]

    def insertion(row: int, content: str) -> dict:
        return {"path": "m.py", "content": content, "location": {"row": row, "column": 1},
                "end_location": {"row": row, "column": 1}}

    imports = insertion(2, "from runtime_shim import forward_entry\n")
    assert gen["fix"]["edits"] == [imports, insertion(8, "    @forward_entry\n")]
    assert sample["fix"]["edits"] == [imports, insertion(11, "    @forward_entry\n")]


def test_fix_edits_is_for_a_json_check(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text("x = 1\n")
    for args in (("--format", "sarif"), ("--diff", "--format", "json"), ()):
        proc = run_cli(tmp_path, "--fix-edits", *args, "m.py")
        assert proc.returncode == 2 and "--fix-edits" in proc.stderr, args
