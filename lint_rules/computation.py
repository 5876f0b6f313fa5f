"""Which methods of a module class run module computation, and the evidence chain for each.

A method computes if its body (nested functions, lambdas and comprehensions included) calls
``self(...)``/``self.forward``/``super().forward``, calls a submodule, calls a computing method
of a submodule, or calls another method of the class (any depth, through bases) that does.

Submodules are attributes assigned an ``nn.Module`` anywhere in the class or its bases. Where the
file does not tell what an attribute holds (an unannotated constructor argument ``self.net = net``,
a factory result, a class from a package that is not analysed) the attribute counts as a submodule
if and only if the class's own ``forward`` (or a helper it calls) calls it: the class itself then
treats it as part of its computation. This keeps ``self.tokenizer(...)`` and ``self.scheduler``
out while catching the common ``LightningModule(model)`` wrapper.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Optional

from lint_rules.facts.model import (
    ATTR_CALL, DELEGATE_CALL, DYNAMIC_CALL, RESULT_CALL, SELF_CALL, SRC_ANNOTATION, SRC_ATTR, SRC_CALL, SRC_MODULE,
    SRC_NOT_MODULE, SRC_PARAM, SRC_PARAM_CALL, SUB_CALL, SUB_METHOD, SUB_RESULT, SUPER_CALL, MethodFacts,
    Source,
)
from lint_rules import contract
from lint_rules.project import ClassRef, ProjectIndex

_FORWARD_NAMES = frozenset({"forward", "__call__"})
#: Methods of a submodule whose class the project does not have that we still treat as
#: computation (``self.model.generate(...)`` on a Hugging Face model held by a LightningModule).
ENTRY_METHOD_NAMES = frozenset({
    "generate", "encode", "decode", "sample", "forward_features", "forward_head",
    "get_image_features", "get_text_features",
    # Hugging Face's conventional submodule names and `base_model` (a property returning one).
    "base_model", "model", "encoder", "decoder", "backbone", "language_model", "vision_model",
    "text_model", "embed_tokens", "lm_head",
})
_FACTORY_SUFFIXES = (".from_pretrained", ".from_config", ".from_single_file")
#: Getters whose result is a submodule when the project cannot show what they return
#: (``self.get_input_embeddings()(ids)``, ``enc = self.get_encoder(); enc(x)``).
_MODULE_GETTER = re.compile(r"get_\w*(embeddings|encoder|decoder|model|backbone|head|layer|module)s?")

Chain = list[str]


@dataclass
class ClassAnalysis:
    """Lazily answers computation questions for one class (its own MRO)."""

    index: ProjectIndex
    ref: ClassRef
    mro: list[ClassRef] = field(init=False)
    _methods: dict[str, tuple[int, MethodFacts]] = field(init=False)
    _chains: dict[tuple[int, str, str], Optional[Chain]] = field(default_factory=dict)
    # Cycle handling (a calls b, b calls a): a "no" reached through a method still being
    # evaluated is provisional, kept aside until the outermost evaluation ends.
    _active: set[tuple[int, str, str]] = field(default_factory=set)
    _pending: list[tuple[int, str, str]] = field(default_factory=list)
    _hit_active: bool = False
    _submodule: dict[str, bool] = field(default_factory=dict)
    _forward_calls: Optional[set[str]] = None

    def __post_init__(self) -> None:
        self.mro = self.index.mro(self.ref)
        self._methods = {}
        for position, item in enumerate(self.mro):
            for method in item.cls.methods:
                self._methods.setdefault(method.name, (position, method))

    # -- lookups ---------------------------------------------------------------------------
    def lookup(self, name: str, after: int = -1) -> Optional[tuple[int, MethodFacts]]:
        if after < 0:
            return self._methods.get(name)
        for position in range(after + 1, len(self.mro)):
            for method in self.mro[position].cls.methods:
                if method.name == name:
                    return position, method
        return None

    def sources(self, attr: str) -> list[tuple[ClassRef, Source]]:
        return [(item, src) for item in self.mro for name, srcs in item.cls.attrs if name == attr for src in srcs]

    def calls_in_forward(self) -> set[str]:
        """Attribute names called by forward or by the helpers forward calls."""
        if self._forward_calls is None:
            called: set[str] = set()
            todo = ["forward"]
            seen: set[str] = set()
            while todo:
                name = todo.pop()
                found = self.lookup(name)
                if name in seen or found is None:
                    continue
                seen.add(name)
                for use in found[1].uses:
                    if use.kind in (ATTR_CALL, SUB_CALL):
                        called.add(use.name)
                        if use.kind == ATTR_CALL:
                            todo.append(use.name)
            self._forward_calls = called
        return self._forward_calls

    def is_submodule(self, attr: str) -> bool:
        if attr in self._submodule:
            return self._submodule[attr]
        self._submodule[attr] = False  # cycle guard for self.a = self.b chains
        sources = self.sources(attr)
        # Cheap verdicts first: loading other files is the expensive part of a run.
        verdicts = [self._source_verdict(item, src, load=False) for item, src in sources]
        if True not in verdicts and None in verdicts and attr not in self.calls_in_forward():
            verdicts = [self._source_verdict(item, src, load=True) for item, src in sources]
        result = True in verdicts or (None in verdicts and attr in self.calls_in_forward())
        self._submodule[attr] = result
        return result

    def _source_verdict(self, item: ClassRef, src: Source, load: bool) -> Optional[bool]:
        if src.kind == SRC_MODULE:
            return True
        if src.kind == SRC_NOT_MODULE:
            return False
        if src.kind == SRC_ATTR:
            return True if self.is_submodule(src.ref) else None
        ref = src.ref
        if src.kind == SRC_CALL and ref.endswith(_FACTORY_SUFFIXES):
            ref = ref.rpartition(".")[0]
            if ref.rpartition(".")[2].startswith("Auto"):
                return True
        if src.kind in (SRC_CALL, SRC_PARAM, SRC_PARAM_CALL, SRC_ANNOTATION):
            verdict = self.index.is_module_ref(ref, item.file, load=load)
            if src.kind != SRC_CALL and verdict is False:
                return None  # an annotation or default that is not a module class tells nothing
            return verdict
        return None

    def submodule_class(self, attr: str, load: bool = True) -> Optional[ClassRef]:
        for item, src in self.sources(attr):
            if src.kind in (SRC_CALL, SRC_PARAM, SRC_ANNOTATION, SRC_PARAM_CALL) and not src.ref.endswith(
                    _FACTORY_SUFFIXES):
                found = self.index.find_class(src.ref, item.file, load=load)
                if found is not None:
                    return found
        return None

    # -- the question ----------------------------------------------------------------------
    def chain(self, name: str) -> Optional[Chain]:
        """Evidence that method ``name`` computes: [name, helper, ..., "self(...) at line N"]."""
        found = self.lookup(name)
        return self._chain(found[0], found[1]) if found else None

    def _chain(self, position: int, method: MethodFacts) -> Optional[Chain]:
        key = (position, method.name, method.kind)
        if key in self._chains:
            return self._chains[key]
        if key in self._active:  # a cycle: recursion adds no evidence, but the caller's "no" is provisional
            self._hit_active = True
            return None
        outermost = not self._active
        outer_hit, self._hit_active = self._hit_active, False
        self._active.add(key)
        try:
            result = self._evaluate(position, method)
        finally:
            self._active.discard(key)
        provisional = self._hit_active and result is None
        self._hit_active = outer_hit or provisional
        if provisional:
            self._pending.append(key)
        else:
            self._chains[key] = result
        if outermost:
            # Evaluation is exhaustive: if the outermost method computes nothing, neither does
            # anything it reached. If it computes, the provisional "no"s may be wrong: forget them
            # (asked again, they find the now known "yes"). So the order of definitions never matters.
            for pending in self._pending:
                if result is None:
                    self._chains[pending] = None
            self._pending.clear()
            self._hit_active = False
        return result

    def _evaluate(self, position: int, method: MethodFacts) -> Optional[Chain]:
        for use in method.uses:
            # Files read only to resolve names are not located (line 0): say less, not wrong.
            evidence = f"{use.text} at line {use.line}" if use.line else use.text
            if use.kind == SELF_CALL:
                return [method.name, evidence]
            if use.kind == SUPER_CALL:
                if use.name in _FORWARD_NAMES:
                    return [method.name, evidence]
                found = self.lookup(use.name, after=position)
                inner = self._chain(*found) if found else None
                if inner:
                    return [method.name, *inner[1:]] if inner[0] == method.name else [method.name, *inner]
            elif use.kind == ATTR_CALL:
                found = self.lookup(use.name)
                if found is not None:
                    if use.name in _FORWARD_NAMES:
                        return [method.name, evidence]
                    inner = self._chain(*found)
                    if inner:
                        return [method.name, *inner]
                elif self.is_submodule(use.name):
                    return [method.name, evidence]
            elif use.kind == SUB_CALL:
                if self.is_submodule(use.name):
                    return [method.name, evidence]
            elif use.kind == SUB_METHOD and self._submethod_computes(use.name, use.method):
                return [method.name, evidence]
            elif use.kind == RESULT_CALL and self._getter_returns_submodule(use.name):
                return [method.name, evidence]
            elif use.kind == SUB_RESULT and _MODULE_GETTER.fullmatch(use.method) and self.is_submodule(use.name):
                return [method.name, evidence]
            elif use.kind == DELEGATE_CALL:
                function = self.mro[position].file.delegate(use.name, int(use.method))
                inner = self._chain(position, function) if function is not None else None
                if inner:
                    return [method.name, *inner]
            elif use.kind == DYNAMIC_CALL:
                for name in self.quoted_methods():
                    if name != method.name:
                        inner = self.chain(name)
                        if inner:
                            return [method.name, *inner]
        return None

    def _getter_returns_submodule(self, name: str) -> bool:
        found = self.lookup(name)
        if found is not None and found[1].returns:
            return any(self.is_submodule(attr) for attr in found[1].returns)
        return _MODULE_GETTER.fullmatch(name) is not None

    def quoted_methods(self) -> list[str]:
        """Methods whose names are quoted in the class's files: getattr dispatch targets."""
        quoted = {name for item in self.mro for name in item.file.quoted}
        return sorted(name for name in quoted if name in self._methods)

    def _submethod_computes(self, attr: str, method: str) -> bool:
        """``self.attr.method(...)``. The attribute's class is looked up among files already
        read unless the name is a known entry method or forward calls the attribute: reading
        files to learn what ``self.config.to_dict()`` is would dominate the run time."""
        if method in contract.LIGHTNING_STEP_METHODS and self._holds_lightning_module(attr):
            return True  # whatever LightningModule it holds, its step runs the model
        known_entry = method in ENTRY_METHOD_NAMES
        target = self.submodule_class(attr, load=known_entry or attr in self.calls_in_forward())
        if (target is None and not known_entry) or not self.is_submodule(attr):
            return False
        if target is None or target.key == self.ref.key:
            return known_entry
        analysis = analysis_for(self.index, target)
        if analysis.lookup(method) is None:
            return known_entry
        return analysis.chain(method) is not None

    def _holds_lightning_module(self, attr: str) -> bool:
        if not self.is_submodule(attr):
            return False
        for item, src in self.sources(attr):
            if contract.is_lightning_module(src.ref):
                return True
            found = self.index.find_class(src.ref, item.file, load=False) if src.ref else None
            if found is not None and self.index.is_lightning_class(found):
                return True
        return False

    # -- who calls whom --------------------------------------------------------------------
    def called_names(self) -> set[str]:
        """Method names called from methods of this class, its bases and its subclasses."""
        names: set[str] = set()
        for item in [*self.mro, *self.index.subclasses(self.ref)]:
            for method in item.cls.methods:
                for use in method.uses:
                    if use.kind in (ATTR_CALL, SUPER_CALL) and use.name != method.name:
                        names.add(use.name)
        return names | set(self.quoted_methods())


def analysis_for(index: ProjectIndex, ref: ClassRef) -> ClassAnalysis:
    found = index.analyses.get(ref.key)
    if found is None:
        found = index.analyses[ref.key] = ClassAnalysis(index, ref)
    return found  # type: ignore[return-value]


def never_entry(method: MethodFacts, lightning: bool) -> bool:
    """Methods that are never forward entry points: not plain methods (static, class, property:
    they cannot be routed), ``forward`` and the call protocol, dunders, and the step methods that
    Lightning routes itself on a LightningModule."""
    return (
        method.kind != "method"
        or method.name in contract.NEVER_ENTRY
        or contract.is_dunder(method.name)
        or (lightning and method.name in contract.LIGHTNING_STEP_METHODS)
    )
