"""The forward-entry contract: the vocabulary shared by ``lint_rules`` and ``runtime_shim``.

Both halves import this module (it must stay torch-free and import nothing heavy), so the
linter and the runtime enforcement can never disagree on what a mark is called, which methods
are routed by default, what a LightningModule is, or how a finding is worded. The second half
holds what only the runtime says (modes, the shim's own errors), so the wording has one home.
"""

from __future__ import annotations

import os
from typing import Iterable

#: Name of the decorator that marks a method as a forward entry point.
DECORATOR_NAME = "forward_entry"

#: Module that exports the decorator (what ``--fix`` imports from).
DECORATOR_MODULE = "runtime_shim"

#: Attribute the decorator sets on the function; the runtime reads it, the linter never needs it.
MARK_ATTRIBUTE = "__fwd_entry__"

#: The decorators ``runtime_shim`` exports that mark an entry point: ``forward_entry`` and the same
#: under the name of Lightning's proposal, ``inference_entry``.
MARK_DECORATORS: tuple[str, ...] = (DECORATOR_NAME, "inference_entry")


def is_shim_mark(decorator: str) -> bool:
    """Is ``decorator`` (resolved through imports: ``runtime_shim.forward_entry``,
    ``runtime_shim.marks.inference_entry``) one of ``runtime_shim``'s marks?"""
    head, _, last = decorator.rpartition(".")
    return last in MARK_DECORATORS and head.split(".", 1)[0] == DECORATOR_MODULE


#: Calls that register a method by name at run time: ``obj.mark_forward_method("generate")``
#: (Lightning Fabric, and ours) and ``register_fsdp_forward_method(obj, "generate")`` (FSDP2).
MARK_METHOD_CALL = "mark_forward_method"
FSDP_REGISTER_CALL = "register_fsdp_forward_method"

#: Methods that Lightning routes through the strategy wrapper by itself.
LIGHTNING_STEP_METHODS: frozenset[str] = frozenset(
    {"training_step", "validation_step", "test_step", "predict_step"}
)

#: Packages whose ``LightningModule`` is Lightning's (the class is matched by name, never imported).
LIGHTNING_PACKAGES: tuple[str, ...] = ("lightning", "pytorch_lightning")


def is_lightning_module(qualified: str) -> bool:
    """Is ``qualified`` (``lightning.pytorch.core.module.LightningModule``, ``pl.LightningModule``
    as resolved through imports, or a bare ``LightningModule``) Lightning's LightningModule?
    The linter asks with resolved base names, the runtime with ``cls.__module__``."""
    head, _, last = qualified.rpartition(".")
    return last == "LightningModule" and (not head or head.split(".", 1)[0] in LIGHTNING_PACKAGES)


#: The forward itself and the call that runs it: ``m.forward(x)``, ``m.__call__(x)`` and ``m(x)``
#: all run the module's computation (torch 2.13 torch/nn/modules/module.py, ``Module``).
FORWARD_NAMES: frozenset[str] = frozenset({"forward", "__call__"})
#: torch 2.13 ``Module.__call__`` is ``_wrapped_call_impl``, which calls ``_call_impl``: their frames
#: stand between a caller and ``forward`` (the runtime skips them on the stack, the linter never
#: takes them for entry points). Names, not the functions: the linter has no torch.
CALL_IMPL: frozenset[str] = frozenset({"_call_impl", "_wrapped_call_impl"})
#: Never entry points: the forward itself and the call protocol.
NEVER_ENTRY: frozenset[str] = FORWARD_NAMES | CALL_IMPL


def is_dunder(name: str) -> bool:
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


def counted(number: int, noun: str, plural: str = "") -> str:
    """``1 forward entry``, ``2 forward entries``, ``1,024 files``: every message that prints a number
    with a noun, linter's and shim's (``plural`` where adding an s is wrong)."""
    return f"{number:,} {noun if number == 1 else plural or noun + 's'}"


def format_chain(chain: Iterable[object]) -> str:
    """``["generate", "_sample", "self(...) at line 88"]`` -> ``generate -> _sample -> self(...) at line 88``
    (strings, or the linter's ``diagnostics.Step``s, which print as the message shows them)."""
    return " -> ".join(map(str, chain))


