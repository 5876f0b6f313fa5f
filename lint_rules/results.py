"""A run's findings reused: a warm run whose inputs are all as they were reports what the same run
found last time, without decoding a fact or running a rule.

A run's inputs are fwdlint's own code, the run's options, its environment and working directory,
and the content key (``store``) of every checked file and of every file of the project views they
are checked with. Name resolution reads files on demand, so a stored run also keeps what it looked
at on disk (``ProjectIndex.probed``): each candidate file, found (by content key) or missing, each
directory listing of sibling modules, and each package looked for, found or missing. The run is
reused only if every one of them is still as it was. Nothing is stored when a file changed while
the run read it.

The findings depend on a file only through its facts (what ``facts.extract`` reads of it), so a run
is also named by its files' facts: after an edit the analysis cannot see (a comment added at the
end, a docstring reworded), only the edited files are parsed, and the earlier findings are reused
when their facts came out the same. Any other edit re-checks every file (from cached facts: only the
edited files are parsed again).

The flake8 plugin checks a file at a time, in several processes: it stores and reuses findings
file by file, under the same inputs and by the files' facts too (``FileLookup``).

Stored in the facts database (``store``), a few versions per first checked path, as JSON.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Callable, NamedTuple, Optional, Union

from lint_rules import environment
from lint_rules.diagnostics import Diagnostic, FileError, Step
from lint_rules.environment import distribution_version
from lint_rules.layout import modules_in
from lint_rules.stamps import blake2b

if TYPE_CHECKING:
    from lint_rules.engine import Result, Session
    from lint_rules.project import ProjectIndex
    from lint_rules.store import FactsStore

FORMAT = "4"  # of the stored value (4: a finding's steps and related places)
_PREFIX = "R:"  # the store's slot for stored runs: "R:" + the first checked path (pruned with it)
_FACTS_PREFIX = "P:"  # ... for the pointers from a run's facts key to its key, and their slot
_FILE_PREFIX = "F:"  # ... for one file's findings (``FileLookup``): "F:" + the file's path
_PROBES_PREFIX = "Q:"  # ... for what a ``FileLookup`` view looked at on disk: "Q:" + a file it checked
_FILE_FACTS_PREFIX = "G:"  # ... for the pointers from a file's findings by facts to them: "G:" + its path
#: Files a run parses before it looks its findings up by the files' facts (``Lookup.found``): any more
#: and it is a cold run or a switch of branches, not an edit (and its progress line shows the parsing).
AT_MOST_PARSED = 16
#: Distributions whose installed version a rule reads (``ProjectIndex.installed_version``): FWD201's
#: severity and help follow torch's. Each is part of a run's key (tests/test_honest_caches.py finds
#: every ``installed_version`` call of the rules and checks that it is named here).
VERSIONED = ("torch",)


def code_digest(package: Path = Path(__file__).parent,
                content: Callable[[str], bytes] = lambda path: Path(path).read_bytes()) -> str:
    """Every module of fwdlint: the rules and the project view decide findings, not only the facts.
    ``content``: a module's bytes, or anything that changes with them (the store's digest by stamp)."""
    digest = blake2b(digest_size=16)
    for path in sorted(package.rglob("*.py")):
        digest.update(path.relative_to(package).as_posix().encode() + b"\0" + content(str(path)))
    return digest.hexdigest()


_OWN_CODE: list[str] = []  # this process's fwdlint, digested once


def _own_code(store: FactsStore) -> str:
    """``code_digest`` of this fwdlint, each module by its stamp: a warm run reads none of them."""
    if not _OWN_CODE:
        _OWN_CODE.append(code_digest(content=lambda path: b"d" + store.file_digest(path)))
    return _OWN_CODE[0]


class Stored(NamedTuple):
    diagnostics: list[Diagnostic]
    errors: list[FileError]
    resolved: tuple[str, ...]  # files read to resolve names
    installed: int  # ... of them, installed
    coverage: Optional[tuple[int, int]]  # ``Result.coverage``, if that run counted it


class Lookup:
    """The key of a run (computed before it) and the file keys it was computed from."""

    def __init__(self, session: Session, paths: list[str]) -> None:
        self.session = session
        store = session.store
        given = store.read_keys(paths)
        self.keys: dict[str, str] = {path: key for path, key in zip(paths, given) if isinstance(key, str)}
        self._options = _run_options(session)
        # the files whose keys name the run: the checked ones, then each project view's, by root
        self._files: list[tuple[str, list[tuple[str, Union[str, FileError]]]]] = [("", list(zip(paths, given)))]
        for root, group in sorted(session.by_root(paths).items(), key=lambda item: str(item[0])):
            view = session.view_paths(root, group)
            view_keys = store.read_keys(view)
            self.keys.update((path, key) for path, key in zip(view, view_keys) if isinstance(key, str))
            self._files.append((str(root), list(zip(view, view_keys))))
        self.key = self._digest(lambda path, key: _text(key))
        self.slot = _PREFIX + os.path.abspath(paths[0] if paths else ".")
        self._by_facts: Optional[str] = None  # ``_facts_key``, once computed

    def _digest(self, name: Callable[[str, Union[str, FileError]], Optional[str]], *tag: str) -> Optional[str]:
        """The run's key with each file named by ``name(path, key)``; None if a name is None."""
        parts = [*tag, *self._options]
        for root, files in self._files:
            names = [(path, name(path, key)) for path, key in files]
            if any(named is None for _, named in names):
                return None
            parts.append((root, names))
        return _named(parts)

    def _facts_key(self) -> Optional[str]:
        """The run's key with each file named by its facts (``FactsStore.facts_digest``) instead of
        its bytes: an edit the analysis cannot see (a comment, a reworded docstring) keeps it."""
        if self._by_facts is None:
            store = self.session.store
            self._by_facts = self._digest(lambda path, key: _facts_name(store, path, key), "facts")
        return self._by_facts

    def found(self) -> Optional[Stored]:
        """The stored findings of this run, if every file it looked at is as it was; else those of
        a run whose files' facts are all as now, once the few files not parsed yet are (``AT_MOST_PARSED``)."""
        cache = self.session.store.cache
        if cache is None:
            return None
        text = cache.get(self.key)
        stored = self._read(text) if text is not None else None
        if stored is not None:
            return stored
        if not _parse_few(self.session, self.keys):
            return None
        facts_key = self._facts_key()
        pointer = cache.get(_FACTS_PREFIX + facts_key) if facts_key is not None else None
        text = cache.get(pointer) if pointer is not None else None
        stored = self._read(text) if text is not None else None
        if stored is not None and _unmoved(self.session, self.keys):  # the next run with these files: the short way
            cache.put(self.key, text, self.slot)  # type: ignore[arg-type]
        return stored

    def _read(self, text: str) -> Optional[Stored]:
        try:
            stored = json.loads(text)
            if stored["format"] != FORMAT or not all(_unchanged(self.session, probe) for probe in stored["probed"]):
                return None
            return Stored([_diagnostic(row) for row in stored["diagnostics"]],
                          [FileError(*row) for row in stored["errors"]], tuple(stored["resolved"]),
                          stored["installed"], tuple(stored["coverage"]) if stored.get("coverage") else None)
        except (ValueError, TypeError, KeyError, IndexError):  # a value we cannot read: run again
            return None

    def store(self, result: Result) -> None:
        """Keep ``result`` for the next identical run, unless a file changed while this one read it;
        named by the files' facts too (``_facts_key``)."""
        session = self.session
        cache, keys = session.store.cache, session.store.keys
        if cache is None or not _unmoved(self.session, self.keys):
            return
        if session.store.failed:  # a timeout or a memory limit is not what the files say: never replayed
            return
        probed = [_recorded(probe, keys) for view in session.views.values() for probe in view.probed]
        value = {"format": FORMAT, "probed": probed,
                 "diagnostics": [_row(d) for d in result.diagnostics],
                 "errors": [[e.path, e.message] for e in result.errors],
                 "resolved": list(result.resolved), "installed": result.installed_read,
                 "coverage": list(result.coverage) if result.coverage is not None else None}
        cache.put(self.key, json.dumps(value), self.slot)
        facts_key = self._facts_key()
        if facts_key is not None:
            cache.put(_FACTS_PREFIX + facts_key, self.key, _FACTS_PREFIX + self.slot[len(_PREFIX):])


