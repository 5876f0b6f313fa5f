"""Hostile input, one case each: every run gets one clear line per bad file naming the file and the
problem, still checks the good file beside it, returns the documented exit status (2 when a file
could not be read or parsed, else 1 for the good file's finding) and prints no traceback.

The good file (``good.py``) holds one FWD001 finding, so a run that silently stopped early would
miss it. Cases that are valid Python (CRLF, lone CR, latin-1 with a cookie, a 200,000-line file,
10,000 methods, Python 3.12/3.13 syntax...) must give no error line at all.
"""

from __future__ import annotations

import ast
import os
import shutil
import sys
import threading
import time
from pathlib import Path
from typing import Callable, Optional, Union

import pytest
from fixture_cases import run_cli

GOOD = "import torch.nn as nn\n\n\nclass M(nn.Module):\n    def gen(self, x):\n        return self(x)\n"


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def _chain_class(n: int) -> bytes:
    methods = "".join(f"    def m{i}(self, x):\n        return self.m{i + 1}(x)\n\n" for i in range(n))
    return (f"import torch.nn as nn\n\n\nclass Big(nn.Module):\n{methods}"
            f"    def m{n}(self, x):\n        return self(x)\n").encode()


def _deep_nesting(depth: int) -> bytes:
    body = "".join("    " * i + f"if x{i}:\n" for i in range(depth)) + "    " * depth + "pass\n"
    return body.encode()


NEW_SYNTAX = (b"type Vec[T] = list[T]\n\n\ndef first[T](xs: list[T]) -> T:\n    return xs[0]\n\n\n"
              b"class Box[T]:\n    def get[U](self, u: U) -> U:\n        return u\n\n\nx = f'{\"a\" + f\"{1}\"}'\n")

# name -> (make the hostile files in the project dir, whether an error line is expected and what it says)
Case = tuple[Callable[[Path], None], Optional[Union[str, tuple[str, ...]]]]

