"""The Python environment the checked code runs in: where its installed packages live.

Base classes and attribute types often come from other packages (mmdet's detectors derive from
mmengine's ``BaseModel``; a wrapper holds a transformers model). fwdlint resolves such names the
way type checkers do: it reads the installed sources, through the facts store and its cache, and
never imports them. The environment is read from its files, as a type checker reads it:

* a virtual environment (``pyvenv.cfg``: ``python -m venv``, virtualenv, uv, pre-commit, tox) or a
  conda prefix (``conda-meta/``): its ``lib/python3.X/site-packages`` (Windows: ``Lib/site-packages``),
  the path lines of its ``.pth`` files and the packages setuptools' editable installs map in their
  ``__editable__*finder.py`` (its ``MAPPING`` read as text, never imported; ``import`` lines of a
  ``.pth`` file are never run). ``include-system-site-packages = true`` adds the base's site dirs.
* found from, in this order: ``--python`` (flake8: ``--fwd-python-executable``; config:
  ``python-executable``), naming an interpreter inside a prefix (``.venv/bin/python`` means
  ``.venv``, symlinks not followed: a venv's ``bin/python`` links to the base interpreter) or the
  prefix itself; ``$VIRTUAL_ENV``; ``$CONDA_PREFIX``; a ``.venv`` in the project root; the
  interpreter running fwdlint (its own ``sys.path``). An activated environment that is fwdlint's
  own (pre-commit's and tox's hook environments set ``$VIRTUAL_ENV``) gives way to the project's
  ``.venv``: the tool's environment says nothing about the checked code.
* a program is run only when the user names it on the command line and it lies in no prefix (a
  system ``python3``): it is asked for ``sys.path`` in isolated mode, with a timeout and at most
  ``MAX_OUTPUT`` bytes read. A configured ``python-executable`` is a path to read, never run: a
  repository's configuration must not make ``fwdlint .`` execute the repository's code.

A name whose package is not installed there stays unresolved: the analysis then falls back to
what the checked file itself shows (the class's own ``forward`` calling the attribute, module
methods used on it, the documented method-name list), so findings may be missed, never invented
from a missing package.
"""

import json
import os
import re
import sys
import sysconfig
from pathlib import Path
from typing import TYPE_CHECKING, Mapping, NamedTuple, Optional, Sequence

if TYPE_CHECKING:  # imported where an interpreter is found or asked: a run that names none never does
    import subprocess

from lint_rules.contract import counted
from lint_rules.discover import shorter_path as shown

_QUERY = ("import json, sys, sysconfig; paths = sysconfig.get_paths(); "
          "print(json.dumps([sys.path, [paths['stdlib'], paths['platstdlib']], list(sys.version_info[:2])]))")
QUERY_TIMEOUT = 30  # seconds: an interpreter that does not answer is an error, not a hang
MAX_OUTPUT = 1 << 20  # bytes of an asked interpreter's answer: a chatty one must not exhaust memory
_MAX_TEXT = 1 << 20  # bytes of a pyvenv.cfg, .pth or finder file read (they are a few hundred)
_VERSION = re.compile(r"\s*(\d+)\.(\d+)")
_LIB_PYTHON = re.compile(r"python(\d+)\.(\d+)$")


class NoInterpreter(Exception):
    """``--python`` names nothing fwdlint can use (one line, for the user)."""


class Environment(NamedTuple):
    python: str  # the interpreter or prefix, as given or found
    roots: tuple[Path, ...] = ()  # import path entries that hold packages
    kind: str = "interpreter"  # venv, conda, prefix (read from files) or interpreter (its sys.path)
    prefix: Optional[Path] = None  # the prefix read (venv, conda), as found: symlinks kept
    source: str = ""  # where it was found: "--python", "$VIRTUAL_ENV", "the project's .venv", ...
    version: Optional[tuple[int, int]] = None  # the target Python (major, minor), when known
    site_dirs: tuple[Path, ...] = ()  # site-packages directories (before .pth files)
    warnings: tuple[str, ...] = ()  # one line each, for stderr

    def name(self) -> str:
        """What a message calls it: ``venv .venv``, ``interpreter /usr/bin/python3``."""
        return f"{self.kind} {shown(self.prefix) if self.prefix is not None else self.python}"

    def describe(self) -> str:
        """One line: ``fwdlint: environment: venv .venv (from $VIRTUAL_ENV), python 3.12, 1 site dir``."""
        where = shown(self.prefix) if self.prefix is not None else self.python
        parts = [f"{self.kind} {where}" + (f" (from {self.source})" if self.source else "")]
        if self.version is not None:
            parts.append(f"python {self.version[0]}.{self.version[1]}")
        if self.prefix is None:  # an interpreter's import path
            parts.append(counted(len(self.roots), "import root"))
        else:
            extra = len(self.roots) - len(self.site_dirs)
            more = f" (+{extra} from .pth files)" if extra > 0 else ""
            parts.append(counted(len(self.site_dirs), "site dir") + more)
        return "fwdlint: environment: " + ", ".join(parts)


