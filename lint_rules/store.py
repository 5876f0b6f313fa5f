"""The facts store: every caller gets a file's facts here, computed once per content.

Keyed by a hash of the file's bytes, its module name and whether evidence lines are wanted, inside
a database file named by the schema: the tool version, the Python and LibCST versions and the
code that shapes stored facts (``_FACTS_CODE``, the records' shapes included). A moved, edited or differently
packaged file is a different key, another version of fwdlint a different file, so nothing needs
invalidating and two versions sharing a cache directory leave each other alone.

Persistent across runs under the project root in ``.fwdlint_cache/`` (``--cache-dir``, ``--no-cache``).
Files in no project are cached under the directory the run was given (the deepest holding every
path given; ``engine.Session``), as ruff does, never elsewhere. The cache directory
is fwdlint's own: marked by a ``CACHEDIR.TAG`` (standard signature, fwdlint's comment line) written
when fwdlint creates the directory or finds it empty; a chosen directory that is neither empty nor
fwdlint's gets the cache in its subdirectory ``.fwdlint_cache``, and if that is not possible either
the run goes without cache after one warning line. Inside its directory fwdlint only creates,
rewrites or deletes files it names itself (``CACHEDIR.TAG``, ``.gitignore`` of ``*``,
``facts-<schema>.sqlite*``), and never through a symbolic link.

Values are JSON (``facts.codec``), never pickle: a cache must not be a way to run code. SQLite gives
atomic writes and safe concurrent use (flake8 ``-j``, two terminals, pre-commit while an editor
lints); a write that cannot get the lock in time is skipped, not waited for. A database that is not
a fwdlint cache of this schema, or is damaged (SQLite reports it when a read or write meets a bad
page, and ``PRAGMA quick_check`` now and then), is set aside as ``*.corrupt-<n>`` and rebuilt once.
Growth is bounded: a file keeps its last ``_VERSIONS_KEPT`` versions, and every ``_MAINTAIN_EVERY``
runs that wrote, entries of vanished files go, the oldest beyond ``_MAX_ROWS`` go, freed pages
return to the file system, and databases of other schemas unused for ``_OTHER_SCHEMA_DAYS`` days
(or beyond the newest ``_OTHER_SCHEMAS_KEPT``) are deleted. A warm run only reads. None of this is
ever an error of the run.

A file the text prefilter rules out is still checked for syntax (CPython's parser), and that
verdict is cached too, so a given file with a syntax error is always reported.
"""

from __future__ import annotations

import importlib.util
import os
import stat
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional, Sequence, Union

try:  # sqlite3's own C module: the sqlite3 package adds only date adapters, and its import of datetime is ~3 ms a run
    import _sqlite3 as sqlite3
except ImportError:  # an interpreter whose sqlite3 is built otherwise
    import sqlite3  # type: ignore[no-redef]

from lint_rules import __version__
from lint_rules.diagnostics import FileError
from lint_rules.layout import module_name_for
from lint_rules.source import OVERLAY, decode, one_line, python_parse, python_syntax_error
from lint_rules.stamps import Stamps, blake2b, digest

CACHE_DIR_NAME = ".fwdlint_cache"
TAG_NAME = "CACHEDIR.TAG"
TAG_TEXT = ("Signature: 8a477f597d28d172789f06886806bc55\n"
            "# This file is a cache directory tag created by fwdlint.\n"
            "# For information about cache directory tags see https://bford.info/cachedir/\n")
_IGNORE_TEXT = "# Created by fwdlint.\n*\n"
_LEGACY = {".gitignore", "facts.sqlite", "facts.sqlite-wal", "facts.sqlite-shm"}  # fwdlint <= 0.x layout

