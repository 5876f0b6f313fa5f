"""A routed method that leaves DDP parameters unused: a clear error instead of a silent step.

DDP built with ``find_unused_parameters=False`` (its default, and Fabric's) waits in backward for a
gradient of every parameter. A method routed through its forward that uses only some of them
(``encode`` of an encoder-decoder) makes the reducer wait forever: the buckets holding an unused
parameter are never all-reduced -- the used parameters that share them keep rank-local gradients
-- and the next forward fails with DDP's generic "Expected to have finished reduction in the prior
iteration". Measured on 2 gloo ranks, torch 2.13.

``check_routed_output`` runs inside ``GuardRecord.route`` after DDP's forward returned. It walks
the output's autograd graph (what DDP does in C++ on every iteration with
``find_unused_parameters=True``) and collects the parameters it does not reach. If there are any,
it notes their gradients, and a hook on the output queues, when backward reaches it, a check for
the end of that backward: a parameter whose gradient is still the same (a loss of this output
alone) raises ``UnusedParametersError`` out of ``backward()``, on every rank alike, naming the
method and the parameters. A loss that also covers the rest (another forward added in) passes; an
output never backpropagated, or computed under ``torch.no_grad()``, costs nothing more. (Zeroing
gradients in place between the call and its backward hides the case: the check then passes, and
DDP's own error follows at the next forward, with the note.) A method whose output reached every
parameter is not walked again; if a later call leaves some unused (data-dependent control flow),
DDP's own error at the next forward gets a note naming the last routed method (``reduction_note``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Iterator

import torch

from runtime_shim.errors import UnusedParametersError


def unused_message(cls: str, method: str, names: list[str]) -> str:
    shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    return (
        f"fwdlint: {cls}.{method} ran through DistributedDataParallel's forward, but its output does "
        f"not depend on {len(names)} parameter(s) DDP waits for in backward ({shown}); DDP would "
        "never all-reduce their buckets (gradients silently stay per-rank) and fail at the next "
        "forward. Build DDP with find_unused_parameters=True (Fabric: "
        "DDPStrategy(find_unused_parameters=True)), or run the method under torch.no_grad() if it "
        "is inference only."
    )


def reduction_note(cls: str, method: str) -> str:
    return (
        f"fwdlint: the last method routed through this DDP was {cls}.{method}; if it leaves some "
        "parameters unused, build DDP with find_unused_parameters=True"
    )


def _tensors(value: Any, depth: int = 0) -> Iterator[torch.Tensor]:
    """Tensors in a method's output: nested lists, tuples, dicts (Hugging Face outputs) and dataclasses."""
    if isinstance(value, torch.Tensor):
        yield value
    elif depth > 8:
        return
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _tensors(item, depth + 1)
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _tensors(item, depth + 1)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for field in dataclasses.fields(value):
            yield from _tensors(getattr(value, field.name, None), depth + 1)


def _reached(outputs: list[torch.Tensor]) -> set[int]:
    """ids of the leaf tensors (parameters) the outputs' autograd graph accumulates into."""
    reached = {id(t) for t in outputs if t.grad_fn is None}  # a parameter returned as is
    stack = [t.grad_fn for t in outputs if t.grad_fn is not None]
    seen: set[int] = set()
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        variable = getattr(node, "variable", None)  # AccumulateGrad
        if variable is not None:
            reached.add(id(variable))
        stack.extend(nxt for nxt, _ in node.next_functions if nxt is not None)
    return reached


def _waited_for(ddp: Any) -> list[tuple[str, torch.nn.Parameter]]:
    ignored = getattr(ddp, "parameters_to_ignore", set())
    return [(n, p) for n, p in ddp.module.named_parameters() if p.requires_grad and n not in ignored]


def _grad_state(p: torch.Tensor) -> Any:
    grad = p.grad
    return None if grad is None else (id(grad), grad._version)


def check_routed_output(record: Any, cls: str, method: str, out: Any) -> None:
    """See the module docstring. Called for DDP guards only, with grad enabled."""
    ddp = record.wrapper
    if (method in record.all_used or getattr(ddp, "find_unused_parameters", True)
            or getattr(ddp, "static_graph", False) or not getattr(ddp, "require_backward_grad_sync", True)):
        return
    outputs = [t for t in _tensors(out) if t.requires_grad and t.grad_fn is not None]
    if not outputs:
        return  # nothing can start a backward
    reached = _reached(outputs)
    unused = [(name, p) for name, p in _waited_for(ddp) if id(p) not in reached]
    if not unused:
        record.all_used.add(method)
        return
    # Their gradients now: a backward may reach them through another output before it reaches this one.
    before = [_grad_state(p) for _, p in unused]
    queued: list[bool] = []

    def at_backward(grad: torch.Tensor) -> None:
        if queued:  # once per backward, whichever output it reaches first
            return
        queued.append(True)

        def at_end() -> None:
            queued.clear()
            missing = [name for (name, p), state in zip(unused, before) if _grad_state(p) == state]
            if missing:
                raise UnusedParametersError(unused_message(cls, method, missing))

        torch.autograd.Variable._execution_engine.queue_callback(at_end)

    for tensor in outputs:  # never a hook that outlives this output: no parameter is among them
        tensor.register_hook(at_backward)