#: The ``forward-helpers`` setting: FWD001 on methods the project calls only from ``forward``
#: (directly or through other such methods) is reported, saying so, or skipped. The first is the default.
FORWARD_HELPERS = ("report", "skip")


def unmarked_entry_message(cls: str, method: str, chain: str) -> str:
    """FWD001's message: what and where, one line."""
    return f"{cls}.{method} runs forward computation outside forward ({chain}) but is not marked"


#: The wrappers a registration is named for (``WrapSite.kind`` and the shim's ``Record.wrapper_name``),
#: in the order the advice lists them when the wrapper is not known.
WRAPPER_KINDS: tuple[str, ...] = ("ddp", "fsdp1", "fsdp2", "fabric", "accelerate")


def registration_advice(method: str, kind: str) -> str:
    """How to register ``method`` on a model set up with the wrapper ``kind``: the API that wrapper has.
    DDP and FSDP1 have no registration of their own (``runtime_shim``'s function routes them); FSDP2 has
    ``register_fsdp_forward_method``; Fabric's wrapped model has ``mark_forward_method``."""
    shim = f"{DECORATOR_MODULE}.{MARK_METHOD_CALL}"
    if kind == "fabric":
        return f"fabric_model.{MARK_METHOD_CALL}('{method}') after fabric_model = fabric.setup(model)"
    if kind == "fsdp2":
        return (f"torch.distributed.fsdp.{FSDP_REGISTER_CALL}(model, '{method}') or {shim}(model, '{method}') "
                f"after fully_shard(model)")
    if kind == "fsdp1":
        return f"{shim}(fsdp_model, '{method}') after fsdp_model = FSDP(model)"
    if kind == "accelerate":
        return f"{shim}(model, '{method}') after model = accelerator.prepare(model)"
    return f"{shim}(ddp, '{method}') after ddp = DDP(model)"


def unmarked_entry_help(method: str, kinds: Iterable[str] = ()) -> str:
    """FWD001's help and the runtime's advice: the decorator first, then the registration of each
    wrapper in ``kinds`` (those the project sets the class up with, or the one the runtime guards),
    or the options for every wrapper when none is known."""
    known = [kind for kind in WRAPPER_KINDS if kind in set(kinds)]
    shim = f"{DECORATOR_MODULE}.{MARK_METHOD_CALL}"
    if known:
        each = "" if len(known) == 1 else " (each wrapper's own)"
        registrations = "; ".join(registration_advice(method, kind) for kind in known)
    else:
        each = ""
        registrations = (f"{shim}(wrapper, '{method}') for DDP, FSDP1 and FSDP2 (the DDP or FSDP wrapper, or the "
                         f"fully_shard-ed module), torch.distributed.fsdp.{FSDP_REGISTER_CALL}(model, '{method}') "
                         f"for FSDP2, fabric_model.{MARK_METHOD_CALL}('{method}') after fabric.setup() for Fabric")
    return (f"decorate it with @{DECORATOR_NAME} from {DECORATOR_MODULE} (importing {DECORATOR_MODULE} routes marked "
            f"methods through DDP, FSDP and Fabric), or register it on every set-up model{each}: {registrations}")


def unmarked_entry_error(cls: str, method: str, chain: str, wrapper: str = "") -> str:
    """The runtime's ``UnmarkedEntryError``: FWD001's message and help, the same words, naming the
    registration of ``wrapper`` (``ddp``, ``fsdp1``, ``fsdp2``, ``fabric``) when the runtime knows it."""
    return f"{unmarked_entry_message(cls, method, chain)}; {unmarked_entry_help(method, (wrapper,) if wrapper else ())}"


#: The last line of ``pytest --fwd-guard``'s summary: each entry's error names its wrapper's registration.
GUARD_SUMMARY_ADVICE = (f"mark each with @{DECORATOR_NAME} from {DECORATOR_MODULE}, or register it on every set-up "
                        f"model with its wrapper's own call, which each error names (fwdlint --explain FWD001)")


# -- the runtime's side ------------------------------------------------------------------

