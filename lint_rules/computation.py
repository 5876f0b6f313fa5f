"""Which methods of a module class run module computation, and the evidence chain for each.

A method computes if its body (nested functions, lambdas and comprehensions included) calls
``self(...)``/``self.forward``/``super().forward``, calls a submodule, calls a computing method
of a submodule (through attribute paths and container elements too), hands self or a submodule to
a function whose summary runs that parameter, or calls another method of the class (any depth,
through bases; an abstract one through its overrides in subclasses) that does.

Whether ``self.<attr>`` holds an ``nn.Module`` is ``class_members``' question.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Optional

from lint_rules import contract
from lint_rules.class_members import ClassMembers, shared
from lint_rules.diagnostics import Chain, Step
from lint_rules.facts.model import (
    ATTR_CALL, DYNAMIC_CALL, ELEMENT_METHOD, PASS_CALL, READ, RESULT_CALL, RESULT_METHOD, SELF_CALL, SUB_CALL,
    SUB_METHOD, SUB_RESULT, SUPER_CALL, FileFacts, FunctionFacts, Guard, MethodFacts, Use,
)
from lint_rules.handed import keyed_summary, runs_unknown, unknown_entry
from lint_rules.holders import holder_summary
from lint_rules.project import ClassRef, ProjectIndex
from lint_rules.reads import OWNERS, scan
from lint_rules.values import Unresolved
from lint_rules.vocabulary import FORWARD_NAMES, MODULE_METHODS

#: Getters whose result is a submodule when the project cannot show what they return
#: (``self.get_input_embeddings()(ids)``, ``enc = self.get_encoder(); enc(x)``).
_MODULE_GETTER = re.compile(r"get_\w*(embeddings|encoder|decoder|model|backbone|head|layer|module)s?")

#: Uses whose evidence needs no other class or method analysed (``_use_chain``'s cheap cases).
_DIRECT = frozenset({SELF_CALL, SUB_CALL})
#: Classes a class-hierarchy question (``_unknown_computes``) analyses at most: on transformers'
#: models a name such as ``get_input_embeddings`` is defined by hundreds of classes.
CHA_CANDIDATES = 16


@dataclass
class ClassAnalysis(ClassMembers):
    """Lazily answers computation questions for one class (its own MRO)."""

    _chains: dict[tuple[int, str, str], Optional[Chain]] = field(default_factory=dict)
    # What each method's verdict depended on that could not be read (``unknowns``)
    _unknowns: dict[tuple[int, str, str], frozenset[Unresolved]] = field(default_factory=dict)

    def unknowns(self, name: str) -> frozenset[Unresolved]:
        """What the verdict of method ``name`` (as ``chain`` found it) depended on and could not read."""
        found = self.lookup(name)
        return self._unknowns.get((found[0], found[1].name, found[1].kind), frozenset()) if found else frozenset()

    # -- the question ----------------------------------------------------------------------
    def chain(self, name: str) -> Optional[Chain]:
        """Evidence that method ``name`` computes: [name, helper, ..., "self(...) at line N"]."""
        found = self.lookup(name)
        return self._chain(found[0], found[1]) if found else None

    def _called_chain(self, position: int, method: MethodFacts,
                      arguments: tuple[tuple[str, str], ...]) -> Optional[Chain]:
        """``self.<method>(...)`` called with ``arguments``: the uses its constants let run
        (``self._run("norm")`` never takes ``if mode == "forward": return self.net(x)``)."""
        kept: list[Use] = []
        dropped: list[str] = []
        for i, use in enumerate(method.uses):
            if all(_admitted(guard, arguments) for guard in use.guards):
                kept.append(use)
            else:
                dropped.append(str(i))
        if not dropped:
            return self._chain(position, method)
        return self._chain(position, method._replace(uses=tuple(kept)), variant="-" + ",".join(dropped))

    def _chain(self, position: int, method: MethodFacts, origin: Optional[FileFacts] = None,
               variant: str = "") -> Optional[Chain]:
        """``origin``: the file whose imports the uses were resolved with (a function's summary
        is read in the function's file; a method's in its class's). ``variant``: which uses a
        caller's constants left out (``_called_chain``)."""
        key = (position, method.name, method.kind + variant)
        index, token, reads = self.index, (id(self), key), self.index.reads
        if reads is not None:
            reads.reused("analysis", self.ref.key)
            if key in self._chains or token in index.evaluating:  # the answer, or whatever it will be
                reads.reused("chain", (self.ref.key, key))
        if key in self._chains:
            self.index.note(*self._unknowns.get(key, ()))
            return self._chains[key]
        depth = index.evaluating.get(token)
        if depth is not None:  # a cycle: recursion adds no evidence, but a "no" that met it is open
            index.lowest = min(index.lowest, depth)  # until the evaluation at ``depth`` ends
            return None
        depth = index.evaluating[token] = len(index.evaluating)
        outer_lowest, index.lowest = index.lowest, depth
        pending_from = len(index.pending)
        index.noting.append(set())
        outer_provisional, index.provisional = index.provisional, False
        start = reads.begin() if reads is not None else 0
        try:
            result = self._evaluate(position, method, origin or self.mro[position].file)
        finally:
            del index.evaluating[token]
            noted = frozenset(index.noting.pop())
            answered_for_now = index.provisional
            index.provisional = outer_provisional or answered_for_now
            lowest, index.lowest = index.lowest, min(outer_lowest, index.lowest)
        self._unknowns[key] = noted if result is None else frozenset()
        index.note(*noted)
        if reads is not None:
            reads.done("chain", (self.ref.key, key), start)
        if result is None and (lowest < depth or answered_for_now):
            index.pending.append((self._chains, key))  # met a cycle through an evaluation still open
        else:
            self._chains[key] = result
        if lowest >= depth:
            # Every cycle met below ends here, in whichever classes it ran. Evaluation is exhaustive:
            # if this method computes nothing, neither does anything it reached. If it computes, the
            # open "no"s may be wrong: forget them (asked again, they find the now known "yes"). So
            # neither the order of definitions nor the order in which files are checked matters.
            settled = index.pending[pending_from:]
            del index.pending[pending_from:]
            if result is None and not answered_for_now:
                for chains, pending in settled:
                    chains[pending] = None
        return result

    def _evaluate(self, position: int, method: MethodFacts, origin: FileFacts) -> Optional[Chain]:
        """The shortest evidence among the method's uses: a message shows the shortest way the method
        reaches computation. A use that is evidence by itself ends the search, and those are tried
        first: on transformers' models (1,105 findings) 39 chains got shorter than the first found in
        source order, at no measured cost (median of 5 paired cold runs 0.98x)."""
        best: Optional[Chain] = None
        # Uses that are evidence by themselves first (nothing else to analyse), then the rest in order
        uses = sorted(method.uses, key=lambda use: use.kind not in _DIRECT)
        for use in uses:
            found = self._use_chain(position, method, origin, use)
            if found and (best is None or len(found) < len(best)):
                best = found
                if len(best) <= 2:  # the method's own evidence: nothing is shorter
                    break
        return best

    def _use_chain(self, position: int, method: MethodFacts, origin: FileFacts, use: Use) -> Optional[Chain]:
        head = Step(method.name, origin.path, method.line, method.col)
        # Files read only to resolve names are not located (line 0): say less, not wrong.
        evidence = Step(use.text, origin.path, use.line, use.col, cited=True)
        if use.kind == SELF_CALL:
            return [head, evidence]
        if use.kind == SUPER_CALL:
            if use.name in FORWARD_NAMES:
                return [head, evidence]
            found = self.lookup(use.name, after=position)
            inner = self._chain(*found) if found else None
            if inner:
                return [head, *inner[1:]] if inner[0].what == method.name else [head, *inner]
        elif use.kind == ATTR_CALL:
            found = self.lookup(use.name)
            if found is not None:
                if use.name in FORWARD_NAMES:
                    return [head, evidence]
                inner = self._called_chain(*found, use.arguments) or self._override_chain(*found)
                if inner:
                    return [head, *inner]
            elif self.is_submodule(use.name):
                return [head, evidence]
            else:
                self._depends(use.name)
        elif use.kind == SUB_CALL:
            if self.is_submodule(use.name):
                return [head, evidence]
            self._depends(use.name)
        elif use.kind == SUB_METHOD and self._submethod_computes(use.name, use.method):
            return [head, evidence]
        elif use.kind == ELEMENT_METHOD and self._path_method_computes(use.name, use.method):
            return [head, evidence]
        elif use.kind == RESULT_METHOD and self._result_method_computes(use.name, use.method):
            return [head, evidence]
        elif use.kind == RESULT_CALL and self._getter_returns_submodule(use.name):
            return [head, evidence]
        elif use.kind == SUB_RESULT and _MODULE_GETTER.fullmatch(use.method) and self.is_submodule(use.name):
            return [head, evidence]
        elif use.kind == PASS_CALL:
            if method.kind == "alias" and self.index.find_class(use.method.rpartition("#")[0], origin) is not None:
                return None  # `layer_cls = LoraLayer` in a class body: a class kept there, not a method
            inner = self._passed_runs(position, use, origin)
            if inner:
                return [head, evidence, *inner[1:]]
        elif use.kind == READ:
            return self._read_chain(head, use, evidence)
        elif use.kind == DYNAMIC_CALL:
            for name in self.quoted_methods():
                if name != method.name:
                    inner = self.chain(name)
                    if inner:
                        return [head, *inner]
        return None

    def _read_chain(self, head: Step, use: Use, evidence: Step) -> Optional[Chain]:
        """``self.codebooks`` or ``layer.codebook`` (of ``self.layers``' elements) read: a property's
        getter runs, and computes if its body does (``property -> self.code_transform(...)``)."""
        if not use.name:
            found = self.lookup(use.method)
            inner = self._chain(*found) if found is not None and found[1].kind == "property" else None
            return [head, *inner] if inner else None
        elements = use.name.endswith("[]")
        attr = use.name[:-2] if elements else use.name
        if "." in attr or "[" in attr or not self.is_submodule(attr):
            return None
        for target in self.submodule_classes(attr, elements=elements):
            analysis = analysis_for(self.index, target)
            found = analysis.lookup(use.method)
            inner = analysis.chain(use.method) if found is not None and found[1].kind == "property" else None
            if inner and found is not None:
                getter = analysis.mro[found[0]].file
                return [head, evidence, Step(f"{target.cls.qualname}.{use.method}", getter.path, found[1].line,
                                             found[1].col), *inner[1:]]
        return None

    def _passed_runs(self, position: int, use: Use, origin: FileFacts) -> Optional[Chain]:
        """``fn(self, ...)``/``fn(self.enc, ...)``: does ``fn`` run what it is handed? Its summary
        for that parameter is read against the class of what was passed. A bound method handed
        over (``multi_apply(self.loss_single, ...)``) is a callback: it counts as called if the
        function calls that parameter."""
        ref, _, slot = use.method.rpartition("#")
        method = self.lookup(use.name) if use.name else None
        if method is None and use.name and not self.is_submodule(use.name):
            return None
        found = (self._own(ref[5:]) if ref.startswith("self.") else self._own(ref[6:], position)
                 if ref.startswith("super.") else self.index.find_function(ref, origin))
        where, summary = (found[0], found[1].summary(slot)) if found is not None else (origin, None)
        if found is None and not ref.startswith(("self.", "super.")):  # a plain object that keeps it
            where, summary = holder_summary(self.index, ref, origin, slot) or (origin, None)
        if summary is None:
            return None
        if method is not None:  # a callback: called if the function calls that parameter
            return self._chain(*method) if runs_unknown(self.index, summary, where) else None
        if not use.name:
            return self._chain(position, keyed_summary(summary, where), where)
        targets = [t for t in self.submodule_classes(use.name) if t.key != self.ref.key]
        for target in targets:
            inner = analysis_for(self.index, target)._chain(0, keyed_summary(summary, where), where)
            if inner:
                return inner
        return None if targets else runs_unknown(self.index, summary, where)

    def _own(self, name: str, after: int = -1) -> Optional[tuple[FileFacts, FunctionFacts]]:
        """The summary of ``self.<name>`` (``super().<name>`` past MRO position ``after``): a static
        method or a method (``self`` left out) of the class or a base, read as a function."""
        found = self.lookup(name, after)
        if found is None or found[1].kind not in ("staticmethod", "method"):
            return None
        item = self.mro[found[0]]
        function = item.file.function_named(f"{item.cls.qualname}.{name}")
        return (item.file, function) if function is not None else None

    def _override_chain(self, position: int, method: MethodFacts) -> Optional[Chain]:
        """``self.forward_encoder(x)`` whose own body computes nothing: the overrides in
        subclasses run instead (read next to the class only when it is abstract)."""
        if method.kind != "method":
            return None
        for sub in _overriders(self.index, self.ref, method):
            analysis = analysis_for(self.index, sub)
            inner = analysis.chain(method.name)
            if inner:
                at, override = analysis.lookup(method.name)  # type: ignore[misc]  # found: ``_overriders``
                head = Step(method.name, self.mro[position].file.path, method.line, method.col)
                where = analysis.mro[at].file
                return [head, Step(f"{sub.cls.qualname}.{method.name}", where.path, override.line, override.col),
                        *inner[1:]]
        return None

    def _getter_returns_submodule(self, name: str) -> bool:
        found = self.lookup(name)
        if found is not None and found[1].returns:
            return any(self.is_submodule(attr) for attr in found[1].returns)
        return _MODULE_GETTER.fullmatch(name) is not None

    def _submethod_computes(self, attr: str, method: str) -> bool:
        """``self.attr.method(...)``: computation if the attribute is a submodule and ``method``
        computes on its class, or on any subclass of it when it is abstract there (class-hierarchy
        analysis); the name list only when the class cannot be found."""
        if method in contract.LIGHTNING_STEP_METHODS and self._holds_lightning_module(attr):
            return True  # whatever LightningModule it holds, its step runs the model
        if not self.is_submodule(attr):
            self._depends(attr, method)
            return self._holder_runs(attr)
        if self._is_keyed_container(attr) and method not in MODULE_METHODS:
            return True  # self.mods.encoder(x): a ModuleDict's entry, called
        targets = [t for t in self.submodule_classes(attr) if t.key != self.ref.key]
        if not targets:
            return _unknown_computes(self.index, method)
        if any(_method_computes(self.index, target, method) for target in targets):
            return True
        self._depends(attr, method)  # one of its classes could not be read
        return False

    def _holder_runs(self, attr: str) -> bool:
        """``self.search = Beam(self)``, then ``self.search.run(x)``: a plain object built with self
        or a submodule, which its methods run (``holders``)."""
        for item, src in self.sources(attr):
            for slot, piece in src.handed():
                use = Use(PASS_CALL, piece, 0, f"{src.ref.rpartition('.')[2]}(...)", f"{src.ref}#{slot}")
                if self._passed_runs(0, use, item.file) is not None:
                    return True
        return False

    def _path_method_computes(self, path: str, method: str) -> bool:
        """``self.layers[i].decode(x)`` (path ``layers[]``), ``self.model.quantizer.decode(x)``
        (``model.quantizer``): follow the path through the classes of the attributes."""
        steps = path.replace("[]", ".[]").split(".")
        if not steps[0] or not self.is_submodule(steps[0]):
            self._depends(steps[0], method)
            return not steps[0] and _unknown_computes(self.index, method)  # a child of self: class unknown
        holders: list[tuple[ClassAnalysis, str, bool]] = [(self, steps[0], False)]  # (class, attr, element)
        for step in steps[1:]:
            if step == "[]":
                holders = [(a, attr, True) for a, attr, _ in holders]
                continue
            nxt = []
            for analysis, attr, element in holders:
                for target in analysis.submodule_classes(attr, elements=element):
                    inner = analysis_for(self.index, target)
                    if inner.is_submodule(step):
                        nxt.append((inner, step, False))
                    else:
                        inner._depends(step, method)
            if not nxt:
                return _unknown_computes(self.index, method)
            holders = nxt
        classes = [t for a, attr, element in holders for t in a.submodule_classes(attr, elements=element)]
        if not classes:
            return _unknown_computes(self.index, method)
        return any(_method_computes(self.index, target, method) for target in classes)

    def _result_method_computes(self, getter: str, method: str) -> bool:
        """``self.get_base_model().generate(...)``: a method of what a getter of self returns."""
        found = self.lookup(getter)
        if found is not None and found[1].returns:
            return any(self._submethod_computes(attr, method) for attr in found[1].returns)
        return _MODULE_GETTER.fullmatch(getter) is not None and unknown_entry(method)


def _unknown_computes(index: ProjectIndex, method: str) -> bool:
    """``method`` called on a module whose class no source names (a constructor argument, a
    registry's build, the elements of ``nn.ModuleList(flows)``): computation if its name says so
    (``handed.unknown_entry``), or if a module class of the project's own files defines a method of
    that name which computes (class-hierarchy analysis: ``self.flows[i].inverse(z)`` where the
    project's flows implement ``inverse`` with their networks; the first ``CHA_CANDIDATES`` classes
    in path order that do anything in it). ``Module``'s own methods never."""
    if unknown_entry(method):
        return True
    if method in MODULE_METHODS or contract.is_dunder(method):
        return False
    known = index.computing_names.get(method)
    reads = index.reads
    if reads is not None:
        reads.read(scan(OWNERS, method))  # the project's classes that define ``method`` (``_owners``)
        reads.reused("computing name", method)  # the answer, or (if open: a cycle) whatever it will be
    if known is None:
        start = reads.begin() if reads is not None else 0
        index.computing_names[method] = False  # while open: asked again (``inverse`` calling ``inverse`` on its
        # elements), the answer is "no" for now, and what it decides is not kept (``ClassAnalysis._chain``)
        index.open_names.add(method)
        known = any(index.is_module_class(ref) and analysis_for(index, ref).chain(method) is not None
                    for ref in _owners(index).get(method, ())[:CHA_CANDIDATES])
        index.open_names.discard(method)
        index.computing_names[method] = known
        if reads is not None:
            reads.done("computing name", method, start)
    elif not known and method in index.open_names:
        index.provisional = True
    return known


def _owners(index: ProjectIndex) -> dict[str, list[ClassRef]]:
    """Method name -> the classes of the project's own files whose method of that name does
    something (has uses: one that does nothing cannot compute), in path order."""
    if index.method_owners is None:
        owners: dict[str, list[ClassRef]] = {}
        for path in sorted(index.files):
            facts = index.files[path]
            for cls in facts.classes:
                for method in cls.methods:
                    if method.kind == "method" and method.uses:
                        owners.setdefault(method.name, []).append(ClassRef(facts, cls))
        index.method_owners = owners
    return index.method_owners  # type: ignore[return-value]


def _admitted(guard: Guard, arguments: tuple[tuple[str, str], ...]) -> bool:
    """Can a use under ``guard`` run when the method is called with ``arguments``? Yes unless
    the parameter's value there is a constant (passed, or its default) that the guard excludes."""
    slot = str(guard.position) if guard.position >= 0 else guard.param
    passed = dict(arguments)
    value = passed.get(slot, passed.get(guard.param))
    if value is None:  # not passed: the default, unless unpacked arguments may fill it
        value = "" if "*" in passed else guard.default
    return not value or guard.admits(value)


def _method_computes(index: ProjectIndex, target: ClassRef, method: str) -> bool:
    analysis = analysis_for(index, target)
    found = analysis.lookup(method)
    if found is None:
        if analysis.is_submodule(method):  # self.attention.memory_layer(x): a submodule of it, called
            return True
        # Not on the declared class (``model: PreTrainedModel``, then ``self.model.generate``): the
        # object is of a subclass that has it, which one is unknown, as for a module of unknown class
        return _unknown_computes(index, method)
    if analysis.chain(method) is not None:
        return True
    if found[1].abstract or found[1].kind == "alias":
        return any(analysis_for(index, sub).chain(method) is not None
                   for sub in index.subclasses(target, siblings=True))
    return False


def _overriders(index: ProjectIndex, ref: ClassRef, method: MethodFacts) -> list[ClassRef]:
    """The subclasses of ``ref`` in which ``self.<method.name>`` is another method than ``method``
    (of ``ref`` or a base), in ``subclasses`` order. A subclass's answer never changes (its analysis,
    and so its MRO, is made once), so its lookup is bound once for all of ``ref``'s methods; each
    list holds while ``subclasses`` gives the same tuple (no file read meanwhile added any). On
    transformers, ``PreTrainedModel`` has 3,830 subclasses, asked about 56 of its methods."""
    subclasses = index.subclasses(ref, siblings=method.abstract)
    key = (ref.key, id(method))
    known = index.overriders.get(key)
    if known is not None and known[0] is subclasses:
        return known[1]
    bound = index.derived.setdefault("subclass lookups", {})
    lookups = bound.get((ref.key, method.abstract))
    if lookups is None or lookups[0] is not subclasses:
        methods = [analysis_for(index, sub).method for sub in subclasses]
        lookups = bound[(ref.key, method.abstract)] = (subclasses, methods)
    name = method.name
    found = [sub for sub, lookup in zip(subclasses, lookups[1]) if (hit := lookup(name)) is not None
             and hit is not method]
    index.overriders[key] = (subclasses, found)
    return found


def analysis_for(index: ProjectIndex, ref: ClassRef) -> ClassAnalysis:
    return shared(index, ref, ClassAnalysis)


def never_entry(method: MethodFacts, lightning: bool) -> bool:
    """Methods that are never forward entry points: not plain methods (static, class, property:
    they cannot be routed), ``forward`` and the call protocol, dunders, and the step methods that
    Lightning routes itself on a LightningModule."""
    return (
        method.kind not in ("method", "alias")  # `decode = decode_function` is a method too
        or method.name in contract.NEVER_ENTRY
        or contract.is_dunder(method.name)
        or (lightning and method.name in contract.LIGHTNING_STEP_METHODS)
    )
