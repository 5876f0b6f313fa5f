"""Output formats of ``fwdlint`` (check and fix runs), and writing them where ``--output-file`` says.

* ``text``: ``path:line:col: CODE message [short-name]`` per finding (1-based columns), with
  ``--show-source`` the source line, a caret under the column (flake8's layout) and ``help: ...``.
* ``json``: version 1, read by other tools: keep it stable (adding a field keeps the version).
  Each diagnostic carries the rule's short name in ``"name"``; ``message`` is the text the flake8
  plugin prints after the code (the fixture tests compare the two); ``help`` what to do about it;
  ``steps`` the evidence chain the message shows, located (``diagnostics.Step``), and ``related``
  the set-up sites it is about; with ``--fix-edits``, ``fix``: the edits ``--fix`` would make
  (``fix/edits.py``).
  ``lint_rules/report.schema.json`` (JSON Schema 2020-12, shipped in the package) describes it and the
  fix report (checked in ``tests/test_output_formats.py``).
* ``github``: GitHub Actions workflow commands (``::error file=...,line=...,col=...,title=FWD001::...``),
  escaped as the Actions toolkit does: ``%``, CR and LF in the message, also ``:`` and ``,`` in properties.
* ``sarif``: ``lint_rules/sarif.py``.

Per-file errors go to stderr as one line each in every format, and are also part of the json,
sarif and github output. ``write`` puts a report on stdout or, atomically, into a file.
"""

from __future__ import annotations

import collections
import json
import os
import stat
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Optional, Sequence, Union

from lint_rules.diagnostics import Diagnostic, FileError, Step, below, shown
from lint_rules.engine import Result
from lint_rules.rule_docs import name_of
from lint_rules.source import decode, split_lines

if TYPE_CHECKING:
    from lint_rules.fix.edits import Edit
    from lint_rules.fix.run import FixRun

JSON_VERSION = 1
FORMATS = ("text", "json", "github", "sarif")


def finding_text(diagnostic: Diagnostic) -> str:
    """``message [short-name]``: what the text and github formats print after the code."""
    name = name_of(diagnostic.code)
    return f"{diagnostic.message} [{name}]" if name else diagnostic.message


def error_lines(errors: Iterable[FileError]) -> str:
    return "".join(f"{shown(e.path)}: error: {e.message}\n" for e in errors)


def _source_lines(path: str) -> Optional[list[str]]:
    """The file's lines as Python splits them, or None if it can no longer be read."""
    try:
        with open(path, "rb") as handle:
            return split_lines(decode(handle.read()))
    except (OSError, UnicodeDecodeError, SyntaxError, LookupError):
        return None


def _caret(line: str, col: int) -> str:
    """flake8's ``--show-source``: the line, then a caret under the column (tabs kept, so it lines up)."""
    indent = "".join(c if c.isspace() else " " for c in line[:col])
    return f"{line}\n{indent}^\n"


def text(result: Result, show_source: bool = False) -> tuple[str, str]:
    """(stdout, stderr): flake8-style ``path:line:col: CODE message [name]`` lines, 1-based columns."""
    out = []
    sources: dict[str, Optional[list[str]]] = {}
    for d in result.diagnostics:
        out.append(f"{shown(d.path)}:{d.line}:{d.col + 1}: {d.code} {finding_text(d)}\n")
        if show_source:
            if d.path not in sources:
                sources[d.path] = _source_lines(d.path)
            lines = sources[d.path]
            if lines is not None and 0 < d.line <= len(lines):
                out.append(_caret(lines[d.line - 1], d.col))
            if d.help:
                out.append(f"help: {d.help}\n")
    return "".join(out), error_lines(result.errors)


def step_json(step: Step) -> dict[str, Any]:
    """A step of the chain, or a related place: what happens there; where, as far as it is known
    (no ``line``/``col`` for a step in a file read only to resolve names, no ``path`` if unknown)."""
    found: dict[str, Any] = {"message": step.what}
    if step.path:
        found["path"] = step.path
    if step.line:
        found["line"] = step.line
        if step.col >= 0:
            found["col"] = step.col + 1
    return found


def _diagnostic(d: Diagnostic) -> dict[str, Any]:
    return {"path": d.path, "line": d.line, "col": d.col + 1, "code": d.code, "name": name_of(d.code),
            "message": d.message, "help": d.help, "symbol": d.symbol, "severity": d.severity,
            "steps": [step_json(s) for s in d.steps], "related": [step_json(s) for s in d.related]}


def _edit_json(edit: "Edit") -> dict[str, Any]:
    return {"path": edit.path, "content": edit.content, "location": {"row": edit.start[0], "column": edit.start[1]},
            "end_location": {"row": edit.end[0], "column": edit.end[1]}}


