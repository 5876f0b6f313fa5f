"""FWD002 unmarked-call-on-wrapped-model: a training script calls an unmarked entry method on a
model it set up for distributed execution.

FWD001 is what a model's author sees at the ``def``; FWD002 is what the user of a model sees where
the model is used. After ``model = fabric.setup(GPT())``, ``ddp = DDP(model)``, ``FSDP(model)`` or
``fully_shard(model)``, a call such as ``model.generate(x)`` (or ``ddp.module.generate(x)``, or
``generate`` on the module that was wrapped) runs the model's computation behind the wrapper: under
DDP the gradients of the ranks silently stop agreeing, FSDP fails on sharded parameters, Fabric
raises at run time. Register the method right after the set-up::

    model = fabric.setup(GPT())
    model.mark_forward_method("generate")             # Fabric

    fully_shard(model)
    register_fsdp_forward_method(model, "generate")   # FSDP2

    ddp = DDP(model)
    mark_forward_method(ddp, "generate")              # DDP / FSDP1: runtime_shim's function

``fwdlint --fix`` inserts exactly that line (and its import), in either fix style.

What is followed
    The model from where it is built (``GPT(...)``, ``GPT.from_pretrained(...)``, an annotation),
    through the ``Module`` methods that return the module itself (``GPT(cfg).eval()``,
    ``model = model.to(device)``, ``DDP(model.cuda())``) and ``torch.compile``, through its set-up
    (``fabric.setup``/``setup_module``, tuple unpacking of ``fabric.setup(model, optimizer)``,
    ``DistributedDataParallel``/``FullyShardedDataParallel`` under any import alias,
    ``fully_shard``, accelerate's ``accelerator.prepare``/``prepare_model``, unpacked the same
    way), plain copies (``net = model``), ``.module``, ``accelerator.unwrap_model(model)``,
    attributes of a trainer object (``self.model = fabric.setup(model)`` in one method,
    ``self.model.generate()`` in another) and functions of the same file that receive the set-up
    model as an argument. The method must resolve, through the model's class and its bases, to one
    that runs module computation (FWD001's analysis) and is not marked.

How it meets FWD001
    One problem, one finding: if the method's class is part of the project (any file under the
    project root, or given on the command line) and the method is registered nowhere, FWD001
    reports the ``def`` and FWD002 stays silent; marking the method there fixes every call. A
    registration marks only the model it is given: once the method is registered on some set-up,
    each call on a set-up that does not register it is reported here too, whoever owns the class
    (FWD001 names the set-ups at the ``def``). FWD002 reports the calls of methods whose
    class lives outside the project (an installed package you cannot edit), and those whose
    FWD001 finding is silenced with ``# noqa``. A call on a model whose class the file does not
    tell is not reported: nothing is guessed.
"""

from __future__ import annotations

from typing import Iterator, Mapping, Sequence

from lint_rules import contract, marks
from lint_rules.computation import analysis_for, never_entry
from lint_rules.diagnostics import Diagnostic, Step, chain_text
from lint_rules.facts.model import FileFacts, MethodFacts, WrapSite
from lint_rules.fix.result import FileFix, FixContext, Unfixed
from lint_rules.noqa import is_suppressed
from lint_rules.project import ClassRef, ProjectIndex
from lint_rules.rules.base import Invalid, Valid

CODE = "FWD002"
NAME = "unmarked-call-on-wrapped-model"

_SET_UP = {"fabric": "fabric.setup", "fsdp2": "fully_shard", "ddp": "DistributedDataParallel",
           "fsdp1": "FullyShardedDataParallel", "accelerate": "accelerator.prepare"}

_MODEL = """
import torch.nn as nn
from torch.distributed.fsdp import fully_shard, register_fsdp_forward_method


class GPT(nn.Module):
    def forward(self, x):
        return x

    def generate(self, x):  # noqa: FWD001 (written for one device)
        return self(x)

"""

VALID = (
    Valid(_MODEL + """
def run(x):
    model = GPT()
    fully_shard(model)
    register_fsdp_forward_method(model, "generate")
    return model.generate(x)
"""),
    Valid(_MODEL.replace("  # noqa: FWD001 (written for one device)", "") + """
def run(x):
    model = GPT()
    fully_shard(model)
    return model.generate(x)  # FWD001 reports GPT.generate: one problem, one finding
"""),
    Valid("""
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


class Net(nn.Module):
    def forward(self, x):
        return x

    def describe(self):
        return "net"


ddp = DDP(Net())
ddp.module.describe()
"""),
)

