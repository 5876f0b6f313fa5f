"""Worker processes for the parsing work: a file that crashes, exhausts or hangs a parser
(CPython's for the facts, LibCST's for fixes) costs that file one error line, never the run.

Parsers are native code. A valid file overflowed LibCST's stack (a 10,000-operand ``and`` chain
segfaulted it on an 8 MiB main-thread stack) and needed far more memory than its size suggests
(6 MB of ``x = 1`` lines: 8.8 GiB and 84 s; CPython's tree of 2.4 MB takes 1 GiB). So every task that parses
(``Pool.map``: the facts store's extraction, ``--fix -j N``) runs in a worker process (a few small
files, as after an edit, are parsed in fwdlint's own process instead: ``parse_here``), which

* is ``python -I -S`` with the parent's import path minus the working directory (a checked
  project's ``json.py`` is never imported), and serves one task at a time on a thread with a
  ``STACK_BYTES`` stack (address space reserved, not used: deep chains parse instead of crashing)
  and the recursion limit ``RECURSION_LIMIT``;
* has its address space limited on Linux (``RLIMIT_AS``, ``memory_limit``): a file that needs
  more is reported "out of memory" instead of pushing the machine into its OOM killer;
* is killed after ``file_timeout()`` seconds on one task.

A worker that dies takes only the task it held: that task becomes a ``Failure`` (the signal, and
the last line the worker wrote to stderr), a new worker takes the rest. Workers die with fwdlint:
on Linux the kernel kills them when the thread that started them ends (``PR_SET_PDEATHSIG``; that
thread is the process-long ``_Spawner``, so ``kill -9`` of fwdlint kills them at once); elsewhere
they stop when their input closes, after the task at hand.

The knobs, for both front ends: ``FWDLINT_FILE_TIMEOUT`` (seconds per file, default 60; 0: none)
and ``FWDLINT_WORKER_MEMORY`` (MiB per worker; default the machine's memory divided by one more
than its CPUs, at least 2 GiB; 0: no limit).
"""

from __future__ import annotations

import gc
import os
import pickle
import queue
import select
import signal
import struct
import subprocess
import sys
import tempfile
import threading
from typing import IO, Any, Callable, Optional, Sequence

from lint_rules import GC_THRESHOLDS
from lint_rules.parse_limits import (RECURSION_LIMIT, SMALL_STACK, STACK_BYTES, Failure, file_timeout, memory_limit,
                                     out_of_memory, outcome_of, started_on_stack, timed_out)

_HEADER = struct.Struct("!Q")
#: ``jobs`` that asks for as many workers as the number of tasks repays (``auto_jobs``).
AUTO = 0
#: Tasks per worker that repay starting it: a worker took about 0.2 s to start (an interpreter that
#: imported LibCST; 0.08 s since facts come from ``ast``), a file about 30-45 ms to parse and extract
#: (timm 1.0.31, one core; 5-10 ms since), so a second worker gains from about 10 files on; 16 leaves
#: room for a busy machine.
TASKS_PER_WORKER = 16

# The worker's first lines, run by ``python -I -S -c``: nothing is importable yet but the standard
# library, so the import path arrives as the first frame.
_BOOT = (
    "import pickle, struct, sys\n"
    "size, = struct.unpack('!Q', sys.stdin.buffer.read(8))\n"
    "sys.path[:] = pickle.loads(sys.stdin.buffer.read(size))\n"
    "from lint_rules.workers import serve\n"
    "serve(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:])\n"
)


