"""The linter's name lists: every name fwdlint recognises an API by, in one place.

Why lists and not resolution: the linter is torch-free and never imports what it checks (a
pre-commit environment has no torch, and importing a project runs its code). Names of torch,
Lightning and the standard library are therefore read off their sources, of the versions named
at each list (torch 2.13.0, lightning 2.6.6, CPython 3.11), and matched either resolved through
the file's imports (``functools.partial``) or by their last part where a method is called on a
receiver whose class the linter cannot know (``x.eval()``). ``tests/test_vocabulary.py`` checks
the lists read off torch, Lightning and the standard library against those sources.

Lists whose meaning is the same for the linter and ``runtime_shim`` live in ``contract.py``
(torch-free, imported by both); the shim's own lists are in ``runtime_shim/vocabulary.py``.
Pure data: importing this module imports only ``contract`` (the rules' start-up stays LibCST-free).
"""

from __future__ import annotations

from lint_rules.contract import FORWARD_NAMES  # noqa: F401 -- shared with the shim, listed there

# -- nn.Module (torch 2.13 torch/nn/modules/module.py, class Module) ----------------------------

#: ``Module`` methods whose every ``return`` is ``self`` (or ``self._apply(...)``/``self.train(False)``,
#: which return self): ``self.net.eval()`` is still ``self.net``. Read off torch 2.13's module.py;
#: matched by method name on a receiver the linter has already recognised as a module.
MODULE_RETURNS_SELF = frozenset({
    "train", "eval", "requires_grad_", "to", "to_empty", "cpu", "cuda", "xpu", "mtia", "ipu",
    "type", "float", "double", "half", "bfloat16", "apply", "share_memory",
})
#: Those of them that move parameters to another device (``to``/``to_empty`` take the device as an
#: argument; the others name it): on a meta module they fail or leave meta, so a chain through them
#: is not "still on meta".
MODULE_MOVES_DEVICE = frozenset({"to", "to_empty", "cpu", "cuda", "xpu", "mtia", "ipu"})
#: ``X().to("meta").eval()`` is still X on meta: the self-returning methods that keep the device.
#: Not ``share_memory``: on meta it raises ("only available on CPU"), as ``cpu()`` does ("Cannot
#: copy out of meta tensor"), measured with torch 2.13.
MODULE_KEEPS_DEVICE = MODULE_RETURNS_SELF - MODULE_MOVES_DEVICE - {"share_memory"}

#: Methods only an ``nn.Module`` has among the things models hold (tokenizers, functions, matchers,
#: samplers): an attribute of unknown class used with one of them is a module (evidence by use).
#: ``to``/``cuda`` also exist on tensors, which are never called, so they cannot mislead here;
#: ``state_dict``/``zero_grad`` are left out (optimizers and schedulers have them). torch 2.13 Module.
MODULE_API = frozenset({
    "eval", "train", "parameters", "named_parameters", "buffers", "named_buffers", "children",
    "named_children", "modules", "named_modules", "requires_grad_", "apply", "register_forward_hook",
    "register_forward_pre_hook", "get_submodule", "to", "cuda",
})
#: Methods of ``Module`` and of its containers (``ModuleDict``/``ModuleList``/``Sequential``, torch
#: 2.13 torch/nn/modules/container.py): on a ``ModuleDict`` these are methods, any other attribute is
#: an entry (``self.mods.encoder``).
MODULE_METHODS = frozenset({
    "keys", "values", "items", "update", "pop", "clear", "append", "extend", "insert", "add_module",
    "register_module", "register_buffer", "register_parameter", "state_dict", "load_state_dict", "half",
    "float", "double", "bfloat16", "cpu", "type", "zero_grad", "extra_repr", "to_empty", "compile",
    "share_memory", "get_parameter", "get_buffer", "named_parameters", "named_buffers", "set_submodule",
}) | MODULE_API
#: ``Module`` methods that register a submodule under a name given as a string.
ADD_SUBMODULE = frozenset({"add_module", "register_module"})

#: torch 2.13 torch/nn/modules/container.py: the containers whose elements are submodules.
MODULE_CONTAINERS = frozenset({"ModuleList", "ModuleDict", "Sequential"})
#: Those whose elements are also attributes by name (``self.mods.encoder``; ``ModuleList`` numbers them).
KEYED_CONTAINERS = frozenset({"ModuleDict", "Sequential"})
#: Container methods that add elements (``ModuleList.append/extend/insert``, ``Module.add_module``).
ADD_ELEMENT = frozenset({"append", "extend", "insert", "add_module"})
#: Container methods that yield elements (``ModuleDict.values``, ``Module.children/modules``) ...
ELEMENT_METHODS = frozenset({"values", "children", "modules"})
#: ... and (name, element) pairs (``ModuleDict.items``, ``Module.named_children/named_modules``).
PAIR_METHODS = frozenset({"items", "named_children", "named_modules"})

