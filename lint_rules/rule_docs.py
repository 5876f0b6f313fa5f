"""What the output formats say about a rule: its short name and its documentation.

A rule module's docstring is its user documentation (``rules/base.py``); its first paragraph is
``CODE name: summary``. ``--explain`` prints the whole docstring, SARIF takes the summary
(``shortDescription``), the paragraph after it (``fullDescription``) and the whole text (``help``),
and the text, GitHub, JSON and SARIF reports show the short name next to the code. Everything
here reads the registry (``rules.RULES``), so a new rule needs nothing in this module.
"""

from __future__ import annotations

import re
from types import ModuleType
from typing import Optional

from lint_rules import rules


def rule_for(code_or_name: str) -> Optional[ModuleType]:
    """The rule with this code (any case: ``fwd001``) or short name, if any."""
    value = code_or_name.strip()
    return rules.by_code(value.upper()) or rules.by_code(value.lower())


def name_of(code: str) -> str:
    """The short name of ``code`` (``unmarked-forward-entry``), or ``""`` for a code that is no rule."""
    return rules.NAMES.get(code, "")


def documentation(rule: ModuleType) -> str:
    """The rule's documentation as ``--explain`` prints it (its module docstring, dedented)."""
    import inspect  # here: a warm run prints rule names, never the docs (its import is ~3 ms)

    return inspect.cleandoc(rule.__doc__ or "")


def _paragraphs(rule: ModuleType) -> list[str]:
    return [" ".join(p.split()) for p in re.split(r"\n\s*\n", documentation(rule)) if p.strip()]


def summary(rule: ModuleType) -> str:
    """The one-sentence summary: the first paragraph without its ``CODE name:`` head."""
    first = _paragraphs(rule)[0]
    head = f"{rule.CODE} {rule.NAME}:"
    return first[len(head):].strip() if first.startswith(head) else first


def description(rule: ModuleType) -> str:
    """Why it matters: the paragraph after the summary (the summary again if there is none)."""
    paragraphs = _paragraphs(rule)
    text = paragraphs[1] if len(paragraphs) > 1 else summary(rule)
    return text[:-1] if text.endswith("::") else text  # reST's literal-block marker: a plain colon
