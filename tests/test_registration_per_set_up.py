"""A registration marks the one model it is given; a decorator marks the class (issue 34, item 1).

A project with one model class, a test that wraps it in DDP and registers ``generate``, and a
training script that wraps it in DDP again without registering: the script's calls run
``generate`` behind an unregistered wrapper (on 2 ranks its gradients part:
``tests/runtime/test_registration_per_set_up_runtime.py``). FWD001 must stay at the ``def``, naming
both set-ups; FWD002 must report the script's call; ``--fix --fix-style call`` registers in the
script too, and then the run is clean. On the code before this change the project linted clean.
"""

from __future__ import annotations

from pathlib import Path

from fixture_cases import run_cli

MODEL = ("import torch\nfrom torch import nn\n\n\nclass GPT(nn.Module):\n"
         "    def __init__(self):\n        super().__init__()\n        self.lin = nn.Linear(4, 4)\n\n"
         "    def forward(self, x):\n        return self.lin(x)\n\n"
         "    def generate(self, x):\n        return self(x) * 2\n")
TEST = ("from torch.nn.parallel import DistributedDataParallel as DDP\n\n"
        "from runtime_shim import mark_forward_method\nfrom model import GPT\n\n\n"
        "def test_generate(x):\n    ddp = DDP(GPT())\n    mark_forward_method(ddp, \"generate\")\n"
        "    return ddp.module.generate(x)\n")
TRAIN = ("from torch.nn.parallel import DistributedDataParallel as DDP\n\nfrom model import GPT\n\n\n"
         "def main(x):\n    ddp = DDP(GPT())\n    out = ddp.module.generate(x)\n    return out\n")


def _project(root: Path, train: str = TRAIN) -> Path:
    (root / "pyproject.toml").write_text("")
    (root / "model.py").write_text(MODEL)
    (root / "test_model.py").write_text(TEST)
    (root / "train.py").write_text(train)
    return root


def test_a_registration_in_the_test_does_not_silence_the_unregistered_script(tmp_path: Path) -> None:
    root = _project(tmp_path)
    proc = run_cli(root, "--no-cache", ".")
    assert proc.returncode == 1, proc.stderr
    lines = proc.stdout.splitlines()
    [fwd001] = [line for line in lines if " FWD001 " in line]
    assert fwd001.startswith("model.py:13:9: FWD001 GPT.generate runs forward computation outside forward")
    assert ("registered on the set-up at test_model.py:8 (DDP), not on the set-up at train.py:7 (DDP) "
            "(a registration marks only the model it is given)") in fwd001
    [fwd002] = [line for line in lines if " FWD002 " in line]
    assert fwd002.startswith("train.py:8:22: FWD002 ddp.module.generate(...) runs GPT.generate outside the "
                             "wrapper's forward")
    assert len(lines) == 2, lines


def test_the_call_style_fix_registers_at_every_set_up(tmp_path: Path) -> None:
    root = _project(tmp_path)
    proc = run_cli(root, "--no-cache", "--fix", "--fix-style", "call", ".")
    assert proc.returncode == 0, proc.stderr
    assert (root / "test_model.py").read_text() == TEST  # registered already
    assert (root / "train.py").read_text() == (
        "from runtime_shim import mark_forward_method\nfrom torch.nn.parallel import DistributedDataParallel as DDP\n"
        "\nfrom model import GPT\n\n\n"
        "def main(x):\n    ddp = DDP(GPT())\n    mark_forward_method(ddp, \"generate\")\n"
        "    out = ddp.module.generate(x)\n    return out\n")
    clean = run_cli(root, "--no-cache", ".")
    assert (clean.returncode, clean.stdout) == (0, ""), clean.stdout


