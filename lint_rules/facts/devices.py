"""Reading device and init-context expressions: shared by the ``meta_submodules`` (FWD101) and
``init_contexts`` (FWD201) collectors.

``"meta"``, ``torch.device("meta")`` and ``device="meta"`` put tensors on the meta device; the
``with`` items that change how modules are initialised are ``torch.device("meta")``,
``X.init_module(...)`` (Lightning's ``Fabric.init_module`` and ``Trainer.init_module``: the
method name is distinctive enough to match on any receiver, which is how users name their
Fabric) and ``_EmptyInit(...)``; ``runtime_shim.empty_init(...)`` is deliberately not one (it is
the compile-safe replacement). Names are resolved through the file's imports.
"""

from __future__ import annotations

import ast
from typing import Optional

from lint_rules.facts.names import Names
from lint_rules.facts.walk import call_args, dotted_name, string_value
from lint_rules.vocabulary import EMPTY_INIT

#: How a file spells the meta device wherever it names it: a string literal (``torch.device('meta')``,
#: a variable or a default holds one too). ``metadata`` is not it.
META_TEXTS = ('"meta"', "'meta'")
#: What a file must hold for ``init_context`` to find anything in it (the collectors' text tests).
INIT_CONTEXT_TEXTS = (*META_TEXTS, "init_module", EMPTY_INIT)


def is_meta(expr: ast.expr, names: Names) -> bool:
    """``"meta"`` or ``torch.device("meta")`` (also ``torch.device(type="meta")``)."""
    if string_value(expr) == "meta":
        return True
    if type(expr) is ast.Call and names.resolve(dotted_name(expr.func) or "") == "torch.device":
        args = call_args(expr)
        return bool(args) and string_value(args[0].value) == "meta"
    return False


def init_context(expr: ast.expr, names: Names) -> Optional[str]:
    """How a ``with`` item that changes module initialisation is shown, or None."""
    if type(expr) is not ast.Call:
        return None
    if is_meta(expr, names):
        return 'torch.device("meta")'
    func = dotted_name(expr.func) or ""
    if func.rpartition(".")[2] == "init_module" and "." in func:
        return f"{func}()"
    if names.resolve(func).rpartition(".")[2] == EMPTY_INIT:
        return f"{EMPTY_INIT}()"
    return None
