"""Reading Python source as the interpreter does, and saying in one line why a file cannot be read."""

from __future__ import annotations

import io
import os
import re
import sys
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:
    import ast

ONLY_AST = 0x400  # ast.PyCF_ONLY_AST: ast's import is ~2 ms, and a run that reuses stored findings parses nothing

#: Text that stands in for a file in this process: an editor's buffer given on standard input
#: (``fwdlint --stdin-filename m.py -``, ``flake8 --stdin-display-name m.py -``) is read instead of the
#: file on disk by everything that reads source (``read_source``), so the file is linted, put in its
#: project's view and fixed as the editor has it. Keyed by ``os.path.realpath``.
OVERLAY: dict[str, bytes] = {}


def read_source(path: str) -> bytes:
    """The bytes of the file at ``path``, or of the text standing in for it (``OVERLAY``)."""
    if OVERLAY:
        found = OVERLAY.get(os.path.realpath(path))
        if found is not None:
            return found
    return Path(path).read_bytes()


#: Python's line ends: ``\n``, ``\r\n`` and a lone ``\r``, never ``str.splitlines``' extra ones
#: (\f, \v, \x1c-\x1e, \x85, U+2028/9), which would move every later line number.
LINE_END = re.compile(r"\r\n|\r|\n")


def split_lines(text: str) -> list[str]:
    """``text`` split into lines as Python's tokenizer counts them (line ends dropped)."""
    return text.split("\n") if "\r" not in text else LINE_END.split(text)


def line_breaks(text: str, start: int = 0, end: int | None = None) -> int:
    r"""Python's line ends in ``text[start:end]``: ``\n``, ``\r\n`` and a lone ``\r`` (old Mac files
    import fine), never ``str.splitlines``' extra ones (\f, \v, U+2028 ...)."""
    end = len(text) if end is None else end
    return text.count("\n", start, end) + text.count("\r", start, end) - text.count("\r\n", start, end)


def line_start(text: str, offset: int) -> int:
    """Offset of the first character of the line holding ``offset``."""
    return max(text.rfind("\n", 0, offset), text.rfind("\r", 0, offset)) + 1


def source_encoding(data: bytes) -> str:
    """The encoding Python would read ``data`` with (BOM, encoding cookie, default utf-8)."""
    import tokenize  # here, as ast below: a run that reuses stored findings decodes no file

    return tokenize.detect_encoding(io.BytesIO(data).readline)[0]


def decode(data: bytes) -> str:
    """Decode Python source as ``import`` would: bytes that are not text in the file's encoding
    are refused, unless CPython's compiler accepts them, which it does inside comments
    (``# caf\\xe9`` in a UTF-8 file imports; ``python file.py`` refuses it). Those become U+FFFD:
    a comment ends its line, so no position of code moves."""
    encoding = source_encoding(data)
    try:
        return data.decode(encoding)
    except UnicodeDecodeError:
        try:
            compile(data, "<source>", "exec", flags=ONLY_AST, dont_inherit=True)
            accepted = True
        except (SyntaxError, ValueError, MemoryError, RecursionError):
            accepted = False
        if not accepted:
            raise  # the decoding error
        return data.decode(encoding, "replace")


#: The recursion limit a Python program starts with: compiling under it is what ``python file.py``
#: and ``import`` do (3.11 builds the AST within the Python recursion limit), whatever limit the
#: analysis runs with.
PYTHON_RECURSION_LIMIT = 1000


_GREW = 64 << 20  # bytes


def _peak_memory() -> int:
    """The process's peak resident memory in bytes (0 where ``resource`` is missing)."""
    try:
        import resource
    except ImportError:  # Windows
        return 0
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * (1 if sys.platform == "darwin" else 1024)


def _room_for(size: int) -> bool:
    """Can the process still map ``size`` bytes? Address space only: no page is touched."""
    import mmap

    try:
        mmap.mmap(-1, size).close()
    except (MemoryError, OSError):
        return False
    return True


