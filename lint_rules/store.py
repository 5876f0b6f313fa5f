"""The facts store: every caller gets a file's facts here, computed once per content.

Keyed by a hash of the file's bytes, its module name and whether evidence lines are wanted, inside
a database file named by the schema: the tool version, the Python and LibCST versions and the
code that shapes stored facts (``_FACTS_CODE``, the records' shapes included). A moved, edited or differently
packaged file is a different key, another version of fwdlint a different file, so nothing needs
invalidating and two versions sharing a cache directory leave each other alone. The database, its
directory and their upkeep: ``cache_file``.

A file the text prefilter rules out is still checked for syntax (CPython's parser), and that
verdict is cached too, so a given file with a syntax error is always reported.
"""

from __future__ import annotations

import importlib.util
import os
import stat
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional, Sequence, Union

from lint_rules import __version__
from lint_rules.cache_file import Cache, cache_directory
from lint_rules.diagnostics import FileError
from lint_rules.layout import module_name_for
from lint_rules.source import OVERLAY, decode, one_line, python_parse, python_syntax_error
from lint_rules.stamps import Stamps, blake2b, digest

#: The code whose changes change the STORED facts (rules run on facts after the cache, so they are
#: not here): the collectors, what they import from outside ``facts`` (noqa comments, the shared
#: contract, source decoding and positions), this module's ``_extract`` (the syntax verdicts),
#: ``workers``, ``parse_here`` and ``parse_limits`` (the recursion limit and stack decide what is too
#: deeply nested), and ``cache_file`` (how a value is written). Module names and paths are in each
#: key already, so ``layout`` and ``discover`` are not.
_FACTS_CODE = ("facts/*.py", "noqa.py", "contract.py", "vocabulary.py", "source.py", "store.py",
               "cache_file.py", "stamps.py", "workers.py", "parse_here.py", "parse_limits.py")


def _facts_code_digest(package: Path = Path(__file__).parent) -> str:
    """A digest of the code that shapes stored facts, so that an edited collector (a development
    checkout, an editable install) never meets facts its old version cached."""
    digest = blake2b(digest_size=8)
    for pattern in _FACTS_CODE:
        for path in sorted(package.glob(pattern)):
            digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def _libcst_version() -> str:
    """LibCST's version from its ``.dist-info`` directory's name: ``importlib.metadata`` (or LibCST
    itself) would cost a warm run more than its whole analysis of a small project."""
    spec = importlib.util.find_spec("libcst")
    if spec is None or spec.origin is None:
        return "?"
    site = Path(spec.origin).parent.parent
    try:
        names = os.listdir(site)
    except OSError:
        return "?"
    return ",".join(sorted(n[7:-10] for n in names if n.startswith("libcst-") and n.endswith(".dist-info"))) or "?"


# The records' shapes (``codec.FORMAT``) are in the code digest: facts/model.py is part of it. Not
# importing them here spares a run whose findings are reused (``results``) the facts model.
_SCHEMA = (f"fwdlint-facts-{__version__}-{_facts_code_digest()}"
           f"-py{sys.version_info[0]}.{sys.version_info[1]}-libcst{_libcst_version()}")
_ERROR = "!"  # prefix of a cached error message

if TYPE_CHECKING:  # imported where a file needs parsing: a warm run spares the import
    from lint_rules.facts.model import FileFacts

Outcome = Union["FileFacts", FileError]


