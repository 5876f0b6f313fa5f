"""FWD301 instance-forward-patch: ``forward`` rebound on an instance, or a class renamed through one.

Kernel libraries and quantisation tools swap a module's computation by rebinding ``forward`` on
the instance (``m.forward = types.MethodType(fast_forward, m)``). The instance keeps its class, so
``print(model)`` shows the original class names and nobody can tell whether the patch applied
(Liger-Kernel's users could not). Worse, forward-routing wrappers collide with an instance
``forward``: Lightning Fabric's ``mark_forward_method`` routes a method by temporarily replacing
the instance's ``forward`` and restores whatever it found, and ``runtime_shim.guard`` leaves
modules with an instance ``forward`` unguarded (no routing, no detection). The later fix of
renaming the class (``type(m).__name__ = "LigerRMSNorm"``) renames it for every other instance and
every other user of the class.

Use ``runtime_shim.patch_forward(m, fast_forward, name="LigerRMSNorm")`` instead: it moves that one
instance to a named subclass whose ``forward`` is the new function, so ``print`` tells the truth,
``isinstance`` still holds, other instances are untouched, and ``state_dict``, ``deepcopy``,
``pickle``, ``torch.compile`` and the wrappers keep working (``unpatch_forward`` undoes it).

What is reported (anywhere but class bodies)
    ``m.forward = types.MethodType(f, m)``, ``m.forward = f.__get__(m)``,
    ``m.forward = functools.partial(f, m)``, any other ``<obj>.forward = ...`` on an instance
    (``self.forward = self._fast``), ``setattr(m, "forward", ...)``,
    ``object.__setattr__(m, "forward", ...)``, ``m.__dict__["forward"] = ...``,
    ``vars(m)["forward"] = ...``; and renaming a class through an instance:
    ``x.__class__.__name__ = ...``, ``type(x).__name__ = ...`` (also ``__qualname__`` and the
    ``setattr`` spelling).

    The end of a swap (``orig = m.forward; m.forward = f; ...; m.forward = orig``, or accelerate's
    ``module._old_forward = module.forward`` then ``module.forward = module._old_forward``) has a
    message of its own: what it puts back is a bound method stored on the instance, which stays an
    instance forward after the swap (``del m.forward`` restores the class's).

    Also a call that hands ``"forward"`` to a helper which sets the attribute it is given on its
    first argument (``_bind_method_to_module(m, "forward", fn)``, whose body does
    ``module.__dict__[name] = fn.__get__(module)``), the helper read in the same file or the one it
    is imported from.

    At the user's call: handing an object to a function of another package that rebinds
    ``forward`` on the parameter it fills (``apply_liger_kernel_to_llama(model=model)``, whose body
    does ``model.forward = MethodType(lce_forward, model)``; 41 of Liger-Kernel 0.8.5's 45
    ``apply_liger_kernel_to_*`` functions do), read from the installed package (``--python``); the
    message names the line there. Not followed: a function that patches only what it reaches from
    the parameter (``_patch_rms_norm_module(model.model.norm)``), or that dispatches through a
    mapping (transformers' ``_apply_liger_kernel_to_instance(model=...)``, the one such call in the
    19 labelled packages, is missed).

Not reported
    Patching a class (``Block.forward = f``, ``type(m).forward = f``, ``cls.forward = f``): every
    instance changes consistently and the printed class is still the one that runs. The receiver
    is a class when the code says so: the project view finds it as a class, it is ``cls`` of a
    class method or ``__init_subclass__``, a parameter annotated ``type[...]``, or a name bound to
    ``type(x)`` / ``x.__class__``. Only when nothing tells, PEP 8's naming conventions decide (the
    one name-based judgement of this rule): CapWords names (``LlamaRMSNorm``,
    ``modeling_llama.LlamaRMSNorm``) and ``cls`` / ``klass`` / ``*_cls`` / ``*_class`` are classes.
    Objects known not to be modules: ``self`` of a class whose bases are all known non-modules, a
    name bound to ``X(...)`` or annotated ``X`` where ``X`` is known not to be a module.
    Assignments in class bodies (``forward = _fast_forward`` defines the class).

Fix
    ``--fix`` rewrites the plain form ``m.forward = types.MethodType(f, m)`` (a single statement
    on its line, ``f`` a plain name, the same object on both sides) into
    ``patch_forward(m, f)`` and imports ``patch_forward`` from ``runtime_shim``. Every other form
    is reported as not fixed: a lambda, a partial or an attribute function may need ``self``
    differently, and a rename has no mechanical replacement.

Real code
    ``benchmarks/hazard_labels.tsv``: 11 packages (liger-kernel, unsloth, transformers, peft,
    accelerate, diffusers, deepspeed, torchao, timm, lightning, litgpt; versions in its header)
    searched and every occurrence labelled by hand before this rule first ran on them: 139 instance
    patches (55 in liger-kernel, 31 in unsloth, 6 in Lightning Fabric's own ``mark_forward_method``),
    88 look-alikes on plain objects, 145 class patches; no class renamed through an instance.
    First contact: precision 0.811, recall 0.928 (class patches through ``cls`` and star-imported
    names, ``self`` of plain classes, liger's ``_bind_method_to_module``); after reading receivers
    and setter helpers: 0.993 / 1.000 (``benchmarks/hazard_eval.py``; that set is no longer unseen).
    The one false alarm left, an element of diffusers' ``HookRegistry._fn_refs`` (plain
    ``HookFunctionReference`` objects), is silent since elements of a container attribute are
    judged by what the class puts there: 1.000 / 1.000.
    ``benchmarks/hazard_labels_new.tsv``: 7 more packages (torchtune, trl, open_clip,
    sentence-transformers, torchrl, composer, ultralytics), labelled by hand before this rule ran on
    them: first contact 0.970 / 0.970 (a metaclass's ``cls.forward = ...`` taken for an instance;
    ``setattr(module, forward_name, ...)`` with the name in a variable missed), 1.000 / 0.970 once
    a metaclass's methods are known to receive a class.
"""