def distribution_version(roots: Sequence[Path], name: str) -> Optional[str]:
    """The version of the distribution ``name`` installed in ``roots``, from its ``.dist-info``
    directory's name (``torch-2.13.0+cpu.dist-info``): read, never imported; None if not installed."""
    wanted = re.sub(r"[-_.]+", "_", name).lower()
    for root in roots:
        try:
            entries = os.listdir(root)
        except OSError:
            continue
        for entry in entries:
            stem, _, version = entry[: -len(".dist-info")].rpartition("-")
            if entry.endswith(".dist-info") and re.sub(r"[-_.]+", "_", stem).lower() == wanted and version:
                return version
    return None


def package_present(roots: list[str], top: str) -> bool:
    """Is ``top`` a package or module in one of ``roots``? (A namespace
    package has no ``__init__.py``; an extension module is a ``.so`` or ``.pyd``.)"""
    for root in roots:
        try:
            if os.path.isdir(os.path.join(root, top)) or os.path.isfile(os.path.join(root, f"{top}.py")) or any(
                    name.startswith(f"{top}.") and name.endswith((".so", ".pyd")) for name in os.listdir(root)):
                return True
        except OSError:
            continue
    return False


def find(python: Optional[str] = None, *, source: str = "--python", may_run: bool = True,
         project: Optional[Path] = None, environ: Optional[Mapping[str, str]] = None) -> Environment:
    """The environment of the checked code. ``python``: what the user named (``source`` says
    where: the option, or the configuration file and key); ``may_run``: whether an interpreter in
    no prefix may be asked (only one named on the command line); ``project``: the directory whose
    ``.venv`` counts. Raises ``NoInterpreter`` when ``python`` cannot be used. Environment files
    that were skipped (``_read_text``) are warnings of the environment found."""
    del _SKIPPED[:]
    found = _find(python, source, may_run, project, environ)
    skipped, _SKIPPED[:] = tuple(_SKIPPED), []
    return found._replace(warnings=(*found.warnings, *skipped)) if skipped else found


def _find(python: Optional[str], source: str, may_run: bool, project: Optional[Path],
          environ: Optional[Mapping[str, str]]) -> Environment:
    if python:
        try:
            return _named(python, source, may_run)
        except (OSError, ValueError) as error:  # a name too long, a NUL byte, a loop of links
            from lint_rules.bounded import printable

            why = getattr(error, "strerror", None) or str(error)
            raise NoInterpreter(f"--python {printable(python)}: cannot use it: {why}") from None
    environ = os.environ if environ is None else environ
    problems: list[str] = []
    own: Optional[Environment] = None  # an activated environment that is fwdlint's own
    for variable, kind in (("VIRTUAL_ENV", "venv"), ("CONDA_PREFIX", "conda")):
        value = environ.get(variable)
        if not value:
            continue
        prefix = Path(value)
        if _prefix_kind(prefix) is None:
            what = "a virtual environment (no pyvenv.cfg" if kind == "venv" else "a conda prefix (no conda-meta/"
            problems.append(f"${variable} {value} is not {what} there): ignored")
            continue
        found = _read_prefix(prefix, f"${variable}")
        if not _is_running_prefix(prefix):
            return _with_problems(found, problems)
        own = own or found
    local = project / ".venv" if project is not None else None
    if local is not None and _prefix_kind(local) is not None:
        found = _read_prefix(local, "the project root")
        if own is None or not _same_dir(local, own.prefix):
            return _with_problems(found, problems)
    return _with_problems(own or running(), problems)


def running() -> Environment:
    """The interpreter running fwdlint: its own import path, minus the standard library."""
    stdlib = [sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["platstdlib"]]
    # sys.path[0] is the directory of the script or the current directory: not installed packages
    roots = _package_roots(sys.path[1:], stdlib)
    return Environment(sys.executable, _with_finders(roots), source="running fwdlint",
                       version=sys.version_info[:2])


