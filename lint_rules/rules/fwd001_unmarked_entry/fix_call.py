"""FWD001's ``call`` style: register each unmarked entry method right after the set-up of a model
of its class (``fix.registrations``), for classes you do not want to edit.

For each set-up site in the facts (``wrap_sites``: ``model = fabric.setup(...)``, FSDP2's
``fully_shard(model)``) of a file the run was given, the model's class is resolved through the
project view. A registration marks only the model it is given, so every unmarked entry method of
that class (or its bases) gets a registration at every set-up of the class, once the code after
one of them calls it on the model (or one registers it already); a finding is fixed when every
set-up of its class in the project then registers it. ``--fix-style call train.py`` also registers the
methods of ``model.py``'s class, as ``fwdlint --fix --fix-style call .`` does.

If the class cannot be resolved, nothing is guessed: the findings for the methods called on
that model are reported as not fixed. A registration covers the class set up, its bases and its
subclasses (as the analyzer reads it), so a finding counts as fixed only when a registration
covers its class: another class with a method of the same name stays reported.
"""

from __future__ import annotations

from typing import Optional, Sequence

from lint_rules import marks
from lint_rules.diagnostics import Diagnostic
from lint_rules.engine import Session
from lint_rules.facts.model import FileFacts, WrapSite
from lint_rules.fix.registrations import register_after_sites
from lint_rules.fix.result import FileFix, FixContext, Unfixed
from lint_rules.marks import SetUp
from lint_rules.project import ClassRef, ProjectIndex

CODE = "FWD001"  # the rule's (this package imports its fix modules, never the other way round)


def fix(context: FixContext, given: Sequence[Diagnostic]) -> tuple[list[FileFix], list[Unfixed]]:
    """The call-style fixes for a whole run (set-up sites may be in any given file). A finding of a
    file the run was not given (``_set_up_findings``) is reported only if a given file fixes it.

    A registration marks only the model it is given, so a method is registered at every set-up of
    its class (or a subclass) in the project, once one of them calls it (or one registers it
    already); a finding is fixed only if then every set-up registers it. A set-up this run cannot
    edit (a file it was not given, no variable, no room) leaves the finding not fixed, saying where."""
    related = set(_set_up_findings(context))
    diagnostics = [*given, *sorted(related - set(given))]
    by_class: dict[tuple[str, str], list[str]] = {}
    for d in diagnostics:
        by_class.setdefault((d.path, d.symbol.rpartition(".")[0]), []).append(d.symbol.rpartition(".")[2])
    unresolved: dict[str, str] = {}  # method name -> why it could not be registered
    wanted = _wanted(context, by_class)  # (path, class, method) registered at every set-up of the class
    files: list[tuple[FileFix, set[tuple[str, int, str]]]] = []  # with the (path, site, method)s added
    for path in sorted(set(context.paths)):
        view = context.analysis.view_for(path)
        facts = view.files.get(path) if view is not None else None
        if facts is None or not facts.wrap_sites:
            continue
        added: set[tuple[str, int, str]] = set()
        file = _fix_file(path, facts, view, by_class, wanted, unresolved, added)  # type: ignore[arg-type]
        if file is not None:
            files.append((file, added))
    given_paths = set(context.paths)
    unfixed: list[Unfixed] = []
    for d in diagnostics:
        name = d.symbol.rpartition(".")[2]
        key = (d.path, d.symbol.rpartition(".")[0], name)
        set_ups = _class_set_ups(context, d.path, key[1], name)
        missing = [s for s in set_ups if not s.registered]
        owners = [next((f for f, added in files if (s.file.path, s.index, name) in added), None) for s in missing]
        refused = next((f for f in owners if f is not None and f.error is not None), None)
        if key in wanted and missing and all(f is not None and f.error is None for f in owners):
            owners[0].fixed.append(d)  # type: ignore[union-attr]
        elif refused is not None:
            unfixed.append(Unfixed(d, f"fix refused in {refused.path}"))
        elif key in wanted and missing:
            left = [s for s, f in zip(missing, owners) if f is None]
            outside = [s.where for s in left if s.file.path not in given_paths]
            why = (f"the class is also set up at {', '.join(outside)}, in files this run was not given; "
                   f"run fwdlint --fix --fix-style call on the whole project" if outside else
                   unresolved.get(name) or f"the set-up at {', '.join(s.where for s in left)} has no variable "
                                           f"or no room for a registration after it; register it there by hand")
            unfixed.append(Unfixed(d, f"not every set-up of the class can be registered ({why}), "
                                      f"or use --fix-style decorator, which marks the class"))
        elif name in unresolved:
            unfixed.append(Unfixed(d, unresolved[name]))
        else:
            unfixed.append(Unfixed(d, "no set-up of its class that routes registrations (fabric.setup, fully_shard, "
                                      "DDP, FSDP; not DataParallel) is followed by a call of it; "
                                      "use --fix-style decorator"))
    return [f for f, _ in files], [u for u in unfixed if u.diagnostic not in related]


