"""The CLI's options combined with its configuration file (the flake8 plugin gets its own from flake8).

Where: ``[tool.fwdlint]`` in ``pyproject.toml``, or ``[fwdlint]`` in ``setup.cfg``, ``tox.ini`` or
``.flake8``. The search starts in the deepest directory holding every path given (the working
directory when none is given) and goes up to the file-system root; in each directory the files are
tried in that order, and the first file with a fwdlint section (or, in an INI file, the flake8
plugin's ``fwd-module-bases``, ``fwd-mark-decorators``, ``fwd-python-executable``,
``fwd-forward-helpers``, ``fwd-from-record``, ``fwd-cache-dir`` keys in ``[flake8]``, so one configuration
serves both) is the configuration; there is no merging across files. A file that does not contain ``fwd`` anywhere
is not parsed (it cannot configure fwdlint; a broken ``tox.ini`` of another tool is none of our
business). ``--config PATH`` reads exactly that file, ``--isolated`` none.

Keys (``-`` or ``_``): ``module-bases``, ``mark-decorators``, ``select``, ``ignore``,
``extend-select``, ``extend-ignore`` (added to ``select`` / ``ignore``, the file's first, then the
command line's, never replacing them), ``exclude``
(comma/whitespace separated strings; in TOML also arrays of strings), ``python-executable`` (a
string), ``forward-helpers`` (``report`` or ``skip``), ``from-record`` (a run record's path, as
``--from-record``), ``cache-dir`` (the facts cache's directory, inside the project with no link on
its path: ``configured_cache_dir``) and ``per-file-ignores`` (flake8's
``pattern:CODES`` syntax; in TOML also an array of such strings or a table ``{pattern = codes}``).
Paths and patterns in a file are relative to its directory. An option given on the command line
replaces the key. Why strict: a misspelt key
(``selectt``) silently ignored is a configuration that silently does nothing, so an unknown key, a
bad value or a file that cannot be parsed is a ``ConfigError``: one line naming the file, the
section and the key. So is a code in ``select``, ``ignore`` or ``per-file-ignores`` (config or
option) that no rule code starts with (``FWD01``, ``fwd001``, ``E501``, an empty ``select``), as in
ruff: a selection that selects nothing would be a check that is green forever.

Cost (median of 200, loaded 2-core machine): finding and reading a ``pyproject.toml`` eleven
directories up 1.0 ms; walking to the root and finding nothing 0.2 ms.
"""

import os
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, NamedTuple, Optional, Sequence

from lint_rules.contract import FORWARD_HELPERS
from lint_rules.discover import normalize_pattern, normalize_patterns, shorter_path as shown
from lint_rules.rule_codes import EMPTY_SELECT, first_code_problem, shown_code

if TYPE_CHECKING:
    import configparser

    from lint_rules.run_record import Entry

CONFIG_FILES = ("pyproject.toml", "setup.cfg", "tox.ini", ".flake8")
LIST_KEYS = ("module-bases", "mark-decorators", "select", "ignore", "exclude")
#: Keys that add codes to ``select`` / ``ignore`` (from the file, then the command line) instead of replacing them.
EXTEND_KEYS = ("extend-select", "extend-ignore")
KEYS = (*LIST_KEYS, *EXTEND_KEYS, "python-executable", "per-file-ignores", "forward-helpers", "from-record",
        "cache-dir")
#: Keys the flake8 plugin reads from ``[flake8]`` as ``fwd-<key>`` that mean the same to the CLI.
FLAKE8_KEYS = ("module-bases", "mark-decorators", "python-executable", "forward-helpers", "from-record", "cache-dir")

#: flake8's form of a code inside ``per-file-ignores`` (what separates codes from file patterns).
_CODE = re.compile(r"[A-Z]+[0-9]*")

PerFileIgnores = tuple[tuple[str, tuple[str, ...]], ...]


