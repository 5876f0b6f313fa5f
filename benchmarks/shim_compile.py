#!/usr/bin/env python3
"""``torch.compile`` and the runtime shim: graphs, graph breaks and time, guarded vs unguarded.

    python benchmarks/shim_compile.py [--sizes 10,100] [--dim 128] [--batch 64] [--backend inductor]

Not a test (no assertions). One process, a 1-rank gloo group, CPU, one thread. For a chain of N
``Linear(dim, dim)`` (a marked ``generate`` that calls ``self(x)``) it prints, per case, the graphs
and graph breaks ``torch._dynamo.explain`` reports for the unguarded and the guarded model, and
the median time of a compiled training step (forward, ``.sum().backward()``) of each side, with
the median of the paired guarded/unguarded ratios (``shim_overhead.side_by_side``):

* ``compile(ddp)``: ``torch.compile(DistributedDataParallel(model))`` vs the same with ``guard``.
* ``compile(model.generate)``: the compiled marked method; guarded it runs through DDP's forward
  (gradients all-reduced), unguarded it bypasses DDP (the hazard: local gradients only), so the
  ratio is the whole price of routing, DDP's forward included.
* ``... vs generate as DDP's forward``: the unguarded side is ``torch.compile(DDP(m))`` of a model
  whose ``forward`` does ``generate``'s work: the same computation and the same DDP forward, so the
  ratio is what routing itself costs under compile.

Before issue 11 the guarded DDP's forward (``wrapper_forward``) held an unsupported context
manager around DDP's forward, so Dynamo broke the graph there (2 graphs, 1 break for 1 graph, 0
breaks unguarded) and ``torch.compile(model.generate)`` failed ("Guard failed on the same frame it
was created" / "routing ... failed"). The shim's own functions are now never compiled and never
break a graph on the fast path (``runtime_shim/_forwards.py``).
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
from typing import Any, Callable

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.dirname(HERE), HERE]

import torch  # noqa: E402
import torch._dynamo as dynamo  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch import nn  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402

from runtime_shim import forward_entry, guard, uninstall  # noqa: E402
from shim_overhead import _fmt, side_by_side  # noqa: E402


class Chain(nn.Module):
    def __init__(self, n: int, dim: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(dim, dim) for _ in range(n))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = torch.tanh(layer(x))
        return x

    @forward_entry
    def generate(self, x: torch.Tensor) -> torch.Tensor:
        return self(x) + self(x.flip(0))


class GenerateAsForward(Chain):
    """Unguarded, correct counterpart of the routed ``generate``: the same work as DDP's forward."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return Chain.forward(self, x) + Chain.forward(self, x.flip(0))


def _explain(fn: Callable[..., Any], x: torch.Tensor) -> str:
    """What ``torch._dynamo.explain`` counts. DDPOptimizer's intentional splits at DDP's gradient
    buckets are counted as breaks too; they are named, since they come with DDP's forward (routed
    or compiled whole), not with the shim."""
    dynamo.reset()
    result = dynamo.explain(fn)(x)
    split = any(reason.reason.startswith("DDPOptimizer") for reason in result.break_reasons)
    text = f"{result.graph_count}/{result.graph_break_count}"
    return text + (" (DDPOptimizer bucket split)" if split else "")


def _step(fn: Callable[[torch.Tensor], torch.Tensor], model: nn.Module, x: torch.Tensor) -> Callable[[], None]:
    def step() -> None:
        model.zero_grad(set_to_none=True)
        fn(x).sum().backward()

    return step


def measure(n: int, args: argparse.Namespace, x: torch.Tensor) -> list[tuple[Any, ...]]:
    torch.manual_seed(0)
    plain_model, guarded_model, as_forward = Chain(n, args.dim), Chain(n, args.dim), GenerateAsForward(n, args.dim)
    guarded_model.load_state_dict(plain_model.state_dict())
    as_forward.load_state_dict(plain_model.state_dict())
    plain_ddp, guarded_ddp, as_forward_ddp = DDP(plain_model), guard(DDP(guarded_model)), DDP(as_forward)
    cases = [
        ("compile(ddp)", plain_ddp, guarded_ddp, plain_model, guarded_model),
        ("compile(model.generate)", plain_model.generate, guarded_model.generate, plain_model, guarded_model),
        ("compile(model.generate) vs generate as DDP's forward", as_forward_ddp, guarded_model.generate,
         as_forward, guarded_model),
    ]
    rows = []
    for name, plain_fn, guarded_fn, pm, gm in cases:
        try:
            shape = (_explain(plain_fn, x), _explain(guarded_fn, x))
            dynamo.reset()
            plain_c = torch.compile(plain_fn, backend=args.backend)
            guarded_c = torch.compile(guarded_fn, backend=args.backend)
            t_plain, t_guard, ratio = side_by_side(_step(plain_c, pm, x), _step(guarded_c, gm, x),
                                                   args.pairs, args.target)
        except Exception as exc:  # e.g. run against an older shim: report, go on
            rows.append((name, n, "-", f"fails: {type(exc).__name__}: {str(exc).splitlines()[0][:60]}",
                         None, None, None))
            continue
        rows.append((name, n, *shape, t_plain, t_guard, ratio))
        print(f"  measured {name} at {n} modules", file=sys.stderr, flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10,100")
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--backend", default="inductor")
    parser.add_argument("--pairs", type=int, default=11, help="paired samples per comparison")
    parser.add_argument("--target", type=float, default=0.05, help="seconds per sample (at least one call)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    uninstall()  # the unguarded side must not be routed by importing runtime_shim
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    x = torch.randn(args.batch, args.dim)
    rows = [row for n in (int(s) for s in args.sizes.split(",")) for row in measure(n, args, x)]
    dist.destroy_process_group()
    print(f"\ntorch.compile and runtime_shim  (torch {torch.__version__}, backend {args.backend}, "
          f"Linear({args.dim},{args.dim}) + tanh x N, batch {args.batch}, 1 thread, CPU, training step)\n")
    head = ("case", "modules", "graphs/breaks unguarded", "graphs/breaks guarded", "step unguarded",
            "step guarded", "guarded/unguarded")
    print(" | ".join(head))
    print(" | ".join("---" for _ in head))
    for name, n, plain_shape, guarded_shape, tp, tg, ratio in rows:
        times = [_fmt(tp), _fmt(tg), f"{ratio:.3f}"] if ratio is not None else ["-", "-", "-"]
        print(" | ".join([name, f"{n:,}", plain_shape, guarded_shape, *times]))
    print("\nratios are medians of paired samples; times are medians; unguarded compile(model.generate) "
          "bypasses DDP (its gradients are not all-reduced)")


if __name__ == "__main__":
    main()
