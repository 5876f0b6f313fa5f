"""``--format sarif``: the analysis as a SARIF 2.1.0 log (OASIS), for GitHub code scanning and other viewers.

One run; ``tool.driver.rules`` lists every rule of the registry (``id`` = code, ``name`` = short
name, ``shortDescription``/``fullDescription``/``help`` from the rule's docstring, see
``rule_docs``), so ``ruleIndex`` is stable across runs whatever is selected. Each finding is a
result at level ``error``, its message the text format's (``message [short-name]``), at a 1-based
``startLine``/``startColumn`` (columns in Unicode code points, as Python counts them:
``columnKind``), with the method or call it names as a logical location. Its evidence chain (``Diagnostic.steps``)
is a ``codeFlows`` entry (one thread flow, one location per step, each with what happens there) and
the set-up sites it names are ``relatedLocations``; a step whose line is not known (a file read only
to resolve names) has no region. Paths under the working
directory are URIs relative to ``%SRCROOT%``, which ``originalUriBaseIds`` resolves to the working
directory; other paths are absolute ``file:`` URIs.
A file that could not be read or parsed is a ``toolExecutionNotification`` of level ``error`` and
makes the invocation's ``executionSuccessful`` false.

``tests/test_output_formats.py`` validates the output against the OASIS schema as shipped by a
pinned PyPI package (never a copy in this repository). Measured on ``fixtures/fwd001`` (111
findings): a 147 KB log, 26 KB of it the rule catalogue with the full help texts (once per log);
the schema check takes 0.14 s.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Optional
from urllib.parse import quote

from lint_rules import __version__, rule_docs, rules
from lint_rules.diagnostics import Diagnostic, FileError, Step, below
from lint_rules.engine import Result
from lint_rules.report import finding_text

SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
SRCROOT = "%SRCROOT%"


def artifact_location(path: str, cwd: Path) -> dict[str, Any]:
    """A relative URI against ``%SRCROOT%`` for a path under ``cwd``, else an absolute ``file:`` URI.
    Bytes a file name cannot encode (surrogate escapes) are percent-encoded as the raw bytes."""
    relative = below(path, str(cwd))
    if relative is None:
        return {"uri": Path(os.path.abspath(os.path.join(cwd, path))).as_uri()}
    return {"uri": quote(os.fsencode(relative), safe="/"), "uriBaseId": SRCROOT}


def _rule(rule: Any) -> dict[str, Any]:
    return {
        "id": rule.CODE,
        "name": rule.NAME,
        "shortDescription": {"text": rule_docs.summary(rule)},
        "fullDescription": {"text": rule_docs.description(rule)},
        "help": {"text": rule_docs.documentation(rule)},
        "defaultConfiguration": {"level": "error"},
    }


def _place(step: Step, cwd: Path) -> dict[str, Any]:
    """A step or related place as a SARIF location: no region where its line is not known, no
    physical location where its file is not."""
    found: dict[str, Any] = {"message": {"text": step.what}}
    if step.path:
        physical: dict[str, Any] = {"artifactLocation": artifact_location(step.path, cwd)}
        if step.line:
            physical["region"] = {"startLine": step.line, **({"startColumn": step.col + 1} if step.col >= 0 else {})}
        found["physicalLocation"] = physical
    return found


def _result(diagnostic: Diagnostic, index: dict[str, int], cwd: Path) -> dict[str, Any]:
    location: dict[str, Any] = {"physicalLocation": {
        "artifactLocation": artifact_location(diagnostic.path, cwd),
        "region": {"startLine": diagnostic.line, "startColumn": diagnostic.col + 1},
    }}
    if diagnostic.symbol:
        location["logicalLocations"] = [{"fullyQualifiedName": diagnostic.symbol}]
    result: dict[str, Any] = {"ruleId": diagnostic.code, "level": diagnostic.severity,
                              "message": {"text": finding_text(diagnostic)}, "locations": [location]}
    if diagnostic.steps:  # the chain, which viewers (GitHub code scanning) show step by step
        flow = [{"location": _place(step, cwd)} for step in diagnostic.steps]
        result["codeFlows"] = [{"threadFlows": [{"locations": flow}]}]
    if diagnostic.related:  # the set-up sites the message is about
        result["relatedLocations"] = [{"id": i, **_place(step, cwd)} for i, step in enumerate(diagnostic.related)]
    if diagnostic.code in index:
        result["ruleIndex"] = index[diagnostic.code]
    if diagnostic.help:  # the rule's help says it in general; this finding's, in its own names
        result["properties"] = {"help": diagnostic.help}
    return result


def _notification(error: FileError, cwd: Path) -> dict[str, Any]:
    return {"level": "error", "message": {"text": error.message},
            "locations": [{"physicalLocation": {"artifactLocation": artifact_location(error.path, cwd)}}]}


def as_sarif(result: Result, cwd: Optional[Path] = None) -> str:
    """The SARIF 2.1.0 log of one analysis (``cwd``: what relative paths are relative to)."""
    cwd = Path(os.path.abspath(cwd or os.getcwd()))
    catalogue = list(rules.RULES)
    index = {rule.CODE: i for i, rule in enumerate(catalogue)}
    invocation: dict[str, Any] = {"executionSuccessful": not result.errors}
    if result.errors:
        invocation["toolExecutionNotifications"] = [_notification(e, cwd) for e in result.errors]
    log = {
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": "fwdlint", "version": __version__, "semanticVersion": __version__,
                                "rules": [_rule(rule) for rule in catalogue]}},
            "invocations": [invocation],
            "originalUriBaseIds": {SRCROOT: {"uri": cwd.as_uri().rstrip("/") + "/"}},
            "columnKind": "unicodeCodePoints",
            "results": [_result(d, index, cwd) for d in result.diagnostics],
        }],
    }
    return json.dumps(log, indent=2) + "\n"