# -- choosing --------------------------------------------------------------------------------


def _named(python: str, source: str, may_run: bool) -> Environment:
    """What ``--python`` (or a configured ``python-executable``) names."""
    given = Path(python)
    if os.sep not in python and (os.altsep is None or os.altsep not in python) and not given.exists():
        import shutil

        on_path = shutil.which(python)  # a bare name, as a shell finds it
        given = Path(on_path) if on_path else given
    if given.is_dir():
        if _prefix_kind(given) is None:
            raise NoInterpreter(f"--python {python}: not a virtual environment, conda prefix or Python prefix "
                                "(no pyvenv.cfg, conda-meta/ or lib/python3.X/site-packages)")
        return _read_prefix(given, source, python)
    for prefix in (given.parent, given.parent.parent):  # bin/python, Scripts/python.exe; conda's python.exe
        if (prefix / "pyvenv.cfg").is_file() or (prefix / "conda-meta").is_dir():
            return _read_prefix(prefix, source, python)  # even if its link to the base interpreter broke
    if not given.exists():
        raise NoInterpreter(f"--python {python}: cannot run it: no such file or directory ({given})")
    if not may_run and given.parent.name == "bin" and _prefix_kind(given.parent.parent) == "prefix":
        # a system interpreter (/usr/bin/python3): its prefix's site dirs, read
        return _read_prefix(given.parent.parent, source, python)
    if not may_run:
        raise NoInterpreter(f"--python {python}: not inside a virtual environment or conda prefix, and a "
                            "configured interpreter is read, never run (name the environment's directory, or "
                            "name the interpreter on the command line)")
    return _ask(python, source)


def _prefix_kind(prefix: Path) -> Optional[str]:
    try:
        if (prefix / "pyvenv.cfg").is_file():
            return "venv"
        if (prefix / "conda-meta").is_dir():
            return "conda"
        return "prefix" if _site_dirs(prefix, None, system=True) else None
    except OSError:
        return None


def _is_running_prefix(prefix: Path) -> bool:
    return _same_dir(prefix, Path(sys.prefix))


def _same_dir(a: Path, b: Optional[Path]) -> bool:
    try:
        return b is not None and os.path.samefile(a, b)
    except OSError:
        return False


def _with_problems(found: Environment, problems: list[str]) -> Environment:
    """``found``, with a warning line for each place looked at that held no environment."""
    where = found.describe().removeprefix("fwdlint: environment: ")
    lines = tuple(f"fwdlint: warning: {problem}; reading {where}" for problem in problems)
    return found._replace(warnings=(*lines, *found.warnings)) if lines else found


# -- reading a prefix from its files -----------------------------------------------------------


def _read_prefix(prefix: Path, source: str, python: Optional[str] = None) -> Environment:
    """A venv or conda prefix (or a plain Python prefix) read from its files, nothing run;
    ``python``: the interpreter as the user named it."""
    prefix = Path(os.path.abspath(prefix))  # no symlink resolved: .venv/bin/python links elsewhere
    kind = _prefix_kind(prefix) or "prefix"
    config = _pyvenv_cfg(prefix) if kind == "venv" else {}
    version = _version_of(config.get("version_info") or config.get("version"))
    # a pyvenv.cfg version that names no lib directory (the base was upgraded): the newest there counts
    sites = _site_dirs(prefix, version, system=kind == "prefix") or _site_dirs(prefix, None, system=kind == "prefix")
    if version is None:
        version = next((v for v in (_lib_version(site.parent.name) for site in sites) if v), None)
    if config.get("include-system-site-packages", "").lower() == "true" and config.get("home"):
        home = Path(config["home"])  # the base interpreter's directory: <base>/bin, or <base> on Windows
        base = home.parent if home.name == "bin" else home
        sites += [site for site in _site_dirs(base, version, system=True) if site not in sites]
    roots: list[Path] = []
    for site in sites:
        for root in (site, *_pth_roots(site)):
            resolved = root.resolve()
            if resolved not in roots:
                roots.append(resolved)
    if python is None:
        found = prefix / ("Scripts/python.exe" if os.name == "nt" and kind == "venv" else "bin/python")
        python = str(found) if found.exists() else str(prefix)
    empty = () if sites else (f"fwdlint: warning: {shown(prefix)} has no site-packages directory: "
                              "no installed package is read",)
    return Environment(python, tuple(roots), kind, prefix, source, version, tuple(sites), empty)