class FileLookup:
    """The findings of single files, each checked with its project's view (the flake8 plugin checks a
    file at a time, spread over ``-j`` processes, each with its own view).

    A file's findings are named by the project's key (the run's options and the content key of every
    listed file of the view) and the file's own key; each process stores the findings it computed
    when it ends (``store``), with what its view looked at on disk, and any process reuses them while
    that is as it was. They are named by the files' facts too, as ``Lookup`` names a run: after an
    edit the analysis cannot see (a comment, a reworded docstring) the few files edited are parsed
    and the findings found by their facts. Reused and stored only while the view holds the listed files alone (besides
    the file checked): a file outside the listing that flake8 checked earlier in the same process
    (``extras``) joins that process's view, and the answer would depend on flake8's order."""

    def __init__(self, session: Session, root: Optional[Path], listed: list[str]) -> None:
        self.session = session
        given = session.store.read_keys(listed)
        self.keys: dict[str, str] = {path: key for path, key in zip(listed, given) if isinstance(key, str)}
        self.listed = set(listed)
        named = [*_run_options(session), str(root), [(path, _text(key)) for path, key in zip(listed, given)]]
        self.key = _named(named)
        self.root = str(root)
        self._given = list(zip(listed, given))
        self._by_facts: Optional[str] = None  # ``_facts_key``, once computed ("" if it cannot be)
        self.extras: set[str] = set()  # checked files outside the listing, in this process
        self._computed: dict[str, tuple[str, list[Diagnostic]]] = {}  # path -> (its key, findings): to store
        self._probes_hold: dict[str, bool] = {}  # a stored probe list's key -> still as it was

    def _file_key(self, path: str, key: str) -> str:
        return _FILE_PREFIX + _named((self.key, path, key))

    def checking(self, path: str) -> bool:
        """Note ``path`` as checked; may its findings be reused and stored?"""
        if path not in self.listed:
            self.extras.add(path)
        return self.extras <= {path}

    def _facts_key(self, parse: bool) -> Optional[str]:
        """The project's key with each listed file named by its facts (``FactsStore.facts_digest``);
        with ``parse``, once the few files whose facts are not stored yet are parsed (``AT_MOST_PARSED``)."""
        if self._by_facts or (self._by_facts == "" and parse):  # known, or known not to be had
            return self._by_facts or None
        if parse:
            _parse_few(self.session, self.keys)
        names = [(path, _facts_name(self.session.store, path, key)) for path, key in self._given]
        if any(name is None for _, name in names):
            self._by_facts = "" if parse else None
            return None
        self._by_facts = _named(["facts", *_run_options(self.session), self.root, names])
        return self._by_facts

    def _by_facts_key(self, facts_key: str, path: str, key: str) -> Optional[str]:
        digest = self.session.store.facts_digest(path, key)
        return None if digest is None else _FILE_FACTS_PREFIX + _named((facts_key, path, digest))

    def found(self, path: str, key: str) -> Optional[list[Diagnostic]]:
        """The stored findings of ``path`` (content key ``key``), if everything they depend on is as it was."""
        cache = self.session.store.cache
        if cache is None:
            return None
        text = cache.get(self._file_key(path, key))
        if text is None:  # found by the files' facts: an edit the analysis cannot see
            facts_key = self._facts_key(parse=True)
            pointer = self._by_facts_key(facts_key, path, key) if facts_key is not None else None
            row = cache.get(pointer) if pointer is not None else None
            text = cache.get(row) if row is not None else None
        if text is None:
            return None
        try:
            probes, rows = json.loads(text)
            return [_diagnostic(row) for row in rows] if self._still(probes) else None
        except (ValueError, TypeError, IndexError):  # a value we cannot read: check again
            return None

    def _still(self, probes: str) -> bool:
        """Is what the stored probe list ``probes`` saw on disk still there? (Once per process.)"""
        if probes not in self._probes_hold:
            cache = self.session.store.cache
            text = cache.get(probes) if cache is not None else None
            self._probes_hold[probes] = text is not None and all(
                _unchanged(self.session, probe) for probe in json.loads(text))
        return self._probes_hold[probes]

    def computed(self, path: str, key: str, diagnostics: list[Diagnostic]) -> None:
        self._computed[path] = (key, diagnostics)

    def store(self, view: ProjectIndex) -> None:
        """Keep the findings computed with ``view``, unless a file changed while this process read it."""
        session = self.session
        cache, keys = session.store.cache, session.store.keys
        checked = {path: key for path, (key, _) in self._computed.items()}
        if cache is None or not checked or session.store.failed or not _unmoved(session, {**self.keys, **checked}):
            return
        text = json.dumps([_recorded(probe, keys) for probe in view.probed])
        probes = _PROBES_PREFIX + blake2b(text.encode("utf-8", "surrogateescape"), digest_size=20).hexdigest()
        cache.put(probes, text, _PROBES_PREFIX + next(iter(checked)))
        facts_key = self._facts_key(parse=False)  # the view read every listed file's facts
        for path, (key, diagnostics) in self._computed.items():
            row = self._file_key(path, key)
            cache.put(row, json.dumps([probes, [_row(d) for d in diagnostics]]), _FILE_PREFIX + path)
            pointer = self._by_facts_key(facts_key, path, key) if facts_key is not None else None
            if pointer is not None:
                cache.put(pointer, row, _FILE_FACTS_PREFIX + path)


