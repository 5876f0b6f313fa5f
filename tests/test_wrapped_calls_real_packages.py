"""FWD002 on the set-ups people write, against the real packages from the index (transformers,
peft, accelerate), installed without their dependencies into an environment of their own: the
linter reads them, never imports them. With an environment that lacks them, nothing is guessed."""

from __future__ import annotations

import json
import subprocess
import sys
import venv
from pathlib import Path

import pytest
from fixture_cases import run_cli, site_packages

PACKAGES = ("transformers==5.23.0", "peft==0.21.2", "accelerate==1.15.0")

SCRIPT = '''\
import torch
from accelerate import Accelerator
from lightning.fabric import Fabric
from peft import LoraConfig, get_peft_model
from torch.nn.parallel import DistributedDataParallel as DDP
from transformers import AutoModel, AutoModelForCausalLM, GPT2Config, GPT2LMHeadModel


def auto_model(fabric: Fabric, ids):
    model = AutoModelForCausalLM.from_pretrained("gpt2")
    model = fabric.setup(model)
    return model.generate(ids)  # report: transformers declares _BaseModelWithGenerate


def auto_base(fabric: Fabric, ids):
    model = AutoModel.from_pretrained("gpt2")
    model = fabric.setup(model)
    return model.generate(ids)  # silent: AutoModel declares no class, none is guessed


def chained(fabric: Fabric, ids):
    model = GPT2LMHeadModel(GPT2Config()).eval()
    model = model.to(fabric.device)
    model = fabric.setup(model)
    return model.generate(ids)  # report


def build(name):
    return AutoModelForCausalLM.from_pretrained(name)


def factory(fabric: Fabric, ids):
    model = fabric.setup(build("gpt2"))
    return model.generate(ids)  # report: the project's factory, then transformers' declaration


def lora(rank, ids):
    model = get_peft_model(GPT2LMHeadModel(GPT2Config()), LoraConfig())
    ddp = DDP(model.to(rank), device_ids=[rank])
    return ddp.module.generate(ids)  # report: get_peft_model declares PeftModel


def accelerate_main(loader, ids):
    accelerator = Accelerator()
    model = AutoModelForCausalLM.from_pretrained("gpt2")
    model, loader = accelerator.prepare(model, loader)
    teacher = accelerator.prepare_model(GPT2LMHeadModel(GPT2Config()), evaluation_mode=True)
    teacher.generate(ids)  # silent: evaluation_mode=True wraps nothing
    return accelerator.unwrap_model(model).generate(ids)  # report
'''
REPORTED = {12: "GenerationMixin.generate", 25: "GenerationMixin.generate", 34: "GenerationMixin.generate",
            40: "PeftModel.generate", 49: "GenerationMixin.generate"}


def _environment(root: Path, packages: tuple[str, ...]) -> Path:
    venv.create(root, with_pip=False)
    python = root / "bin" / "python"
    if packages:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--disable-pip-version-check",
                        "--target", str(site_packages(python)), *packages], check=True, timeout=600)
    return python


@pytest.fixture(scope="module")
def with_packages(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _environment(tmp_path_factory.mktemp("hf") / "venv", PACKAGES)


def _findings(project: Path, python: Path) -> dict[int, str]:
    proc = run_cli(project, "--format", "json", "--select", "FWD002", "--python", str(python), "train.py")
    assert proc.returncode in (0, 1), proc.stderr
    report = json.loads(proc.stdout)
    assert report["errors"] == []
    return {d["line"]: f"{d['message']}; {d['help']}" for d in report["diagnostics"]}  # what and what to do


def test_the_set_ups_people_write_are_followed_into_the_installed_packages(
        with_packages: Path, tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").touch()
    (tmp_path / "train.py").write_text(SCRIPT)
    found = _findings(tmp_path, with_packages)
    assert sorted(found) == sorted(REPORTED), found
    for line, runs in REPORTED.items():
        assert f"runs {runs} outside the wrapper's forward" in found[line], found[line]
    assert "(accelerator.prepare); register it right after the set-up: mark_forward_method(model, 'generate')" \
        in found[49]


def test_without_the_packages_nothing_is_guessed(tmp_path: Path) -> None:
    (tmp_path / "project" / "pyproject.toml").parent.mkdir()
    (tmp_path / "project" / "pyproject.toml").touch()
    (tmp_path / "project" / "train.py").write_text(SCRIPT)
    assert _findings(tmp_path / "project", _environment(tmp_path / "empty", ())) == {}
