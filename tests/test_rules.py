"""The rule interface (``lint_rules/rules/base.py``): every rule module is complete, codes and
names are unique, and each rule's own VALID/INVALID examples (Fixit's shape) hold through the
CLI and through flake8, with message and position checked."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from fixture_cases import check_reported, cli_json, expectations, flake8_rows, run_flake8

from lint_rules.rules import NAMES, RULES, by_code
from lint_rules.rules.base import Invalid, Valid

EXAMPLES = [(rule, case) for rule in RULES for case in (*rule.VALID, *rule.INVALID)]
#: ``FWD001-invalid-2``: the rule, the kind of example and its place among them (1-based)
EXAMPLE_IDS = [f"{rule.CODE}-{kind}-{number}" for rule in RULES
               for kind, cases in (("valid", rule.VALID), ("invalid", rule.INVALID))
               for number in range(1, len(cases) + 1)]


def test_codes_and_names_are_unique_and_well_formed() -> None:
    codes = [rule.CODE for rule in RULES]
    names = [rule.NAME for rule in RULES]
    assert len(set(codes)) == len(codes) and len(set(names)) == len(names)
    for rule in RULES:
        assert rule.CODE[:3] == "FWD" and rule.CODE[3:].isdigit() and len(rule.CODE) == 6
        assert rule.NAME == rule.NAME.lower() and " " not in rule.NAME
        assert by_code(rule.CODE) is rule and by_code(rule.NAME) is rule
        assert NAMES[rule.CODE] == rule.NAME  # the registry's name, which reports use
        assert rule.__name__.rpartition(".")[2].startswith(rule.CODE.lower() + "_")


def test_every_rule_is_complete() -> None:
    for rule in RULES:
        assert rule.__doc__ and len(rule.__doc__) > 500 and rule.__doc__.startswith(f"{rule.CODE} {rule.NAME}")
        assert rule.VALID and rule.INVALID
        assert all(isinstance(case, Valid) and not expectations(case.code, "x") for case in rule.VALID)
        assert all(isinstance(case, Invalid) and expectations(case.code, "x") for case in rule.INVALID)
        assert callable(rule.check)
        options = getattr(rule, "FIX_OPTIONS", {})
        assert not options or callable(getattr(rule, "fix", None)), f"{rule.CODE}: options without a fix"
        assert all(isinstance(choices, tuple) and choices for choices in options.values()), rule.CODE


OBSERVED = re.compile(r"#\s*observed:\s*(?P<cls>[\w.]+)\.(?P<method>\w+)")


def _record(code: str, directory: Path) -> tuple[list[str], list[str]]:
    """An example's ``# observed: Class.method`` comments as the record of a test run that met each
    (unmarked, under DDP); the CLI's and flake8's options that read it."""
    entries = [{"class": f"example.{m['cls']}", "method": m["method"], "marked": False, "wrapper": "ddp",
                "defined_in": f"example.{m['cls']}", "file": "example.py", "line": number, "site": "test_example.py:9",
                "test": "test_example.py::test_run", "wrapped_at": "test_example.py:8", "count": 1}
               for number, line in enumerate(code.splitlines(), 1) for m in OBSERVED.finditer(line)]
    if not entries:
        return [], []
    (directory / "record.json").write_text(json.dumps({"format": "fwdlint-record", "schema": 1, "entries": entries}))
    return ["--from-record", "record.json"], ["--fwd-from-record", "record.json"]


@pytest.mark.parametrize("rule,case", EXAMPLES, ids=EXAMPLE_IDS)
def test_example_through_cli_and_flake8(rule, case, tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "example.py").write_text(case.code.lstrip("\n"), encoding="utf-8")
    expected = [e for e in expectations(case.code.lstrip("\n"), "example.py") if e.code == rule.CODE]
    cli_record, flake8_record = _record(case.code.lstrip("\n"), tmp_path)
    code, payload = cli_json(tmp_path, "--select", rule.CODE, *cli_record, "example.py")
    assert payload["errors"] == []
    reported = [(d["path"], d["line"], d["col"], d["code"], d["message"], d["symbol"], d["help"])
                for d in payload["diagnostics"]]
    check_reported(tmp_path, expected, reported)
    assert code == (1 if expected else 0)
    rows = flake8_rows(run_flake8(tmp_path, "--select", rule.CODE, *flake8_record, "example.py"))
    assert sorted(rows) == sorted((p, r, c, code, m) for p, r, c, code, m, *_ in reported)


def test_pre_commit_hooks_name_what_they_run() -> None:
    """``.pre-commit-hooks.yaml``: the check hook names every rule, the fix hook every rule with a
    fix (from the registry), and neither claims to be one rule."""
    import yaml  # pre-commit's own dependency

    from lint_rules.rules import CODES, RULES

    hooks_file = Path(__file__).resolve().parent.parent / ".pre-commit-hooks.yaml"
    hooks = {hook["id"]: hook for hook in yaml.safe_load(hooks_file.read_text())}
    fixable = [rule.CODE for rule in RULES if getattr(rule, "fix", None) is not None]
    assert set(hooks) == {"fwdlint", "fwdlint-fix"}
    assert all(code in hooks["fwdlint"]["description"] for code in CODES)
    assert all(code in hooks["fwdlint-fix"]["description"] for code in fixable)
    assert not any(code in hook["name"] for hook in hooks.values() for code in CODES)


def test_a_file_added_to_the_view_is_seen_by_what_fwd001_derived() -> None:
    """FWD001 keeps, per method name, whether the project calls it only from forwards
    (``ProjectIndex.derived``): a file added to the view (the flake8 plugin adds them between
    checks) changes the answer."""
    from lint_rules.engine import Run, Session, check_file
    from lint_rules.facts.extract import extract
    from lint_rules.project import ProjectIndex
    from lint_rules.settings import Config

    model = ("import torch.nn as nn\n\n\nclass M(nn.Module):\n    def gen(self, x):\n        return self(x)\n\n"
             "    def forward(self, x):\n        return self.gen(x)\n")
    view = ProjectIndex(config=Config(), loader=Session(Run(cache=False))._load)  # reads torch's files
    facts = extract(model, "m.py", "m")
    view.add(facts)
    before = check_file(view, facts, ("FWD001",), ())
    assert [d.code for d in before] == ["FWD001"] and "only from M.forward" in before[0].message
    view.add(extract("def run(m, x):\n    return m.gen(x)\n", "run.py", "run"))
    after = check_file(view, facts, ("FWD001",), ())
    assert [d.code for d in after] == ["FWD001"] and "only from M.forward" not in after[0].message


def test_subclasses_found_before_a_module_read_include_the_classes_it_brings(tmp_path: Path) -> None:
    """``ProjectIndex.subclasses`` keeps its answer while no class has been indexed since (it is asked
    for every method of a big hierarchy); a module read later to resolve a name can bring a class
    with a base of that name, and then the answer grows. An unrelated class keeps the same tuple
    (``computation._overriders`` relies on it)."""
    from lint_rules.facts.extract import extract
    from lint_rules.project import ClassRef, ProjectIndex
    from lint_rules.settings import Config

    sources = {"base": "class Base:\n    pass\n", "a": "from base import Base\n\n\nclass A(Base):\n    pass\n",
               "other": "class Other(Unrelated):\n    pass\n", "b": "import base\n\n\nclass B(base.Base):\n    pass\n"}
    for name, text in sources.items():
        (tmp_path / f"{name}.py").write_text(text)

    def load(path: Path, module: str, is_package: bool):
        return extract(path.read_text(), str(path), module, is_package)

    view = ProjectIndex(config=Config(), loader=load, roots=[tmp_path])
    for name in ("base", "a"):
        view.add(load(tmp_path / f"{name}.py", name, False))
    base = ClassRef(view.module("base"), view.module("base").class_named("Base"))
    first = view.subclasses(base)
    assert [ref.cls.qualname for ref in first] == ["A"] and view.subclasses(base) is first
    view.module("other")  # a class indexed under another base name: the answer holds, the same tuple
    assert view.subclasses(base) is first
    view.module("b")
    assert [ref.cls.qualname for ref in view.subclasses(base)] == ["A", "B"]
