#!/usr/bin/env python3
"""Cost of building a large model under init contexts, and the compile reproduction (not a test).

    python benchmarks/empty_init.py [--layers 16] [--dim 8192] [--repeats 3] [--only bench|overhead|repro]

bench: builds ``layers`` x ``nn.Linear(dim, dim)`` (default 16 x 8192^2 = 1.07B fp32 parameters,
4.3 GB) under four variants -- plain construction (default init), ``runtime_shim.empty_init()``,
Lightning's ``_EmptyInit(enabled=True)`` and ``torch.device("meta")`` -- each in a fresh
subprocess, repeats interleaved (plain, ours, Lightning, meta, plain, ...). Every child imports the
same modules (torch, runtime_shim.init_context, lightning's init module) before measuring, so the
baselines agree. It prints the median build time, the peak RSS (``ru_maxrss``, the process's
high-water mark) and the RSS growth over the pre-build baseline, with ratios vs plain. Memory
returned by ``torch.empty`` is reserved but not touched, so it does not count in RSS until a
checkpoint is loaded into it: the saving is in time and in not touching memory twice.

overhead: in one process, the eager cost of being inside each context (enabled and disabled) for a
``Linear(4, 4)`` forward and for building small layers, as medians of paired ratios.

repro: runs a ``torch.compile``-d submodule (backends eager and inductor, ``fullgraph`` True and
False) built, compiled and called inside Lightning's contexts and ours, and prints what happens:
the first line of the error, or ``ok`` with the number of graphs, graph breaks and whether the
results match eager. Then, how many graphs one compiled module needs when called inside, outside
and inside the context again (a mode on the stack is part of Dynamo's guards). Last, what a
``torch.nn.init`` call inside a compiled region does under each mode (Dynamo's
``has_torch_function`` ignores modes, so the init runs).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from typing import Any, Callable, ContextManager

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

VARIANTS = ["plain", "empty_init", "lightning _EmptyInit", "meta device"]


def _context(variant: str) -> ContextManager[Any]:
    import torch
    from lightning.fabric.utilities.init import _EmptyInit

    from runtime_shim.init_context import empty_init

    if variant == "plain":
        return contextlib.nullcontext()
    if variant == "empty_init":
        return empty_init()
    if variant == "lightning _EmptyInit":
        return _EmptyInit(enabled=True)
    if variant == "meta device":
        return torch.device("meta")
    raise ValueError(variant)


def child(variant: str, layers: int, dim: int) -> None:
    """Build the model once in this (fresh) process and print one JSON line."""
    import torch
    from torch import nn

    ctx = _context(variant)
    base_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    with ctx:
        model = nn.Sequential(*(nn.Linear(dim, dim) for _ in range(layers)))
    seconds = time.perf_counter() - start
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    params = sum(p.numel() for p in model.parameters())
    print(json.dumps({"seconds": seconds, "peak_kib": peak_kib, "base_kib": base_kib, "params": params,
                      "threads": torch.get_num_threads()}))


def bench(layers: int, dim: int, repeats: int) -> None:
    runs: dict[str, list[dict[str, Any]]] = {v: [] for v in VARIANTS}
    for _ in range(repeats):
        for variant in VARIANTS:
            command = [sys.executable, os.path.abspath(__file__), "--child", variant,
                       "--layers", str(layers), "--dim", str(dim)]
            out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
            runs[variant].append(json.loads(out.strip().splitlines()[-1]))
    first = runs["plain"][0]
    print(f"{layers} x nn.Linear({dim}, {dim}) = {first['params'] / 1e9:.2f}B fp32 parameters; "
          f"{os.cpu_count()} cores, torch threads {first['threads']}; median of {repeats} fresh processes per variant")

    def med(variant: str, key: Callable[[dict[str, Any]], float]) -> float:
        return statistics.median(key(r) for r in runs[variant])

    plain_t = med("plain", lambda r: r["seconds"])
    plain_d = med("plain", lambda r: r["peak_kib"] - r["base_kib"])
    header = (f"| {'variant':22} | {'build time':>10} | {'x plain':>7} | {'peak RSS':>9} | "
              f"{'RSS growth':>10} | {'x plain':>7} |")
    print(header)
    print("|" + "|".join("-" * (len(c)) for c in header.split("|")[1:-1]) + "|")
    for variant in VARIANTS:
        t = med(variant, lambda r: r["seconds"])
        peak = med(variant, lambda r: r["peak_kib"])
        grow = med(variant, lambda r: r["peak_kib"] - r["base_kib"])
        shown = f"{t:8.2f} s " if t >= 1 else f"{t * 1e3:7.1f} ms"
        print(f"| {variant:22} | {shown} | {t / plain_t:7.4f} | {peak / 2**20:6.2f} GB | "
              f"{grow / 2**20:7.3f} GB | {grow / plain_d:7.4f} |")


def overhead(pairs: int = 100) -> None:
    """Eager cost of being inside each context, as paired ratios (A then B, B then A, ...), so
    load from other processes on the machine affects both sides alike. One thread."""
    import torch
    from lightning.fabric.utilities.init import _EmptyInit
    from torch import nn

    from runtime_shim.init_context import empty_init

    torch.set_num_threads(1)
    x, lin = torch.randn(4, 4), nn.Linear(4, 4)

    def forward(make: Callable[[], ContextManager[Any]]) -> float:
        with make():
            start = time.perf_counter()
            for _ in range(500):
                lin(x)
            return time.perf_counter() - start

    def build(make: Callable[[], ContextManager[Any]]) -> float:
        with make():
            start = time.perf_counter()
            nn.Sequential(*(nn.Linear(64, 64) for _ in range(50)))
            return time.perf_counter() - start

    comparisons: list[tuple[str, Callable[[], ContextManager[Any]], str, Callable[[], ContextManager[Any]]]] = [
        ("_EmptyInit(False)", lambda: _EmptyInit(enabled=False), "empty_init(False)", lambda: empty_init(False)),
        ("_EmptyInit(True)", lambda: _EmptyInit(enabled=True), "empty_init()", empty_init),
        ("empty_init(False)", lambda: empty_init(False), "no context", contextlib.nullcontext),
    ]
    print(f"eager overhead: median of {pairs} paired ratios, 1 thread "
          "(forward: 500 x Linear(4, 4); build: 50 x Linear(64, 64))")
    for a_name, a, b_name, b in comparisons:
        for what, measure in (("forward", forward), ("build", build)):
            ratios = []
            for i in range(pairs):
                if i % 2:
                    ta = measure(a)
                    tb = measure(b)
                else:
                    tb = measure(b)
                    ta = measure(a)
                ratios.append(ta / tb)
            print(f"  {what:8} {a_name:18} / {b_name:18} = {statistics.median(ratios):.3f}")


# ---------------------------------------------------------------- repro


def repro() -> None:
    import torch
    from lightning.fabric import Fabric
    from lightning.fabric.utilities.init import _EmptyInit
    from torch import nn
    from torch._dynamo.utils import counters

    from runtime_shim.init_context import empty_init

    print(f"torch {torch.__version__}, lightning {__import__('lightning').__version__}")

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc1 = nn.Linear(8, 16)
            self.fc2 = nn.Linear(16, 8)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.fc2(torch.relu(self.fc1(x)) + torch.zeros_like(self.fc1.bias)) * 2

    class Owner(nn.Module):
        # built, compiled and run inside the context (the pattern of Lightning issue #20524)
        def __init__(self, source: nn.Module, **compile_kwargs: Any) -> None:
            super().__init__()
            self.block = Block()
            self.block.load_state_dict(source.state_dict())
            self.compiled = torch.compile(self.block, **compile_kwargs)
            self.probe = self.compiled(torch.ones(2, 8))

    def nested() -> ContextManager[Any]:
        stack = contextlib.ExitStack()
        stack.enter_context(_EmptyInit(True))
        stack.enter_context(_EmptyInit(False))
        return stack

    fabric = Fabric(accelerator="cpu", devices=1)
    try:
        import lightning.pytorch as pl

        trainer = pl.Trainer(accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                             enable_progress_bar=False, enable_model_summary=False)
    except Exception:  # noqa: BLE001 -- the Trainer row is optional
        trainer = None
    contexts: list[tuple[str, Callable[[], ContextManager[Any]]]] = [
        ("_EmptyInit(True)", lambda: _EmptyInit(enabled=True)),
        ("_EmptyInit(False)", lambda: _EmptyInit(enabled=False)),
        ("_EmptyInit(True)+(False)", nested),
        ("fabric.init_module(True)", lambda: fabric.init_module(empty_init=True)),
        ("fabric.init_module()", lambda: fabric.init_module()),
        ("empty_init()", lambda: empty_init()),
        ("empty_init(False)", lambda: empty_init(enabled=False)),
    ]
    if trainer is not None:
        contexts.insert(5, ("trainer.init_module(True)", lambda: trainer.init_module(empty_init=True)))
    backends = ["eager"] + (["inductor"] if shutil.which("cc") or shutil.which("gcc") else [])
    x = torch.randn(3, 8)
    for backend in backends:
        for fullgraph in (True, False):
            for name, make in contexts:
                torch._dynamo.reset()
                counters.clear()
                source = Block()
                try:
                    with make():
                        owner = Owner(source, backend=backend, fullgraph=fullgraph)
                        out = owner.compiled(x)
                    same = torch.allclose(out, source(x)) and torch.allclose(owner.probe, source(torch.ones(2, 8)))
                    graphs = counters["stats"]["unique_graphs"]
                    breaks = sum(counters["graph_break"].values())
                    result = f"ok: {graphs} graphs, {breaks} graph breaks, matches eager: {same}"
                except Exception as exc:  # noqa: BLE001 -- reporting what happens is the point
                    lines = str(exc).strip().splitlines()
                    result = f"{type(exc).__name__}: {lines[0] if lines else ''}"
                print(f"{backend:8} fullgraph={fullgraph!s:5} {name:26} {result}")

    lin = nn.Linear(8, 8)
    for name, make in contexts:
        if name.startswith(("fabric", "trainer", "_EmptyInit(True)+")):
            continue
        torch._dynamo.reset()
        counters.clear()
        compiled_lin = torch.compile(lin, backend="eager", fullgraph=True)
        with make():
            compiled_lin(x)
        compiled_lin(x)
        with make():
            compiled_lin(x)
        print(f"graphs compiled for calls inside, outside, inside {name:18}: {counters['stats']['unique_graphs']}")

    def constant(t: torch.Tensor) -> torch.Tensor:
        return nn.init.constant_(t, 5.0)

    for name, make in (("_EmptyInit(True)", lambda: _EmptyInit(enabled=True)), ("empty_init()", empty_init)):
        torch._dynamo.reset()
        with make():
            eager = constant(torch.ones(2))
            compiled = torch.compile(constant, fullgraph=True, backend="eager")(torch.ones(2))
        print(f"nn.init.constant_(ones, 5.0) under {name}: eager -> {eager.tolist()}, compiled -> {compiled.tolist()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=16)
    parser.add_argument("--dim", type=int, default=8192)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--only", choices=["bench", "overhead", "repro"])
    parser.add_argument("--child", choices=VARIANTS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.layers, args.dim)
        return
    if args.only in (None, "bench"):
        bench(args.layers, args.dim, args.repeats)
    if args.only in (None, "overhead"):
        overhead()
    if args.only in (None, "repro"):
        repro()


if __name__ == "__main__":
    main()
