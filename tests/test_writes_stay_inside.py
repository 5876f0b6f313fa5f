"""What fwdlint reads and writes stays where it should (issue 21):

* ``python -m lint_rules`` imports nothing from the working directory (a checked project's own
  ``json.py`` or ``libcst.py``), installed or run from a source checkout;
* ``--fix`` and ``--output-file`` never write through a symlink to a file outside the project;
* ``--diff`` applies with ``git apply`` and ``patch -p1`` for lone-CR files and names with tabs,
  spaces, quotes and backslashes.
"""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
from pathlib import Path

import pytest
from fixture_cases import run_cli

import lint_rules

BAD = "import torch.nn as nn\n\nclass M(nn.Module):\n    def gen(self, x):\n        return self(x)\n"
FINDING = "some_file.py:4:9: FWD001 M.gen runs forward computation outside forward"
REPO = Path(lint_rules.__file__).resolve().parent.parent


def _plant_shadows(directory: Path) -> None:
    """Modules fwdlint imports, as a checked project might hold them, that stop the run if imported."""
    for name in ("json", "libcst"):
        (directory / f"{name}.py").write_text(f'raise SystemExit("imported the cwd {name}")\n')
    (directory / "some_file.py").write_text(BAD)


def _module_run(python: str, cwd: Path, module: str = "lint_rules") -> subprocess.CompletedProcess:
    return subprocess.run([python, "-m", module, "some_file.py"], cwd=cwd, capture_output=True, text=True,
                          timeout=300)


@pytest.mark.parametrize("module", ["lint_rules", "lint_rules.cli"])
def test_module_run_does_not_import_from_the_working_directory(tmp_path: Path, module: str) -> None:
    _plant_shadows(tmp_path)
    proc = _module_run(sys.executable, tmp_path, module)
    assert (proc.returncode, proc.stderr) == (1, ""), proc.stderr
    assert proc.stdout.startswith(FINDING)


