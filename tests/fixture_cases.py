"""Reading the fixtures: cases and the expectations written as comments on reported lines."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"

EXPECT = re.compile(r'#\s*expect(?:\[(?P<only>cli|flake8)\])?:\s*(?P<code>FWD\d{3})(?:\s+"(?P<text>[^"]*)")?')


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

    def expected(self, front_end: str) -> list[Expected]:
        found = []
        for file in self.files:
            for number, line in enumerate(file.read_text(encoding="utf-8").splitlines(), 1):
                for match in EXPECT.finditer(line):
                    if match["only"] in (None, front_end):
                        found.append(Expected(file.relative_to(self.cwd).as_posix(), number, match["code"],
                                              match["text"] or ""))
        return sorted(found, key=lambda e: (e.path, e.line))


def cases(directory: Path) -> list[Case]:
    result = []
    for entry in sorted(directory.iterdir()):
        if entry.suffix == ".py":
            result.append(Case(entry.stem, directory, (entry.name,), (entry,)))
        elif entry.is_dir() and not entry.name.startswith((".", "__")):
            result.append(Case(entry.name, entry, (".",), tuple(sorted(entry.rglob("*.py")))))
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