def as_json(result: Result, fixes: Optional[Mapping[Diagnostic, Sequence["Edit"]]] = None) -> str:
    """``fixes``: the edits ``--fix`` would make for a finding (``fix.edits.planned``), as its ``fix``."""
    def diagnostic(d: Diagnostic) -> dict[str, Any]:
        found = _diagnostic(d)
        if fixes and fixes.get(d):
            found["fix"] = {"message": f"fwdlint --fix: {len(fixes[d])} edit(s)",
                            "edits": [_edit_json(edit) for edit in fixes[d]]}
        return found

    payload = {
        "version": JSON_VERSION,
        "diagnostics": [diagnostic(d) for d in result.diagnostics],
        "errors": [{"path": e.path, "message": e.message} for e in result.errors],
        "stats": {"files_read_to_resolve_names": result.resolved_read,
                  "installed_files_read": result.installed_read},
    }
    return json.dumps(payload, indent=2) + "\n"


def _escape_data(value: str) -> str:
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(value: str) -> str:
    return _escape_data(value).replace(":", "%3A").replace(",", "%2C")


def _command(properties: Sequence[tuple[str, object]], message: str, level: str = "error") -> str:
    props = ",".join(f"{key}={_escape_property(str(value))}" for key, value in properties)
    return f"::{level} {props}::{_escape_data(message)}\n"


def github(result: Result) -> str:
    """One ``::error`` (``::warning``) workflow command per finding, and one ``::error`` (file only) per
    file that could not be checked."""
    lines = [_command((("file", below(d.path) or d.path), ("line", d.line), ("col", d.col + 1), ("title", d.code)),
                      finding_text(d) + (f"\nhelp: {d.help}" if d.help else ""), d.severity)
             for d in result.diagnostics]
    lines += [_command((("file", below(e.path) or e.path), ("title", "fwdlint")), e.message) for e in result.errors]
    return "".join(lines)


def statistics(diagnostics: Iterable[Diagnostic], coverage: Optional[tuple[int, int]] = None) -> str:
    """flake8's ``--statistics`` layout, one line per code: ``count code short-name`` (flake8 shows the
    first message instead; ours name one method, so the rule's name is what describes the count);
    then, when counted, how many module classes were checked completely."""
    counts = collections.Counter(d.code for d in diagnostics)
    lines = "".join(f"{counts[code]:<5} {code} {name_of(code)}\n" for code in sorted(counts))
    if coverage is not None:
        lines += f"module classes: {coverage[0]:,} checked completely, {coverage[1]:,} partly unchecked (FWD005)\n"
    return lines


def fix_json(run: "FixRun", diff: bool) -> str:
    """The ``--fix`` / ``--diff`` outcome as JSON (same version and diagnostic fields as ``as_json``).

    ``files``: the files written (``--fix``) or that would change (``--diff``, with the unified diff
    as text in the file's own encoding; encode it back with that encoding for ``git apply``)."""
    from lint_rules.fix.diff import unified_diff
    from lint_rules.source import source_encoding

    files: dict[str, dict[str, Any]] = {}
    for file in run.changed:
        entry = files.setdefault(file.path, {"path": file.path, "written": not diff})
        if diff:
            encoding = source_encoding(file.old)
            entry["encoding"] = encoding
            entry["diff"] = unified_diff(file).decode(encoding, "surrogateescape")
    payload = {
        "version": JSON_VERSION,
        "mode": "diff" if diff else "fix",
        "fixed": [_diagnostic(d) for d in run.fixed],
        "not_fixed": [{**_diagnostic(u.diagnostic), "reason": u.reason} for u in run.unfixed],
        "files": list(files.values()),
        "errors": [{"path": e.path, "message": e.message} for e in run.errors],
    }
    return json.dumps(payload, indent=2) + "\n"


def write(report: Union[str, bytes], output_file: Optional[str], root: Optional[Path] = None) -> Optional[str]:
    """Put ``report`` on stdout, or replace ``output_file`` with it atomically (a temporary file in
    the same directory, then a rename: a reader never sees half a report, an old one survives a
    failure; never through a symlink out of ``root``, ``--project-root``, as ``--fix``). A path
    that is not a regular file (``/dev/null``, ``/dev/stdout``, a FIFO) is written to, never
    replaced. None, or the one-line reason it could not be written."""
    if output_file is None:
        if isinstance(report, bytes):
            sys.stdout.flush()
            sys.stdout.buffer.write(report)
            sys.stdout.buffer.flush()
        else:
            sys.stdout.write(report)
        return None
    from lint_rules.fix.atomic import atomic_write  # only when writing a file (tempfile & co.)

    data = report if isinstance(report, bytes) else report.encode("utf-8", "backslashreplace")
    try:
        if _is_stream(output_file):
            with open(output_file, "wb") as stream:
                stream.write(data)
        else:
            atomic_write(output_file, data, root=root)
    except OSError as error:
        return f"fwdlint: error: --output-file {shown(output_file)}: cannot write: {error.strerror or error}"
    return None


def _is_stream(path: str) -> bool:
    """A device, FIFO or socket: something to write to, not a file to replace."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))