def _pyvenv_cfg(prefix: Path) -> dict[str, str]:
    """``key = value`` lines of ``pyvenv.cfg`` (as ``site.py`` reads them), keys lower-cased."""
    values: dict[str, str] = {}
    for line in _read_text(prefix / "pyvenv.cfg").splitlines():
        key, sep, value = line.partition("=")
        if sep:
            values[key.strip().lower()] = value.strip()
    return values


def _version_of(text: Optional[str]) -> Optional[tuple[int, int]]:
    match = _VERSION.match(text or "")
    return (int(match[1]), int(match[2])) if match else None


def _lib_version(name: str) -> Optional[tuple[int, int]]:
    """(3, 12) for ``python3.12``, the name of a prefix's lib directory."""
    match = _LIB_PYTHON.search(name)
    return (int(match[1]), int(match[2])) if match else None


def _site_dirs(prefix: Path, version: Optional[tuple[int, int]], system: bool = False) -> list[Path]:
    """The site-packages directories of ``prefix`` (``system``: a system prefix, also Debian's
    dist-packages). Without a known version, the newest ``lib/python3.X`` counts."""
    found: list[Path] = []
    for lib in ("lib", "lib64"):
        versioned = _versioned(prefix / lib, version)
        if versioned is not None:
            found += [versioned / "site-packages", *([versioned / "dist-packages"] if system else [])]
    if system:
        found.append(prefix / "lib" / "python3" / "dist-packages")
        if version is not None:
            found.append(prefix / "local" / "lib" / f"python{version[0]}.{version[1]}" / "dist-packages")
    found.append(prefix / "Lib" / "site-packages")  # Windows
    unique: list[Path] = []
    for site in found:
        if site.is_dir() and not any(_same_dir(site, other) for other in unique):  # lib64 links to lib
            unique.append(site)
    return unique


def _versioned(lib: Path, version: Optional[tuple[int, int]]) -> Optional[Path]:
    if version is not None:
        return lib / f"python{version[0]}.{version[1]}"
    try:
        candidates = [(v, entry) for entry in lib.iterdir() if (v := _lib_version(entry.name)) is not None]
    except OSError:
        return None
    return max(candidates)[1] if candidates else None


def _pth_roots(site: Path) -> list[Path]:
    """What ``site.py`` would add for the ``.pth`` files of ``site``, without running any line:
    path lines (relative to ``site``), and the packages an editable install's finder maps."""
    roots: list[Path] = []
    for pth in sorted(p for p in _files(site) if p.suffix == ".pth"):
        for line in _read_text(pth).splitlines():
            line = line.rstrip()
            if not line or line.startswith("#"):
                continue
            if line.startswith(("import ", "import\t")):
                roots.extend(_finder_roots(site, line))
                continue
            entry = site / line
            if entry.is_dir() and entry not in roots:
                roots.append(entry)
    return roots


def _finder_roots(site: Path, line: str) -> list[Path]:
    """setuptools' editable installs: ``import __editable___pkg_1_0_finder; ...install()``. The
    finder's ``MAPPING = {'pkg': '/src/pkg'}`` is read as a literal: the directory holding each
    package is an import root (a package mapped under another name is not resolved)."""
    roots: list[Path] = []
    for module in re.findall(r"\bimport\s+(__editable__\w*finder)\b", line):
        mapping = _literal_assignment(site / f"{module}.py", "MAPPING")
        for name, location in mapping.items() if isinstance(mapping, dict) else ():
            if not isinstance(name, str) or not isinstance(location, str):
                continue
            path = Path(location)
            if path.name == name or (path.suffix == ".py" and path.stem == name):
                roots.append(path.parent)
    return roots


def _literal_assignment(path: Path, name: str) -> object:
    """The literal value assigned to ``name`` at the top of a Python file (never imported). A file
    too deeply nested for the parser (``RecursionError``, ``MemoryError``) is skipped with a warning."""
    try:
        import ast  # here: only editable installs need it

        tree = ast.parse(_read_text(path))
    except (SyntaxError, ValueError):
        return None
    except (RecursionError, MemoryError) as error:
        _skip(path, f"too deeply nested to read ({type(error).__name__})")
        return None
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, ast.AnnAssign) and node.value is not None else []
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            try:
                return ast.literal_eval(node.value)  # type: ignore[union-attr, arg-type]
            except (ValueError, TypeError, SyntaxError):
                return None
            except (RecursionError, MemoryError) as error:
                _skip(path, f"too deeply nested to read ({type(error).__name__})")
                return None
    return None