class ConfigError(Exception):
    """An option or configuration the run cannot use; ``str()`` is the whole one-line message."""


class Config(NamedTuple):
    """What the analysis itself is configured with (``ProjectIndex.config``)."""

    module_bases: tuple[str, ...] = ()
    mark_decorators: tuple[str, ...] = ()  # the user's own decorators that apply forward_entry
    forward_helpers: str = FORWARD_HELPERS[0]  # FWD001 on methods the project calls only from forward
    observed: tuple["Entry", ...] = ()  # the run record's entries (``--from-record``; FWD004)
    record: str = ""  # where they were read from


class Options(NamedTuple):
    """The options of a run after the configuration file and the command line are combined;
    ``exclude`` and ``per-file-ignores`` patterns are normalized (``discover.normalize_pattern``)."""

    module_bases: tuple[str, ...] = ()
    mark_decorators: tuple[str, ...] = ()
    forward_helpers: str = FORWARD_HELPERS[0]
    select: tuple[str, ...] = ("FWD",)
    ignore: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    per_file_ignores: PerFileIgnores = ()
    from_record: Optional[str] = None  # a run record's path (FWD004)
    # where ``from_record`` came from, to start the error line if it cannot be read; None: --from-record
    from_record_source: Optional[str] = None
    python: Optional[str] = None
    # where ``python`` came from, to start the error line if it cannot run; None: --python
    python_source: Optional[str] = None
    cache_dir: Optional[str] = None  # a configured ``cache-dir``, checked (``configured_cache_dir``)
    config: Optional[Path] = None  # the configuration file read
    warnings: tuple[str, ...] = ()  # one line each, to print on stderr


class ConfigFile(NamedTuple):
    """A file's fwdlint settings as written (strings, TOML arrays and tables), not yet checked."""

    path: Path
    section: str  # as the messages name it: "[fwdlint]", "[tool.fwdlint]"
    values: dict[str, Any]  # key as written -> value
    flake8: dict[str, str]  # fwd-<key> of [flake8], by <key>


def split_list(value: Optional[str]) -> tuple[str, ...]:
    if not value:
        return ()
    return tuple(item for item in re.split(r"[,\s]+", value.strip()) if item)


def parse_per_file_ignores(value: str) -> list[tuple[str, tuple[str, ...]]]:
    """flake8's ``per-file-ignores`` syntax: ``pattern [pattern ...]:CODE [CODE ...]`` groups,
    items separated by commas or whitespace (``tests/*:FWD001 scripts/*.py, x.py: FWD002,FWD003``).
    Raises ``ValueError`` naming what is wrong."""
    found: list[tuple[str, tuple[str, ...]]] = []
    patterns: list[str] = []
    codes: list[str] = []
    after_colon = False

    def close() -> None:
        if not codes:
            raise ValueError(f"no codes after '{' '.join(patterns)}:'")
        found.extend((pattern, tuple(codes)) for pattern in patterns)

    for token in re.findall(r":|[^\s,:]+", value):
        if token == ":":
            if not patterns or after_colon:
                raise ValueError("':' without a file pattern before it")
            after_colon = True
        elif after_colon and _CODE.fullmatch(token):
            codes.append(token)
        elif after_colon:  # a pattern after codes starts the next group
            close()
            patterns, codes, after_colon = [token], [], False
        else:
            patterns.append(token)
    if patterns and not after_colon:
        raise ValueError(f"'{' '.join(patterns)}' has no ':CODES' (expected 'pattern:CODES' pairs)")
    if patterns:
        close()
    return found


def dotted_names_problem(values: Sequence[str]) -> Optional[str]:
    """What is wrong with a list of (dotted) Python names, if anything."""
    for value in values:
        if not all(part.isidentifier() for part in value.split(".")):
            return f"'{value}' is not a (dotted) Python name"
    return None


# -- finding and reading files ---------------------------------------------------------------


