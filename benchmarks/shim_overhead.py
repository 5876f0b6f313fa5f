#!/usr/bin/env python3
"""Overhead of runtime_shim, measured side by side in one run (not a test: no assertions).

    python benchmarks/shim_overhead.py [--sizes 10,100,1000,10000] [--dim 128] [--batch 64]

One process, a 1-rank gloo group, CPU, one thread. For models of N submodules (a chain of N
``Linear(dim, dim)``) it prints:

* forward: ``ddp(x)`` guarded / unguarded  (target: <= 1.03 at 1,000 modules)
* marked method: ``fabric_module.generate(x)`` routed by us / by Fabric's ``mark_forward_method``
* unmarked call detection: an unmarked method that calls one layer, through the ``_FabricModule``
  of a DDP model: Fabric's tracker (hooks on every module, error after the computation) / ours
  (raises at the first module boundary)  (target: Fabric's >= 10x ours at 1,000 modules)
* unmarked clean call: an unmarked method that computes nothing, Fabric's tracker / ours

Each comparison takes paired samples (A then B, then B then A, ...) and reports the median time
of each side and the median of the per-pair ratios, so machine drift affects both sides alike.
Forward timings run under ``torch.no_grad()``: less work per module, so the relative overhead is
the conservative (larger) one.
"""

from __future__ import annotations

import argparse
import gc
import os
import socket
import statistics
import sys
import time
from typing import Callable

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch import nn  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402

from runtime_shim import UnmarkedEntryError, forward_entry, guard  # noqa: E402


class Chain(nn.Module):
    def __init__(self, n: int, dim: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(dim, dim) for _ in range(n))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x)
        return x

    @forward_entry
    def generate(self, x: torch.Tensor) -> torch.Tensor:
        return self(x)

    def probe(self, x: torch.Tensor) -> torch.Tensor:  # unmarked, computes
        return self.layers[0](x)

    def describe(self) -> int:  # unmarked, computes nothing
        return len(self.layers)


def _batch_size(fn: Callable[[], object], target: float) -> int:
    fn()
    start = time.perf_counter()
    fn()
    once = max(time.perf_counter() - start, 1e-7)
    return max(1, int(target / once))


def _run(fn: Callable[[], object], reps: int) -> float:
    start = time.perf_counter()
    for _ in range(reps):
        fn()
    return (time.perf_counter() - start) / reps


def side_by_side(
    a: Callable[[], object], b: Callable[[], object], pairs: int, target: float
) -> tuple[float, float, float]:
    """Paired samples (A then B, B then A, alternating): medians of A, of B and of the B/A ratios.

    Pairing cancels the slow drift of a shared machine, which dominates a min-of-runs estimate.
    """
    reps = min(_batch_size(a, target), _batch_size(b, target))  # the slower side sets the batch
    ta: list[float] = []
    tb: list[float] = []
    gc.collect()
    gc.disable()
    try:
        for i in range(pairs):
            if i % 2:
                tb.append(_run(b, reps))
                ta.append(_run(a, reps))
            else:
                ta.append(_run(a, reps))
                tb.append(_run(b, reps))
    finally:
        gc.enable()
    ratios = [y / x for x, y in zip(ta, tb)]
    return statistics.median(ta), statistics.median(tb), statistics.median(ratios)


def _raises(fn: Callable[[], object], exc: type[BaseException]) -> Callable[[], None]:
    def call() -> None:
        try:
            fn()
        except exc:
            return
        raise AssertionError("expected an error")

    return call


def fabric_module(model: nn.Module, wrapper: nn.Module):
    from lightning.fabric import Fabric
    from lightning.fabric.wrappers import _FabricModule

    strategy = Fabric(accelerator="cpu", devices=1).strategy
    return _FabricModule(wrapper, strategy, original_module=model)  # what Fabric's DDP strategy builds


def remove_leaked_hooks(model: nn.Module) -> None:
    """Fabric's tracker leaves its hooks behind when its error fires; clear them between calls."""
    for module in model.modules():
        module._forward_hooks.clear()


def one_rank_group() -> None:
    """One thread, and a 1-rank gloo group on a free port (what every comparison here runs in)."""
    torch.set_num_threads(1)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10,100,1000,10000")
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--pairs", type=int, default=21, help="paired samples per comparison")
    parser.add_argument("--target", type=float, default=0.05, help="seconds per sample (at least one call)")
    args = parser.parse_args()
    one_rank_group()
    x = torch.randn(args.batch, args.dim)
    rows = []
    for n in (int(s) for s in args.sizes.split(",")):
        torch.manual_seed(0)
        plain_model, ours_model, fabric_model = (Chain(n, args.dim) for _ in range(3))
        plain = DDP(plain_model)
        ours = guard(DDP(ours_model))
        ours_f = guard(fabric_module(ours_model, ours))
        theirs_f = fabric_module(fabric_model, DDP(fabric_model))
        theirs_f.mark_forward_method("generate")
        pairs, target = args.pairs, args.target
        with torch.no_grad():
            t_plain, t_guard, r_fwd = side_by_side(lambda: plain(x), lambda: ours(x), pairs, target)
            t_ours_m, t_fab_m, r_marked = side_by_side(
                lambda: ours_f.generate(x), lambda: theirs_f.generate(x), pairs, target)

        def fabric_detect() -> None:
            try:
                theirs_f.probe(x)
            except RuntimeError as exc:
                assert "mark_forward_method" in str(exc)
            else:
                raise AssertionError("Fabric did not detect the unmarked call")
            remove_leaked_hooks(fabric_model)  # counted against Fabric: O(#modules) too, but small

        t_our_det, t_fab_det, r_det = side_by_side(_raises(lambda: ours_f.probe(x), UnmarkedEntryError),
                                                   fabric_detect, pairs, target)
        t_our_clean, t_fab_clean, r_clean = side_by_side(
            lambda: ours_f.describe(), lambda: theirs_f.describe(), pairs, target)
        rows.append((n, t_plain, t_guard, r_fwd, t_ours_m, t_fab_m, r_marked, t_our_det, t_fab_det, r_det,
                     t_our_clean, t_fab_clean, r_clean))
        print(f"  measured {n} modules", file=sys.stderr, flush=True)
    dist.destroy_process_group()
    print(f"\nruntime_shim overhead  (torch {torch.__version__}, Linear({args.dim},{args.dim}) x N, "
          f"batch {args.batch}, 1 thread, CPU)\n")
    head = ("modules", "fwd plain", "fwd guarded", "guarded/plain", "per module", "marked: ours",
            "marked: Fabric",
            "Fabric/ours", "detect: ours", "detect: Fabric", "Fabric/ours", "clean: ours", "clean: Fabric",
            "Fabric/ours")
    print(" | ".join(head))
    print(" | ".join("---" for _ in head))
    for n, tp, tg, rf, tom, tfm, rm, tod, tfd, rd, toc, tfc, rc in rows:
        print(" | ".join([
            f"{n:,}", _fmt(tp), _fmt(tg), f"{rf:.3f}", f"{(rf - 1) * tp / n * 1e6:+.2f} us",
            _fmt(tom), _fmt(tfm),
            f"{rm:.2f}", _fmt(tod), _fmt(tfd), f"{rd:.1f}x", _fmt(toc), _fmt(tfc), f"{rc:.1f}x",
        ]))
    print("\nratios are medians of paired samples; times are medians")


def _fmt(seconds: float) -> str:
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds * 1e6:.1f} us"


if __name__ == "__main__":
    main()