#: Environment variable read by ``import runtime_shim.auto``.
MODE_ENV_VAR = "FWD_SHIM_MODE"
#: Accepted modes: ``error`` and ``warn`` detect unmarked entry points, ``route`` only routes marked
#: ones (what importing ``runtime_shim`` does), ``record`` detects silently and records (into
#: ``FWD_RECORD``), ``off`` (environment only) does nothing at all.
MODES: tuple[str, ...] = ("error", "warn", "record", "route")
AUTO_MODES: tuple[str, ...] = ("error", "warn", "record", "route", "off")
#: Where entries are recorded (``lint_rules.run_record``): with ``record``, and with any other
#: detecting mode when set.
RECORD_ENV_VAR = "FWD_RECORD"
DEFAULT_MODE = "error"

#: Attributes the shim keeps in a guarded module's ``__dict__``.
GUARD_KEY = "_fwd_shim_guard"
MARKS_KEY = "_fwd_shim_marks"


def mode_from_env(environ: "os._Environ[str] | dict[str, str] | None" = None) -> str:
    """Mode for ``runtime_shim.auto``: ``FWD_SHIM_MODE`` (default ``error``), validated."""
    env = os.environ if environ is None else environ
    mode = env.get(MODE_ENV_VAR, DEFAULT_MODE).strip().lower() or DEFAULT_MODE
    if mode not in AUTO_MODES:
        raise ValueError(f"{MODE_ENV_VAR}={mode!r}: expected one of {', '.join(AUTO_MODES)}")
    return mode


def check_mode(mode: str) -> str:
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(repr(m) for m in MODES)}, got {mode!r}")
    return mode


def entry_of_message(message: str) -> str:
    """The ``Class.method`` an unmarked-entry or bypassed-mark message is about: both start with it."""
    return message.split(" ", 1)[0]


def bypassed_mark_message(cls: str, method: str, chain: str) -> str:
    """A marked method ran without being routed (called through the class, e.g. ``GPT.generate(m, x)``)."""
    return (
        f"{cls}.{method} is marked as a forward entry point but this call bypassed the routing "
        f"({chain}); call it on the instance (model.{method}(...)) so it runs through the wrapper's forward"
    )


def generator_message(qualname: str, asynchronous: bool = False) -> str:
    """Same words as the decorator's rejection in ``runtime_shim.marks``."""
    if asynchronous:
        return (
            f"@{DECORATOR_NAME} cannot mark async method {qualname}: a coroutine runs when it is awaited, "
            "after the wrapper's forward has returned, so it cannot be routed; mark a plain method that "
            "does the computation and call it from the coroutine"
        )
    return (
        f"@{DECORATOR_NAME} cannot mark generator {qualname}: a generator runs after "
        "the wrapper's forward has returned, so it cannot be routed; return a list instead"
    )


def returned_generator_message(cls: str, method: str) -> str:
    return (
        f"{cls}.{method} is routed through the wrapper's forward but returned a generator, which "
        "would run after the forward has returned (unsynchronised); return a list or tensor instead"
    )


def route_not_consumed_message(cls: str, method: str, wrapper: str) -> str:
    return (
        f"routing {cls}.{method} through {wrapper} failed: the wrapper's forward returned without "
        "calling the wrapped module's forward"
    )


#: What ``@forward_entry`` raises when a class is defined (``runtime_shim/marks.py``).
DECORATOR_ON_FORWARD = f"@{DECORATOR_NAME} cannot mark forward itself: it is the forward"
DECORATOR_ON_DESCRIPTOR = f"@{DECORATOR_NAME} marks instance methods, not a {{kind}}"
DECORATOR_NOT_FUNCTION = f"@{DECORATOR_NAME} expects a function, got {{kind}}"

MARK_VALIDATION_TYPE = f"{MARK_METHOD_CALL} expects a method or a method name, but got: {{kind}}"
MARK_VALIDATION_FORWARD = "You cannot mark the forward method itself as a forward method."
MARK_VALIDATION_MISSING = (
    "You marked '{name}' as a forward method, but `{cls}.{name}` does not exist or is not a method."
)