def start_directory(paths: Sequence[str]) -> Path:
    """Where the search for a configuration file starts: the deepest directory holding every
    path given (a file's own directory), the working directory if none is given."""
    directories = [a if os.path.isdir(a) else os.path.dirname(a) for a in map(os.path.abspath, paths)]
    try:
        return Path(os.path.commonpath(directories)) if directories else Path(os.getcwd())
    except ValueError:  # paths on different drives (Windows)
        return Path(os.getcwd())


def find_config(start: Path) -> Optional[ConfigFile]:
    """The first file from ``start`` up to the root that configures fwdlint (see the module)."""
    for directory in (start, *start.parents):
        for name in CONFIG_FILES:
            path = directory / name
            try:
                if not path.is_file():
                    continue
            except OSError:  # a directory this user may not search (is_file raises on EACCES)
                continue
            found = read_config_file(path, required=False)
            if found is not None:
                return found
    return None


def read_config_file(path: Path, required: bool) -> Optional[ConfigFile]:
    """The fwdlint settings of ``path`` (TOML if it ends in ``.toml``, else INI); None if it has
    none (a ``ConfigError`` instead when ``required``, as for ``--config``)."""
    from lint_rules.bounded import CONFIG_LIMIT, Refused, read_regular

    try:
        data = read_regular(path, CONFIG_LIMIT)  # never /dev/zero, a FIFO or gigabytes
    except Refused as exc:
        raise ConfigError(f"{shown(path)}: error: the configuration file {exc}") from None
    except OSError as exc:
        raise ConfigError(f"{shown(path)}: error: cannot read configuration file: {exc.strerror or exc}") from None
    toml = path.suffix == ".toml"
    section = "[tool.fwdlint]" if toml else "[fwdlint]"
    if not required and b"fwd" not in data.lower():
        return None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{shown(path)}: error: cannot decode as UTF-8 (byte 0x{data[exc.start]:02x} "
                          f"at offset {exc.start})") from None
    found = _read_toml(path, text) if toml else _read_ini(path, text)
    if found is None and required:
        also = "" if toml else " (nor fwd- keys in [flake8])"
        raise ConfigError(f"{shown(path)}: error: no {section} section{also}")
    return found


def _read_toml(path: Path, text: str) -> Optional[ConfigFile]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # the same parser, as a package (setup.cfg: tomli on Python < 3.11)
        try:
            import tomli as tomllib
        except ImportError:
            raise ConfigError(f"{shown(path)}: error: reading TOML on Python < 3.11 needs the tomli package "
                              "(pip install tomli)") from None
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{shown(path)}: error: invalid TOML: {exc}") from None
    except RecursionError:  # select = [[[...500 levels...]]]
        raise ConfigError(f"{shown(path)}: error: invalid TOML: arrays or tables nested too deeply") from None
    tool = document.get("tool")
    if not isinstance(tool, dict) or "fwdlint" not in tool:
        return None
    table = tool["fwdlint"]
    if not isinstance(table, dict):
        raise ConfigError(f"{shown(path)}: error: [tool.fwdlint] must be a table, not {_kind(table)}")
    return ConfigFile(path, "[tool.fwdlint]", dict(table), {})


def _read_ini(path: Path, text: str) -> Optional[ConfigFile]:
    import configparser  # here: a run with no INI file to read does without it (its import is ~3 ms)

    # No DEFAULT section: its keys would be copied into [fwdlint] and reported as unknown there.
    parser = configparser.RawConfigParser(default_section="\0")
    try:
        parser.read_string(text, source=str(path))
    except configparser.Error as exc:
        raise ConfigError(f"{shown(path)}: error: {_ini_error(exc, text.splitlines())}") from None
    flake8 = {}
    if parser.has_section("flake8"):
        for key in FLAKE8_KEYS:
            for variant in (f"fwd-{key}", f"fwd_{key.replace('-', '_')}"):
                if parser.has_option("flake8", variant):
                    flake8[key] = parser.get("flake8", variant)
    if not parser.has_section("fwdlint") and not flake8:
        return None
    values = dict(parser.items("fwdlint")) if parser.has_section("fwdlint") else {}
    return ConfigFile(path, "[fwdlint]", values, flake8)


