"""FWD003 invalid-mark: a mark that fails at run time, or silently does nothing.

A mark is the whole fix only if it takes. These fail when the class is defined or when the model
is set up, after the job has started on every rank; or they are accepted and do nothing, so the
method still runs behind the wrapper's back. Each message quotes the error Fabric or
``runtime_shim`` raises (``tests/runtime/test_invalid_marks.py`` reproduces every one).

Decorators (``@forward_entry``, ``@inference_entry``, your ``mark-decorators``)
    * on ``forward``: ``ValueError`` when the class is defined; ``forward`` is what the wrapper runs;
    * directly on a ``staticmethod``, ``classmethod`` or ``property`` (written above it):
      ``TypeError`` when the class is defined;
    * under one (``@staticmethod`` written above the mark): accepted, but the descriptor hides the
      mark and nothing is routed;
    * on a generator method or an ``async def`` method: ``TypeError`` when the class is defined (a
      generator runs when iterated, a coroutine when awaited: both after the wrapper's forward has
      returned, so neither can be routed);
    * in a class that is not an ``nn.Module`` (nor a mixin of one): nothing is ever routed.

Registrations (``model.mark_forward_method(...)`` on a Fabric model, ``runtime_shim``'s
``mark_forward_method(model, ...)``)
    * of ``"forward"``: ``ValueError``;
    * of a name the model's class does not have as a method (missing, an attribute, a property, a
      static method; for ``runtime_shim`` also a class method), including a method of another
      class: ``AttributeError``. Checked only when the model's class and all its bases are known.

Registrations on a wrapper ``runtime_shim`` does not route (``torch.nn.DataParallel``):
    ``mark_forward_method(dp, "generate")`` on ``dp = DataParallel(model)`` fails with
    ``AttributeError`` (the wrapper has no such method), and would route nothing: only DDP, FSDP1,
    FSDP2 and Fabric models are routed. Such a registration does not count as a mark, and
    ``--fix`` never inserts one.

FSDP2's ``register_fsdp_forward_method`` is not checked here: FSDP2 ignores it on modules that are
not ``fully_shard``-ed.
"""

from __future__ import annotations

import re
from typing import Iterator, Optional

from lint_rules import contract, marks
from lint_rules.diagnostics import Diagnostic
from lint_rules.facts.model import DESCRIPTORS, ClassFacts, FileFacts, Mark, MethodFacts
from lint_rules.project import ClassRef, ProjectIndex
from lint_rules.reads import METHODS, scan
from lint_rules.rules.base import Invalid, Valid
from lint_rules.vocabulary import UNROUTED_WRAPPERS

CODE = "FWD003"
NAME = "invalid-mark"

VALID = (
    Valid("""
import torch.nn as nn
from runtime_shim import forward_entry


class GPT(nn.Module):
    def forward(self, x):
        return x

    @forward_entry
    def generate(self, x):
        return self(x)


def main(fabric):
    model = fabric.setup(GPT())
    model.mark_forward_method("generate")
"""),
)

INVALID = (
    Invalid("""
import torch.nn as nn
from runtime_shim import forward_entry


class GPT(nn.Module):
    @forward_entry
    def forward(self, x):  # expect: FWD003 "ValueError: @forward_entry cannot mark forward itself"
        return x

    @forward_entry
    @staticmethod
    def build(x):  # expect: FWD003 "TypeError: @forward_entry marks instance methods, not a staticmethod"
        return x

    @forward_entry
    def stream(self, x):  # expect: FWD003 "TypeError: @forward_entry cannot mark generator GPT.stream"
        yield self(x)

    def embed(self, x):
        return x


class Helper:
    @forward_entry
    def run(self, x):  # expect: FWD003 "does nothing: Helper is not an nn.Module"
        return x


def main(fabric):
    model = fabric.setup(GPT())
    model.mark_forward_method("forward")  # expect: FWD003 "ValueError: You cannot mark the forward method itself"
    model.mark_forward_method("sample")  # expect: FWD003 "but `GPT.sample` does not exist or is not a method."
"""),
    Invalid("""
import torch.nn as nn
from runtime_shim import mark_forward_method


class GPT(nn.Module):
    def forward(self, x):
        return x

    def generate(self, x):  # expect: FWD001
        return self(x)


dp = nn.DataParallel(GPT())
mark_forward_method(dp, "generate")  # expect: FWD003 "on a torch.nn.DataParallel fails: runtime_shim routes"
"""),
)


