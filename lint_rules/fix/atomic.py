"""Writing a fixed file safely.

A fixer that dies half-way through a write must never leave a truncated source file behind,
and a file's permission bits (an executable script) must survive the rewrite. So the new
bytes go to a temporary file in the same directory (same file system, so ``os.replace`` is an
atomic rename), get the original mode, and only then replace the original.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path


class ChangedOnDisk(Exception):
    """The file no longer holds the bytes the fix was computed from."""


def atomic_write(path: str, data: bytes, expected_old: bytes | None = None) -> None:
    """Replace ``path``'s content by ``data`` atomically, keeping its permission bits.

    With ``expected_old``, refuse (``ChangedOnDisk``) if the file changed since it was read:
    a fix computed from stale bytes would overwrite someone's edit. A symlink is followed, so
    the link stays a link and its target gets the new content.
    """
    target = Path(os.path.realpath(path))
    if expected_old is not None and target.read_bytes() != expected_old:
        raise ChangedOnDisk(f"{path} changed while it was being fixed")
    mode = stat.S_IMODE(target.stat().st_mode)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".fwdlint-tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
