"""FWD001 unmarked-forward-entry: a module method runs forward computation but is not marked.

Distributed wrappers (DDP, FSDP, Lightning Fabric) only see calls that go through the
wrapper's ``forward``. A method such as ``generate`` that calls ``self(...)`` or a submodule
runs the model behind the wrapper's back: under DDP gradients silently stop being synchronised
across ranks, under FSDP1 parameters are still sharded ("mat2 must be a matrix"), Fabric raises
only at run time. Mark such methods so ``runtime_shim`` (or Fabric) routes them through the wrapper::

    from runtime_shim import forward_entry

    class GPT(nn.Module):
        @forward_entry
        def generate(self, idx): ...

or, for classes you cannot edit, register the method on every set-up model with its wrapper's API:
``fabric_model.mark_forward_method("generate")`` after ``fabric_model = fabric.setup(model)``,
``register_fsdp_forward_method(model, "generate")`` after FSDP2's ``fully_shard(model)``, or
``runtime_shim.mark_forward_method(ddp, "generate")`` for DDP, FSDP1 and FSDP2. The help names the
registration of the wrappers the project sets the class up with, and every option when it sets
it up nowhere fwdlint sees.

What is checked
    Module classes: those whose bases, read from the project and the installed packages of the
    environment fwdlint reads (torch's own sources too), reach ``torch.nn.Module``, under any
    import style or alias and through any base (``LightningModule``, ``PreTrainedModel``,
    ``torch.nn.modules.loss._Loss``); and those deriving from a class named in the
    ``module-bases`` option. Plain classes that an analysed module class inherits (mixins such as
    ``GenerationMixin``) are checked too: their methods run on modules. Where a verdict depends
    on a name that cannot be read there, FWD005 says so (its documentation is the policy).

What counts as computation
    ``self(...)``, ``self.forward(...)``, ``self.__call__(...)``, ``super().forward(...)``; calling a
    submodule: ``self.enc(x)``, ``self.enc.forward(x)``, ``self.blocks[i](x)``,
    ``for blk in self.blocks: blk(x)``, ``self.heads["a"](x)``, ``self.mods.encoder(x)`` on a
    ``ModuleDict``, ``m = self.enc; m(x)``, ``model = self if fsdp is None else fsdp; model(x)``,
    ``checkpoint(self.block, x)``, the elements of a plain list whose modules are registered under
    computed names (``for i, b in enumerate(blocks): self.add_module(f"b{i}", b)``, then
    ``self.blocks = blocks``); calling a computing method of a submodule (``self.vae.encode(x)``,
    ``for layer in self.layers: layer.encode(x)``, ``self.model.quantizer.decode(x)``,
    ``self.get_base_model().generate(...)``), judged by the submodule's class wherever it is
    defined (the project or an installed package, see ``--python``) and, when that method is
    abstract, by the subclasses that implement it; handing self or a submodule to a function that
    runs it (``generate_fn(model=self.model)``, ``calibrate(self.model, data)``, at any depth,
    module-level functions of any file, methods and static methods (``self._run(self.model, x)``),
    a base's method in any file (``super().encode(obs, self.enc)``), class-level aliases such as
    ``decode = decode_function``);
    handing a computing method over as a callback to a function that calls it
    (``multi_apply(self.loss_single, feats)``). Reached directly or through other methods of the
    class and its bases (any depth, recursion allowed; an abstract helper through its overrides),
    including nested functions, lambdas and comprehensions. See ``lint_rules/class_members.py`` for
    what makes an attribute a submodule: its type first, the union of what the class, its bases
    and its subclasses anywhere in the project assign to it (classes, factories and the functions
    that build it are read, installed ones included; ``self.enc = load_model(path)`` has the class
    ``load_model`` returns, so ``self.enc.blocks(x)`` is judged by that class); a function or a
    class stored as an attribute, or an object of a class that is not a module (matchers,
    tokenizers, samplers), never is; only when the type is unknown by nature (an unannotated
    constructor argument, a registry's build), module methods used on it (``.eval()``,
    ``.parameters()``, ``.to()``) or the class's own ``forward`` calling it make it one. A method
    called on such a module is computation if a module class of the project defines a method of
    that name that computes, or, last, if its name is one of the conventions listed in
    ``lint_rules/vocabulary.py`` (``generate``, ``encode``, ``forward_*``). Self or a submodule
    handed to a plain object that keeps it and runs it from its methods (``BeamSearch(self)
    .search(x)``, ``self.searcher = BeamSearch(self)`` then ``self.searcher.search(x)``, a function
    that builds one) counts as well. A helper that branches on a parameter
    (``if mode == "encode": return self.encoder(x)``, ``if not return_loss: return w``, the rest of
    a block after ``if kind not in (...): return``) computes for a caller only on the branches the
    caller's constant arguments, or the parameter's constant default, can take:
    ``self._step(None, "norm")`` is clean; a caller that passes a variable, or a body that rebinds
    the parameter, takes every branch.

Never reported
    ``forward``, ``__call__`` and other dunders; static and class methods; properties (they
    cannot be routed); ``training_step``/``validation_step``/``test_step``/``predict_step`` on
    LightningModule subclasses (Lightning routes them); private helpers (leading underscore)
    called from another method of the class, its bases or subclasses; marked methods.

What counts as a mark
    Only what the runtime honours. ``@forward_entry`` or ``@inference_entry`` from ``runtime_shim``
    (resolved through the file's imports: a look-alike of the same name from elsewhere is no
    mark), or your own decorators named in ``mark-decorators`` (they must apply
    ``forward_entry``). Importing ``runtime_shim`` is what makes a decorator take effect: from
    then on DDP, FSDP1, FSDP2 and Fabric wrappers route marked methods, with nothing else to
    enable. A decorator marks the class. A registration marks the one model it is given:
    ``model.mark_forward_method("name")`` after ``fabric.setup``, ``runtime_shim``'s
    ``mark_forward_method(model, "name")`` or ``mark_forward_method(model, model.name)``, FSDP2's
    ``register_fsdp_forward_method(model, "name")``. So a method marked only by registrations is
    marked only if every set-up of its class (or a subclass) in the project's files (``DDP(...)``,
    ``FSDP(...)``, ``fully_shard(...)``, ``fabric.setup(...)``, ``accelerator.prepare(...)``)
    registers it, right after the set-up or on the model before it in the same file; otherwise
    the message names the set-ups that register it and those that do not (``file:line``, at most
    three of each, then "and N more"), and FWD002 reports the calls on the ones that do not. A
    project with registrations of the class and no set-up of it that fwdlint can see (the model is
    set up in a function of another package) keeps them as marks. A registration whose model's
    class the registering file cannot tell (``mark_forward_method(wrapper, "name")`` on a
    function's parameter) marks the method by name only when it is the only information: when the
    project sets the class up nowhere fwdlint sees; a set-up of the class that registers nothing is
    reported. FWD003 reports marks that fail or do nothing.

Fix (``--fix``; the ``style`` option, ``--fix-style``)
    ``decorator`` (default): ``@forward_entry`` on the method, and its import
    (``fix_decorator``); a class attribute alias becomes ``decode = forward_entry(decode_function)``,
    which is what the decorator does. ``call``: for classes you do not want to edit, a registration right
    after every set-up of a model of the class in the project, once one of them calls the method
    or registers it (``fix_call``); where a set-up cannot be edited by the run (a file it was not
    given, no variable, no room after the statement) the finding is not fixed, saying where.
    Generators and ``async`` methods are never decorated: the decorator refuses them when the class
    is defined.

A function bound as a class attribute (``decode = decode_function``) is a method: reported at the
assignment when the function runs the instance it is given, marked by ``decode =
forward_entry(decode_function)``. Public helpers called from forward (timm's ``forward_features``,
a VAE's ``encode``) are reported: they are public API, and calling them on a wrapped model bypasses the wrapper just
the same. Functional use of a module's own parameters (``F.linear(x, self.weight)``) is not
detected.

Helpers the project calls only from ``forward``
    When every call of the method in the project's own files (and every place that hands it
    over: ``apply_chunking_to_forward(self.ff_chunk, x)``, ``getattr(self, "ff_chunk")``) is in a
    ``forward``, directly or through other methods called only from ``forward``, the message
    ends its chain with "called in this project only from ``BertLayer.forward``". Such a method
    runs inside the wrapper as the project uses it, and is still an entry for anyone who calls it
    on a wrapped model. ``forward-helpers = "skip"`` (``--forward-helpers skip``,
    ``--fwd-forward-helpers skip`` in flake8) leaves them out; the default is ``report``. Calls
    are matched by method name (a ``tokenizer.encode(...)`` elsewhere counts against a VAE's
    ``encode``: the rule then claims less, never more). Not seen: calls in files with neither
    ``class`` nor ``def`` (module-level scripts), another object's method handed over without a
    call (``run(model.encode)``), and callers outside the project: a method that a base class
    outside the project defines (``prepare_inputs_for_generation``) never gets the phrase.
"""

