"""FWD201 compiled-call-in-init-context: a ``torch.compile``d module or function runs inside an init context.

Lightning builds models inside contexts that change how tensors are created:
``fabric.init_module()`` and ``trainer.init_module()`` enter ``_EmptyInit``, a ``TorchFunctionMode``
whose Python ``__torch_function__`` branches on its own state to skip ``torch.nn.init`` (entered even
when ``empty_init`` is off); the Trainer runs ``configure_model`` inside the same mode;
``torch.device("meta")`` is a device context. Running a compiled module or function there makes
Dynamo trace through the mode:

* with torch up to 2.5 it fails at model construction, on every rank, with ``Dynamic control flow
  is not supported`` (Lightning issue #20524);
* with the pinned torch 2.13 and Lightning 2.6.6 it no longer fails (checked with the eager and
  inductor backends, ``fullgraph`` on and off, ``_EmptyInit`` on and off, Fabric's and the
  Trainer's ``init_module``: ``benchmarks/empty_init.py --only repro``), but the graph is
  specialised to the mode and compiled again as soon as the block ends (measured: 2 graphs
  instead of 1), and ``torch.nn.init`` calls inside compiled code are not skipped.

Building (compiling) a module inside the context is fine; *calling* it there is the hazard.

Severity follows the torch installed in the environment the run reads (``--python``; its
``.dist-info``, never imported): torch <= 2.5, the finding is an error (it fails); a newer torch, a
warning (it compiles again, and skips no ``torch.nn.init`` in compiled code); no torch found, an
error (it may fail). The help names the version (``torch 2.13.0+cpu installed: it compiles
again``). JSON ``severity``, SARIF ``level`` and the github annotation's kind carry it.

What is reported
    * A call, inside ``with <x>.init_module(...)``, ``with torch.device("meta")`` or
      ``with _EmptyInit(...)``, of something compiled: a name bound to ``torch.compile(...)``
      (local, module-level, or imported from another file of the project), a function defined
      under ``@torch.compile``, an attribute ``self.x = torch.compile(...)`` of the enclosing
      class, or a method decorated with ``@torch.compile``.
    * Constructing a class, ``Cls.load_from_checkpoint(...)`` or a factory function of the project
      that returns one (``build_task(cfg)``, read from its body or declared return), inside one of
      those contexts when the class's ``__init__`` (through its helper methods and the classes and
      factories they build, any depth, bases included) calls something compiled: reported at the
      call, with the chain (``build_task -> Task.__init__ -> Trunk.__init__ -> Stem.__init__ ->
      self.conv(...) at line N``). The context may be held in a variable (``ctx =
      fabric.init_module(); with ctx:``). The same
      when the compiled module or function is handed to the constructor (``Net(stem)`` with
      ``stem = torch.compile(Stem())``, or ``Net(torch.compile(Stem()))``) and ``__init__`` calls
      that parameter, directly or through the attribute it is kept in (``self.stem = stem``, then
      ``self.stem(x)``, also from helper methods).
    * A LightningModule's ``configure_model`` that calls something compiled (directly or through
      helper methods): the Trainer always runs it inside ``_EmptyInit``.

Not reported
    Compiling inside a context (``self.block = torch.compile(Block())``), compiled calls after the
    block ends, ``fabric.load(path, state)`` (it restores state into objects already built and
    constructs nothing: Lightning 2.6.6's ``Fabric.load``), calls whose callee the project cannot
    resolve, and ``runtime_shim.empty_init()`` blocks: its mode decides by the function alone (no
    branch on its own state) and is not entered at all when disabled. When enabled it is still a
    mode, so on torch 2.13 a graph compiled inside it is, like any, compiled again after the block;
    that costs time once and never fails.

Fix (by hand, named in the message)
    Call the compiled module after the ``with`` block (move shape probes or warm-up calls out of
    ``__init__``/``configure_model`` into the first step or a separate method), or build the model
    under ``runtime_shim.empty_init()``, which skips parameter initialisation like ``_EmptyInit``
    but enters no mode when disabled and branches on nothing inside ``__torch_function__``.

Real code
    Not found in the 11 packages of ``benchmarks/hazard_labels.tsv`` (Lightning, litgpt,
    transformers, diffusers, timm, torchao, peft, accelerate, deepspeed, unsloth, liger-kernel):
    compiled modules are created in ``__init__`` or after the ``init_module`` block, never called
    inside one. 25 near-misses are labelled and stay silent. The pattern is user code (Lightning
    #20524); the fixtures and ``tests/runtime/test_hazard_agreement.py`` are its evidence.
"""

