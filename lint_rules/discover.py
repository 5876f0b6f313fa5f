"""Which files a run checks: recurse into directories, skip VCS/venv/cache folders and
``--exclude`` globs; a file named on the command line is always read unless the user's own
``--exclude`` names it.

Patterns mean what they mean to flake8 (``flake8.utils.normalize_path`` / ``matches_filename``):
a pattern holding a path separator (``mymodels/vae.py``, ``mymodels/*``, ``sub/``, ``./sub``,
``*/vae.py``) is anchored to the directory it was written relative to (the working directory for
options, the config file's directory for its values) and matched against the file's absolute
path; a pattern without one (``vae.py``, ``sub``, ``build_*``) is matched against the base name
of every file and directory. ``*`` also crosses ``/`` (``sub/*.py`` takes ``sub/deep/x.py`` too),
as in flake8. The same matching decides ``per-file-ignores``.
"""

from __future__ import annotations

import fnmatch
import functools
import os
import re
import stat
from typing import Callable, Iterator, Optional, Sequence

DEFAULT_EXCLUDE = (".svn", "CVS", ".bzr", ".hg", ".git", "__pycache__", ".tox", ".nox", ".eggs", "*.egg",
                   ".venv", "venv", ".mypy_cache", ".pytest_cache", "node_modules", "site-packages")


def normalize_pattern(pattern: str, parent: str = os.curdir) -> str:
    """``pattern`` as it is matched: anchored to ``parent`` if it names a path (holds a separator
    or is ``.``), else unchanged; trailing separators dropped. Idempotent."""
    separators = os.sep + (os.altsep or "")
    if pattern == "." or any(sep in pattern for sep in separators):
        pattern = os.path.abspath(os.path.join(parent, pattern))
    return pattern.rstrip(separators) or pattern


def normalize_patterns(patterns: Sequence[str], parent: str = os.curdir) -> tuple[str, ...]:
    return tuple(normalize_pattern(p, parent) for p in patterns)


def matches(path: str, patterns: Sequence[str]) -> bool:
    """Whether ``path`` (relative to the working directory, or absolute) is named by one of the
    normalized ``patterns``: by its base name or by its absolute path."""
    if not patterns:
        return False
    match = _matcher(tuple(patterns))
    name = os.path.basename(path.rstrip(os.sep + (os.altsep or "")))  # `sub/` is the directory `sub`
    if name not in ("", ".", "..") and match(os.path.normcase(name)):
        return True
    return match(os.path.normcase(os.path.abspath(path))) is not None


@functools.lru_cache(maxsize=64)
def _matcher(patterns: tuple[str, ...]) -> Callable[[str], Optional[re.Match[str]]]:
    """One regular expression for all ``patterns``, each read as ``fnmatch.fnmatch`` reads it: the walk
    asks for every directory, and a project of 2,500 files has about a thousand."""
    return re.compile("|".join(fnmatch.translate(os.path.normcase(p)) for p in patterns)).match


def real_path(path: str, directories: dict[str, str]) -> str:
    """``os.path.realpath(path)``, each directory's real path worked out once (``directories``: the
    memo, kept by the caller for one run): a file that is no link costs one ``lstat``, not one per
    level of its path. Files are kept in the memo too (a path's entry is its real path, whether it
    names a directory or a file): a warm run asks for each checked file three times."""
    known = directories.get(path)
    if known is not None:
        return known
    head, name = os.path.split(path)
    if name in ("", ".", ".."):
        return os.path.realpath(path)
    real = directories.get(head)
    if real is None:
        real = directories[head] = os.path.realpath(head or os.curdir)
    full = os.path.join(real, name)
    try:
        if stat.S_ISLNK(os.lstat(full).st_mode):
            full = os.path.realpath(full)
    except OSError:  # missing or unreadable: realpath keeps such a name as it is
        pass
    directories[path] = full
    return full


def _is_virtualenv(directory: str) -> bool:
    return os.path.isfile(os.path.join(directory, "pyvenv.cfg"))