from __future__ import annotations

from typing import Iterator, Mapping, Optional, Sequence

from lint_rules import contract, marks
from lint_rules.computation import ClassAnalysis, analysis_for, never_entry
from lint_rules.diagnostics import Diagnostic, Step, chain_text
from lint_rules.facts.model import DYNAMIC_CALL, SELF_CALL, SUPER_CALL, ClassFacts, FileFacts
from lint_rules.fix.result import FileFix, FixContext, Unfixed
from lint_rules.marks import SetUp
from lint_rules.project import ClassRef, ProjectIndex
from lint_rules.rules.base import Invalid, Valid

CODE = "FWD001"
NAME = "unmarked-forward-entry"
FIX_OPTIONS = {"style": ("decorator", "call")}
_MIXIN_EVIDENCE = frozenset({SELF_CALL, SUPER_CALL, DYNAMIC_CALL})

VALID = (
    Valid("""
import torch.nn as nn
from runtime_shim import forward_entry

class GPT(nn.Module):
    def forward(self, x):
        return self.head(x)

    @forward_entry
    def generate(self, x):
        return self(x)
"""),
    Valid("""
import lightning as L

class Lit(L.LightningModule):
    def training_step(self, batch, idx):
        return self(batch)

    def _shared(self, x):
        return self(x)

    def validation_step(self, batch, idx):
        return self._shared(batch)
"""),
    Valid("""
import torch.nn as nn

class Net(nn.Module):
    def __init__(self, tokenizer):
        super().__init__()
        self.tokenizer = tokenizer
        self.proj = nn.Linear(2, 2)

    def reset(self):
        self.proj.reset_parameters()

    def tokenize(self, text):
        return self.tokenizer(text)
"""),
    Valid("""
import torch.nn as nn

class Matcher:
    def __call__(self, quality):
        return quality

class Head(nn.Module):
    def __init__(self, matcher=None):
        super().__init__()
        self.matcher = matcher if matcher is not None else Matcher()

    def forward(self, x):
        return self.matcher(x)

    def compute_loss(self, x):
        return self.matcher(x)
"""),
    Valid("""
class NotAModule:
    def generate(self, x):
        return self(x)
"""),
)

