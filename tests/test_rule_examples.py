"""Each rule's own VALID / INVALID examples (Fixit's shape), through extract -> index -> rule."""

from __future__ import annotations

import pytest

from lint_rules.engine import check_file, new_index
from lint_rules.extract import extract
from lint_rules.project import Config
from lint_rules.rules import RULES

EXAMPLES = [(rule, case, kind) for rule in RULES for kind in ("VALID", "INVALID") for case in getattr(rule, kind)]


@pytest.mark.parametrize("rule,case,kind", EXAMPLES, ids=lambda v: getattr(v, "CODE", None) or "")
def test_rule_examples(rule, case, kind) -> None:
    facts = extract(case.code, "example.py", "example")
    index = new_index(Config())
    index.add(facts)
    symbols = [d.symbol for d in check_file(index, facts, (rule.CODE,), ())]
    assert symbols == (list(case.symbols) if kind == "INVALID" else [])


def test_every_rule_has_examples_and_docs() -> None:
    for rule in RULES:
        assert rule.VALID and rule.INVALID and len(rule.__doc__) > 500