def python_parse(source: str, path: str) -> tuple[Optional[ast.Module], Optional[SyntaxError]]:
    """CPython's own tree of ``source``, or its verdict against it, as a program gets it: nesting
    its parser gives up on (``MemoryError``, ``RecursionError``) is refused too."""
    limit = sys.getrecursionlimit()
    try:
        sys.setrecursionlimit(PYTHON_RECURSION_LIMIT)
    except RecursionError:  # called deeper than that already: judge under the current limit
        pass
    peak = _peak_memory()
    try:
        with warnings.catch_warnings():  # the file's own SyntaxWarnings ("invalid escape") are not ours to print
            warnings.simplefilter("ignore")
            # a text still holding its UTF-8 BOM (the bytes' decoder drops it) is parsed without
            text = source[1:] if source.startswith("\ufeff") else source
            return compile(text, path, "exec", flags=ONLY_AST, dont_inherit=True), None
    except (MemoryError, RecursionError) as error:
        # CPython's parser says MemoryError both when nesting exceeds its stack and when memory runs
        # out; only the second makes the process grow (by hundreds of MiB: the tree of a 2 MB file),
        # or leaves it no room to (a worker's address-space limit lower than that: ``workers``)
        if isinstance(error, MemoryError) and (_peak_memory() - peak > _GREW or not _room_for(_GREW)):
            raise
        return None, SyntaxError(f"nested too deeply for Python's parser ({type(error).__name__})", (path, 1, 1, ""))
    except (SyntaxError, ValueError) as error:
        if isinstance(error, SyntaxError) and error.lineno is not None:
            return None, error
        offset = source.find("\0")  # NUL bytes: Python names no position (3.11: ValueError or none)
        line = line_breaks(source, 0, offset) + 1 if offset >= 0 else 1
        col = offset - line_start(source, offset) + 1 if offset >= 0 else 0
        message = error.msg if isinstance(error, SyntaxError) else str(error)
        return None, SyntaxError(message, (path, line, col, ""))
    finally:
        sys.setrecursionlimit(limit)


def python_syntax_error(source: str, path: str) -> Optional[SyntaxError]:
    """CPython's own verdict on ``source`` (its parser only, about 9x faster than LibCST's)."""
    return python_parse(source, path)[1]


def one_line(error: BaseException, source: Optional[str] = None, path: str = "") -> str:
    """A read or parse failure as one line. A LibCST parse failure is checked against CPython's
    parser, so the position is where Python sees the error, and valid code that only LibCST
    rejects is said to be so."""
    cst = sys.modules.get("libcst")  # a LibCST error needs LibCST loaded; a warm run never loads it
    if cst is not None and isinstance(error, cst.ParserSyntaxError):
        python = python_syntax_error(source, path) if source is not None else None
        if source is not None and python is None:
            version = f"{sys.version_info[0]}.{sys.version_info[1]}"
            # LibCST's native parser puts raw_line one line late; its message has the right place
            at = re.search(r"error at (\d+):(\d+)", error.message or "")
            line, column = (int(at[1]), int(at[2])) if at else (error.raw_line, error.raw_column)
            return (f"LibCST cannot parse this file (Python {version} can): line {line}, "
                    f"column {column}: {error.message.splitlines()[0] if error.message else ''}")
        if python is not None:
            error = python
        else:
            return f"syntax error at line {error.raw_line}, column {error.raw_column}: {error.message}"
    if isinstance(error, SyntaxError) and error.lineno is not None:
        return f"syntax error at line {error.lineno}, column {error.offset or 0}: {error.msg}"
    if isinstance(error, UnicodeDecodeError):
        return f"cannot decode: {error.reason} at byte {error.start}"
    if isinstance(error, (SyntaxError, LookupError)):  # from tokenize.detect_encoding
        return f"cannot decode: {error.msg if isinstance(error, SyntaxError) else error}"
    if isinstance(error, OSError):
        return f"cannot read: {error.strerror or error}"
    if isinstance(error, RecursionError):
        return "too deeply nested to analyse"
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"