from __future__ import annotations

import re
from typing import Iterator, Optional

from lint_rules import contract
from lint_rules.diagnostics import Chain, Diagnostic, Step, chain_text
from lint_rules.facts.model import COMPILE, SRC_CALL, SRC_PARAM, FileFacts, InitCall
from lint_rules.project import ClassRef, ProjectIndex
from lint_rules.rules.base import Invalid, Valid

CODE = "FWD201"
NAME = "compiled-call-in-init-context"

#: How deep helper methods are followed from ``__init__``/``configure_model``.
MAX_DEPTH = 32

VALID = (
    Valid("""
import torch
import torch.nn as nn
from runtime_shim import empty_init


class Block(nn.Module):
    def forward(self, x):
        return x


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = torch.compile(Block())      # compiling is fine

    def forward(self, x):
        return self.block(x)


def main(fabric):
    with fabric.init_module(empty_init=True):
        model = Model()
    model(torch.zeros(2))                        # after the block: fine
    with empty_init():
        other = Model()
        other(torch.zeros(2))
"""),
)

INVALID = (
    Invalid("""
import torch
import torch.nn as nn
import lightning as L


class Block(nn.Module):
    def forward(self, x):
        return x


class Probe(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = torch.compile(Block())
        self._infer_shapes()

    def _infer_shapes(self):
        self.out = self.block(torch.zeros(1, 4)).shape


class Lit(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.block = torch.compile(Block())

    def configure_model(self):  # expect: FWD201 "Lit.configure_model runs compiled self.block"
        self.block(torch.zeros(1, 4))


def main(fabric):
    fast = torch.compile(Block())
    with fabric.init_module(empty_init=True):
        fast(torch.zeros(1, 4))  # expect: FWD201 "compiled `fast` is called inside fabric.init_module()"
        probe = Probe()  # expect: FWD201 "Probe.__init__ -> _infer_shapes -> self.block(...)"
"""),
)


def _compiled_name(view: ProjectIndex, facts: FileFacts, callee: str) -> bool:
    """A module-level name bound to torch.compile, here or in the module it is imported from."""
    if callee in facts.compiled:
        return True
    module, _, name = callee.rpartition(".")
    if not module:
        return False
    if module == facts.module:
        return name in facts.compiled
    target = view.module(module)
    return target is not None and name in target.compiled


def _compiled_member(view: ProjectIndex, ref: ClassRef, name: str) -> bool:
    """``self.<name>``: an attribute assigned ``torch.compile(...)`` or a ``@torch.compile`` method."""
    for item in view.mro(ref):
        for attr, sources in item.cls.attrs:
            if attr == name and any(s.kind == SRC_CALL and s.ref == COMPILE for s in sources):
                return True
        for method in item.cls.methods:
            if method.name == name and COMPILE in method.decorators:
                return True
    return False


def _owner(view: ProjectIndex, ref: ClassRef, method: str) -> Optional[ClassRef]:
    """The class in the MRO that defines ``method``."""
    return next((item for item in view.mro(ref) if any(m.name == method for m in item.cls.methods)), None)


def _shown(call: InitCall, file: FileFacts) -> Step:
    return Step(f"{call.callee}(...)", file.path, call.line, call.col, cited=True)


def _method_step(view: ProjectIndex, ref: ClassRef, method: str, what: str) -> Step:
    """A step naming ``method`` of ``ref`` (as ``what``), located at its ``def`` when the MRO has one."""
    owner = _owner(view, ref, method)
    found = next((m for m in owner.cls.methods if m.name == method), None) if owner is not None else None
    if owner is None or found is None:
        return Step(what)
    return Step(what, owner.file.path, found.line, found.col)


