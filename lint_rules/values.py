"""What the analysis knows about a value: one home and one vocabulary.

A name in the checked code (a base class, what an attribute is built from) is, to the analysis:

* a **class it read** (``project.ClassRef``): a module class when its MRO, read from the project
  and the environment's installed sources, reaches ``MODULE_ROOT``; torch is read like any
  other package, so ``torch.nn.modules.loss._Loss`` is a module by its bases, not by its name;
* **never a module**: the standard library's and the builtins' names (nothing there derives from
  torch's classes), literals, functions and class objects stored as values;
* **unresolved** (``Unresolved``): the analysis could not read what the name is, for one of the
  ``REASONS``. The policy for such a value is in ``lint_rules/rules/fwd005_unresolved_name.py``:
  it is assumed not to be a module, and every verdict that assumption decides is reported.

An attribute's class is the union of what every assignment in the hierarchy (the class, its
bases and its subclasses) says; a value of a module class whose class no source names (an
unannotated constructor argument, a registry's build) is a fourth case, judged by its use
(``computation``).
"""

from __future__ import annotations

import builtins
import sys
from dataclasses import dataclass

#: Where torch 2.13 defines ``Module`` (torch/nn/modules/module.py) and the name it exports it under.
MODULE_ROOT = "torch.nn.modules.module.Module"
MODULE_ROOT_EXPORTS = frozenset({MODULE_ROOT, "torch.nn.Module"})

MISSING = "missing"  # the package the name comes from is not installed where fwdlint reads
DYNAMIC = "dynamic"  # bound at run time: a dynamic import, a computed class (``X, ok = optional_import(...)``)
UNREADABLE = "unreadable"  # the package is there, the name is not in its Python sources
REASONS = (MISSING, DYNAMIC, UNREADABLE)

#: Top-level modules of the standard library: no class of theirs is a module.
STDLIB = frozenset(getattr(sys, "stdlib_module_names", ())) | frozenset(sys.builtin_module_names) | {
    "builtins", "typing_extensions"}
_BUILTINS = frozenset(dir(builtins))


@dataclass(frozen=True, order=True)
class Unresolved:
    """A name the analysis could not read, and why."""

    reason: str  # one of REASONS
    ref: str  # the name, resolved through its file's imports ("timm.models.VisionTransformer")
    package: str  # MISSING/UNREADABLE: the top-level package ("timm"); DYNAMIC: the file's module
    path: str  # the file that names it

    def describe(self) -> str:
        """What could not be seen, for a message: "package 'timm' is not installed"."""
        if self.reason == MISSING:
            return f"package '{self.package}' is not installed"
        if self.reason == DYNAMIC:
            return f"'{self.ref}' is bound at run time (a dynamic import or a computed value)"
        return f"'{self.ref}' is not in the Python sources of '{self.package}'"


def spelled(ref: str) -> str:
    """``nn.Linear`` in a file that never imports ``nn`` (a star import brought it): torch's."""
    return f"torch.{ref}" if ref.startswith("nn.") else ref


def is_root(ref: str) -> bool:
    """Is ``ref`` torch's ``Module`` itself (under any import of ``torch.nn``)?"""
    return ref in MODULE_ROOT_EXPORTS or ref.endswith(".nn.Module") or ref == "nn.Module"


def never_module(ref: str) -> bool:
    """A name of the standard library or a builtin: no class there derives from torch's."""
    return ref.split(".", 1)[0] in STDLIB or ("." not in ref and ref in _BUILTINS)
