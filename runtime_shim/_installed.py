"""What ``install`` and the routing on import hold in this process (torch-free state).

``installer`` fills it (the mode, the guards it made, the wrapper of every model wrapped while
installed); ``api`` reads it (a mark registered after wrapping looks its wrapper up; a user's
``guard`` takes the wrapper away from ``install``); ``routing`` keeps its import hook here, so
that ``uninstall`` stops it. Kept apart so that imports go one way (``routing`` -> ``installer``
-> ``api`` -> this), with no module importing one that imports it back.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any, Optional

ROUTE = "route"
RANK = {ROUTE: 0, "record": 1, "warn": 2, "error": 3}

LOCK = threading.RLock()
#: The mode ``install`` is active with, or None (set by ``installer`` only).
mode: Optional[str] = None
#: Detect on Fabric with one device too (``install(single_device=True)``: the pytest plugin). Off by
#: default: nothing desynchronises on one device, and a working single-device run must not start failing.
single_device = False
#: Wrappers whose guard ``install`` made (and owns).
guarded: "weakref.WeakSet[Any]" = weakref.WeakSet()
#: model -> its outermost wrapper created while installed.
wrappers: "weakref.WeakKeyDictionary[Any, weakref.ref[Any]]" = weakref.WeakKeyDictionary()
#: Is the routing that importing ``runtime_shim`` starts wanted, and its import hook (``routing``).
routing_wanted = False
routing_hook: Optional[Any] = None


def wrapper_of(module: Any) -> Optional[Any]:
    """The outermost live wrapper created (while installed) around ``module`` or a model holding it
    (FSDP units and ``fully_shard``-ed children have wrappers of their own inside the root's)."""
    best, size = None, -1
    for root, ref in list(wrappers.items()):
        wrapper = ref()
        modules = list(root.modules()) if wrapper is not None else []
        if any(m is module for m in modules) and len(modules) > size:
            best, size = wrapper, len(modules)
    return best


def stop_routing() -> None:
    """Stop the routing on import: no more patching when torch or Lightning is imported."""
    global routing_hook, routing_wanted
    with LOCK:
        routing_wanted = False
        if routing_hook is not None:
            routing_hook.remove()
        routing_hook = None


def disown(wrapper: Any) -> None:
    """The user guarded ``wrapper`` explicitly: ``install``/``uninstall`` no longer touch its guard."""
    with LOCK:
        guarded.discard(wrapper)