def test_module_run_from_a_source_checkout_that_is_not_installed(tmp_path: Path) -> None:
    """A fresh venv that sees this environment's packages (libcst) through a .pth path line, but
    not its editable install of fwdlint (``.pth`` files in that directory are not processed), run
    from the root of a copy of the source: it finds ``lint_rules`` there, and ``json`` and
    ``libcst`` where they are installed."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300)
    python = str(venv / "bin" / "python")
    purelib = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True, timeout=60).stdout.strip()
    Path(purelib, "outer.pth").write_text("".join(f"{d}\n" for d in site.getsitepackages()))
    checkout = tmp_path / "checkout"
    shutil.copytree(REPO / "lint_rules", checkout / "lint_rules", ignore=shutil.ignore_patterns("__pycache__"))
    _plant_shadows(checkout)
    not_installed = subprocess.run([python, "-c", "import lint_rules"], cwd=tmp_path, capture_output=True,
                                   timeout=60)
    assert not_installed.returncode != 0
    proc = _module_run(python, checkout)
    assert (proc.returncode, proc.stderr) == (1, ""), proc.stderr
    assert proc.stdout.startswith(FINDING)


@pytest.fixture
def linked(tmp_path: Path) -> Path:
    """``proj`` (a project) with ``ok.py``, ``link.py -> ../outside/secret.py``, ``inlink.py ->
    inner.py`` and ``report.txt -> ../outside/report.txt``."""
    outside, proj = tmp_path / "outside", tmp_path / "proj"
    outside.mkdir()
    proj.mkdir()
    (proj / "pyproject.toml").write_text("")
    for path in (outside / "secret.py", proj / "ok.py", proj / "inner.py"):
        path.write_text(BAD)
    (outside / "report.txt").write_text("keep\n")
    (proj / "link.py").symlink_to(Path("..", "outside", "secret.py"))
    (proj / "inlink.py").symlink_to("inner.py")
    (proj / "report.txt").symlink_to(Path("..", "outside", "report.txt"))
    return proj


def test_fix_refuses_a_symlink_out_of_the_project_and_fixes_the_rest(linked: Path) -> None:
    proc = run_cli(linked, "--fix", "link.py", "ok.py", "inlink.py")
    assert proc.returncode == 2
    assert (linked.parent / "outside" / "secret.py").read_text() == BAD
    refused = [line for line in proc.stderr.splitlines() if "outside the project" in line]
    assert len(refused) == 1, proc.stderr
    assert refused[0].startswith("link.py: error: not written: link.py leads through a symlink to ")
    assert "@forward_entry" in (linked / "ok.py").read_text()
    # a link to a project file: the target is fixed in place, the link stays a link
    assert (linked / "inlink.py").is_symlink() and os.readlink(linked / "inlink.py") == "inner.py"
    assert "@forward_entry" in (linked / "inner.py").read_text()


def test_project_root_bounds_fix_writes(linked: Path) -> None:
    """With ``--project-root``, a link to a file outside that root is refused, even inside a marker."""
    sub = linked / "sub"
    sub.mkdir()
    (sub / "link.py").symlink_to(Path("..", "inner.py"))
    proc = run_cli(linked, "--fix", "--project-root", "sub", "sub/link.py")
    assert proc.returncode == 2 and "outside the project" in proc.stderr
    assert (linked / "inner.py").read_text() == BAD


@pytest.mark.parametrize("options", [("ok.py",), ("--diff", "ok.py"), ("--fix", "--format", "json", "ok.py")])
def test_output_file_refuses_a_symlink_out_of_the_project(linked: Path, options: tuple[str, ...]) -> None:
    proc = run_cli(linked, "--output-file", "report.txt", *options)
    assert proc.returncode == 2
    assert (linked.parent / "outside" / "report.txt").read_text() == "keep\n"
    assert (linked / "report.txt").is_symlink()
    assert proc.stderr.splitlines()[-1].startswith("fwdlint: error: --output-file report.txt: cannot write: "
                                                   "report.txt leads through a symlink to ")


def test_project_root_bounds_the_output_file(linked: Path) -> None:
    """With ``--project-root``, as for ``--fix``: a link out of that root is refused, even inside a marker."""
    sub = linked / "sub"
    sub.mkdir()
    (linked / "kept.txt").write_text("keep\n")
    (sub / "report.txt").symlink_to(Path("..", "kept.txt"))
    proc = run_cli(linked, "--project-root", "sub", "--output-file", "sub/report.txt", "ok.py")
    assert proc.returncode == 2 and "leads through a symlink to " in proc.stderr, proc.stderr
    assert (linked / "kept.txt").read_text() == "keep\n"


def test_output_file_outside_the_project_without_a_symlink_is_written(linked: Path) -> None:
    target = linked.parent / "outside" / "plain.txt"
    proc = run_cli(linked, "--output-file", str(target), "ok.py")
    assert proc.returncode == 1 and target.read_text().startswith("ok.py:4:9: FWD001")


LONE_CR = BAD.replace("\n", "\r").encode()
CASES = {"lone CR": ("cr.py", LONE_CR), "CRLF": ("crlf.py", BAD.replace("\n", "\r\n").encode()),
         "space": ("sp ace.py", BAD.encode()), "tab": ("ta\tb.py", BAD.encode()),
         "quote and backslash": ('q"u\\o.py', BAD.encode()), "non-ASCII": ("\u00e9t\u00e9.py", BAD.encode())}
APPLY = {"git": ["git", "apply", "fix.diff"], "patch": ["patch", "-p1", "-i", "fix.diff"]}


@pytest.mark.parametrize("tool", APPLY)
@pytest.mark.parametrize("case", CASES)
def test_diff_applies(tmp_path: Path, case: str, tool: str) -> None:
    if shutil.which(tool) is None:
        pytest.skip(f"{tool} is not installed")
    name, content = CASES[case]
    work, fixed = tmp_path / "work", tmp_path / "fixed"
    for directory in (work, fixed):
        directory.mkdir()
        (directory / "pyproject.toml").write_text("")
        (directory / name).write_bytes(content)
    subprocess.run(["git", "init", "-q", "."], cwd=work, check=True, timeout=60)
    assert run_cli(fixed, "--fix", name).returncode == 0
    assert (fixed / name).read_bytes() != content
    diff = subprocess.run([sys.executable, "-m", "lint_rules.cli", "--diff", name], cwd=work, capture_output=True,
                          timeout=300)
    assert diff.returncode == 1, diff.stderr
    (work / "fix.diff").write_bytes(diff.stdout)
    applied = subprocess.run(APPLY[tool], cwd=work, capture_output=True, text=True, timeout=60)
    assert applied.returncode == 0, applied.stderr + applied.stdout
    assert (work / name).read_bytes() == (fixed / name).read_bytes()
