"""Issue 36: the probe's hostile configuration values, kept as a test. For every key fwdlint reads
(``settings.KEYS`` in ``[tool.fwdlint]`` / ``[fwdlint]``, ``settings.FLAKE8_KEYS`` as ``fwd-*`` in
``[flake8]``) and every file kind that can hold it, hostile values (a fixed list of known-bad ones
plus a seeded random one) go into a scratch project with one model file, and ``fwdlint .`` (and, for
INI files, ``flake8 --select FWD .``) must answer without a traceback, with an exit status of 0, 1
or 2, one stderr line naming the configuration when it refuses, in bounded time.

Bounded: a fixed seed and a fixed number of cases: each key in each file kind gets two values, the
next of the fixed list (which goes round, every value used) and, every other key, a seeded random
value instead of a second fixed one."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest

from lint_rules.settings import FLAKE8_KEYS, KEYS

SEED = 36
# Seconds a single fwdlint/flake8 run may take: a bound for hangs and superlinear work (a 100 kB code
# took 5.7 s, quadratic), not a timing. Runs take 0.2-0.7 s on an idle machine; the project's rule is three
# times what a loaded 2-core machine takes (up to 3x slower), rounded up.
PER_RUN = 20.0
MODEL = ("import torch.nn as nn\n\n\nclass Net(nn.Module):\n    def forward(self, x):\n        return x\n\n"
         "    def generate(self, x):\n        return self.forward(x)\n")


@dataclass(frozen=True)
class Value:
    """A hostile value: its TOML text and its INI text (raw bytes after ``key = ``)."""
    name: str
    toml: bytes
    ini: bytes


def _s(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


def _both(name: str, raw: str) -> Value:
    return Value(name, _s(raw), _s(raw))


def _path(name: str, path: str) -> Value:
    return Value(name, _s('"' + path.replace("\\", "\\\\").replace('"', '\\"') + '"'), _s(path))


FIXED: tuple[Value, ...] = (
    _both("int", "5"),
    _both("bool", "true"),
    _both("float-inf", "inf"),
    _both("date", "1979-05-27"),
    _both("inline-table", "{a = 1, b = [2]}"),
    Value("nested-list", b'[["FWD001"], [["x"]], []]', b'[["FWD001"], [["x"]], []]'),
    _both("deep-array-500", "[" * 500 + "]" * 500),
    _both("deep-array-5000", "[" * 5000 + "]" * 5000),
    Value("huge-string", b'"' + b"A" * 1_000_000 + b'"', b"A" * 1_000_000),
    Value("oversize-config", b'"' + b"B" * (17 << 20) + b'"', b"B" * (17 << 20)),
    Value("nul-escaped", b'"a\\u0000b"', b"a\x00b"),
    Value("nul-raw", b'"a\x00b"', b"a\x00b"),
    Value("non-utf8", b'"\xff\xfe\x80"', b"\xff\xfe\x80"),
    _path("dev-zero", "/dev/zero"),
    _path("fifo", "fifo"),
    _path("directory", "adir"),
    _path("symlink-loop", "loop"),
    _path("long-path", "p" * 5000),
    _path("outside", "../outside"),
    _path("absolute-root", "/"),
    _both("unknown-codes", '"XYZ999, FWD9999, fwd001, FWD"'),
    _both("empty-string", '""'),
    Value("empty-value", b"[]", b""),
    Value("multiline", b'"""a\nb\n  c"""', b"a\n  b\n  c:"),
    Value("per-file-shape", b'{"*.py" = [1, {x = 2}]}', b"*.py:\n  :FWD001\n  ::"),
    _both("surrogate-escape", '"\\ud800"'),
    Value("control-chars", b'"\\u001b[31m\\r\\t"', b"\x1b[31m\r\t"),
    Value("crlf", b'"a"\r\nextra = 1\r', b"a\r\nextra = 1\r"),
)

FILE_KINDS = ("pyproject.toml", "setup.cfg", "tox.ini", ".flake8")


def random_value(rng: random.Random, index: int) -> Value:
    """One seeded random hostile value."""
    alphabet = ("FWD", "0", "1", "9", ",", " ", ":", "*", "/", "..", "\\", "\n", "\t", "\x00", "é", "\u2028",
                "[", "]", "{", "}", "=", '"', "'", "#", ";", "%", "$", "\udcff")
    shape = rng.randrange(4)
    if shape == 0:  # a random string
        text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 200)))
        escaped = "".join(c if c.isalnum() or c in " ,:*/.;%$#=" else f"\\u{ord(c):04x}" for c in text)
        return Value(f"random-string-{index}", _s(f'"{escaped}"'), _s(text.replace("\n", "\n ")))
    if shape == 1:  # a random nesting of arrays and tables
        def make(depth: int) -> str:
            if depth == 0 or rng.random() < 0.2:
                return rng.choice(['"FWD001"', "1", "true", '"x"', "{}", "[]", "-0.0", '""'])
            items = [make(depth - 1) for _ in range(rng.randrange(0, 4))]
            if rng.random() < 0.3:
                return "{" + ", ".join(f"k{i} = {v}" for i, v in enumerate(items)) + "}"
            return "[" + ", ".join(items) + "]"
        text = make(rng.randrange(1, 60))
        return _both(f"random-nest-{index}", text)
    if shape == 2:  # a random number of random bytes
        data = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 64))).replace(b"\n", b" ")
        return Value(f"random-bytes-{index}", b'"' + data.replace(b'"', b"") + b'"', data)
    codes = ",".join(rng.choice(["FWD", "FWD0", "FWD001", "FWD999", "E501", "X", "fwd1", "*", ""])
                     for _ in range(rng.randrange(1, 30)))
    return _both(f"random-codes-{index}", f'"{codes}"')


@dataclass(frozen=True)
class Case:
    kind: str  # the configuration file's name
    section: str  # "tool.fwdlint", "fwdlint" or "flake8"
    key: str  # as written in the file
    value: Value

    @property
    def id(self) -> str:
        return f"{self.kind}-{self.section}-{self.key}-{self.value.name}"


def cases() -> list[Case]:
    rng = random.Random(SEED)
    slots = [(kind, "tool.fwdlint" if kind.endswith(".toml") else "fwdlint", key)
             for kind in FILE_KINDS for key in KEYS]
    slots += [(kind, "flake8", f"fwd-{key}") for kind in FILE_KINDS[1:] for key in FLAKE8_KEYS]
    out = []
    fixed = iter(FIXED * 10)  # two values each: fixed ones in turn, every other key a random one instead of the second
    for i, (kind, section, key) in enumerate(slots):
        out.append(Case(kind, section, key, next(fixed)))
        out.append(Case(kind, section, key, random_value(rng, i) if i % 2 else next(fixed)))
    named = {v.name: v for v in FIXED}  # and the probe's own cases, whatever the rotation gives
    out += [Case(kind, section, key, named[value]) for kind, section, key, value in PROBE if
            not any((c.kind, c.section, c.key, c.value.name) == (kind, section, key, value) for c in out)]
    return out


PROBE = (("pyproject.toml", "tool.fwdlint", "from-record", "dev-zero"),
         ("pyproject.toml", "tool.fwdlint", "from-record", "fifo"),
         ("pyproject.toml", "tool.fwdlint", "from-record", "nul-escaped"),
         ("pyproject.toml", "tool.fwdlint", "select", "deep-array-500"),
         ("pyproject.toml", "tool.fwdlint", "python-executable", "long-path"),
         ("pyproject.toml", "tool.fwdlint", "cache-dir", "outside"),
         ("pyproject.toml", "tool.fwdlint", "cache-dir", "nul-escaped"),
         ("setup.cfg", "flake8", "fwd-from-record", "dev-zero"),
         ("setup.cfg", "flake8", "fwd-python-executable", "long-path"),
         ("setup.cfg", "flake8", "fwd-cache-dir", "outside"),
         ("setup.cfg", "flake8", "fwd-cache-dir", "nul-raw"),
         (".flake8", "fwdlint", "cache-dir", "nul-escaped"))


CASES = cases()
# flake8 reads [fwdlint] too (the plugin calls settings.resolve): the first value of each such key and kind.
FLAKE8_FWDLINT = {next(c for c in CASES if (c.kind, c.section, c.key) == (kind, "fwdlint", key))
                  for kind in FILE_KINDS[1:] for key in KEYS}


def write_project(root: Path, case: Case) -> Path:
    (root / "model.py").write_text(MODEL)
    os.mkfifo(root / "fifo")
    (root / "adir").mkdir()
    os.symlink("loop", root / "loop")
    value = case.value.toml if case.kind.endswith(".toml") else case.value.ini
    config = root / case.kind
    config.write_bytes(f"[{case.section}]\n{case.key} = ".encode() + value + b"\n")
    return config


def run(args: list[str], cwd: Path) -> tuple[subprocess.CompletedProcess, float]:
    start = time.monotonic()
    try:
        proc = subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, timeout=PER_RUN,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{' '.join(args)} took more than {PER_RUN} s")
    return proc, time.monotonic() - start


def check(proc: subprocess.CompletedProcess, elapsed: float, names: tuple[str, ...], what: str,
          flake8: bool = False) -> None:
    err = proc.stderr.decode("utf-8", "replace")
    assert "Traceback" not in err, f"{what}: traceback\n{err[-3000:]}"
    assert elapsed < PER_RUN, f"{what}: took {elapsed:.1f} s"
    if flake8 and proc.returncode == 1 and "lint_rules" not in err:
        return  # flake8's own usage error for its own options
    assert proc.returncode in (0, 1, 2), f"{what}: exit {proc.returncode}\n{err[-3000:]}"
    if proc.returncode == 2:
        lines = err.strip("\n").split("\n")
        assert len(lines) == 1, f"{what}: {len(lines)} lines on stderr\n{err[-3000:]}"
        assert any(name in lines[0] for name in names), f"{what}: the line names none of {names}: {lines[0]!r}"


def _params(selected: Callable[[Case], bool]) -> list:
    return [pytest.param(c, id=c.id) for c in CASES if selected(c)]


@pytest.mark.timeout(PER_RUN * 3)
@pytest.mark.parametrize("case", _params(lambda c: True))
def test_fwdlint_answers_a_hostile_value_in_one_line(case: Case, tmp_path: Path) -> None:
    root = tmp_path / "project"
    root.mkdir()
    config = write_project(root, case)
    proc, elapsed = run(["-m", "lint_rules.cli", "."], root)
    check(proc, elapsed, (config.name,), f"fwdlint with {case.id}")


@pytest.mark.timeout(PER_RUN * 3)
@pytest.mark.parametrize("case", _params(lambda c: c.section == "flake8" or c in FLAKE8_FWDLINT))
def test_flake8_answers_a_hostile_value_in_one_line(case: Case, tmp_path: Path) -> None:
    root = tmp_path / "project"
    root.mkdir()
    config = write_project(root, case)
    proc, elapsed = run(["-m", "flake8", "--select", "FWD", "."], root)
    # flake8 merges its options before the plugin sees them: the line names the file or the option.
    check(proc, elapsed, (config.name, case.key.split("-", 1)[1] if case.section == "flake8" else case.key),
          f"flake8 with {case.id}", flake8=True)


def test_every_key_kind_and_fixed_value_is_tried() -> None:
    assert {c.value.name for c in CASES} >= {v.name for v in FIXED}
    assert {(c.kind, c.key) for c in CASES if c.section != "flake8"} == {(k, key) for k in FILE_KINDS for key in KEYS}
    assert {(c.kind, c.key) for c in CASES if c.section == "flake8"} == {
        (k, f"fwd-{key}") for k in FILE_KINDS[1:] for key in FLAKE8_KEYS}
