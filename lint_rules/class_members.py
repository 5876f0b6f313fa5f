"""What one module class has: its methods through its MRO, and what each ``self.<attr>`` holds.

Whether ``self.<attr>`` holds an ``nn.Module`` is decided in this order: its type (the class or
factory it is built from, read from the project or the environment's installed packages; a
function or class object, or an instance of a class that is not a module, is not a module); then,
only if no source says "not a module" and some source is unknown (a registry build, an
unannotated constructor argument), evidence by use (``MODULE_API`` methods called on it) or the
class's own ``forward`` (or a helper it calls) calling it. This keeps ``self.tokenizer(...)``
and ``self.proposal_matcher(...)`` out while catching the common ``LightningModule(model)`` wrapper.
What an attribute holds is what every class of the hierarchy assigns to it, subclasses included.

``computation.ClassAnalysis`` extends ``ClassMembers`` with the question of which methods compute.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional, TypeVar

from lint_rules import contract
from lint_rules.facts.model import (
    ATTR_CALL, SRC_ANNOTATION, SRC_ATTR, SRC_CALL, SRC_ELEMENT, SRC_MODULE, SRC_NOT_MODULE, SRC_PARAM, SRC_PARAM_CALL,
    SRC_REF, SRC_RESULT, SUB_CALL, SUB_METHOD, SUPER_CALL, ClassFacts, MethodFacts, Source,
)
from lint_rules.project import ClassRef, ProjectIndex
from lint_rules.values import DYNAMIC, MISSING, Unresolved
from lint_rules.vocabulary import FACTORY_SUFFIXES, KEYED_CONTAINERS, MODULE_API, MODULE_METHODS, TORCH_NN_HEADS

T = TypeVar("T")
M = TypeVar("M", bound="ClassMembers")

#: Sources of an attribute that name what it is built from (``unknown_attr`` reads them).
_NAMED_SOURCES = frozenset({SRC_CALL, SRC_PARAM, SRC_PARAM_CALL, SRC_ANNOTATION, SRC_ELEMENT, SRC_REF})


@dataclass
class ClassMembers:
    """Lazily answers what one class has: methods by name, what each attribute holds."""

    index: ProjectIndex
    ref: ClassRef
    mro: list[ClassRef] = field(init=False)
    # name -> (MRO position counted from the end, method): a base's map holds unchanged in a subclass
    # whose MRO continues as the base's, so a subclass copies it instead of walking every base
    _methods: dict[str, tuple[int, MethodFacts]] = field(init=False)
    _submodule: dict[str, bool] = field(default_factory=dict)
    _forward_calls: Optional[set[str]] = None
    _unknown_attr: dict[str, Optional[Unresolved]] = field(default_factory=dict)
    _family: Optional[list[ClassRef]] = None  # the class, its bases and its subclasses (``sources``)
    _sources: dict[str, list[tuple[ClassRef, Source]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.mro = mro = self.index.mro(self.ref)
        last = len(mro) - 1
        if last and self.index.mro(mro[1]) == mro[1:]:  # PreTrainedModel's 3,830 subclasses: ~200 names each
            self._methods = dict(shared(self.index, mro[1], type(self))._methods)
            own: dict[str, tuple[int, MethodFacts]] = {}
            for method in self.ref.cls.methods:
                own.setdefault(method.name, (last, method))
            self._methods.update(own)
            return
        self._methods = {}
        for position, item in enumerate(mro):
            for method in item.cls.methods:
                self._methods.setdefault(method.name, (last - position, method))

    # -- lookups ---------------------------------------------------------------------------
    def method(self, name: str) -> Optional[MethodFacts]:
        """``lookup`` without the position (asked of every subclass by ``_overriders``)."""
        found = self._methods.get(name)
        return found[1] if found is not None else None

    def lookup(self, name: str, after: int = -1) -> Optional[tuple[int, MethodFacts]]:
        if after < 0:
            found = self._methods.get(name)
            return (len(self.mro) - 1 - found[0], found[1]) if found is not None else None
        for position in range(after + 1, len(self.mro)):
            for method in self.mro[position].cls.methods:
                if method.name == name:
                    return position, method
        return None

    def sources(self, attr: str) -> list[tuple[ClassRef, Source]]:
        """What is assigned to ``self.<attr>`` in the class, its bases and its subclasses anywhere in
        the project: a base that uses ``self.backbone`` which only its subclasses assign (through a
        factory in another file) holds whatever they assign."""
        found = self._sources.get(attr)
        reads = self.index.reads
        if reads is not None:
            reads.reused("analysis", self.ref.key)
            if found is not None:
                reads.reused("sources", (self.ref.key, attr))
                return found
            start = reads.begin()
        if found is None:
            if self._family is None:
                own = self.index.holds(self.ref.file.path)  # an installed class is not extended by the project
                self._family = [*self.mro, *(self.index.subclasses(self.ref) if own else ())]
            by_class = self.index.derived.setdefault("attributes by class", {})
            found = self._sources[attr] = [(item, src) for item in self._family
                                           for src in _per_class(by_class, item.cls, _attributes).get(attr, ())]
            if reads is not None:
                reads.done("sources", (self.ref.key, attr), start)
        return found

    def unknown_attr(self, attr: str) -> Optional[Unresolved]:
        """The name, among what ``self.<attr>`` is built from, that the analysis could not read
        because its package is missing or it is bound at run time (``values``); None if none."""
        reads = self.index.reads
        if reads is not None and attr in self._unknown_attr:
            reads.reused("unknown attr", (self.ref.key, attr))
        if attr not in self._unknown_attr:
            start = reads.begin() if reads is not None else 0
            found = None
            for item, src in self.sources(attr):
                if src.ref and src.kind in _NAMED_SOURCES:
                    why = self.index.unresolved(src.ref, item.file)
                    if why is not None and why.reason in (MISSING, DYNAMIC):
                        found = why
                        break
            self._unknown_attr[attr] = found
            if reads is not None:
                reads.done("unknown attr", (self.ref.key, attr), start)
        return self._unknown_attr[attr]

    def _depends(self, attr: str, method: str = "") -> None:
        """A "no" decided by an attribute that could not be read: the verdict depends on it (unless
        the call is one of ``Module``'s own methods, which compute nothing on any module)."""
        if attr and method not in MODULE_METHODS:
            why = self.unknown_attr(attr)
            if why is not None:
                self.index.note(why)

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
        """Does ``self.<attr>`` hold an ``nn.Module``? Types first (loading the files that define
        them), then evidence by use (``self.attr.eval()``), then the class's own forward calling it."""
        reads = self.index.reads
        if reads is not None:
            reads.reused("analysis", self.ref.key)
            if attr in self._submodule:  # the answer, or (if open: a cycle) whatever it will be
                reads.reused("submodule", (self.ref.key, attr))
        if attr in self._submodule:
            return self._submodule[attr]
        start = reads.begin() if reads is not None else 0
        self._submodule[attr] = False  # cycle guard for self.a = self.b chains
        sources = self.sources(attr)
        # Cheap verdicts first: loading other files is the expensive part of a run.
        verdicts = [self._source_verdict(item, src, load=False) for item, src in sources]
        if True not in verdicts and None in verdicts:
            verdicts = [self._source_verdict(item, src, load=True) for item, src in sources]
        # Guess only where no source was found not to be a module (``matcher = matcher or
        # Matcher()``: the parameter is what the default says), and none is a name that could not be
        # read: that is not guessed, it is reported (FWD005).
        result = True in verdicts or (None in verdicts and False not in verdicts and self.unknown_attr(attr) is None
                                      and (self._used_as_module(attr) or attr in self.calls_in_forward()))
        self._submodule[attr] = result
        if reads is not None:
            reads.done("submodule", (self.ref.key, attr), start)
        return result

    def _used_as_module(self, attr: str) -> bool:
        by_class = self.index.derived.setdefault("module uses by class", {})
        return any(attr in _per_class(by_class, item.cls, _module_uses) for item in self.mro)

    def _source_verdict(self, item: ClassRef, src: Source, load: bool) -> Optional[bool]:
        if src.kind == SRC_MODULE:
            return True
        if src.kind == SRC_NOT_MODULE:
            return False
        if src.kind == SRC_ATTR:
            return True if self.is_submodule(src.ref) else None
        if src.kind == SRC_REF:  # a function or a class itself, not an instance: never a module
            found = self.index.find_function(src.ref, item.file, load=load) or self.index.find_class(
                src.ref, item.file, load=load)
            return False if found is not None else None
        if src.kind == SRC_RESULT:
            found = self.lookup(src.ref)
            if found is None:
                return None
            if any(self.is_submodule(attr) for attr in found[1].returns):
                return True
            built = [self.index.is_module_ref(ref, item.file, load=load) for ref in found[1].builds]
            return True if True in built else None
        ref = src.ref
        if src.kind == SRC_CALL and ref.endswith(FACTORY_SUFFIXES):
            ref = ref.rpartition(".")[0]
            if ref.rpartition(".")[2].startswith("Auto"):
                return True
        if src.kind in (SRC_CALL, SRC_PARAM, SRC_PARAM_CALL, SRC_ANNOTATION, SRC_ELEMENT):
            verdict = self.index.is_module_ref(ref, item.file, load=load)
            if src.kind != SRC_CALL and verdict is False:
                return None  # an annotation or default that is not a module class tells nothing
            return verdict
        return None

    def submodule_classes(self, attr: str, load: bool = True, elements: bool = False) -> list[ClassRef]:
        """The classes ``self.<attr>`` is built from (``elements``: of what its container holds)."""
        kinds = (SRC_ELEMENT,) if elements else (SRC_CALL, SRC_PARAM, SRC_ANNOTATION, SRC_PARAM_CALL)
        found: list[ClassRef] = []
        for item, src in self.sources(attr):
            if src.kind in kinds and not src.ref.endswith(FACTORY_SUFFIXES):
                cls = self.index.find_class(src.ref, item.file, load=load)
                if cls is None and src.kind == SRC_CALL:  # the project's loader: the class it returns
                    cls = self.index.factory_class(src.ref, item.file, load=load)
                if cls is not None and all(cls.key != known.key for known in found):
                    found.append(cls)
        return found

    def _is_keyed_container(self, attr: str) -> bool:
        """A ``ModuleDict``/``Sequential``, whose entries are its attributes."""
        return any(src.kind in (SRC_CALL, SRC_ANNOTATION, SRC_PARAM) and src.ref.rpartition(".")[2] in (
            KEYED_CONTAINERS) and src.ref.split(".", 1)[0] in TORCH_NN_HEADS
            for _, src in self.sources(attr))

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

    def quoted_methods(self) -> list[str]:
        """Methods whose names are quoted in the class's files: getattr dispatch targets."""
        quoted = {name for item in self.mro for name in item.file.quoted}
        return sorted(name for name in quoted if name in self._methods)

    # -- who calls whom --------------------------------------------------------------------
    def called_names(self) -> set[str]:
        """Method names called from methods of this class, its bases and its subclasses."""
        by_class = self.index.derived.setdefault("calls by class", {})
        return set(self.quoted_methods()).union(
            *(_per_class(by_class, item.cls, _called_names) for item in [*self.mro, *self.index.subclasses(self.ref)]))


def shared(index: ProjectIndex, ref: ClassRef, kind: type[M]) -> M:
    """The one analysis of ``ref`` in this view (kept in ``ProjectIndex.analyses``)."""
    found = index.analyses.get(ref.key)
    reads = index.reads
    if found is None:
        start = reads.begin() if reads is not None else 0
        found = index.analyses[ref.key] = kind(index, ref)
        if reads is not None:
            reads.done("analysis", ref.key, start)
    elif reads is not None:
        reads.reused("analysis", ref.key)
    return found  # type: ignore[return-value]


def _per_class(by_class: dict[int, T], cls: ClassFacts, make: Callable[[ClassFacts], T]) -> T:
    """What ``make`` reads off one class, made once per class rather than once per class analysing
    it (each of ``PreTrainedModel``'s 3,830 subclasses reads its bases' too); by ``id``, in
    ``ProjectIndex.derived``, which is emptied when a file is added."""
    found = by_class.get(id(cls))
    if found is None:
        found = by_class[id(cls)] = make(cls)
    return found


def _attributes(cls: ClassFacts) -> dict[str, list[Source]]:
    """The sources of each ``self.<name>`` the class assigns, by name."""
    found: dict[str, list[Source]] = {}
    for name, srcs in cls.attrs:
        found.setdefault(name, []).extend(srcs)
    return found


def _module_uses(cls: ClassFacts) -> frozenset[str]:
    """Attributes whose ``Module`` methods the class calls (``self.encoder.eval()``)."""
    return frozenset(use.name for method in cls.methods for use in method.uses
                     if use.kind == SUB_METHOD and use.method in MODULE_API)


def _called_names(cls: ClassFacts) -> frozenset[str]:
    """Method names the class's methods call on ``self`` or ``super()``, their own names apart."""
    return frozenset(use.name for method in cls.methods for use in method.uses
                     if use.kind in (ATTR_CALL, SUPER_CALL) and use.name != method.name)
