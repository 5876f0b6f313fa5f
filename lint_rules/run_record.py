"""The run record: forward entries a real run observed, written by ``runtime_shim`` and read by ``fwdlint``.

One JSON document (``FORMAT``, ``SCHEMA``), so both halves share its only definition here (torch-free,
standard library only)::

    {"format": "fwdlint-record", "schema": 1, "entries": [
      {"class": "pkg.models.GPT", "method": "generate", "marked": false, "wrapper": "ddp",
       "defined_in": "pkg.models.GPT", "file": "/abs/pkg/models.py", "line": 12,
       "site": "/abs/tests/test_gen.py:30", "test": "tests/test_gen.py::test_generate",
       "wrapped_at": "/abs/tests/test_gen.py:25", "count": 3}]}

``class`` is the instance's class, ``defined_in`` the class whose ``def`` ran (a base's, a mixin's);
``line`` is that ``def``'s first line (its first decorator's, as Python counts). ``site`` is the
first call of the entry from outside the model, ``test`` the pytest test it ran in (``""`` outside
pytest), ``wrapped_at`` the call that created the wrapper. ``count``: for a marked entry the calls the
wrapper routed (one per call of the method from outside the model); for an unmarked one the module
calls it made outside the wrapper's forward (each submodule call reached from the method directly or
through its helpers, not those nested in a submodule's own forward: ``runtime_shim.record``'s
``on_outside_call`` notes one per call), so a ``generate`` that calls ``self.lin`` twice counts 2 a
call, and 1 a call in mode ``error``, where the first raises. Summed over every process and every run
that merges into the file.

Writers never replace what others wrote: ``merge`` takes a lock, reads the record, adds its entries
(counts summed, the first ``site``/``test`` kept) and replaces the file atomically. Processes of one
run (ranks, spawned workers, pytest-xdist workers) thus share one file with nothing lost or torn.
"""

from __future__ import annotations

import json
import os
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from typing import Any, Iterable, Iterator

# a path in a one-line error: a newline in it (an INI continuation) or a 5,000-character one stays one line
from lint_rules.bounded import printable

FORMAT = "fwdlint-record"
SCHEMA = 1

#: entry field -> its JSON type; all are required
FIELDS: dict[str, type] = {
    "class": str, "method": str, "marked": bool, "wrapper": str, "defined_in": str, "file": str, "line": int,
    "site": str, "test": str, "wrapped_at": str, "count": int,
}


class RecordError(Exception):
    """A record that cannot be used; ``str()`` is the whole one-line message, naming the file."""


@dataclass(frozen=True)
class Entry:
    cls: str
    method: str
    marked: bool
    wrapper: str
    defined_in: str
    file: str
    line: int
    site: str = ""
    test: str = ""
    wrapped_at: str = ""
    count: int = 1

    @property
    def key(self) -> tuple[str, str, bool, str, str]:
        """What makes two observations one entry: the first call site and the count do not."""
        return (self.cls, self.method, self.marked, self.wrapper, self.defined_in)

    @property
    def symbol(self) -> str:
        """``Class.method`` of the class that defines the method (what a finding is about)."""
        return f"{self.defined_in.rpartition('.')[2]}.{self.method}"

    def as_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["class"] = data.pop("cls")
        return {name: data[name] for name in FIELDS}


def _anchored(where: str, base: str, line: bool) -> str:
    """A recorded path (``file``, or the file of ``site``/``wrapped_at``): a relative one is taken
    relative to the record's directory (hand-written records, fixtures)."""
    if not where:
        return where
    path, sep, number = where.rpartition(":") if line else (where, "", "")
    if not path or os.path.isabs(path):
        return where
    return os.path.normpath(os.path.join(base, path)) + sep + number


def _entry(path: str, index: int, item: Any) -> Entry:
    if not isinstance(item, dict):
        raise RecordError(f"{printable(path)}: entry {index} is not an object")
    for name, kind in FIELDS.items():
        value = item.get(name)
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            what = {str: "a string", int: "an integer", bool: "true or false"}[kind]
            raise RecordError(f"{printable(path)}: entry {index}: '{name}' is missing or not {what}")
        if kind is str and "\0" in value:  # a path no system opens
            raise RecordError(f"{printable(path)}: entry {index}: '{name}' holds a NUL character")
    base = os.path.dirname(os.path.abspath(path))
    return Entry(item["class"], item["method"], item["marked"], item["wrapper"], item["defined_in"],
                 _anchored(item["file"], base, False), item["line"], _anchored(item["site"], base, True), item["test"],
                 _anchored(item["wrapped_at"], base, True), item["count"])


