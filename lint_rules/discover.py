"""Which files a run checks: recurse into directories, skip VCS/venv/cache folders and
``--exclude`` globs; a file named on the command line is always read unless the user's own
``--exclude`` names it."""

from __future__ import annotations

import fnmatch
import os
import stat
from typing import Callable, Iterator, Optional, Sequence

DEFAULT_EXCLUDE = (".svn", "CVS", ".bzr", ".hg", ".git", "__pycache__", ".tox", ".nox", ".eggs", "*.egg",
                   ".venv", "venv", ".mypy_cache", ".pytest_cache", "node_modules", "site-packages")


def _matches(path: str, patterns: Sequence[str]) -> bool:
    name = os.path.basename(path.rstrip(os.sep)) or path
    return any(fnmatch.fnmatch(name, p) or fnmatch.fnmatch(path, p) or fnmatch.fnmatch(os.path.abspath(path), p)
               for p in patterns)


def _is_virtualenv(directory: str) -> bool:
    return os.path.isfile(os.path.join(directory, "pyvenv.cfg"))


def python_files(paths: Sequence[str], exclude: Sequence[str] = (),
                 skip_dir: Optional[Callable[[str], bool]] = None,
                 errors: Optional[list[tuple[str, str]]] = None) -> Iterator[str]:
    """Yield the files to check, in a stable order, as paths relative to how they were given,
    each once (a file given twice, or as ``./a.py`` and ``a.py``, is checked once); ``skip_dir``
    leaves out more directories below the given ones; a directory that cannot be listed is added
    to ``errors`` as ``(path, reason)`` instead of being skipped in silence."""
    seen: set[str] = set()

    def first_time(path: str) -> bool:
        key = os.path.realpath(path)
        if key in seen:
            return False
        seen.add(key)
        return True

    def unreadable(error: OSError) -> None:
        if errors is not None:
            errors.append((error.filename or "", f"cannot list directory: {error.strerror or error}"))

    for given in paths:
        if _matches(given, exclude):
            continue
        if not os.path.isdir(given):
            if first_time(given):
                yield given  # explicit files are read even if default rules would skip them
            continue
        for root, dirs, files in os.walk(given, onerror=unreadable):
            dirs[:] = sorted(
                d for d in dirs
                if not _matches(os.path.join(root, d), (*DEFAULT_EXCLUDE, *exclude))
                and not _is_virtualenv(os.path.join(root, d))
                and not (skip_dir is not None and skip_dir(os.path.join(root, d)))
            )
            for name in sorted(files):
                full = os.path.join(root, name)
                if name.endswith(".py") and not _matches(full, exclude) and _is_regular(full) and first_time(full):
                    yield os.path.normpath(full)


def _is_regular(path: str) -> bool:
    """Regular files only: a FIFO named ``x.py`` would block the read forever (a file named on
    the command line is still read, and ``store`` reports what it is)."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return True  # unreadable: let the reader report it
