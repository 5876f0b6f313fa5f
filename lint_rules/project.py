"""The project index: facts of many files, and the questions that need more than one file.

Which class a name refers to (``resolution``), whether a class is an ``nn.Module`` (through bases
in other files), its method resolution order and subclasses (which methods are marked is
``marks``' question). Files that are imported but were not given for analysis are loaded lazily
(located on disk next to the analysed packages, extracted once, never reported on).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

from lint_rules import contract
from lint_rules.facts.model import FileFacts
from lint_rules.environment import package_present
from lint_rules.layout import modules_in
from lint_rules.reads import BASES, CALLERS, ReadLog, scan
from lint_rules.resolution import ClassKey, ClassRef, NameResolution
from lint_rules.settings import Config
from lint_rules.values import DYNAMIC, MISSING, UNREADABLE, Unresolved, is_root, never_module, spelled
from lint_rules.vocabulary import TYPING_BASES

Loader = Callable[[Path, str, bool], Optional[FileFacts]]


@dataclass
class ProjectIndex(NameResolution):
    config: Config
    loader: Loader  # reads and extracts a file that is imported but not analysed
    files: dict[str, FileFacts] = field(default_factory=dict)
    modules: dict[str, Optional[FileFacts]] = field(default_factory=dict)
    roots: list[Path] = field(default_factory=list)  # where the analysed files' top packages live
    env_roots: list[Path] = field(default_factory=list)  # the environment's package directories
    environment: str = ""  # what messages call the environment read (``Environment.name``)
    marked_names: set[str] = field(default_factory=set)  # registrations whose model's class is unknown
    # name -> (file, class, bound): registrations whose model's class the file tells; ``bound`` if
    # the model is one the file set up (FWD002 then counts the mark for that set-up only)
    class_marks: dict[str, list[tuple[FileFacts, str, bool]]] = field(default_factory=dict)
    analyses: dict[ClassKey, object] = field(default_factory=dict)  # computation.ClassAnalysis
    # (class key, id of a method of it) -> (the subclasses asked about, those of them that override
    # it): ``computation._overriders``
    overriders: dict[tuple[ClassKey, int], tuple[tuple[ClassRef, ...], list[ClassRef]]] = field(default_factory=dict)
    computing_names: dict[str, bool] = field(default_factory=dict)  # computation._unknown_computes
    open_names: set[str] = field(default_factory=set)  # ... of them, being answered
    method_owners: Optional[dict[str, list[ClassRef]]] = None  # computation._owners
    provisional: bool = False  # an open name was answered "no" for now during the current evaluation
    # (analysis id, method key) -> depth, for the methods of any class being evaluated; a "no" that met one
    # is open (``pending``) until that one ends; ``lowest``: the least depth met (``ClassAnalysis._chain``)
    evaluating: dict[tuple[int, tuple[int, str, str]], int] = field(default_factory=dict)
    pending: list[tuple[dict, tuple[int, str, str]]] = field(default_factory=list)
    lowest: int = 0
    _module_cache: dict[ClassKey, bool] = field(default_factory=dict)
    _mro_cache: dict[ClassKey, list[ClassRef]] = field(default_factory=dict)
    _subclasses: Optional[dict[str, list[ClassRef]]] = None  # last name of a base -> classes
    _bases_indexed: int = 0  # entries ever added to ``_subclasses``: unchanged, every answer holds
    # class key -> (``_bases_indexed``, the names searched, each with its number of candidates then;
    # ``subclasses``): the answer holds until a file read adds a class with a base of one of those names
    _subclasses_of: dict[ClassKey, tuple[int, tuple[tuple[str, int], ...], tuple[ClassRef, ...]]] = field(
        default_factory=dict)
    _siblings_read: set[str] = field(default_factory=set)
    _versions: dict[str, Optional[str]] = field(default_factory=dict)
    _present: dict[str, bool] = field(default_factory=dict)  # top-level name -> installed (``package_present``)
    # What name resolution looked at on disk, in order (``results`` checks it before reusing a run):
    # ("file", path, module, is_package, found) for a candidate file, ("dir", directory, names) for a listing
    probed: list[tuple] = field(default_factory=list)
    _reads_at_start: int = 0  # files read when the current outermost search began
    _steps: int = 0  # lookups made by the current outermost search
    # (ref, origin's (path, module), what, load) -> (files read when answered, answer)
    _found: dict[tuple[str, tuple[str, str], str, bool], tuple[int, Optional[tuple[FileFacts, object]]]] = field(
        default_factory=dict)
    _absolute: set[str] = field(default_factory=set)  # the files' absolute paths (``holds``)
    _callers: Optional[dict[str, set[str]]] = None  # method name -> functions that call it (``callers_of``)
    # What rules derive from the whole view, by their own name; emptied when a file is added
    derived: dict[str, dict] = field(default_factory=dict)
    # Names a verdict depended on that could not be read, one set per method being evaluated
    # (``computation``; ``note`` adds to the innermost)
    noting: list[set[Unresolved]] = field(default_factory=list)
    # Scripts in sibling directories (examples/a/model.py, examples/b/model.py) are both ``model``;
    # each script imports its own, as Python does (its directory comes first on ``sys.path``): a file's
    # root (the directory its top package lives in), the files of each root by module, and the roots
    # under which each top-level name is a module (``_own_root``)
    _root_of: dict[str, str] = field(default_factory=dict)
    _under_root: dict[tuple[str, str], FileFacts] = field(default_factory=dict)
    _roots_of_top: dict[str, set[str]] = field(default_factory=dict)
    reads: Optional[ReadLog] = None  # what the checks read, if asked (``reads``)

    def note(self, *unresolved: Unresolved) -> None:
        if self.noting and unresolved:
            self.noting[-1].update(unresolved)

    def add(self, facts: FileFacts, root: Optional[Path] = None) -> None:
        """Add an analysed file (its marks count project-wide)."""
        # a file met before only as a module read to resolve names has its classes indexed already, without lines
        read = self.modules.get(facts.module)
        new = facts.path not in self.files and (read is None or read is facts)
        self.files[facts.path] = facts
        self._absolute.add(os.path.abspath(facts.path))
        if facts.module and facts.parsed:  # a skipped file is parsed lazily if an import needs it
            self.modules.setdefault(facts.module, facts)
        if root is not None:
            if root not in self.roots:
                self.roots.append(root)
            self._root_of[facts.path] = str(root)
            if facts.module and facts.parsed:
                self._under_root.setdefault((str(root), facts.module), facts)
                self._roots_of_top.setdefault(facts.module.partition(".")[0], set()).add(str(root))
        for mark in facts.marks:
            if mark.cls:
                self.class_marks.setdefault(mark.name, []).append((facts, mark.cls, mark.site >= 0))
            else:
                self.marked_names.add(mark.name)
        if new and self._subclasses is not None:  # the flake8 plugin adds files one by one, between checks:
            self._index_bases(facts)  # rebuilding the index for each was quadratic in a project without a root
        else:
            self._subclasses = None
        self._subclasses_of.clear()
        self.overriders.clear()
        self._callers = None
        self.method_owners = None
        self.derived.clear()

    def with_files(self, replaced: dict[str, FileFacts]) -> "ProjectIndex":
        """A new view of the same project where ``replaced`` (path -> facts) stand for those files:
        what a fix pass is verified against. Nothing computed from the old facts is carried over."""
        view = ProjectIndex(config=self.config, loader=self.loader, roots=list(self.roots),
                            env_roots=list(self.env_roots), environment=self.environment)
        stale = {self.files[path].module for path in replaced if path in self.files}
        view.modules = {name: facts for name, facts in self.modules.items()
                        if name not in stale and (facts is None or facts.path not in replaced)}
        for path, facts in self.files.items():
            view.add(replaced.get(path, facts), Path(self._root_of[path]) if path in self._root_of else None)
        for path, facts in replaced.items():
            if path not in self.files:
                view.add(facts)
        return view

    def installed_version(self, distribution: str) -> Optional[str]:
        """The version of ``distribution`` in the environment the view reads (``--python``), if installed."""
        if distribution not in self._versions:
            from lint_rules.environment import distribution_version

            self._versions[distribution] = distribution_version(self.env_roots, distribution)
        return self._versions[distribution]

    def callers_of(self, name: str) -> set[str]:
        """The functions of the view's own files that call a method named ``name`` or hand it over
        (``FileFacts.attribute_uses``: "Cls.method", "func", "" for module-level code)."""
        if self.reads is not None:
            self.reads.read(scan(CALLERS, name))
        if self._callers is None:
            self._callers = {}
            for facts in self.files.values():
                for used, owner in facts.attribute_uses:
                    self._callers.setdefault(used, set()).add(owner)
        return self._callers.get(name, set())

    def holds(self, path: str) -> bool:
        """Is the file at ``path`` one of the view's own, under whatever name? A module of a
        directory without ``__init__.py`` is in the view as ``model`` (``mypkg/model.py``) and
        read again when ``mypkg.model`` is imported (``/abs/mypkg/model.py``)."""
        return path in self.files or os.path.abspath(path) in self._absolute

    # -- modules and classes ---------------------------------------------------------------
    # -- module-ness -----------------------------------------------------------------------
    def is_module_ref(self, ref: str, origin: Optional[FileFacts] = None, load: bool = True,
                      depth: int = 0) -> Optional[bool]:
        """True: an nn.Module class (its MRO, read from the sources, reaches ``torch.nn.Module``);
        False: known not to be one; None: cannot tell (``unresolved`` says why), or, with
        ``load=False``, cannot tell without reading another file."""
        if not ref:
            return None
        ref = spelled(ref)
        if is_root(ref) or any(configured_name(ref, b) for b in self.config.module_bases):
            return True
        if never_module(ref):
            return False
        found = self.find_class(ref, origin, load=load)
        if found is not None:
            return self.is_module_class(found)
        function = self.find_function(ref, origin, load=load) if depth < 4 else None
        if function is not None:  # a factory: what it builds and returns
            built = [self.is_module_ref(b, function[0], load, depth + 1) for b in function[1].builds]
            return True if True in built else (False if built and all(v is False for v in built) else None)
        return None

    def is_module_class(self, ref: ClassRef) -> bool:
        key = ref.key
        reads = self.reads
        if key not in self._module_cache:
            start = reads.begin() if reads is not None else 0
            self._module_cache[key] = False  # cycle guard
            self._module_cache[key] = any(self.is_module_ref(b, ref.file) for b in ref.cls.bases)
            if reads is not None:
                reads.done("module class", key, start)
        elif reads is not None:
            reads.reused("module class", key)
        return self._module_cache[key]

    def unresolved(self, ref: str, origin: Optional[FileFacts] = None) -> Optional[Unresolved]:
        """Why ``is_module_ref`` cannot tell what ``ref`` is, if it is a name the analysis failed to
        read: its package is missing from the environment, it is bound at run time, or the package
        is there without it in its Python sources. None for what is known, or unknown by nature."""
        ref = spelled(ref)
        if not ref or self.is_module_ref(ref, origin) is not None:
            return None
        path = origin.path if origin is not None else ""
        head = ref.split(".", 1)[0]
        if "." not in ref:  # bound by running code at the top of the file; else a local: unknown by nature
            found = origin is not None and ref in origin.run_time_names
            return Unresolved(DYNAMIC, ref, origin.module, path) if found else None  # type: ignore[union-attr]
        if origin is not None and not any(target.split(".", 1)[0] == head for _, target in origin.imports):
            return None  # ``hparams.model``: a local's attribute, not a package's name
        if origin is not None and head == origin.module.split(".", 1)[0]:
            return Unresolved(UNREADABLE, ref, head, path)  # the file's own package: it is read
        if not self.package_present(head):
            return Unresolved(MISSING, ref, head, path)
        return Unresolved(UNREADABLE, ref, head, path)

    def package_present(self, top: str) -> bool:
        """Is the top-level package or module ``top`` in the project or the environment?"""
        if top not in self._present:
            roots = [str(root) for root in dict.fromkeys([*self.roots, *self.env_roots])]
            self._present[top] = package_present(roots, top)
            self.probed.append(("present", top, roots, self._present[top]))
        return self._present[top]

    def unknown_base(self, ref: ClassRef) -> Optional[Unresolved]:
        """For a class that is not known to be a module: the first base, through its MRO, that could
        not be read (the class is a module if that base is one)."""
        if self.is_module_class(ref):
            return None
        for item in self.mro(ref):
            for base in item.cls.bases:
                if base in TYPING_BASES or self.find_class(base, item.file) is not None:
                    continue
                why = self.unresolved(base, item.file)
                if why is not None:
                    return why
        return None

    def is_lightning_class(self, ref: ClassRef) -> bool:
        known = self.derived.setdefault("lightning classes", {})  # asked for every method of a class
        found = known.get(ref.key)
        if found is None:
            found = known[ref.key] = any(contract.is_lightning_module(f"{item.file.module}.{item.cls.qualname}")
                                         or any(contract.is_lightning_module(base) for base in item.cls.bases)
                                         for item in self.mro(ref))
        elif self.reads is not None:
            self.reads.reused("mro", ref.key)  # what it was read from
        return found

    def mro(self, ref: ClassRef) -> list[ClassRef]:
        """The class and its bases, read from the project and the environment (torch's too), depth
        first, left to right, without repeats."""
        key = ref.key
        cached = self._mro_cache.get(key)
        reads = self.reads
        if reads is not None:
            if cached is not None:
                reads.reused("mro", key)
                return cached
            start = reads.begin()
        if cached is not None:
            return cached
        self._mro_cache[key] = [ref]  # cycle guard
        order = [ref]
        seen = {key}
        for base in ref.cls.bases:
            found = self.find_class(base, ref.file)  # None for torch's ``Module``: the walk ends there
            if found is None:
                continue
            for item in self.mro(found):
                if item.key not in seen:
                    seen.add(item.key)
                    order.append(item)
        self._mro_cache[key] = order
        if reads is not None:
            reads.done("mro", key, start)
        return order

    def subclasses(self, ref: ClassRef, siblings: bool = False) -> tuple[ClassRef, ...]:
        """Classes that have ``ref`` among their bases (any depth), among the files read so far;
        ``siblings``: after reading the other modules of ``ref``'s package (class-hierarchy
        analysis of an abstract method: its implementations usually sit next to it).

        Candidates are found by the last name of their bases first, so only classes that can
        be subclasses get their bases resolved (resolving may read other files)."""
        reads = self.reads
        if reads is None:
            return self._subclasses_search(ref, siblings)
        reads.reused("subclasses", ref.key)
        known = self._subclasses_of.get(ref.key)
        start = reads.begin()
        result = self._subclasses_search(ref, siblings)
        searched = self._subclasses_of[ref.key][1]
        if known is not None and known[1] is searched:  # the answer held: what it read is logged
            return result  # (``PreTrainedModel``'s, asked thousands of times, searched 3,800 names)
        for name, _ in searched:  # the classes whose bases have those names
            reads.read(scan(BASES, name))
        reads.done("subclasses", ref.key, start)
        return result

    def _subclasses_search(self, ref: ClassRef, siblings: bool) -> tuple[ClassRef, ...]:
        if siblings:
            self._read_siblings(ref.file)
        known = self._subclasses_of.get(ref.key)
        if known is not None and self._subclasses is not None:
            indexed, searched_then, result = known
            if indexed == self._bases_indexed:  # asked again and again on a big hierarchy: nothing new
                return result  # the same tuple while it holds (``computation._overriders`` relies on it)
            if all(len(self._subclasses.get(name, ())) == size for name, size in searched_then):
                self._subclasses_of[ref.key] = (self._bases_indexed, searched_then, result)
                return result
        if self._subclasses is None:
            self._subclasses = {}
            for facts in {id(f): f for f in [*self.files.values(), *self.modules.values()] if f}.values():
                self._index_bases(facts)
        indexed = self._bases_indexed  # before: the search may read files that add classes
        found: list[ClassRef] = []
        seen = {ref.key}
        frontier = [ref]
        searched: list[tuple[str, int]] = []
        while frontier:
            target = frontier.pop()
            name = target.cls.qualname.rpartition(".")[2]
            candidates = self._subclasses.get(name, ())
            searched.append((name, len(candidates)))  # before: a file read while searching may add more
            for candidate in candidates:
                if candidate.key in seen:
                    continue
                if any(item.key == target.key for item in self.mro(candidate)[1:]):
                    seen.add(candidate.key)
                    found.append(candidate)
                    frontier.append(candidate)
        result = tuple(found)
        self._subclasses_of[ref.key] = (indexed, tuple(searched), result)
        return result

    def _index_bases(self, facts: FileFacts) -> None:
        assert self._subclasses is not None
        for cls in facts.classes:
            for base in cls.bases:
                self._subclasses.setdefault(base.rpartition(".")[2], []).append(ClassRef(facts, cls))
                self._bases_indexed += 1

    def _read_siblings(self, facts: FileFacts) -> None:
        package = facts.module.rpartition(".")[0] if not facts.path.endswith("__init__.py") else facts.module
        if not facts.module or package in self._siblings_read:
            return
        self._siblings_read.add(package)
        directory = Path(facts.path).parent
        siblings = modules_in(directory)
        self.probed.append(("dir", str(directory), [path.name for path in siblings]))
        for path in siblings:
            name = f"{package}.{path.stem}" if path.stem != "__init__" else package
            if name not in self.modules:
                self.module(name)

    def is_module_mixin(self, ref: ClassRef) -> bool:
        """A plain class that an analysed nn.Module subclass inherits (e.g. GenerationMixin)."""
        return any(self.is_module_class(sub) for sub in self.subclasses(ref))


def configured_name(ref: str, configured: str) -> bool:
    """Does ``ref`` name what a setting names: in full if it is dotted, else by its last part?"""
    return ref == configured if "." in configured else ref.rpartition(".")[2] == configured
