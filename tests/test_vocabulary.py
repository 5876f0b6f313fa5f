"""The name lists (``lint_rules/vocabulary.py``, ``lint_rules/contract.py``, ``runtime_shim/vocabulary.py``)
say what they are read from; these tests read it there: torch 2.13.0 and lightning 2.6.6 as installed
in the test environment (their sources, parsed with ``ast``, or the live objects), and CPython's."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
from pathlib import Path

from fixture_cases import cli_json

from lint_rules import contract, vocabulary
from runtime_shim import vocabulary as shim_vocabulary


def _class_def(module: str, name: str) -> ast.ClassDef:
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin, module  # the test environment has torch and lightning
    tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
    return next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name)


def _own_returns(node: ast.AST) -> list[ast.Return]:
    """The ``return`` statements of ``node``'s own body (not of functions nested in it)."""
    found = []
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.Return):
            found.append(child)
        if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            found.extend(_own_returns(child))
    return found


def _returns_self(function: ast.FunctionDef) -> bool:
    """Every ``return`` gives ``self`` back: ``self``, ``self._apply(...)`` (which returns self) or
    ``self.train(...)``. (``@overload`` stubs have none.)"""
    values = [r.value for r in _own_returns(function)]
    texts = [ast.unparse(v) for v in values if v is not None]
    return bool(texts) and len(texts) == len(values) and all(
        t == "self" or t.startswith(("self._apply(", "self.train(")) for t in texts)


def test_module_returns_self_is_read_off_torch() -> None:
    module = _class_def("torch.nn.modules.module", "Module")
    found = {f.name for f in module.body if isinstance(f, ast.FunctionDef) and not f.name.startswith("_")
             and _returns_self(f)}
    assert found == vocabulary.MODULE_RETURNS_SELF


def test_module_method_lists_name_module_methods() -> None:
    from torch import nn

    for name in vocabulary.MODULE_API | vocabulary.MODULE_RETURNS_SELF | vocabulary.ADD_SUBMODULE:
        assert callable(getattr(nn.Module, name, None)), name
    for name in vocabulary.MODULE_METHODS:
        assert any(callable(getattr(c, name, None)) for c in (nn.Module, nn.ModuleDict, nn.ModuleList)), name
    for name in vocabulary.MODULE_CONTAINERS:
        assert hasattr(nn, name), name
    for name in contract.FORWARD_NAMES | contract.CALL_IMPL:
        assert callable(getattr(nn.Module, name, None)), name


def test_stdlib_names_resolve() -> None:
    for dotted in vocabulary.PARTIAL | vocabulary.METHOD_TYPE | vocabulary.DEEPCOPY | vocabulary.TYPING_BASES:
        module, _, name = dotted.rpartition(".")
        if module:
            assert hasattr(importlib.import_module(module), name), dotted


def test_lightning_names_are_lightnings() -> None:
    from lightning.fabric import Fabric, wrappers

    assert set(wrappers._LIGHTNING_MODULE_STEP_METHODS) == contract.LIGHTNING_STEP_METHODS
    for name in vocabulary.SETUP_METHODS:
        assert callable(getattr(Fabric, name)), name
    assert set(shim_vocabulary.FABRIC_OWN_ATTRIBUTES) <= set(vars(wrappers._FabricModule)) | {"_forward_methods"}
    assert "method" in inspect.signature(wrappers._FabricModule.mark_forward_method).parameters
    for module in shim_vocabulary.FABRIC_MODULES:
        assert importlib.import_module(module)._FabricModule.__module__ == module


def test_fabric_moving_strategies_move_with_module_to() -> None:
    for sub, name in shim_vocabulary.FABRIC_MOVING_STRATEGIES:
        strategy = getattr(importlib.import_module(f"lightning.fabric.{sub}"), name)
        body = inspect.getsource(strategy.module_to_device).strip().splitlines()[-1].strip()
        assert body == "module.to(self.root_device)", (name, body)


def test_fsdp_names_are_torchs() -> None:
    from torch.distributed.algorithms._checkpoint import checkpoint_wrapper
    from torch.distributed.fsdp import _common_utils

    defining = importlib.import_module(shim_vocabulary.FULLY_SHARD_DEFINED)
    assert callable(getattr(defining, shim_vocabulary.FULLY_SHARD_STEP))
    for name in shim_vocabulary.FULLY_SHARD_EXPORTS:
        module = importlib.import_module(name)
        assert module.fully_shard is defining.fully_shard, name
        register = inspect.unwrap(getattr(module, contract.FSDP_REGISTER_CALL))  # routing patched it
        assert register is getattr(defining, contract.FSDP_REGISTER_CALL), name
    assert shim_vocabulary.WRAPPER_PREFIXES[:2] == (
        _common_utils.FSDP_PREFIX, checkpoint_wrapper._CHECKPOINT_PREFIX)
    import torch

    compiled = torch.compile(torch.nn.Linear(1, 1))
    assert f"{next(iter(compiled._modules))}." == shim_vocabulary.WRAPPER_PREFIXES[2]


META_CHAINS = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.half_tpl = nn.Linear(2, 2).to("meta").type(torch.float16)  # expect: FWD101 "Model.half_tpl"
        self.applied = nn.Linear(2, 2).to("meta").apply(lambda m: None)  # expect: FWD101 "Model.applied"
        self.moved = nn.Linear(2, 2).to("meta").cpu()  # raises here: never a meta submodule

    def forward(self, x):
        return x
'''


def test_meta_chains_follow_the_methods_that_keep_the_device(tmp_path: Path) -> None:
    """``type``/``apply`` return the module on meta (FWD101 missed them); ``cpu()`` raises on a meta
    module ("Cannot copy out of meta tensor"), so what it returns is never on meta (FWD101 reported it)."""
    (tmp_path / "model.py").write_text(META_CHAINS)
    _, report = cli_json(tmp_path, "--select", "FWD101", "model.py")
    got = sorted((d["line"], d["code"]) for d in report["diagnostics"])
    assert got == [(8, "FWD101"), (9, "FWD101")], report
