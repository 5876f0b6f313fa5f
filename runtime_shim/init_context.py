"""``empty_init``: build a module without running its parameter initialisation, compile-safe.

What: ``with empty_init(): model = Big()`` creates every parameter as uninitialised memory
(``torch.empty``) instead of running ``torch.nn.init``; load a checkpoint afterwards. It is what
FWD201 recommends instead of Lightning's ``_EmptyInit`` (behind ``fabric.init_module()``,
``trainer.init_module()``) when a ``torch.compile``-d module is called inside the context.

Why: ``_EmptyInit`` is a ``TorchFunctionMode`` whose ``__torch_function__`` first branches on
its own state (``if not self.enabled``), and it is pushed even when disabled (Fabric's
``init_module()`` enters ``_EmptyInit(enabled=False)`` by default). Dynamo traces an active
mode's ``__torch_function__`` into every compiled call made inside it, and Lightning issue #20524
(torch 2.5.1) reported ``UserError: Dynamic control flow is not supported at the moment`` at
that very line for a compiled submodule run inside the context. Here the mode is entered only
when enabled and its ``__torch_function__`` decides by ``func`` alone (frozenset membership), so
there is no mode attribute for Dynamo to branch on, and ``enabled=False`` pushes nothing.

Reproduction on the pinned torch 2.13.0 + lightning 2.6.6 (``benchmarks/empty_init.py
--only repro``): Lightning's ``_EmptyInit`` NO LONGER FAILS. A ``torch.compile``-d submodule
(``fullgraph=True`` and ``False``; backends ``eager`` and ``inductor``) built, compiled and
called inside ``_EmptyInit(True)``, ``_EmptyInit(False)``, the two nested,
``Fabric(accelerator="cpu", devices=1).init_module(empty_init=True)``, ``init_module()`` and
``Trainer.init_module(empty_init=True)`` compiles to one full graph per input shape with no
graph break and matches eager. The helper stays for the differences below and for older torch
(the report is against 2.5.1; only the pinned torch is installed here, so ours is not verified
on 2.5.1 -- it avoids the construct the report points at); the tests check ours under
``fullgraph=True`` on the pinned torch. Note: in 2.6.6, ``LightningModule.load_from_checkpoint`` does not enter
``_EmptyInit`` at all (only ``init_module`` does).

What is skipped, exactly as ``_EmptyInit``: a ``torch.nn.init`` function that reaches
``__torch_function__`` under its own name returns its tensor untouched. In torch 2.13 only
``uniform_``, ``normal_``, ``constant_`` and ``kaiming_uniform_`` dispatch that way, so the
initialisation of ``nn.Linear``, ``nn.Conv*``, ``nn.Embedding``, ``nn.Bilinear`` and the RNNs is
skipped, while ``xavier_*``, ``kaiming_normal_``, ``trunc_normal_``, ``orthogonal_``,
``ones_``/``zeros_``/``eye_``/``dirac_``/``sparse_`` (so ``nn.MultiheadAttention``'s in-projection,
``LayerNorm``, custom ``trunc_normal_`` inits) still run, in both helpers
(``tests/runtime/test_empty_init.py`` compares every ``torch.nn.init`` function under both).

Differences from ``_EmptyInit``:

* ``enabled=False`` is a true no-op (no mode on the stack, nothing for Dynamo to trace or guard
  on); ``_EmptyInit(False)`` -- what ``fabric.init_module()`` enters by default -- stays on the
  stack and routes every torch call of the block through Python. Measured: eager Linear(4, 4)
  forward 1.30x and building small layers 1.55x slower under ``_EmptyInit(False)`` than under
  ``empty_init(False)`` (which is 1.01x / 1.00x of no context); a module compiled and called
  inside ``_EmptyInit(False)`` is compiled again when called outside (2 graphs instead of 1).
  Enabled, both cost the same (1.03x / 1.02x) and both make Dynamo compile one graph inside and
  one outside, as any mode on the stack does. Neither re-enables initialisation inside an
  enclosing enabled context.
* The set of functions is fixed when this module is imported (every function whose
  ``__module__`` is ``torch.nn.init``); ``_EmptyInit`` tests ``func.__module__`` per call, so a
  replacement of a ``torch.nn.init`` function installed later (with ``functools.wraps``) is
  skipped by Lightning's and run by ours.
* It does not set the device or dtype (Fabric's ``init_module`` does that on top).

Common to both (torch 2.13): a ``torch.nn.init`` call made *inside* a compiled region is not
skipped: Dynamo's ``has_torch_function`` ignores active modes, so the init function runs its
body and the mode sees only the tensor methods it calls (``nn.init.constant_(ones, 5.0)``: eager
under the mode gives 1s, compiled gives 5s). Build modules outside compiled code.

Nesting, exceptions and threads: each ``with`` pushes a fresh mode and pops it on exit, also
when the block raises (``TorchFunctionMode.__exit__``); torch keeps the mode stack per thread,
so other threads initialise normally while one thread is inside the block.

Measured (``benchmarks/empty_init.py``; this machine: CPU, 2 cores shared with other jobs, torch
2.13.0, 2 torch threads): building 16 x ``nn.Linear(8192, 8192)`` = 1.07B fp32 parameters, each
variant in a fresh process, median of 3. Peak RSS is ``ru_maxrss`` (the baseline after imports is
0.30 GB); ``torch.empty`` memory is reserved but untouched, so it enters RSS only when a
checkpoint is loaded into it -- the saving is the 15 s of random initialisation and not writing
4 GB twice.

| variant                        | build time | x plain | peak RSS | RSS growth | x plain |
|--------------------------------|------------|---------|----------|------------|---------|
| plain (default init)           | 14.71 s    | 1       | 4.30 GB  | 4.001 GB   | 1       |
| ``empty_init()``               | 3.5 ms     | 0.0002  | 0.30 GB  | 0.000 GB   | 0.0001  |
| Lightning ``_EmptyInit(True)`` | 3.3 ms     | 0.0002  | 0.30 GB  | 0.000 GB   | 0.0001  |
| ``torch.device("meta")``       | 10.6 ms    | 0.0007  | 0.30 GB  | 0.001 GB   | 0.0003  |

(A first run under heavier load gave plain 20.0 s, ``empty_init`` 7 ms, ``_EmptyInit`` 4 ms,
meta 6 ms, same memory: the milliseconds are noise; the two helpers are equal.)
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any, Callable, Optional

import torch.nn.init
from torch.overrides import TorchFunctionMode

__all__ = ["empty_init"]

# The predicate _EmptyInit evaluates per call, evaluated once over the module's namespace.
_INIT_FUNCTIONS: frozenset[Callable[..., Any]] = frozenset(
    value
    for value in vars(torch.nn.init).values()
    if callable(value) and getattr(value, "__module__", None) == torch.nn.init.__name__
)


class _SkipInit(TorchFunctionMode):
    """Returns the tensor of a ``torch.nn.init`` call untouched; passes everything else on.

    No state and no ``__enter__``/``__exit__`` override: Dynamo then treats it as a plain
    supported mode and has nothing to guard or branch on.
    """

    def __torch_function__(
        self,
        func: Callable[..., Any],
        types: Sequence[type],
        args: Sequence[Any] = (),
        kwargs: Optional[dict[str, Any]] = None,
    ) -> Any:
        if func in _INIT_FUNCTIONS:
            # torch.nn.init dispatches with the tensor as keyword; positional as a fallback.
            if kwargs and "tensor" in kwargs:
                return kwargs["tensor"]
            return args[0]
        return func(*args, **(kwargs or {}))


@contextlib.contextmanager
def empty_init(enabled: bool = True) -> Iterator[None]:
    """Skip ``torch.nn.init`` parameter initialisation in the block (uninitialised memory).

    ``enabled=False`` does nothing at all. Usable as a decorator too. Load real weights before
    using the model: the parameters hold whatever the allocator returned.
    """
    if not enabled:
        yield
        return
    with _SkipInit():
        yield
