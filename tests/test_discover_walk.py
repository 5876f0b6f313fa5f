"""``discover.python_files`` walks with ``os.scandir`` and takes each file's type from the listing:
it must list what a walk with ``os.walk`` and a ``stat``/``realpath`` per file lists, in the same
order, on a tree with links (to files, to directories, dangling, in a loop), a FIFO, excluded
names and an unreadable directory."""

from __future__ import annotations

import os
import stat
import sys

import pytest

from lint_rules.discover import DEFAULT_EXCLUDE, matches, normalize_patterns, python_files


def walk_with_os(paths, exclude=(), skip_dir=None, errors=None):
    """The walk as it was written before (``os.walk``, ``os.stat`` and ``os.path.realpath`` per file)."""
    exclude = normalize_patterns(exclude)
    skipped = (*DEFAULT_EXCLUDE, *exclude)
    seen = set()

    def first_time(path):
        key = os.path.realpath(path)
        if key in seen:
            return False
        seen.add(key)
        return True

    def regular(path):
        try:
            return stat.S_ISREG(os.stat(path).st_mode)
        except OSError:
            return True

    def unreadable(error):
        if errors is not None:
            errors.append((error.filename or "", f"cannot list directory: {error.strerror or error}"))

    for given in paths:
        if matches(given, exclude):
            continue
        if not os.path.isdir(given):
            if first_time(given):
                yield given
            continue
        for root, dirs, files in os.walk(given, onerror=unreadable):
            dirs[:] = sorted(d for d in dirs if not matches(os.path.join(root, d), skipped)
                             and not os.path.isfile(os.path.join(root, d, "pyvenv.cfg"))
                             and not (skip_dir is not None and skip_dir(os.path.join(root, d))))
            for name in sorted(files):
                full = os.path.join(root, name)
                if name.endswith(".py") and not matches(full, exclude) and regular(full) and first_time(full):
                    yield os.path.normpath(full)


@pytest.fixture
def tree(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in ("pkg/__init__.py", "pkg/a.py", "pkg/b.txt", "pkg/sub/c.py", "pkg/sub/deep/d.py",
                 "pkg/build_x/e.py", "pkg/.git/f.py", "pkg/env/g.py", "pkg/env/pyvenv.cfg", "other/h.py",
                 "pkg/z.py", "pkg/sub/y.py", "locked/i.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x = 1\n")
    os.symlink(tmp_path / "other", tmp_path / "pkg" / "linked_dir")  # listed, not walked into
    os.symlink(tmp_path / "other" / "h.py", tmp_path / "pkg" / "link_to_h.py")
    os.symlink(tmp_path / "pkg" / "a.py", tmp_path / "pkg" / "sub" / "again_a.py")  # a.py once
    os.symlink(tmp_path / "missing.py", tmp_path / "pkg" / "dangling.py")
    os.symlink(tmp_path / "pkg" / "loop.py", tmp_path / "pkg" / "loop.py")
    os.mkfifo(tmp_path / "pkg" / "fifo.py")
    os.mkdir(tmp_path / "pkg" / "dir.py")
    return tmp_path


@pytest.mark.parametrize("paths", [["."], ["pkg"], ["pkg/"], ["pkg/sub", "pkg"], ["other", "pkg/link_to_h.py", "pkg"],
                                   ["./pkg/../pkg"]])
@pytest.mark.parametrize("exclude", [(), ("build_*",), ("pkg/sub",), ("*/deep/*",)])
def test_same_files_as_os_walk(tree, paths, exclude):
    assert list(python_files(paths, exclude)) == list(walk_with_os(paths, exclude))


def test_skip_dir_and_absolute_root(tree):
    skip = lambda d: os.path.basename(d) == "deep"  # noqa: E731
    root = str(tree / "pkg")
    assert list(python_files([root], skip_dir=skip)) == list(walk_with_os([root], skip_dir=skip))
    assert str(tree / "pkg" / "sub" / "c.py") in python_files([root], skip_dir=skip)


@pytest.mark.skipif(sys.platform == "win32" or os.geteuid() == 0, reason="root reads any directory")
def test_unreadable_directory_reported(tree):
    os.chmod(tree / "locked", 0)
    try:
        ours, theirs = [], []
        assert list(python_files(["."], errors=ours)) == list(walk_with_os(["."], errors=theirs))
        assert ours == theirs and ours
    finally:
        os.chmod(tree / "locked", 0o755)


def test_unlistable_directory_reported(tree, monkeypatch):
    """As root, a directory that cannot be listed is made so by ``os.scandir`` failing on it."""
    real_scandir = os.scandir

    def scandir(path="."):
        if os.path.basename(str(path)) == "locked":
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    ours, theirs = [], []
    assert list(python_files(["."], errors=ours)) == list(walk_with_os(["."], errors=theirs))
    assert ours == theirs == [("./locked", "cannot list directory: Permission denied")]
    assert "locked/i.py" not in list(python_files(["."]))