def _through(callee: list[str], call: InitCall, file: FileFacts) -> list[Step]:
    """The factory a construction goes through (``_constructed``), at the call."""
    return [Step(name, file.path, call.line, call.col) for name in callee]


def reaches_compiled(view: ProjectIndex, ref: ClassRef, method: str, seen: Optional[set[tuple]] = None,
                     depth: int = 0, passed: frozenset[str] = frozenset()) -> Optional[Chain]:
    """The chain from ``method`` to a compiled call (``["_probe", "self.block(...) at line 9"]``),
    through helper methods and the classes they build (``["Trunk.__init__", "Stem.__init__", ...]``).
    ``passed``: what holds a compiled argument of this construction (``_passed_in``): parameters of
    ``__init__`` by name, attributes as ``self.<name>``."""
    seen = set() if seen is None else seen
    owner = _owner(view, ref, method)
    if owner is None or (ref.key, method) in seen or depth > MAX_DEPTH:
        return None
    seen.add((ref.key, method))
    scope = f"{owner.cls.qualname}.{method}"
    for call in owner.file.init_calls:
        if call.scope != scope:
            continue
        if call.callee.startswith("self."):
            name = call.callee[5:]
            if _compiled_member(view, ref, name) or call.callee in passed:
                return [_shown(call, owner.file)]
            deeper = reaches_compiled(view, ref, name, seen, depth + 1, passed)
            if deeper is not None:
                return [_method_step(view, ref, name, name), *deeper]
        elif _compiled_name(view, owner.file, call.callee) or (method == "__init__" and call.callee in passed):
            return [_shown(call, owner.file)]
        else:  # a class built here, or by a factory called here: its constructor runs here too
            built, through = _constructed(view, call.callee, owner.file)
            deeper = reaches_compiled(view, built, "__init__", seen, depth + 1) if built is not None else None
            if built is not None and deeper is not None:
                return [*_through(through, call, owner.file),
                        _method_step(view, built, "__init__", f"{built.cls.qualname}.__init__"), *deeper]
    return None


def _passed_in(view: ProjectIndex, built: ClassRef, call: InitCall, origin: FileFacts,
               keywords_only: bool = False) -> dict[str, str]:
    """The compiled arguments of a construction: the ``__init__`` parameter each fills, and the
    attributes of self assigned from those parameters (``self.stem = stem``), each -> the name
    the caller passed. ``keywords_only``: ``load_from_checkpoint``, whose positional arguments
    are its own (the checkpoint) and whose keywords go to ``__init__``."""
    owner = _owner(view, built, "__init__")
    if owner is None:
        return {}
    params = owner.cls.init_params
    found: dict[str, str] = {}
    for slot, what in call.arguments:
        if keywords_only and slot.isdigit():
            continue
        name = params[int(slot)] if slot.isdigit() and int(slot) < len(params) else slot
        if name in params and (what == COMPILE or _compiled_name(view, origin, what)):
            found[name] = what.rpartition(".")[2] if what != COMPILE else name
    for item in view.mro(built):
        for attr, sources in item.cls.attrs:
            passed = next((found[s.param] for s in sources if s.kind == SRC_PARAM and s.param in found), None)
            if passed is not None:
                found.setdefault(f"self.{attr}", passed)
    return found


def _constructed(view: ProjectIndex, callee: str, origin: FileFacts) -> tuple[Optional[ClassRef], list[str]]:
    """The class a call builds, and the factory function it goes through (``build_model(cfg)``:
    the module class its body or declared return says it returns), if any."""
    found = view.find_class(callee, origin)
    if found is not None:
        return found, []
    built = view.factory_class(callee, origin)
    return (built, [callee.rpartition(".")[2]]) if built is not None else (None, [])


#: The last torch whose Dynamo fails on the hazard (Lightning #20524); 2.13.0 no longer does
#: (``benchmarks/empty_init.py --only repro``, with Lightning 2.6.6).
LAST_FAILING_TORCH = (2, 5)


