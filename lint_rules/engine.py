"""source -> facts (store) -> project view -> rules -> diagnostics; shared by every front end.

Front ends build a ``Run`` (options), call ``analyse`` (many files) or ``Session.check`` (one
file at a time, for flake8) and only format what comes back. Each file is checked with the view
of its own project (``layout``): the classes and registrations of every Python file under the
project root, read through the facts store, plus the files the run was given.
"""

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, NamedTuple, Optional, Sequence

from lint_rules import environment, few_collections
from lint_rules.cache_file import CACHE_DIR_NAME, default_cache_dir
from lint_rules.environment import Environment
from lint_rules.diagnostics import Diagnostic, FileError, shown
from lint_rules.discover import matches, normalize_pattern, real_path
from lint_rules.layout import VIEW_LIMIT, find_root, module_name_for, view_files
from lint_rules.settings import Config
from lint_rules.store import FactsStore

if TYPE_CHECKING:  # the analysis imports them (``_analyse``): findings reused need neither
    from lint_rules.facts.model import FileFacts
    from lint_rules.project import ProjectIndex


#: ``Run.jobs`` that lets the number of files to parse decide (``workers.auto_jobs``): ``fwdlint``'s default.
AUTO_JOBS = 0  # workers.AUTO (not imported: a warm run never needs the workers)


class Run(NamedTuple):
    """What a run was asked for (besides its paths)."""

    config: Config = Config()
    select: tuple[str, ...] = ("FWD",)
    ignore: tuple[str, ...] = ()
    jobs: int = 1  # parser processes; AUTO_JOBS: as many as the files to parse repay
    project_root: Optional[Path] = None  # None: found from each path
    cache: bool = True
    cache_dir: Optional[Path] = None  # None: .fwdlint_cache under the (first) project root (``Session``)
    exclude: tuple[str, ...] = ()  # also left out of project views
    # (pattern, codes): codes also ignored in files the pattern names (``discover.matches``)
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # Where installed packages are read from (``environment``); None: the default interpreter's.
    environment: Optional[Environment] = None
    # The directory holding every checked path (``settings.start_directory``): files in no project are
    # cached under it. None: the first path's (its directory).
    start: Optional[Path] = None
    # Told as files are read: (done, total, from the cache); the CLI draws a line on a terminal (``progress``).
    progress: Optional[Callable[[int, int, int], None]] = None
    # Count the module classes of the checked files checked completely and left partly unchecked
    # (``Result.coverage``; ``--statistics``).
    coverage: bool = False


class Result:
    """What a run found, and what it read to find it."""

    def __init__(self, diagnostics: Optional[list[Diagnostic]] = None, errors: Optional[list[FileError]] = None,
                 resolved: tuple[str, ...] = (), installed_read: int = 0, reused: bool = False,
                 coverage: Optional[tuple[int, int]] = None) -> None:
        self.diagnostics: list[Diagnostic] = diagnostics if diagnostics is not None else []
        self.errors: list[FileError] = errors if errors is not None else []
        self.views: dict[Optional[Path], ProjectIndex] = {}  # by project root
        self.files_read = 0
        self.files_parsed = 0
        self.resolved = resolved  # files read only to resolve names
        self.installed_read = installed_read  # ... of them, installed packages of the environment
        self.reused = reused  # the findings of an identical earlier run (``results``): nothing was analysed
        # (module classes checked completely, those whose verdicts depend on a name not read: FWD005)
        self.coverage = coverage

    @property
    def resolved_read(self) -> int:
        return len(self.resolved)

    def view_for(self, path: str) -> Optional["ProjectIndex"]:
        for view in self.views.values():
            if path in view.files:
                return view
        return None

    def facts_for(self, path: str) -> Optional["FileFacts"]:
        """The facts of an analysed file (through the view that holds it)."""
        view = self.view_for(path)
        return view.files[path] if view is not None else None


