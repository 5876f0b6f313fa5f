"""Runtime-only vocabulary (torch-free), kept next to ``lint_rules.contract`` until it moves there.

Everything the runtime says that the linter does not (yet) say lives here, so the wording has one
home. ``UnmarkedEntryError`` itself uses ``lint_rules.contract.unmarked_entry_message`` verbatim.
"""

from __future__ import annotations

import os

from lint_rules.contract import DECORATOR_NAME, MARK_METHOD_CALL

#: Environment variable read by ``import runtime_shim.auto``.
MODE_ENV_VAR = "FWD_SHIM_MODE"
#: Accepted modes; ``off`` only makes sense for ``runtime_shim.auto``.
MODES: tuple[str, ...] = ("error", "warn")
AUTO_MODES: tuple[str, ...] = ("error", "warn", "off")
DEFAULT_MODE = "error"

#: Attributes the shim keeps in a guarded module's ``__dict__``.
GUARD_KEY = "_fwd_shim_guard"
MARKS_KEY = "_fwd_shim_marks"

#: Class names (matched by name so that no Lightning import is needed) of LightningModule.
LIGHTNING_MODULE_CLASSES: frozenset[str] = frozenset({"LightningModule"})


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


def bypassed_mark_message(cls: str, method: str, chain: str) -> str:
    """A marked method ran without being routed (called through the class, e.g. ``GPT.generate(m, x)``)."""
    return (
        f"{cls}.{method} is marked as a forward entry point but this call bypassed the routing "
        f"({chain}); call it on the instance (model.{method}(...)) so it runs through the wrapper's forward"
    )


def generator_message(qualname: str) -> str:
    """Same words as the decorator's rejection in ``runtime_shim.marks``."""
    return (
        f"@{DECORATOR_NAME} cannot mark generator {qualname}: a generator runs after "
        "the wrapper's forward has returned, so it cannot be routed; return a list instead"
    )


def returned_generator_message(cls: str, method: str) -> str:
    return (
        f"{cls}.{method} is routed through the wrapper's forward but returned a generator, which "
        "would run after the forward has returned (unsynchronised); return a list or tensor instead"
    )


def meta_device_message(cls: str, params: list[str], buffers: list[str]) -> str:
    parts = []
    if params:
        parts.append("parameters " + ", ".join(params))
    if buffers:
        parts.append("buffers " + ", ".join(buffers))
    return (
        f"guarded model {cls} still has tensors on the meta device ({'; '.join(parts)}); "
        "materialise them (model.to_empty(device=...) and re-initialise) before running it"
    )


def route_not_consumed_message(cls: str, method: str, wrapper: str) -> str:
    return (
        f"routing {cls}.{method} through {wrapper} failed: the wrapper's forward returned without "
        "calling the wrapped module's forward"
    )


MARK_VALIDATION_TYPE = f"{MARK_METHOD_CALL} expects a method or a method name, but got: {{kind}}"
MARK_VALIDATION_FORWARD = "You cannot mark the forward method itself as a forward method."
MARK_VALIDATION_MISSING = (
    "You marked '{name}' as a forward method, but `{cls}.{name}` does not exist or is not a method."
)