#: The code whose changes change the STORED facts (rules run on facts after the cache, so they are
#: not here): the collectors, what they import from outside ``facts`` (noqa comments, the shared
#: contract, source decoding and positions), this module's ``_extract`` (the syntax verdicts) and
#: ``workers`` (its recursion limit and stack decide what is too deeply nested). Module names and
#: paths are in each key already, so ``layout`` and ``discover`` are not.
_FACTS_CODE = ("facts/*.py", "noqa.py", "contract.py", "vocabulary.py", "source.py", "store.py",
               "stamps.py", "workers.py")

_VERSIONS_KEPT = 3  # per file (and per evidence flag): switching branches back and forth stays warm
_MAX_ROWS = 50_000  # about a project of 25,000 files, each with and without evidence lines
_MAINTAIN_EVERY = 16  # runs that wrote
_OTHER_SCHEMA_DAYS = 30
_OTHER_SCHEMAS_KEPT = 4
_CORRUPT_KEPT = 2


def _facts_code_digest(package: Path = Path(__file__).parent) -> str:
    """A digest of the code that shapes stored facts, so that an edited collector (a development
    checkout, an editable install) never meets facts its old version cached."""
    digest = blake2b(digest_size=8)
    for pattern in _FACTS_CODE:
        for path in sorted(package.glob(pattern)):
            digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def _libcst_version() -> str:
    """LibCST's version from its ``.dist-info`` directory's name: ``importlib.metadata`` (or LibCST
    itself) would cost a warm run more than its whole analysis of a small project."""
    spec = importlib.util.find_spec("libcst")
    if spec is None or spec.origin is None:
        return "?"
    site = Path(spec.origin).parent.parent
    try:
        names = os.listdir(site)
    except OSError:
        return "?"
    return ",".join(sorted(n[7:-10] for n in names if n.startswith("libcst-") and n.endswith(".dist-info"))) or "?"


# The records' shapes (``codec.FORMAT``) are in the code digest: facts/model.py is part of it. Not
# importing them here spares a run whose findings are reused (``results``) the facts model.
_SCHEMA = (f"fwdlint-facts-{__version__}-{_facts_code_digest()}"
           f"-py{sys.version_info[0]}.{sys.version_info[1]}-libcst{_libcst_version()}")
_SCHEMA_ID = blake2b(_SCHEMA.encode(), digest_size=8).hexdigest()
_ERROR = "!"  # prefix of a cached error message

if TYPE_CHECKING:  # imported where a file needs parsing: a warm run spares the import
    from lint_rules.facts.model import FileFacts

Outcome = Union["FileFacts", FileError]


def _warn(message: str) -> None:
    print(f"fwdlint: warning: {message}; running without the facts cache", file=sys.stderr)