def _ini_error(exc: "configparser.Error", lines: list[str]) -> str:
    """configparser's messages span lines; one line saying where."""
    import configparser
    if isinstance(exc, configparser.MissingSectionHeaderError):
        return f"invalid INI syntax at line {exc.lineno}: no [section] header above it"
    if isinstance(exc, configparser.ParsingError) and exc.errors:
        line = exc.errors[0][0]  # (number, repr of the line)
        content = lines[line - 1].strip() if 0 < line <= len(lines) else ""
        return f"invalid INI syntax at line {line}: {content!r}"
    if isinstance(exc, configparser.DuplicateOptionError):
        return f"[{exc.section}] key '{exc.option}' given twice (line {exc.lineno})"
    if isinstance(exc, configparser.DuplicateSectionError):
        return f"section [{exc.section}] given twice (line {exc.lineno})"
    return "invalid INI syntax: " + " ".join(str(exc).split())


def _kind(value: object) -> str:
    return {bool: "a boolean", int: "an integer", float: "a float", dict: "a table", list: "an array",
            str: "a string"}.get(type(value), type(value).__name__)


# -- checking values -------------------------------------------------------------------------


def config_values(config: ConfigFile) -> tuple[dict[str, Any], dict[str, str], list[str]]:
    """The settings of ``config``, checked and typed (list keys: tuples of strings;
    ``python-executable``: a string; ``per-file-ignores``: normalized pairs; paths and patterns
    anchored to the file's directory), where each came from (``setup.cfg: error: [fwdlint] 'select'``)
    and the warnings to print."""
    where = shown(config.path)
    directory = str(config.path.parent)
    warnings: list[str] = []
    raw: dict[str, tuple[str, Any]] = {}  # key -> (section, value)
    for key, value in config.flake8.items():
        raw[key] = ("[flake8]", value)
    spelled: dict[str, str] = {}
    for written, value in config.values.items():
        key = written.replace("_", "-")
        if key not in KEYS:
            raise ConfigError(f"{where}: error: {config.section} unknown key '{written}' "
                              f"(known: {', '.join(KEYS)})")
        if key in spelled:
            raise ConfigError(f"{where}: error: {config.section} key '{key}' given twice "
                              f"(as '{spelled[key]}' and '{written}')")
        spelled[key] = written
        raw[key] = (config.section, value)

    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for key, (section, value) in raw.items():
        label = f"fwd-{key}" if section == "[flake8]" else spelled[key]
        sources[key] = f"{where}: error: {section} '{label}'"
        bad = _bad_value(f"{where}: error: {section} bad value for '{label}'")
        if key == "python-executable":
            if not isinstance(value, str):
                raise bad(f"expected a string, got {_kind(value)}")
            python = value.strip()
            # a path (holds a separator) is relative to the file; a bare name is looked up on PATH
            values[key] = normalize_pattern(python, directory) if python and python != "." else python
            continue
        if key == "from-record":
            if not isinstance(value, str) or not value.strip():
                raise bad(f"expected a path, got {_kind(value) if not isinstance(value, str) else 'an empty string'}")
            values[key] = os.path.join(directory, value.strip())
            continue
        if key == "cache-dir":
            if not isinstance(value, str) or not value.strip():
                raise bad(f"expected a path, got {_kind(value) if not isinstance(value, str) else 'an empty string'}")
            values[key], problem = configured_cache_dir(value.strip(), config.path.parent)
            if problem:
                raise bad(problem)
            continue
        if key == "forward-helpers":
            if not isinstance(value, str) or value.strip() not in FORWARD_HELPERS:
                raise bad(f"expected one of {', '.join(FORWARD_HELPERS)}, got {value!r}")
            values[key] = value.strip()
            continue
        if key == "per-file-ignores":
            try:
                pairs = _per_file_value(value)
            except ValueError as exc:
                raise bad(str(exc)) from None
            problem = first_code_problem([code for _, codes in pairs for code in codes])
            if problem:
                raise bad(problem)
            values[key] = tuple((normalize_pattern(p, directory), codes) for p, codes in pairs)
            continue
        items = _list_value(value)
        if items is None:
            raise bad(f"expected a string or an array of strings, got {_kind(value)}")
        if key in ("module-bases", "mark-decorators"):
            problem = dotted_names_problem(items)
            if problem:
                raise bad(problem)
        if key in ("select", "ignore", *EXTEND_KEYS):
            problem = EMPTY_SELECT if key == "select" and not items else first_code_problem(items)
            if problem:
                raise bad(problem)
        values[key] = normalize_patterns(items, directory) if key == "exclude" else items
    return values, sources, warnings


