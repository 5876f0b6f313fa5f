#!/usr/bin/env python3
"""What recording costs (``FWD_SHIM_MODE=record``, ``pytest --fwd-record``), side by side in one run.

    python benchmarks/record_overhead.py [--sizes 1000] [--dim 128] [--batch 64]

One process, a 1-rank gloo group, CPU, one thread; models are chains of N ``Linear(dim, dim)``
(``shim_overhead.Chain``), each DDP-wrapped and guarded. For each N it prints, as medians of paired
samples (``shim_overhead.side_by_side``):

* forward: ``ddp(x)`` in mode ``record`` with a recorder active / in mode ``error`` without one;
* marked method: ``ddp.module.generate(x)`` routed and recorded (one count per call) / routed;
* unmarked method: ``ddp.module.probe(x)`` recorded, run on / in mode ``warn`` (warned once, run
  on). Mode ``error`` raises there instead, so ``warn`` is the mode that runs the same work.

The recorder merges into a temporary file; only first observations write it (once per entry), the
counts at exit, so the timed calls only count.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import warnings

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from runtime_shim import guard, recorder
from shim_overhead import Chain, _fmt, one_rank_group, side_by_side


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000")
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--pairs", type=int, default=21, help="paired samples per comparison")
    parser.add_argument("--target", type=float, default=0.05, help="seconds per sample (at least one call)")
    args = parser.parse_args()
    warnings.simplefilter("ignore")  # warn mode's one warning per entry, not the benchmark's business
    one_rank_group()
    x = torch.randn(args.batch, args.dim)
    directory = tempfile.mkdtemp(prefix="fwdlint-record-bench-")
    active = recorder.start(os.path.join(directory, "record.json"))
    recorder.ACTIVE = None

    def recording(fn):  # the recorder is per process: on for one side only
        def call() -> object:
            recorder.ACTIVE = active
            try:
                return fn()
            finally:
                recorder.ACTIVE = None
        return call

    rows = []
    for n in (int(s) for s in args.sizes.split(",")):
        torch.manual_seed(0)
        recorded, checked, warned = (Chain(n, args.dim) for _ in range(3))
        rec = guard(DDP(recorded), mode="record")
        err = guard(DDP(checked), mode="error")
        warn = guard(DDP(warned), mode="warn")
        with torch.no_grad():
            t_err, t_rec, r_fwd = side_by_side(lambda: err(x), recording(lambda: rec(x)), args.pairs, args.target)
            t_err_m, t_rec_m, r_marked = side_by_side(lambda: err.module.generate(x),
                                                      recording(lambda: rec.module.generate(x)),
                                                      args.pairs, args.target)
            t_warn_u, t_rec_u, r_unmarked = side_by_side(lambda: warn.module.probe(x),
                                                         recording(lambda: rec.module.probe(x)),
                                                         args.pairs, args.target)
        rows.append((n, t_err, t_rec, r_fwd, t_err_m, t_rec_m, r_marked, t_warn_u, t_rec_u, r_unmarked))
        print(f"  measured {n} modules", file=sys.stderr, flush=True)
    recorder.ACTIVE = active
    recorder.stop()
    dist.destroy_process_group()
    print(f"\nrecording overhead  (torch {torch.__version__}, Linear({args.dim},{args.dim}) x N, batch {args.batch}, "
          "1 thread, CPU)\n")
    head = ("modules", "fwd: error", "fwd: record", "record/error", "marked: error", "marked: record", "record/error",
            "unmarked: warn", "unmarked: record", "record/warn")
    print(" | ".join(head))
    print(" | ".join("---" for _ in head))
    for n, te, tr, rf, tem, trm, rm, twu, tru, ru in rows:
        print(" | ".join([f"{n:,}", _fmt(te), _fmt(tr), f"{rf:.3f}", _fmt(tem), _fmt(trm), f"{rm:.3f}", _fmt(twu),
                          _fmt(tru), f"{ru:.3f}"]))
    print("\nratios are medians of paired samples; times are medians")


if __name__ == "__main__":
    main()
