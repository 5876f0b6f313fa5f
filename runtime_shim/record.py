"""``GuardRecord``: everything one guard installed, so it can route, detect and be undone.

A record is created once per guarded wrapper. At guard time it binds, into the ``__dict__`` of
each module of the wrapped model, a checked ``forward`` (the portal module -- the one the wrapper
calls -- gets one that also takes routed methods) and a routed stand-in for every marked method.
The wrapper itself gets a ``forward`` that counts the thread as "inside". Nothing is installed
or removed per call; ``unguard`` deletes exactly the attributes that are still ours.

Under faults (issue 11; tests in ``tests/runtime/test_shim_faults.py``; CPU, torch 2.13, gloo):

* ``torch.compile``: the shim's own functions are never compiled; the state-changing ones
  (routing, the wrapper's forward, the slow path) run eagerly and the read-only fast paths are
  inlined (``_forwards.py``). ``torch.compile(model.generate)`` works: routed once per call through
  the wrapper's forward, gradients all-reduced, the method one graph with no break (it raised
  "routing ... failed" or Dynamo's "Guard failed on the same frame"). ``torch.compile(ddp)`` of a
  guarded DDP has the graphs and breaks of the unguarded one (it had one more, in our forward).
  ``benchmarks/shim_compile.py`` (inductor, 10 and 100 ``Linear(128,128)``, training step):
  guarded/unguarded ``compile(ddp)`` 0.95-1.02 (noise; the old break cost no more either); a
  compiled routed ``generate`` vs the same work as DDP's compiled forward 1.04 and 1.005. Unmarked
  calls inside compiled code are still detected.
* ``torch.jit.script`` of a guarded module compiles a clean shallow view (same parameters): the
  scripted module is the model's own code, unguarded; the model keeps its guard. ``trace`` runs
  the model, which is a direct (allowed) call.
* ``pickle``, ``torch.save``, ``copy.deepcopy`` of a guarded module, wrapper or ``_FabricModule``
  give an unguarded object whose ``__dict__`` holds none of our attributes (marks from
  ``mark_forward_method`` are the user's and travel); ``guard`` treats it as new.
* Two wrappers of one model: the latest ``guard`` owns the model (the first wrapper loses its
  attributes); ``unguard`` undoes only the wrapper's own guard. Refusing the second guard would
  break re-wrapping (a new DDP with other options), which ``install`` guards by itself.
* One rank raising inside a marked method: the shim issues no collective, so it cannot tell the
  other ranks; they block in their next collective (backward's all-reduce) until the failed
  process exits (released in 0.4 s: "Connection closed by peer") or the process-group timeout
  passes (gloo's default is 30 min). ``destroy_process_group()`` or ``_abort_process_group()`` on
  the failed rank while it lives released nothing (the peer waited until the exit, 15 s later).
  The exception gets a note (Python >= 3.11) naming the rank, the group's timeout and
  ``init_process_group(timeout=...)``. The shim's state is clean on every rank afterwards.
"""

from __future__ import annotations

import functools
import inspect
import sys
import types
import warnings
import weakref
from typing import Any, Callable, Iterable, Optional

import torch
from torch import nn

from lint_rules.contract import (
    GUARD_KEY,
    LIGHTNING_STEP_METHODS,
    MARKS_KEY,
    bypassed_mark_message,
    is_lightning_module,
    returned_generator_message,
    route_not_consumed_message,
    unmarked_entry_error,
)
from runtime_shim import _forwards, _installed, recorder
from runtime_shim._state import STATE, inside
from runtime_shim.detect import find_entry, user_class_name
from runtime_shim.errors import UnmarkedEntryError, UnmarkedEntryWarning
from runtime_shim.marks import is_marked
from runtime_shim.meta import find_meta, raise_for
from runtime_shim.unused import check_routed_output
from runtime_shim.wrappers import clean_name
_class_marks_cache: "weakref.WeakKeyDictionary[type, frozenset[str]]" = weakref.WeakKeyDictionary()


def class_marks(cls: type) -> frozenset[str]:
    """Names whose resolved class attribute carries the ``@forward_entry`` mark (cached per class)."""
    cached = _class_marks_cache.get(cls)
    if cached is not None:
        return cached
    seen: set[str] = set()
    marked: set[str] = set()
    for klass in cls.__mro__:
        if klass is nn.Module or klass is object:
            break
        for name, value in vars(klass).items():
            if name in seen:
                continue
            seen.add(name)
            if is_marked(value):
                marked.add(name)
    if any(is_lightning_module(f"{k.__module__}.{k.__qualname__}") for k in cls.__mro__):
        marked |= {n for n in LIGHTNING_STEP_METHODS if callable(getattr(cls, n, None))}
    result = frozenset(marked)
    _class_marks_cache[cls] = result
    return result