#: Prefixes of ``nn`` classes: ``torch.nn.ModuleDict`` resolved, or ``nn.ModuleDict`` unresolved.
TORCH_NN_HEADS = ("torch", "nn")

# -- functions that run a module given to them ---------------------------------------------------

#: Functions that run the module or callable given as their first argument, matched by last name:
#: torch 2.13 ``torch.utils.checkpoint.checkpoint``/``checkpoint_sequential``, timm's
#: ``checkpoint_seq``, transformers' ``self._gradient_checkpointing_func``, ``torch.jit.trace``/
#: ``trace_module``, ``torch.export.export``, ``torch.func.functional_call``.
RUNS_ARGUMENT = frozenset({
    "checkpoint", "checkpoint_sequential", "checkpoint_seq", "_gradient_checkpointing_func",
    "trace", "trace_module", "export", "functional_call",
})
#: Keyword names those functions (and users' own wrappers of them) take the callable under.
RUN_KEYWORDS = frozenset({"func", "fn", "function", "f", "module", "model", "mod"})
#: Functions returning a module built from their first argument, by last name: ``copy.deepcopy``
#: (CPython 3.11), ``torch.nn.utils.weight_norm``/``spectral_norm`` (torch 2.13, which return the
#: module they are given).
COPY_FUNCS = frozenset({"deepcopy", "weight_norm", "spectral_norm"})
#: ``copy.deepcopy`` resolved through imports, or imported bare (CPython 3.11 copy.py).
DEEPCOPY = frozenset({"copy.deepcopy", "deepcopy"})
#: accelerate 1.15.0 big_modeling.py: ``init_empty_weights()`` builds parameters on meta,
#: ``init_on_device(device)`` on the device given; matched by last name under ``accelerate``
#: (re-exported from the package root).
ACCELERATE_META_CONTEXTS = frozenset({"init_empty_weights", "init_on_device"})

# -- Python (CPython 3.11) ----------------------------------------------------------------------

#: ``functools.partial`` (CPython 3.11 functools.py, class partial), resolved or imported bare.
PARTIAL = frozenset({"functools.partial", "partial"})
#: Builtins and functools that call (or bind to call) their first argument: ``map(self, xs)``.
CALLS_FIRST = frozenset({"partial", "map"})
#: Builtins that hand back the elements of what they are given (``for b in reversed(self.blocks)``).
PASSTHROUGH_FUNCS = frozenset({"reversed", "list", "tuple", "iter", "sorted"})
#: Builtin types: a parameter annotated with one is never a module.
PLAIN_TYPES = frozenset({"int", "float", "bool", "str", "bytes", "dict", "list", "tuple", "set"})
#: ``types.MethodType`` (CPython 3.11 types.py), resolved or imported bare.
METHOD_TYPE = frozenset({"types.MethodType", "MethodType"})
#: Calls that set an attribute by name: the builtin ``setattr`` and ``object.__setattr__``.
SETATTR = frozenset({"setattr", "object.__setattr__"})
#: Class attributes that name a class (``type(x).__name__ = ...`` renames it).
CLASS_NAME_ATTRIBUTES = ("__name__", "__qualname__")
#: Methods Python makes class methods implicitly (no ``@classmethod``): their first argument is a class.
IMPLICIT_CLASSMETHODS = frozenset({"__init_subclass__", "__class_getitem__"})
#: Python 3.11's metaclasses (``type`` and the standard library's that derive from it): the first
#: argument of a method of a class deriving from one is a class (a metaclass of a metaclass of the
#: project is not followed).
METACLASSES = frozenset({"type", "builtins.type", "abc.ABCMeta", "enum.EnumMeta", "enum.EnumType"})
#: Annotations that say a parameter is a class (``cls: type``), resolved or bare.
TYPE_ANNOTATIONS = frozenset({"type", "typing.Type", "Type"})
#: Python's descriptors that change what a decorated ``def`` is (not an instance method): the
#: builtins ``staticmethod``, ``classmethod``, ``property`` and ``functools.cached_property``.
DESCRIPTORS = frozenset({"staticmethod", "classmethod", "property", "cached_property"})
#: Decorators that make a ``def`` a property: ``property``, ``functools.cached_property`` and a
#: property's ``.setter``/``.getter``/``.deleter`` (CPython 3.11 Objects/descrobject.c).
PROPERTY_DECORATORS = frozenset({"property", "cached_property", "setter", "getter", "deleter"})
#: Bases that say nothing about being a module (``class M(nn.Module, ABC)``), resolved or bare.
TYPING_BASES = frozenset({"abc.ABC", "typing.Generic", "typing.Protocol", "ABC", "Generic", "Protocol"})