INVALID = (
    Invalid("""
import torch.nn as nn

def generate_fn(model, ids):
    return model(ids)

class LM(nn.Module):
    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def generate(self, ids):  # expect: FWD001 "generate -> generate_fn(model=self.model, ...) at line 12 -> model(...)"
        return generate_fn(model=self.model, ids=ids)
"""),
    Invalid("""
import torch.nn as nn

class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([nn.Linear(2, 2)])

    def forward(self, x):
        return x

    def generate(self, x):  # expect: FWD001 "(generate -> _sample -> blk(...) with blk from self.blocks at line 16)"
        return self._sample(x)

    def _sample(self, x):
        for blk in self.blocks:
            x = blk(x)
        return x
"""),
    Invalid("""
from torch import nn

class VAE(nn.Module):
    def __init__(self, enc: nn.Module):
        super().__init__()
        self.enc = enc

    def encode(self, x):  # expect: FWD001 "(encode -> self.enc.forward(...) at line 9) but is not marked"
        return self.enc.forward(x)

    @property
    def latent(self):
        return self.enc(None)
"""),
)


def _may_compute_alone(cls: ClassFacts) -> bool:
    """A plain class can only hold an entry point if it calls ``self`` itself (a mixin such as
    GenerationMixin); checking this first spares resolving every class's subclasses."""
    return any(use.kind in _MIXIN_EVIDENCE for method in cls.methods for use in method.uses)


