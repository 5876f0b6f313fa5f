"""Output formats. The JSON schema (version 1) is read by other tools: keep it stable."""

from __future__ import annotations

import json

from lint_rules.engine import Result

JSON_VERSION = 1


def text(result: Result) -> tuple[str, str]:
    """(stdout, stderr): flake8-style ``path:line:col: CODE message`` lines, 1-based columns."""
    out = "".join(f"{d.path}:{d.line}:{d.col + 1}: {d.code} {d.message}\n" for d in result.diagnostics)
    err = "".join(f"{e.path}: error: {e.message}\n" for e in result.errors)
    return out, err


def as_json(result: Result) -> str:
    payload = {
        "version": JSON_VERSION,
        "diagnostics": [
            {"path": d.path, "line": d.line, "col": d.col + 1, "code": d.code, "message": d.message,
             "symbol": d.symbol}
            for d in result.diagnostics
        ],
        "errors": [{"path": e.path, "message": e.message} for e in result.errors],
    }
    return json.dumps(payload, indent=2) + "\n"