from __future__ import annotations

from typing import Iterator, Mapping, Optional, Sequence

from lint_rules import contract
from lint_rules.diagnostics import Diagnostic
from lint_rules.facts.model import SRC_ELEMENT, SRC_NOT_MODULE, FileFacts, ForwardPatch, Handover
from lint_rules.fix.result import FileFix, FixContext, Unfixed
from lint_rules.project import ClassRef, ProjectIndex
from lint_rules.rules.base import Invalid, Valid

CODE = "FWD301"
NAME = "instance-forward-patch"

VALID = (
    Valid("""
import torch.nn as nn
from runtime_shim import patch_forward


def fast_forward(self, x):
    return x


class Block(nn.Module):
    forward = fast_forward


def apply(model):
    for module in model.modules():
        if isinstance(module, nn.LayerNorm):
            patch_forward(module, fast_forward, name="FastLayerNorm")
    Block.forward = fast_forward          # the class itself: every instance alike
    type(model).forward = fast_forward
"""),
)

INVALID = (
    Invalid("""
import functools
import types

import torch.nn as nn


def fast_forward(self, x):
    return x


class Model(nn.Module):
    def __init__(self, fused):
        super().__init__()
        if fused:
            self.forward = self._fused  # expect: FWD301 "rebinds forward on an instance"

    def _fused(self, x):
        return x


def apply(model, norm):
    norm.forward = types.MethodType(fast_forward, norm)  # expect: FWD301 "runtime_shim.patch_forward(norm"
    norm.forward = fast_forward.__get__(norm)  # expect: FWD301 "print(model) still shows"
    norm.forward = functools.partial(fast_forward, norm)  # expect: FWD301 "Fabric's mark_forward_method"
    setattr(model, "forward", fast_forward)  # expect: FWD301 "setattr"
    model.__dict__["forward"] = fast_forward  # expect: FWD301 "__dict__"
    type(norm).__name__ = "FastNorm"  # expect: FWD301 "renames the class for every instance"
"""),
)