# -- wrappers and set-up (torch 2.13, lightning 2.6.6) -------------------------------------------

#: lightning 2.6.6 fabric/fabric.py: ``Fabric.setup`` and ``Fabric.setup_module`` return the
#: ``_FabricModule``; matched by method name on any receiver (users name their Fabric freely).
SETUP_METHODS = ("setup", "setup_module")
#: torch 2.13 ``torch.nn.parallel.DistributedDataParallel`` and
#: ``torch.distributed.fsdp.FullyShardedDataParallel``, by class name -> the wrap kind.
WRAPPER_CLASSES = {"DistributedDataParallel": "ddp", "FullyShardedDataParallel": "fsdp1"}
#: accelerate 1.15.0 accelerator.py: ``Accelerator.prepare(*args)`` returns its arguments prepared, in
#: order (a model wrapped in DDP or FSDP1, or sharded in place by FSDP2, as the launch config says),
#: ``prepare_model(model)`` the one model (not wrapped with ``evaluation_mode=True``);
#: ``unwrap_model(model)`` returns the module inside the wrapper. Matched by method name on a
#: receiver named like an Accelerator or assigned one.
ACCELERATE_PREPARE = ("prepare", "prepare_model")
ACCELERATE_UNWRAP = "unwrap_model"
#: Keyword names of the method in ``mark_forward_method(method=...)`` (lightning 2.6.6
#: fabric/wrappers.py ``_FabricModule.mark_forward_method(method)``), torch 2.13's
#: ``register_fsdp_forward_method(module, method_name)`` and ``runtime_shim``'s own.
MARK_NAME_KEYWORDS = ("method", "method_name", "method_or_name")
#: Methods that run while a model is built: ``__init__`` and Lightning's ``configure_model``
#: (lightning 2.6.6 pytorch/core/hooks.py ``ModelHooks.configure_model``).
INIT_METHODS = frozenset({"__init__", "configure_model"})
#: Lightning's empty-init mode (lightning 2.6.6 fabric/utilities/init.py ``_EmptyInit``), by last
#: name, wherever it is imported from (``lightning.fabric``, ``lightning_fabric``, a test).
EMPTY_INIT = "_EmptyInit"

# -- libraries' module base classes and model methods --------------------------------------------

#: The last resort, used only when a submodule's class is unknown by nature (an unannotated
#: constructor argument, a registry's build; a class that could not be read is FWD005's) and no
#: module class of the project defines the method: its methods of these names are taken
#: as computation (``self.model.generate(...)`` on a model a LightningModule is given), as is
#: any method whose name starts with ``forward`` (``forward_features``, ``forward_encoder``).
#: A submodule whose class is found is judged by what its methods do, never by this list.
#: Names are the conventions of transformers (``generate``, ``get_image_features``), diffusers
#: (``encode``/``decode``/``sample``) and timm (``forward_features``/``forward_head``).
ENTRY_METHOD_NAMES = frozenset({
    "generate", "encode", "decode", "sample", "forward_features", "forward_head",
    "get_image_features", "get_text_features",
    # Hugging Face's conventional submodule names and `base_model` (a property returning one).
    "base_model", "model", "encoder", "decoder", "backbone", "language_model", "vision_model",
    "text_model", "embed_tokens", "lm_head",
})
#: Class methods that build a model of their class: transformers/diffusers ``from_pretrained``,
#: ``from_config``, diffusers' ``from_single_file``.
FACTORY_SUFFIXES = (".from_pretrained", ".from_config", ".from_single_file")

# -- wrappers ----------------------------------------------------------------------------------

#: ``torch.nn.DataParallel`` by every path torch 2.13 exports it under (``torch/nn/__init__.py``,
#: ``torch/nn/parallel/__init__.py``, ``torch/nn/parallel/data_parallel.py``): a wrapper
#: ``runtime_shim`` cannot route through (it has no hook for marked methods). Matched resolved.
UNROUTED_WRAPPERS = frozenset({"torch.nn.DataParallel", "torch.nn.parallel.DataParallel",
                               "torch.nn.parallel.data_parallel.DataParallel"})
