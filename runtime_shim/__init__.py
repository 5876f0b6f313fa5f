"""Runtime half of fwdlint: enforces the forward-entry contract under DDP, FSDP and Fabric.

``forward_entry`` and ``UnmarkedEntryError`` need no torch; the rest is loaded on first use, so
model code can import the decorator before (or without) torch and enforcement.

Importing this package is what makes a mark take effect: from then on, DDP, FSDP1, FSDP2 and
Fabric wrappers created in the process route their model's marked methods through the wrapper's
forward (``routing.py``; ``FWD_SHIM_MODE=off`` prevents it, ``uninstall()`` undoes it). Raising on
unmarked methods is opt-in: ``import runtime_shim.auto`` or ``guard(wrapper)``.

How it works (details in ``record.py``, ``_forwards.py``, ``detect.py``):

* ``guard(wrapper)`` binds, once, a checked ``forward`` into the ``__dict__`` of every module of the
  wrapped model, a routed stand-in for every marked method, and a ``forward`` on the wrapper that
  raises a thread-local "inside" counter. Nothing is added or removed per call.
* A marked method called with the counter at 0 stores (portal, function, owner) in a thread-local
  slot and calls the outermost wrapper (``_FabricModule``, DDP, FSDP1, or the FSDP2 module whose
  own hooks do the unsharding); the portal module's forward takes the slot and runs the method.
  Re-entrant calls (counter > 0) run directly: one wrapper forward per outer call.
* Detection: a module forward reached with the counter at 0 walks the Python stack once; if an
  unmarked method of the guarded model is on it (outside torch's own frames), that method is the
  entry point: ``UnmarkedEntryError`` (mode ``error``) or one ``UnmarkedEntryWarning`` per method
  (mode ``warn``). A module called directly by user code (``ddp.module(x)``) is allowed.

Precisely when the error comes: at the first module-forward boundary (``self(...)``,
``self.sub(...)``, ``self.sub.forward(...)``, the root or any submodule) that the unmarked method
reaches, before that module's ``forward`` body runs (forward pre-hooks registered on that module
run first, as they precede ``forward``). Code of the unmarked method itself before that boundary
has run, including any direct use of parameters (``F.linear(x, self.weight)``), which is not
detected -- the same gap as FWD001. No collective has been issued, so all ranks raise and none
hangs.

Three helpers for the wrapper hazards FWD101/FWD201/FWD301 report (``meta.py``, ``init_context.py``,
``patching.py``): ``check_no_meta(model)`` names meta tensors and their owners before a wrapper or
``.to()`` fails on them (run by itself before DDP is built and before Fabric moves a model);
``empty_init()`` skips parameter initialisation with a mode that is compile-safe and absent when
disabled; ``patch_forward(m, fn, name)`` gives one instance a named subclass whose ``forward`` is
``fn`` instead of an instance ``forward`` (``unpatch_forward`` undoes it).

Not covered: modules added to the model after ``guard`` (guard again), modules whose ``forward``
was already patched on the instance (left alone, listed in ``record.skipped``), methods called
through the class (``Cls.generate(model, x)`` bypasses the stand-in; reported with its own
message when it computes), and a shallow ``copy.copy`` (it shares its submodules, which stay
guarded). Behaviour under faults (``torch.compile``, TorchScript, pickled and deep copies, two
wrappers of one model, a failing rank): see ``record.py``.
"""

from __future__ import annotations

from typing import Any

from runtime_shim import routing
from runtime_shim.errors import MetaDeviceError, UnmarkedEntryError, UnmarkedEntryWarning, UnusedParametersError
from runtime_shim.marks import forward_entry, inference_entry

__all__ = [
    "forward_entry",
    "inference_entry",
    "mark_forward_method",
    "guard",
    "unguard",
    "install",
    "uninstall",
    "UnmarkedEntryError",
    "UnmarkedEntryWarning",
    "MetaDeviceError",
    "UnusedParametersError",
    "check_no_meta",
    "empty_init",
    "patch_forward",
    "unpatch_forward",
]

_LAZY = {
    "mark_forward_method": "runtime_shim.api",
    "guard": "runtime_shim.api",
    "unguard": "runtime_shim.api",
    "install": "runtime_shim.installer",
    "uninstall": "runtime_shim.installer",
    "check_no_meta": "runtime_shim.meta",
    "empty_init": "runtime_shim.init_context",
    "patch_forward": "runtime_shim.patching",
    "unpatch_forward": "runtime_shim.patching",
}


def __getattr__(name: str) -> Any:
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError(f"module 'runtime_shim' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module_name), name)
    globals()[name] = value
    return value


routing.enable_on_import()