def _run_options(session: Session) -> list[object]:
    """What every finding depends on besides the files: fwdlint's code, the options, the environment."""
    store, run, env = session.store, session.run, session.environment
    return [FORMAT, _own_code(store), sys.version_info[:2], os.getcwd(), repr(run.config), run.select, run.ignore,
            run.exclude, run.per_file_ignores, str(run.project_root), env.python, [str(root) for root in env.roots],
            env.version, [distribution_version(env.roots, name) for name in VERSIONED]]


def _unmoved(session: Session, keys: dict[str, str]) -> bool:
    """Are the files as ``keys`` says (none changed while the run read it)?"""
    read = session.store.keys
    return all(read.get((path, True), key) == key for path, key in keys.items())


def _recorded(probe: tuple, keys: dict[tuple[str, bool], str]) -> list[object]:
    """A probe of ``ProjectIndex.probed`` as stored."""
    if probe[0] == "file":
        kind, path, module, is_package, found = probe
        # found: the key its facts were read by ("" unreadable); missing: None
        return [kind, path, module, is_package, keys.get((path, False), "") if found else None]
    return list(probe)


def _unchanged(session: Session, probe: list) -> bool:
    """Is what a stored probe saw on disk still there?"""
    if probe[0] == "file":
        _, path, module, is_package, key = probe
        if not os.path.isfile(path):
            return key is None
        (now,) = session.store.read_keys([path], locate=False, module=(module, bool(is_package)))
        return key == (now if isinstance(now, str) else "")
    if probe[0] == "present":
        _, top, roots, found = probe
        return environment.package_present(roots, top) == found
    _, directory, names = probe
    return names == [path.name for path in modules_in(Path(directory))]


