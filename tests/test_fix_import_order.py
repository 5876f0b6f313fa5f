"""The imports ``--fix`` adds are where isort and ruff put them; ``--diff`` headers apply; ``python -m lint_rules``.

A realistic user project (``pyproject.toml``, a first-party package ``mypkg`` in the project root,
``runtime_shim`` and ``torch`` installed) whose files isort 9.0.2 (default and black profiles) and
ruff 0.17.5 (``check --select I``) find clean is fixed with every fixer (``--fix-style decorator``,
``--fix-style call``, FWD301's ``patch_forward``), and the same tools must still find nothing to
change. The tools are real (test dependencies, never skipped); each case first proves it is clean
before the fix and is changed by it, so a case can only pass on where the fix put the line.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import libcst as cst
import pytest

from lint_rules.fix.imports import ensure_import
from lint_rules.fix.verify import verify

ALL = ("isort", "black", "ruff")
WIDE = ("black", "ruff")  # lines of 80-88 columns: isort's default profile wraps at 79

MODEL = """

class Model(nn.Module):
    def forward(self, x):
        return x

    def generate(self, x):
        return self(x)
"""

PATCH = """

def fast(self, x):
    return x


def apply(norm):
    norm.forward = MethodType(fast, norm)
"""


def code(*lines: str) -> str:
    return "\n".join(lines) + "\n"


#: name -> (source, tools that find it clean). Files live in ``mypkg/`` so relative imports work.
DECORATOR_CASES: dict[str, tuple[str, tuple[str, ...]]] = {
    "torch_only": (code("import torch", "", "", "class Model(torch.nn.Module):", "    def generate(self, x):",
                        "        return self(x)"), ALL),
    "every_section": (code('"""A model with every kind of import."""', "", "import math", "import os",
                           "from typing import Optional", "", "import torch", "import torch.nn.functional as F",
                           "from torch import Tensor, nn", "", "from mypkg.layers import Block") + MODEL, ALL),
    "future_docstring": (code('"""Docstring."""', "", "from __future__ import annotations", "", "import logging", "",
                              "import numpy as np", "from torch import nn", "",
                              "logger = logging.getLogger(__name__)") + MODEL, ALL),
    "type_checking": (code("from __future__ import annotations", "", "from typing import TYPE_CHECKING", "",
                           "import torch", "from torch import nn", "", "if TYPE_CHECKING:",
                           "    from mypkg.config import Config") + MODEL, ALL),
    "try_except": (code("import warnings", "", "from torch import nn", "", "try:", "    import apex",
                        "except ImportError:  # optional", "    apex = None", "    warnings.warn('no apex')") + MODEL,
                   ALL),
    "imports_after_try": (code("import warnings", "", "try:", "    import apex", "except ImportError:",
                               "    apex = None", "", "import torch", "from torch import nn") + MODEL, ALL),
    "existing_shim_import": (code("import torch", "from runtime_shim import guard", "from torch import nn") + MODEL,
                             ALL),
    "name_taken": (code("from runtime_shim import guard", "from torch import nn", "", "from mypkg.layers import Block",
                        "", "forward_entry = 'a project name the import must not shadow'") + MODEL, ALL),
    "relative": (code("import torch", "from torch import nn", "", "from .layers import Block") + MODEL, ALL),
    "first_party_and_relative": (code("import os", "", "import torch.nn as nn", "", "from mypkg import layers", "",
                                      "from . import config") + MODEL, ALL),
    "crlf": ((code('"""CRLF line ends."""', "", "import os", "", "import torch", "from torch import nn", "",
                   "from mypkg.layers import Block") + MODEL).replace("\n", "\r\n"), ALL),
    "comment_headers": (code("# Standard library", "import os", "", "# Third party", "import lightning as L",
                             "from torch import nn") + MODEL, ALL),
    "straight_only": (code("import torch", "import torch.nn as nn") + MODEL, ALL),
    "many_third_party": (code("import numpy as np", "import torch", "from einops import rearrange",
                              "from torch import nn", "from transformers import PreTrainedModel") + MODEL, ALL),
    "import_runtime_shim_auto": (code("import runtime_shim.auto", "import torch", "from torch import nn") + MODEL,
                                 ALL),
    "docstring_no_imports": (code('"""No imports (the base class is spelled out)."""', "", "",
                                  "class Model(torch.nn.Module):", "    def generate(self, x):",
                                  "        return self(x)"), ALL),
    "shim_import_grows_to_88": (code("from runtime_shim import UnmarkedEntryError, guard, install, uninstall",
                                     "from torch import nn") + MODEL, WIDE),
    "shim_import_wraps": (code("from runtime_shim import UnmarkedEntryError, guard, install, mark_forward_method",
                               "from torch import nn") + MODEL, WIDE),
    "shim_import_vertical": (code("from runtime_shim import (", "    UnmarkedEntryError,", "    guard,", "    install,",
                                  "    mark_forward_method,", "    uninstall,", ")", "from torch import nn") + MODEL,
                             WIDE),
    # no third-party section yet: the import starts one, set apart by a blank line
    "new_section_after_stdlib": (code("import os", "", "from mypkg.layers import Block", "", "SEP = os.sep", "", "",
                                      "class Model(Block):", "    def generate(self, x):", "        return self(x)"),
                                 ALL),
    "new_section_after_future": (code("from __future__ import annotations", "", "", "class Model(torch.nn.Module):",
                                      "    def generate(self, x):", "        return self(x)"), ALL),
    "new_section_before_relative": (code('"""Doc."""', "", "from .layers import Block", "", "",
                                         "class Model(Block):", "    def generate(self, x):", "        return self(x)"),
                                    ALL),
    "patch_new_section": (code("from types import MethodType") + PATCH, ALL),
    # FWD301 (patch_forward), alone and with FWD001 in the same file (two passes, two imports)
    "patch_types": (code('"""Swap a kernel in."""', "import types", "", "import torch", "import torch.nn as nn", "",
                         "", "def fast(self, x):", "    return x", "", "", "def apply(norm: nn.Module):",
                         "    norm.forward = types.MethodType(fast, norm)"), ALL),
    "patch_from_types": (code("from types import MethodType", "", "from torch import nn", "",
                              "from mypkg.layers import Block") + PATCH, ALL),
    "patch_existing_shim": (code("from types import MethodType", "", "from runtime_shim import guard") + PATCH, ALL),
    "patch_and_decorator": (code("from types import MethodType", "", "from torch import nn") + MODEL + PATCH, ALL),
}

CALL_MODEL = """from torch import nn


