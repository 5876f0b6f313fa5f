"""Reading the fixtures: cases and the expectations written as comments on reported lines.

Generic over rules: ``# expect: FWDxxx "a piece of the message"`` on the reported line, for any code.
The same reader serves the fixture directories (``fixtures/fwd*/``, the demo project) and the
rules' own INVALID examples."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys
import venv
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"

RULE_DIR = re.compile(r"fwd\d{3}")  # fixtures/fwd001: the cases of one rule
EXPECT = re.compile(r'#\s*expect:\s*(?P<code>FWD\d{3})(?:\s+"(?P<text>[^"]*)")?')


@dataclass(frozen=True)
class Expected:
    path: str  # relative to the case's working directory
    line: int
    code: str
    text: str


@dataclass(frozen=True)
class Case:
    name: str
    cwd: Path
    args: tuple[str, ...]
    files: tuple[Path, ...]
    root: Path  # the case's project directory (``fixtures/fwd001``): its files are the case's project view

    @property
    def id(self) -> str:
        """``FWD001-cross-file``, ``demo-project``: the rule and the case, stable across runs."""
        name = self.name.replace("_", "-")
        return f"{self.root.name.upper()}-{name}" if RULE_DIR.fullmatch(self.root.name) else name

    def copied_to(self, dest: Path) -> Case:
        """The same case in a copy of its whole project directory under ``dest`` (made by the first
        case of that directory; later ones share it and its warm cache), so that what a run writes
        (the facts cache) lands there and never in ``fixtures/``."""
        target = dest / self.root.name
        if not target.exists():
            shutil.copytree(self.root, target, symlinks=True,
                            ignore=shutil.ignore_patterns(".fwdlint_cache", "__pycache__"))

        def moved(path: Path) -> Path:
            return target / path.relative_to(self.root)

        return Case(self.name, moved(self.cwd), self.args, tuple(moved(f) for f in self.files), target)

    def expected(self) -> list[Expected]:
        found = []
        for file in self.files:
            found.extend(expectations(file.read_text(encoding="utf-8"), file.relative_to(self.cwd).as_posix()))
        return sorted(found, key=lambda e: (e.path, e.line))


def expectations(source: str, path: str) -> list[Expected]:
    return [Expected(path, number, match["code"], match["text"] or "")
            for number, line in enumerate(source.splitlines(), 1) for match in EXPECT.finditer(line)]


def rule_fixture_dirs() -> list[Path]:
    """``fixtures/fwd001``, ``fixtures/fwd002``...: one directory of cases per rule."""
    return sorted(p for p in FIXTURES.iterdir() if p.is_dir() and RULE_DIR.fullmatch(p.name))


def cases(directory: Path) -> list[Case]:
    result = []
    for entry in sorted(directory.iterdir()):
        if entry.suffix == ".py":
            result.append(Case(entry.stem, directory, (entry.name,), (entry,), directory))
        elif entry.name == "fix":
            continue  # the fixers' before/after pairs (tests/test_fix_pairs.py), not lint cases
        elif entry.is_dir() and not entry.name.startswith((".", "__")) and any(entry.rglob("*.py")):
            result.append(Case(entry.name, entry, (".",), tuple(sorted(entry.rglob("*.py"))), directory))
    return result


def run_cli(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lint_rules.cli", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=300)


def cli_json(cwd: Path, *args: str) -> tuple[int, dict]:
    proc = run_cli(cwd, "--format", "json", *args)
    return proc.returncode, json.loads(proc.stdout)


FLAKE8_FORMAT = "%(path)s\t%(row)d\t%(col)d\t%(code)s\t%(text)s"


def run_flake8(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "flake8", f"--format={FLAKE8_FORMAT}", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=300)


def flake8_rows(proc: subprocess.CompletedProcess) -> list[tuple[str, int, int, str, str]]:
    rows = []
    for line in proc.stdout.splitlines():
        path, row, col, code, text = line.split("\t", 4)
        rows.append((Path(path).as_posix().removeprefix("./"), int(row), int(col), code, text))
    return rows


def check_reported(case_dir: Path, expected: list[Expected], reported: list[tuple]) -> None:
    """``reported``: (path, line, 1-based col, code, message, symbol[, help]) from either front end.
    Every expectation and nothing else is reported; the message, or the message and its help as
    ``message; help`` (the remedy moved to the help where the message once said it), holds the expected piece; the column
    points at the reported symbol's last part (the method, the call) where the line names it (FWD004
    reports a method of an installed class at the statement that set its model up)."""
    got = sorted((path, line, code) for path, line, _, code, *_ in reported)
    assert got == [(e.path, e.line, e.code) for e in expected], reported
    by_place = {(path, line): (col, message, symbol, rest[0] if rest else "")
                for path, line, col, _, message, symbol, *rest in reported}
    for e in expected:
        col, message, symbol, advice = by_place[(e.path, e.line)]
        assert e.text in message or e.text in f"{message}; {advice}", (e, message, advice)
        text = (case_dir / e.path).read_text(encoding="utf-8").splitlines()[e.line - 1]
        if symbol and symbol.rpartition(".")[2] in text.partition("#")[0]:
            assert text[col - 1:].startswith(symbol.rpartition(".")[2]), (e, col, text)


def site_packages(python: Path) -> Path:
    """Where ``python`` installs pure-Python packages, as it says itself."""
    return Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())


def python_with_package(root: Path, files: dict[str, str], torch: bool = True) -> Path:
    """A virtual environment (no pip) under ``root`` whose site-packages hold ``files`` (relative
    path -> text): a package fwdlint's own environment does not have. Returns its interpreter.
    ``torch``: the test environment's torch is installed there too (a ``.pth`` line naming its
    directory), as it is where users run their models; without it, fwdlint reads no torch name."""
    venv.create(root / "venv", with_pip=False)
    python = root / "venv" / "bin" / "python"
    site = site_packages(python)
    for name, text in files.items():
        (site / name).parent.mkdir(parents=True, exist_ok=True)
        (site / name).write_text(text)
    if torch:
        (site / "torch-from-tests.pth").write_text(f"{torch_site()}\n")
    return python


def torch_site() -> Path:
    """The site-packages directory that holds the test environment's torch (found, not imported)."""
    spec = importlib.util.find_spec("torch")
    assert spec is not None and spec.submodule_search_locations, "the tests need torch installed"
    return Path(list(spec.submodule_search_locations)[0]).parent
