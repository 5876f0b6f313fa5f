"""Plain objects that are handed a model: ``Beam(self).search(x)``, ``Evaluator(model=self.net)``.

Speech and text decoders keep the model in a plain class (``self.model = model`` in ``__init__``)
and run it from its methods (``self.model.decoder(...)``). Handing ``self`` or a submodule to such
a constructor runs it when the object's methods do. ``holder_summary`` reads the class as if it
were a function of that constructor parameter: the uses of every method of the class (its bases
included) on the attributes that keep the parameter, re-expressed as uses of what was handed over
(``self.model.head(x)`` becomes ``head(x)`` on the model), which ``computation`` then evaluates
against the class of what was passed, as it does a function's summary. Which of the object's
methods the caller runs is not followed: any that runs the model counts.
"""

from __future__ import annotations

from typing import Optional

from lint_rules.facts.model import (
    ATTR_CALL, ELEMENT_METHOD, PASS_CALL, SELF_CALL, SRC_PARAM, SUB_CALL, SUB_METHOD, FileFacts, MethodFacts, Use,
)
from lint_rules.project import ProjectIndex


def holder_summary(index: ProjectIndex, ref: str, origin: FileFacts, slot: str) -> Optional[tuple[FileFacts, MethodFacts]]:
    """The uses that class ``ref``'s methods make of constructor parameter ``slot`` (a position or a
    keyword), as uses of ``self``; None if ``ref`` is no class, or keeps that parameter nowhere."""
    holder = index.find_class(ref, origin)
    if holder is None:
        return None
    mro = index.mro(holder)
    init = next((item for item in mro if any(m.name == "__init__" for m in item.cls.methods)), None)
    params = init.cls.init_params if init is not None else ()
    name = params[int(slot)] if slot.isdigit() and int(slot) < len(params) else slot
    if not name or name.isdigit():
        return None
    kept = {attr for item in mro for attr, sources in item.cls.attrs
            if any(src.kind == SRC_PARAM and src.param == name for src in sources)}
    if not kept:
        return None
    uses = tuple(moved for item in mro for method in item.cls.methods if method.name != "__init__"
                 for use in method.uses for moved in [_rebased(use, kept, item.cls.qualname)] if moved is not None)
    return holder.file, MethodFacts(f"{holder.cls.qualname}({name}=...)", 0, 0, "method", (), uses)


def _rebased(use: Use, kept: set[str], owner: str) -> Optional[Use]:
    """``use`` of ``self.<attr>`` (attr in ``kept``) as the same use of ``self``; None otherwise."""
    text = f"{owner}: {use.text}"
    if use.kind in (SUB_CALL, ATTR_CALL) and use.name in kept:
        return Use(SELF_CALL, "", use.line, text, col=use.col)
    if use.kind == SUB_METHOD and use.name in kept:
        return Use(ATTR_CALL, use.method, use.line, text, col=use.col)
    if use.kind == PASS_CALL and use.name in kept:
        return Use(PASS_CALL, "", use.line, text, use.method, col=use.col)
    if use.kind == ELEMENT_METHOD:
        head, _, rest = use.name.partition(".")
        if head in kept and rest:
            return Use(SUB_METHOD if "." not in rest and "[]" not in rest else ELEMENT_METHOD, rest, use.line, text,
                       use.method, col=use.col)
    return None