def configured_cache_dir(value: str, directory: Path) -> tuple[str, Optional[str]]:
    """A ``cache-dir`` a configuration file names, relative to ``directory`` (the file's), as the
    path to use and the reason it cannot be used, if any. The rule is ``--output-file``'s and
    ``--fix``'s: a checked-in file must not make fwdlint create directories and files anywhere else,
    so the directory lies inside the project (the nearest directory at or above the file's holding a
    project marker, else the file's own), and no link is on its way down from there (``cachelink ->
    ../victimhome/.config``). ``--cache-dir`` on the command line is the user's and may point
    anywhere, as ruff's."""
    from lint_rules.bounded import printable
    from lint_rules.layout import find_root

    start = Path(os.path.realpath(directory))
    base = find_root(start) or start
    path = os.path.normpath(os.path.join(start, value))  # lexically: what is used is this path
    if "\0" in value:  # no system call takes it: os.path answers False, and mkdir raised ValueError
        return path, f"{printable(value)} holds a NUL character, which no path can"
    shown_value = printable(value)  # an INI continuation holds newlines: the error stays one line
    try:
        inside = os.path.commonpath([str(base), path]) == str(base)
    except ValueError:  # another drive (Windows)
        inside = False
    rule = "a configured cache directory stays inside the project, with no link on its path " \
           "(--cache-dir on the command line may point anywhere)"
    if not inside:
        return path, f"{shown_value} is outside the project ({printable(str(base))}): {rule}"
    current = base
    for part in Path(os.path.relpath(path, base)).parts:
        current = current / part
        if os.path.islink(current):
            try:
                target = os.readlink(current)
            except OSError:
                target = "?"
            link = os.path.relpath(current, start)
            through = "is a symlink" if os.path.normpath(value) == link else f"goes through the symlink {link}"
            return path, f"{shown_value} {printable(through)} (to {printable(target)}): {rule}"
        if not os.path.lexists(current):
            break  # what does not exist yet is created as a directory (the cache's own rules)
    return path, None


def _named(option: str, key: str) -> str:
    """The value of ``--select``/``--ignore`` as given, to follow the option's name in an error."""
    if key == "per-file-ignores":  # long, and the error names the code
        return ""
    return f" {shown_code(option.strip())}" if option.strip() else " ''"


def _bad_value(prefix: str) -> Callable[[str], ConfigError]:
    return lambda problem: ConfigError(f"{prefix}: {problem}")


def _list_value(value: Any) -> Optional[tuple[str, ...]]:
    if isinstance(value, str):
        return split_list(value)
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return tuple(part for item in value for part in split_list(item))
    return None


