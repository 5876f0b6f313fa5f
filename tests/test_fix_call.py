"""``--fix-style call``: registrations after ``fabric.setup(...)`` / ``fully_shard(...)``.

The project pair ``fixtures/fwd001/fix/call_style`` (``test_fix_pairs.py``) is hand-written: tuple
targets, a constructor passed to ``setup``, an inherited entry method, a model whose class cannot
be resolved (reported, not guessed), a method nobody calls (reported), FSDP2 with the import
merged into an existing ``from torch.distributed.fsdp import``. Here: the same through the CLI.
"""

from __future__ import annotations

import difflib
import shutil
from pathlib import Path

from fixture_cases import FIXTURES, run_cli

PAIR = FIXTURES / "fwd001" / "fix" / "call_style"
MODEL = ("from torch import nn\n\n\nclass GPT(nn.Module):\n    def forward(self, x):\n        return x\n\n"
         "    def generate(self, x):\n        return self(x)\n")


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*.py"))}


def test_call_style_pair(tmp_path: Path) -> None:
    work = tmp_path / "project"
    shutil.copytree(PAIR / "before", work)
    proc = run_cli(work, "--fix", "--fix-style", "call", ".")
    assert proc.returncode == 1, proc.stderr  # two findings cannot be fixed this way
    assert _tree(work) == _tree(PAIR / "after")
    assert proc.stderr.splitlines() == [
        "model.py:11:9: FWD001 not fixed: the class of `other` set up at train.py:18 cannot be resolved; "
        "register the method there by hand",
        "model.py:14:9: FWD001 not fixed: no set-up of its class that routes registrations (fabric.setup, "
        "fully_shard, DDP, FSDP; not DataParallel) is followed by a call of it; use --fix-style decorator",
        "fwdlint: fixed 2 finding(s) in 1 file(s), 2 not fixed",
    ]
    # idempotent, and the analyzer agrees: only the two unfixable findings remain
    again = run_cli(work, "--fix", "--fix-style", "call", ".")
    assert again.returncode == 1 and _tree(work) == _tree(PAIR / "after")
    remaining = run_cli(work, ".").stdout.splitlines()
    assert [line.split(" ")[0] for line in remaining] == ["model.py:11:9:", "model.py:14:9:"]


def test_call_style_diff_and_parallel_identical(tmp_path: Path) -> None:
    outputs = []
    for jobs in ("1", "2"):
        work = tmp_path / f"j{jobs}"
        shutil.copytree(PAIR / "before", work)
        proc = run_cli(work, "--diff", "--fix-style", "call", "-j", jobs, ".")
        assert proc.returncode == 1
        assert _tree(work) == _tree(PAIR / "before")  # --diff writes nothing
        outputs.append(proc.stdout)
    assert outputs[0] == outputs[1]
    assert '+    model.mark_forward_method("generate")' in outputs[0].splitlines()


def test_fsdp2_import_is_added_and_module_level_script(tmp_path: Path) -> None:
    (tmp_path / "model.py").write_text(MODEL)
    (tmp_path / "run.py").write_text(
        '"""Script."""\nimport torch.distributed.fsdp as fsdp\n\nfrom model import GPT\n\n'
        "net = GPT()\nfsdp.fully_shard(net)\nnet.generate(1)\n")
    proc = run_cli(tmp_path, "--fix", "--fix-style", "call", ".")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "run.py").read_text() == (
        '"""Script."""\nimport torch.distributed.fsdp as fsdp\n\nfrom model import GPT\n\n'
        'net = GPT()\nfsdp.fully_shard(net)\nfsdp.register_fsdp_forward_method(net, "generate")\nnet.generate(1)\n')
    (tmp_path / "run2.py").write_text(
        "from torch.distributed._composable.fsdp import fully_shard\nfrom model import GPT\n\n\n"
        "def go():\n    net = GPT()\n    fully_shard(net)\n    return net.generate(1)\n")
    (tmp_path / "model.py").write_text(MODEL)
    proc = run_cli(tmp_path, "--fix", "--fix-style", "call", "model.py", "run2.py")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "run2.py").read_text() == (
        "from torch.distributed._composable.fsdp import fully_shard\nfrom model import GPT\n"
        "from torch.distributed.fsdp import register_fsdp_forward_method\n\n\n"
        'def go():\n    net = GPT()\n    fully_shard(net)\n    register_fsdp_forward_method(net, "generate")\n'
        "    return net.generate(1)\n")


