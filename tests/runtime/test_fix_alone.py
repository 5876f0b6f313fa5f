"""The mark is the whole fix: ``fwdlint --fix`` adds ``@forward_entry`` (and its import), and the
program is then correct under DDP, FSDP1, FSDP2 and Fabric on 2 real gloo ranks, with nothing else
enabled. The unfixed file, run the same way under DDP, is shown to desynchronise (the test can fail)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from _shim_dist import MODELS, ROOT, run_ranks
from _shim_workers_fixed import METHODS, run_fixed

pytestmark = pytest.mark.timeout(300)


def _lint(directory: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lint_rules.cli", *args, "lm_under_test.py"], cwd=directory,
                          capture_output=True, text=True, timeout=120, env={"PYTHONPATH": ROOT, "PATH": ""})


@pytest.fixture(scope="module")
def unfixed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("unfixed")
    (directory / "pyproject.toml").write_text("")
    shutil.copyfile(Path(MODELS) / "unmarked_lm.py", directory / "lm_under_test.py")
    return directory


@pytest.fixture(scope="module")
def fixed(tmp_path_factory: pytest.TempPathFactory, unfixed: Path) -> Path:
    directory = tmp_path_factory.mktemp("fixed")
    shutil.copytree(unfixed, directory, dirs_exist_ok=True)
    before = _lint(directory)
    assert before.returncode == 1 and before.stdout.count("FWD001") == 2, before.stdout
    fixed = _lint(directory, "--fix")
    assert fixed.returncode == 0, fixed.stderr
    assert _lint(directory).returncode == 0  # a clean run...
    text = (directory / "lm_under_test.py").read_text()
    assert "from runtime_shim import forward_entry" in text and text.count("@forward_entry") == 2
    return directory  # ...and, below, a correct program


def _same(a: dict, b: dict) -> bool:
    """Equal gradients; a parameter the method does not use may have no gradient or a zero one."""
    def value(d: dict, k: str, like: list) -> torch.Tensor:
        return torch.tensor(d[k]) if k in d else torch.zeros(len(like))

    keys = a.keys() | b.keys()
    return all(torch.allclose(value(a, k, b.get(k, a.get(k))), value(b, k, a.get(k, b.get(k))), atol=1e-5)
               for k in keys)


@pytest.mark.parametrize("wrapper", ["ddp", "fsdp1", "fsdp2", "fabric"])
def test_fixed_file_is_correct_under_every_wrapper(wrapper: str, fixed: Path) -> None:
    r0, r1 = run_ranks(run_fixed, wrapper, str(fixed), timeout=240)
    assert r0["shim_imported"]  # only through the file's own `from runtime_shim import forward_entry`
    for method in METHODS:
        assert "error" not in r0[method] and "error" not in r1[method], (r0[method], r1[method])
        assert _same(r0[method]["grads"], r1[method]["grads"]), f"{method}: ranks differ"
        assert _same(r0[method]["grads"], r0[method]["reference"]), f"{method}: not the averaged gradient"


def test_unfixed_file_desynchronises_under_ddp(unfixed: Path) -> None:
    r0, r1 = run_ranks(run_fixed, "ddp", str(unfixed), timeout=240)
    assert not r0["shim_imported"]
    assert not _same(r0["generate"]["grads"], r1["generate"]["grads"])


@pytest.fixture(scope="module")
def aliased(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """``decode = decode_function`` (``aliased_lm.py``, next to the ``unmarked_lm`` it imports):
    the directory as written, and a copy as ``--fix`` leaves it."""
    unfixed = tmp_path_factory.mktemp("aliased_unfixed")
    (unfixed / "pyproject.toml").write_text("")
    shutil.copyfile(Path(MODELS) / "aliased_lm.py", unfixed / "lm_under_test.py")
    shutil.copyfile(Path(MODELS) / "unmarked_lm.py", unfixed / "unmarked_lm.py")
    fixed = tmp_path_factory.mktemp("aliased_fixed")
    shutil.copytree(unfixed, fixed, dirs_exist_ok=True)
    before = _lint(fixed)
    assert before.returncode == 1 and before.stdout.count("FWD001") == 1, before.stdout
    assert "lm_under_test.py:16:5: FWD001 AliasedLM.decode" in before.stdout, before.stdout
    assert _lint(fixed, "--fix").returncode == 0
    assert _lint(fixed).returncode == 0  # a clean run...
    text = (fixed / "lm_under_test.py").read_text()
    assert "from runtime_shim import forward_entry" in text and "    decode = forward_entry(decode_function)\n" in text
    return unfixed, fixed  # ...and, below, a correct program


@pytest.mark.parametrize("wrapper", ["ddp", "fsdp1", "fsdp2", "fabric"])
def test_a_fixed_class_attribute_alias_is_correct_under_every_wrapper(wrapper: str, aliased: tuple[Path, Path]) -> None:
    r0, r1 = run_ranks(run_fixed, wrapper, str(aliased[1]), "AliasedLM", ("decode",), timeout=240)
    assert r0["shim_imported"]
    assert "error" not in r0["decode"] and "error" not in r1["decode"], (r0["decode"], r1["decode"])
    assert _same(r0["decode"]["grads"], r1["decode"]["grads"]), "decode: ranks differ"
    assert _same(r0["decode"]["grads"], r0["decode"]["reference"]), "decode: not the averaged gradient"


def test_the_unfixed_alias_desynchronises_under_ddp(aliased: tuple[Path, Path]) -> None:
    r0, r1 = run_ranks(run_fixed, "ddp", str(aliased[0]), "AliasedLM", ("decode",), timeout=240)
    assert not r0["shim_imported"]
    assert not _same(r0["decode"]["grads"], r1["decode"]["grads"])
