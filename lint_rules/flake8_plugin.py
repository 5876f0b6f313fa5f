"""flake8 front end (thin): ``FWD`` codes from the same engine and project view as ``fwdlint``.

flake8 runs every installed plugin on every file, so the plugin gates itself: when no FWD code
is selected it does no work at all. flake8 matches selections by prefix, so ``--select E,F,W``
would select FWD through ``F``; that selection means pyflakes to everyone who writes it, so an
explicit ``--select`` runs fwdlint only if it (or ``--extend-select``) names a prefix starting
with ``FW``. The default selection runs it. flake8 applies ``# noqa`` and
reports syntax errors itself (E999; a selection that runs fwdlint also selects E999 and E902, see
``flake8_codes.select_unparsable``); valid Python that fwdlint cannot check (LibCST rejects it, or it is
nested too deeply) is ``FWD000`` at the place named, never silently clean. A selection entry
starting with ``FW`` that names no rule (``FWD01``) is an error (``flake8_codes``).

Each file is checked with its project's view (``layout``): every Python file under the project
root (flake8's ``--exclude`` respected), read through the facts store and its cache. So
``flake8 model.py`` and pre-commit given only staged files reach the verdict ``fwdlint .`` does.
The view is built once per flake8 process, and only for a file whose findings no earlier run
stored (``results.FileLookup``: each process stores what it computed when it ends).

flake8's default exclude leaves ``.venv`` in; fwdlint's own discovery skips it. The plugin cannot
change what flake8 walks, so it says once, on stderr, when flake8 is about to check a virtual
environment, with the exclude to add (``flake8_environments``).
"""

from __future__ import annotations

import argparse
import ast
import os
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Iterator, Optional, Union

from lint_rules import __version__, contract, few_collections, stop_parser_processes
from lint_rules.rules import CODES

if TYPE_CHECKING:
    from lint_rules.diagnostics import Diagnostic, FileError
    from lint_rules.engine import Run, Session
    from lint_rules.environment import Environment
    from lint_rules.facts.model import FileFacts
    from lint_rules.project import ProjectIndex
    from lint_rules.results import FileLookup

# Nothing heavier than the two imports above at module level: flake8 imports every installed
# plugin on every run, and with no FWD code selected this one must cost nothing (LibCST alone
# takes ~130 ms to import). The engine is imported by the first file that needs it.


#: flake8 reports (E902, E999). Any other error is a file fwdlint could not check: FWD000.
PYTHON_REPORTS = ("syntax error", "cannot decode", "cannot read")


def _given(key: str) -> bool:
    """Was ``--fwd-<key>`` on flake8's command line (argparse takes any unambiguous prefix)?"""
    named = [arg.split("=", 1)[0] for arg in sys.argv[1:] if arg.startswith("--fwd-")]
    return any(f"--fwd-{key}".startswith(arg) and len(arg) > len("--fwd-") for arg in named)


def _fwdlint_settings(options: argparse.Namespace) -> dict[str, Any]:
    """fwdlint's own keys as the CLI reads them (``settings.resolve``: ``[tool.fwdlint]``, ``[fwdlint]``,
    then ``fwd-<key>`` in ``[flake8]``, from the same files), with flake8's command line first, so both
    front ends run with one configuration. flake8's own keys (select, ignore, exclude, per-file-ignores)
    stay flake8's. A configuration the CLI refuses is refused here too: one line, exit 2."""
    from lint_rules import settings

    try:
        found = settings.resolve({}, getattr(options, "filenames", None) or ["."])
    except settings.ConfigError as exc:
        sys.stderr.write(f"{exc}\n")
        raise SystemExit(2) from None
    configured = {"module-bases": found.module_bases, "mark-decorators": found.mark_decorators,
                  "forward-helpers": found.forward_helpers, "python-executable": found.python or "",
                  "from-record": found.from_record or "", "cache-dir": found.cache_dir or ""}
    chosen: dict[str, Any] = {}
    for key, value in configured.items():
        option = getattr(options, f"fwd_{key.replace('-', '_')}", None)
        # given on the command line: it wins; else the configuration, else what flake8 read elsewhere
        chosen[key] = option if _given(key) or (not value and option) else value
        problem = settings.dotted_names_problem(chosen[key]) if key in ("module-bases", "mark-decorators") else None
        if key == "cache-dir" and chosen[key] and not _given(key) and not value:
            # a fwd-cache-dir flake8 read from a file fwdlint's search did not choose: the same rule
            # as a configured one (``settings.configured_cache_dir``); its path is already absolute
            chosen[key], problem = settings.configured_cache_dir(chosen[key], settings.start_directory(
                getattr(options, "filenames", None) or ["."]))
            if problem:
                sys.stderr.write(f"fwdlint: error: flake8's configuration, 'fwd-cache-dir': {problem}\n")
                raise SystemExit(2)
        if problem:
            sys.stderr.write(f"fwdlint: error: flake8 --fwd-{key}: {problem}\n")
            raise SystemExit(2)
    # where python-executable came from, to name in its error: the file and key, None for the command line
    configured_python = chosen["python-executable"] and chosen["python-executable"] == found.python
    chosen["python-source"] = found.python_source if configured_python and not _given("python-executable") else None
    configured_record = chosen["from-record"] and chosen["from-record"] == found.from_record
    chosen["record-source"] = found.from_record_source if configured_record and not _given("from-record") else None
    return chosen