_HOW = {
    "MethodType": "types.MethodType(...)",
    "__get__": "f.__get__(...)",
    "partial": "functools.partial(...)",
    "assign": "an assignment",
    "setattr": "setattr(...)",
    "__dict__": "its __dict__",
}


def _named_like_a_class(receiver: str) -> bool:
    """PEP 8's conventions, for receivers nothing else tells: CapWords names (``LlamaRMSNorm``,
    ``modeling_llama.LlamaRMSNorm``) and ``cls`` / ``klass`` / ``*_cls`` / ``*_class``."""
    parts = receiver.split(".")
    last = parts[-1]
    if last in ("cls", "klass") or last.endswith(("_cls", "_class")):
        return True
    return (last[:1].isupper() and not last.isupper() and all(p[:1].islower() or p[:1] == "_" for p in parts[:-1])
            and parts[0] != "self")


def _receiver(view: ProjectIndex, facts: FileFacts, patch: ForwardPatch) -> str:
    """"class" (a class patch), "plain" (an object known not to be a module) or "instance"."""
    kind = patch.receiver_type
    if kind == "class":
        return "class"
    if kind.startswith("self:"):
        cls = facts.class_named(kind[5:])
        if cls is not None and _known_not_module(view, facts, cls.bases) and not view.is_module_mixin(
                ClassRef(facts, cls)):
            return "plain"
        return "instance"
    if kind.startswith("element:"):  # self.<attr>[i]: plain if what the class puts there is known not to be a module
        qualname, _, attr = kind[8:].rpartition(".")
        cls = facts.class_named(qualname)
        sources = [src for name, found in (cls.attrs if cls is not None else ()) if name == attr for src in found]
        elements = [src for src in sources if src.kind == SRC_ELEMENT]
        plain = elements and all(src.kind in (SRC_ELEMENT, SRC_NOT_MODULE) for src in sources) and all(
            view.is_module_ref(src.ref, facts) is False for src in elements)
        return "plain" if plain else "instance"
    if kind.startswith("ref:"):
        verdict = view.is_module_ref(kind[4:], facts)
        if verdict is False:
            return "plain"
        return "class" if verdict is None and _named_like_a_class(patch.receiver) else "instance"
    if patch.receiver_ref and view.find_class(patch.receiver_ref, facts) is not None:
        return "class"
    return "class" if _named_like_a_class(patch.receiver) else "instance"


def _known_not_module(view: ProjectIndex, facts: FileFacts, bases: tuple[str, ...]) -> bool:
    """Every base is known not to be a module (a class with no bases is a plain object)."""
    return all(view.is_module_ref(base, facts) is False for base in bases if base not in ("object", "builtins.object"))


def _sets_forward(view: ProjectIndex, facts: FileFacts, patch: ForwardPatch) -> bool:
    """Does the helper called with "forward" set that attribute on its first argument?"""
    module, _, name = patch.function.rpartition(".")
    holder = facts if not module or module == facts.module else view.module(module)
    return holder is not None and (name, 0, patch.slot) in holder.attr_setters


