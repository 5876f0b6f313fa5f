"""Which file and which class or function a dotted name refers to, through imports, re-exports
and star imports, reading the files it needs on demand (``ProjectIndex``'s first question).

Names are resolved as Python imports them: from the project's roots, then the environment's
package directories; a script's own directory first (``_own_root``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional

from lint_rules.facts.model import ClassFacts, FileFacts, FunctionFacts
from lint_rules.reads import ReadLog
from lint_rules.values import is_root, spelled

if TYPE_CHECKING:
    from lint_rules.project import Loader

#: Files one name may cause to be read through star imports (see ``_through_stars``).
STAR_READS = 64
#: Lookups one name may cost (modules with hundreds of star imports nest): past that, unresolved.
SEARCH_STEPS = 2000
#: Packages whose classes are never modules and whose sources are never read: the standard library's
#: (``values.never_module``) and numpy's (it does not depend on torch). torch itself is read like any
#: installed package: a class is a module because its MRO reaches ``torch.nn.Module`` there.
_KNOWN_BY_NAME = ("builtins.", "typing.", "abc.", "collections.", "numpy.")

ClassKey = tuple[str, str, str]  # ``ClassRef.key``


@dataclass(frozen=True)
class ClassRef:
    file: FileFacts
    cls: ClassFacts
    # (path, module, qualname): what the index's tables are keyed by, asked millions of times on a large
    # tree. The module too: a file of a directory without ``__init__.py`` is in the view as ``model``
    # and read again, without lines, when ``mypkg.model`` is imported (``holds``); under one key,
    # whichever copy was met first would answer for both.
    key: ClassKey = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", (self.file.path, self.file.module, self.cls.qualname))


def _class_named(facts: FileFacts, name: str) -> object:
    return facts.class_named(name)


def _function_named(facts: FileFacts, name: str) -> object:
    return facts.function_named(name)


class NameResolution:
    """``ProjectIndex``'s name lookups: its fields, declared here, hold what they read and remember;
    a factory's class is checked with the index's ``mro`` and ``is_module_class``, and a module read
    joins its subclass index (``_index_bases``)."""

    modules: dict[str, Optional[FileFacts]]
    roots: list[Path]
    env_roots: list[Path]
    probed: list[tuple]
    loader: Loader
    _subclasses: Optional[dict[str, list[ClassRef]]]
    _found: dict[tuple[str, tuple[str, str], str, bool], tuple[int, Optional[tuple[FileFacts, object]]]]
    _steps: int
    _reads_at_start: int
    _root_of: dict[str, str]
    _under_root: dict[tuple[str, str], FileFacts]
    _roots_of_top: dict[str, set[str]]
    reads: Optional[ReadLog]

    def module(self, name: str) -> Optional[FileFacts]:
        if name in self.modules:
            known = self.modules[name]
            if known is not None and self.reads is not None:
                self.reads.read(known.path)
            return known
        if f"{name}.".startswith(_KNOWN_BY_NAME):  # the standard library and numpy: never read
            return None
        found: Optional[FileFacts] = None
        relative = Path(*name.split(".")) if name else None
        for root in [*self.roots, *(r for r in self.env_roots if r not in self.roots)] if relative else ():
            for candidate, is_package in ((root / relative.with_suffix(".py"), False),
                                          (root / relative / "__init__.py", True)):
                exists = candidate.is_file()
                self.probed.append(("file", str(candidate), name, is_package, exists))
                if exists:
                    found = self.loader(candidate, name, is_package)
                    if found is None and self.reads is not None:  # unreadable (a syntax error) for now
                        self.reads.read(str(candidate))
                    break
            if found is not None:
                break
        self.modules[name] = found
        if found is not None:
            if self.reads is not None:
                self.reads.read(found.path)
            if self._subclasses is not None:
                self._index_bases(found)
        return found

    def find_class(self, ref: str, origin: Optional[FileFacts] = None, depth: int = 0,
                   load: bool = True) -> Optional[ClassRef]:
        """The class a dotted reference (as resolved by ``extract``) names, if the project has it;
        with ``load=False`` only among files already read."""
        found = self._find(ref, origin, depth, load, _class_named)
        return ClassRef(found[0], found[1]) if found is not None else None  # type: ignore[arg-type]

    def find_function(self, ref: str, origin: Optional[FileFacts] = None,
                      load: bool = True) -> Optional[tuple[FileFacts, FunctionFacts]]:
        """The module-level function a dotted reference names (its summary), through re-exports."""
        found = self._find(ref, origin, 0, load, _function_named)
        return found  # type: ignore[return-value]

    def _find(self, ref: str, origin: Optional[FileFacts], depth: int, load: bool,
              get: Callable[[FileFacts, str], object]) -> Optional[tuple[FileFacts, object]]:
        """Memoised: star imports and re-exports form graphs (torch's ``from x import *`` chains)
        in which an unmemoised search is exponential. A negative answer without loading holds
        only until another file is read."""
        if depth == 0:
            self._steps, self._reads_at_start = 0, len(self.modules)
        self._steps += 1
        # Never torch's ``Module`` itself (an MRO ends there): its methods are the module API the
        # analysis knows by name, and its 3,000 lines were read for every project with a module class
        if not ref or depth > 8 or self._steps > SEARCH_STEPS or is_root(spelled(ref)):
            return None
        if ref.startswith(_KNOWN_BY_NAME):
            load = False
        root = self._own_root(ref, origin)
        place = (origin.path, origin.module) if origin is not None and "." not in ref else ("", root)
        key = (ref, place, get.__name__, load)
        known = self._found.get(key)
        reads = self.reads
        if reads is not None:
            if origin is not None:
                reads.read(origin.path)  # its imports lead the search
            if known is not None:
                reads.reused("found", key)  # the answer, or (if open: a cycle) whatever it will be
        if known is not None and (known[1] is not None or load or known[0] == len(self.modules)):
            return known[1]
        start = reads.begin() if reads is not None else 0
        self._found[key] = (len(self.modules), None)  # cycle guard
        found = self._search(ref, origin, depth, load, get, root)
        self._found[key] = (len(self.modules), found)
        if reads is not None:
            reads.done("found", key, start)
        return found

    def _own_root(self, ref: str, origin: Optional[FileFacts]) -> str:
        """``origin``'s root if ``ref``'s top-level name is a module under several roots, else ""."""
        if origin is None or len(self._roots_of_top.get(ref.partition(".")[0], ())) < 2:
            return ""
        return self._root_of.get(origin.path, "")

    def _search(self, ref: str, origin: Optional[FileFacts], depth: int, load: bool,
                get: Callable[[FileFacts, str], object], root: str = "") -> Optional[tuple[FileFacts, object]]:
        if "." not in ref:
            if origin is None:
                return None
            found = get(origin, ref)
            if found is not None:
                return origin, found
            return self._through_stars(origin, ref, depth, load, get)
        parts = ref.split(".")
        for cut in range(len(parts) - 1, 0, -1):
            name = ".".join(parts[:cut])
            facts = self._under_root.get((root, name)) if root else None
            if facts is not None and self.reads is not None:
                self.reads.read(facts.path)
            if facts is None:
                facts = self.module(name) if load else self.modules.get(name)
            if facts is None:
                continue
            qualname = ".".join(parts[cut:])
            found = get(facts, qualname)
            if found is not None:
                return facts, found
            reexport = dict(facts.imports).get(parts[cut])
            if reexport is not None and reexport != ref:
                rest = ".".join(parts[cut + 1:])
                return self._find(f"{reexport}.{rest}" if rest else reexport, facts, depth + 1, load, get)
            return self._through_stars(facts, qualname, depth, load, get)
        return None

    def _through_stars(self, facts: FileFacts, name: str, depth: int, load: bool,
                       get: Callable[[FileFacts, str], object]) -> Optional[tuple[FileFacts, object]]:
        """``name`` through the file's ``from M import *`` imports. Packages such as transformers
        star-import every model subpackage, so the stars whose module resembles the name are
        tried first (``encodec`` for ``EncodecModel``: an order, never a verdict) and at most
        ``STAR_READS`` files are read for one name; past that the name counts as unresolved."""
        squashed = name.rpartition(".")[2].lower()
        stars = sorted((target for key, target in facts.imports if key == "*"),
                       key=lambda star: star.rpartition(".")[2].replace("_", "").lower() not in squashed)
        for star in stars:
            if load and len(self.modules) - self._reads_at_start > STAR_READS:
                return None
            hit = self._find(f"{star}.{name}", facts, depth + 1, load, get)
            if hit is not None:
                return hit
        return None

    def find_constructed(self, ref: str, origin: Optional[FileFacts] = None, depth: int = 0) -> Optional[ClassRef]:
        """The class of an object built by ``ref``: ``GPT`` itself; a factory function, by the module
        class it returns (``-> GPT``, ``return GPT(...)``, ``return GPT.from_pretrained(...)``); a
        factory classmethod on a class (``GPT.from_pretrained``), by the module class it says it
        returns (transformers' ``AutoModelForCausalLM`` declares ``_BaseModelWithGenerate``), else
        the class it is called on."""
        found = self.find_class(ref, origin)
        if found is not None or depth > 4:
            return found
        function = self.find_function(ref, origin)
        if function is not None:
            return self._built(function[1].builds, function[0], depth)
        head, _, factory = ref.rpartition(".")
        owner = self.find_class(head, origin) if head else None
        if owner is None:
            return None
        for item in self.mro(owner):
            method = next((m for m in item.cls.methods if m.name == factory and m.kind == "classmethod"), None)
            if method is not None:
                return self._built(method.builds, item.file, depth) or owner
        return owner

    def factory_class(self, ref: str, origin: Optional[FileFacts] = None, load: bool = True) -> Optional[ClassRef]:
        """The module class the function ``ref`` returns (``load_model``, ``build_task``), read from
        what it builds (``FunctionFacts.builds``: its declared return first); None if ``ref`` names
        no function or the function returns no module class."""
        function = self.find_function(ref, origin, load=load)
        return self._built(function[1].builds, function[0], 0) if function is not None else None

    def _built(self, builds: tuple[str, ...], origin: FileFacts, depth: int) -> Optional[ClassRef]:
        """The first module class among what a factory builds (its declared return type first)."""
        for ref in builds:
            found = self.find_constructed(ref, origin, depth + 1)
            if found is not None and self.is_module_class(found):
                return found
        return None
