"""Routing from the moment ``runtime_shim`` is imported: the mark is the whole fix.

``from runtime_shim import forward_entry`` (any import of ``runtime_shim``) arranges that every
DDP, FSDP1, FSDP2 (``fully_shard``) and Lightning Fabric wrapper created afterwards in this
process routes its model's marked methods through the wrapper's forward: decorated methods,
``runtime_shim.mark_forward_method`` registrations and FSDP2's ``register_fsdp_forward_method``
registrations alike. A model with no marked method is left alone (no per-call cost at all).
Routing only: raising on unmarked methods stays opt-in (``import runtime_shim.auto``, ``guard``).

Torch-free until torch is there: if torch (or Lightning) is not imported yet, a meta-path hook
waits for it and patches the wrapper constructors once the import has completed (never while
torch is half-initialised). ``FWD_SHIM_MODE=off`` in the environment turns this off;
``runtime_shim.uninstall()`` stops it and undoes every patch and guard.

Imports go one way: this module calls ``installer`` (imported when torch is there, never at
import time: this module is torch-free); ``installer`` never calls back here, it stops the
routing through the state both keep in ``_installed``.
"""

from __future__ import annotations

import sys
from typing import Any

from lint_rules.contract import mode_from_env
from runtime_shim import _installed
from runtime_shim.import_hooks import AfterImport
from runtime_shim.vocabulary import ROUTING_WATCHED as WATCHED


def _ready(name: str) -> bool:
    module = sys.modules.get(name)
    spec = getattr(module, "__spec__", None)
    return module is not None and not getattr(spec, "_initializing", False)


def _apply() -> None:
    """Patch whatever is importable now (called once torch has finished importing)."""
    if not _installed.routing_wanted or not _ready("torch"):
        return
    from runtime_shim import installer

    installer.install(installer.ROUTE, keep_stronger=True)


def _after_import(name: str, module: Any) -> None:
    with _installed.LOCK:
        _apply()


def enable() -> None:
    """Route marked methods of wrappers created from now on (idempotent)."""
    with _installed.LOCK:
        _installed.routing_wanted = True
        if _installed.routing_hook is None:
            hook = AfterImport(WATCHED, _after_import)
            hook.add()
            _installed.routing_hook = hook
        _apply()


def disable() -> None:
    """Stop watching imports (``uninstall`` also restores what was patched)."""
    _installed.stop_routing()


def enable_on_import() -> None:
    """What ``import runtime_shim`` does, unless ``FWD_SHIM_MODE=off``."""
    try:
        mode = mode_from_env()
    except ValueError:
        mode = "error"  # runtime_shim.auto reports a bad value; routing is safe either way
    if mode != "off":
        enable()
