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

import os
from pathlib import Path
from typing import Iterator, Optional, Sequence

from lint_rules.discover import python_files

MARKERS = ("pyproject.toml", "setup.cfg", "setup.py", ".git")


def module_name_for(path: Path) -> tuple[str, bool, Path]:
    """Dotted module name of ``path`` (walking up ``__init__.py`` packages), whether it is a
    package's ``__init__``, and the directory the top package lives in."""
    path = path.resolve()
    is_package = path.name == "__init__.py"
    parts = [] if is_package else [path.stem]
    directory = path.parent
    while (directory / "__init__.py").is_file() and directory.parent != directory:
        parts.append(directory.name)
        directory = directory.parent
    return ".".join(reversed(parts)), is_package, directory


def is_project_root(directory: Path) -> bool:
    return any(os.path.exists(directory / marker) for marker in MARKERS)


def find_root(path: Path) -> Optional[Path]:
    """The nearest directory at or above ``path`` that holds a project marker."""
    directory = path.resolve()
    if not directory.is_dir():
        directory = directory.parent
    for candidate in (directory, *directory.parents):
        if is_project_root(candidate):
            return candidate
    return None


def project_files(root: Path, exclude: Sequence[str] = ()) -> Iterator[str]:
    """Every Python file of the project at ``root`` (absolute paths), nested projects left out."""
    yield from python_files([str(root)], exclude, skip_dir=lambda d: is_project_root(Path(d)))