def python_files(paths: Sequence[str], exclude: Sequence[str] = (),
                 skip_dir: Optional[Callable[[str], bool]] = None,
                 errors: Optional[list[tuple[str, str]]] = None) -> Iterator[str]:
    """Yield the files to check, in a stable order, as paths relative to how they were given,
    each once (a file given twice, or as ``./a.py`` and ``a.py``, is checked once); ``exclude``
    patterns not yet normalized are taken relative to the working directory; ``skip_dir``
    leaves out more directories below the given ones; a directory that cannot be listed is added
    to ``errors`` as ``(path, reason)`` instead of being skipped in silence."""
    exclude = normalize_patterns(exclude)
    skipped = (*DEFAULT_EXCLUDE, *exclude)
    seen: set[str] = set()
    directories: dict[str, str] = {}

    def first_time(path: str) -> bool:
        key = real_path(path, directories)
        if key in seen:
            return False
        seen.add(key)
        return True

    def unreadable(error: OSError) -> None:
        if errors is not None:
            errors.append((error.filename or "", f"cannot list directory: {error.strerror or error}"))

    for given in paths:
        if matches(given, exclude):
            continue
        if not os.path.isdir(given):
            if first_time(given):
                yield given  # explicit files are read even if default rules would skip them
            continue
        for root, real, dirs, files in _walk(given, unreadable):
            dirs[:] = sorted(
                d for d in dirs
                if not matches(os.path.join(root, d), skipped)
                and not _is_virtualenv(os.path.join(root, d))
                and not (skip_dir is not None and skip_dir(os.path.join(root, d)))
            )
            for name in sorted(files):
                full = os.path.join(root, name)
                if not name.endswith(".py") or matches(full, exclude):
                    continue
                entry = files[name]
                if entry.is_symlink():  # its target decides: stat and resolve it
                    if _is_regular(full) and first_time(full):
                        yield os.path.normpath(full)
                elif entry.is_file(follow_symlinks=False):  # the listing's file type: no stat, no lstat
                    key = os.path.join(real, name)  # as real_path, which finds no link
                    if key not in seen:
                        seen.add(key)
                        yield os.path.normpath(full)


def _walk(top: str, onerror: Callable[[OSError], None]
          ) -> Iterator[tuple[str, str, list[str], dict[str, os.DirEntry[str]]]]:
    """``os.walk(top, onerror=onerror)`` (top-down, links to directories not followed), each
    directory with its real path, the files given as their ``os.DirEntry`` by name: their type
    comes with the listing, so a walk of 2,500 files does not stat each of them again, and a
    directory's real path is its parent's and its name (no link is walked into) instead of a
    ``realpath`` per level. ``dirs`` may be changed in place, as ``os.walk``'s."""
    stack = [(top, os.path.realpath(top or os.curdir))]
    while stack:
        directory, real = stack.pop()
        dirs: list[str] = []
        links: set[str] = set()
        files: dict[str, os.DirEntry[str]] = {}
        try:
            with os.scandir(directory) as entries:
                for entry in entries:
                    try:
                        is_dir = entry.is_dir()
                    except OSError:
                        is_dir = False
                    if is_dir:
                        dirs.append(entry.name)
                        if entry.is_symlink():
                            links.add(entry.name)
                    else:
                        files[entry.name] = entry
        except OSError as error:
            onerror(error)
            continue
        yield directory, real, dirs, files
        stack.extend((os.path.join(directory, d), os.path.join(real, d)) for d in reversed(dirs) if d not in links)


def _is_regular(path: str) -> bool:
    """Regular files only: a FIFO named ``x.py`` would block the read forever (a file named on
    the command line is still read, and ``store`` reports what it is)."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return True  # unreadable: let the reader report it


def shorter_path(path: "os.PathLike[str] | str") -> str:
    """A path as messages name it: relative to the working directory when that is shorter."""
    try:
        relative = os.path.relpath(path)
    except ValueError:  # another drive (Windows)
        return str(path)
    return relative if len(relative) < len(str(path)) else str(path)