def test_a_set_up_the_run_cannot_edit_leaves_the_finding_not_fixed_saying_where(tmp_path: Path) -> None:
    root = _project(tmp_path, TRAIN.replace("main(x):\n    ddp = DDP(GPT())\n",
                                            "main(x):\n    if x: ddp = DDP(GPT())\n"))
    proc = run_cli(root, "--no-cache", "--fix", "--fix-style", "call", ".")
    assert proc.returncode == 1
    assert "model.py:13:9: FWD001 not fixed: not every set-up of the class can be registered" in proc.stderr
    assert "train.py:7 shares its line with its block" in proc.stderr
    assert "--fix-style decorator" in proc.stderr
    # a run given the model and the test only cannot reach the script's set-up
    (tmp_path / "given").mkdir()
    root2 = _project(tmp_path / "given")
    proc = run_cli(root2, "--no-cache", "--fix", "--fix-style", "call", "model.py", "test_model.py")
    assert proc.returncode == 1
    assert ("model.py:13:9: FWD001 not fixed: not every set-up of the class can be registered (the class is "
            "also set up at train.py:7, in files this run was not given") in proc.stderr
    assert (root2 / "train.py").read_text() == TRAIN


def test_a_registration_whose_class_no_file_tells_counts_only_without_set_ups(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "model.py").write_text(MODEL)
    (tmp_path / "helpers.py").write_text("from runtime_shim import mark_forward_method\n\n\n"
                                         "def register(wrapper):\n    mark_forward_method(wrapper, \"generate\")\n")
    assert run_cli(tmp_path, "--no-cache", ".").returncode == 0  # the only information: marks the method
    (tmp_path / "train.py").write_text(TRAIN)  # a set-up of the class that registers nothing
    proc = run_cli(tmp_path, "--no-cache", ".")
    assert proc.returncode == 1
    assert "model.py:13:9: FWD001" in proc.stdout and "not on the set-up at train.py:7 (DDP)" in proc.stdout


def test_decorator_still_marks_every_set_up(tmp_path: Path) -> None:
    root = _project(tmp_path)
    (root / "model.py").write_text(MODEL.replace("import torch\n", "import torch\nfrom runtime_shim import "
                                                 "forward_entry\n").replace("    def generate",
                                                                            "    @forward_entry\n    def generate"))
    proc = run_cli(root, "--no-cache", ".")
    assert (proc.returncode, proc.stdout) == (0, "")


def test_the_help_names_the_registration_of_the_wrapper_in_use(tmp_path: Path) -> None:
    root = _project(tmp_path)
    proc = run_cli(root, "--no-cache", "--format", "json", "model.py")
    import json

    [finding] = json.loads(proc.stdout)["diagnostics"]
    assert finding["help"] == (
        "decorate it with @forward_entry from runtime_shim (importing runtime_shim routes marked methods "
        "through DDP, FSDP and Fabric), or register it on every set-up model: "
        "runtime_shim.mark_forward_method(ddp, 'generate') after ddp = DDP(model)")


def test_the_module_attribute_spelling_is_a_registration(tmp_path: Path) -> None:
    """``import runtime_shim`` then ``runtime_shim.mark_forward_method(ddp, "generate")``: the same
    registration as the imported function (it was read as Fabric's method form, of nothing)."""
    root = _project(tmp_path)
    (root / "test_model.py").write_text(TEST.replace("from runtime_shim import mark_forward_method\n",
                                                     "import runtime_shim\n")
                                        .replace("    mark_forward_method(", "    runtime_shim.mark_forward_method("))
    proc = run_cli(root, "--no-cache", ".")
    assert "registered on the set-up at test_model.py:8 (DDP), not on the set-up at train.py:7 (DDP)" in proc.stdout
    assert "train.py:8:22: FWD002" in proc.stdout
    assert run_cli(root, "--no-cache", "--fix", "--fix-style", "call", ".").returncode == 0
    clean = run_cli(root, "--no-cache", ".")
    assert (clean.returncode, clean.stdout) == (0, "")


def test_many_set_ups_are_shortened(tmp_path: Path) -> None:
    root = _project(tmp_path)
    for index in range(5):
        (root / f"train{index}.py").write_text(TRAIN)
    proc = run_cli(root, "--no-cache", "model.py")
    [line] = proc.stdout.splitlines()
    assert ("registered on the set-up at test_model.py:8 (DDP), not on the set-ups at train.py:7 (DDP), "
            "train0.py:7 (DDP), train1.py:7 (DDP) and 3 more (a registration marks only the model it is given)") in line