def parse(path: str, text: str) -> list[Entry]:
    """The entries of a record's text; ``RecordError`` for anything that is not a whole record of
    a schema this version reads."""
    try:
        data = json.loads(text)
    except RecursionError:  # '[' x 100,000
        raise RecordError(f"{printable(path)}: not a fwdlint record: JSON nested too deeply") from None
    except ValueError as exc:
        if f'"{FORMAT}"' in text:  # a record whose writer was stopped, or an edit gone wrong
            raise RecordError(f"{printable(path)}: fwdlint record truncated or corrupted ({exc})") from None
        raise RecordError(f"{printable(path)}: not a fwdlint record: not JSON ({exc})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise RecordError(f"{printable(path)}: not a fwdlint record (no \"format\": \"{FORMAT}\")")
    schema = data.get("schema")
    if not isinstance(schema, int) or isinstance(schema, bool) or schema < 1:
        raise RecordError(f"{printable(path)}: fwdlint record with a bad schema version {schema!r}")
    if schema > SCHEMA:
        raise RecordError(f"{printable(path)}: record schema {schema} is newer than this fwdlint reads ({SCHEMA}): "
                          "upgrade fwdlint, or record again with this version")
    entries = data.get("entries")
    if not isinstance(entries, list):
        raise RecordError(f"{printable(path)}: fwdlint record without an \"entries\" list")
    return [_entry(path, index, item) for index, item in enumerate(entries)]


def load(path: str) -> list[Entry]:
    """The entries of the record at ``path``: a regular file of at most ``bounded.RECORD_LIMIT`` bytes
    (``from-record = "/dev/zero"`` or a FIFO is one line, never all memory or a hang)."""
    from lint_rules.bounded import RECORD_LIMIT, Refused, read_regular

    try:
        data = read_regular(path, RECORD_LIMIT)
    except FileNotFoundError:
        raise RecordError(f"{printable(path)}: no such record") from None
    except Refused as exc:
        raise RecordError(f"{printable(path)}: the record {exc}") from None
    try:
        text = data.decode("utf-8-sig")  # a byte order mark, as editors on Windows write it, is read past
    except UnicodeDecodeError as exc:
        raise RecordError(f"{printable(path)}: cannot read the record: not UTF-8 (byte 0x{data[exc.start]:02x} "
                          f"at offset {exc.start})") from None
    return parse(path, text)


def combined(entries: Iterable[Entry]) -> list[Entry]:
    """One entry per key: counts summed, the first observation's site and test kept."""
    merged: dict[tuple[str, str, bool, str, str], Entry] = {}
    for entry in entries:
        first = merged.get(entry.key)
        merged[entry.key] = entry if first is None else replace(first, count=first.count + entry.count)
    return list(merged.values())


def dumps(entries: Iterable[Entry]) -> str:
    ordered = sorted(combined(entries), key=lambda e: (e.marked, e.file, e.line, e.cls, e.method, e.wrapper))
    return json.dumps({"format": FORMAT, "schema": SCHEMA, "entries": [e.as_json() for e in ordered]},
                      indent=1) + "\n"


def merge(path: str, entries: Iterable[Entry]) -> None:
    """Add ``entries`` to the record at ``path`` (created if missing), under a lock, atomically.
    ``RecordError`` if the file there is not a record this version can extend (it is left as it is).

    A ``path`` that is a symlink is written through: resolved once, the target is locked, read and
    replaced next to itself, and the link stays a link. Replacing the link itself would leave two
    records, the link turned into a file and a stale target that others still read."""
    new = list(entries)
    named, path = path, os.path.realpath(path)
    if os.path.islink(path):  # a loop: realpath gives up on it, and replacing it would break the link
        raise RecordError(f"{printable(named)}: the record is a symlink loop; not replacing it")
    directory = os.path.dirname(path)
    with _locked(path):
        old: list[Entry] = []
        if os.path.exists(path):
            old = load(path)
        _replace(path, directory, dumps([*old, *new]))


def _replace(path: str, directory: str, text: str) -> None:
    import tempfile  # only writers need it (a lint run reads)

    handle, temporary = tempfile.mkstemp(prefix=".fwdlint-record-", suffix=".tmp", dir=directory)
    try:
        os.chmod(temporary, os.stat(path).st_mode & 0o777 if os.path.exists(path) else 0o644)  # not mkstemp's 0600
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise


@contextmanager
def _locked(path: str) -> Iterator[None]:
    """An exclusive lock between processes for the record at ``path``: ``flock`` on its directory
    where there is ``fcntl`` (nothing is left behind), else a lock file's exclusive creation, polled."""
    directory = os.path.dirname(os.path.abspath(path))
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        fcntl = None  # type: ignore[assignment]
    if fcntl is not None:
        descriptor = os.open(directory, os.O_RDONLY)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX)
            yield
        finally:
            os.close(descriptor)  # releases the lock
        return
    lock = os.path.join(directory, f".{os.path.basename(path)}.lock")  # pragma: no cover - Windows
    for _ in range(6000):  # pragma: no cover - up to a minute
        try:
            descriptor = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            break
        except FileExistsError:
            time.sleep(0.01)
    else:  # pragma: no cover
        raise RecordError(f"{printable(path)}: could not lock the record ({lock} is held)")
    try:  # pragma: no cover
        yield
    finally:  # pragma: no cover
        os.close(descriptor)
        os.unlink(lock)