def test_self_attribute_model_and_annotation(tmp_path: Path) -> None:
    (tmp_path / "model.py").write_text(MODEL)
    source = ("from model import GPT\n\n\nclass Runner:\n    def __init__(self, fabric, net: GPT):\n"
              "        self.fabric = fabric\n        self.model: GPT = net\n"
              "        self.model = self.fabric.setup(self.model)\n\n    def run(self, x):\n"
              "        return self.model.generate(x)\n")
    (tmp_path / "runner.py").write_text(source)
    proc = run_cli(tmp_path, "--fix", "--fix-style", "call", ".")
    # `self.model.generate` is called in another method of the class: the set-up in __init__ is
    # followed through the attribute, so the registration goes right after it
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "runner.py").read_text() == source.replace(
        "        self.model = self.fabric.setup(self.model)\n",
        "        self.model = self.fabric.setup(self.model)\n        self.model.mark_forward_method(\"generate\")\n")


def test_a_registration_fixes_only_the_classes_it_covers(tmp_path: Path) -> None:
    # A and B both have an unmarked `generate`; only B is set up. Registering "generate" on B's
    # model does not mark A.generate (the analysis applies it to B, its bases and subclasses), so
    # A.generate must be reported as not fixed, and a plain run afterwards must agree.
    source = MODEL.replace("GPT", "A") + "\n\n" + MODEL.split("\n", 3)[3].replace("GPT", "B") + (
        "\n\ndef train(fabric, x):\n    model = fabric.setup(B())\n    return model.generate(x)\n")
    (tmp_path / "train.py").write_text(source)
    proc = run_cli(tmp_path, "--fix", "--fix-style", "call", "train.py")
    assert proc.returncode == 1, proc.stderr
    assert "fixed 1 finding(s) in 1 file(s), 1 not fixed" in proc.stderr
    assert proc.stderr.startswith("train.py:8:9: FWD001 not fixed: no set-up of its class")
    after = run_cli(tmp_path, "train.py")
    assert [line.split(" ")[2] for line in after.stdout.splitlines()] == ["A.generate"]


def test_latin1_file_with_a_non_ascii_method_name(tmp_path: Path) -> None:
    source = ("# -*- coding: latin-1 -*-\n" + MODEL.replace("generate", "g\u00e9n\u00e9rer")
              + "\n\ndef train(fabric, x):\n    model = fabric.setup(GPT())\n    return model.g\u00e9n\u00e9rer(x)\n")
    (tmp_path / "train.py").write_bytes(source.encode("latin-1"))
    proc = run_cli(tmp_path, "--fix", "--fix-style", "call", "train.py")
    assert proc.returncode == 0, proc.stderr  # the planned line is compared in the file's encoding
    assert (tmp_path / "train.py").read_bytes() == source.replace(
        "    model = fabric.setup(GPT())\n",
        "    model = fabric.setup(GPT())\n    model.mark_forward_method(\"g\u00e9n\u00e9rer\")\n").encode("latin-1")


def test_unresolvable_class_is_reported_not_guessed(tmp_path: Path) -> None:
    (tmp_path / "model.py").write_text(MODEL)
    source = ("import hub\n\n\ndef main(fabric):\n    model = hub.load('gpt')\n"
              "    model = fabric.setup(model)\n    model.generate(1)\n")
    (tmp_path / "train.py").write_text(source)
    proc = run_cli(tmp_path, "--fix", "--fix-style", "call", ".")
    assert proc.returncode == 1
    assert (tmp_path / "train.py").read_text() == source
    assert proc.stderr.splitlines()[0] == (
        "model.py:8:9: FWD001 not fixed: the class of `model` set up at train.py:6 cannot be resolved; "
        "register the method there by hand")


def test_one_line_suite_is_not_edited(tmp_path: Path) -> None:
    (tmp_path / "model.py").write_text(MODEL)
    source = ("from model import GPT\n\n\ndef main(fabric, ok):\n    model = GPT()\n"
              "    if ok: model = fabric.setup(model)\n    model.generate(1)\n")
    (tmp_path / "train.py").write_text(source)
    proc = run_cli(tmp_path, "--fix", "--fix-style", "call", ".")
    assert proc.returncode == 1
    assert (tmp_path / "train.py").read_text() == source
    assert "shares its line with its block" in proc.stderr


