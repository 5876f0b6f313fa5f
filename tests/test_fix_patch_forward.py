"""FWD301's ``--fix`` (its hand-written pairs, ``fixtures/fwd301/fix``, are ``test_fix_pairs.py``'s):
the forms it refuses (with their reasons), ``# noqa`` lines, and the fixed
program run for real: the patched instances get a class of their own and compute as before."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from fixture_cases import FIXTURES, cli_json, run_cli

PAIRS = FIXTURES / "fwd301" / "fix"


SOURCE = '''import functools
import types


def fast(self, x):
    return x


def apply(m, other):
    m.forward = types.MethodType(fast, m)  # noqa: FWD301
    m.forward = functools.partial(fast, m)
    m.forward = types.MethodType(lambda self, x: x, m)
    other.forward = types.MethodType(fast, m)
    m.forward = types.MethodType(fast, m); print(m)
    type(m).__name__ = "Fast"
'''


def test_other_forms_are_reported_not_fixed(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("")
    target = tmp_path / "patches.py"
    target.write_text(SOURCE)
    code, payload = cli_json(tmp_path, "patches.py")
    assert code == 1 and [d["line"] for d in payload["diagnostics"]] == [11, 12, 13, 14, 15]
    proc = run_cli(tmp_path, "--fix", "patches.py")
    assert proc.returncode == 1
    assert target.read_text() == SOURCE  # nothing was safe to rewrite
    lines = (proc.stdout + proc.stderr).splitlines()
    for line in (11, 12, 13, 14):
        assert any(f"patches.py:{line}:" in row and "only `m.forward = types.MethodType(f, m)`" in row for row in lines)
    assert any("patches.py:15:" in row and "no mechanical replacement" in row for row in lines), lines


RUN_FIXED = '''
import sys, copy, pickle
sys.path.insert(0, sys.argv[1])
import torch, torch.nn as nn
import basic

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 4), nn.LayerNorm(4), nn.Linear(4, 4), nn.LayerNorm(4))
untouched = nn.LayerNorm(4)
x = torch.randn(2, 4)
expected = model(x)
basic.apply_kernels(model)
norms = [m for m in model if isinstance(m, nn.LayerNorm)]
assert all("forward" not in vars(m) for m in norms), "an instance forward is left"
assert all(type(m) is not nn.LayerNorm and type(m).__name__ != "LayerNorm" for m in norms), [type(m) for m in norms]
assert type(untouched) is nn.LayerNorm and type(untouched).__name__ == "LayerNorm"
assert torch.allclose(model(x), expected)
assert type(norms[0]).__name__ in repr(model)
clone = pickle.loads(pickle.dumps(model))
assert torch.allclose(clone(x), expected) and type(clone[1]).__name__ == type(norms[0]).__name__
print("ok")
'''


def test_fixed_program_runs_with_patched_classes(tmp_path: Path) -> None:
    shutil.copyfile(PAIRS / "basic" / "after.py", tmp_path / "basic.py")
    proc = subprocess.run([sys.executable, "-c", RUN_FIXED, str(tmp_path)], capture_output=True, text=True,
                          timeout=240)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr


BOTH = b"""import types

import torch.nn as nn


def fast(self, x):
    return x


class Net(nn.Module):
    def forward(self, x):
        return x

    def generate(self, x):
        return self(x)


def patch(norm):
    norm.forward = types.MethodType(fast, norm)
"""


@pytest.mark.parametrize("style", ["decorator", "call"])
def test_two_rules_in_one_file_are_both_fixed(style: str, tmp_path: Path) -> None:
    """FWD001's and FWD301's fixes are computed from the same text: --diff shows the first and says
    the other waits; --fix applies them one pass after the other, and a second --fix changes nothing."""
    (tmp_path / "pyproject.toml").write_text("")
    target = tmp_path / "both.py"
    target.write_bytes(BOTH)
    diff = run_cli(tmp_path, "--diff", "--fix-style", style, "both.py")
    assert ("run --fix again" in diff.stderr) == (style == "decorator") and target.read_bytes() == BOTH
    proc = run_cli(tmp_path, "--fix", "--fix-style", style, "both.py")
    text = target.read_text()
    if style == "decorator":
        assert proc.returncode == 0, proc.stderr
        assert "@forward_entry" in text and "patch_forward(norm, fast)" in text
        assert "fixed 2 finding(s) in 1 file(s), 0 not fixed" in proc.stderr
    else:  # no set-up site to register at: FWD001 stays, reported; FWD301 is still fixed
        assert "patch_forward(norm, fast)" in text and "FWD001 not fixed" in proc.stderr
    compile(text, "both.py", "exec")
    again = run_cli(tmp_path, "--fix", "--fix-style", style, "both.py")
    assert target.read_text() == text and "run --fix again" not in again.stderr


KERNEL = "def fast(self, x):\n    return x\n\n\n"


@pytest.mark.parametrize("before, after", [
    # still used elsewhere: kept
    ("import types\n\n\n" + KERNEL + "def patch(m):\n    m.forward = types.MethodType(fast, m)\n"
     "    return types.SimpleNamespace(m=m)\n",
     "import types\n\nfrom runtime_shim import patch_forward\n\n\n" + KERNEL
     + "def patch(m):\n    patch_forward(m, fast)\n    return types.SimpleNamespace(m=m)\n"),
    # in the middle of its section, under a comment: only its line goes
    ("# standard library\nimport os\nimport types\nimport sys\n\nimport torch\n\n\n" + KERNEL
     + "def patch(m):\n    m.forward = types.MethodType(fast, m)\n    return os, sys, torch\n",
     "# standard library\nimport os\nimport sys\n\nimport torch\nfrom runtime_shim import patch_forward\n\n\n" + KERNEL
     + "def patch(m):\n    patch_forward(m, fast)\n    return os, sys, torch\n"),
    # an alias of MethodType, alone in its section: the section's blank line goes too
    ("from types import MethodType as bind\n\nimport torch\n\n\n" + KERNEL
     + "def patch(m):\n    m.forward = bind(fast, m)\n    return torch\n",
     "import torch\nfrom runtime_shim import patch_forward\n\n\n" + KERNEL
     + "def patch(m):\n    patch_forward(m, fast)\n    return torch\n"),
    # the name is only mentioned in a string: pyflakes does not count it, neither do we
    ('import types\n\n\n' + KERNEL + 'def patch(m):\n    m.forward = types.MethodType(fast, m)\n    return "types"\n',
     "from runtime_shim import patch_forward\n\n\n" + KERNEL + 'def patch(m):\n    patch_forward(m, fast)\n'
     '    return "types"\n'),
])
def test_the_import_left_unused_goes_and_one_still_used_stays(before: str, after: str, tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "patches.py").write_text(before)
    proc = run_cli(tmp_path, "--fix", "patches.py")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "patches.py").read_text() == after