def _environment(options: argparse.Namespace, python: Optional[str], source: Optional[str] = None) -> "Environment":
    """Where installed packages are read from (``environment.find``). flake8 is quiet when clean, and
    every file must not say it again: a warning is one stderr line per run (not again in a ``-j``
    worker), the description an INFO log line that ``flake8 -v`` shows. A configured
    ``fwd-python-executable`` is a path to read, never run: only one on flake8's command line may be.
    One that cannot be used is refused as the CLI refuses it: one line naming the file and key
    (``source``, as ``settings.Options.python_source``) or the option, exit 2."""
    import logging
    import multiprocessing

    from lint_rules import environment, settings
    from lint_rules.layout import find_root

    given = _given("python-executable")
    root = getattr(options, "fwd_project_root", "") or ""
    start = settings.start_directory(getattr(options, "filenames", None) or ["."])
    project = Path(root).resolve() if root else find_root(start) or start
    quiet = multiprocessing.parent_process() is not None  # the main process said it already
    try:
        env = environment.find(python, source="--fwd-python-executable", may_run=given, project=project)
    except environment.NoInterpreter as exc:  # a usage error, as in the CLI (``cli._run_options``)
        if source is not None:
            sys.stderr.write(f"{source}: {str(exc).replace(f'--python {python}: ', '', 1)}\n")
        else:
            sys.stderr.write(f"fwdlint: error: flake8 {str(exc).replace('--python ', '--fwd-python-executable ', 1)}\n")
        raise SystemExit(2) from None
    for line in env.warnings if not quiet else ():
        sys.stderr.write(line + "\n")
    logging.getLogger("flake8.fwdlint").info("%s", env.describe())
    return env


def _start(options: argparse.Namespace) -> Path:
    """The directory holding every path flake8 was given: files in no project are cached under it,
    the same directory for every ``-j`` process."""
    from lint_rules import settings

    return settings.start_directory(getattr(options, "filenames", None) or ["."])


