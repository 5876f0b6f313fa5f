"""The shim's own name lists: modules and attributes of torch and Lightning it patches or looks for.

The shim has torch, and reads the live objects wherever they tell what it needs: wrappers are
recognised by ``isinstance`` against torch's classes (``wrappers.identify``), marks by the
attribute on the function (``record.class_marks``), routed methods by walking the class's MRO.
What is left here cannot be read off a live object:

* modules must be named to be *watched* before they are imported (``import_hooks``), and the
  shim must never import Lightning itself;
* re-exports of a function are found only by naming the modules that re-export it (a scan of
  ``sys.modules`` misses those imported later);
* which strategies move a model with a plain ``module.to(device)`` is a fact about their source,
  not their type.

Torch-free and import-free: ``routing`` (imported by ``import runtime_shim``) reads it before torch
is loaded. Names the shim shares with the linter (mark names, ``register_fsdp_forward_method``,
Lightning's step methods, the call protocol) are in ``lint_rules/contract.py``.
``tests/test_vocabulary.py`` checks each list against the installed torch and Lightning
(torch 2.13.0, lightning 2.6.6).
"""

from __future__ import annotations

#: lightning 2.6.6 ``lightning/fabric/wrappers.py`` (and the standalone ``lightning_fabric`` package,
#: the same source): where ``_FabricModule`` is defined. Matched by ``__module__``, never imported.
FABRIC_MODULES = ("lightning.fabric.wrappers", "lightning_fabric.wrappers")

#: Modules whose completed import lets routing patch what they define: torch (DDP), FSDP
#: (``FullyShardedDataParallel``, ``fully_shard``) and Fabric's wrappers.
ROUTING_WATCHED = ("torch", "torch.distributed.fsdp") + FABRIC_MODULES

#: torch 2.13 ``torch/distributed/fsdp/_fully_shard/_fully_shard.py``: where ``fully_shard`` is
#: defined, and its step (``_apply_to_module(modules, ...)``) that turns modules into FSDP modules;
#: patched there, a ``fully_shard`` imported before ``runtime_shim`` is covered too.
FULLY_SHARD_DEFINED = "torch.distributed.fsdp._fully_shard._fully_shard"
FULLY_SHARD_STEP = "_apply_to_module"
#: torch 2.13 modules that re-export ``fully_shard`` and ``register_fsdp_forward_method``
#: (``torch/distributed/fsdp/__init__.py``, ``fsdp/_fully_shard/__init__.py``, and the deprecated
#: ``torch/distributed/_composable/fsdp/__init__.py``): each holds its own reference to patch.
FULLY_SHARD_EXPORTS = (
    "torch.distributed.fsdp", "torch.distributed.fsdp._fully_shard", "torch.distributed._composable.fsdp",
)

#: lightning 2.6.6 Fabric strategies whose ``module_to_device`` is ``module.to(self.root_device)``
#: (``strategies/ddp.py``, ``single_device.py``, ``dp.py``; inherited by e.g. DeepSpeed): the meta
#: check runs before them. (submodule of ``lightning.fabric``/``lightning_fabric``, class name)
FABRIC_MOVING_STRATEGIES = (
    ("strategies.ddp", "DDPStrategy"),
    ("strategies.single_device", "SingleDeviceStrategy"),
    ("strategies.dp", "DataParallelStrategy"),
)

#: Attribute names wrappers put between a model and its submodules, stripped from the paths the
#: shim reports: torch 2.13 ``fsdp/_common_utils.py`` ``FSDP_WRAPPED_MODULE``,
#: ``algorithms/_checkpoint/checkpoint_wrapper.py`` ``_CHECKPOINT_WRAPPED_MODULE`` and
#: ``_dynamo/eval_frame.py`` ``OptimizedModule._orig_mod``. Names, not imports: reading torch's
#: constants would import FSDP and the checkpoint wrapper into every process that reports a path.
WRAPPER_PREFIXES = ("_fsdp_wrapped_module.", "_checkpoint_wrapped_module.", "_orig_mod.")

#: lightning 2.6.6 ``_FabricModule`` attributes its own ``__getattr__`` must answer (the set of
#: marked methods, and ``forward``), which the guarded ``__getattr__`` hands back untouched.
FABRIC_OWN_ATTRIBUTES = ("_forward_methods", "forward")