class GPT(nn.Module):
    def forward(self, x):
        return x

    def generate(self, x):
        return self(x)


class Net(nn.Module):
    def forward(self, x):
        return x

    def sample(self, x):
        return self(x)


class Old(nn.Module):
    def forward(self, x):
        return x

    def decode(self, x):
        return self(x)
"""

#: scripts that set a model up (``--fix-style call``); each must get its registration and import
CALL_CASES: dict[str, tuple[str, tuple[str, ...]]] = {
    "train_fsdp2": (code("import torch", "from torch.distributed.fsdp import fully_shard", "",
                         "from mypkg.model import GPT", "", "", "def main():", "    model = GPT()",
                         "    fully_shard(model)", "    return model.generate(torch.zeros(1))"), ALL),
    "train_ddp": (code("import os", "", "import torch.distributed as dist",
                       "from torch.nn.parallel import DistributedDataParallel as DDP", "",
                       "from mypkg.model import Net", "", "", "def main():", "    dist.init_process_group('gloo')",
                       "    ddp = DDP(Net())", "    return ddp.sample(os.environ)"), ALL),
    "train_fsdp2_private_path": (code("from torch.distributed._composable.fsdp import fully_shard", "",
                                      "from mypkg.model import Old", "", "", "def main():", "    model = Old()",
                                      "    fully_shard(model)", "    return model.decode(1)"), ALL),
    "patch_in_call_style": (code("from types import MethodType", "", "import torch") + PATCH, ALL),
    # two set-up kinds in one script: two new import lines, the second placed in the edited module
    "train_ddp_and_fsdp2": (code("from torch.distributed._composable.fsdp import fully_shard",
                                 "from torch.nn.parallel import DistributedDataParallel as DDP", "",
                                 "from mypkg.model import GPT, Net", "", "", "def main():", "    ddp = DDP(Net())",
                                 "    ddp.sample(1)", "    model = GPT()", "    fully_shard(model)",
                                 "    return model.generate(1)"), ALL),
}


def _write_project(root: Path, files: dict[str, str]) -> None:
    """A user project: markers for fwdlint (pyproject.toml), isort (.isort.cfg) and ruff (ruff.toml),
    so each tool takes ``root`` as the project root whatever lies above it."""
    (root / "mypkg").mkdir(parents=True)
    (root / "pyproject.toml").write_text('[project]\nname = "userproj"\n')
    (root / ".isort.cfg").write_text("[settings]\n")
    (root / "ruff.toml").write_text("")
    (root / "mypkg" / "__init__.py").write_text("")
    (root / "mypkg" / "config.py").write_text("Config = dict\n")
    (root / "mypkg" / "layers.py").write_text("from torch import nn\n\n\nclass Block(nn.Module):\n"
                                              "    def forward(self, x):\n        return x\n")
    for name, text in files.items():
        (root / name).write_bytes(text.encode())


def _unclean(root: Path, files: list[str], tool: str) -> str:
    """What ``tool`` would change in ``files`` ('' if nothing)."""
    if tool == "ruff":
        cmd = [sys.executable, "-m", "ruff", "check", "--no-cache", "--select", "I", "--diff", *files]
    else:
        profile = ["--profile", "black"] if tool == "black" else []
        cmd = [sys.executable, "-m", "isort", "--check-only", "--diff", *profile, *files]
    proc = subprocess.run(cmd, cwd=root, capture_output=True, text=True, timeout=240)
    assert proc.returncode in (0, 1), proc.stderr  # 1: would change; anything else: the tool failed
    return "" if proc.returncode == 0 else proc.stdout + proc.stderr


def _check_clean(root: Path, cases: dict[str, tuple[str, tuple[str, ...]]]) -> None:
    for tool in ALL:
        files = [f"mypkg/{name}.py" for name, (_, tools) in cases.items() if tool in tools]
        assert _unclean(root, files, tool) == "", tool


def _fwdlint(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lint_rules", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300)


def _fix_and_check(root: Path, cases: dict[str, tuple[str, tuple[str, ...]]], style: str,
                   others: dict[str, str]) -> dict[str, str]:
    """Fix ``cases`` (and ``others``, files they need) in a new project at ``root``; the fixed texts."""
    _write_project(root, {**others, **{f"mypkg/{name}.py": source for name, (source, _) in cases.items()}})
    _check_clean(root, cases)  # the cases are clean to begin with
    proc = _fwdlint(root, "--fix", "--fix-style", style, "mypkg")
    assert proc.returncode == 0 and "0 not fixed" in proc.stderr, proc.stderr
    after = {name: (root / "mypkg" / f"{name}.py").read_bytes().decode() for name in cases}
    assert [name for name, (source, _) in cases.items() if after[name] == source] == []  # each was fixed
    _check_clean(root, cases)  # ... and is still clean
    return after


def test_decorator_and_patch_forward_fixes_keep_files_isort_and_ruff_clean(tmp_path: Path) -> None:
    after = _fix_and_check(tmp_path, DECORATOR_CASES, "decorator", {})
    # a few placements spelled out (the tools above are the judges; these document what they want)
    assert "as F\nfrom runtime_shim import forward_entry\nfrom torch import" in after["every_section"]
    assert "from runtime_shim import forward_entry, guard\n" in after["existing_shim_import"]
    assert ("from runtime_shim import forward_entry as shim_forward_entry\nfrom runtime_shim import guard\n"
            in after["name_taken"])
    assert "\r\nfrom runtime_shim import forward_entry\r\nfrom torch import nn\r\n" in after["crlf"]
    assert "# Third party\nimport lightning as L\nfrom runtime_shim import forward_entry\n" in after["comment_headers"]
    assert "    UnmarkedEntryError,\n    forward_entry,\n    guard,\n" in after["shim_import_vertical"]
    assert "from runtime_shim import (\n    UnmarkedEntryError,\n    forward_entry,\n" in after["shim_import_wraps"]
    assert "from runtime_shim import forward_entry, patch_forward\n" in after["patch_and_decorator"]
    assert "from runtime_shim import guard, patch_forward\n" in after["patch_existing_shim"]
    assert "if TYPE_CHECKING:\n    from mypkg.config import Config\n" in after["type_checking"]
    assert "import os\n\nfrom runtime_shim import forward_entry\n\nfrom mypkg" in after["new_section_after_stdlib"]
    # the MethodType import the rewrite left unused is gone, with its section's blank line
    assert after["patch_new_section"].startswith("from runtime_shim import patch_forward\n\n\ndef fast")


def test_call_style_fixes_keep_files_isort_and_ruff_clean(tmp_path: Path) -> None:
    after = _fix_and_check(tmp_path, CALL_CASES, "call", {"mypkg/model.py": CALL_MODEL})
    assert "from torch.distributed.fsdp import fully_shard, register_fsdp_forward_method\n" in after["train_fsdp2"]
    assert ("import torch.distributed as dist\nfrom runtime_shim import mark_forward_method\n"
            "from torch.nn.parallel import" in after["train_ddp"])
    assert ("from torch.distributed._composable.fsdp import fully_shard\n"
            "from torch.distributed.fsdp import register_fsdp_forward_method\n" in after["train_fsdp2_private_path"])
    assert "import torch\nfrom runtime_shim import patch_forward\n" in after["patch_in_call_style"]
    assert after["train_ddp_and_fsdp2"].startswith(
        "from runtime_shim import mark_forward_method\nfrom torch.distributed._composable.fsdp import fully_shard\n"
        "from torch.distributed.fsdp import register_fsdp_forward_method\nfrom torch.nn.parallel import")


#: files with no third-party section: the new import starts one, set apart by a blank line
NEW_SECTION = {
    "stdlib_only": "import types\n\n\ndef patch_forward_user():\n    return types\n",
    "future_only": "from __future__ import annotations\n\n\nclass Model:\n    pass\n",
    "stdlib_and_first_party": '"""Doc."""\n\nimport os\n\nfrom mypkg.layers import Block\n\nX = os.sep\n',
    "first_party_only": '"""Doc."""\n\nfrom mypkg.layers import Block\n\n\nclass Model(Block):\n    pass\n',
    "relative_only": "from .layers import Block\n\n\nclass Model(Block):\n    pass\n",
    "comment_on_first_party": "import os\n\n# ours\nfrom mypkg import layers\n\nX = os.sep\n",
}


@pytest.mark.parametrize("separate", [True, False])
def test_a_new_section_is_set_apart_when_the_caller_plans_the_blank_line(
        tmp_path: Path, separate: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """``separate_sections=True``: the import and a blank line, which isort/ruff want; without it only
    the import line. The verify gate accepts both: no existing line changes."""
    _write_project(tmp_path, {})
    monkeypatch.chdir(tmp_path)  # first-party is what lies in the working directory, as for isort and ruff
    results = {}
    for name, source in NEW_SECTION.items():
        module = cst.parse_module(source)
        edit = ensure_import(module, "runtime_shim", "forward_entry", len(module.body), source,
                             separate_sections=separate)
        assert edit.blank_lines == (1 if separate else 0) and edit.inserted == b"from runtime_shim import forward_entry"
        verify(source.encode(), edit.module.bytes, edit.may_change, name)  # raises if refused
        results[name] = (edit.module.code, ALL)
        (tmp_path / "mypkg" / f"{name}.py").write_text(edit.module.code)
    if separate:
        _check_clean(tmp_path, results)
        assert results["stdlib_only"][0].startswith("import types\n\nfrom runtime_shim import forward_entry\n\n\ndef")
        assert "\n\nfrom runtime_shim import forward_entry\n\n# ours\n" in results["comment_on_first_party"][0]
    else:
        assert all(_unclean(tmp_path, [f"mypkg/{name}.py"], "ruff") for name in NEW_SECTION)


@pytest.mark.parametrize("old, new", [
    ("from runtime_shim import guard  # c", "from runtime_shim import forward_entry, guard  # c"),
    ("from runtime_shim import (aaa, zzz)", "from runtime_shim import (aaa, forward_entry, zzz)"),
    ("from runtime_shim import (\n    guard,  # g\n    install,  # i\n)",
     "from runtime_shim import (\n    forward_entry,\n    guard,  # g\n    install,  # i\n)"),
    ("from runtime_shim import (\n    aaa,  # a\n)",
     "from runtime_shim import (\n    aaa,  # a\n    forward_entry,\n)"),
    ("from runtime_shim import (\n    aaa,\n    bbb\n)",
     "from runtime_shim import (\n    aaa,\n    bbb,\n    forward_entry\n)"),
])
def test_an_extended_import_keeps_its_layout_and_comments(old: str, new: str) -> None:
    source = f"{old}\n\nX = 1\n"
    module = cst.parse_module(source)
    edit = ensure_import(module, "runtime_shim", "forward_entry", len(module.body), source)
    assert edit.module.code == f"{new}\n\nX = 1\n" and edit.extended is not None
    verify(source.encode(), edit.module.bytes, edit.may_change, "m.py")


def test_unsorted_imports_get_the_line_before_the_first_that_sorts_after_it() -> None:
    source = "import torch\nfrom zlib_like import z\nfrom apex import a\nfrom torch import nn\n\nX = 1\n"
    module = cst.parse_module(source)
    edit = ensure_import(module, "runtime_shim", "forward_entry", len(module.body), source)
    new = "from runtime_shim import forward_entry\nfrom zlib_like"
    assert edit.module.code == source.replace("from zlib_like", new)


# --- --diff headers --------------------------------------------------------------------------------

BAD = "import torch.nn as nn\n\n\nclass M(nn.Module):\n    def gen(self, x):\n        return self(x)\n"


def _run(cmd: list[str], cwd: Path, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=cwd, input=stdin, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("how", ["absolute", "dotdot", "relative", "through_symlink"])
def test_diff_of_any_path_applies_with_git_apply_and_patch_where_fwdlint_ran(tmp_path: Path, how: str) -> None:
    work = tmp_path / "work"
    (work / "pkg").mkdir(parents=True)
    (work / "pkg" / "m.py").write_text(BAD)
    (tmp_path / "link").symlink_to(work, target_is_directory=True)  # $PWD/pkg/m.py typed in link/
    given = {"absolute": str(work / "pkg" / "m.py"), "dotdot": "../work/pkg/m.py", "relative": "pkg/m.py",
             "through_symlink": str(tmp_path / "link" / "pkg" / "m.py")}[how]
    proc = _fwdlint(work, "--diff", given)
    assert proc.returncode == 1 and proc.stdout.splitlines()[:2] == ["--- a/pkg/m.py", "+++ b/pkg/m.py"]
    assert _run(["git", "apply", "--check", "-"], work, proc.stdout).returncode == 0
    assert _run(["patch", "--dry-run", "-p1"], work, proc.stdout).returncode == 0
    assert _run(["git", "apply", "-"], work, proc.stdout).returncode == 0
    assert "    @forward_entry\n" in (work / "pkg" / "m.py").read_text()
    assert _fwdlint(work, "pkg/m.py").returncode == 0  # the applied diff is the fix


def test_diff_in_a_git_subdirectory_applies_there(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "sub").mkdir(parents=True)
    assert _run(["git", "init", "-q", str(repo)], tmp_path).returncode == 0
    (repo / "sub" / "m.py").write_text(BAD)
    proc = _fwdlint(repo / "sub", "--diff", str(repo / "sub" / "m.py"))
    assert proc.stdout.startswith("--- a/m.py\n+++ b/m.py\n")
    assert _run(["git", "apply", "--check", "-"], repo / "sub", proc.stdout).returncode == 0


def test_diff_of_a_file_outside_the_working_directory(tmp_path: Path) -> None:
    """A ``../`` path: ``git apply --unsafe-paths`` takes it where fwdlint ran; plain ``git apply``
    refuses paths outside the working area (as GNU patch does), so the diff never edits such a file
    by surprise. The old header, ``a//abs/m.py``, was refused by both even with that switch."""
    (tmp_path / "here").mkdir()
    (tmp_path / "elsewhere").mkdir()
    target = tmp_path / "elsewhere" / "m.py"
    target.write_text(BAD)
    proc = _fwdlint(tmp_path / "here", "--diff", str(target))
    assert proc.stdout.splitlines()[:2] == ["--- a/../elsewhere/m.py", "+++ b/../elsewhere/m.py"]
    assert _run(["git", "apply", "--check", "-"], tmp_path / "here", proc.stdout).returncode != 0
    assert _run(["git", "apply", "--unsafe-paths", "-"], tmp_path / "here", proc.stdout).returncode == 0
    assert "    @forward_entry\n" in target.read_text()


# --- python -m lint_rules --------------------------------------------------------------------------

def test_python_m_lint_rules_is_the_cli(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text(BAD)
    via_main = _fwdlint(tmp_path, "m.py")
    via_cli = subprocess.run([sys.executable, "-m", "lint_rules.cli", "m.py"], cwd=tmp_path, capture_output=True,
                             text=True, timeout=300)
    assert via_main.returncode == via_cli.returncode == 1
    assert via_main.stdout == via_cli.stdout and "FWD001" in via_main.stdout
    version = _fwdlint(tmp_path, "--version")
    assert version.returncode == 0 and version.stdout.startswith("fwdlint ")
    assert _fwdlint(tmp_path, "--no-such-option").returncode == 2