def check(view: ProjectIndex, facts: FileFacts) -> Iterator[Diagnostic]:
    for cls in facts.classes:
        ref = ClassRef(facts, cls)
        if not (view.is_module_class(ref) or (_may_compute_alone(cls) and view.is_module_mixin(ref))):
            continue
        analysis = analysis_for(view, ref)
        lightning = view.is_lightning_class(ref)
        called: set[str] | None = None
        for method in cls.methods:
            if never_entry(method, lightning) or marks.is_marked(view, method, facts, ref):
                continue
            chain = analysis.chain(method.name)
            if chain is None:
                continue
            if method.name.startswith("_"):
                called = analysis.called_names() if called is None else called
                if method.name in called:
                    continue
            evidence = chain_text(chain, facts.path)
            callers = _called_only_from_forward(view, analysis, method.name)
            if callers is not None:
                if view.config.forward_helpers == "skip":
                    continue
                own = {item.cls.qualname for item in analysis.mro}  # its own class's forward first
                callers.sort(key=lambda owner: (owner.rpartition(".")[0] not in own, owner))
                shown = ", ".join(callers[:2]) + (f" and {len(callers) - 2} more" if len(callers) > 2 else "")
                evidence += f"; called in this project only from {shown}"
            message = contract.unmarked_entry_message(cls.qualname, method.name, evidence)
            set_ups = marks.set_ups(view, method.name, ref)
            if marks.registered(view, method.name, ref):
                message += _registered_on_some(set_ups)
            yield Diagnostic(facts.path, method.line, method.col, CODE, message, f"{cls.qualname}.{method.name}",
                             contract.unmarked_entry_help(method.name, [s.site.kind for s in set_ups]),
                             steps=tuple(chain), related=tuple(set_up_step(s, method.name) for s in set_ups))


#: How many set-ups a message names on each side before it says "and N more".
SHOWN_SET_UPS = 3
WRAPPER_NAMES = {"fabric": "fabric.setup", "fsdp2": "fully_shard", "ddp": "DDP", "fsdp1": "FSDP",
                 "accelerate": "accelerator.prepare"}


def _set_ups_text(set_ups: Sequence[SetUp]) -> str:
    shown = [f"{s.where} ({WRAPPER_NAMES.get(s.site.kind, s.site.kind)})" for s in set_ups[:SHOWN_SET_UPS]]
    more = len(set_ups) - len(shown)
    return ", ".join(shown) + (f" and {more} more" if more > 0 else "")


def set_up_step(set_up: SetUp, method: str) -> Step:
    """A set-up site of the class as a related location: which wrapper, and whether it registers ``method``."""
    wrapper = WRAPPER_NAMES.get(set_up.site.kind, set_up.site.kind)
    does = "registers" if set_up.registered else "does not register"
    return Step(f"{set_up.site.var or 'the model'} set up with {wrapper}: {does} {method}", set_up.file.path,
                set_up.site.line, -1)


