"""Marks: which methods of a class a wrapper routes as forward entries.

A decorator marks the class: ``runtime_shim``'s own (resolved through the file's imports) or one
named in ``mark-decorators``; every instance, under every wrapper, routes the method. A
registration (``mark_forward_method(ddp, "generate")``, ``register_fsdp_forward_method``, Fabric's
``mark_forward_method``) marks the one model it is given, so it marks the class only where every
set-up of the class in the project registers the method (``set_ups``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Optional

from lint_rules import contract
from lint_rules.facts.model import FileFacts, MethodFacts, WrapSite
from lint_rules.project import ClassRef, ProjectIndex, configured_name
from lint_rules.reads import MARKS, SET_UPS, scan


@dataclass(frozen=True)
class SetUp:
    """A set-up of a model (``WrapSite``) in one of the project's files, and whether it registers a
    method (``set_ups``)."""

    file: FileFacts
    index: int  # in ``file.wrap_sites``
    site: WrapSite
    registered: bool

    @property
    def where(self) -> str:
        """``path:line``, the path relative to the working directory when it lies below it."""
        path = self.file.path
        if os.path.isabs(path):
            relative = os.path.relpath(path)
            path = relative if not relative.startswith(os.pardir) else path
        return f"{path}:{self.site.line}"


def is_marked(view: ProjectIndex, method: MethodFacts, facts: FileFacts, ref: Optional[ClassRef] = None,
              bound: bool = True) -> bool:
    """Is ``method`` (of class ``ref``, defined in ``facts``) marked?

    Decorated with a mark the runtime honours: ``runtime_shim``'s own decorators (resolved
    through the file's imports, so a look-alike defined elsewhere does not count) or one named
    in ``mark-decorators``: that marks the class. Or registered, which marks one model
    (``registered``): then only if every set-up of the class in the project registers it.
    ``bound=False`` leaves out registrations on a particular set-up model (FWD002 matches
    those to its calls itself)."""
    if mark_decorator(view, method, facts) is not None:
        return True
    return registered(view, method.name, ref, bound) and not any(
        not set_up.registered for set_up in set_ups(view, method.name, ref))


def registered(view: ProjectIndex, name: str, ref: Optional[ClassRef], bound: bool = True) -> bool:
    """Does the project register method ``name`` anywhere for class ``ref``: on a model of that
    class (its bases and subclasses) when the registering file tells the class, or on a model
    whose class no file tells (``marked_names``)?"""
    if view.reads is not None:
        view.reads.read(scan(MARKS, name))  # every file's registrations of ``name``
    if name in view.marked_names:
        return True
    for origin, cls, is_bound in view.class_marks.get(name, ()) if ref is not None else ():
        if is_bound and not bound:
            continue
        if _related(view, view.find_constructed(cls, origin), ref):
            return True
    return False


def _related(view: ProjectIndex, marked: Optional[ClassRef], ref: ClassRef) -> bool:
    return marked is not None and (any(item.key == marked.key for item in view.mro(ref))
                                   or any(item.key == ref.key for item in view.mro(marked)))


def set_ups(view: ProjectIndex, name: str, ref: Optional[ClassRef]) -> list[SetUp]:
    """The set-ups (``WrapSite``) in the project's files of a model of class ``ref`` or a
    subclass, each with whether it registers method ``name``: a registration on that set-up
    model (``Mark.site``), or one in the same file on a model of the class before it was set up
    (``runtime_shim.mark_forward_method(model, name)`` then ``DDP(model)``; marks travel with
    the model). A registration marks one model, so each set-up needs its own."""
    if ref is None:
        return []
    found: list[SetUp] = []
    for facts, index, site in _every_set_up(view):
        built = view.find_constructed(site.cls, facts)
        if built is None or not any(item.key == ref.key for item in view.mro(built)):
            continue
        found.append(SetUp(facts, index, site, registers(view, facts, index, name, built)))
    return found


def registers(view: ProjectIndex, facts: FileFacts, index: int, name: str, built: Optional[ClassRef]) -> bool:
    """Does the file register method ``name`` on the model it sets up at ``wrap_sites[index]``
    (of class ``built``), after the set-up or on the model before it (``set_ups``)?"""
    return any(mark.name == name and (mark.site == index or (
        mark.site < 0 and bool(mark.cls) and built is not None
        and _related(view, view.find_constructed(mark.cls, facts), built))) for mark in facts.marks)


def mark_decorator(view: ProjectIndex, method: MethodFacts, facts: FileFacts) -> Optional[int]:
    """Position (top first) of the decorator that marks ``method``, if one does."""
    if not method.decorators:  # most methods: the file's imports need no scan
        return None
    star_shim = any(name == "*" and target.split(".", 1)[0] == contract.DECORATOR_MODULE
                    for name, target in facts.imports)
    for index, decorator in enumerate(method.decorators):
        if contract.is_shim_mark(decorator) or (star_shim and decorator in contract.MARK_DECORATORS):
            return index
        if any(configured_name(decorator, name) for name in view.config.mark_decorators):
            return index
    return None


def _every_set_up(view: ProjectIndex) -> list[tuple[FileFacts, int, WrapSite]]:
    """(file, index, site) of every set-up of a model of a known class in the view's files."""
    kept = view.derived.setdefault("set-ups", {})
    if view.reads is not None:
        view.reads.read(scan(SET_UPS))
    if "all" not in kept:
        kept["all"] = [(facts, index, site) for facts in view.files.values()
                       for index, site in enumerate(facts.wrap_sites) if site.cls]
    return kept["all"]
