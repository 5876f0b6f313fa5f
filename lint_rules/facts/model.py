"""What one file says, as plain data: the output of the single ``ast`` pass over a file.

Everything here is a ``NamedTuple`` of strings, ints and tuples, so facts can cross process
boundaries (``-j N``), be stored as JSON in the facts store (``codec.py``), and be shared by the
CLI, the flake8 plugin and the fixers. Nothing in this module knows about other files: names are
resolved through the file's own imports only; the project view (``project.py``) does the
cross-file work. A new record or field needs nothing else to be stored but a run of
``python -m lint_rules.facts.codec_generator``, which writes the converters from the annotations
(``str``, ``int``, ``bool``, records and tuples of these).
"""

from __future__ import annotations

from typing import NamedTuple

from lint_rules.vocabulary import DESCRIPTORS  # noqa: F401 -- the rules import it from here

# Kinds of `Use`, i.e. of things a method body does that may be module computation.
SELF_CALL = "self"  # self(...), self.forward(...), self.__call__(...), Cls.forward(self, ...)
SUPER_CALL = "super"  # super().name(...): forward -> computation, else an edge to a base method
ATTR_CALL = "attr"  # self.name(...): a method call (edge) or a submodule call
SUB_CALL = "sub"  # self.name.forward(...), self.name[i](...), loop/alias over self.name, checkpoint(...)
SUB_METHOD = "submethod"  # self.name.meth(...): computation if meth computes on name's class
RESULT_CALL = "result"  # self.name()(...): calls what method `name` returns (get_encoder()(x))
SUB_RESULT = "subresult"  # self.name.meth()(...): calls what a submodule's method returns
PASS_CALL = "pass"  # fn(self.enc, ...): hands self ("" name) or a submodule to a function; method = "ref#slot"
# self.layers[i].meth(...), `for l in self.layers: l.meth(...)`, self.a.b.meth(...): name is the path
# ("layers[]", "a.b", "[]" for a child of self)
ELEMENT_METHOD = "elemmethod"
RESULT_METHOD = "resultmethod"  # self.getter().meth(...): name is the getter
DYNAMIC_CALL = "dynamic"  # getattr(self, computed_name)(...): dispatch by a name quoted in the file
# self.codebooks, layer.codebook (layer from self.layers): an attribute read, not called; if it is a
# property, its getter runs. method: the attribute; name: "" for self, else what holds it ("layers[]", "vae")
READ = "read"

# Kinds of `Source`, i.e. of values assigned to a ``self.<attr>``.
SRC_CALL = "call"  # result of calling `ref` (a class, a factory, X.from_pretrained)
SRC_PARAM = "param"  # a parameter of the method; `ref` is its annotation ("" if none)
SRC_PARAM_CALL = "paramcall"  # calling a parameter; `ref` is its default or annotation ("" if none)
SRC_ATTR = "attr"  # another attribute of self; `ref` is its name
SRC_MODULE = "module"  # registered through add_module/register_module: a module by contract
SRC_ANNOTATION = "annotation"  # class-level annotation `enc: nn.Module`; `ref` is the annotation
SRC_REF = "ref"  # a name that is not called (`self.sim = box_iou`); `ref` is what it resolves to
SRC_ELEMENT = "element"  # a class constructed into a container (`ModuleList([Block()...])`, `.append(Block())`)
SRC_RESULT = "result"  # what a method of self returns (`self.layers = self._make_layers()`); `ref` its name
SRC_NOT_MODULE = "value"  # literal, lambda, list, tensor factory...: never a module
SRC_UNKNOWN = "unknown"  # a value whose type the file does not tell

# Names facts hold that rules compare against (here, not in the collectors, so that rules and a
# warm run import no collector; DESCRIPTORS, from the vocabulary, likewise).
#: The compiler whose calls and decorators FWD201 follows (``torch.compile``, PyTorch 2.0+).
COMPILE = "torch.compile"