CASES: dict[str, Case] = {
    "nul_bytes": (lambda d: _write(d / "nul.py", b"x = 1\n\x00y = 2\n"), "nul.py"),
    "invalid_utf8": (lambda d: _write(d / "bad_utf8.py", b"x = '\xff\xfe'\n"), "bad_utf8.py"),
    # CPython's compiler (import) accepts bytes that are not UTF-8 inside a comment: so does fwdlint
    "invalid_utf8_in_a_comment": (lambda d: _write(d / "comment.py", GOOD.replace("M(", "C(").encode()
                                                   + b"# caf\xe9 \xed\xa0\x80\n"), None),
    "latin1_without_cookie": (lambda d: _write(d / "latin.py", "s = 'café'\n".encode("latin-1")), "latin.py"),
    "latin1_with_cookie": (lambda d: _write(d / "latin.py", "# -*- coding: latin-1 -*-\ns = 'café'\n"
                                                            .encode("latin-1")), None),
    # LibCST accepts a truncated \\u escape in a string; Python refuses the file (checked for every file given)
    "bad_escape_libcst_accepts": (lambda d: _write(d / "esc.py", b'"""Mod\\ule."""\nimport torch.nn as nn\n\n\n'
                                                               b'class E(nn.Module):\n    pass\n'), "esc.py"),
    "utf16_with_bom": (lambda d: _write(d / "u16.py", "x = 1\n".encode("utf-16")), "u16.py"),
    "crlf": (lambda d: _write(d / "crlf.py", GOOD.replace("M(", "C(").replace("\n", "\r\n").encode()), None),
    "lone_cr": (lambda d: _write(d / "cr.py", b"x = 1\ry = 2\r"), None),
    "empty_file": (lambda d: _write(d / "empty.py", b""), None),
    "huge_file": (lambda d: _write(d / "huge.py", b"x = 1\n" * 200_000), None),
    "deep_nesting": (lambda d: _write(d / "deep.py", b"x = " + b"(" * 150 + b"1" + b")" * 150 + b"\n"
                                      + _deep_nesting(90)), None),
    "ten_thousand_methods": (lambda d: _write(d / "many.py", b"import torch.nn as nn\n\n\nclass Many(nn.Module):\n"
                                              + b"".join(b"    def f%d(self, x):\n        return x\n" % i
                                                         for i in range(10_000))), None),
    "long_chain": (lambda d: _write(d / "chain.py", _chain_class(300)), None),
    "cyclic_inheritance": (lambda d: (_write(d / "pkg" / "__init__.py", b""),
                                      _write(d / "pkg" / "a.py", b"from pkg.b import B\n\n\nclass A(B):\n"
                                                                 b"    def run(self):\n        return self.go()\n"),
                                      _write(d / "pkg" / "b.py", b"from pkg.a import A\n\n\nclass B(A):\n"
                                                                 b"    def go(self):\n        return self.run()\n")),
                           None),
    "imports_itself": (lambda d: _write(d / "selfie.py", b"import selfie\nfrom selfie import *\n"
                                                         b"import torch.nn as nn\n\n\nclass S(selfie.S):\n"
                                                         b"    def f(self):\n        return 1\n"), None),
    "symlink_loop": (lambda d: (os.symlink("loop_b.py", d / "loop_a.py"), os.symlink("loop_a.py", d / "loop_b.py")),
                     ("loop_a.py", "loop_b.py")),
    "directory_named_py": (lambda d: (d / "pkg.py").mkdir(), None),
    "names_with_spaces_and_unicode": (lambda d: (_write(d / "my model.py", GOOD.replace("M(", "A(").encode()),
                                                 _write(d / "módèle_ü.py", GOOD.replace("M(", "B(").encode())),
                                      None),
    # CPython's parser gives up with MemoryError / RecursionError (not SyntaxError): Python refuses
    # the file, so does fwdlint, in one line (this MemoryError used to end the run with exit 1)
    "python_parser_memory_error": (lambda d: _write(d / "deep.py", b"x = " + b"-" * 100_000 + b"1\n"), "deep.py"),
    "python_parser_recursion_error": (lambda d: _write(d / "long.py", b"x = " + b" + ".join([b"a"] * 10_000) + b"\n"),
                                      "long.py"),
    # judged for the target Python, here the one running the test (tests/test_target_version.py: others)
    "python_312_313_syntax": (lambda d: _write(d / "new.py", NEW_SYNTAX),
                              "new.py" if sys.version_info < (3, 12) else None),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_hostile_case(name: str, tmp_path: Path) -> None:
    make, error = CASES[name]
    (tmp_path / "pyproject.toml").write_text("")
    _write(tmp_path / "good.py", GOOD.encode())
    make(tmp_path)
    proc = run_cli(tmp_path, ".")
    assert "Traceback" not in proc.stderr, proc.stderr
    assert "good.py:5:9: FWD001" in proc.stdout, (proc.stdout, proc.stderr)
    errors = [line for line in proc.stderr.splitlines() if not line.startswith("fwdlint: read ")]
    if error is None:
        assert errors == [], errors
        assert proc.returncode == 1, proc.stderr
    else:
        names = (error,) if isinstance(error, str) else error
        assert len(errors) == len(names) and all(name in line for name, line in zip(names, errors)), errors
        assert all(line.split(":", 1)[0].endswith(name) for name, line in zip(names, errors)), errors
        assert proc.returncode == 2


def test_unreadable_file_among_good_ones(tmp_path: Path) -> None:
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        pytest.skip("root reads every file")
    (tmp_path / "pyproject.toml").write_text("")
    _write(tmp_path / "good.py", GOOD.encode())
    _write(tmp_path / "secret.py", b"x = 1\n")
    (tmp_path / "secret.py").chmod(0)
    proc = run_cli(tmp_path, ".")
    assert "good.py:5:9: FWD001" in proc.stdout and proc.returncode == 2
    assert "secret.py" in proc.stderr and "Traceback" not in proc.stderr


def test_unreadable_file_as_another_user(nobody) -> None:
    """As root, run the CLI as ``nobody`` so a mode-000 file is really unreadable (in a directory under
    /tmp that nobody can reach: the checkout may sit under a mode-700 home)."""
    outer = nobody.workdir()
    (outer / "pyproject.toml").write_text("")
    _write(outer / "good.py", GOOD.encode())
    _write(outer / "secret.py", b"x = 1\n")
    (outer / "secret.py").chmod(0)
    try:
        proc = nobody.run(["-m", "lint_rules.cli", "--no-cache", "."], cwd=outer)
    finally:
        shutil.rmtree(outer)
    assert "good.py:5:9: FWD001" in proc.stdout and proc.returncode == 2, (proc.stdout, proc.stderr)
    errors = [line for line in proc.stderr.splitlines() if not line.startswith("fwdlint: read ")]
    assert len(errors) == 1 and "secret.py" in errors[0] and "Traceback" not in proc.stderr, errors


# Issue 36: a path under a directory this user cannot read, named first or second. Mode 000: nothing
# under it can be reached; 0o644: listed, not searched (stat and open fail); "directory": the mode-000
# directory itself. path -> the one error line's text after "<path>: error: ".
UNREADABLE = {"file-under-000": ("locked/m.py", 0o000, "cannot read: Permission denied"),
              "file-under-644": ("locked/m.py", 0o644, "cannot read: Permission denied"),
              "directory": ("locked", 0o000, "cannot list directory: Permission denied")}


@pytest.mark.parametrize("first", [True, False], ids=["first", "second"])
@pytest.mark.parametrize("shape", list(UNREADABLE))
def test_a_path_under_an_unreadable_directory(request: pytest.FixtureRequest, tmp_path: Path, shape: str,
                                              first: bool) -> None:
    """Root reads every directory, so as root the CLI runs as ``nobody`` (the ``nobody`` fixture; it
    skips only where no interpreter can be run as nobody); as anyone else, as that user."""
    as_root = hasattr(os, "geteuid") and os.geteuid() == 0
    nobody = request.getfixturevalue("nobody") if as_root else None
    top = nobody.workdir() if nobody else tmp_path
    path, mode, error = UNREADABLE[shape]
    (top / "pyproject.toml").write_text("")
    _write(top / "good.py", GOOD.encode())
    _write(top / "locked" / "m.py", GOOD.encode())
    for file in (top / "pyproject.toml", top / "good.py", top / "locked" / "m.py"):
        file.chmod(0o644)
    (top / "locked").chmod(mode)
    args = ["--no-cache", *((path, "good.py") if first else ("good.py", path))]
    try:
        proc = nobody.run(["-m", "lint_rules.cli", *args], cwd=top) if nobody else run_cli(top, *args)
    finally:
        (top / "locked").chmod(0o755)
        if nobody:
            shutil.rmtree(top)
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert "good.py:5:9: FWD001" in proc.stdout and proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert proc.stderr.splitlines() == [f"{path}: error: {error}"], proc.stderr


def test_a_path_that_does_not_exist(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("")
    _write(tmp_path / "good.py", GOOD.encode())
    proc = run_cli(tmp_path, "good.py", "missing.py")
    assert "good.py:5:9: FWD001" in proc.stdout and proc.returncode == 2
    assert "missing.py" in proc.stderr and "Traceback" not in proc.stderr


def test_a_file_that_disappears_during_the_run(tmp_path: Path) -> None:
    """Many files and one deleted while the run is under way: the run finishes, no traceback."""
    (tmp_path / "pyproject.toml").write_text("")
    _write(tmp_path / "good.py", GOOD.encode())
    for i in range(400):
        _write(tmp_path / f"f{i:03d}.py", GOOD.replace("class M", f"class M{i}").encode())
    victim = tmp_path / "f399.py"
    stop = threading.Event()

    def remove_soon() -> None:
        time.sleep(0.3)
        if not stop.is_set():
            victim.unlink(missing_ok=True)

    remover = threading.Thread(target=remove_soon)
    remover.start()
    try:
        proc = run_cli(tmp_path, "--no-cache", ".")
    finally:
        stop.set()
        remover.join()
    assert "Traceback" not in proc.stderr, proc.stderr
    assert "good.py:5:9: FWD001" in proc.stdout
    errors = [line for line in proc.stderr.splitlines() if not line.startswith("fwdlint: read ")]
    assert len(errors) <= 1 and all("f399.py" in e for e in errors), errors  # gone before or after it was read
    assert proc.returncode == (2 if errors else 1)


def test_the_linter_never_imports_or_runs_what_it_reads(tmp_path: Path) -> None:
    """A file whose import would delete another file and raise: linting it leaves both alone."""
    (tmp_path / "pyproject.toml").write_text("")
    canary = tmp_path / "canary.txt"
    canary.write_text("still here")
    _write(tmp_path / "evil.py", (
        "import os\nos.remove(os.path.join(os.path.dirname(__file__), 'canary.txt'))\n"
        "raise SystemExit('imported!')\nimport torch.nn as nn\n\n\n"
        "class E(nn.Module):\n    def gen(self, x):\n        return self(x)\n").encode())
    _write(tmp_path / "user.py",
           b"from evil import E\n\n\nclass F(E):\n    def more(self, x):\n        return self.gen(x)\n")
    proc = run_cli(tmp_path, ".")
    assert canary.read_text() == "still here"
    assert "evil.py:8:9: FWD001" in proc.stdout and "user.py:5:9: FWD001" in proc.stdout, proc.stdout
    assert proc.returncode == 1 and "imported!" not in proc.stderr


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_positions_follow_pythons_line_ends(newline: str, tmp_path: Path) -> None:
    # a lone CR ends a line for Python (and \f, \v, U+2028 in a comment do not): the reported line
    # of the def is the one ast gives, whatever the file's line ends
    text = ("# a comment with \x0c, \x0b and \u2028 inside\n" + GOOD).replace("\n", newline)
    _write(tmp_path / "m.py", text.encode())
    (tmp_path / "pyproject.toml").write_text("")
    proc = run_cli(tmp_path, "m.py")
    line = next(n.lineno for n in ast.walk(ast.parse(text)) if isinstance(n, ast.FunctionDef))
    assert proc.stdout.startswith(f"m.py:{line}:9: FWD001 M.gen "), proc.stdout