def message(patch: ForwardPatch) -> tuple[str, str]:
    """(message, help) for a patch of this file."""
    receiver = patch.receiver or "obj"
    if patch.form == "restore":  # the end of a swap: what it puts back is an instance attribute too
        return (f"{receiver}.forward = {patch.function} restores the saved bound method as an instance attribute",
                f"{receiver} keeps an instance forward after the swap, which forward-routing wrappers collide with; "
                f"when the saved one was the class's, restore with `del {receiver}.forward`")
    if patch.form == "rename":
        name = patch.at if patch.at in ("__name__", "__qualname__") else "__name__"
        return (f"renaming a class through an instance (type({receiver}).{name} = ...) renames the "
                f"class for every instance",
                f"every other user of the class sees the new name too, not just the patched instance; use "
                f"{contract.DECORATOR_MODULE}.patch_forward({receiver}, fn, name=...) to give one patched "
                f"instance a class of its own")
    function = patch.function if patch.function and patch.form != "helper" else "fn"
    how = f"{patch.function.rpartition('.')[2]}(..., 'forward', ...)" if patch.form == "helper" else _HOW[patch.form]
    return (f"{receiver}.forward: {how} rebinds forward on an instance: print(model) still shows the original class",
            f"nobody can tell the patch applied, and forward-routing wrappers collide "
            f"with an instance forward (Fabric's mark_forward_method swaps it and restores what it found; "
            f"runtime_shim.guard leaves the module unguarded); use "
            f"{contract.DECORATOR_MODULE}.patch_forward({receiver}, {function}), which moves this instance to a "
            f"named subclass")


def _patches_instance(view: ProjectIndex, facts: FileFacts, patch: ForwardPatch) -> bool:
    if patch.form == "helper" and not _sets_forward(view, facts, patch):
        return False
    return patch.form == "rename" or _receiver(view, facts, patch) == "instance"


def _patch_of_given(view: ProjectIndex, facts: FileFacts, handed: Handover) -> Optional[tuple[FileFacts, ForwardPatch]]:
    """The line of a function outside the project that rebinds ``forward`` on the parameter
    ``handed`` fills (``model.forward = MethodType(fast, model)`` in Liger's
    ``apply_liger_kernel_to_llama(model=...)``)."""
    found = view.find_function(handed.callee, facts)
    if found is None or view.holds(found[0].path):  # the project's own: reported at its patch line
        return None
    file, function = found
    param = function.params[int(handed.slot)] if handed.slot.isdigit() and int(handed.slot) < len(
        function.params) else handed.slot
    if param not in function.params:
        return None
    patch = next((p for p in file.forward_patches if p.scope == function.name and p.receiver == param
                  and p.form not in ("rename", "restore") and _patches_instance(view, file, p)), None)
    return (file, patch) if patch is not None else None


def check(view: ProjectIndex, facts: FileFacts) -> Iterator[Diagnostic]:
    for patch in facts.forward_patches:
        if _patches_instance(view, facts, patch):
            text, advice = message(patch)
            yield Diagnostic(facts.path, patch.line, patch.col, CODE, text, f"{patch.receiver}.{patch.at}", advice)
    for handed in facts.handovers:
        found = _patch_of_given(view, facts, handed)
        if found is not None:
            yield Diagnostic(facts.path, handed.line, handed.col, CODE, *given_message(handed, *found))


def given_message(handed: Handover, file: FileFacts, patch: ForwardPatch) -> tuple[str, str, str]:
    """(message, symbol, help) for a call that hands a model to a library function that patches it."""
    name = handed.callee.rpartition(".")[2]
    given = handed.argument if handed.slot.isdigit() else f"{handed.slot}={handed.argument}"
    return (f"{name}({given}) rebinds forward on the instance it is given ({file.module or 'its module'} line "
            f"{patch.line}: {patch.receiver}.forward = ...)", name,
            f"print({handed.argument}) still shows the original "
            f"classes, and forward-routing wrappers collide with an instance forward (Fabric's mark_forward_method, "
            f"runtime_shim.guard); where the library can patch the classes instead, do that before the model is "
            f"built (Liger: apply_liger_kernel_to_*() without model=)")


def fix(context: FixContext, findings: Sequence[Diagnostic],
        options: Mapping[str, str]) -> tuple[list[FileFix], list[Unfixed]]:
    """``--fix``: ``patch_forward(m, f)`` (imported here: LibCST is loaded only when something is fixed)."""
    from lint_rules.rules.fwd301_instance_forward_patch import fix_patch_forward as edit

    return edit.fix(context, findings)