#: Every false constant as ``guards.constant`` spells it (False, 0 and 0.0 all "0").
_FALSY = frozenset({"None", "0", "''", "b''"})


class Guard(NamedTuple):
    """A test of one of the method's parameters against constants that a use runs under
    (``if mode == "loss":``, ``if not return_loss:``, the rest of a block after ``if x is None:
    return``). A caller that passes a constant there decides it (``Use.arguments``)."""

    param: str
    position: int  # among the positional parameters after self; -1 for a keyword-only one
    test: str  # "in", "not in", "truthy" or "falsy"
    values: tuple[str, ...] = ()  # the constants compared with, as ``repr`` gives them
    default: str = ""  # the parameter's default when it is a constant (``repr``), else ""

    def admits(self, value: str) -> bool:
        """Can the use run when the parameter is the constant ``value`` (a ``repr``)?"""
        if self.test in ("truthy", "falsy"):
            return (value not in _FALSY) == (self.test == "truthy")
        return (value in self.values) == (self.test == "in")


class Use(NamedTuple):
    kind: str
    name: str  # the attribute or method name ("" for SELF_CALL)
    line: int
    text: str  # how it is shown in an evidence chain, e.g. "self.enc(...)"
    method: str = ""  # for SUB_METHOD: the method called on the submodule
    guards: tuple[Guard, ...] = ()  # tests of the method's parameters it runs under (all of them hold)
    # ATTR_CALL: the call's arguments by slot ("0", or the keyword) with their constant values
    # (``repr``; "" for any other value); ("*", "") when it unpacks some
    arguments: tuple[tuple[str, str], ...] = ()
    col: int = 0  # 0-based column of the use where ``line`` is given (an evidence step's location)


class Source(NamedTuple):
    kind: str
    ref: str = ""
    # SRC_PARAM: the parameter's name; SRC_CALL: self or submodules handed to the call, "slot:attr"
    # comma-separated ("0:" for ``Beam(self)``, "model:enc" for ``Beam(model=self.enc)``)
    param: str = ""

    def handed(self) -> list[tuple[str, str]]:
        """SRC_CALL: (slot, "" for self or the submodule's attribute) for each piece of self handed
        to the call; nothing for other sources."""
        if self.kind != SRC_CALL or not self.param:
            return []
        return [(slot, piece) for slot, _, piece in (handed.partition(":") for handed in self.param.split(","))]


class MethodFacts(NamedTuple):
    name: str
    line: int  # 1-based line of the method's name in its ``def`` line
    col: int  # 0-based column of the method's name
    kind: str  # "method", "staticmethod", "classmethod", "property"
    decorators: tuple[str, ...]  # dotted, resolved through imports where possible
    uses: tuple[Use, ...]
    returns: tuple[str, ...] = ()  # attributes returned as `return self.<attr>`
    generator: bool = False  # the body itself yields
    abstract: bool = False  # @abstractmethod, or a body that only passes or raises NotImplementedError
    # What the method returns, when it builds it: classes or functions called in ``return X(...)``.
    builds: tuple[str, ...] = ()
    asynchronous: bool = False  # ``async def``: its body runs when awaited, like a generator's when iterated


class FunctionFacts(NamedTuple):
    """A module-level function: which of its parameters it runs as a module, and what it returns.

    ``runs`` holds, per parameter used as a module (called, or a method or attribute of it
    called, or handed on to another function), the uses of its body read as if that parameter
    were ``self`` (kind ``param:<index>``). A caller that passes ``self`` or a submodule there
    evaluates those uses against the class of what it passed."""

    name: str
    params: tuple[str, ...]  # positional parameters in order, then keyword-only ones
    runs: tuple[MethodFacts, ...]
    builds: tuple[str, ...] = ()  # classes/functions called in return statements, the return annotation

    def summary(self, slot: str) -> MethodFacts | None:
        """The uses of the parameter a call fills with ``slot``: a position ("0") or a keyword."""
        index = int(slot) if slot.isdigit() else (self.params.index(slot) if slot in self.params else -1)
        kind = f"param:{index}"
        for found in self.runs:
            if found.kind == kind:
                return found
        return None


