"""The facts cache on disk: its directory and its SQLite file (``FactsStore`` says what goes in it).

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
"""

from __future__ import annotations

import os
import stat
import sys
import time
from pathlib import Path
from typing import Optional, Union

try:  # sqlite3's own C module: the sqlite3 package adds only date adapters, and its import of datetime is ~3 ms a run
    import _sqlite3 as sqlite3
except ImportError:  # an interpreter whose sqlite3 is built otherwise
    import sqlite3  # type: ignore[no-redef]

from lint_rules.source import one_line
from lint_rules.stamps import blake2b

CACHE_DIR_NAME = ".fwdlint_cache"
TAG_NAME = "CACHEDIR.TAG"
TAG_TEXT = ("Signature: 8a477f597d28d172789f06886806bc55\n"
            "# This file is a cache directory tag created by fwdlint.\n"
            "# For information about cache directory tags see https://bford.info/cachedir/\n")
_IGNORE_TEXT = "# Created by fwdlint.\n*\n"
_LEGACY = {".gitignore", "facts.sqlite", "facts.sqlite-wal", "facts.sqlite-shm"}  # fwdlint <= 0.x layout

_VERSIONS_KEPT = 3  # per file (and per evidence flag): switching branches back and forth stays warm
_MAX_ROWS = 50_000  # about a project of 25,000 files, each with and without evidence lines
_MAINTAIN_EVERY = 16  # runs that wrote
_OTHER_SCHEMA_DAYS = 30
_OTHER_SCHEMAS_KEPT = 4
_CORRUPT_KEPT = 2


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


class Cache:
    """One schema's SQLite file in a directory of fwdlint's own; a failure disables it for the run,
    damage sets the file aside and rebuilds it once."""

    def __init__(self, directory: Path, schema: str) -> None:
        """``schema``: what the stored values were computed by; a file per schema."""
        self.directory = directory
        self.schema = schema
        self.path = directory / f"facts-{blake2b(schema.encode(), digest_size=8).hexdigest()}.sqlite"
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
        if _schema_of(db) != self.schema:  # new (or not ours): set up under the write lock, so that a
            db.execute("BEGIN IMMEDIATE")  # concurrent run never sees it half made
            try:
                _set_up(db, self.schema)
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
            try:  # SQLite folds the log only on the last close, and two runs ending together can
                self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # each see the other still open
            except sqlite3.Error:  # busy beyond the timeout: the next run that writes folds it
                pass
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


def _set_up(db: sqlite3.Connection, schema_wanted: str) -> None:
    """Create the tables of an empty database; anything else that is not this schema is damage."""
    db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    schema = _schema_of(db)
    if schema == schema_wanted:  # another run made it meanwhile
        return
    tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if schema is not None or tables - {"meta"}:
        raise sqlite3.DatabaseError("not a fwdlint cache of this schema")
    db.execute("CREATE TABLE facts (key TEXT PRIMARY KEY, value TEXT NOT NULL, slot TEXT NOT NULL)")
    db.execute("CREATE INDEX facts_slot ON facts (slot)")
    db.execute("CREATE TABLE stamps (path TEXT PRIMARY KEY, stamp TEXT NOT NULL, digest TEXT NOT NULL)")
    db.execute("INSERT INTO meta VALUES ('schema', ?)", (schema_wanted,))


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


def _storable(text: str) -> Union[str, bytes]:
    """SQLite holds text as UTF-8. A file name that is not (bytes Python keeps as surrogates), and a
    message naming it, are stored as their bytes and read back as the same string."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogateescape")
    return text


def default_cache_dir(root: Path) -> Path:
    """The cache of the project at ``root``."""
    return root / CACHE_DIR_NAME