class FactsStore:
    """Facts of files by path, computed at most once per content (per process, and per cache)."""

    def __init__(self, cache_dir: Optional[Path] = None, target: Optional[tuple[int, int]] = None) -> None:
        """``target``: the Python version the checked code is for (``environment``), which judges
        its syntax; None: the running interpreter's."""
        self.target = tuple(target) if target is not None else tuple(sys.version_info[:2])
        directory = cache_directory(cache_dir) if cache_dir is not None else None
        self.cache = Cache(directory, _SCHEMA) if directory is not None else None
        self.memory: dict[tuple[str, bool], Outcome] = {}
        self.read: set[str] = set()  # paths this store read (for statistics)
        self.extracted = 0  # how many needed a parse (cache misses)
        self.keys: dict[tuple[str, bool], str] = {}  # (path, locate) -> the content key its facts were got by
        self.packages: dict[str, tuple[tuple[str, ...], Path]] = {}  # directories' packages (module_name_for)
        self.directories: dict[str, str] = {}  # ... and their real paths
        # files whose parser process failed (timed out, out of memory, crashed): this machine's and these
        # limits' verdict, never the file's, so neither their facts nor a run's findings are stored
        self.failed: set[str] = set()
        self._stamps: Optional[Stamps] = None  # read from the cache when the first file is
        self._texts: dict[str, str] = {}  # cached rows read by ``facts_digest``, until decoded
        self._facts_digests: dict[str, str] = {}  # content key -> ``facts_digest``

    def facts(self, path: str, locate: bool = True, data: Optional[bytes] = None,
              module: Optional[tuple[str, bool]] = None) -> Outcome:
        """Facts of the file at ``path`` (or of ``data``, its current text, as flake8 gives it).
        ``locate=False``: without evidence lines, for files read only to resolve names."""
        return self.facts_many([path], locate, jobs=1, data=data, module=module)[0]

    def facts_many(self, paths: Sequence[str], locate: bool = True, jobs: int = 1, data: Optional[bytes] = None,
                   module: Optional[tuple[str, bool]] = None,
                   progress: Optional[Callable[[int, int, int], None]] = None) -> list[Outcome]:
        """Facts of many files; cache misses are extracted here if they are few and small
        (``parse_here``), else in ``jobs`` worker processes (``workers.AUTO``: as many as the number
        of misses repays, ``workers.auto_jobs``).
        ``progress(done, total, cached)`` is told as files are read (``progress.ProgressLine``)."""
        outcomes: list[Optional[Outcome]] = [None] * len(paths)
        misses: list[tuple[int, str, tuple]] = []
        for position, path in enumerate(paths):
            if data is None and (path, locate) in self.memory:
                outcomes[position] = self.memory[(path, locate)]
                continue
            read = self._read(path, locate, data, module, bytes_needed=False)
            found = None if isinstance(read, FileError) else self._cached(read[3], path)
            if found is None and not isinstance(read, FileError) and read[0] is None:
                stamped = read[3]
                read = self._read(path, locate, data, module)  # to be parsed: its bytes are needed after all
                if not isinstance(read, FileError) and read[3] != stamped:  # changed meanwhile
                    found = self._cached(read[3], path)
            if isinstance(read, FileError):
                outcomes[position] = read
                continue
            self.read.add(path)
            content, name, is_package, key = read
            if data is None:
                self.keys[(path, locate)] = key
            if found is None:
                misses.append((position, key, (path, content, name, is_package, locate, self.target)))
            else:
                outcomes[position] = found
        tasks = [task for _, _, task in misses]
        done = [len(paths) - len(tasks)]  # read already: from memory, the cache, or an error

        def one_more() -> None:
            done[0] += 1
            progress(done[0], len(paths), len(paths) - len(tasks))  # type: ignore[misc]

        if progress is not None:
            progress(done[0], len(paths), done[0])
        told = {"done": one_more} if progress is not None else {}
        extracted = self._extract_all(tasks, jobs, told)
        if extracted:
            from lint_rules.facts import codec
            from lint_rules.facts.model import FileFacts
        self.extracted += len(tasks)
        for (position, key, (path, *_)), outcome in zip(misses, extracted):
            if not isinstance(outcome, (FileFacts, FileError)):  # a workers.Failure: not cached, another machine
                # or limit may do better
                outcomes[position] = FileError(path, outcome.reason)
                self.failed.add(path)
                continue
            outcomes[position] = outcome
            if self.cache is not None:
                self.cache.put(key, _ERROR + outcome.message if isinstance(outcome, FileError)
                               else codec.encode(outcome), _slot(paths[position], locate))
        for path, outcome in zip(paths, outcomes):
            if data is None:
                self.memory[(path, locate)] = outcome  # type: ignore[assignment]
        return outcomes  # type: ignore[return-value]

    @staticmethod
    def _extract_all(tasks: list[tuple], jobs: int, told: dict) -> list:
        """Parse the misses: in this process if they are few and small, else in the parser
        processes (started by the first miss and kept for the process's next runs)."""
        if not tasks:
            return []
        from lint_rules.parse_here import run_tasks

        return run_tasks(_extract, tasks, [len(task[1]) for task in tasks], ("lint_rules.facts.extract",), jobs,
                         **told)

    def read_keys(self, paths: Sequence[str], locate: bool = True,
                  module: Optional[tuple[str, bool]] = None) -> list[Union[str, FileError]]:
        """Each file's content key (what its facts are stored under), or the error reading it: what
        ``facts_many`` would look up, without decoding anything (``results`` keys a run by them)."""
        return [read if isinstance(read, FileError) else read[3]
                for read in (self._read(path, locate, None, module, bytes_needed=False) for path in paths)]

    def _read(self, path: str, locate: bool, data: Optional[bytes], module: Optional[tuple[str, bool]],
              bytes_needed: bool = True) -> Union[tuple[Optional[bytes], str, bool, str], FileError]:
        """A file's bytes (``data`` if given; None when not ``bytes_needed`` and its stamp gave its
        digest: ``stamps``), module name, package flag and content key, or the error reading it."""
        try:
            if data is not None:
                content: Optional[bytes] = data
                hashed = digest(data)
            else:
                content, hashed = self._content(path, bytes_needed)
        except OSError as error:
            return FileError(path, one_line(error))
        name, is_package = (module if module is not None
                            else module_name_for(path, self.packages, self.directories)[:2])
        key = blake2b(b"\0".join([_SCHEMA.encode(), name.encode("utf-8", "surrogateescape"),
                                          b"pkg" if is_package else b"mod", b"loc" if locate else b"",
                                          b"%d.%d" % self.target, hashed]), digest_size=20).hexdigest()
        return content, name, is_package, key

    def _content(self, path: str, bytes_needed: bool) -> tuple[Optional[bytes], bytes]:
        """The file's bytes (None if not needed and its stamp is kept) and their digest."""
        if OVERLAY and os.path.realpath(path) in OVERLAY:  # the text standing in for it (``source.OVERLAY``)
            content = OVERLAY[os.path.realpath(path)]
            return content, digest(content)
        info = _regular(path)
        if self._stamps is None:
            self._stamps = Stamps(self.cache.stamps() if self.cache is not None else {})
        if not bytes_needed:
            found = self._stamps.lookup(path, info)
            if found is not None:
                return None, found
        content = Path(path).read_bytes()
        hashed = digest(content)
        if self.cache is not None:
            self._stamps.learn(path, info, hashed)
        return content, hashed

    def file_digest(self, path: str) -> bytes:
        """The digest of a file's bytes, by its stamp when it is kept (``stamps``); raises ``OSError``."""
        return self._content(path, bytes_needed=False)[1]

    def facts_digest(self, path: str, key: str) -> Optional[str]:
        """A digest of what the analysis reads of the file at ``path`` whose content key is ``key``
        (``read_keys``): its facts, with evidence lines, as cached. Equal for two versions whose facts
        are (a comment added at the end, a docstring reworded); None if the cache holds no facts for it."""
        if self.cache is None:
            return None
        if key in self._facts_digests:
            return self._facts_digests[key]
        text = self._texts.get(key)
        if text is None:
            text = self.cache.get(key)
            if text is None:
                return None
            self._texts[key] = text
        name, is_package = module_name_for(path, self.packages, self.directories)[:2]
        found = self._facts_digests[key] = blake2b(b"\0".join(
            [_SCHEMA.encode(), name.encode("utf-8", "surrogateescape"), b"pkg" if is_package else b"mod",
             b"%d.%d" % self.target, text.encode("utf-8", "surrogateescape")]), digest_size=20).hexdigest()
        return found

    def close(self) -> None:
        """Release the cache file (the last connection to close folds the WAL into it). The
        parser processes are the process's (``workers.shared``)."""
        if self.cache is not None:
            if self._stamps is not None:
                self.cache.put_stamps(self._stamps.fresh)
                self._stamps.fresh = {}
            self.cache.close()

    def _cached(self, key: str, path: str) -> Optional[Outcome]:
        text = self._texts.pop(key, None) or (self.cache.get(key) if self.cache is not None else None)
        if text is None:
            return None
        if text.startswith(_ERROR):
            return FileError(path, text[len(_ERROR):])
        from lint_rules.facts import codec

        try:
            return codec.decode(text, path)
        except (ValueError, TypeError, IndexError):  # a row we cannot read: compute it again
            return None


