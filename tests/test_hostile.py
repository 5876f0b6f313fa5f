"""Hostile input never crashes, hangs or silently passes (issue 11, first part): deep call chains,
FIFOs named like Python files. Each gets one line naming the file; the other files are checked."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from fixture_cases import cli_json, flake8_rows, run_cli, run_flake8

GOOD = "import torch.nn as nn\n\n\nclass M(nn.Module):\n    def gen(self, x):\n        return self(x)\n"


def _chain(depth: int) -> str:
    lines = ["import torch.nn as nn", "", "", "class Deep(nn.Module):", "    def forward(self, x):",
             "        return x", ""]
    for i in range(depth):
        lines += [f"    def m{i}(self, x):", f"        return self.m{i + 1}(x)", ""]
    lines += [f"    def m{depth}(self, x):", "        return self(x)", ""]
    return "\n".join(lines)


def test_a_chain_of_700_methods_is_followed(tmp_path: Path) -> None:
    (tmp_path / "deep.py").write_text(_chain(700))
    proc = run_cli(tmp_path, "--format", "json", "deep.py")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert '"symbol": "Deep.m0"' in proc.stdout


def test_deeper_than_the_analysis_goes_is_one_error_line(tmp_path: Path) -> None:
    (tmp_path / "abyss.py").write_text(_chain(5000))
    (tmp_path / "good.py").write_text(GOOD)
    proc = run_cli(tmp_path, "abyss.py", "good.py")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("abyss.py: error: too deeply nested to analyse") and proc.stderr.count("\n") == 1
    assert "good.py:5:9: FWD001" in proc.stdout
    rows = flake8_rows(run_flake8(tmp_path, "--select", "FWD", "abyss.py", "good.py"))
    # flake8 goes on with the other file; the deep one is FWD000, never silently clean
    assert [(p, r, code) for p, r, _, code, _ in rows] == [("abyss.py", 1, "FWD000"), ("good.py", 5, "FWD001")]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this system")
def test_a_fifo_named_like_python_never_hangs(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.py")
    (tmp_path / "good.py").write_text(GOOD)
    walked = run_cli(tmp_path, ".")  # a directory walk leaves it out
    assert walked.returncode == 1 and "good.py:5:9" in walked.stdout and walked.stderr == ""
    named = run_cli(tmp_path, "pipe.py", "good.py")  # named on the command line: reported, not read
    assert named.returncode == 2
    assert named.stderr == "pipe.py: error: cannot read: not a regular file (FIFO, socket or device)\n"


def test_an_unreadable_directory_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A directory that cannot be listed (``chmod 000`` for anyone but root; simulated here, as the
    tests may run as root) is an error line and exit 2, not a silent skip."""
    from lint_rules import cli

    locked = tmp_path / "locked"
    locked.mkdir()
    (locked / "m.py").write_text(GOOD)
    (tmp_path / "good.py").write_text(GOOD)
    real_scandir = os.scandir

    def scandir(path: object = ".") -> object:
        if os.path.realpath(os.fspath(path)) == str(locked.resolve()):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    monkeypatch.chdir(tmp_path)
    captured: list[str] = []
    monkeypatch.setattr(cli.sys, "stderr", type("W", (), {"write": lambda self, t: captured.append(t)})())
    monkeypatch.setattr(cli.sys, "stdout", type("W", (), {"write": lambda self, t: captured.append(t)})())
    code = cli.main(["--no-cache", "."])
    text = "".join(captured)
    assert code == 2 and "locked: error: cannot list directory: Permission denied" in text
    assert "good.py:5:9: FWD001" in text


def test_a_file_given_twice_is_checked_once(tmp_path: Path) -> None:
    (tmp_path / "good.py").write_text(GOOD)
    proc = run_cli(tmp_path, "good.py", "./good.py", ".")
    assert proc.returncode == 1 and proc.stdout.count("FWD001") == 1


def test_a_subscripted_base_is_followed(tmp_path: Path) -> None:
    (tmp_path / "generic.py").write_text(
        "from typing import Generic, TypeVar\n\nimport torch.nn as nn\n\nT = TypeVar('T')\n\n\n"
        "class Base(nn.Module, Generic[T]):\n    def forward(self, x):\n        return x\n\n\n"
        "class Child(Base[int]):\n    def gen(self, x):\n        return self(x)\n")
    proc = run_cli(tmp_path, "generic.py")
    assert proc.returncode == 1 and "generic.py:14:9: FWD001 Child.gen" in proc.stdout


def test_noqa_lines_follow_python_line_ends(tmp_path: Path) -> None:
    """\\f and U+2028 are not line ends for Python: a later # noqa stays on its own line."""
    source = GOOD.replace("class M", "x = 1  # \f form feed\ny = '\u2028'\n\n\nclass M").replace(
        "def gen(self, x):", "def gen(self, x):  # noqa: FWD001")
    (tmp_path / "m.py").write_text(source, encoding="utf-8")
    proc = run_cli(tmp_path, "m.py")
    assert proc.returncode == 0, proc.stdout


def test_nul_byte_is_reported_at_its_line(tmp_path: Path) -> None:
    (tmp_path / "nul.py").write_bytes(b"x = 1\ny = 2\nclass A:\n    z = '\0'\n")
    proc = run_cli(tmp_path, "nul.py")
    assert proc.returncode == 2 and proc.stderr.startswith("nul.py: error: syntax error at line 4, column 10"), proc.stderr


def test_awkward_file_names_stay_on_one_line(tmp_path: Path) -> None:
    import subprocess
    import sys

    (tmp_path / "new\nline.py").write_text(GOOD)
    proc = run_cli(tmp_path, ".")
    assert proc.stdout.startswith("new\\nline.py:5:9: FWD001") and proc.stdout.count("\n") == 1
    raw = os.fsencode(tmp_path) + b"/latin\xe9.py"
    with open(raw, "wb") as fh:
        fh.write(GOOD.encode())
    env = {**os.environ, "PYTHONIOENCODING": "utf-8"}
    proc = subprocess.run([sys.executable, "-m", "lint_rules.cli", "."], cwd=tmp_path, capture_output=True,
                          env=env, timeout=120)
    assert proc.returncode == 1 and b"Traceback" not in proc.stderr and b"latin\\udce9.py:5:9: FWD001" in proc.stdout


def test_a_dense_star_import_graph_is_searched_within_bounds(tmp_path: Path) -> None:
    """Like transformers' packages, each module star-imports every other: looking up a name that
    is nowhere stops after a bounded number of files (``STAR_READS`` per name, 64) instead of
    reading the whole graph (transformers' tree made fwdlint run for more than 10 minutes)."""
    package = tmp_path / "zoo"
    package.mkdir()
    names = [f"m{i}" for i in range(300)]
    (package / "__init__.py").write_text("".join(f"from .{n} import *\n" for n in names))
    for name in names:
        others = "".join(f"from .{other} import *\n" for other in names if other != name)
        (package / f"{name}.py").write_text(others + f"\n\ndef helper_{name}(model):\n    return model.config\n")
    (tmp_path / "user.py").write_text(
        "import torch.nn as nn\nimport zoo\n\n\nclass M(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n        self.net = zoo.Missing()\n\n"
        "    def run(self, x):\n        zoo.nowhere(self.net)\n        return self.net(x)\n")
    code, payload = cli_json(tmp_path, "--no-cache", "user.py")
    assert code == 0 and payload["errors"] == [], payload
    assert payload["stats"]["files_read_to_resolve_names"] < len(names) / 2
    # the checked code's directory is not installed: what is, is torch's own (nn.Module's module)
    assert payload["stats"]["installed_files_read"] < 10