def _row(d: Diagnostic) -> list[object]:
    """A finding as stored: its fields in order, the steps and related places as rows of theirs."""
    *fields, steps, related = d
    return [*fields, [list(step) for step in steps], [list(step) for step in related]]


def _diagnostic(row: list) -> Diagnostic:
    *fields, steps, related = row
    return Diagnostic(*fields, steps=tuple(Step(*s) for s in steps), related=tuple(Step(*s) for s in related))


def _named(parts: object) -> str:
    """The key that names ``parts`` (strings, numbers and lists or tuples of them)."""
    return blake2b(repr(parts).encode("utf-8", "surrogateescape"), digest_size=20).hexdigest()


def _parse_few(session: Session, keys: dict[str, str]) -> bool:
    """Parse the files of ``keys`` whose facts are not stored yet, if they are few (``AT_MOST_PARSED``);
    are all their facts stored now?"""
    store = session.store
    unparsed = [path for path, key in keys.items() if store.facts_digest(path, key) is None]
    if len(unparsed) > AT_MOST_PARSED:
        return False
    if unparsed:
        store.facts_many(unparsed, jobs=session.run.jobs)
    return True


def _facts_name(store: FactsStore, path: str, key: Union[str, FileError]) -> Optional[str]:
    """A file named by its facts (``FactsStore.facts_digest``), or by why it could not be read."""
    return store.facts_digest(path, key) if isinstance(key, str) else _text(key)


def _text(key: Union[str, FileError]) -> str:
    """A file's content key, or the reason it could not be read."""
    return key if isinstance(key, str) else key.message
