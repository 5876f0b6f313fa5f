"""The facts store: every caller gets a file's facts here, computed once per content.

Keyed by a hash of the file's bytes, its module name, the facts format, the tool version and the
facts code itself, so a moved, edited or differently packaged file is a different key and nothing
needs invalidating.
Persistent across runs in ``.fwdlint_cache/facts.sqlite`` under the project root (``--cache-dir``,
``--no-cache``; a file outside any project gets no cache unless ``--cache-dir`` asks for one).
Values are JSON (``facts.codec``), never pickle: a cache must not be a way to run
code. SQLite gives atomic writes and safe concurrent use (flake8 ``-j``, two terminals, pre-commit
while an editor lints); a write that cannot get the lock in time is skipped, not waited for. A
corrupt, truncated, foreign or old-format cache file is deleted and rebuilt; a cache directory
that cannot be created or written only means no cache. Neither is ever an error of the run.

A file the text prefilter rules out is still checked for syntax (CPython's parser), and that
verdict is cached too, so a given file with a syntax error is always reported.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import stat
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Optional, Sequence, Union

from lint_rules import __version__
from lint_rules.diagnostics import FileError
from lint_rules.facts import codec
from lint_rules.facts.model import FileFacts
from lint_rules.layout import module_name_for
from lint_rules.source import decode, one_line, python_syntax_error

CACHE_DIR_NAME = ".fwdlint_cache"
_DB_NAME = "facts.sqlite"


def _facts_code_digest() -> str:
    """A digest of the code that computes facts, so that an edited collector (a development
    checkout, an editable install) never meets facts its old version cached."""
    digest = hashlib.blake2b(digest_size=8)
    for path in sorted(Path(codec.__file__).parent.glob("*.py")):
        digest.update(path.read_bytes())
    return digest.hexdigest()


_SCHEMA = f"fwdlint-facts-{codec.FORMAT}-{__version__}-{_facts_code_digest()}"
_ERROR = "!"  # prefix of a cached error message

Outcome = Union[FileFacts, FileError]


class _Cache:
    """The SQLite file; every failure disables it for the rest of the run."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.db: Optional[sqlite3.Connection] = None
        try:
            self._open()
        except (OSError, sqlite3.Error):
            self._discard()
            try:
                self._open()
            except (OSError, sqlite3.Error):
                self.db = None

    def _open(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        ignore = self.directory / ".gitignore"
        if not ignore.exists():
            ignore.write_text("# Created by fwdlint.\n*\n", encoding="utf-8")
        db = sqlite3.connect(self.directory / _DB_NAME, timeout=2.0, isolation_level=None)
        self.db = db
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        row = db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
        if row is None:
            tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if tables - {"meta"}:
                raise sqlite3.DatabaseError("not a fwdlint cache")
            db.execute("CREATE TABLE IF NOT EXISTS facts (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            db.execute("INSERT OR IGNORE INTO meta VALUES ('schema', ?)", (_SCHEMA,))
        elif row[0] != _SCHEMA:
            raise sqlite3.DatabaseError("old cache format")

    def _discard(self) -> None:
        self.close()
        for suffix in ("", "-wal", "-shm"):
            try:
                os.unlink(self.directory / (_DB_NAME + suffix))
            except OSError:
                pass

    def close(self) -> None:
        if self.db is not None:
            try:
                self.db.close()
            except sqlite3.Error:
                pass
            self.db = None

    def get(self, key: str) -> Optional[str]:
        if self.db is None:
            return None
        try:
            row = self.db.execute("SELECT value FROM facts WHERE key = ?", (key,)).fetchone()
        except sqlite3.Error:
            self.db = None
            return None
        return row[0] if row else None

    def put(self, key: str, value: str) -> None:
        if self.db is None:
            return
        try:
            self.db.execute("INSERT OR REPLACE INTO facts VALUES (?, ?)", (key, value))
        except sqlite3.OperationalError:  # locked by another run for too long: skip this write
            pass
        except sqlite3.Error:
            self.db = None


class FactsStore:
    """Facts of files by path, computed at most once per content (per process, and per cache)."""

    def __init__(self, cache_dir: Optional[Path] = None) -> None:
        self.cache = _Cache(cache_dir) if cache_dir is not None else None
        self.memory: dict[tuple[str, bool], Outcome] = {}
        self.read: set[str] = set()  # paths this store read (for statistics)
        self.extracted = 0  # how many needed a parse (cache misses)

    def facts(self, path: str, locate: bool = True, data: Optional[bytes] = None,
              module: Optional[tuple[str, bool]] = None) -> Outcome:
        """Facts of the file at ``path`` (or of ``data``, its current text, as flake8 gives it).
        ``locate=False``: without evidence lines, for files read only to resolve names."""
        return self.facts_many([path], locate, jobs=1, data=data, module=module)[0]

    def facts_many(self, paths: Sequence[str], locate: bool = True, jobs: int = 1, data: Optional[bytes] = None,
                   module: Optional[tuple[str, bool]] = None) -> list[Outcome]:
        """Facts of many files; cache misses are extracted in ``jobs`` worker processes."""
        outcomes: list[Optional[Outcome]] = [None] * len(paths)
        misses: list[tuple[int, str, tuple]] = []
        for position, path in enumerate(paths):
            if data is None and (path, locate) in self.memory:
                outcomes[position] = self.memory[(path, locate)]
                continue
            try:
                content = data if data is not None else _read_regular(path)
            except OSError as error:
                outcomes[position] = FileError(path, one_line(error))
                continue
            self.read.add(path)
            name, is_package = module if module is not None else module_name_for(Path(path))[:2]
            key = hashlib.blake2b(b"\0".join([_SCHEMA.encode(), name.encode("utf-8", "surrogateescape"),
                                              b"pkg" if is_package else b"mod", b"loc" if locate else b"",
                                              content]), digest_size=20).hexdigest()
            found = self._cached(key, path)
            if found is None:
                misses.append((position, key, (path, content, name, is_package, locate)))
            else:
                outcomes[position] = found
        tasks = [task for _, _, task in misses]
        if jobs > 1 and len(tasks) > 1:
            with ProcessPoolExecutor(max_workers=jobs) as pool:
                extracted = list(pool.map(_extract, tasks, chunksize=max(1, len(tasks) // (jobs * 8))))
        else:
            extracted = [_extract(task) for task in tasks]
        self.extracted += len(tasks)
        for (position, key, _), outcome in zip(misses, extracted):
            outcomes[position] = outcome
            if self.cache is not None:
                self.cache.put(key, _ERROR + outcome.message if isinstance(outcome, FileError)
                               else codec.encode(outcome))
        for path, outcome in zip(paths, outcomes):
            if data is None:
                self.memory[(path, locate)] = outcome  # type: ignore[assignment]
        return outcomes  # type: ignore[return-value]

    def close(self) -> None:
        """Release the cache file (the last connection to close folds the WAL into it)."""
        if self.cache is not None:
            self.cache.close()

    def _cached(self, key: str, path: str) -> Optional[Outcome]:
        text = self.cache.get(key) if self.cache is not None else None
        if text is None:
            return None
        if text.startswith(_ERROR):
            return FileError(path, text[len(_ERROR):])
        try:
            return codec.decode(text, path)
        except (ValueError, TypeError, IndexError):  # a row we cannot read: compute it again
            return None


def _read_regular(path: str) -> bytes:
    """The file's bytes; anything but a regular file (a FIFO, a device) is refused, not read:
    reading a FIFO blocks until someone writes to it."""
    if not stat.S_ISREG(os.stat(path).st_mode):
        raise OSError(f"not a regular file ({'directory' if os.path.isdir(path) else 'FIFO, socket or device'})")
    return Path(path).read_bytes()


def _extract(task: tuple[str, bytes, str, bool, bool]) -> Outcome:
    """Facts of one file's bytes, or the one-line reason why not (runs in worker processes)."""
    import libcst as cst  # here, not at the top: a warm run never needs LibCST

    from lint_rules.facts.extract import extract, wanted

    path, data, module, is_package, locate = task
    source: Optional[str] = None
    try:
        source = decode(data)
        if "\0" in source:  # LibCST reads NUL bytes inside strings; Python refuses the whole file
            return FileError(path, one_line(python_syntax_error(source, path) or SyntaxError("NUL byte"), source, path))
        if locate:  # a file given: CPython's verdict, where it does not depend on the Python version
            error = python_syntax_error(source, path)
            if error is not None and (not wanted(source) or _bad_literal(error)):
                return FileError(path, one_line(error))
        return extract(source, path, module, is_package, locate=locate)
    except (UnicodeDecodeError, SyntaxError, LookupError, cst.ParserSyntaxError, RecursionError,
            ValueError) as error:
        return FileError(path, one_line(error, source, path))


def _bad_literal(error: SyntaxError) -> bool:
    """A string or bytes literal no Python accepts (a truncated ``\\u`` escape, non-ASCII bytes),
    which LibCST parses without a word. Other errors of CPython's parser are left to LibCST, which
    reads newer syntax (``type X = ...`` under Python 3.11) that the running interpreter refuses."""
    message = error.msg or ""
    return message.startswith(("(unicode error)", "(value error)")) or "bytes can only contain ASCII" in message


def default_cache_dir(root: Path) -> Path:
    """Outside any project (no marker found) there is no default: a cache is never left in a
    directory no one chose."""
    return root / CACHE_DIR_NAME