def _per_file_value(value: Any) -> list[tuple[str, tuple[str, ...]]]:
    if isinstance(value, str):
        return parse_per_file_ignores(value)
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return parse_per_file_ignores("\n".join(value))
    if isinstance(value, dict):  # TOML table, as ruff writes it: {"tests/*" = ["FWD001"]}
        pairs = []
        for pattern, codes in value.items():
            listed = _list_value(codes)
            if listed is None:
                raise ValueError(f"'{pattern}' needs a string or an array of codes, got {_kind(codes)}")
            if not listed:
                raise ValueError(f"'{pattern}' has no codes")
            pairs.append((pattern, listed))
        return pairs
    raise ValueError(f"expected 'pattern:CODES' pairs as a string, an array of strings or a table, "
                     f"got {_kind(value)}")


# -- combining -------------------------------------------------------------------------------


def resolve(given: Mapping[str, Optional[str]], paths: Sequence[str] = (), config: Optional[str] = None,
            isolated: bool = False) -> Options:
    """The options of a run. ``given`` maps option names (``select``, ``per-file-ignores``,
    ``python``, ...) to the command line's strings, None where not given; a given option replaces
    the configuration's key. ``config``: ``--config``; ``isolated``: ``--isolated`` (wins, as in
    flake8). Raises ``ConfigError``."""
    found: Optional[ConfigFile] = None
    if not isolated:
        found = read_config_file(Path(config), required=True) if config else find_config(start_directory(paths))
    values, sources, warnings = config_values(found) if found is not None else ({}, {}, [])

    chosen: dict[str, Any] = {}
    for key in (*LIST_KEYS, "per-file-ignores"):
        option = given.get(key)
        if option is None:
            chosen[key] = values.get(key)
            continue
        if key == "per-file-ignores":
            try:
                pairs = parse_per_file_ignores(option)
            except ValueError as exc:
                raise ConfigError(f"fwdlint: error: --per-file-ignores: {exc}") from None
            chosen[key] = tuple((normalize_pattern(pattern), group) for pattern, group in pairs)
            codes = [code for _, group in pairs for code in group]
        else:
            chosen[key] = items = split_list(option)
            codes = list(items) if key in ("select", "ignore") else []
            if key in ("module-bases", "mark-decorators"):
                problem = dotted_names_problem(items)
                if problem:
                    raise ConfigError(f"fwdlint: error: --{key}: {problem}")
            if key == "exclude":
                chosen[key] = normalize_patterns(items)
        problem = EMPTY_SELECT if key == "select" and not codes else first_code_problem(codes)
        if problem:
            raise ConfigError(f"fwdlint: error: --{key}{_named(option, key)}: {problem}")

    extended: dict[str, tuple[str, ...]] = {}
    for key in EXTEND_KEYS:  # the file's codes, then the command line's, on top of select / ignore
        option = given.get(key)
        items = split_list(option) if option is not None else ()
        problem = first_code_problem(list(items))
        if problem:
            raise ConfigError(f"fwdlint: error: --{key}{_named(option or '', key)}: {problem}")
        extended[key] = (*(values.get(key) or ()), *items)
    helpers = given.get("forward-helpers") or values.get("forward-helpers") or FORWARD_HELPERS[0]
    python, source = given.get("python"), None
    if not python and values.get("python-executable"):
        python, source = values["python-executable"], sources["python-executable"]
    record, record_source = given.get("from-record"), None
    if not record and values.get("from-record"):
        record, record_source = values["from-record"], sources["from-record"]
    return Options(
        module_bases=chosen["module-bases"] or (),
        mark_decorators=chosen["mark-decorators"] or (),
        forward_helpers=helpers,
        from_record=record or None,
        from_record_source=record_source,
        select=(*(chosen["select"] if chosen["select"] is not None else ("FWD",)), *extended["extend-select"]),
        ignore=(*(chosen["ignore"] or ()), *extended["extend-ignore"]),
        exclude=chosen["exclude"] or (),
        per_file_ignores=chosen["per-file-ignores"] or (),
        python=python or None,
        python_source=source,
        cache_dir=values.get("cache-dir"),
        config=found.path if found is not None else None,
        warnings=tuple(warnings),
    )
