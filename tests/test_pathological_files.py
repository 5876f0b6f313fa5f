"""Issue 36: the probe's pathological-file set, kept as a test. A fixed selection of the files
benchmarks/pathological.py generates (its generators, imported: deep nesting, huge lines, NUL bytes,
invalid encodings, long call chains, many classes) and one good model file go into a scratch project;
``fwdlint -j 2 .`` must print no traceback, at most one error line per bad file (naming it), still
report the model file's finding, exit 2 because files errored, in bounded time and memory."""

from __future__ import annotations

import collections
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import pathological  # noqa: E402  (benchmarks/ is not a package)

BOUND = 60.0  # seconds for the run (15 s on a loaded 2-core machine)
MEMORY = 2 << 30  # bytes: the largest process of the run (parent or worker); 250 MB measured
MODEL = ("import torch.nn as nn\n\n\nclass Net(nn.Module):\n    def forward(self, x):\n        return x\n\n"
         "    def generate(self, x):\n        return self.forward(x)\n")

# 42 files (~9 MB) from every family, those that crossed a limit on the probe's run first.
SELECTED = (
    "nesting/paren_201_method.py", "nesting/paren_1000_module.py", "nesting/list_100000_module.py",
    "nesting/call_10000_method.py", "nesting/lambda_1000_method.py", "nesting/block_def_101_method.py",
    "nesting/block_if_1000_module.py",
    "chains/and_100000_module.py", "chains/attribute_10000_method.py", "chains/self_method_call_10000_method.py",
    "chains/call_10000_method.py", "chains/elif_10000_method.py", "chains/subclasses_1000.py",
    "chains/methods_10000.py", "chains/classes_10000.py",
    "literals/str_1048576_module.py", "literals/int_decimal_4301_method.py", "literals/list_100000_method.py",
    "bytes/empty.py", "bytes/only_bom.py", "bytes/nul_middle.py", "bytes/nul_in_string.py", "bytes/nul_only.py",
    "bytes/lone_cr.py", "bytes/u2028_in_string.py", "bytes/bom_latin1_cookie.py", "bytes/bom_utf16.py",
    "bytes/invalid_utf8_string.py", "bytes/invalid_utf8_identifier.py", "bytes/surrogate_utf8_string.py",
    "bytes/overlong_utf8.py", "bytes/latin1_no_cookie.py", "bytes/no_trailing_newline_backslash.py",
    "bytes/tab_space_mix_ambiguous.py", "bytes/ctrl_z_middle.py", "bytes/unterminated_triple.py",
    "bytes/unclosed_bracket.py", "bytes/very_long_line.py", "bytes/many_continuations.py",
    "encodings/lie_cp1252.py", "encodings/lie_utf_16.py", "encodings/lie_base64.py",
)
# Files no Python can parse: each must have its one error line.
MUST_ERROR = ("bytes/nul_middle.py", "bytes/nul_in_string.py", "bytes/nul_only.py", "bytes/invalid_utf8_string.py",
              "bytes/invalid_utf8_identifier.py", "bytes/overlong_utf8.py", "bytes/surrogate_utf8_string.py",
              "bytes/unclosed_bracket.py", "bytes/unterminated_triple.py", "nesting/paren_1000_module.py",
              "nesting/block_def_101_method.py", "literals/int_decimal_4301_method.py", "encodings/lie_base64.py")


def generated() -> dict[str, bytes]:
    """The selected files' bytes, from the benchmark's own generators (scale 1)."""
    wanted, found = set(SELECTED), {}
    for family in (pathological.nesting(1), pathological.chains(1), pathological.literals(1),
                   pathological.bytes_family(), pathological.encodings_family()):
        for item in family:
            if item.name in wanted:
                found[item.name] = item.data
    return found


def test_the_selection_is_generated() -> None:
    assert sorted(generated()) == sorted(SELECTED)
    assert set(MUST_ERROR) <= set(SELECTED)


@pytest.mark.timeout(BOUND * 3)
def test_pathological_files_at_j2_give_one_line_each(tmp_path: Path) -> None:
    root = tmp_path / "project"
    root.mkdir()
    (root / "pyproject.toml").write_text("[tool.fwdlint]\n")
    (root / "model.py").write_text(MODEL)
    for name, data in generated().items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)

    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "lint_rules.cli", "-j", "2", "."], cwd=root, capture_output=True,
                          timeout=BOUND * 2, stdin=subprocess.DEVNULL)
    elapsed = time.monotonic() - start
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024  # the largest child so far

    out = proc.stdout.decode("utf-8", "replace")
    err = proc.stderr.decode("utf-8", "replace")
    assert "Traceback" not in err and "Traceback" not in out, err[-3000:]
    assert elapsed < BOUND, f"took {elapsed:.1f} s"
    assert peak < MEMORY, f"a process of the run grew to {peak >> 20} MiB"
    assert re.search(r"^model\.py:8:9: FWD001 ", out, re.M), out[:2000]

    errored = collections.Counter()
    for line in err.splitlines():
        path, sep, _ = line.partition(": error: ")
        assert sep and path in SELECTED, f"an error line that names no generated file: {line[:300]!r}"
        errored[path] += 1
    assert all(n == 1 for n in errored.values()), [p for p, n in errored.items() if n > 1]
    assert set(MUST_ERROR) <= set(errored), sorted(set(MUST_ERROR) - set(errored))
    assert "model.py" not in errored
    assert proc.returncode == 2, f"exit {proc.returncode} although {len(errored)} files errored"
