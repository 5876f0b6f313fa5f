"""FWD101 meta-device-submodule: a submodule is created on the meta device and stays in the module tree.

A model that keeps a frozen copy or a template of a submodule on the meta device (for shape
inference, as a blueprint for later copies) and stores it as ``self.<attr>`` registers it as a
submodule. Its tensors have no data, so the next ``model.to(device)``, ``fabric.setup(model)`` or
``DistributedDataParallel(model)`` fails with ``NotImplementedError: Cannot copy out of meta
tensor; no data!``, far from the line that caused it, on every rank. (Lightning users have met this
with models that keep a meta copy of themselves.)

What is reported
    In a method of an ``nn.Module`` subclass, a module registered on ``self`` (``self.<attr> =``,
    ``add_module``, ``register_module``, ``setattr(self, ...)``, ``ModuleList.append/extend/insert``,
    ``ModuleDict.update`` or item assignment) whose value (its class resolved through the project
    view, installed packages included; ``self``; a submodule of ``self``) is put on the meta device by

    * being built inside ``with torch.device("meta"):``, accelerate's ``init_empty_weights()`` or
      ``init_on_device("meta")`` (also a context chosen through a variable), or after
      ``torch.set_default_device("meta")`` in the same method;
    * ``.to("meta")``, ``.to(device="meta")``, ``.to(torch.device("meta"))`` or
      ``.to_empty(device="meta")`` (also after ``.eval()``, ``.requires_grad_(False)``...), applied
      to a constructor call, to ``self``, to a submodule, or to ``copy.deepcopy`` of those or of a
      parameter annotated as a module; ``self.<attr>.to("meta")`` alone (``Module.to`` is in place);
    * a constructor called with ``device="meta"``;

    also through a local variable assigned to ``self`` later, and with "meta" held in a variable,
    a parameter's default or a module-level constant. The value may be what a method of the class
    returns (``self._empty_net = self._build_net()``), a module when that method, or a subclass's
    where the class leaves it abstract, builds one (torchrl's ``MultiAgentNetBase``); or a class
    held in a variable (``cls = MAPPING[kind]; self.base = cls(...)``, peft's ``PeftModel``), a
    module when the class uses the attribute as one (its ``forward`` calls it, module methods are
    called on it).

Not reported
    * The deliberate deferred-init pattern: a model built under meta outside any module (in a
      function or at top level), then ``to_empty`` / ``load_state_dict(assign=True)``; an
      attribute that a method of the class materialises (``self.<attr>.to_empty(device=...)``,
      ``self.to_empty(...)``, ``load_state_dict(..., assign=True)``); a local materialised before
      it is stored.
    * Templates kept out of the module tree: ``self._tpl = [Block()]``, a dict,
      ``object.__setattr__(self, "tpl", ...)``, a factory method that builds one on demand.
    * Meta tensors stored as plain attributes (``torch.empty(..., device="meta")``): not modules.
    * Values whose class the project cannot resolve and that the class never uses as a module:
      no guessing. The exception is a parameter with no annotation (``copy.deepcopy(teacher)
      .to("meta")``): a module if the class keeps it as a submodule elsewhere or a module class
      of the project builds this class with a submodule there; otherwise reported as conditional
      ("if `teacher` is a module"), since a module is what such code usually copies.

Fix (by hand; both named in the message)
    keep the template out of the module tree (``self._tpl = [Block()]`` or
    ``object.__setattr__(self, "_tpl", Block())``), or build it on demand in a method. At run time,
    ``runtime_shim.check_no_meta(model)`` (also run by ``guard`` and ``install`` before a wrapper that
    would fail) names every meta parameter and buffer and the submodule that owns it.

Real code
    ``benchmarks/hazard_labels.tsv``: 11 packages (transformers, diffusers, peft, accelerate,
    lightning, unsloth, torchao, deepspeed, litgpt, liger-kernel, timm) searched, 90 meta-device
    sites labelled by hand: 89 are deferred init or are materialised right away (18 diffusers
    attention blocks build ``nn.Linear`` under ``torch.device("meta")`` then
    ``load_state_dict(..., assign=True)``) and stay silent (0 false alarms); the one kept submodule,
    peft's ``self.base_model`` built under ``init_empty_weights if low_cpu_mem_usage else
    nullcontext`` from a class held in a variable (``cls = PEFT_TYPE_TO_TUNER_MAPPING[...]``),
    was missed at first contact and is reported since the class's use of the attribute decides.
    ``benchmarks/hazard_labels_new.tsv``: 7 more packages (torchtune, trl, open_clip,
    sentence-transformers, torchrl, composer, ultralytics), labelled before this rule ran on them:
    23 meta sites silent and not reported; the one labelled kept submodule, torchrl's
    ``self._empty_net = self._build_single_net(...)`` under meta (a module built by an abstract
    method of self), was missed at first contact and is reported since. Both rows are now known
    to the rule: neither is a held-out measure any more.
"""

from __future__ import annotations

from typing import Iterator, Optional

from lint_rules import contract
from lint_rules.computation import analysis_for
from lint_rules.diagnostics import Diagnostic
from lint_rules.facts.model import SRC_PARAM, FileFacts, MetaSubmodule
from lint_rules.project import ClassRef, ProjectIndex
from lint_rules.reads import ATTRIBUTES, scan
from lint_rules.rules.base import Invalid, Valid

CODE = "FWD101"
NAME = "meta-device-submodule"