class Session:
    """One store and one project view per project root, reused for every file checked."""

    def __init__(self, run: Run, first_path: Optional[str] = None) -> None:
        self.run = run
        self._first_root = run.project_root or (find_root(Path(first_path)) if first_path else None)
        cache_dir = self._cache_dir(first_path) if run.cache else None
        self.per_file_ignores = tuple((normalize_pattern(p), codes) for p, codes in run.per_file_ignores)
        self.views: dict[Optional[Path], ProjectIndex] = {}
        self._environment = run.environment
        self.store = FactsStore(cache_dir, target=self.environment.version)  # syntax is judged for it
        self.resolved: set[str] = set()  # files read only to resolve names
        self._view_paths: dict[Optional[Path], list[str]] = {}
        self.listed: dict[Optional[Path], list[str]] = {}  # by root: every project file ``view_files`` listed
        self._roots: dict[Path, Optional[Path]] = {}  # directory -> its project root
        self._root_of: dict[str, Optional[Path]] = {}  # path -> ``root_for(path)``: asked about 3 times a file
        self.installed: set[str] = set()  # ... of them, under the environment's package directories

    def _cache_dir(self, first_path: Optional[str]) -> Optional[Path]:
        """``--cache-dir``, else the first project's, else (files in no project, as ruff does) one
        under the directory the run was given: without one a warm run would silently cost as much
        as a cold one; inside what the user ran on it needs no word, any other place would."""
        if self.run.cache_dir is not None or self._first_root is not None:
            return self.run.cache_dir or default_cache_dir(self._first_root)  # type: ignore[arg-type]
        if first_path is None:  # standard input alone: nothing to cache across runs
            return None
        start = self.run.start or Path(first_path if os.path.isdir(first_path) else os.path.dirname(first_path))
        return start.resolve() / CACHE_DIR_NAME

    @property
    def environment(self) -> Environment:
        if self._environment is None:
            try:
                self._environment = environment.find(project=self._first_root)  # the project's .venv counts
            except environment.NoInterpreter:  # the default never raises; be safe anyway
                self._environment = Environment(sys.executable)
        return self._environment

    def root_for(self, path: str) -> Optional[Path]:
        if self.run.project_root is not None:
            return self.run.project_root
        if path not in self._root_of:
            self._root_of[path] = self._find_root(path)
        return self._root_of[path]

    def _find_root(self, path: str) -> Optional[Path]:
        try:  # the real path, as find_root sees it; the files of a directory share its root
            if os.path.islink(path):  # a link loop raises here
                resolved = Path(path).resolve()
                directory = resolved if resolved.is_dir() else resolved.parent
            else:
                real = real_path(path, self.store.directories)
                directory = Path(real if os.path.isdir(real) else os.path.dirname(real))
            if directory not in self._roots:
                find_root(directory, self._roots)
        except (OSError, RuntimeError):  # a link loop, a name too long: a file that is an error line anyway
            return None
        return self._roots[directory]

    def by_root(self, paths: Iterable[str]) -> dict[Optional[Path], list[str]]:
        """The checked paths by project root: each root's view leaves them out (``view_paths``)."""
        groups: dict[Optional[Path], list[str]] = {}
        for path in paths:
            groups.setdefault(self.root_for(path), []).append(path)
        return groups

    def view(self, root: Optional[Path], given: Iterable[str] = ()) -> "ProjectIndex":
        """The project view of ``root``: every project file not among ``given`` (``layout.view_files``:
        at most ``VIEW_LIMIT``, the nearest to ``given``)."""
        from lint_rules.facts.model import FileFacts
        from lint_rules.project import ProjectIndex

        view = self.views.get(root)
        if view is None:
            view = self.views[root] = ProjectIndex(config=self.run.config, loader=self._load,
                                                   env_roots=list(self.environment.roots),
                                                   environment=self.environment.name())
            for outcome in self.store.facts_many(self.view_paths(root, given), jobs=self.run.jobs,
                                                 progress=self.run.progress):
                if isinstance(outcome, FileFacts):
                    view.add(outcome, module_name_for(Path(outcome.path), self.store.packages,
                                                      self.store.directories)[2])
        return view

    def view_paths(self, root: Optional[Path], given: Iterable[str] = ()) -> list[str]:
        """The files of ``root``'s view besides ``given`` (listed once per root)."""
        paths = self._view_paths.get(root)
        if paths is None:
            paths = self._view_paths[root] = []
            if root is not None:
                skip = {real_path(p, self.store.directories) for p in given}
                near = [Path(p) for p in given] or [Path.cwd()]
                files, bounded = view_files(root, near, self.run.exclude)
                if bounded:  # once per root and process
                    print(f"fwdlint: warning: {shown(str(root))} holds more than {VIEW_LIMIT:,} Python files; the "
                          f"project view reads the {VIEW_LIMIT:,} nearest the checked files (name a smaller root "
                          "with --project-root)", file=sys.stderr)
                paths.extend(p for p in files if p not in skip)
                self.listed[root] = files
        return paths

    def _load(self, path: Path, module: str, is_package: bool) -> Optional["FileFacts"]:
        from lint_rules.facts.model import FileFacts

        self.resolved.add(str(path))
        if any(root in path.parents for root in self.environment.roots):
            self.installed.add(str(path))
        outcome = self.store.facts(str(path), locate=False, module=(module, is_package))
        return outcome if isinstance(outcome, FileFacts) else None

    def check(self, view: "ProjectIndex", facts: "FileFacts", honour_noqa: bool = True) -> list[Diagnostic]:
        return check_file(view, facts, self.run.select, self.ignore_for(facts.path), honour_noqa)

    def ignore_for(self, path: str) -> tuple[str, ...]:
        """``ignore`` plus the ``per-file-ignores`` codes of the patterns that name ``path``."""
        extra = [code for pattern, codes in self.per_file_ignores if matches(path, (pattern,)) for code in codes]
        return (*self.run.ignore, *extra)