class ClassFacts(NamedTuple):
    qualname: str  # "Outer.Inner" for nested classes
    bases: tuple[str, ...]  # dotted, resolved through the file's imports
    methods: tuple[MethodFacts, ...]
    attrs: tuple[tuple[str, tuple[Source, ...]], ...]  # self.<attr> -> what was assigned to it
    init_params: tuple[str, ...] = ()  # __init__'s parameters after self: positional ones, then keyword-only


class Mark(NamedTuple):
    """A run-time registration: ``obj.mark_forward_method("name")`` (Fabric, or ``runtime_shim``'s
    ``mark_forward_method(obj, "name")``), with a bound method instead of the name, or FSDP2's
    ``register_fsdp_forward_method(obj, "name")``."""

    name: str
    line: int
    col: int = 0  # 0-based column of the called name (``mark_forward_method``)
    via: str = ""  # "fabric" (a method of a set-up model), "shim", "fsdp2", "" (receiver unknown)
    receiver: str = ""  # the model as written ("model", "self.model"; "" if not a plain name)
    cls: str = ""  # the model's class, resolved through imports ("" if the file does not tell)
    site: int = -1  # the set-up site (``FileFacts.wrap_sites``) of the model it registers on, if any


class WrapSite(NamedTuple):
    """A statement that sets up a model for distributed execution: ``model = fabric.setup(model)``,
    ``fully_shard(model)``, ``ddp = DDP(model)``, ``FSDP(model)``; one per set-up variable."""

    kind: str  # "fabric", "fsdp2", "ddp", "fsdp1" or "accelerate" (DDP, FSDP1 or FSDP2 as launched)
    var: str  # the variable that holds the set-up model afterwards: "model", "self.model"
    cls: str  # the model's class as a dotted reference resolved through imports ("" if unknown)
    line: int  # first line of the statement
    scope: str  # qualified name of the enclosing function ("" at module level)
    called: tuple[str, ...]  # method names called later on the set-up model, its .module or the wrapped module
    inline: bool = False  # the statement shares its line with a block header: no room after it


class WrappedCall(NamedTuple):
    """A method called on a set-up model, on its ``.module``, or on the module it wraps."""

    method: str  # "generate"
    line: int
    col: int  # 0-based column of the method's name
    text: str  # the call as written, up to the method: "fmodel.generate", "self.model.module.sample"
    site: int  # index of its set-up site in ``FileFacts.wrap_sites``


class MetaSubmodule(NamedTuple):
    """FWD101: ``self.<attr> = ...`` in a method of a class, with the value on the meta device."""

    cls: str  # the class's qualname
    attr: str
    line: int
    col: int  # 0-based column of the attribute's name in ``self.<attr>``
    how: str  # what puts it on meta, as written: 'with torch.device("meta")', '.to("meta")'...
    # what the value is: a class reference ("pkg.Block"), "self", "self.<attr>", "module",
    # "self.<method>()" (what the method returns) or "param:<name>" (an unannotated parameter's)
    value: str
    materialised: bool = False  # the class later calls to_empty / load_state_dict(assign=True) on it


class InitCall(NamedTuple):
    """FWD201: a call made inside an init context (``context`` says which), or a call made by a
    method in a file that compiles something (``context`` empty), for following ``__init__``."""

    scope: str  # qualname of the enclosing function or method ("" at module level)
    callee: str  # resolved dotted name ("pkg.fast_fn", "GPT.load_from_checkpoint"); "self.<name>"
    line: int
    col: int  # 0-based column of the callee's last name
    context: str = ""  # as written: "fabric.init_module()", 'torch.device("meta")', "_EmptyInit()"
    local: bool = False  # the callee is a local variable bound to torch.compile(...) in that scope
    # Inside a context: (slot, what) of its arguments that are names or compiled: "0" or a keyword;
    # "torch.compile" for ``torch.compile(...)`` or a local bound to it, else the resolved name.
    arguments: tuple[tuple[str, str], ...] = ()