VALID = (
    Valid("""
import torch
import torch.nn as nn


class Block(nn.Module):
    def forward(self, x):
        return x


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = Block()
        with torch.device("meta"):
            self._templates = [Block()]          # a plain list: not a submodule
            object.__setattr__(self, "_shape_probe", Block())
        self.scale = torch.empty(3, device="meta")   # a tensor attribute, not a submodule

    def new_block(self):
        with torch.device("meta"):
            return Block()


def build():
    with torch.device("meta"):                   # deferred init of a whole model
        model = Model()
    model.to_empty(device="cpu")
    return model
"""),
)

INVALID = (
    Invalid("""
import copy

import torch
import torch.nn as nn


class Block(nn.Module):
    def forward(self, x):
        return x


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = Block()
        with torch.device("meta"):
            self.template = Block()  # expect: FWD101 "Model.template is a submodule created on the meta device"
        self.frozen = copy.deepcopy(self.block).to("meta")  # expect: FWD101 "Cannot copy out of meta tensor"
        self.probe = nn.Linear(4, 4, device="meta")  # expect: FWD101 "object.__setattr__"
"""),
)


def _is_module_value(view: ProjectIndex, facts: FileFacts, ref: ClassRef, found: MetaSubmodule) -> Optional[bool]:
    if found.value in ("self", "module"):
        return True
    if found.value.startswith("param:"):
        return _passed_module(view, ref, found.value[6:], found.attr)
    if found.value.startswith("self.") and found.value.endswith("()"):
        return _method_builds_module(view, ref, found.value[5:-2])
    if found.value.startswith("self."):
        return analysis_for(view, ref).is_submodule(found.value[5:])
    verdict = view.is_module_ref(found.value, facts)
    if verdict is None and "." in found.value:  # a factory on a class: Block.from_config(..., device="meta")
        owner = view.find_class(found.value.rpartition(".")[0], facts)
        verdict = view.is_module_class(owner) if owner is not None else None
    if verdict is None:  # a class held in a variable (``cls = MAPPING[kind]; self.x = cls(...)``): how
        # the class uses the attribute tells (its forward calls it, module methods are called on it)
        verdict = analysis_for(view, ref).is_submodule(found.attr)
    return verdict


def _passed_module(view: ProjectIndex, ref: ClassRef, param: str, attr: str) -> Optional[bool]:
    """Is what ``param`` (unannotated) holds a module? Yes if the class keeps it as a submodule
    elsewhere (``self.teacher = teacher``, then called), or if a module class of the project builds
    this class with itself or a submodule there (``self.student = Student(self.teacher)``); else
    unknown (None): the finding is then conditional."""
    analysis = analysis_for(view, ref)
    for name, sources in ref.cls.attrs:
        if name != attr and any(src.kind == SRC_PARAM and src.param == param for src in sources) \
                and analysis.is_submodule(name):
            return True
    params = ref.cls.init_params
    slots = {param, str(params.index(param))} if param in params else set()
    if view.reads is not None:
        view.reads.read(scan(ATTRIBUTES))
    for other in view.files.values():
        for cls in other.classes:
            for _, sources in cls.attrs:
                for src in sources:
                    passed = [piece for slot, piece in src.handed() if slot in slots]
                    built = view.find_class(src.ref, other) if passed else None
                    if built is None or built.key != ref.key:
                        continue
                    owner = ClassRef(other, cls)
                    if view.is_module_class(owner) and any(
                            not piece or analysis_for(view, owner).is_submodule(piece) for piece in passed):
                        return True
    return None


def _method_builds_module(view: ProjectIndex, ref: ClassRef, name: str) -> bool:
    """Does ``self.<name>()`` return a module it builds (``return MLP(...)``, read from its body
    or its return annotation), in the class or, where the class leaves it abstract, in a subclass?"""
    for item in (ref, *view.subclasses(ref)):
        analysis = analysis_for(view, item)
        found = analysis.lookup(name)
        if found is not None and any(view.is_module_ref(built, analysis.mro[found[0]].file)
                                     for built in found[1].builds):
            return True
    return False


def message(cls: str, found: MetaSubmodule, known: bool = True) -> str:
    if not known:
        param = found.value[6:]
        return (f"{cls}.{found.attr} is a submodule created on the meta device ({found.how}) if `{param}` is a "
                f"module, which the project does not show (annotate `{param}`): moving the model then fails")
    return f"{cls}.{found.attr} is a submodule created on the meta device ({found.how}): moving the model fails"


def help_for(found: MetaSubmodule) -> str:
    return (f"it is registered in the module tree, so model.to(device), fabric.setup and DDP fail with "
            f"'NotImplementedError: Cannot copy out of meta tensor; no data!'; keep it out of the tree "
            f"(self._{found.attr.lstrip('_')} = [...] or object.__setattr__(self, '{found.attr}', ...)) or build it on "
            f"demand in a method ({contract.DECORATOR_MODULE}.check_no_meta(model) names such tensors at run time)")


def check(view: ProjectIndex, facts: FileFacts) -> Iterator[Diagnostic]:
    for found in facts.meta_submodules:
        cls = facts.class_named(found.cls)
        if found.materialised or cls is None:
            continue
        ref = ClassRef(facts, cls)
        if not view.is_module_class(ref):
            continue
        verdict = _is_module_value(view, facts, ref, found)
        if verdict is False or (verdict is None and not found.value.startswith("param:")):
            continue
        symbol = f"{found.cls}.{found.attr}"
        yield Diagnostic(facts.path, found.line, found.col, CODE, message(found.cls, found, verdict is True), symbol,
                         help_for(found))