def test_refused_call_fix_leaves_files_untouched(tmp_path: Path, monkeypatch) -> None:
    from lint_rules.engine import Run
    from lint_rules.fix import run as fix
    from lint_rules.fix import isolated
    from lint_rules.fix import verify as fix_verify
    from lint_rules.fix.verify import FixRefused

    work = tmp_path / "project"
    shutil.copytree(PAIR / "before", work)

    def refuse(*args: object) -> None:
        raise FixRefused("the fixed source does not compile: test")

    monkeypatch.setattr(fix_verify, "verify", refuse)
    monkeypatch.setattr(isolated, "IN_PROCESS", True)  # the patched gate is this process's
    monkeypatch.chdir(work)
    run = fix.plan(["model.py", "train.py"], Run(), style="call")
    fix.write(run)
    assert _tree(work) == _tree(PAIR / "before")
    assert [(e.path, e.message) for e in run.errors] == [
        ("train.py", "fix not applied: the fixed source does not compile: test")]
    assert fix.exit_status(run, diff=False) == 2
    assert sorted(u.reason for u in run.unfixed)[:2] == ["fix refused: the fixed source does not compile: test"] * 2


def test_fwd002_calls_are_fixed_by_registering_after_each_set_up(tmp_path: Path) -> None:
    """FWD002's fixer (default style too): one registration per called method, right after the
    set-up each call belongs to, with the imports it needs; afterwards the script is clean."""
    work = tmp_path / "vendored"
    shutil.copytree(FIXTURES / "fwd002" / "vendored", work)
    before = (work / "train.py").read_text()
    proc = run_cli(work, "--fix", ".")
    assert proc.returncode == 0, proc.stderr
    after = (work / "train.py").read_text()
    added = [line[2:] for line in difflib.ndiff(before.splitlines(), after.splitlines()) if line.startswith("+ ")]
    # the name appears in the file's comments, so the import is aliased rather than risk shadowing
    assert added == [
        "from runtime_shim import mark_forward_method as shim_mark_forward_method",
        '        self.model.mark_forward_method("generate")',
        '    model.mark_forward_method("generate")',
        '    shim_mark_forward_method(ddp, "generate")',
        '    register_fsdp_forward_method(model, "generate")',
    ]
    assert run_cli(work, ".").returncode == 0
    assert run_cli(work, "--fix", ".").stderr == ""  # a second pass changes nothing


NET = ("import torch\nfrom torch import nn\n\n\nclass Net(nn.Module):\n    def __init__(self):\n"
       "        super().__init__()\n        self.fc = nn.Linear(4, 4)\n\n    def forward(self, x):\n"
       "        return self.fc(x)\n\n    def generate(self, x):\n        return self(x)\n\n"
       "    def sample(self, x):\n        return self(x)\n")
DDP_SCRIPT = ("import torch\nfrom torch.nn.parallel import DistributedDataParallel as DDP\n\nfrom model import Net\n\n\n"
              "def main():\n    ddp = DDP(Net())\n    return ddp.module.generate(torch.ones(1, 4))\n")
FABRIC_SCRIPT = ("from lightning.fabric import Fabric\n\nfrom model import Net\n\n\ndef main(x):\n"
                 "    fabric = Fabric()\n    model = fabric.setup(Net())\n    return model.generate(x)\n")


def _project(tmp_path: Path, script: str) -> Path:
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "model.py").write_text(NET)
    (tmp_path / "train.py").write_text(script)
    return tmp_path


def test_the_script_alone_registers_what_the_class_in_another_file_needs(tmp_path: Path) -> None:
    # Only the script is given (pre-commit with train.py staged): Net lives in model.py, which the
    # project view reads. Net.generate is called after the set-up and gets its registration;
    # Net.sample is never called, and belongs to a file not given: it is not reported at all.
    work = _project(tmp_path, DDP_SCRIPT)
    proc = run_cli(work, "--fix", "--fix-style", "call", "train.py")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "fwdlint: fixed 1 finding(s) in 1 file(s), 0 not fixed\n"
    assert (work / "train.py").read_text() == (
        "import torch\nfrom runtime_shim import mark_forward_method\n"
        "from torch.nn.parallel import DistributedDataParallel as DDP\n\nfrom model import Net\n\n\n"
        'def main():\n    ddp = DDP(Net())\n    mark_forward_method(ddp, "generate")\n'
        "    return ddp.module.generate(torch.ones(1, 4))\n")
    assert (work / "model.py").read_text() == NET
    # the analyzer agrees, and neither the script nor the whole project gets a second registration
    assert "Net.generate" not in run_cli(work, ".").stdout
    fixed = (work / "train.py").read_text()
    assert run_cli(work, "--fix", "--fix-style", "call", "train.py").stderr == ""
    run_cli(work, "--fix", "--fix-style", "call", ".")
    assert (work / "train.py").read_text() == fixed