def _read_tag(directory: Path) -> Optional[str]:
    """The directory's CACHEDIR.TAG, read without following a link; None if there is none."""
    try:
        fd = os.open(directory / TAG_NAME, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        return os.read(fd, 4096).decode("utf-8", "replace")
    finally:
        os.close(fd)


#: How long a tag another run is writing is waited for (10 ms steps): the time between its creation
#: and its one write can stretch on a loaded machine (eight runs and their parser processes on two
#: cores starting at once took more than the 0.5 s this was before).
_TAG_WAIT_STEPS = 500


def _is_ours(directory: Path) -> bool:
    """Tagged by fwdlint; a tag another run is writing right now is waited for."""
    for _ in range(_TAG_WAIT_STEPS):
        text = _read_tag(directory)
        if text is None:
            return False
        if text.startswith(TAG_TEXT):
            return True
        if not TAG_TEXT.startswith(text):  # another program's tag
            return False
        time.sleep(0.01)
    return False


def _create_new(directory: Path, name: str, text: str) -> None:
    """Write a file that must not exist yet (never through a link, never over anything)."""
    try:
        fd = os.open(directory / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
    except FileExistsError:
        return
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _claim(directory: Path) -> bool:
    """Make ``directory`` fwdlint's cache directory if it is new, empty or fwdlint's already
    (or a cache of an older fwdlint, untagged); anything else is left alone."""
    try:
        directory.mkdir(parents=True)
    except FileExistsError:
        pass
    info = os.lstat(directory)
    if not stat.S_ISDIR(info.st_mode):  # a file, or a link (a checked-in link must not send writes elsewhere)
        return False
    # listed before the tag is looked for: another run may tag the directory in between, and then
    # the tag is seen (and waited for), not taken for a stranger's file in an untagged directory
    entries = set(os.listdir(directory))
    if not _is_ours(directory):
        legacy = entries and entries <= _LEGACY and _ours_legacy(directory)
        if entries and not legacy:
            return False
        _create_new(directory, TAG_NAME, TAG_TEXT)
        if not _is_ours(directory):  # another program tagged it at the same moment
            return False
    _create_new(directory, ".gitignore", _IGNORE_TEXT)
    return True


def _ours_legacy(directory: Path) -> bool:
    try:
        return (directory / ".gitignore").read_text(encoding="utf-8").startswith("# Created by fwdlint.")
    except (OSError, UnicodeDecodeError):
        return False


def cache_directory(requested: Path) -> Optional[Path]:
    """Where the cache goes for a requested directory: the directory itself when it is new, empty
    or fwdlint's; else its ``.fwdlint_cache`` subdirectory on the same terms; else nowhere (warned)."""
    candidates = [requested] if requested.name == CACHE_DIR_NAME else [requested, requested / CACHE_DIR_NAME]
    for candidate in candidates:
        try:
            if _claim(candidate):
                return candidate
        except (OSError, ValueError) as error:  # ValueError: a NUL byte in a --cache-dir given here
            _warn(f"cannot use {candidate} as cache directory ({one_line(error)})")
            return None
    _warn(f"{candidates[-1]} is not a fwdlint cache directory (not empty, a link, or not tagged by fwdlint)")
    return None


class _Cache:
    """One schema's SQLite file in a directory of fwdlint's own; a failure disables it for the run,
    damage sets the file aside and rebuilds it once."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.path = directory / f"facts-{_SCHEMA_ID}.sqlite"
        self.db: Optional[sqlite3.Connection] = None
        self.wrote = False
        self.rebuilt = False
        # Rows this run read (key -> value, slot): a file found damaged later in the run is rebuilt
        # with them, so the run after it is warm (the damage may sit in rows read last, as the
        # installed files read to resolve names are)
        self._read: dict[str, tuple[object, object]] = {}
        try:
            self._open()
        except sqlite3.OperationalError:  # locked, unreadable: no cache this run, nothing set aside
            self.close()
        except sqlite3.DatabaseError:
            self._rebuild()
        except (OSError, sqlite3.Error):
            self.close()

    def _open(self) -> None:
        for suffix in ("", "-wal", "-shm"):
            try:
                info = os.lstat(str(self.path) + suffix)
            except FileNotFoundError:
                continue
            if not stat.S_ISREG(info.st_mode):  # a link, a FIFO: not written through, not removed
                _warn(f"{self.path}{suffix} is not a regular file")
                raise OSError("not a regular file")
        new = not self.path.exists()
        db = sqlite3.connect(self.path, timeout=2.0, isolation_level=None)
        self.db = db
        if new:
            db.execute("PRAGMA auto_vacuum=INCREMENTAL")  # before the first table: lets freed pages go
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        if _schema_of(db) != _SCHEMA:  # new (or not ours): set up under the write lock, so that a
            db.execute("BEGIN IMMEDIATE")  # concurrent run never sees it half made
            try:
                _set_up(db)
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
            _prune_directory(self.directory, self.path)  # a new schema: a good moment to drop old ones

    def _rebuild(self) -> None:
        """Set the damaged file aside (renamed, not deleted) and start a new one, once per run."""
        self.wrote = False  # no maintenance of a damaged file
        self.close()
        if self.rebuilt:
            return
        self.rebuilt = True
        try:
            _set_aside(self.path)
            self._open()
            assert self.db is not None
            self.db.executemany("INSERT OR REPLACE INTO facts VALUES (?, ?, ?)",
                                [(key, value, slot) for key, (value, slot) in self._read.items()])
            self.wrote = bool(self._read)
        except (OSError, sqlite3.Error):
            self.close()
        self._read = {}

    def _failed(self, error: sqlite3.Error) -> None:
        if isinstance(error, sqlite3.OperationalError):  # locked by another run for too long: skip
            return
        self._rebuild() if isinstance(error, sqlite3.DatabaseError) else self.close()

    def close(self) -> None:
        if self.db is None:
            return
        damaged = False
        if self.wrote:
            self.wrote = False
            try:
                self._maintain()
            except sqlite3.OperationalError:  # locked: another run will do it
                pass
            except sqlite3.Error:
                damaged = True
        try:
            self.db.close()
        except sqlite3.Error:
            pass
        self.db = None
        if damaged:  # found by quick_check: the next run starts a new file
            try:
                _set_aside(self.path)
            except OSError:
                pass

    def get(self, key: str) -> Optional[str]:
        if self.db is None:
            return None
        try:
            row = self.db.execute("SELECT value, slot FROM facts WHERE key = ?", (key,)).fetchone()
        except sqlite3.Error as error:
            self._failed(error)
            return None
        if row is None:
            return None
        if not self.rebuilt:
            self._read[key] = (row[0], row[1])
        return row[0].decode("utf-8", "surrogateescape") if isinstance(row[0], bytes) else row[0]

    def put(self, key: str, value: str, slot: str) -> None:
        """Store a value; the file's versions beyond the last few go (edits must not pile up)."""
        if self.db is None:
            return
        try:
            value, slot = _storable(value), _storable(slot)  # type: ignore[assignment]
            self.db.execute("INSERT OR REPLACE INTO facts VALUES (?, ?, ?)", (key, value, slot))
            self.db.execute("DELETE FROM facts WHERE slot = ? AND rowid NOT IN (SELECT rowid FROM facts "
                            "WHERE slot = ? ORDER BY rowid DESC LIMIT ?)", (slot, slot, _VERSIONS_KEPT))
            self.wrote = True
        except sqlite3.Error as error:
            self._failed(error)

    def stamps(self) -> dict[str, tuple[str, str]]:
        """Every file's kept stamp and digest (``stamps``), by absolute path."""
        if self.db is None:
            return {}
        try:
            return {path: (stamp, hashed) for path, stamp, hashed in self.db.execute("SELECT * FROM stamps")}
        except sqlite3.Error as error:
            self._failed(error)
            return {}

    def put_stamps(self, rows: dict[str, tuple[str, str]]) -> None:
        if self.db is None or not rows:
            return
        try:
            self.db.executemany("INSERT OR REPLACE INTO stamps VALUES (?, ?, ?)",
                                [(_storable(path), stamp, hashed) for path, (stamp, hashed) in rows.items()])
        except sqlite3.Error as error:
            self._failed(error)

    def _maintain(self) -> None:
        """Every ``_MAINTAIN_EVERY`` runs that wrote: drop entries of vanished files and the oldest
        beyond ``_MAX_ROWS``, give freed pages back, check the file, prune other schemas."""
        assert self.db is not None
        db = self.db
        db.execute("INSERT OR IGNORE INTO meta VALUES ('writes', '0')")
        db.execute("UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'writes'")
        (writes,) = db.execute("SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'writes'").fetchone()
        if writes % _MAINTAIN_EVERY:
            return
        gone = [(slot,) for (slot,) in db.execute("SELECT DISTINCT slot FROM facts")
                if not os.path.exists(slot[2:])]
        db.executemany("DELETE FROM facts WHERE slot = ?", gone)
        db.executemany("DELETE FROM stamps WHERE path = ?",
                       [(path,) for (path,) in db.execute("SELECT path FROM stamps") if not os.path.exists(path)])
        db.execute("DELETE FROM facts WHERE rowid <= (SELECT rowid FROM facts ORDER BY rowid DESC LIMIT 1 OFFSET ?)",
                   (_MAX_ROWS,))
        db.execute("PRAGMA incremental_vacuum")
        if db.execute("PRAGMA quick_check").fetchone() != ("ok",):
            raise sqlite3.DatabaseError("quick_check failed")
        _prune_directory(self.directory, self.path)


def _schema_of(db: sqlite3.Connection) -> Optional[str]:
    try:
        row = db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
    except sqlite3.OperationalError as error:
        if "no such table" in str(error):
            return None
        raise
    return row[0] if row else None


def _set_up(db: sqlite3.Connection) -> None:
    """Create the tables of an empty database; anything else that is not this schema is damage."""
    db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    schema = _schema_of(db)
    if schema == _SCHEMA:  # another run made it meanwhile
        return
    tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if schema is not None or tables - {"meta"}:
        raise sqlite3.DatabaseError("not a fwdlint cache of this schema")
    db.execute("CREATE TABLE facts (key TEXT PRIMARY KEY, value TEXT NOT NULL, slot TEXT NOT NULL)")
    db.execute("CREATE INDEX facts_slot ON facts (slot)")
    db.execute("CREATE TABLE stamps (path TEXT PRIMARY KEY, stamp TEXT NOT NULL, digest TEXT NOT NULL)")
    db.execute("INSERT INTO meta VALUES ('schema', ?)", (_SCHEMA,))


def _set_aside(path: Path) -> None:
    """Rename a damaged database to ``<name>.corrupt-<n>`` (its WAL and index go: they belong to
    it and would be replayed into the new file); only the newest few set-aside files are kept."""
    number = 1 + max((int(p.name.rsplit("-", 1)[1]) for p in path.parent.glob(path.name + ".corrupt-*")
                      if p.name.rsplit("-", 1)[1].isdigit()), default=0)
    if os.path.lexists(path):
        os.rename(path, path.parent / f"{path.name}.corrupt-{number}")
    for suffix in ("-wal", "-shm"):
        try:
            os.unlink(str(path) + suffix)
        except FileNotFoundError:
            pass
    for old in sorted(path.parent.glob(path.name + ".corrupt-*"), key=_corrupt_number)[:-_CORRUPT_KEPT]:
        old.unlink()


def _corrupt_number(path: Path) -> int:
    tail = path.name.rsplit("-", 1)[1]
    return int(tail) if tail.isdigit() else 0


def _prune_directory(directory: Path, current: Path) -> None:
    """Delete the databases of other schemas (other fwdlint versions) that went unused for
    ``_OTHER_SCHEMA_DAYS`` days, or that are beyond the ``_OTHER_SCHEMAS_KEPT`` most recently used."""
    used: list[tuple[float, Path]] = []
    for path in directory.glob("facts-*.sqlite"):
        if path.name != current.name and not path.is_symlink():
            stamps = [os.lstat(str(path) + s).st_mtime for s in ("", "-wal") if os.path.lexists(str(path) + s)]
            used.append((max(stamps, default=0.0), path))
    used.sort(reverse=True)
    limit = time.time() - _OTHER_SCHEMA_DAYS * 86400
    for position, (stamp, path) in enumerate(used):
        if position >= _OTHER_SCHEMAS_KEPT or stamp < limit:
            for suffix in ("", "-wal", "-shm"):
                try:
                    os.unlink(str(path) + suffix)
                except OSError:
                    pass


class FactsStore:
    """Facts of files by path, computed at most once per content (per process, and per cache)."""

    def __init__(self, cache_dir: Optional[Path] = None, target: Optional[tuple[int, int]] = None) -> None:
        """``target``: the Python version the checked code is for (``environment``), which judges
        its syntax; None: the running interpreter's."""
        self.target = tuple(target) if target is not None else tuple(sys.version_info[:2])
        directory = cache_directory(cache_dir) if cache_dir is not None else None
        self.cache = _Cache(directory) if directory is not None else None
        self.memory: dict[tuple[str, bool], Outcome] = {}
        self.read: set[str] = set()  # paths this store read (for statistics)
        self.extracted = 0  # how many needed a parse (cache misses)
        self.keys: dict[tuple[str, bool], str] = {}  # (path, locate) -> the content key its facts were got by
        self.packages: dict[str, tuple[tuple[str, ...], Path]] = {}  # directories' packages (module_name_for)
        self.directories: dict[str, str] = {}  # ... and their real paths
        # files whose parser process failed (timed out, out of memory, crashed): this machine's and these
        # limits' verdict, never the file's, so neither their facts nor a run's findings are stored
        self.failed: set[str] = set()
        self._stamps: Optional[Stamps] = None  # read from the cache when the first file is
        self._texts: dict[str, str] = {}  # cached rows read by ``facts_digest``, until decoded
        self._facts_digests: dict[str, str] = {}  # content key -> ``facts_digest``

    def facts(self, path: str, locate: bool = True, data: Optional[bytes] = None,
              module: Optional[tuple[str, bool]] = None) -> Outcome:
        """Facts of the file at ``path`` (or of ``data``, its current text, as flake8 gives it).
        ``locate=False``: without evidence lines, for files read only to resolve names."""
        return self.facts_many([path], locate, jobs=1, data=data, module=module)[0]

    def facts_many(self, paths: Sequence[str], locate: bool = True, jobs: int = 1, data: Optional[bytes] = None,
                   module: Optional[tuple[str, bool]] = None,
                   progress: Optional[Callable[[int, int, int], None]] = None) -> list[Outcome]:
        """Facts of many files; cache misses are extracted in ``jobs`` worker processes
        (``workers.AUTO``: as many as the number of misses repays, ``workers.auto_jobs``).
        ``progress(done, total, cached)`` is told as files are read (``progress.ProgressLine``)."""
        outcomes: list[Optional[Outcome]] = [None] * len(paths)
        misses: list[tuple[int, str, tuple]] = []
        for position, path in enumerate(paths):
            if data is None and (path, locate) in self.memory:
                outcomes[position] = self.memory[(path, locate)]
                continue
            read = self._read(path, locate, data, module, bytes_needed=False)
            found = None if isinstance(read, FileError) else self._cached(read[3], path)
            if found is None and not isinstance(read, FileError) and read[0] is None:
                stamped = read[3]
                read = self._read(path, locate, data, module)  # to be parsed: its bytes are needed after all
                if not isinstance(read, FileError) and read[3] != stamped:  # changed meanwhile
                    found = self._cached(read[3], path)
            if isinstance(read, FileError):
                outcomes[position] = read
                continue
            self.read.add(path)
            content, name, is_package, key = read
            if data is None:
                self.keys[(path, locate)] = key
            if found is None:
                misses.append((position, key, (path, content, name, is_package, locate, self.target)))
            else:
                outcomes[position] = found
        tasks = [task for _, _, task in misses]
        pool = None
        if tasks:  # the parser processes, started by the first miss and kept for the process's next runs
            from lint_rules import workers

            jobs = workers.auto_jobs(len(tasks)) if jobs == workers.AUTO else jobs
            pool = workers.shared(("lint_rules.facts.extract",))
        done = [len(paths) - len(tasks)]  # read already: from memory, the cache, or an error

        def one_more() -> None:
            done[0] += 1
            progress(done[0], len(paths), len(paths) - len(tasks))  # type: ignore[misc]

        if progress is not None:
            progress(done[0], len(paths), done[0])
        told = {"done": one_more} if progress is not None else {}
        extracted = pool.map(_extract, tasks, jobs=jobs, **told) if pool is not None else []
        if extracted:
            from lint_rules.facts import codec
            from lint_rules.facts.model import FileFacts
        self.extracted += len(tasks)
        for (position, key, (path, *_)), outcome in zip(misses, extracted):
            if not isinstance(outcome, (FileFacts, FileError)):  # a workers.Failure: not cached, another machine
                # or limit may do better
                outcomes[position] = FileError(path, outcome.reason)
                self.failed.add(path)
                continue
            outcomes[position] = outcome
            if self.cache is not None:
                self.cache.put(key, _ERROR + outcome.message if isinstance(outcome, FileError)
                               else codec.encode(outcome), _slot(paths[position], locate))
        for path, outcome in zip(paths, outcomes):
            if data is None:
                self.memory[(path, locate)] = outcome  # type: ignore[assignment]
        return outcomes  # type: ignore[return-value]

    def read_keys(self, paths: Sequence[str], locate: bool = True,
                  module: Optional[tuple[str, bool]] = None) -> list[Union[str, FileError]]:
        """Each file's content key (what its facts are stored under), or the error reading it: what
        ``facts_many`` would look up, without decoding anything (``results`` keys a run by them)."""
        return [read if isinstance(read, FileError) else read[3]
                for read in (self._read(path, locate, None, module, bytes_needed=False) for path in paths)]

    def _read(self, path: str, locate: bool, data: Optional[bytes], module: Optional[tuple[str, bool]],
              bytes_needed: bool = True) -> Union[tuple[Optional[bytes], str, bool, str], FileError]:
        """A file's bytes (``data`` if given; None when not ``bytes_needed`` and its stamp gave its
        digest: ``stamps``), module name, package flag and content key, or the error reading it."""
        try:
            if data is not None:
                content: Optional[bytes] = data
                hashed = digest(data)
            else:
                content, hashed = self._content(path, bytes_needed)
        except OSError as error:
            return FileError(path, one_line(error))
        name, is_package = (module if module is not None
                            else module_name_for(path, self.packages, self.directories)[:2])
        key = blake2b(b"\0".join([_SCHEMA.encode(), name.encode("utf-8", "surrogateescape"),
                                          b"pkg" if is_package else b"mod", b"loc" if locate else b"",
                                          b"%d.%d" % self.target, hashed]), digest_size=20).hexdigest()
        return content, name, is_package, key

    def _content(self, path: str, bytes_needed: bool) -> tuple[Optional[bytes], bytes]:
        """The file's bytes (None if not needed and its stamp is kept) and their digest."""
        if OVERLAY and os.path.realpath(path) in OVERLAY:  # the text standing in for it (``source.OVERLAY``)
            content = OVERLAY[os.path.realpath(path)]
            return content, digest(content)
        info = _regular(path)
        if self._stamps is None:
            self._stamps = Stamps(self.cache.stamps() if self.cache is not None else {})
        if not bytes_needed:
            found = self._stamps.lookup(path, info)
            if found is not None:
                return None, found
        content = Path(path).read_bytes()
        hashed = digest(content)
        if self.cache is not None:
            self._stamps.learn(path, info, hashed)
        return content, hashed

    def file_digest(self, path: str) -> bytes:
        """The digest of a file's bytes, by its stamp when it is kept (``stamps``); raises ``OSError``."""
        return self._content(path, bytes_needed=False)[1]

    def facts_digest(self, path: str, key: str) -> Optional[str]:
        """A digest of what the analysis reads of the file at ``path`` whose content key is ``key``
        (``read_keys``): its facts, with evidence lines, as cached. Equal for two versions whose facts
        are (a comment added at the end, a docstring reworded); None if the cache holds no facts for it."""
        if self.cache is None:
            return None
        if key in self._facts_digests:
            return self._facts_digests[key]
        text = self._texts.get(key)
        if text is None:
            text = self.cache.get(key)
            if text is None:
                return None
            self._texts[key] = text
        name, is_package = module_name_for(path, self.packages, self.directories)[:2]
        found = self._facts_digests[key] = blake2b(b"\0".join(
            [_SCHEMA.encode(), name.encode("utf-8", "surrogateescape"), b"pkg" if is_package else b"mod",
             b"%d.%d" % self.target, text.encode("utf-8", "surrogateescape")]), digest_size=20).hexdigest()
        return found

    def close(self) -> None:
        """Release the cache file (the last connection to close folds the WAL into it). The
        parser processes are the process's (``workers.shared``)."""
        if self.cache is not None:
            if self._stamps is not None:
                self.cache.put_stamps(self._stamps.fresh)
                self._stamps.fresh = {}
            self.cache.close()

    def _cached(self, key: str, path: str) -> Optional[Outcome]:
        text = self._texts.pop(key, None) or (self.cache.get(key) if self.cache is not None else None)
        if text is None:
            return None
        if text.startswith(_ERROR):
            return FileError(path, text[len(_ERROR):])
        from lint_rules.facts import codec

        try:
            return codec.decode(text, path)
        except (ValueError, TypeError, IndexError):  # a row we cannot read: compute it again
            return None


def _storable(text: str) -> Union[str, bytes]:
    """SQLite holds text as UTF-8. A file name that is not (bytes Python keeps as surrogates), and a
    message naming it, are stored as their bytes and read back as the same string."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogateescape")
    return text


def _slot(path: str, locate: bool) -> str:
    """What versions of one file share: its absolute path and whether evidence lines are in."""
    return ("L:" if locate else "-:") + os.path.abspath(path)


def _regular(path: str) -> os.stat_result:
    """The file's status; anything but a regular file (a FIFO, a device) is refused, not read:
    reading a FIFO blocks until someone writes to it."""
    info = os.stat(path)
    if not stat.S_ISREG(info.st_mode):
        raise OSError(f"not a regular file ({'directory' if os.path.isdir(path) else 'FIFO, socket or device'})")
    return info


def _extract(task: tuple[str, bytes, str, bool, bool, tuple[int, int]]) -> Outcome:
    """Facts of one file's bytes, or the one-line reason why not (runs in a ``workers`` process)."""
    from lint_rules.facts.extract import extract

    path, data, module, is_package, locate, target = task
    source: Optional[str] = None
    try:
        source = decode(data)
        # CPython refuses NUL bytes, even inside strings; decided first, because LibCST, which reads
        # a newer target's syntax below, accepts them there
        if "\0" in source:
            return FileError(path, one_line(python_syntax_error(source, path) or SyntaxError("NUL byte"), source, path))
        # given files are judged for the target Python; installed ones read to resolve names are the
        # environment's to judge: they are read if they can be, else left out
        tree, error = python_parse(source, path)
        if error is not None and not _bad_literal(error) and target > sys.version_info[:2]:
            # the target is newer than this interpreter: syntax it does not know yet (``type X = ...``
            # under 3.11 for 3.12)
            from lint_rules.facts.newer_syntax import parse_newer

            found = parse_newer(source, path, error, target)
            tree, error = (found, None) if not isinstance(found, SyntaxError) else (None, found)
        if error is not None:
            return FileError(path, one_line(error))
        return extract(source, path, module, is_package, locate=locate, tree=tree)
    except (UnicodeDecodeError, SyntaxError, LookupError, RecursionError, ValueError) as error:
        return FileError(path, one_line(error, source, path))


def _bad_literal(error: SyntaxError) -> bool:
    """A string or bytes literal no Python accepts (a truncated ``\\u`` escape, non-ASCII bytes),
    which LibCST parses without a word."""
    message = error.msg or ""
    return message.startswith(("(unicode error)", "(value error)")) or "bytes can only contain ASCII" in message


def default_cache_dir(root: Path) -> Path:
    """The cache of the project at ``root``."""
    return root / CACHE_DIR_NAME
