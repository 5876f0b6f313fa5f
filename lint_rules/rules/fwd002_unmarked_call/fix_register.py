"""FWD002's fix: the class is not yours to decorate (a library's), so each method called on the
wrapped model is registered right after the statement that sets the model up
(``fix.registrations``)."""

from __future__ import annotations

from itertools import groupby
from typing import Sequence

from lint_rules.diagnostics import Diagnostic
from lint_rules.fix.registrations import register_after_sites
from lint_rules.fix.result import FileFix, FixContext, Unfixed


def fix(context: FixContext, diagnostics: Sequence[Diagnostic]) -> tuple[list[FileFix], list[Unfixed]]:
    """Register each called method right after the set-up of the model it is called on."""
    files: list[FileFix] = []
    unfixed: list[Unfixed] = []
    for path, group in groupby(sorted(diagnostics), key=lambda d: d.path):
        found = list(group)
        facts = context.analysis.facts_for(path)
        plan: dict[int, list[str]] = {}
        fixable: list[Diagnostic] = []
        for d in found:
            hit = next((c for c in facts.wrapped_calls if (c.line, c.col) == (d.line, d.col)), None) if facts else None
            site = facts.wrap_sites[hit.site] if facts is not None and hit is not None else None
            if hit is None or site is None:
                unfixed.append(Unfixed(d, "cannot find the call in the file's facts"))
            elif not site.var or site.inline:
                unfixed.append(Unfixed(d, f"the set-up at line {site.line} has no variable or no room for a "
                                          f"registration after it; register the method by hand"))
            else:
                names = plan.setdefault(hit.site, [])
                if hit.method not in names:
                    names.append(hit.method)
                fixable.append(d)
        if not plan or facts is None:
            continue
        file = register_after_sites(path, [(facts.wrap_sites[index], names) for index, names in sorted(plan.items())])
        if file.error is None:
            file.fixed.extend(fixable)
        else:
            file.unfixed.extend(Unfixed(d, "fix refused") for d in fixable)
        files.append(file)
    return files, unfixed