def _class_set_ups(context: FixContext, path: str, qualname: str, name: str) -> list[SetUp]:
    view = context.analysis.view_for(path)
    facts = view.files.get(path) if view is not None else None
    cls = facts.class_named(qualname) if facts is not None else None
    if view is None or facts is None or cls is None:
        return []
    return marks.set_ups(view, name, ClassRef(facts, cls))


def _wanted(context: FixContext, by_class: dict[tuple[str, str], list[str]]) -> set[tuple[str, str, str]]:
    """The findings (path, class, method) to register at every set-up of the class: those some set-up
    calls (``WrapSite.called``) or already registers."""
    wanted: set[tuple[str, str, str]] = set()
    for (path, qualname), names in by_class.items():
        for name in names:
            set_ups = _class_set_ups(context, path, qualname, name)
            if any(name in s.site.called or s.registered for s in set_ups):
                wanted.add((path, qualname, name))
    return wanted


def _fix_file(path: str, facts: FileFacts, view: ProjectIndex, by_class: dict[tuple[str, str], list[str]],
              wanted: set[tuple[str, str, str]], unresolved: dict[str, str],
              added: set[tuple[str, int, str]]) -> Optional[FileFix]:
    """The registrations for the set-up sites of one file, or ``None`` if it has none to add;
    ``added`` gets the (path, site index, method) of each registration planned."""
    entry_names = {name for names in by_class.values() for name in names}
    plan: list[tuple[WrapSite, list[str]]] = []
    for index, site in enumerate(facts.wrap_sites):
        where = f"{path}:{site.line}"
        ref = view.find_constructed(site.cls, facts) if site.cls else None
        if ref is None:
            for name in site.called:
                if name in entry_names:
                    unresolved.setdefault(name, f"the class of `{site.var}` set up at {where} cannot be resolved; "
                                                f"register the method there by hand")
            continue
        own = {(item.file.path, item.cls.qualname, name) for item in view.mro(ref)
               for name in by_class.get((item.file.path, item.cls.qualname), ())}
        names = list(dict.fromkeys(key[2] for key in own if key in wanted
                                   and not marks.registers(view, facts, index, key[2], ref)))
        if names and (site.inline or not site.var):
            for name in names:
                unresolved.setdefault(name, f"the set-up at {where} shares its line with its block: "
                                            f"no room for a registration")
            continue
        if names:
            plan.append((site, names))
            added.update((path, index, name) for name in names)
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
    session = Session(context.run._replace(cache=False))
    try:
        return [d for view, facts in related.values() for d in session.check(view, facts) if d.code == CODE]
    finally:
        session.store.close()


def _set_up_classes(view: ProjectIndex, facts: FileFacts) -> list[ClassRef]:
    """The classes of the models a file sets up and then calls methods on."""
    found = (view.find_constructed(site.cls, facts) for site in facts.wrap_sites if site.cls and site.called)
    return [ref for ref in found if ref is not None]
