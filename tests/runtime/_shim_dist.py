"""Run a function on 2 real gloo ranks (processes of their own) with a hard timeout.

Ranks are forked by a fork server that imported torch once per pytest process (``forkserver``, a
start method torch.multiprocessing supports), instead of each importing it afresh (``spawn``: two
torch imports per test, most of a short test's CPU). Each rank still starts from a process where
nothing but torch is loaded, with the test process's current environment and import path.

Each test gets a fresh free port from the OS (bind to port 0), never a hash of a string. A rank
reports ("ok", value) or ("error", type name, message, traceback) through a queue; a hang or a
dead rank fails the test instead of blocking the run.
"""

from __future__ import annotations

import os
import queue as queue_mod
import socket
import sys
import time
import traceback
from typing import Any, Callable

import torch.multiprocessing as mp

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
MODELS = os.path.join(ROOT, "fixtures", "runtime_models")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


_CONTEXT = mp.get_context("forkserver")
_CONTEXT.set_forkserver_preload(["torch", "torch.distributed"])


def _rank_main(fn: Callable[..., Any], rank: int, world: int, port: int, results: Any,
               env: dict[str, str], args: tuple[Any, ...]) -> None:
    os.environ.clear()  # the fork server's environment is the one it started with: take the test's
    os.environ.update(env)
    for path in (ROOT, MODELS, HERE):
        if path not in sys.path:
            sys.path.insert(0, path)
    try:
        import torch
        import torch.distributed as dist

        torch.set_num_threads(1)
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
        try:
            value = fn(rank, world, *args)
        finally:
            dist.destroy_process_group()
        results.put((rank, "ok", value))
    except BaseException as exc:  # reported to the parent, which fails the test
        results.put((rank, "error", type(exc).__name__, str(exc), traceback.format_exc()))


def run_ranks(fn: Callable[..., Any], *args: Any, world: int = 2, timeout: float = 120.0,
              env: dict[str, str] | None = None) -> list[Any]:
    """Run ``fn(rank, world, *args)`` on ``world`` ranks, with ``env`` over this process's
    environment; return the values by rank."""
    ctx = _CONTEXT
    results = ctx.Queue()
    port = free_port()
    environment = {**os.environ, **(env or {})}
    procs = [
        ctx.Process(target=_rank_main, args=(fn, rank, world, port, results, environment, args), daemon=True)
        for rank in range(world)
    ]
    for proc in procs:
        proc.start()
    deadline = time.monotonic() + timeout
    got: dict[int, tuple[Any, ...]] = {}
    try:
        while len(got) < world:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                missing = sorted(set(range(world)) - set(got))
                raise TimeoutError(f"ranks {missing} did not finish in {timeout}s")
            try:
                item = results.get(timeout=min(remaining, 1.0))
            except queue_mod.Empty:
                dead = [p for p in procs if p.exitcode not in (None, 0)]
                if dead and results.empty():
                    time.sleep(0.5)
                    if results.empty():
                        raise RuntimeError(f"a rank died with exit code {dead[0].exitcode}") from None
                continue
            got[item[0]] = item[1:]
    finally:
        for proc in procs:
            proc.join(timeout=10)
            if proc.is_alive():
                proc.kill()
                proc.join(timeout=5)
    errors = [f"rank {r}: {v[1]}: {v[2]}\n{v[3]}" for r, v in sorted(got.items()) if v[0] == "error"]
    if errors:
        raise AssertionError("\n".join(errors))
    return [got[r][1] for r in range(world)]
