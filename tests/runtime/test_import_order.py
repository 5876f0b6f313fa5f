"""Every public name of ``runtime_shim``, and ``runtime_shim.auto``, imports and works in a fresh
interpreter in every order relative to torch, torch.distributed, lightning and lightning.fabric (the
second and the fourth load the same modules, in the same order, as the first and the third: ``SAME_AS``).

isort puts ``runtime_shim`` before ``torch``; ``from runtime_shim import guard`` as the first line
used to fail with a circular ImportError (the routing hook patched torch from inside the import
of ``runtime_shim.api``). The cycle is per module of ``runtime_shim`` that a name loads first, so
each case imports one name per such module first (``ONE_PER_MODULE``, checked against the package's
own map of names to modules), in one subprocess per (name, order, other module): a pytest process
where torch is already loaded would hide exactly this. Each case also checks that routing is in place
afterwards (DDP's constructor patched, and Fabric's where Lightning is loaded) and uses the name;
every other name is imported and used, before and after torch, in ``test_every_name_in_both_orders``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from _shim_dist import ROOT

# A test starts at most two interpreters. On a loaded 2-core machine the slowest test took 39 s (a pair
# importing lightning.fabric; most take 5-35 s): each test gets three times that, and each interpreter a
# little less, so that its own timeout (which shows the script) comes first.
pytestmark = pytest.mark.timeout(120)
INTERPRETER_TIMEOUT = 110

# name -> a statement that uses it without a process group (torch is imported by then)
USES = {
    "forward_entry": "forward_entry(lambda self, x: x)",
    "inference_entry": "inference_entry(lambda self, x: x)",
    "mark_forward_method": "mark_forward_method(_Net(), 'generate')",
    "guard": "assert callable(guard)",
    "unguard": "unguard(_Net())",
    "install": "install('warn')",
    "uninstall": "import runtime_shim\nuninstall()\nruntime_shim.install('route')",
    "UnmarkedEntryError": "assert issubclass(UnmarkedEntryError, RuntimeError)",
    "UnmarkedEntryWarning": "assert issubclass(UnmarkedEntryWarning, Warning)",
    "MetaDeviceError": "assert issubclass(MetaDeviceError, Exception)",
    "UnusedParametersError": "assert issubclass(UnusedParametersError, RuntimeError)",
    "check_no_meta": "check_no_meta(_Net())",
    "empty_init": "exec('with empty_init():\\n    torch.nn.Linear(2, 2)')",
    "patch_forward": "patch_forward(_Net(), lambda self, x: x)",
    "unpatch_forward": "import runtime_shim\nunpatch_forward(runtime_shim.patch_forward(_Net(), lambda self, x: x))",
}
OTHERS = ("torch", "lightning.fabric")
#: Spellings that load the same modules in the same order as one of ``OTHERS`` (``import torch`` loads
#: torch.distributed; ``import lightning.fabric`` runs lightning's ``__init__``, which loads lightning.fabric
#: and then lightning.pytorch): their cases would repeat those of ``OTHERS`` exactly, interpreter for
#: interpreter. ``test_the_same_modules_load_whichever_is_imported`` checks that this still holds.
SAME_AS = {"torch.distributed": "torch", "lightning": "lightning.fabric"}

NET = """
import torch
class _Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(2, 2)
    def forward(self, x):
        return self.lin(x)
    def generate(self, x):
        return self(x)
"""

CHECK = """
from torch.nn.parallel import DistributedDataParallel
assert getattr(DistributedDataParallel.__init__, "_fwd_shim_patch", False), "DDP not patched: no routing"
if "lightning.fabric.wrappers" in sys.modules:
    from lightning.fabric.wrappers import _FabricModule
    assert getattr(_FabricModule.__init__, "_fwd_shim_patch", False), "_FabricModule not patched"