def _decorator_problem(view: ProjectIndex, facts: FileFacts, cls: ClassFacts, method: MethodFacts,
                       index: int) -> Optional[str]:
    mark = "@" + method.decorators[index].rpartition(".")[2]
    lasts = [d.rpartition(".")[2] for d in method.decorators]
    if method.name == "forward":
        return f"{mark} on forward fails when the class is defined: ValueError: {contract.DECORATOR_ON_FORWARD}"
    if index + 1 < len(lasts) and lasts[index + 1] in DESCRIPTORS:
        kind = lasts[index + 1]
        error = contract.DECORATOR_NOT_FUNCTION if kind == "cached_property" else contract.DECORATOR_ON_DESCRIPTOR
        return f"{mark} on a {kind} fails when the class is defined: TypeError: {error.format(kind=kind)}"
    above = next((last for last in lasts[:index] if last in DESCRIPTORS), None)
    if above is not None:
        return (f"{mark} under @{above} does nothing: the {above} hides the mark and a {above} "
                f"is never routed")
    if method.generator or method.asynchronous:
        what = "an async method" if method.asynchronous else "a generator"
        return (f"{mark} on {what} fails when the class is defined: TypeError: "
                f"{contract.generator_message(f'{cls.qualname}.{method.name}', method.asynchronous)}")
    ref = ClassRef(facts, cls)
    if not (view.is_module_class(ref) or view.is_module_mixin(ref)):
        return (f"{mark} does nothing: {cls.qualname} is not an nn.Module, and only methods of modules "
                f"are routed")
    return None


def _mro_known(view: ProjectIndex, ref: ClassRef) -> bool:
    """Are all the class's bases read, up to ``nn.Module``? Otherwise a method may come from a
    base the project cannot see, and "missing" cannot be said."""
    for item in view.mro(ref):
        for base in item.cls.bases:
            if base.endswith("nn.Module") or base == "object":
                continue
            if view.find_class(base, item.file) is None:
                return False
    return True


def _unrouted_wrapper(mark: Mark) -> Optional[str]:
    """``runtime_shim``'s registration on a ``torch.nn.DataParallel``: it raises, and routes nothing."""
    if mark.via != "shim" or mark.cls not in UNROUTED_WRAPPERS:
        return None
    error = contract.MARK_VALIDATION_MISSING.format(name=mark.name, cls="DataParallel")
    return (f"registering '{mark.name}' on a torch.nn.DataParallel fails: runtime_shim routes marked methods "
            f"through DDP, FSDP1, FSDP2 and Fabric only (use DistributedDataParallel): AttributeError: {error}")


def _registration_problem(view: ProjectIndex, facts: FileFacts, mark: Mark) -> Optional[str]:
    if mark.via not in ("fabric", "shim", ""):
        return None
    if mark.name == "forward":
        return f"registering forward fails: ValueError: {contract.MARK_VALIDATION_FORWARD}"
    unrouted = _unrouted_wrapper(mark)
    if unrouted is not None:
        return unrouted
    found = view.find_constructed(mark.cls, facts) if mark.cls and mark.via else None
    if found is None or not _mro_known(view, found):
        return None
    method = next((m for item in view.mro(found) for m in item.cls.methods if m.name == mark.name), None)
    bad_kinds = ("staticmethod", "property") + (("classmethod",) if mark.via == "shim" else ())
    if method is not None and method.kind not in bad_kinds:
        return None
    name = found.cls.qualname.rpartition(".")[2]
    error = contract.MARK_VALIDATION_MISSING.format(name=mark.name, cls=name)
    if view.reads is not None:
        view.reads.read(scan(METHODS, mark.name))
    elsewhere = sorted({item.qualname for file in view.files.values() for item in file.classes
                        if any(m.name == mark.name and m.kind == "method" for m in item.methods)})
    hint = f" ({mark.name} is a method of {', '.join(elsewhere[:3])})" if elsewhere and method is None else ""
    what = f"a {method.kind}" if method is not None else "not a method of the model"
    return f"registering '{mark.name}' fails ({what}){hint}: AttributeError: {error}"


def check(view: ProjectIndex, facts: FileFacts) -> Iterator[Diagnostic]:
    for cls in facts.classes:
        for method in cls.methods:
            index = marks.mark_decorator(view, method, facts)
            problem = _decorator_problem(view, facts, cls, method, index) if index is not None else None
            if problem is not None:
                symbol = f"{cls.qualname}.{method.name}"
                yield Diagnostic(facts.path, method.line, method.col, CODE, *_split(problem, symbol))
    for mark in facts.marks:
        problem = _registration_problem(view, facts, mark)
        if problem is not None:
            call = contract.FSDP_REGISTER_CALL if mark.via == "fsdp2" else contract.MARK_METHOD_CALL
            yield Diagnostic(facts.path, mark.line, mark.col, CODE, *_split(problem, f"{mark.receiver}.{call}"))


_RAISED = re.compile(r": (?=(?:TypeError|ValueError|AttributeError): )")


def _split(problem: str, symbol: str) -> tuple[str, str, str]:
    """(message, symbol, help): what fails, then the exact error it raises (whose words say what to do)."""
    found = _RAISED.search(problem)
    if found is None:
        return problem, symbol, ""
    return problem[:found.start()], symbol, f"it raises {problem[found.end():]}"