def _registered_on_some(set_ups: Sequence[SetUp]) -> str:
    """What the message adds when the method is registered, but not on every set-up of its class:
    a registration marks the one model it is given."""
    done = [s for s in set_ups if s.registered]
    missing = [s for s in set_ups if not s.registered]
    registered = (f"registered on the set-up{'s' if len(done) != 1 else ''} at {_set_ups_text(done)}" if done
                  else "registered on a model of the class")
    return (f"; {registered}, not on the set-up{'s' if len(missing) != 1 else ''} at {_set_ups_text(missing)} "
            f"(a registration marks only the model it is given)")


def _called_only_from_forward(view: ProjectIndex, analysis: ClassAnalysis, name: str) -> Optional[list[str]]:
    """The ``forward`` methods that call method ``name``, if in the project's own files every call
    of a method of that name (or handing it over) is in a ``forward``, directly or through methods
    called only from ``forward``s. None if any is elsewhere (a function, a script, a method not
    itself called only from forwards), if none is seen (public API that the project itself does
    not call), or if a base outside the project defines the method (its callers there are not
    read). Methods that call one another (``compile`` calling ``teacher.compile``) are judged as
    one group: called only from forwards if everything outside the group that calls into it is,
    and something does."""
    for item in analysis.mro[1:]:
        if not view.holds(item.file.path) and any(method.name == name for method in item.cls.methods):
            return None
    found = view.derived.setdefault("forward callers", {})  # the same for every class with such a method
    reads = view.reads
    if reads is not None:
        reads.reused("forward callers", name)
    if name not in found:
        start = reads.begin() if reads is not None else 0
        found[name] = _forward_callers(view, name)
        if reads is not None:
            reads.done("forward callers", name, start)
    return list(found[name]) if found[name] is not None else None


def _forward_callers(view: ProjectIndex, name: str) -> Optional[list[str]]:
    callers: dict[str, set[str]] = {}  # method name -> names of the methods (not forwards) that call it
    forwards: dict[str, set[str]] = {}  # method name -> the forwards that call it
    todo = [name]
    while todo:
        current = todo.pop()
        callers[current], forwards[current] = set(), set()
        owners = view.callers_of(current)
        if not owners:
            return None
        for owner in owners:
            cls, _, method = owner.rpartition(".")
            if not cls or "<locals>" in cls:  # module-level code, a function, a class inside a function
                return None
            if method == "forward":
                forwards[current].add(owner)
            else:
                callers[current].add(method)
                if method not in callers and method not in todo:
                    todo.append(method)
    if not _entered_only_from_forwards(name, callers, forwards):
        return None
    return sorted(set().union(*forwards.values()))


def _entered_only_from_forwards(name: str, callers: dict[str, set[str]], forwards: dict[str, set[str]]) -> bool:
    """Tarjan's strongly connected components over "is called by", callers' groups first: a group
    is entered only from forwards if every method outside it that calls into it is, and a forward
    or such a method calls into it."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    good: dict[str, bool] = {}

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for caller in callers[node]:
            if caller not in index:
                visit(caller)
                low[node] = min(low[node], low[caller])
            elif caller in stack:
                low[node] = min(low[node], index[caller])
        if low[node] == index[node]:
            group = set(stack[stack.index(node):])
            del stack[stack.index(node):]
            outside = {caller for member in group for caller in callers[member]} - group
            entered = bool(outside) or any(forwards[member] for member in group)
            good.update(dict.fromkeys(group, entered and all(good[caller] for caller in outside)))

    visit(name)
    return good[name]


def fix(context: FixContext, findings: Sequence[Diagnostic],
        options: Mapping[str, str]) -> tuple[list[FileFix], list[Unfixed]]:
    """``--fix``: the style's edit (imported here: LibCST is loaded only when something is fixed)."""
    if options.get("style") == "call":
        from lint_rules.rules.fwd001_unmarked_entry import fix_call

        return fix_call.fix(context, findings)
    from lint_rules.rules.fwd001_unmarked_entry import fix_decorator

    return fix_decorator.fix(context, findings)
