"""The flake8 plugin's warning that flake8 is about to check a virtual environment: flake8's default
exclude leaves ``.venv`` in, fwdlint's own discovery skips it (``warn_of_environments``)."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Optional, Sequence


#: Directories listed at most, breadth first, looking for environments below the paths flake8 was
#: given (``_environments``): a few milliseconds; a project's ``.venv`` is at its top.
ENVIRONMENT_SEARCH = 2000


def _environments(paths: Sequence[str], exclude: Sequence[str]) -> dict[str, str]:
    """The virtual environments (``pyvenv.cfg``), conda prefixes (``conda-meta/``) and ``site-packages``
    directories flake8 is about to walk into, each with the ``exclude`` pattern that leaves it out: one
    below a given directory that flake8's ``exclude``/``extend-exclude`` (and its defaults) leave in,
    found as flake8's discovery walks (symlinked directories not followed; the first
    ``ENVIRONMENT_SEARCH`` directories), by its name (``.venv``); one holding a given path by its path
    (``.venv/*``: flake8 matches a given file by its own name or its whole path)."""
    import functools
    from collections import deque

    from lint_rules.discover import matches, shorter_path

    def environment(directory: str, names: Sequence[str]) -> bool:
        return (os.path.basename(directory) == "site-packages" or "pyvenv.cfg" in names
                or "conda-meta" in names and os.path.isdir(os.path.join(directory, "conda-meta")))

    @functools.lru_cache(maxsize=None)
    def holding(directory: str) -> Optional[str]:  # the outermost environment ``directory`` is in, if any
        parent = os.path.dirname(directory)
        outer = holding(parent) if parent != directory else None
        markers = [name for name in ("pyvenv.cfg", "conda-meta") if os.path.exists(os.path.join(directory, name))]
        return outer or (directory if environment(directory, markers) else None)

    found: dict[str, str] = {}
    queue: deque[str] = deque()
    for given in paths or ["."]:
        if given == "-" or matches(given, exclude):
            continue
        absolute = os.path.abspath(given)
        holder = holding(os.path.dirname(absolute))
        if holder:
            found.setdefault(holder, os.path.join(shorter_path(holder), "*"))
        elif os.path.isdir(absolute):
            queue.append(given)
    listed = 0
    while queue and listed < ENVIRONMENT_SEARCH:
        directory = queue.popleft()
        listed += 1
        try:
            with os.scandir(directory) as listing:
                entries = list(listing)
        except OSError:
            continue
        if environment(directory, [entry.name for entry in entries]):
            found.setdefault(os.path.abspath(directory), os.path.basename(os.path.normpath(directory)))
            continue
        for entry in sorted(entries, key=lambda e: e.name):
            if entry.is_dir(follow_symlinks=False) and not matches(entry.path, exclude):
                queue.append(entry.path)
    return found


def warn_of_environments(options: argparse.Namespace) -> None:
    """flake8's default ``exclude`` leaves virtual environments in (fwdlint's own discovery skips them),
    so ``flake8 --select FWD .`` in a project with a ``.venv`` checks every installed package: minutes,
    and other plugins may crash on them. The plugin cannot change flake8's discovery; it says so once
    per run, on stderr, with the exclude to add. Once: in flake8's main process only, before any file
    is checked (``-j`` workers forked from it never parse options; spawned ones do, and stay quiet)."""
    import multiprocessing

    from lint_rules.discover import shorter_path

    if multiprocessing.parent_process() is not None:
        return
    exclude = [*(getattr(options, "exclude", None) or ()), *(getattr(options, "extend_exclude", None) or ())]
    found = _environments(getattr(options, "filenames", None) or [], exclude)
    if not found:
        return
    names = ",".join(dict.fromkeys(found.values()))
    listed = ", ".join(map(shorter_path, list(found)[:3])) + (f" (+{len(found) - 3} more)" if len(found) > 3 else "")
    sys.stderr.write(f"fwdlint: warning: flake8 will check the installed packages in {listed} (a virtual "
                     f"environment: flake8's default exclude does not skip it, fwdlint's does). Add "
                     f"--extend-exclude={names}, or "
                     f"extend-exclude = {names} under [flake8] in setup.cfg, tox.ini or .flake8\n")