INVALID = (
    Invalid(_MODEL + """
def run(x):
    model = GPT()
    fully_shard(model)
    return model.generate(x)  # expect: FWD002 "on the model set up at line 15 (fully_shard)"
"""),
    Invalid(_MODEL + """
class Trainer:
    def __init__(self, fabric):
        self.model = fabric.setup(GPT())

    def sample(self, x):
        return self.model.generate(x)  # expect: FWD002 "set-up: self.model.mark_forward_method('generate')"


def evaluate(net, x):
    return net.generate(x)  # expect: FWD002 "runs GPT.generate outside the wrapper's forward (generate -> self(...)"


def main(fabric, x):
    model, optimizer = fabric.setup(GPT(), None)
    return evaluate(model, x)
"""),
)


def _fwd001_owns(view: ProjectIndex, owner: ClassRef, method: MethodFacts) -> bool:
    """Does FWD001 report this ``def`` in this project (so FWD002 need not report its calls)?"""
    if not view.holds(owner.file.path) or is_suppressed(owner.file.noqa, method.line, "FWD001"):
        return False
    return not method.name.startswith("_") or method.name not in analysis_for(view, owner).called_names()


def registration(site: WrapSite, method: str) -> str:
    """How to register ``method`` after ``site``, as the message says it."""
    if site.kind == "fabric":
        return f"{site.var}.{contract.MARK_METHOD_CALL}('{method}')"
    if site.kind == "fsdp2":
        return f"{contract.FSDP_REGISTER_CALL}({site.var}, '{method}')"
    return f"{contract.MARK_METHOD_CALL}({site.var}, '{method}') from {contract.DECORATOR_MODULE}"


def check(view: ProjectIndex, facts: FileFacts) -> Iterator[Diagnostic]:
    for wrapped in facts.wrapped_calls:
        site = facts.wrap_sites[wrapped.site]
        ref = view.find_constructed(site.cls, facts) if site.cls else None
        if ref is None:
            continue
        analysis = analysis_for(view, ref)
        found = analysis.lookup(wrapped.method)
        if found is None:
            continue
        owner, method = analysis.mro[found[0]], found[1]
        if never_entry(method, view.is_lightning_class(ref)) \
                or marks.mark_decorator(view, method, owner.file) is not None:
            continue
        if marks.registers(view, facts, wrapped.site, method.name, ref):
            continue  # registered on this very set-up model
        chain = analysis.chain(wrapped.method)
        if chain is None:
            continue
        # Registered on other set-ups: each set-up needs its own, so this call is reported whoever
        # owns the class. Registered nowhere: a class of the project is FWD001's, at its def.
        elsewhere = marks.registered(view, method.name, ref)
        if not elsewhere and _fwd001_owns(view, owner, method):
            continue
        how = registration(site, wrapped.method) if site.var else f"mark_forward_method(<the wrapper>, '{method.name}')"
        shown = chain_text(chain, facts.path)
        message = (f"{wrapped.text}(...) runs {owner.cls.qualname}.{method.name} outside the wrapper's forward "
                   f"({shown}) on the model set up at line {site.line} ({_SET_UP[site.kind]})")
        set_up = Step(f"{site.var or 'the model'} set up with {_SET_UP[site.kind]}: does not register {method.name}",
                      facts.path, site.line, -1)
        yield Diagnostic(facts.path, wrapped.line, wrapped.col, CODE, message, wrapped.text,
                         f"register it right after the set-up: {how}"
                         + ("; it is registered on other set-ups, and a registration marks only the model it is "
                            "given" if elsewhere else ""), steps=tuple(chain), related=(set_up,))


def fix(context: FixContext, findings: Sequence[Diagnostic],
        options: Mapping[str, str]) -> tuple[list[FileFix], list[Unfixed]]:
    """``--fix``: register each called method after the set-up (imported here: LibCST is loaded
    only when something is fixed)."""
    from lint_rules.rules.fwd002_unmarked_call import fix_register as edit

    return edit.fix(context, findings)