print("ok")
"""


def _script(shim: str, other: str, shim_first: bool) -> str:
    lines = [shim, f"import {other}"] if shim_first else [f"import {other}", shim]
    return "import sys\n" + "\n".join(lines) + "\n"


def _case(name: str, other: str, shim_first: bool) -> str:
    if name in ("attribute", "auto"):
        shim = "import runtime_shim" if name == "attribute" else "import runtime_shim.auto"
        code = (_script(shim, other, shim_first) + NET
                + "import runtime_shim\nassert callable(runtime_shim.guard) and callable(runtime_shim.install)\n")
        if name == "auto":  # auto installs the error mode, before torch and after it alike
            code += "from runtime_shim.installer import installed_mode\nassert installed_mode() == 'error'\n"
        return code + CHECK
    return _script(f"from runtime_shim import {name}", other, shim_first) + NET + USES[name] + "\n" + CHECK


def _run(code: str) -> str:
    """'' if the script printed ok, else what went wrong."""
    env = {k: v for k, v in os.environ.items() if k not in ("FWD_SHIM_MODE", "PYTHONPATH")}
    env["PYTHONPATH"] = ROOT
    # -W error: a patch that failed after an import warns; here that counts as a failure
    proc = subprocess.run([sys.executable, "-W", "error::RuntimeWarning", "-c", code], capture_output=True,
                          text=True, timeout=INTERPRETER_TIMEOUT, env=env, cwd=ROOT)
    if proc.returncode == 0 and proc.stdout.split()[-1:] == ["ok"]:
        return ""
    return f"--- script\n{code}\n--- exit {proc.returncode}, stderr\n{proc.stderr[-2000:]}"


# One name per runtime_shim module it loads (the names of one module share its import, and the cycle
# was per module): forward_entry stands for the modules the package imports itself.
ONE_PER_MODULE = ("forward_entry", "guard", "install", "check_no_meta", "empty_init", "patch_forward")
CASES = [(other, name) for other in OTHERS for name in [*ONE_PER_MODULE, "attribute", "auto"]]


@pytest.mark.parametrize(("other", "name"), CASES, ids=[f"{other}-{name}" for other, name in CASES])
def test_name_in_both_orders(other: str, name: str) -> None:
    """One name (or ``import runtime_shim``, ``runtime_shim.auto``), before and after one other
    module: two fresh interpreters, at the same time (the machines have 2 cores). One test per name
    and module, so that no test starts more than two interpreters."""
    orders = (True, False)
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda first: _run(_case(name, other, first)), orders))
    failed = [f"{name} ({'before' if first else 'after'} {other}):\n{out}"
              for first, out in zip(orders, results) if out]
    assert not failed, "\n".join(failed)


@pytest.mark.parametrize("shim_first", [True, False], ids=["before-torch", "after-torch"])
def test_every_name_in_both_orders(shim_first: bool) -> None:
    """Every public name imported by name and used, in one interpreter, before and after torch."""
    imports = "\n".join(f"from runtime_shim import {name}" for name in sorted(USES))
    code = _script(imports, "torch", shim_first) + NET + "\n".join(USES[name] for name in sorted(USES)) + "\n" + CHECK
    failed = _run(code)
    assert not failed, failed


@pytest.mark.parametrize(("spelling", "other"), SAME_AS.items(), ids=list(SAME_AS))
def test_the_same_modules_load_whichever_is_imported(spelling: str, other: str) -> None:
    """Importing ``spelling`` runs the same modules in the same order as importing ``other``, in a
    fresh interpreter: the cases of ``other`` cover it."""
    code = "import sys\nbefore = set(sys.modules)\nimport {}\nprint([m for m in sys.modules if m not in before])\n"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    with ThreadPoolExecutor(max_workers=2) as pool:
        runs = list(pool.map(lambda name: subprocess.run(
            [sys.executable, "-c", code.format(name)], capture_output=True, text=True, timeout=INTERPRETER_TIMEOUT,
            env=env), (spelling, other)))
    assert all(run.returncode == 0 for run in runs), [run.stderr[-2000:] for run in runs]
    loaded = [run.stdout.strip().splitlines()[-1] for run in runs]
    assert loaded[0] == loaded[1] and other in loaded[0] and spelling in loaded[0], loaded


def test_one_name_per_module_covers_every_module() -> None:
    """``ONE_PER_MODULE`` names one name of each lazily loaded module and one the package loads itself."""
    import runtime_shim

    lazy = runtime_shim._LAZY
    assert {lazy[name] for name in ONE_PER_MODULE if name in lazy} == set(lazy.values())
    assert [name for name in ONE_PER_MODULE if name not in lazy] == ["forward_entry"]


def test_forward_entry_without_torch(tmp_path) -> None:
    """The lint install has no torch: the decorator still imports and marks."""
    blocker = tmp_path / "torch.py"
    blocker.write_text("raise ImportError('torch is not installed here')\n")
    code = ("import runtime_shim\nfrom runtime_shim import forward_entry, UnmarkedEntryError\n"
            "class M:\n    @forward_entry\n    def generate(self):\n        pass\n"
            "import sys\nassert 'torch' not in sys.modules\nprint('ok')\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), ROOT])
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 0 and proc.stdout.split() == ["ok"], proc.stderr


def test_every_public_name_is_covered() -> None:
    import runtime_shim

    assert set(USES) == set(runtime_shim.__all__)
