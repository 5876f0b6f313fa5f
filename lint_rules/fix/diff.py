"""``--diff``: a fix as a unified diff that ``git apply`` and ``patch -p1`` take, made of the
files' own bytes."""

from __future__ import annotations

import difflib
import os
import re
from pathlib import Path

from lint_rules.diagnostics import below
from lint_rules.fix.result import FileFix

# a diff's lines end at LF only, as git and patch read them: a CR (CRLF, or a lone-CR file, which is
# then one line) stays part of its line, else the context would not match what they read
_DIFF_LINES = re.compile(rb"[^\n]*\n|[^\n]+$")
_C_ESCAPES = {0x07: b"\\a", 0x08: b"\\b", 0x09: b"\\t", 0x0A: b"\\n", 0x0B: b"\\v", 0x0C: b"\\f",
              0x0D: b"\\r", 0x22: b'\\"', 0x5C: b"\\\\"}


def diff_name(path: str) -> str:
    """The path a diff header names: relative to the working directory, so that ``git apply`` and
    ``patch -p1`` run where fwdlint ran take the diff, however the file was named (``/abs/m.py``,
    ``../proj/m.py``, ``$PWD/m.py`` through a symlinked directory). A file outside the working
    directory gets a ``../`` path: ``git apply`` takes it with ``--unsafe-paths`` (its switch for
    paths outside the working area), GNU patch refuses it; an absolute name (``a//abs/m.py``, what
    was printed before) is refused by both."""
    try:
        cwd = os.getcwd()
    except OSError:  # the working directory is gone: nothing is relative to it
        return Path(os.path.abspath(path)).as_posix()
    lexical = os.path.abspath(path)
    # the names as given first (a symlinked file keeps its own name), then with symlinks resolved
    # (the shell's $PWD may name the working directory through a symlink, getcwd() never does)
    for base, target in ((cwd, lexical), (os.path.realpath(cwd), os.path.realpath(lexical))):
        try:
            relative = below(target, base)
        except ValueError:  # another drive (Windows)
            return Path(lexical).as_posix()
        if relative is not None:
            return relative
    return Path(os.path.relpath(lexical, cwd)).as_posix()


def unified_diff(file: FileFix) -> bytes:
    """``--- a/path`` / ``+++ b/path`` (``diff_name``) so ``git apply`` and ``patch -p1`` take the output.

    Made of the files' own bytes: re-encoding the lines (a latin-1 file, a UTF-8 BOM on line 1)
    would give context lines that no longer match the file, and the patch would not apply."""
    name = diff_name(file.path).encode("utf-8", "surrogateescape")
    old = _DIFF_LINES.findall(file.old)
    new = _DIFF_LINES.findall(file.new)
    lines = []
    for line in difflib.diff_bytes(difflib.unified_diff, old, new, header_name(b"a/" + name),
                                   header_name(b"b/" + name)):
        lines.append(line if line.endswith(b"\n") else line + b"\n\\ No newline at end of file\n")
    return b"".join(lines)


def header_name(name: bytes) -> bytes:
    """A ``---`` / ``+++`` name as git writes it: C-quoted (``"a/x\\ty.py"``) if it holds a control
    character, ``"`` or ``\\``, which git apply and GNU patch unquote; else as is, with a tab after a
    name holding a space (GNU patch ends an unquoted name at a tab, and otherwise guesses)."""
    if not any(byte < 0x20 or byte in (0x22, 0x5C, 0x7F) for byte in name):
        return name + b"\t" if b" " in name else name
    quoted = (_C_ESCAPES.get(byte) or (b"\\%03o" % byte if byte < 0x20 or byte == 0x7F else bytes([byte]))
              for byte in name)
    return b'"' + b"".join(quoted) + b'"'