def _slot(path: str, locate: bool) -> str:
    """What versions of one file share: its absolute path and whether evidence lines are in."""
    return ("L:" if locate else "-:") + os.path.abspath(path)


def _regular(path: str) -> os.stat_result:
    """The file's status; anything but a regular file (a FIFO, a device) is refused, not read:
    reading a FIFO blocks until someone writes to it."""
    info = os.stat(path)
    if not stat.S_ISREG(info.st_mode):
        raise OSError(f"not a regular file ({'directory' if os.path.isdir(path) else 'FIFO, socket or device'})")
    return info


def _extract(task: tuple[str, bytes, str, bool, bool, tuple[int, int]]) -> Outcome:
    """Facts of one file's bytes, or the one-line reason why not (runs in a ``workers`` process)."""
    from lint_rules.facts.extract import extract

    path, data, module, is_package, locate, target = task
    source: Optional[str] = None
    try:
        source = decode(data)
        # CPython refuses NUL bytes, even inside strings; decided first, because LibCST, which reads
        # a newer target's syntax below, accepts them there
        if "\0" in source:
            return FileError(path, one_line(python_syntax_error(source, path) or SyntaxError("NUL byte"), source, path))
        # given files are judged for the target Python; installed ones read to resolve names are the
        # environment's to judge: they are read if they can be, else left out
        tree, error = python_parse(source, path)
        if error is not None and not _bad_literal(error) and target > sys.version_info[:2]:
            # the target is newer than this interpreter: syntax it does not know yet (``type X = ...``
            # under 3.11 for 3.12)
            from lint_rules.facts.newer_syntax import parse_newer

            found = parse_newer(source, path, error, target)
            tree, error = (found, None) if not isinstance(found, SyntaxError) else (None, found)
        if error is not None:
            return FileError(path, one_line(error))
        return extract(source, path, module, is_package, locate=locate, tree=tree)
    except (UnicodeDecodeError, SyntaxError, LookupError, RecursionError, ValueError) as error:
        return FileError(path, one_line(error, source, path))


def _bad_literal(error: SyntaxError) -> bool:
    """A string or bytes literal no Python accepts (a truncated ``\\u`` escape, non-ASCII bytes),
    which LibCST parses without a word."""
    message = error.msg or ""
    return message.startswith(("(unicode error)", "(value error)")) or "bytes can only contain ASCII" in message