class GuardRecord:
    """Routing and detection state for one guarded wrapper (see module docstring)."""

    def __init__(self, wrapper: nn.Module, root: nn.Module, kind: str, mode: str) -> None:
        self.wrapper = wrapper  # DDP / FSDP1 instance, or the FSDP2 root itself
        self.root = root  # the user's model (what the wrapper calls)
        self.kind = kind  # "ddp" | "fsdp1" | "fsdp2" | "plain" (Fabric on one device: ``wrapper`` is the model)
        self.mode = mode
        self.detect = mode != "route" and (kind != "plain" or _installed.single_device)
        self.entry: Callable[..., Any] = wrapper  # outermost callable; Fabric replaces it
        self.fabric: Optional[nn.Module] = None
        self.active = False
        self.meta_pending = True
        self.names: dict[int, str] = {}
        self.portal_of: dict[int, nn.Module] = {}
        self.marked: dict[int, set[str]] = {}
        self.installed: list[tuple[Any, str]] = []  # (object, attribute) we put in __dict__
        self.skipped: list[str] = []  # modules whose forward was already patched by someone else
        self.warned: set[tuple[str, str]] = set()
        self.meta_hook: Optional[Any] = None  # FSDP2 only; removed by unguard
        self.all_used: set[str] = set()  # DDP: routed methods whose output reached every parameter
        self.last_routed: Optional[tuple[nn.Module, str]] = None  # (owner, method), for DDP's own errors
        # where the wrapper was created, for the run record's call-style fix (found only while recording)
        self.wrapped_at = recorder.user_frame(sys._getframe(1)) if recorder.ACTIVE is not None else ""

    @property
    def wrapper_name(self) -> str:
        """How the run record names the wrapper: ddp, fsdp1, fsdp2, or fabric (around any of them)."""
        return "fabric" if self.fabric is not None or self.kind == "plain" else self.kind

    # -- copying / pickling a guarded module must not carry the guard along ------------------
    def __deepcopy__(self, memo: dict[int, Any]) -> None:
        return None

    def __reduce__(self) -> tuple[Any, tuple[()]]:
        return (type(None), ())

    # -- installation ---------------------------------------------------------------------------
    def _put(self, obj: Any, attr: str, value: Any) -> None:
        obj.__dict__[attr] = value
        self.installed.append((obj, attr))

    def _put_own(self, obj: Any, attr: str, func: Callable[..., Any]) -> None:
        """Bind ``func`` as ``obj.attr`` unless the instance already has an ``attr`` of someone else's."""
        existing = obj.__dict__.get(attr)
        if existing is None or _forwards.is_shim_bound(existing):
            self._put(obj, attr, types.MethodType(func, obj))

    def install(self) -> None:
        """Bind the stand-ins once; afterwards every call costs O(1) in the number of modules."""
        fsdp_module = _fsdp2_class()
        by_name: dict[str, nn.Module] = {}
        for raw_name, module in self.root.named_modules():
            name = clean_name(raw_name)
            by_name[raw_name] = module
            self.names[id(module)] = name
            if module is self.root:
                portal: nn.Module = module
            elif fsdp_module is not None and self.kind == "fsdp2" and isinstance(module, fsdp_module):
                portal = module
            else:
                parent = by_name.get(raw_name.rpartition(".")[0], self.root)
                portal = self.portal_of.get(id(parent), self.root)
            self.portal_of[id(module)] = portal
            self._put(module, GUARD_KEY, self)
            existing = module.__dict__.get("forward")
            if existing is not None and not _forwards.is_shim_bound(existing):
                self.skipped.append(name or type(module).__name__)
            elif portal is module:
                self._put(module, "forward", types.MethodType(_forwards.portal_forward, module))
            elif self.detect:
                checked = _forwards.checked_forward_for(type(module).forward)
                self._put(module, "forward", types.MethodType(checked, module))
            for method in sorted(class_marks(type(module)) | set(module.__dict__.get(MARKS_KEY, ()))):
                self.add_mark(module, method)
            self._put_own(module, "__getstate__", _forwards.shim_getstate)
            self._put_own(module, "__prepare_scriptable__", _forwards.shim_prepare_scriptable)
        if self.wrapper is not self.root:
            self._put(self.wrapper, GUARD_KEY, self)
            self._put(self.wrapper, "forward", types.MethodType(_forwards.wrapper_forward, self.wrapper))
            self._put_own(self.wrapper, "__getstate__", _forwards.shim_getstate)
        else:  # FSDP2: check meta tensors before FSDP's own pre-forward (which names parameters only)
            self.meta_hook = self.root.register_forward_pre_hook(_meta_pre_hook, prepend=True)
        self.active = True

    def add_mark(self, module: nn.Module, name: str) -> None:
        """Route ``module.name`` through the wrapper's forward from now on."""
        names = self.marked.setdefault(id(module), set())
        if name in names:
            return
        existing = module.__dict__.get(name)
        if existing is not None and not _forwards.is_shim_bound(existing):
            # Already patched on the instance (e.g. register_fsdp_forward_method): keep it, count it as
            # routed so its inner computation is not reported.
            @_forwards.opaque
            def func(self: Any, *args: Any, _inner: Any = existing, **kwargs: Any) -> Any:
                with inside(self.__dict__.get(GUARD_KEY)):
                    return _inner(*args, **kwargs)

            func.__name__ = name
        else:
            func = getattr(type(module), name)
        routed = _forwards.make_routed(name, func)
        self._put(module, name, types.MethodType(routed, module))
        names.add(name)

    def is_marked(self, module: nn.Module, name: str) -> bool:
        return name in self.marked.get(id(module), ())

    def unguard(self) -> None:
        """Remove every attribute this record put in a ``__dict__`` and is still ours."""
        self.active = False
        for obj, attr in reversed(self.installed):
            current = obj.__dict__.get(attr)
            if attr == GUARD_KEY:
                if current is self:
                    del obj.__dict__[attr]
            elif current is not None and _forwards.is_shim_bound(current):
                del obj.__dict__[attr]
        self.installed.clear()
        if self.meta_hook is not None:
            self.meta_hook.remove()
            self.meta_hook = None
        if self.fabric is not None:
            from runtime_shim.fabric import unguard_fabric

            unguard_fabric(self.fabric)
            self.fabric = None

    # -- run time ---------------------------------------------------------------------------------
    @_forwards.opaque  # eager under torch.compile: the routed method itself is compiled in the portal
    def route(self, owner: nn.Module, name: str, func: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
        """Run ``func(owner, ...)`` inside the wrapper's forward, via the owner's portal."""
        if self.meta_pending:
            self.check_meta()
        portal = self.portal_of.get(id(owner), self.root)
        entry = self.entry if portal is self.root else portal
        pending = (portal, func, owner)
        self.last_routed = (owner, name)  # named only if DDP raises: no MRO walk per call
        if recorder.ACTIVE is not None:
            recorder.ACTIVE.note(owner, name, True, self.wrapper_name, sys._getframe(1), self.wrapped_at)
        previous = STATE.redirect
        STATE.redirect = pending
        try:
            out = entry(*args, **kwargs)
            consumed = STATE.redirect is not pending
        except Exception as exc:
            self.note_other_ranks(exc, owner, name, entry)
            raise
        finally:
            STATE.redirect = previous
        if not consumed:
            raise RuntimeError(route_not_consumed_message(user_class_name(owner), name, type(entry).__name__))
        if inspect.isgenerator(out) or inspect.isasyncgen(out):
            raise TypeError(returned_generator_message(user_class_name(owner), name))
        if self.kind == "ddp" and name not in self.all_used and torch.is_grad_enabled():
            check_routed_output(self, user_class_name(owner), name, out)
        return out

    @functools.partial(_forwards.opaque, recursive=True)
    def note_other_ranks(self, exc: Exception, owner: nn.Module, name: str, entry: Any) -> None:
        """A routed method raised on this rank: say what the other ranks now do, and what bounds it.

        The shim cannot make a rank-local error reach the other ranks without a collective of its
        own (which a method called on one rank only, e.g. rank-0 sampling, would hang on), so it
        adds a note (Python >= 3.11) instead: the ranks that did not raise block in their next
        collective until this process exits or the process-group timeout expires.
        """
        add_note = getattr(exc, "add_note", None)
        if add_note is None or isinstance(exc, UnmarkedEntryError) or getattr(exc, _NOTED, False):
            return  # UnmarkedEntryError is raised on every rank, before any collective
        group = getattr(self.wrapper, "process_group", None)
        world = _world_size(group)
        if world < 2:
            return
        try:
            setattr(exc, _NOTED, True)  # a nested routed call (teacher in student) notes once
        except AttributeError:  # an exception type with __slots__: note it every time
            pass
        rank = torch.distributed.get_rank()
        add_note(other_ranks_note(user_class_name(owner), name, type(entry).__name__, rank, world,
                                  _timeout_text(group)))

    @functools.partial(_forwards.opaque, recursive=True)  # stack walk, warnings: never compiled
    def on_outside_call(self, module: nn.Module) -> None:
        """A module forward was reached outside any wrapper forward: allow, warn or raise."""
        if module is self.wrapper and self.kind != "plain":  # FSDP2: calling the root is calling the wrapper
            if self.meta_pending:
                self.check_meta()
            return
        if not self.detect:
            return
        entry = find_entry(self, module, self.names)
        if entry is None:
            return  # called directly by user code (e.g. ddp.module(x) for rank-0 evaluation)
        registered = entry.module.__dict__.get(entry.method)
        if registered is not None and not _forwards.is_shim_bound(registered):
            return  # registered on the instance by someone else (register_fsdp_forward_method)
        cls = user_class_name(entry.module)
        if self.is_marked(entry.module, entry.method):
            raise UnmarkedEntryError(bypassed_mark_message(cls, entry.method, entry.chain))
        if recorder.ACTIVE is not None:
            recorder.ACTIVE.note(entry.module, entry.method, False, self.wrapper_name, entry.caller, self.wrapped_at)
        if self.mode == "record":
            return
        message = unmarked_entry_error(cls, entry.method, entry.chain, self.wrapper_name)
        if self.mode == "error":
            raise UnmarkedEntryError(message)
        key = (cls, entry.method)
        if key not in self.warned:
            self.warned.add(key)
            warnings.warn(message, UnmarkedEntryWarning, stacklevel=_levels_to(entry.caller))

    @functools.partial(_forwards.opaque, recursive=True)
    def check_meta(self) -> None:
        """Once per guard: refuse to run a model that still has meta tensors, naming them and their
        owning submodules (``runtime_shim.meta``'s message)."""
        self.meta_pending = False
        report = find_meta(self.wrapper if self.kind == "fsdp1" else self.root)  # FSDP1: flat param names
        if report:
            self.meta_pending = True  # keep refusing until materialised
            raise_for(report, "guarded model cannot run")


_NOTED = "_fwd_shim_noted"


def _levels_to(caller: Any) -> int:
    """The ``stacklevel`` that makes a warning issued by our caller point at ``caller``, the frame
    that called the entry method (the user's call site, not a line of torch); 2 if it is not on the stack."""
    frame, level = sys._getframe(1), 1
    while frame is not None and frame is not caller:
        frame, level = frame.f_back, level + 1
    return level if frame is not None else 2


# -- messages (candidates for lint_rules/contract.py) --------------------------------------------
def other_ranks_note(cls: str, method: str, wrapper: str, rank: int, world: int, timeout: str) -> str:
    return (
        f"fwdlint: {cls}.{method} raised on rank {rank} of {world} inside {wrapper}'s forward; the "
        "ranks that did not raise wait in their next collective (e.g. the gradient all-reduce of "
        f"backward) until this process exits or the process-group timeout ({timeout}) expires. Let "
        "the error end this process (its peers then fail at once), and bound the wait with "
        "init_process_group(..., timeout=datetime.timedelta(seconds=...)); destroying the process "
        "group while this process lives does not release them."
    )


def _world_size(group: Any) -> int:
    dist = torch.distributed
    if not (dist.is_available() and dist.is_initialized()):
        return 1
    try:
        return int(dist.get_world_size(group if isinstance(group, dist.ProcessGroup) else None))
    except (RuntimeError, ValueError):
        return 1


def _timeout_text(group: Any) -> str:
    """The process group's collective timeout, e.g. ``0:30:00`` (gloo's and the default)."""
    dist = torch.distributed
    try:
        pg = group if isinstance(group, dist.ProcessGroup) else dist.distributed_c10d._get_default_group()
        for device in pg._device_types:
            return str(pg._get_backend(device).options._timeout)
    except Exception:  # private API; the note stays useful without the number
        pass
    return "see init_process_group's timeout"


@_forwards.frame_skipped  # inlined by a compiled caller: one flag read once the check has passed
def _meta_pre_hook(module: nn.Module, args: Any) -> None:
    record = module.__dict__.get(GUARD_KEY)
    if record is not None and record.active and record.meta_pending:
        record.check_meta()


def _fsdp2_class() -> Optional[type]:
    try:
        from torch.distributed.fsdp import FSDPModule
    except ImportError:  # pragma: no cover - torch without FSDP2
        return None
    return FSDPModule


def records_in(modules: Iterable[nn.Module]) -> list[GuardRecord]:
    """Distinct records found on ``modules`` (used to absorb guards of nested wrappers)."""
    found: dict[int, GuardRecord] = {}
    for module in modules:
        record = module.__dict__.get(GUARD_KEY)
        if isinstance(record, GuardRecord):
            found[id(record)] = record
    return list(found.values())
