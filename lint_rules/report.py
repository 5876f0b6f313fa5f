"""Output formats. The JSON schema (version 1) is read by other tools: keep it stable."""

from __future__ import annotations

import json

from lint_rules.engine import Result

JSON_VERSION = 1


def shown(path: str) -> str:
    """A path as one line of text: control characters (a newline in a file name) escaped; bytes
    the terminal cannot encode are escaped by the streams (``cli`` sets ``backslashreplace``)."""
    if path.isprintable():
        return path
    return "".join(c if c.isprintable() else c.encode("unicode_escape", "backslashreplace").decode("ascii")
                   for c in path)


def text(result: Result) -> tuple[str, str]:
    """(stdout, stderr): flake8-style ``path:line:col: CODE message`` lines, 1-based columns."""
    out = "".join(f"{shown(d.path)}:{d.line}:{d.col + 1}: {d.code} {d.message}\n" for d in result.diagnostics)
    err = "".join(f"{shown(e.path)}: error: {e.message}\n" for e in result.errors)
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
        "stats": {"files_read_to_resolve_names": result.resolved_read,
                  "installed_files_read": result.installed_read},
    }
    return json.dumps(payload, indent=2) + "\n"
