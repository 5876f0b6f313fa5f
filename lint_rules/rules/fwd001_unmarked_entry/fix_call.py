"""FWD001's ``call`` style: register each unmarked entry method right after the set-up of a model
of its class (``fix.registrations``), for classes you do not want to edit.

For each set-up site in the facts (``wrap_sites``: ``model = fabric.setup(...)``, FSDP2's
``fully_shard(model)``) of a file the run was given, the model's class is resolved through the
project view. Every unmarked entry method of that class (or its bases) that the code after the
set-up calls on the model gets a registration. ``--fix-style call train.py`` also registers the
methods of ``model.py``'s class, as ``fwdlint --fix --fix-style call .`` does.

If the class cannot be resolved, nothing is guessed: the findings for the methods called on
that model are reported as not fixed. A registration covers the class set up, its bases and its
subclasses (as the analyzer reads it), so a finding counts as fixed only when a registration
covers its class: another class with a method of the same name stays reported.
"""

from __future__ import annotations

import dataclasses
from typing import Optional, Sequence

from lint_rules.diagnostics import Diagnostic
from lint_rules.engine import Session
from lint_rules.facts.model import FileFacts, WrapSite
from lint_rules.fix.registrations import register_after_sites
from lint_rules.fix.result import FileFix, FixContext, Unfixed
from lint_rules.project import ClassRef, ProjectIndex

CODE = "FWD001"  # the rule's (this package imports its fix modules, never the other way round)


def fix(context: FixContext, given: Sequence[Diagnostic]) -> tuple[list[FileFix], list[Unfixed]]:
    """The call-style fixes for a whole run (set-up sites may be in any given file). A finding of a
    file the run was not given (``_set_up_findings``) is reported only if a given file fixes it."""
    related = set(_set_up_findings(context))
    diagnostics = [*given, *sorted(related - set(given))]
    by_class: dict[tuple[str, str], list[str]] = {}
    for d in diagnostics:
        by_class.setdefault((d.path, d.symbol.rpartition(".")[0]), []).append(d.symbol.rpartition(".")[2])
    unresolved: dict[str, str] = {}  # method name -> why it could not be registered
    files: list[tuple[FileFix, set[tuple[str, str, str]]]] = []  # with the (path, class, method)s covered
    for path in sorted(set(context.paths)):
        view = context.analysis.view_for(path)
        facts = view.files.get(path) if view is not None else None
        if facts is None or not facts.wrap_sites:
            continue
        covered: set[tuple[str, str, str]] = set()
        file = _fix_file(path, facts, view, by_class, unresolved, covered)  # type: ignore[arg-type]
        if file is not None:
            files.append((file, covered))
    unfixed: list[Unfixed] = []
    for d in diagnostics:
        name = d.symbol.rpartition(".")[2]
        key = (d.path, d.symbol.rpartition(".")[0], name)
        owner = next((f for f, covered in files if f.error is None and key in covered), None)
        refused = next((f for f, covered in files if f.error is not None and key in covered), None)
        if owner is not None:
            owner.fixed.append(d)
        elif refused is not None:
            unfixed.append(Unfixed(d, f"fix refused in {refused.path}"))
        elif name in unresolved:
            unfixed.append(Unfixed(d, unresolved[name]))
        else:
            unfixed.append(Unfixed(d, "no set-up of its class that routes registrations (fabric.setup, fully_shard, "
                                      "DDP, FSDP; not DataParallel) is followed by a call of it; "
                                      "use --fix-style decorator"))
    return [f for f, _ in files], [u for u in unfixed if u.diagnostic not in related]


def _fix_file(path: str, facts: FileFacts, view: ProjectIndex, by_class: dict[tuple[str, str], list[str]],
              unresolved: dict[str, str], covered: set[tuple[str, str, str]]) -> Optional[FileFix]:
    """The registrations for the set-up sites of one file, or ``None`` if it has none to add;
    ``covered`` gets the (path, class, method) of every finding they fix."""
    entry_names = {name for names in by_class.values() for name in names}
    plan: list[tuple[WrapSite, list[str]]] = []
    for site in facts.wrap_sites:
        calls = [name for name in site.called if name in entry_names]
        if not calls:
            continue
        where = f"{path}:{site.line}"
        ref = view.find_constructed(site.cls, facts) if site.cls else None
        if ref is None:
            for name in calls:
                unresolved.setdefault(name, f"the class of `{site.var}` set up at {where} cannot be resolved; "
                                            f"register the method there by hand")
            continue
        own = {(*item.key, name) for item in view.mro(ref) for name in by_class.get(item.key, ())}
        names = [name for name in calls if any(key[2] == name for key in own)]
        if names and site.inline:
            for name in names:
                unresolved.setdefault(name, f"the set-up at {where} shares its line with its block: "
                                            f"no room for a registration")
            continue
        if names:
            plan.append((site, names))
            related = [*view.mro(ref), *view.subclasses(ref)]  # whom the analysis applies the registration to
            covered.update((*item.key, name) for item in related for name in by_class.get(item.key, ())
                           if name in names)
    return register_after_sites(path, plan) if plan else None


def _set_up_findings(context: FixContext) -> list[Diagnostic]:
    """FWD001 findings in project files the run was not given, on the classes (their bases and
    subclasses) that the given files set up and call methods on: ``--fix-style call train.py``
    registers the methods of ``model.py``'s class after ``ddp = DDP(Net())`` in ``train.py``, as
    ``fwdlint --fix --fix-style call .`` does. The engine checks those files (noqa and per-file
    ignores apply); which classes are set up comes from the facts and the project view."""
    analysis, paths = context.analysis, context.paths
    given = set(paths)
    related: dict[str, tuple[ProjectIndex, FileFacts]] = {}
    for path in paths:
        view = analysis.view_for(path)
        if view is None:
            continue
        for ref in _set_up_classes(view, view.files[path]):
            for item in [*view.mro(ref), *view.subclasses(ref)]:
                if item.file.path not in given and item.file.path in view.files:
                    related[item.file.path] = (view, item.file)
    if not related:
        return []
    session = Session(dataclasses.replace(context.run, cache=False))
    try:
        return [d for view, facts in related.values() for d in session.check(view, facts) if d.code == CODE]
    finally:
        session.store.close()


def _set_up_classes(view: ProjectIndex, facts: FileFacts) -> list[ClassRef]:
    """The classes of the models a file sets up and then calls methods on."""
    found = (view.find_constructed(site.cls, facts) for site in facts.wrap_sites if site.cls and site.called)
    return [ref for ref in found if ref is not None]
