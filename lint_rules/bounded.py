"""Reading a file that a configuration names: only a regular file, and only up to a size limit.

A run record (``from-record``), a configuration file (``--config``, a found ``pyproject.toml``) and
an environment's ``pyvenv.cfg``, ``.pth`` and editable-finder files are read because a (possibly
checked-in) configuration names them. ``from-record = "/dev/zero"`` grew a run to all memory and a
FIFO there hung it, so such a file is opened without blocking (a FIFO opens at once), must be a
regular file, and is read up to its limit: anything else is ``Refused``, whose ``str()`` says what
is wrong in a few words, for the caller's one line that names the file.
"""

from __future__ import annotations

import os
import stat

#: Size limits, in bytes. Records hold one entry per observed method (a few hundred bytes each):
#: 100 MB records were read fine, so 256 MiB is room, not a target.
RECORD_LIMIT = 256 * 2**20
CONFIG_LIMIT = 16 * 2**20
ENVIRONMENT_LIMIT = 1 * 2**20

_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


class Refused(Exception):
    """A file that is not read: ``str()`` is why (``is a FIFO, not a regular file``)."""


def kind_of(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def read_regular(path: str | os.PathLike[str], limit: int) -> bytes:
    """The bytes of the regular file at ``path`` (links followed), at most ``limit`` of them; raises
    ``Refused`` for anything else, ``FileNotFoundError`` if there is nothing there."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise
    except ValueError as error:  # an embedded NUL byte
        raise Refused(f"is not a usable path ({error})") from None
    except OSError as error:
        raise Refused(f"cannot be read: {error.strerror or error}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise Refused(f"is {kind_of(info.st_mode)}, not a regular file")
        if info.st_size > limit:
            raise Refused(f"is too large ({_size(info.st_size)}; at most {_size(limit)} is read)")
        chunks, left = [], limit + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
        if len(data) > limit:  # it grew while read
            raise Refused(f"is too large (more than {_size(limit)})")
        return data
    except OSError as error:
        raise Refused(f"cannot be read: {error.strerror or error}") from None
    finally:
        os.close(fd)


def _size(count: int) -> str:
    return f"{count / 2**20:.0f} MiB" if count >= 2**20 else f"{count} bytes"


def printable(path: str) -> str:
    """``path`` for an error line: control characters escaped, and not endless (a 5,000-character name)."""
    text = path if path.isprintable() else path.encode("unicode_escape", "backslashreplace").decode("ascii")
    return text if len(text) <= 300 else f"{text[:150]}...{text[-100:]} ({len(path)} characters)"
