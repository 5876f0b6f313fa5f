"""Content digests by file status: a warm run stats a file instead of reading and hashing it.

A file's digest (of its bytes) is kept in the facts database with its stamp: size, modification
and status-change times (nanoseconds), inode and device. A later run whose ``stat`` gives the same
stamp takes the digest without reading the file. The status-change time cannot be set by anyone:
every write, rename or ``chmod`` moves it forward, so an edit that keeps the size and puts the
modification time back (``touch -d``, ``cp -p``) still gives another stamp.

A stamp is kept only when both times are at least ``SETTLED_NS`` older than the clock when the file
was read: a file written again within the file system's timestamp granularity (a few milliseconds
on Linux, 2 s on FAT) could keep its stamp with other bytes (git's "racy" index entries). A file
that young is read and hashed on every run until it settles.
"""

from __future__ import annotations

import os
import time
from typing import Optional

try:  # hashlib's blake2b, without hashlib loading OpenSSL for algorithms fwdlint never uses (~4 ms a run)
    from _blake2 import blake2b
except ImportError:  # an interpreter built without its own blake2
    from hashlib import blake2b

SETTLED_NS = 3_000_000_000


def stamp(info: os.stat_result) -> str:
    return f"{info.st_size}:{info.st_mtime_ns}:{info.st_ctime_ns}:{info.st_ino}:{info.st_dev}"


def digest(content: bytes) -> bytes:
    return blake2b(content, digest_size=20).digest()


class Stamps:
    """The digests a run may take by stamp (``known``, read from the database once), and those it
    computed and may keep (``fresh``: written when the store closes)."""

    def __init__(self, known: dict[str, tuple[str, str]]) -> None:
        self.known = known  # absolute path -> (stamp, hex digest)
        self.fresh: dict[str, tuple[str, str]] = {}

    def lookup(self, path: str, info: os.stat_result) -> Optional[bytes]:
        """The digest of the file at ``path`` whose status is ``info``, if its stamp is kept."""
        found = self.known.get(os.path.abspath(path))
        if found is None or found[0] != stamp(info):
            return None
        return bytes.fromhex(found[1])

    def learn(self, path: str, info: os.stat_result, digest_: bytes) -> None:
        """``digest_`` is of the bytes read after ``info`` was taken: kept if the file has settled
        (a write after ``info`` moves its times past the clock now, so the next stamp differs)."""
        if max(info.st_mtime_ns, info.st_ctime_ns) > time.time_ns() - SETTLED_NS:
            return
        row = (stamp(info), digest_.hex())
        absolute = os.path.abspath(path)
        if self.known.get(absolute) != row:
            self.fresh[absolute] = row