def check_file(index: "ProjectIndex", facts: "FileFacts", select: Sequence[str], ignore: Sequence[str],
               honour_noqa: bool = True) -> list[Diagnostic]:
    from lint_rules.noqa import is_suppressed
    from lint_rules.rules import selected

    found = []
    defers: dict[str, str] = {}  # a rule's code -> the code whose finding on the same line and symbol wins
    for rule in selected(tuple(select), tuple(ignore)):
        defers[rule.CODE] = getattr(rule, "DEFERS_TO", "")
        for diagnostic in rule.check(index, facts):
            if honour_noqa and is_suppressed(facts.noqa, diagnostic.line, diagnostic.code):
                continue
            found.append(diagnostic)
    if any(defers.values()):
        made = {(d.code, d.line, d.symbol) for d in found}
        found = [d for d in found if (defers[d.code], d.line, d.symbol) not in made]
    return sorted(found)


#: Chains of methods and of base classes are followed recursively; Python's default limit (1,000
#: frames) ends at about 300 levels. Deeper code is reported per file, never a crash. (The parsing
#: runs in ``workers`` processes, on a deeper stack with a higher limit.)
RECURSION_LIMIT = 6000


def analyse(paths: Iterable[str], run: Run = Run(), reuse: bool = False) -> Result:
    """Check ``paths``: every file is read and parsed (a failure is a ``FileError``), findings of
    the selected rules on them are reported. ``reuse``: the findings only (no ``views``), from the
    cache if nothing they depend on changed (``results``)."""
    paths = list(dict.fromkeys(paths))
    session = Session(run, paths[0] if paths else None)
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, RECURSION_LIMIT))
    try:
        with few_collections() as collecting:
            if not reuse or session.store.cache is None:
                return _analyse(session, paths, collecting)
            from lint_rules.results import Lookup

            lookup = Lookup(session, paths)
            stored = lookup.found()
            if stored is not None and (stored.coverage is not None or not run.coverage):
                return Result(diagnostics=stored.diagnostics, errors=stored.errors, resolved=stored.resolved,
                              installed_read=stored.installed, reused=True, coverage=stored.coverage)
            result = _analyse(session, paths, collecting)
            lookup.store(result)
            return result
    finally:
        sys.setrecursionlimit(limit)
        session.store.close()


def _analyse(session: Session, paths: list[str], collecting: Optional[few_collections] = None) -> Result:
    """``collecting``: no cyclic collection while the facts are read, none walks them after
    (``few_collections.pause``, ``settle``)."""
    from lint_rules.facts.model import FileFacts
    from lint_rules.rules import selected_codes

    run = session.run
    result = Result()
    if collecting is not None:
        collecting.pause()
    outcomes = session.store.facts_many(paths, jobs=run.jobs, progress=run.progress)
    by_root: dict[Optional[Path], list[FileFacts]] = {}
    for outcome in outcomes:
        if isinstance(outcome, FileError):
            result.errors.append(outcome)
        else:
            by_root.setdefault(session.root_for(outcome.path), []).append(outcome)
    given = session.by_root(paths)
    for root, group in by_root.items() if selected_codes(run.select, run.ignore) else ():
        view = session.view(root, given[root])
        for facts in group:
            view.add(facts, module_name_for(Path(facts.path), session.store.packages, session.store.directories)[2])
        if collecting is not None:
            collecting.settle()
        for facts in group:
            try:
                result.diagnostics.extend(session.check(view, facts))
                if run.coverage:
                    result.coverage = _add(result.coverage, _coverage(view, facts))
            except RecursionError:  # a chain of calls or bases deeper than the analysis follows
                result.errors.append(FileError(facts.path, "too deeply nested to analyse "
                                                           f"(more than {sys.getrecursionlimit()} levels)"))
    if run.coverage and result.coverage is None:
        result.coverage = (0, 0)
    result.views = session.views
    result.errors.sort()
    result.files_read = len(session.store.read)
    result.files_parsed = session.store.extracted
    result.resolved = tuple(sorted(session.resolved))
    result.installed_read = len(session.installed)
    return result


def _coverage(view: "ProjectIndex", facts: "FileFacts") -> tuple[int, int]:
    """(module classes of ``facts`` checked completely, those left partly unchecked)."""
    from lint_rules.project import ClassRef
    from lint_rules.rules.fwd005_unresolved_name import partly_unchecked

    verdicts = [partly_unchecked(view, ClassRef(facts, cls)) for cls in facts.classes]
    return verdicts.count(False), verdicts.count(True)


def _add(total: Optional[tuple[int, int]], more: tuple[int, int]) -> tuple[int, int]:
    return (total[0] + more[0], total[1] + more[1]) if total is not None else more
