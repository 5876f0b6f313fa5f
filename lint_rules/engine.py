"""source -> facts -> project index -> rules -> diagnostics; shared by the CLI and flake8 plugin.

Front ends call ``file_facts`` (one file) or ``analyse`` (many) and only format the result.
"""

from __future__ import annotations

import functools
import io
import tokenize
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Optional, Sequence, Union

import libcst as cst

from lint_rules import contract
from lint_rules.diagnostics import Diagnostic, FileError
from lint_rules.extract import empty_facts, extract
from lint_rules.facts import FileFacts
from lint_rules.noqa import is_suppressed
from lint_rules.project import Config, ProjectIndex, module_name_for
from lint_rules.rules import selected


def source_encoding(data: bytes) -> str:
    """The encoding Python would read ``data`` with (BOM, encoding cookie, default utf-8)."""
    return tokenize.detect_encoding(io.BytesIO(data).readline)[0]


def decode(data: bytes) -> str:
    """Decode Python source as the interpreter would."""
    return data.decode(source_encoding(data))


def might_matter(source: str) -> bool:
    """Text prefilter: a file without classes or registrations cannot produce a finding,
    nor define a base class another file needs. Skipping it skips its parse."""
    return "class" in source or contract.MARK_METHOD_CALL in source or contract.FSDP_REGISTER_CALL in source


def facts_from_source(source: str, path: str, real_path: Optional[Path] = None) -> FileFacts:
    """Facts of one file's text. Raises ``libcst.ParserSyntaxError`` on invalid syntax."""
    module, is_package = "", False
    if real_path is not None:
        module, is_package, _ = module_name_for(real_path)
    if not might_matter(source):
        return empty_facts(path, module)
    return extract(source, path, module, is_package)


def _one_line(error: BaseException) -> str:
    if isinstance(error, cst.ParserSyntaxError):
        return f"syntax error at line {error.raw_line}, column {error.raw_column}: {error.message}"
    if isinstance(error, UnicodeDecodeError):
        return f"cannot decode: {error.reason} at byte {error.start}"
    if isinstance(error, (SyntaxError, LookupError)):  # from tokenize.detect_encoding
        return f"cannot decode: {error.msg if isinstance(error, SyntaxError) else error}"
    if isinstance(error, OSError):
        return f"cannot read: {error.strerror or error}"
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"


def file_facts(path: str) -> Union[FileFacts, FileError]:
    """Read and extract one file; any failure becomes a one-line ``FileError``."""
    try:
        source = decode(Path(path).read_bytes())
        return facts_from_source(source, path, Path(path))
    except (OSError, UnicodeDecodeError, SyntaxError, LookupError, cst.ParserSyntaxError, RecursionError) as error:
        return FileError(path, _one_line(error))


@functools.lru_cache(maxsize=4096)
def load_imported(path: Path, module: str, is_package: bool) -> Optional[FileFacts]:
    """Loader for files that are imported by analysed files but not analysed themselves."""
    try:
        return extract(decode(path.read_bytes()), str(path), module, is_package, locate=False)
    except Exception:  # an unreadable dependency only means fewer facts, never a failed run
        return None


def new_index(config: Config) -> ProjectIndex:
    return ProjectIndex(config=config, loader=load_imported)


@dataclass
class Result:
    diagnostics: list[Diagnostic] = field(default_factory=list)
    errors: list[FileError] = field(default_factory=list)
    index: Optional[ProjectIndex] = None  # the run's index, for the call-style fixer


def check_file(index: ProjectIndex, facts: FileFacts, select: Sequence[str], ignore: Sequence[str],
               honour_noqa: bool = True) -> list[Diagnostic]:
    found = []
    for rule in selected(tuple(select), tuple(ignore)):
        for diagnostic in rule.check(index, facts):
            if honour_noqa and is_suppressed(facts.noqa, diagnostic.line, diagnostic.code):
                continue
            found.append(diagnostic)
    return sorted(found)


def analyse(paths: Iterable[str], config: Config, select: Sequence[str] = ("FWD",),
            ignore: Sequence[str] = (), jobs: int = 1) -> Result:
    paths = list(paths)
    result = Result()
    if not selected(tuple(select), tuple(ignore)):
        return result
    if jobs > 1 and len(paths) > 1:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            outcomes = list(pool.map(file_facts, paths, chunksize=max(1, len(paths) // (jobs * 8))))
    else:
        outcomes = [file_facts(p) for p in paths]
    index = new_index(config)
    analysed: list[FileFacts] = []
    for path, outcome in zip(paths, outcomes):
        if isinstance(outcome, FileError):
            result.errors.append(outcome)
            continue
        index.add(outcome, module_name_for(Path(path))[2])
        analysed.append(outcome)
    for facts in analysed:
        result.diagnostics.extend(check_file(index, facts, select, ignore))
    result.index = index
    return result
