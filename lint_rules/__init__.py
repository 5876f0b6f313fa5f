"""fwdlint's analyzer: source -> facts -> project view -> rules -> diagnostics -> report or fix.

``python -m lint_rules`` (or ``-m lint_rules.cli``) puts the working directory first on
``sys.path``; a checked project's own ``json.py`` or ``libcst.py`` would then replace the modules
fwdlint imports. So when runpy imports this package on its way to running one of its modules,
that entry is dropped before anything else is imported (this package's submodules come from its
``__path__``). In a source checkout run from its root, the directory holding ``lint_rules`` is
kept, but last: installed modules come first. Imported by any other program, nothing changes.
"""

import gc  # built into the interpreter: no file in the working directory can stand in for it
import os
import sys

__version__ = "0.1.0"
#: The cyclic garbage collector's thresholds while fwdlint analyses (``few_collections``) and in its parser
#: processes: a collection every 200,000 allocations instead of 700, as mypy does. The analysis builds
#: millions of small objects that reference counting frees (facts, syntax trees), and each collection
#: walked them all: decoding transformers' cached facts took 2.8 s with the defaults, 1.1 s with these.
GC_THRESHOLDS = (200_000, 30, 30)


def stop_parser_processes() -> None:
    """Stop this process's parser processes (``workers.close_shared``), if anything was parsed:
    ``workers`` is imported only then."""
    workers = sys.modules.get("lint_rules.workers")
    if workers is not None:
        workers.close_shared()


class few_collections:  # noqa: N801 - used as a function: ``with few_collections():``
    """``GC_THRESHOLDS`` while fwdlint works in a process it shares (the CLI's, flake8's, pytest's),
    the caller's thresholds again after. (A class, not ``contextlib``: this module imports nothing
    that a checked project's own files could stand in for, see above.)"""

    def __enter__(self) -> "few_collections":
        self.thresholds = gc.get_threshold()
        self.enabled = gc.isenabled()
        self.frozen = False
        gc.set_threshold(*GC_THRESHOLDS)
        return self

    def pause(self) -> None:
        """No collection while the facts are read: they hold no cycles, and each collection would
        walk all those read so far."""
        gc.disable()

    def settle(self) -> None:
        """The objects made so far (the facts) live to the end of the run: no collection walks them
        again (``gc.freeze``). On transformers they are millions; after a one-file edit, collections
        that walked them took a second of a five-second run."""
        gc.freeze()
        self.frozen = True
        if self.enabled:
            gc.enable()

    def __exit__(self, *exc: object) -> None:
        if self.frozen:
            gc.unfreeze()
        if self.enabled:
            gc.enable()
        gc.set_threshold(*self.thresholds)


def _run_by_module_option(argv: list[str], orig_argv: "list[str] | None") -> bool:
    """Is runpy importing this package to run ``-m lint_rules[.x]`` (``sys.argv[0]`` is ``-m``
    meanwhile), rather than another ``-m`` program's package that imports it? (Python 3.9 has no
    ``sys.orig_argv`` to tell: any ``-m`` counts.)"""
    if argv[:1] != ["-m"]:
        return False
    if orig_argv is None:
        return True
    for position, arg in enumerate(orig_argv[1:], 1):
        if arg.startswith("-m"):
            name = arg[2:] or (orig_argv[position + 1] if position + 1 < len(orig_argv) else "")
            return name.split(".")[0] == __name__
    return False


def _drop_working_directory(path: list[str]) -> None:
    """Remove the working directory ``-m`` put first on ``path``; re-add it last if it holds ``lint_rules``."""
    if not path:
        return
    try:
        cwd = os.path.realpath(os.getcwd())
    except OSError:  # the working directory is gone: nothing can be imported from it
        return
    if os.path.realpath(path[0] or os.curdir) != cwd:  # -P / PYTHONSAFEPATH: nothing was added
        return
    del path[0]
    home = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
    if home == cwd and cwd not in (os.path.realpath(entry or os.curdir) for entry in path):
        path.append(cwd)  # a source checkout that is not installed


if _run_by_module_option(sys.argv, getattr(sys, "orig_argv", None)):
    _drop_working_directory(sys.path)
