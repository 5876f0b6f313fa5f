"""Where files sit: dotted module names from paths, and the project a file belongs to.

A project's root is the nearest directory, from the file upwards, holding ``pyproject.toml``,
``setup.cfg``, ``setup.py`` or ``.git`` (``--project-root`` overrides it). Every Python file under
the root (through the facts store) contributes its classes and registrations to the view a file
is checked with, so ``fwdlint .``, ``flake8 model.py`` and pre-commit given only staged files reach
the same verdict. A directory below the root with its own marker is a project of its own and is
not part of the parent's view. A file with no marker above it is checked with the files of the
run and the files they import only: walking a whole file system would be no one's intent.
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path
from typing import Iterator, Optional, Sequence

from lint_rules.discover import python_files, real_path

MARKERS = ("pyproject.toml", "setup.cfg", "setup.py", ".git")


def module_name_for(path: "Path | str", packages: Optional[dict[str, tuple[tuple[str, ...], Path]]] = None,
                    directories: Optional[dict[str, str]] = None) -> tuple[str, bool, Path]:
    """Dotted module name of ``path`` (walking up ``__init__.py`` packages), whether it is a
    package's ``__init__``, and the directory the top package lives in. ``packages``: the
    directories already walked, ``directories``: their real paths (``discover.real_path``), both
    kept by the caller for one run (the files of a directory share the walk; a process-wide memo
    would miss an ``__init__.py`` created between runs)."""
    # strings, not Paths: this runs for every file of every run, warm ones included
    real = real_path(str(path), directories) if directories is not None else str(Path(path).resolve())
    directory, name = os.path.split(real)
    is_package = name == "__init__.py"
    parts, top = _package_of(directory, {} if packages is None else packages)
    dot = name.rfind(".")
    stem = name[:dot] if 0 < dot < len(name) - 1 else name  # as ``Path.stem``
    return ".".join(parts if is_package else (*parts, stem)), is_package, top


def _package_of(directory: str, packages: dict[str, tuple[tuple[str, ...], Path]]
                ) -> tuple[tuple[str, ...], Path]:
    """The dotted package ``directory`` (a real path) is (empty if it is not one) and the directory
    above it."""
    found = packages.get(directory)
    if found is None:
        parent = os.path.dirname(directory)
        if os.path.isfile(os.path.join(directory, "__init__.py")) and parent != directory:
            parts, top = _package_of(parent, packages)
            found = (*parts, os.path.basename(directory)), top
        else:
            found = (), Path(directory)
        packages[directory] = found
    return found


def modules_in(directory: Path) -> list[Path]:
    """The ``*.py`` files directly in ``directory``, sorted (none if it is not a directory)."""
    return sorted(directory.glob("*.py")) if directory.is_dir() else []


def is_project_root(directory: "Path | str") -> bool:
    # strings, not Paths: the project walk asks for every directory it enters
    directory = str(directory)
    return any(os.path.exists(os.path.join(directory, marker)) for marker in MARKERS)


def find_root(path: Path, known: Optional[dict[Path, Optional[Path]]] = None) -> Optional[Path]:
    """The nearest directory at or above ``path`` that holds a project marker. ``known``: the
    directories already looked at and their roots, kept by the caller for one run (the checked
    files' directories share most of their way up)."""
    try:
        directory = path.resolve()
        if directory.exists() and not directory.is_dir():  # a directory that is not there yet (a new file's,
            directory = directory.parent                  # named by --stdin-filename) is walked from itself
    except (OSError, RuntimeError):  # a symlink loop, a name too long, a directory we may not search:
        directory = Path(os.path.abspath(path)).parent  # the file's own error line says so; walk from above
    known = {} if known is None else known
    walked = []
    root: Optional[Path] = None
    for candidate in (directory, *directory.parents):
        if candidate in known:
            root = known[candidate]
            break
        walked.append(candidate)
        if is_project_root(candidate):
            root = candidate
            break
    known.update(dict.fromkeys(walked, root))
    return root


def project_files(root: Path, exclude: Sequence[str] = ()) -> Iterator[str]:
    """Every Python file of the project at ``root`` (absolute paths), nested projects left out."""
    yield from python_files([str(root)], exclude, skip_dir=is_project_root)


#: The most files a project view reads. The largest packages swept (transformers: 2,860 files,
#: torch: 2,285) fit whole; the root a ``.git`` far above gives need not (pyenv's checkout around
#: the standard library: 14,800 files, 2,614 s instead of 537 s).
VIEW_LIMIT = 5000


def view_files(root: Path, near: Sequence[Path], exclude: Sequence[str] = (),
               limit: int = VIEW_LIMIT) -> tuple[list[str], bool]:
    """The files of the project view of ``root`` and whether it was bounded: every project file,
    or, when there are more than ``limit``, the ``limit`` nearest the checked files ``near``: their
    directories' trees first, then each parent's up to the root. Names from files left out are
    still resolved on demand (``ProjectIndex``); what is lost is the registrations and subclasses
    that only they hold."""
    root = root.resolve()
    everything = list(itertools.islice(project_files(root, exclude), limit + 1))
    if len(everything) <= limit:
        return everything, False
    chosen: dict[str, None] = {}
    starts = sorted({(p if p.is_dir() else p.parent).resolve() for p in near} or {root})
    levels = [[start, *(d for d in start.parents if root in d.parents or d == root)] for start in starts]
    for depth in range(max(len(level) for level in levels)):
        for level in levels:
            if depth < len(level):
                for path in itertools.islice(project_files(level[depth], exclude), limit):
                    chosen.setdefault(path)
                    if len(chosen) >= limit:
                        return list(chosen), True
    return list(chosen), True