def _torch(view: ProjectIndex) -> tuple[Optional[str], str]:
    """(the installed torch's version or None, the severity it makes): a torch that fails here makes
    an error; one that only compiles again, a warning; an unknown one, an error (it may fail)."""
    version = view.installed_version("torch")
    numbers = re.match(r"(\d+)\.(\d+)", version or "")
    if numbers is None:
        return None, "error"
    return version, "error" if (int(numbers[1]), int(numbers[2])) <= LAST_FAILING_TORCH else "warning"


def _advice(context: str, version: Optional[str], severity: str) -> str:
    how = (f"inside {context} Dynamo traces through Lightning's TorchFunctionMode or a device context: "
           f"torch <= {'.'.join(map(str, LAST_FAILING_TORCH))} fails with 'Dynamic control flow is not supported' "
           f"at model construction, on every rank; newer torch compiles a graph for the mode that is compiled again "
           f"after the block, and does not skip torch.nn.init inside it")
    if version is not None:
        how += f" (torch {version} installed: it {'fails' if severity == 'error' else 'compiles again'})"
    return (f"{how}; call the compiled code after the block, or build under {contract.DECORATOR_MODULE}.empty_init(), "
            f"which enters no mode when disabled and branches on nothing inside __torch_function__")


def _context_call(view: ProjectIndex, facts: FileFacts, call: InitCall) -> Optional[tuple[str, Chain]]:
    """The message for a call inside an init context that runs compiled code (``_advice`` is its help),
    and the chain it shows."""
    if call.callee.startswith("self."):
        cls = facts.class_named(call.scope.rpartition(".")[0])
        if cls is not None and _compiled_member(view, ClassRef(facts, cls), call.callee[5:]):
            return f"compiled `{call.callee}` is called inside {call.context}", []
        return None
    if call.local or _compiled_name(view, facts, call.callee):
        name = call.callee.rpartition(".")[2]
        return f"compiled `{name}` is called inside {call.context}", []
    found, through = _constructed(view, call.callee, facts)
    loading = found is None and call.callee.endswith(".load_from_checkpoint")
    if loading:
        found = view.find_class(call.callee.rpartition(".")[0], facts)
    if found is None:
        return None
    passed = {} if through else _passed_in(view, found, call, facts, keywords_only=loading)
    chain = reaches_compiled(view, found, "__init__", passed=frozenset(passed))
    if chain is None:
        return None
    chain = [*_through(through, call, facts), _method_step(view, found, "__init__", f"{found.cls.qualname}.__init__"),
             *chain]
    callee = chain[-1].what.split("(")[0]
    runs = f"the compiled `{passed[callee]}` passed to it" if callee in passed else "compiled code"
    shown = chain_text(chain, facts.path)
    return f"building {found.cls.qualname} inside {call.context} runs {runs} ({shown})", chain


def check(view: ProjectIndex, facts: FileFacts) -> Iterator[Diagnostic]:
    version, severity = _torch(view)
    for call in facts.init_calls:
        if call.context:
            problem = _context_call(view, facts, call)
            if problem is not None:
                yield Diagnostic(facts.path, call.line, call.col, CODE, problem[0], call.callee,
                                 _advice(call.context, version, severity), severity, steps=tuple(problem[1]))
    for cls in facts.classes:
        method = next((m for m in cls.methods if m.name == "configure_model"), None)
        ref = ClassRef(facts, cls)
        if method is None or not view.is_lightning_class(ref):
            continue
        chain = reaches_compiled(view, ref, "configure_model")
        if chain is not None:
            what = chain_text(chain, facts.path)
            yield Diagnostic(facts.path, method.line, method.col, CODE,
                             f"{cls.qualname}.configure_model runs compiled {chain[-1].what.split('(')[0]} ({what})",
                             f"{cls.qualname}.configure_model",
                             f"the Trainer calls configure_model inside _EmptyInit, and "
                             f"{_advice('_EmptyInit', version, severity)}", severity, steps=tuple(chain))