def cpus() -> int:
    """The CPUs this process may run on (its affinity mask, a container's limit), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def auto_jobs(tasks: int) -> int:
    """Workers for ``tasks`` parsing tasks: one per ``TASKS_PER_WORKER``, at most one per CPU."""
    return max(1, min(cpus(), tasks // TASKS_PER_WORKER))


def _import_path() -> list[str]:
    """The parent's ``sys.path`` without the working directory, with the directory holding
    ``lint_rules`` (a source checkout) first, or last when it is the working directory."""
    try:
        cwd = os.path.realpath(os.getcwd())
    except OSError:
        cwd = ""
    home = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
    path = [entry for entry in sys.path if entry and os.path.realpath(entry) != cwd and entry != home]
    return [*path, home] if home == cwd else [home, *path]


class _Spawner:
    """Starts every worker of this process from one thread that lives as long as the process:
    ``PR_SET_PDEATHSIG`` fires when the starting thread ends, not the process."""

    _instance: Optional["_Spawner"] = None

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.requests: "queue.SimpleQueue[tuple[list[str], queue.SimpleQueue]]" = queue.SimpleQueue()
        if started_on_stack(self._loop, SMALL_STACK, "fwdlint-spawner") is None:
            raise OSError("no room to start a thread (an address-space limit: ulimit -v)")

    @classmethod
    def get(cls) -> "_Spawner":
        if cls._instance is None or cls._instance.pid != os.getpid():  # threads do not survive fork
            cls._instance = cls()
        return cls._instance

    def start(self, argv: list[str], stderr: IO[bytes]) -> subprocess.Popen:
        reply: queue.SimpleQueue = queue.SimpleQueue()
        self.requests.put(((argv, stderr), reply))
        outcome = reply.get()
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    def _loop(self) -> None:
        while True:
            (argv, stderr), reply = self.requests.get()
            try:
                reply.put(subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
                                           close_fds=True))
            except BaseException as error:  # noqa: B036 - handed to the thread that asked
                reply.put(error)


class _Worker:
    """One worker process and the pipes to it."""

    def __init__(self, memory: Optional[int], preload: Sequence[str]) -> None:
        self.stderr = tempfile.TemporaryFile()  # a file, not a pipe: nobody has to drain it
        self.memory = memory
        self.process = _Spawner.get().start(
            [sys.executable, "-I", "-S", "-c", _BOOT, str(os.getpid()), str(memory or 0), *preload], self.stderr)
        try:  # the import path; then wait until it has imported what the tasks need (so that its
            self._send(pickle.dumps(_import_path()))  # start-up does not count against a task's time)
            self._receive(None)
        except (OSError, EOFError):  # it died at once: the first task says why
            pass

    def call(self, function: Callable[[Any], Any], task: Any, timeout: Optional[float]) -> Any:
        """``function(task)`` in the worker; raises ``_Died`` (with the reason) if the worker did."""
        try:
            self._send(pickle.dumps((function, task), protocol=pickle.HIGHEST_PROTOCOL))
            ok, value = pickle.loads(self._receive(timeout))
        except (OSError, EOFError, pickle.UnpicklingError) as error:
            raise _Died(self._death(timeout, error)) from None
        return value if ok else Failure(value)

    def close(self) -> None:
        """Close the input (the worker stops when it reads the end) and wait for it briefly."""
        try:
            self.process.stdin.close()  # type: ignore[union-attr]
            self.process.wait(timeout=2)
        except (OSError, subprocess.TimeoutExpired):
            self.process.kill()
            self.process.wait()
        finally:
            self.process.stdout.close()  # type: ignore[union-attr]
            self.stderr.close()

    def _send(self, payload: bytes) -> None:
        data = memoryview(_HEADER.pack(len(payload)) + payload)
        fd = self.process.stdin.fileno()  # type: ignore[union-attr]
        while data:
            data = data[os.write(fd, data):]

    def _receive(self, timeout: Optional[float]) -> bytes:
        fd = self.process.stdout.fileno()  # type: ignore[union-attr]
        if timeout is not None and os.name == "posix":
            ready, _, _ = select.select([fd], [], [], timeout)
            if not ready:
                self.process.kill()
                raise TimeoutError
        (size,) = _HEADER.unpack(_read_exactly(fd, _HEADER.size))
        return _read_exactly(fd, size)

    def _death(self, timeout: Optional[float], error: BaseException) -> str:
        """Why the worker ended, in one line; it is reaped here."""
        try:
            code = self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait()
        if isinstance(error, TimeoutError):
            return timed_out(timeout)
        tail = self._stderr_tail()
        if "memory allocation of" in tail or "MemoryError" in tail:  # Rust's allocation failure, Python's
            return out_of_memory(self.memory)
        said = f": {tail.strip().splitlines()[-1].strip()[:200]}" if tail.strip() else ""  # its last line
        if code >= 0:
            return f"the parser process ended with status {code}{said}"
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        if name == "SIGKILL":
            return f"the parser was killed (SIGKILL; by the system for lack of memory?){said}"
        return f"the parser crashed ({name}){said}"

    def _stderr_tail(self) -> str:
        try:
            self.stderr.seek(max(0, self.stderr.seek(0, os.SEEK_END) - 4096))
            return self.stderr.read().decode("utf-8", "replace")
        except OSError:
            return ""


class _Died(Exception):
    pass


def _read_exactly(fd: int, size: int) -> bytes:
    chunks, left = [], size
    while left:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


class Pool:
    """Up to ``jobs`` workers, started when a task first needs one and kept until ``close``."""

    def __init__(self, jobs: int = 1, preload: Sequence[str] = ()) -> None:
        self.jobs = max(1, jobs)
        self.preload = tuple(preload)  # modules a worker imports before its first task
        self.timeout = file_timeout()
        self.memory = memory_limit()
        self.idle: "queue.SimpleQueue[_Worker]" = queue.SimpleQueue()
        self.workers: list[_Worker] = []
        self.lock = threading.Lock()

    def map(self, function: Callable[[Any], Any], tasks: Sequence[Any],
            done: Optional[Callable[[], None]] = None, jobs: Optional[int] = None) -> list[Any]:
        """``function`` over ``tasks`` in order, on up to ``jobs`` workers at once (default: the
        pool's); a task whose worker failed gives a ``Failure``. ``done`` is called (from any
        thread) as each task finishes."""
        jobs = self.jobs if jobs is None else max(1, jobs)
        results: list[Any] = [None] * len(tasks)
        pending: "queue.SimpleQueue[int]" = queue.SimpleQueue()
        for index in range(len(tasks)):
            pending.put(index)

        def drain() -> None:
            while True:
                try:
                    index = pending.get_nowait()
                except queue.Empty:
                    return
                results[index] = self._call(function, tasks[index])
                if done is not None:
                    done()

        threads = []
        for _ in range(min(jobs, len(tasks)) - 1):
            thread = started_on_stack(drain, SMALL_STACK, "fwdlint-drain")
            if thread is None:
                break  # this thread drains what it would have
            threads.append(thread)
        drain()
        for thread in threads:
            thread.join()
        return results

    def _call(self, function: Callable[[Any], Any], task: Any) -> Any:
        try:
            worker = self._take()
        except OSError as error:
            return Failure(f"cannot start a parser process ({sys.executable}): {error.strerror or error}")
        try:
            result = worker.call(function, task, self.timeout)
        except _Died as died:
            self._forget(worker)
            return Failure(str(died))
        self.idle.put(worker)
        return result

    def _take(self) -> _Worker:
        try:
            worker = self.idle.get_nowait()
        except queue.Empty:
            worker = _Worker(self.memory, self.preload)
            with self.lock:
                self.workers.append(worker)
            return worker
        if worker.process.poll() is not None:  # ended between tasks (killed from outside): not the task's fault
            self._forget(worker)
            return self._take()
        return worker

    def _forget(self, worker: _Worker) -> None:
        with self.lock:
            self.workers.remove(worker)
        worker.close()

    def close(self) -> None:
        with self.lock:
            workers, self.workers = self.workers, []
        for worker in workers:
            worker.close()
        self.idle = queue.SimpleQueue()


_shared: dict[tuple[Any, ...], Pool] = {}
_shared_pid = 0


def shared(preload: Sequence[str]) -> Pool:
    """The process's pool of workers that import ``preload``, reused by every run in the process
    (``--fix``'s passes and the check of each pass, the pytest plugin, a test session): starting a
    worker costs an interpreter and its imports (0.26 s of CPU measured), which per run made most of
    a small ``--fix``. The limits a pool reads when it starts are part of its key; a forked child
    starts its own pools (the parent's pipes are not its to use). Ended at exit."""
    global _shared_pid
    if _shared_pid != os.getpid():
        if not _shared_pid:
            import atexit

            atexit.register(close_shared)
        _shared.clear()
        _shared_pid = os.getpid()
    key = (tuple(preload), file_timeout(), memory_limit())
    if key not in _shared:
        _shared[key] = Pool(1, preload)
    return _shared[key]


def close_shared() -> None:
    """End the workers of this process's shared pools."""
    pools = list(_shared.values()) if _shared_pid == os.getpid() else []
    _shared.clear()
    for pool in pools:
        pool.close()


def on_deep_stack(function: Callable[..., Any], *args: Any) -> Any:
    """``function(*args)`` on a thread with a ``STACK_BYTES`` stack and ``RECURSION_LIMIT``: for
    work in this process that parses files the workers parsed already (``--fix``), which must not
    overflow the main thread's stack where a worker's did not. Under an address-space limit
    (``RLIMIT_AS``) that cannot hold such a stack beside what the process has mapped, a smaller
    one with a recursion limit in proportion; with none, the calling thread as it is (deeper files
    are then "too deeply nested" sooner, never a crash)."""
    outcome: list[Any] = []

    def run(recursion: int) -> None:
        limit = sys.getrecursionlimit()
        sys.setrecursionlimit(max(limit, recursion))
        try:
            outcome.append((True, function(*args)))
        except BaseException as error:  # noqa: B036 - re-raised in the calling thread
            outcome.append((False, error))
        finally:
            sys.setrecursionlimit(limit)

    for share in (1, 4, 16):
        thread = started_on_stack(lambda share=share: run(RECURSION_LIMIT // share),  # type: ignore[misc]
                                  STACK_BYTES // share, "fwdlint-deep-stack")
        if thread is not None:
            break
    else:
        return function(*args)
    thread.join()
    ok, value = outcome[0]
    if not ok:
        raise value
    return value


# --- the worker's side ---------------------------------------------------------------------------

def serve(parent: int, memory: int, preload: Sequence[str]) -> None:
    """Import ``preload`` and say so (an empty frame); then answer tasks from stdin until it
    closes: each a pickled ``(function, task)``, each answer a pickled ``(True, result)`` or
    ``(False, one-line reason)``."""
    _die_with_parent(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle; it ends the workers
    import importlib

    for name in preload:
        importlib.import_module(name)
    gc.set_threshold(*GC_THRESHOLDS)
    if memory:
        import resource

        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        memory = memory if hard == resource.RLIM_INFINITY else min(memory, hard)  # lower, never raise
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    sys.setrecursionlimit(RECURSION_LIMIT)
    threading.stack_size(min(STACK_BYTES, memory // 4 & ~0xFFFF) if memory else STACK_BYTES)  # the stack counts too
    sys.stdout.buffer.write(_HEADER.pack(0))
    sys.stdout.buffer.flush()
    thread = threading.Thread(target=_answer, args=(memory or None,), name="fwdlint-worker")
    thread.start()
    thread.join()


def _answer(memory: Optional[int]) -> None:
    source, sink = sys.stdin.buffer, sys.stdout.buffer
    while True:
        header = source.read(_HEADER.size)
        if len(header) < _HEADER.size:
            return
        function, task = pickle.loads(source.read(_HEADER.unpack(header)[0]))
        answer = outcome_of(function, task, memory)
        try:
            payload = pickle.dumps(answer, protocol=pickle.HIGHEST_PROTOCOL)
        except MemoryError:
            payload = pickle.dumps((False, out_of_memory(memory)))
        except Exception as error:  # an answer that cannot be sent: a bug of fwdlint's, as above
            payload = pickle.dumps((False, f"internal error (answer not picklable: {type(error).__name__})"))
        sink.write(_HEADER.pack(len(payload)) + payload)
        sink.flush()


def _die_with_parent(parent: int) -> None:
    """Linux: the kernel kills this process when the parent's starting thread ends; a parent
    gone already (before the request took effect) ends it now."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:
        os._exit(0)