class Plugin:
    name = "fwdlint"
    version = __version__

    run_options: ClassVar[Optional["Run"]] = None  # None: no FWD code selected
    stdin: ClassVar[bool] = False  # flake8 reads standard input (``flake8 -``)
    session: ClassVar[Optional["Session"]] = None
    lookups: ClassVar[dict[Optional[Path], "FileLookup"]] = {}  # the stored findings of each project root

    def __init__(self, tree: ast.AST, lines: list[str], filename: str) -> None:
        self.lines = lines
        self.filename = filename

    @classmethod
    def add_options(cls, parser: Any) -> None:
        parser.add_option("--fwd-module-bases", default="", parse_from_config=True,
                          comma_separated_list=True,
                          help="FWD: extra base classes that are nn.Module subclasses")
        parser.add_option("--fwd-mark-decorators", default="", parse_from_config=True, comma_separated_list=True,
                          help=f"FWD: your own decorators that apply runtime_shim's @{contract.DECORATOR_NAME} "
                               f"(in addition to runtime_shim's own marks)")
        parser.add_option("--fwd-forward-helpers", default=contract.FORWARD_HELPERS[0], parse_from_config=True,
                          choices=contract.FORWARD_HELPERS,
                          help="FWD: report (default) or skip FWD001 on methods the project calls only from "
                               "forward")
        parser.add_option("--fwd-from-record", default="", parse_from_config=True, normalize_paths=True,
                          help="FWD: also report the unmarked forward entries a recorded run saw (FWD004; "
                               "pytest --fwd-record PATH or FWD_SHIM_MODE=record with FWD_RECORD=PATH)")
        parser.add_option("--fwd-project-root", default="", parse_from_config=True, normalize_paths=True,
                          help="FWD: the project whose files make up the view (default: nearest "
                               "pyproject.toml, setup.cfg, setup.py or .git)")
        parser.add_option("--fwd-cache-dir", default="", parse_from_config=True, normalize_paths=True,
                          help="FWD: where the facts cache lives (default: .fwdlint_cache under the project root)")
        parser.add_option("--fwd-python-executable", default="", parse_from_config=True, normalize_paths=True,
                          help="FWD: the environment whose installed packages hold the checked code's bases: a "
                               "virtual environment or conda prefix, or an interpreter (read from its files, never "
                               "imported; only one given on the command line may be run; default: $VIRTUAL_ENV, "
                               "$CONDA_PREFIX, the project's .venv, else flake8's)")
        parser.add_option("--fwd-no-cache", action="store_true", default=False, parse_from_config=True,
                          help="FWD: neither read nor write the facts cache")

    @classmethod
    def parse_options(cls, options: argparse.Namespace) -> None:
        try:
            from flake8.style_guide import Decision, DecisionEngine

            engine = DecisionEngine(options)
            enabled = tuple(code for code in CODES if engine.decision_for(code) is Decision.Selected)
        except (ImportError, AttributeError):  # a flake8 without the decision engine: run everything
            enabled = CODES
        explicit = [*(getattr(options, "select", None) or ()), *(getattr(options, "extend_select", None) or ())]
        if getattr(options, "select", None) and not any(p.upper().startswith("FW") for p in explicit):
            enabled = ()  # `--select E,F,W` means pyflakes, not every code that starts with F
        from lint_rules.flake8_codes import refuse_unknown_codes, select_unparsable

        refuse_unknown_codes(options)
        _close_session()
        cls.stdin = "-" in (getattr(options, "filenames", None) or ())
        if not enabled:
            cls.run_options = None
            return
        select_unparsable(options)
        from lint_rules.flake8_environments import warn_of_environments

        warn_of_environments(options)
        from lint_rules.engine import Run
        from lint_rules.settings import Config

        chosen = _fwdlint_settings(options)
        env = _environment(options, chosen["python-executable"] or None, chosen["python-source"])
        record = chosen["from-record"]
        observed = _observed(record, chosen["record-source"])
        root = getattr(options, "fwd_project_root", "") or ""
        cache_dir = chosen["cache-dir"] or ""  # the command line's anywhere, a configured one inside the project
        exclude = [*(getattr(options, "exclude", None) or ()), *(getattr(options, "extend_exclude", None) or ())]
        cls.run_options = Run(
            config=Config(module_bases=tuple(chosen["module-bases"] or ()),
                          mark_decorators=tuple(chosen["mark-decorators"] or ()),
                          forward_helpers=chosen["forward-helpers"] or contract.FORWARD_HELPERS[0],
                          observed=observed, record=record),
            select=enabled, ignore=(), project_root=Path(root).resolve() if root else None,
            cache=not getattr(options, "fwd_no_cache", False), cache_dir=Path(cache_dir) if cache_dir else None,
            exclude=tuple(exclude), environment=env, start=_start(options))

    def run(self) -> Iterator[tuple[int, int, str, type]]:
        with few_collections():  # for fwdlint's own work only, not flake8's checks after it
            found = list(self._findings())
        yield from found

    def _findings(self) -> Iterator[tuple[int, int, str, type]]:
        options = Plugin.run_options
        if options is None:
            return
        from lint_rules.diagnostics import FileError
        from lint_rules.engine import Session
        from lint_rules.source import OVERLAY

        named = self.filename not in ("stdin", "-")  # --stdin-display-name names what standard input stands for
        if Plugin.stdin and named:  # the editor's text, not the file on disk, everywhere it is read
            OVERLAY[os.path.realpath(self.filename)] = "".join(self.lines).encode("utf-8")
        real = named and (Plugin.stdin or os.path.isfile(self.filename))
        path = str(Path(self.filename).resolve()) if real else self.filename
        if Plugin.session is None:
            Plugin.session = Session(options, path if real else None)
            _close_at_exit()
        session = Plugin.session
        root = session.root_for(path) if real else None
        lookup = _lookup(session, root, path) if real and not Plugin.stdin else None
        key = session.store.read_keys([path])[0] if lookup is not None and lookup.checking(path) else None
        if isinstance(key, str):
            reused = lookup.found(path, key)  # type: ignore[union-attr]
            if reused is not None:
                _say_once("fwdlint: findings reused: nothing they depend on changed")
                yield from self._lines(reused)
                return
        if real:
            facts = session.store.facts(path)
        else:  # standard input: the text flake8 read, as UTF-8
            facts = session.store.facts(path, data="".join(self.lines).encode("utf-8"), module=("", False))
        if isinstance(facts, FileError):
            # flake8 reports invalid Python (E999) itself; valid code fwdlint cannot check (LibCST
            # rejects it, the parser crashed or ran out of memory or time) must not pass silently,
            # so it gets FWD000 (a position is named only for LibCST's failures)
            if not facts.message.startswith(PYTHON_REPORTS):
                at = re.search(r": line (\d+), column (\d+)", facts.message)
                line, col = (int(at[1]), int(at[2]) - 1) if at else (1, 0)
                yield line, max(col, 0), f"FWD000 fwdlint cannot check this file: {facts.message}", type(self)
            return
        built = len(session.views)
        view = session.view(root, [path] if real else [])  # the files near it first
        if len(session.views) > built:
            for extra in lookup.extras - {path} if lookup is not None else ():  # checked here before
                _add(session, view, session.store.facts(extra))
            _out_of_the_collectors_reach()
        if view.files.get(path) is not facts:  # a project file is in the view already
            _add(session, view, facts, real)
        try:
            found = session.check(view, facts, honour_noqa=False)
        except RecursionError:  # one file's depth must not end the whole flake8 run
            yield 1, 0, "FWD000 fwdlint cannot check this file: too deeply nested to analyse", type(self)
            return
        if isinstance(key, str):
            lookup.computed(path, key, found)  # type: ignore[union-attr]
        yield from self._lines(found)

    def _lines(self, found: "list[Diagnostic]") -> Iterator[tuple[int, int, str, type]]:
        for diagnostic in found:
            yield diagnostic.line, diagnostic.col, f"{diagnostic.code} {diagnostic.message}", type(self)


