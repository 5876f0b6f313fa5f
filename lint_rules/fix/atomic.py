"""Writing a fixed file safely.

A fixer that dies half-way through a write must never leave a truncated source file behind,
and a file's permission bits (an executable script), owner and group must survive the rewrite.
So the new bytes go to a temporary file in the same directory (same file system, so
``os.replace`` is an atomic rename), get the original mode, owner and group, and only then
replace the original.

Refused, with the reason, leaving the file untouched:

* a file the user running the fix may not write (``os.access``: a 0444 file, for anyone but
  root), as ruff and black refuse it (their write opens the file, which the OS refuses; root
  writes it, and so does fwdlint, keeping the 0444). The rename would need only the directory's
  permission;
* an owner or group that cannot be kept (a file of another user fixed by a non-root user: the
  replacement would belong to whoever ran the fix);
* a file with more than one hard link: the rename would give this path a new inode and leave the
  other links with the old text, and writing in place instead would not be atomic. Fix a copy, or
  break the link (``cp f tmp && mv tmp f``) first;
* a path that leads, through a symlink (the file's or a directory's), outside its project
  (``OutsideProject``): a planted ``m.py -> ~/.bashrc`` must not turn ``--fix`` or
  ``--output-file`` into a write anywhere. A symlink to a file inside the project is followed:
  the target is rewritten in place and the link stays a link (it is never replaced by a file).
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from pathlib import Path

from lint_rules.diagnostics import shown
from lint_rules.layout import is_project_root


class ChangedOnDisk(Exception):
    """The file no longer holds the bytes the fix was computed from."""


class OutsideProject(OSError):
    """The path leads through a symlink to a file outside its project."""


def lexical_root(path: str) -> Path:
    """The nearest directory above ``path``, as named (symlinks not resolved: a linked directory
    is not a way out), that holds a project marker; else the file's own directory."""
    directory = Path(os.path.normpath(os.path.abspath(path))).parent
    for candidate in (directory, *directory.parents):
        if is_project_root(candidate):
            return candidate
    return directory


def _check_inside(path: str, target: str, root: Path | None) -> None:
    """Refuse (``OutsideProject``) a ``target`` reached through a symlink that lies outside the project."""
    if target == os.path.normpath(os.path.abspath(path)):
        return  # no symlink on the way: the path named is the file written, wherever it is
    base = os.path.realpath(root if root is not None else lexical_root(path))
    try:
        inside = os.path.commonpath([base, target]) == base
    except ValueError:  # another drive (Windows)
        inside = False
    if not inside:
        raise OutsideProject(f"{shown(path)} leads through a symlink to {shown(target)}, outside the "
                             f"project {shown(base)}: refusing to write there")


def atomic_write(path: str, data: bytes, expected_old: bytes | None = None, root: Path | None = None) -> None:
    """Replace ``path``'s content by ``data`` atomically, keeping its permission bits (or create it).

    With ``expected_old``, refuse (``ChangedOnDisk``) if the file changed since it was read:
    a fix computed from stale bytes would overwrite someone's edit. A symlink is followed, so
    the link stays a link and its target gets the new content, if that lies inside ``root``
    (default: ``lexical_root``); else ``OutsideProject``.
    """
    resolved = os.path.realpath(path)
    _check_inside(path, resolved, root)
    target = Path(resolved)
    if expected_old is not None and target.read_bytes() != expected_old:
        raise ChangedOnDisk(f"{path} changed while it was being fixed")
    try:
        info: os.stat_result | None = target.stat()
    except FileNotFoundError:
        if expected_old is not None:
            raise
        info = None  # a new file (a report): the umask's mode, the writer's owner
    if info is not None and stat.S_ISDIR(info.st_mode):  # its links are its entries, not other names
        raise IsADirectoryError(errno.EISDIR, "is a directory", path)
    if info is not None and not os.access(target, os.W_OK):
        # a file the user may not write (0444 for anyone but root): refused as ruff and black refuse
        # it, whose write opens the file; the rename would go through with the directory's permission
        raise PermissionError(f"{path} is read-only for this user (mode {stat.S_IMODE(info.st_mode):04o}), "
                              "as ruff and black leave it: make it writable first")
    if info is not None and info.st_nlink > 1:
        raise OSError(f"{path} has {info.st_nlink} hard links: replacing it would detach it from the others "
                      "(fix a copy, or break the link first)")
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".fwdlint-tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if info is not None:
            os.chmod(tmp, stat.S_IMODE(info.st_mode))
            _keep_owner(tmp, info, path)
        else:  # mkstemp's 0600 is for secrets; a new file gets what open() would give it
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _keep_owner(tmp: str, info: os.stat_result, path: str) -> None:
    """Give the temporary file the original's owner and group, or refuse the write."""
    if not hasattr(os, "chown"):
        return
    done = os.stat(tmp)
    if (done.st_uid, done.st_gid) == (info.st_uid, info.st_gid):
        return
    try:
        os.chown(tmp, info.st_uid, info.st_gid)
    except PermissionError:
        raise OSError(f"{path} belongs to uid {info.st_uid} / gid {info.st_gid}, which this user cannot give "
                      "the rewritten file; run the fix as its owner") from None