def test_the_fabric_script_alone_gets_its_registration(tmp_path: Path) -> None:
    work = _project(tmp_path, FABRIC_SCRIPT)
    proc = run_cli(work, "--fix", "--fix-style", "call", "train.py")
    assert proc.returncode == 0, proc.stderr
    assert (work / "train.py").read_text() == FABRIC_SCRIPT.replace(
        "    model = fabric.setup(Net())\n", '    model = fabric.setup(Net())\n    model.mark_forward_method("generate")\n')


def test_the_script_and_the_whole_project_give_the_same_fix(tmp_path: Path) -> None:
    (tmp_path / "alone").mkdir()
    (tmp_path / "whole").mkdir()
    alone, whole = _project(tmp_path / "alone", DDP_SCRIPT), _project(tmp_path / "whole", DDP_SCRIPT)
    run_cli(alone, "--fix", "--fix-style", "call", "train.py")
    proc = run_cli(whole, "--fix", "--fix-style", "call", ".")
    # the whole project also reports Net.sample (model.py was given, and nothing calls it)
    assert proc.returncode == 1 and "model.py:16:9: FWD001 not fixed" in proc.stderr
    assert (alone / "train.py").read_text() == (whole / "train.py").read_text()
    assert (whole / "train.py").read_text().count("mark_forward_method(ddp") == 1


def test_an_ignored_finding_of_the_class_file_is_left_alone(tmp_path: Path) -> None:
    # per-file-ignores silence FWD001 in model.py: the script alone must not fix it either (a guard
    # for the change that lets the script alone fix model.py's findings: it passed before it)
    work = _project(tmp_path, DDP_SCRIPT)
    (work / "pyproject.toml").write_text('[tool.fwdlint]\nper-file-ignores = ["model.py:FWD001"]\n')
    proc = run_cli(work, "--fix", "--fix-style", "call", "train.py")
    assert proc.returncode == 0, proc.stderr
    assert (work / "train.py").read_text() == DDP_SCRIPT


DP_SCRIPT = ("import torch\nfrom torch import nn\n\nfrom model import Net\n\n\n"
             "def main():\n    dp = nn.DataParallel(Net())\n    return dp.module.generate(torch.ones(1, 4))\n")


def test_data_parallel_gets_no_registration_and_one_there_is_invalid(tmp_path: Path) -> None:
    # runtime_shim cannot route through torch.nn.DataParallel: --fix inserts nothing after it and
    # says why; a registration written there by hand is no mark (FWD001 stays) and FWD003 says why
    work = _project(tmp_path, DP_SCRIPT)
    proc = run_cli(work, "--fix", "--fix-style", "call", ".")
    assert proc.returncode == 1 and (work / "train.py").read_text() == DP_SCRIPT
    assert "model.py:13:9: FWD001 not fixed: no set-up of its class that routes registrations" in proc.stderr
    assert "not DataParallel" in proc.stderr
    (work / "train.py").write_text(DP_SCRIPT.replace(
        "from model import Net\n", "from model import Net\nfrom runtime_shim import mark_forward_method\n").replace(
        "    dp = nn.DataParallel(Net())\n", '    dp = nn.DataParallel(Net())\n    mark_forward_method(dp, "generate")\n'))
    found = run_cli(work, ".").stdout.splitlines()
    assert [line.split(" ")[:3] for line in found] == [["model.py:13:9:", "FWD001", "Net.generate"],
                                                        ["model.py:16:9:", "FWD001", "Net.sample"],
                                                        ["train.py:10:5:", "FWD003", "registering"]]
    assert "registering 'generate' on a torch.nn.DataParallel fails" in found[2]