def _lookup(session: "Session", root: Optional[Path], path: str) -> "FileLookup":
    """The stored findings of ``root``'s project (``results.FileLookup``), one per root and process."""
    lookup = Plugin.lookups.get(root)
    if lookup is None:
        from lint_rules.results import FileLookup

        session.view_paths(root, [path])  # lists the project once, the files near ``path`` first
        lookup = Plugin.lookups[root] = FileLookup(session, root, session.listed.get(root, []))
    return lookup


def _add(session: "Session", view: "ProjectIndex", facts: "Union[FileFacts, FileError]", real: bool = True) -> None:
    from lint_rules.facts.model import FileFacts
    from lint_rules.layout import module_name_for

    if isinstance(facts, FileFacts):
        store = session.store
        view.add(facts, module_name_for(Path(facts.path), store.packages, store.directories)[2] if real else None)


def _say_once(message: str) -> None:
    """An INFO line ``flake8 -v`` shows, once per process."""
    if message not in _SAID:
        _SAID.add(message)
        import logging

        logging.getLogger("flake8.fwdlint").info("%s", message)


_SAID: set[str] = set()


def _out_of_the_collectors_reach() -> None:
    """A project view is tens of thousands of objects that live as long as the process, and the
    pycodestyle and pyflakes checks flake8 runs next allocate enough to trigger full garbage
    collections, each of which would walk them all again: on timm (304 files, ``flake8 -j 2``, warm)
    that was about half of what fwdlint cost. ``gc.freeze`` moves everything alive now out of the
    collector's sight (objects freed by reference counting are still freed); a flake8 process
    builds one view per project, so this runs about once."""
    import gc

    gc.freeze()


def _close_session() -> None:
    """Store the findings this process computed (``results.FileLookup``), stop the session's parser
    processes and close its cache (which also maintains it)."""
    session, Plugin.session = Plugin.session, None
    lookups, Plugin.lookups = Plugin.lookups, {}
    if session is not None:
        for root, lookup in lookups.items():  # the findings this process computed, for the next run
            if root in session.views:
                lookup.store(session.views[root])
        session.store.close()
    stop_parser_processes()


def _close_at_exit() -> None:
    """flake8 never says it is done: close when the process ends. ``multiprocessing``'s finalizers
    run both at interpreter exit (``flake8 -j 1``) and when a ``-j N`` pool worker ends, which
    skips ``atexit``."""
    from multiprocessing import util

    util.Finalize(None, _close_session, exitpriority=10)


def _observed(record: str, source: Optional[str] = None) -> tuple[Any, ...]:
    """The entries of ``--fwd-from-record``; a record that cannot be used is a usage error (2), in one
    line that starts with the file and key that named it (``source``, as ``settings.Options.from_record_source``)
    or the option."""
    if not record:
        return ()
    from lint_rules import run_record

    try:
        return tuple(run_record.load(record))
    except run_record.RecordError as exc:
        sys.stderr.write(f"{source}: {exc}\n" if source else f"fwdlint: error: flake8 --fwd-from-record {exc}\n")
        raise SystemExit(2) from None
