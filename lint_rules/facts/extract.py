"""Source -> ``FileFacts``: one ``ast`` parse and one traversal per file, filled by collectors.

``COLLECTORS`` lists them, one per concern. A file is parsed only if its text holds a trigger of
some collector (``wanted``): a file with none of them can hold no finding and define nothing
another file needs. A new rule that needs new facts adds a collector here and its fields to
``model.FileFacts``.
"""

from __future__ import annotations

import ast
import re
from typing import Optional, Sequence

from lint_rules.facts.callers import Callers
from lint_rules.facts.classes import Classes
from lint_rules.facts.entry_uses import EntryUses
from lint_rules.facts.forward_patches import ForwardPatches
from lint_rules.facts.handovers import Handovers
from lint_rules.facts.init_contexts import InitContexts
from lint_rules.facts.meta_submodules import MetaSubmodules
from lint_rules.facts.model import FileFacts
from lint_rules.facts.model_flow import ModelFlow
from lint_rules.facts.traversal import Collector, FileWalk
from lint_rules.noqa import noqa_lines
from lint_rules.source import python_parse

COLLECTORS: tuple[type[Collector], ...] = (EntryUses, Classes, ModelFlow, MetaSubmodules, InitContexts,
                                           ForwardPatches, Callers, Handovers)
#: What the rules of other files read from a file read only to resolve names (``locate=False``): its
#: classes and functions, the calls its constructors make (FWD201) and the patches its functions
#: apply (FWD301). Set-ups, marks, meta submodules, callers and handovers count only in checked
#: files; leaving their collectors out saves about a third of the facts time of torch's and
#: huggingface_hub's files, which a timm run reads to resolve names.
RESOLVING: tuple[type[Collector], ...] = (EntryUses, Classes, InitContexts, ForwardPatches)

__all__ = ["COLLECTORS", "extract", "wanted"]


def wanted(source: str, collectors: Sequence[type[Collector]] = COLLECTORS) -> list[type[Collector]]:
    """The collectors that this text can give anything (the text prefilter)."""
    return [kind for kind in collectors if kind.wanted(source)]


def extract(source: str, path: str, module: str = "", is_package: bool = False, locate: bool = True,
            tree: Optional[ast.Module] = None) -> FileFacts:
    """Facts of one file's text (``tree``: its ``ast``, if already parsed). Raises ``SyntaxError``
    on invalid syntax.

    ``locate=False`` is for files read only to resolve names: evidence lines stay 0, and the file
    is parsed even if no collector wants it (its imports may re-export what another file needs)."""
    active = wanted(source, COLLECTORS if locate else RESOLVING)
    if not active and locate:
        return FileFacts(path=path, module=module, imports=(), classes=(), marks=(), parsed=False)
    if tree is None:
        tree, error = python_parse(source, path)
        if tree is None:
            raise error
    walk = FileWalk(source, module, is_package, active, locate=locate)
    fields = walk.run(tree)
    fields.setdefault("classes", ())
    fields.setdefault("marks", ())
    return FileFacts(path=path, module=module, imports=walk.names.as_facts(), import_lines=walk.names.lines_as_facts(),
                     run_time_names=tuple(dict.fromkeys(walk.names.run_time)),
                     noqa=noqa_lines(source),
                     quoted=_quoted_private(source), **fields)


_QUOTED_PRIVATE = re.compile(r"""["'](_[A-Za-z]\w*)["']""")


def _quoted_private(source: str) -> tuple[str, ...]:
    """Private names quoted in strings ("_sample"): targets of dispatch through getattr. The matches
    of ``_QUOTED_PRIVATE`` found as ``findall`` would, from the places a quote is followed by ``_``
    (found by ``str.find``: the regular expression alone tried every position of the file)."""
    found: set[str] = set()
    double, single, position = source.find('"_'), source.find("'_"), 0
    while double != -1 or single != -1:
        start = single if double == -1 or single != -1 and single < double else double
        match = _QUOTED_PRIVATE.match(source, start)
        if match is not None:
            found.add(match.group(1))
        position = match.end() if match is not None else start + 1
        if double != -1 and double < position:
            double = source.find('"_', position)
        if single != -1 and single < position:
            single = source.find("'_", position)
    return tuple(sorted(found))