def _files(directory: Path) -> list[Path]:
    try:
        return [entry for entry in directory.iterdir() if entry.is_file()]
    except OSError:
        return []


def _read_text(path: Path) -> str:
    """A ``pyvenv.cfg``, ``.pth`` or finder file: a regular file of at most ``_MAX_TEXT`` bytes; anything
    else (a FIFO, a device, a huge file) is skipped with a warning, never waited for or read whole."""
    from lint_rules.bounded import Refused, read_regular

    try:
        return read_regular(path, _MAX_TEXT).decode("utf-8", "replace")
    except Refused as refused:
        _skip(path, str(refused))
    except OSError:
        pass
    return ""


#: The environment files skipped while ``find`` reads an environment: one warning line each.
_SKIPPED: list[str] = []


def _skip(path: Path, why: str) -> None:
    line = f"fwdlint: warning: {shown(path)} {why}: skipped (the environment is read without it)"
    if line not in _SKIPPED:
        _SKIPPED.append(line)


def _with_finders(roots: tuple[Path, ...]) -> tuple[Path, ...]:
    """The running interpreter's path plus what editable finders map (they live in sys.meta_path,
    not sys.path)."""
    extra = [root.resolve() for site in roots if site.name in ("site-packages", "dist-packages")
             for root in _pth_roots(site)]
    return (*roots, *dict.fromkeys(r for r in extra if r not in roots))


# -- asking an interpreter in no prefix ------------------------------------------------------


def _ask(python: str, source: str) -> Environment:
    """Run ``python -I`` (named on the command line) for its import path: bounded time and output."""
    import subprocess
    import threading

    try:
        proc = subprocess.Popen([python, "-I", "-c", _QUERY], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, start_new_session=os.name != "nt")
    except (OSError, ValueError) as exc:
        raise NoInterpreter(f"--python {python}: cannot run it ({exc.__class__.__name__}: {exc})") from None
    timed_out = threading.Event()

    def stop() -> None:
        timed_out.set()
        _kill(proc)

    timer = threading.Timer(QUERY_TIMEOUT, stop)
    timer.start()
    try:
        assert proc.stdout is not None
        data = proc.stdout.read(MAX_OUTPUT + 1)
        if len(data) > MAX_OUTPUT:
            _kill(proc)
        status = proc.wait()
    finally:
        timer.cancel()
        proc.stdout.close()  # type: ignore[union-attr]
    if timed_out.is_set():
        raise NoInterpreter(f"--python {python}: no answer within {QUERY_TIMEOUT} s")
    if len(data) > MAX_OUTPUT:
        raise NoInterpreter(f"--python {python}: not a Python interpreter (more than {MAX_OUTPUT} bytes of output)")
    try:
        path, stdlib, version = json.loads(data.decode("utf-8", "replace").strip().splitlines()[-1])
    except (ValueError, IndexError, TypeError):
        path = stdlib = version = None
    if status != 0 or not isinstance(path, list) or not isinstance(stdlib, list):
        raise NoInterpreter(f"--python {python}: not a Python interpreter (exit status {status})")
    roots = _package_roots([p for p in path if isinstance(p, str)], [p for p in stdlib if isinstance(p, str)])
    known = (version[0], version[1]) if isinstance(version, list) and len(version) == 2 and all(
        isinstance(v, int) for v in version) else None
    return Environment(python, _with_finders(roots), source=source, version=known)


def _kill(proc: "subprocess.Popen") -> None:
    """End the asked interpreter and whatever it started (its session), once."""
    import signal

    try:
        if os.name != "nt":
            os.killpg(proc.pid, signal.SIGKILL)
        else:
            proc.kill()
    except OSError:
        pass


def _package_roots(path: list[str], stdlib: list[str]) -> tuple[Path, ...]:
    """Directories of the import path, without the standard library (its site-packages kept)."""
    found: list[Path] = []
    standard = [os.path.normcase(os.path.abspath(p)) for p in stdlib if p]
    for entry in path:
        if not entry or not os.path.isdir(entry):
            continue  # '' (the current directory) and zip files hold no installed packages
        normal = os.path.normcase(os.path.abspath(entry))
        in_stdlib = any(normal == s or normal.startswith(s + os.sep) for s in standard)
        if in_stdlib and "site-packages" not in normal and "dist-packages" not in normal:
            continue
        root = Path(entry).resolve()
        if root not in found:
            found.append(root)
    return tuple(found)
