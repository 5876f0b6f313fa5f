"""FWD005 unresolved-name: a module class's verdict depends on a name fwdlint could not read.

fwdlint reads code, it never runs it. Whether a method runs forward computation can depend on
what a name is: a base class (is the class a module at all?), or the class an attribute is built
from (``self.vit.patch_embed(x)`` computes if ``vit`` holds a ``VisionTransformer``). When fwdlint
cannot read that name, it cannot know, and a clean run would be a lie. So it says so, as mypy and
pyright report a missing import::

    import torch.nn as nn
    from timm.models import VisionTransformer   # FWD005 package 'timm' is not installed in venv .venv

    class Captioner(nn.Module):
        def __init__(self, vit: VisionTransformer):
            super().__init__()
            self.vit = vit

        def embed(self, x):                      # unchecked: FWD001 if timm's class computes there
            return self.vit.patch_embed(x)

The policy for what cannot be read (the same in ``fwdlint`` and flake8)
    A name is *unresolved* when its package is not installed in the environment fwdlint reads
    (``--python``; flake8: ``--fwd-python-executable``; configuration: ``python-executable``),
    when it is bound at run time (``X, ok = optional_import("pkg", name="X")``,
    ``importlib.import_module``, a class made by a function), or, for a base class, when its
    package is there but the name is not in its Python sources. fwdlint assumes an unresolved value
    is **not** a module: guessing "module" invents FWD001 findings on plain functions and objects
    (``self.iou_fn(a, b)``), guessing "not a module" silently hides real ones. It therefore reports
    every verdict the assumption decides: a method of a module class that computes nothing
    *unless* an unresolved attribute is a module (any method called on it but ``Module``'s own,
    such as ``.eval()``), and a class whose only unread base could make it a module and that has
    methods which would then compute. Values that have no name to read (an unannotated
    constructor argument, a registry's build) are not unresolved; they are judged by their use (see
    FWD001).

Where and how often
    Once per missing package (or per unread name) per file: at the line that imports it in that
    file, else at the first method or class whose verdict depends on it. The message names the
    package, the environment that was read, and the classes and methods left unchecked.

What to do
    Install the package in the environment fwdlint reads, or point ``--python`` at the environment
    that has it (a pre-commit hook or CI job without the project's environment:
    ``python-executable = ".venv/bin/python"``). A value bound at run time cannot be read: annotate
    the attribute in the class body with the class it holds (``assigner: Assigner``), or mark the
    methods that run it (``@forward_entry``). ``# noqa: FWD005`` on the reported line accepts the
    gap. ``--statistics`` counts the module classes checked completely and those left partly
    unchecked.
"""

from __future__ import annotations

from typing import Iterator, Optional

from lint_rules import marks
from lint_rules.computation import analysis_for, never_entry
from lint_rules.diagnostics import Diagnostic
from lint_rules.facts.model import FileFacts, MethodFacts
from lint_rules.project import ClassRef, ProjectIndex
from lint_rules.rules.base import Invalid, Valid
from lint_rules.values import MISSING, Unresolved

CODE = "FWD005"
NAME = "unresolved-name"

VALID = (
    Valid("""
import torch.nn as nn

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(2, 2)

    def forward(self, x):
        return self.proj(x)
"""),
    Valid("""
import torch.nn as nn
from not_installed_anywhere import Tokenizer

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = Tokenizer()

    def forward(self, x):
        return x

    def params(self):
        return list(self.tok.parameters())
"""),
)

INVALID = (
    Invalid("""
import torch.nn as nn
from not_installed_anywhere import Backbone  # expect: FWD005 "package 'not_installed_anywhere' is not installed"

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = Backbone()

    def forward(self, x):
        return x

    def embed(self, x):
        return self.backbone.stem(x)
"""),
    Invalid("""
from not_installed_anywhere import Base  # expect: FWD005 "Model.sample is unchecked"

class Model(Base):
    def sample(self, x):
        return self(x)
"""),
)


def check(view: ProjectIndex, facts: FileFacts) -> Iterator[Diagnostic]:
    groups: dict[tuple[str, str], tuple[Unresolved, list[str], list[tuple[int, int]]]] = {}
    for cls in facts.classes:
        ref = ClassRef(facts, cls)
        for why, method in dependents(view, ref):
            key = (why.reason, why.package if why.reason == MISSING else why.ref)
            entry = groups.setdefault(key, (why, [], []))
            entry[1].append(f"{cls.qualname}.{method.name}")
            entry[2].append((method.line, method.col))
    for why, symbols, positions in groups.values():
        line, col = _import_position(facts, why) or min(positions)
        names = sorted(dict.fromkeys(symbols))
        shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        where = f" in {view.environment}" if why.reason == MISSING and view.environment else ""
        verb = "is" if len(names) == 1 else "are"
        message = f"{why.describe()}{where}: {shown} {verb} unchecked"
        yield Diagnostic(facts.path, line, col, CODE, message, names[0], _help(why))


def dependents(view: ProjectIndex, ref: ClassRef) -> Iterator[tuple[Unresolved, MethodFacts]]:
    """(what could not be read, a method whose verdict it decides), as FWD001 would judge them."""
    module = view.is_module_class(ref)
    base = None if module else view.unknown_base(ref)
    if not module and base is None:
        return
    analysis = analysis_for(view, ref)  # for a class with an unread base: as if it were a module
    lightning = view.is_lightning_class(ref)  # by the names of its bases too: Lightning routes its steps
    called: Optional[set[str]] = None
    for method in ref.cls.methods:
        if never_entry(method, lightning) or marks.is_marked(view, method, ref.file, ref):
            continue
        if method.name.startswith("_"):  # a private helper is judged through its callers (FWD001)
            called = analysis.called_names() if called is None else called
            if method.name in called:
                continue
        computes = analysis.chain(method.name) is not None
        if base is not None and (computes or analysis.unknowns(method.name)):
            yield base, method
        elif not computes:
            for why in sorted(analysis.unknowns(method.name)):
                yield why, method


def partly_unchecked(view: ProjectIndex, ref: ClassRef) -> Optional[bool]:
    """For ``--statistics``: None for a class that is not a module (nor might be one), True for a
    module class (or a possible one) with a verdict that depends on an unresolved name."""
    if not view.is_module_class(ref) and view.unknown_base(ref) is None:
        return None
    return next(iter(dependents(view, ref)), None) is not None


def _import_position(facts: FileFacts, why: Unresolved) -> Optional[tuple[int, int]]:
    """The line where ``facts`` imports the name (or, for a missing package, anything of it)."""
    lines = dict(facts.import_lines)
    for local, target in facts.imports:
        if local == "*":
            local = f"*{target}"
        hit = why.ref == target or why.ref.startswith(f"{target}.") or (
            why.reason == MISSING and target.split(".", 1)[0] == why.package)
        if hit and local in lines:
            return lines[local], 0
    return None


def _help(why: Unresolved) -> str:
    if why.reason == MISSING:
        return (f"install {why.package} in the environment fwdlint reads, or point --python (python-executable "
                "in the configuration) at the environment that has it")
    return ("annotate the attribute in the class body with the class it holds, mark the methods that run it "
            "with @forward_entry, or accept the gap with # noqa: FWD005")
