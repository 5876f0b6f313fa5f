"""The project index: facts of many files, and the questions that need more than one file.

Which class a name refers to, whether a class is an ``nn.Module`` (through bases in other files),
its method resolution order, and which method names are registered as forward entries. Files
that are imported but were not given for analysis are loaded lazily (located on disk next to the
analysed packages, extracted once, never reported on).
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

from lint_rules import contract
from lint_rules.facts.model import ClassFacts, FileFacts, MethodFacts

#: Library base classes that are ``nn.Module`` subclasses, matched by their last name so a
#: project need not have the library's source. Extended by the ``module-bases`` option.
KNOWN_MODULE_BASES = frozenset({
    "LightningModule", "PreTrainedModel", "ModelMixin", "PreTrainedAudioTokenizerBase",
    "TimmModule", "HookedRootModule",
})
_NOT_MODULE_TORCH_NN = frozenset({"Parameter", "Buffer", "UninitializedParameter", "UninitializedBuffer"})
_BUILTINS = frozenset(dir(builtins))


@dataclass(frozen=True)
class Config:
    module_bases: tuple[str, ...] = ()
    mark_decorators: tuple[str, ...] = ()  # the user's own decorators that apply forward_entry


@dataclass(frozen=True)
class ClassRef:
    file: FileFacts
    cls: ClassFacts

    @property
    def key(self) -> tuple[str, str]:
        return (self.file.path, self.cls.qualname)


Loader = Callable[[Path, str, bool], Optional[FileFacts]]


@dataclass
class ProjectIndex:
    config: Config
    loader: Loader  # reads and extracts a file that is imported but not analysed
    files: dict[str, FileFacts] = field(default_factory=dict)
    modules: dict[str, Optional[FileFacts]] = field(default_factory=dict)
    roots: list[Path] = field(default_factory=list)
    marked_names: set[str] = field(default_factory=set)  # registrations whose model's class is unknown
    # name -> (file, class, bound): registrations whose model's class the file tells; ``bound`` if
    # the model is one the file set up (FWD002 then counts the mark for that set-up only)
    class_marks: dict[str, list[tuple[FileFacts, str, bool]]] = field(default_factory=dict)
    analyses: dict[tuple[str, str], object] = field(default_factory=dict)  # computation.ClassAnalysis
    _module_cache: dict[tuple[str, str], bool] = field(default_factory=dict)
    _mro_cache: dict[tuple[str, str], list[ClassRef]] = field(default_factory=dict)
    _subclasses: Optional[dict[str, list[ClassRef]]] = None  # last name of a base -> classes

    def add(self, facts: FileFacts, root: Optional[Path] = None) -> None:
        """Add an analysed file (its marks count project-wide)."""
        self.files[facts.path] = facts
        if facts.module and facts.parsed:  # a skipped file is parsed lazily if an import needs it
            self.modules.setdefault(facts.module, facts)
        if root is not None and root not in self.roots:
            self.roots.append(root)
        for mark in facts.marks:
            if mark.cls:
                self.class_marks.setdefault(mark.name, []).append((facts, mark.cls, mark.site >= 0))
            else:
                self.marked_names.add(mark.name)
        self._subclasses = None

    # -- modules and classes ---------------------------------------------------------------
    def module(self, name: str) -> Optional[FileFacts]:
        if name in self.modules:
            return self.modules[name]
        found: Optional[FileFacts] = None
        relative = Path(*name.split(".")) if name else None
        for root in self.roots if relative else ():
            for candidate, is_package in ((root / relative.with_suffix(".py"), False),
                                          (root / relative / "__init__.py", True)):
                if candidate.is_file():
                    found = self.loader(candidate, name, is_package)
                    break
            if found is not None:
                break
        self.modules[name] = found
        return found

    def find_class(self, ref: str, origin: Optional[FileFacts] = None, depth: int = 0,
                   load: bool = True) -> Optional[ClassRef]:
        """The class a dotted reference (as resolved by ``extract``) names, if the project has it;
        with ``load=False`` only among files already read."""
        if not ref or depth > 8:
            return None
        if "." not in ref:
            return self._find_unqualified(ref, origin, depth, load)
        parts = ref.split(".")
        for cut in range(len(parts) - 1, 0, -1):
            name = ".".join(parts[:cut])
            facts = self.module(name) if load else self.modules.get(name)
            if facts is None:
                continue
            qualname = ".".join(parts[cut:])
            cls = facts.class_named(qualname)
            if cls is not None:
                return ClassRef(facts, cls)
            reexport = dict(facts.imports).get(parts[cut])
            if reexport is not None and reexport != ref:
                rest = ".".join(parts[cut + 1:])
                return self.find_class(f"{reexport}.{rest}" if rest else reexport, facts, depth + 1, load)
            for star in (target for name, target in facts.imports if name == "*"):
                found = self.find_class(f"{star}.{qualname}", facts, depth + 1, load)
                if found is not None:
                    return found
            return None
        return None

    def find_constructed(self, ref: str, origin: Optional[FileFacts] = None) -> Optional[ClassRef]:
        """The class of an object built by ``ref``: ``GPT`` itself or a factory on it
        (``GPT.from_pretrained``), tried with and without its last part."""
        for candidate in (ref, ref.rpartition(".")[0]):
            found = self.find_class(candidate, origin) if candidate else None
            if found is not None:
                return found
        return None

    def _find_unqualified(self, name: str, origin: Optional[FileFacts], depth: int,
                          load: bool) -> Optional[ClassRef]:
        if origin is None:
            return None
        cls = origin.class_named(name)
        if cls is not None:
            return ClassRef(origin, cls)
        for star in (target for key, target in origin.imports if key == "*"):
            found = self.find_class(f"{star}.{name}", origin, depth + 1, load)
            if found is not None:
                return found
        return None

    # -- module-ness -----------------------------------------------------------------------
    def is_module_ref(self, ref: str, origin: Optional[FileFacts] = None, load: bool = True) -> Optional[bool]:
        """True: an nn.Module class; False: known not to be one; None: cannot tell (or, with
        ``load=False``, cannot tell without reading another file)."""
        if not ref:
            return None
        head, _, last = ref.rpartition(".")
        if head in ("torch.nn", "nn") or head.startswith("torch.nn.modules"):
            return last[:1].isupper() and last not in _NOT_MODULE_TORCH_NN
        if ref.endswith(".nn.Module"):
            return True
        if last in KNOWN_MODULE_BASES or any(self._configured(ref, b) for b in self.config.module_bases):
            return True
        found = self.find_class(ref, origin, load=load)
        if found is not None:
            return self.is_module_class(found)
        if not load:
            return None
        if head.split(".", 1)[0] == "torch" or (not head and ref in _BUILTINS):
            return False
        return None

    @staticmethod
    def _configured(ref: str, base: str) -> bool:
        return ref == base if "." in base else ref.rpartition(".")[2] == base

    def is_module_class(self, ref: ClassRef) -> bool:
        key = ref.key
        if key not in self._module_cache:
            self._module_cache[key] = False  # cycle guard
            self._module_cache[key] = any(self.is_module_ref(b, ref.file) for b in ref.cls.bases)
        return self._module_cache[key]

    def is_lightning_class(self, ref: ClassRef) -> bool:
        return any(contract.is_lightning_module(f"{item.file.module}.{item.cls.qualname}")
                   or any(contract.is_lightning_module(base) for base in item.cls.bases)
                   for item in self.mro(ref))

    def mro(self, ref: ClassRef) -> list[ClassRef]:
        """The class and its project bases, depth first, left to right, without repeats.

        Known library bases (``PreTrainedModel``, ``ModelMixin``...) are taken from files already
        read but never loaded for this: they are modules by name, and reading them (5,000 lines
        for transformers' ``modeling_utils``) would cost more than the files being checked."""
        key = ref.key
        cached = self._mro_cache.get(key)
        if cached is not None:
            return cached
        self._mro_cache[key] = [ref]  # cycle guard
        order = [ref]
        seen = {key}
        for base in ref.cls.bases:
            found = self.find_class(base, ref.file, load=base.rpartition(".")[2] not in KNOWN_MODULE_BASES)
            if found is None:
                continue
            for item in self.mro(found):
                if item.key not in seen:
                    seen.add(item.key)
                    order.append(item)
        self._mro_cache[key] = order
        return order

    def subclasses(self, ref: ClassRef) -> list[ClassRef]:
        """Analysed classes that have ``ref`` among their bases (any depth).

        Candidates are found by the last name of their bases first, so only classes that can
        be subclasses get their bases resolved (resolving may read other files)."""
        if self._subclasses is None:
            by_name: dict[str, list[ClassRef]] = {}
            for facts in self.files.values():
                for cls in facts.classes:
                    for base in cls.bases:
                        by_name.setdefault(base.rpartition(".")[2], []).append(ClassRef(facts, cls))
            self._subclasses = by_name
        found: list[ClassRef] = []
        seen = {ref.key}
        frontier = [ref]
        while frontier:
            target = frontier.pop()
            for candidate in self._subclasses.get(target.cls.qualname.rpartition(".")[2], ()):
                if candidate.key in seen:
                    continue
                if any(item.key == target.key for item in self.mro(candidate)[1:]):
                    seen.add(candidate.key)
                    found.append(candidate)
                    frontier.append(candidate)
        return found

    def is_module_mixin(self, ref: ClassRef) -> bool:
        """A plain class that an analysed nn.Module subclass inherits (e.g. GenerationMixin)."""
        return any(self.is_module_class(sub) for sub in self.subclasses(ref))

    # -- marks -----------------------------------------------------------------------------
    def is_marked(self, method: MethodFacts, facts: FileFacts, ref: Optional[ClassRef] = None,
                  bound: bool = True) -> bool:
        """Is ``method`` (of class ``ref``, defined in ``facts``) marked?

        Registered somewhere in the project: for the class of the registered model when the
        registering file tells it (that class, its bases and its subclasses), by name alone when
        it does not. Or decorated with a mark the runtime honours: ``runtime_shim``'s own
        decorators (resolved through the file's imports, so a look-alike defined elsewhere does
        not count) or one named in ``mark-decorators``. ``bound=False`` leaves out registrations
        on a particular set-up model (FWD002 matches those to its calls itself)."""
        if method.name in self.marked_names:
            return True
        for origin, cls, is_bound in self.class_marks.get(method.name, ()) if ref is not None else ():
            if is_bound and not bound:
                continue
            marked = self.find_constructed(cls, origin)
            if marked is not None and (any(item.key == marked.key for item in self.mro(ref))
                                       or any(item.key == ref.key for item in self.mro(marked))):
                return True
        return self.mark_decorator(method, facts) is not None

    def mark_decorator(self, method: MethodFacts, facts: FileFacts) -> Optional[int]:
        """Position (top first) of the decorator that marks ``method``, if one does."""
        star_shim = any(name == "*" and target.split(".", 1)[0] == contract.DECORATOR_MODULE
                        for name, target in facts.imports)
        for index, decorator in enumerate(method.decorators):
            if contract.is_shim_mark(decorator) or (star_shim and decorator in contract.MARK_DECORATORS):
                return index
            if any(self._configured(decorator, name) for name in self.config.mark_decorators):
                return index
        return None