class ForwardPatch(NamedTuple):
    """FWD301: ``forward`` rebound on an object, or a class renamed through an instance."""

    form: str  # "MethodType", "__get__", "partial", "assign", "restore", "setattr", "__dict__", "rename"
    receiver: str  # the object as written ("m", "self.model"); "" if not a dotted name
    receiver_ref: str  # the receiver resolved through imports and top-level classes ("" if none)
    line: int
    col: int  # 0-based column of ``at``
    at: str  # the name at that position: "forward", "setattr", "__setattr__", "__dict__", "vars", "__name__"
    scope: str  # qualname of the enclosing function ("" at module level)
    function: str = ""  # the function bound (MethodType / __get__ / partial), or the helper called ("helper")
    simple: bool = False  # exactly `<r>.forward = MethodType(<name>, <r>)`, alone on its line
    # What the receiver is, when the file tells: "class" (``cls`` of a classmethod, ``type(x)``, an
    # annotation ``type[...]``), "self:<Class>" (the method's own instance), "ref:<dotted>" (built by
    # that class, or annotated with it), "element:<Class>.<attr>" (``self.<attr>[i]``); "" if unknown.
    receiver_type: str = ""
    slot: int = -1  # "helper": the position of the "forward" argument in the call


class Handover(NamedTuple):
    """An object handed to a function imported from elsewhere: ``apply_kernels(model=model)``."""

    callee: str  # resolved through the file's imports: "liger_kernel.transformers.apply_liger_kernel_to_llama"
    slot: str  # "0", or the keyword
    argument: str  # as written: "model", "self.model"
    line: int
    col: int  # 0-based column of the callee's last name
    scope: str  # qualname of the enclosing function ("" at module level)


class FileFacts(NamedTuple):
    path: str
    module: str  # dotted module name derived from the path ("" if unknown)
    imports: tuple[tuple[str, str], ...]  # local name -> dotted target ("pkg.mod.Name")
    classes: tuple[ClassFacts, ...]
    marks: tuple[Mark, ...]
    # Lines carrying `# noqa` comments: line -> the codes as written ("" means every code).
    noqa: tuple[tuple[int, str], ...] = ()
    # Private names quoted in strings ("_sample"): targets of dispatch through getattr.
    quoted: tuple[str, ...] = ()
    functions: tuple[FunctionFacts, ...] = ()  # module-level functions
    wrap_sites: tuple[WrapSite, ...] = ()
    wrapped_calls: tuple[WrappedCall, ...] = ()
    meta_submodules: tuple[MetaSubmodule, ...] = ()
    compiled: tuple[str, ...] = ()  # module-level names bound to torch.compile(...)
    init_calls: tuple[InitCall, ...] = ()
    forward_patches: tuple[ForwardPatch, ...] = ()
    # Module-level functions that set an attribute named by a parameter on another parameter
    # (``obj.__dict__[name] = ...``, ``setattr(obj, name, ...)``): (function, object slot, name slot).
    attr_setters: tuple[tuple[str, int, int], ...] = ()
    # (method name called or handed over, the function that does it: "Cls.forward", "" at module level).
    attribute_uses: tuple[tuple[str, str], ...] = ()
    handovers: tuple[Handover, ...] = ()
    # False when the text prefilter skipped the parse: no classes, no marks, imports unknown.
    parsed: bool = True
    # Local name (``*module`` for a star import) -> line of its first import (FWD005 reports there).
    import_lines: tuple[tuple[str, int], ...] = ()
    # Module-level names bound to what a call or a lookup returns (``X, ok = optional_import(...)``).
    run_time_names: tuple[str, ...] = ()

    def function_named(self, name: str) -> FunctionFacts | None:
        for function in self.functions:
            if function.name == name:
                return function
        return None

    def class_named(self, qualname: str) -> ClassFacts | None:
        for cls in self.classes:
            if cls.qualname == qualname:
                return cls
        return None
