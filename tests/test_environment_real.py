"""Environments as their tools really make them, read from their files.

``python -m venv``, virtualenv and uv link ``bin/python`` to the base interpreter. fwdlint runs here
on a tool environment made the same way (as pre-commit's hook environment is), so the checked
code's environment and fwdlint's own are the same interpreter file: only the environment's files
tell them apart. Each environment holds ``extpkg.base.Base``, an ``nn.Module`` subclass (textually:
torch is not installed there and need not be); the project's ``Model(Base).generate`` calls
``self(...)``, which is FWD001 only if the installed base is read.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Callable

import pytest
from fixture_cases import python_with_package, site_packages

from lint_rules import environment

REPO = Path(__file__).resolve().parents[1]
BASE_PYTHON = getattr(sys, "_base_executable", sys.executable)  # what the tools link to
VERSION = f"{sys.version_info[0]}.{sys.version_info[1]}"
PACKAGE = {"extpkg/__init__.py": "", "extpkg/base.py": "from torch import nn\n\n\nclass Base(nn.Module):\n    pass\n"}
USER = ("from extpkg.base import Base\n\n\nclass Model(Base):\n    def generate(self, x):\n"
        "        return self(x)\n")
FINDING = "user.py:5:9: FWD001 Model.generate runs forward computation"


def _install(python: Path, files: dict[str, str]) -> None:
    site = site_packages(python)
    for name, text in files.items():
        (site / name).parent.mkdir(parents=True, exist_ok=True)
        (site / name).write_text(text)


def _uv() -> str:
    found = shutil.which("uv") or shutil.which("uv", path=str(Path(sys.executable).parent))
    if found is None:
        pytest.fail("uv is not installed: the test extra installs it (pip install -e .[test])")
    return found


def _make_venv(prefix: Path) -> None:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(prefix)], check=True)


def _make_copies(prefix: Path) -> None:
    python = python_with_package(prefix.parent / "copies-tmp", {}, torch=False)  # venv.create: copies, not links
    shutil.move(str(python.parent.parent), str(prefix))


def _make_virtualenv(prefix: Path) -> None:
    subprocess.run([sys.executable, "-m", "virtualenv", "-q", "--no-seed", "--no-periodic-update", "--app-data",
                    str(prefix.parent / "app-data"), "-p", BASE_PYTHON, str(prefix)], check=True)


def _make_uv(prefix: Path) -> None:
    subprocess.run([_uv(), "venv", "-q", "--no-config", "--no-python-downloads", "--python", BASE_PYTHON,
                    "--cache-dir", str(prefix.parent / "uv-cache"), str(prefix)], check=True)


MAKERS: dict[str, Callable[[Path], None]] = {"venv": _make_venv, "venv --copies": _make_copies,
                                             "virtualenv": _make_virtualenv, "uv venv": _make_uv}


@pytest.fixture(scope="module")
def tool(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The interpreter fwdlint runs on: a ``python -m venv`` environment, fwdlint on its path."""
    prefix = tmp_path_factory.mktemp("tool") / "env"
    _make_venv(prefix)
    return prefix / "bin" / "python"


def _tool_env(**environ: str) -> dict[str, str]:
    # fwdlint and libcst from this checkout's environment; nothing of the checked environment
    return {"PATH": "/usr/bin:/bin", "PYTHONPATH": os.pathsep.join([str(REPO), sysconfig.get_paths()["purelib"]]),
            **environ}


def _fwdlint(tool: Path, cwd: Path, *args: str, **environ: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(tool), "-m", "lint_rules.cli", "--no-cache", *args], cwd=cwd, capture_output=True,
                          text=True, env=_tool_env(**environ), stdin=subprocess.DEVNULL, timeout=120)


def _described(stderr: str, cwd: Path) -> tuple[str, Path, str]:
    """(kind, prefix resolved, the rest) of the first line, ``fwdlint: environment: KIND PATH (from ...``."""
    head, _, rest = stderr.splitlines()[0].partition(" (from ")
    prefix, kind, shown = head.split(" ", 3)[1:]
    assert prefix == "environment:", stderr
    return kind, (cwd / shown).resolve(), "(from " + rest


def _project(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "pyproject.toml").write_text("")
    (root / "user.py").write_text(USER)
    return root


@pytest.fixture(scope="module", params=list(MAKERS))
def made(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    """(tool name, project root) for each tool: the project's ``.venv`` holds the base package."""
    root = _project(tmp_path_factory.mktemp("made") / "project")
    MAKERS[request.param](root / ".venv")
    _install(root / ".venv" / "bin" / "python", PACKAGE)
    return request.param, root


@pytest.mark.parametrize("way", ["--python interpreter", "--python prefix", "VIRTUAL_ENV", "project .venv"])
def test_installed_base_is_read_from_each_kind_of_venv(made: tuple[str, Path], way: str, tool: Path,
                                                       tmp_path: Path) -> None:
    kind, root = made
    prefix = root / ".venv"
    linked = (prefix / "bin" / "python").is_symlink()
    assert linked == (kind != "venv --copies")  # the tools link to the base interpreter, as fwdlint's does
    elsewhere = _project(tmp_path / "elsewhere")  # no .venv of its own: only the way under test finds it
    args, environ, cwd = {"--python interpreter": (["--python", str(prefix / "bin" / "python")], {}, elsewhere),
                          "--python prefix": (["--python", str(prefix)], {}, elsewhere),
                          "VIRTUAL_ENV": ([], {"VIRTUAL_ENV": str(prefix)}, elsewhere),
                          "project .venv": ([], {}, root)}[way]
    proc = _fwdlint(tool, cwd, "-v", *args, ".", **environ)  # -v: which environment was read
    assert (proc.returncode, proc.stdout.startswith(FINDING)) == (1, True), proc.stdout + proc.stderr
    source = {"VIRTUAL_ENV": "$VIRTUAL_ENV", "project .venv": "the project root"}.get(way, "--python")
    assert _described(proc.stderr, cwd) == ("venv", prefix.resolve(), f"(from {source}), python {VERSION}, 1 site dir")


def test_flake8_reads_the_project_venv_and_says_so_once_with_v(made: tuple[str, Path], tool: Path) -> None:
    kind, root = made
    flake8 = [str(tool), "-m", "flake8", "--select", "FWD", "--fwd-no-cache", "--extend-exclude=.venv"]  # README
    quiet = subprocess.run([*flake8, "."], cwd=root, capture_output=True, text=True, env=_tool_env(), timeout=120)
    assert quiet.returncode == 1 and quiet.stdout.startswith("./" + FINDING) and quiet.stderr == "", quiet.stderr
    loud = subprocess.run([*flake8, "-v", "-j", "2", "."], cwd=root, capture_output=True, text=True,
                          env=_tool_env(), timeout=120)
    said = [line for line in loud.stderr.splitlines() if "fwdlint: environment: " in line]
    assert len(said) == 1 and said[0].endswith(f"venv .venv (from the project root), python {VERSION}, 1 site dir")
    # without the exclude flake8 walks the real environment: the plugin says so, once
    walked = subprocess.run([*flake8[:-1], "-j", "2", "."], cwd=root, capture_output=True, text=True,
                            env=_tool_env(), timeout=120)
    assert walked.stderr.count("fwdlint: warning: flake8 will check the installed packages in .venv (") == 1, \
        walked.stderr


def _conda(prefix: Path) -> Path:
    """A conda prefix as a type checker sees one: conda-meta/, lib/python3.X/site-packages, bin/python."""
    (prefix / "conda-meta").mkdir(parents=True)
    (prefix / "conda-meta" / "history").write_text("")
    site = prefix / "lib" / f"python{VERSION}" / "site-packages"
    for name, text in PACKAGE.items():
        (site / name).parent.mkdir(parents=True, exist_ok=True)
        (site / name).write_text(text)
    (prefix / "bin").mkdir()
    (prefix / "bin" / "python").symlink_to(BASE_PYTHON)
    return prefix


@pytest.mark.parametrize("way", ["CONDA_PREFIX", "--python"])
def test_installed_base_is_read_from_a_conda_prefix(tmp_path: Path, tool: Path, way: str) -> None:
    prefix = _conda(tmp_path / "conda")
    project = _project(tmp_path / "project")
    args, environ = (["--python", str(prefix / "bin" / "python")], {}) if way == "--python" else (
        [], {"CONDA_PREFIX": str(prefix)})
    proc = _fwdlint(tool, project, "-v", *args, ".", **environ)
    assert (proc.returncode, proc.stdout.startswith(FINDING)) == (1, True), proc.stdout + proc.stderr
    source = "$CONDA_PREFIX" if way == "CONDA_PREFIX" else "--python"
    assert _described(proc.stderr, project) == ("conda", prefix.resolve(), f"(from {source}), python {VERSION}, "
                                                                           "1 site dir")
    found = environment.find(environ={"CONDA_PREFIX": str(prefix)})
    assert (found.kind, found.version, found.site_dirs) == ("conda", sys.version_info[:2], (
        prefix / "lib" / f"python{VERSION}" / "site-packages",))


def test_stale_virtual_env_is_a_warning_not_silence(tmp_path: Path, tool: Path) -> None:
    project = _project(tmp_path / "project")
    proc = _fwdlint(tool, project, "-q", ".", VIRTUAL_ENV=str(tmp_path / "gone"))
    # the interpreter read has no extpkg: Model's base is not read, and that is said
    assert proc.returncode == 1 and "FWD005 package 'extpkg' is not installed" in proc.stdout
    assert proc.stderr.startswith(f"fwdlint: warning: $VIRTUAL_ENV {tmp_path / 'gone'} is not a virtual environment "
                                  f"(no pyvenv.cfg there): ignored; reading interpreter {tool} (from running fwdlint), "
                                  f"python {VERSION}, ")
    assert proc.stderr.endswith(" import roots\n") and proc.stderr.count("\n") == 1


def test_fwdlints_own_activated_venv_gives_way_to_the_project_venv(tmp_path: Path, tool: Path) -> None:
    """pre-commit, tox and nox activate their own environment ($VIRTUAL_ENV) to run fwdlint; it says
    nothing about the checked code, whose installed packages are in the project's .venv."""
    project = _project(tmp_path / "project")
    _make_venv(project / ".venv")
    _install(project / ".venv" / "bin" / "python", PACKAGE)
    proc = _fwdlint(tool, project, "-v", ".", VIRTUAL_ENV=str(tool.parent.parent))
    assert proc.returncode == 1 and proc.stdout.startswith(FINDING), proc.stderr
    assert "(from the project root)" in proc.stderr


def test_include_system_site_packages_adds_the_base(tmp_path: Path) -> None:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(tmp_path / "v")],
                   check=True)
    found = environment.find(str(tmp_path / "v"))
    base_site = site_packages(Path(BASE_PYTHON))
    assert found.site_dirs[0] == tmp_path / "v" / "lib" / f"python{VERSION}" / "site-packages"
    assert base_site.resolve() in found.roots


def test_pth_files_are_read_never_run(tmp_path: Path) -> None:
    _make_venv(tmp_path / "v")
    site = site_packages(tmp_path / "v" / "bin" / "python")
    (tmp_path / "extra").mkdir()
    marker = tmp_path / "ran"
    (site / "a.pth").write_text(f"# a comment\n../../../../extra\nimport os; open({str(marker)!r}, 'w')\n")
    found = environment.find(str(tmp_path / "v" / "bin" / "python"))
    assert (tmp_path / "extra").resolve() in found.roots and not marker.exists()
    assert found.describe().endswith(f"python {VERSION}, 1 site dir (+1 from .pth files)")


def test_a_venv_without_site_packages_says_so(tmp_path: Path) -> None:
    (tmp_path / "v").mkdir()
    (tmp_path / "v" / "pyvenv.cfg").write_text("home = /nonexistent/bin\nversion_info = 3.13.1.final.0\n")
    found = environment.find(str(tmp_path / "v"))
    assert (found.kind, found.version, found.roots) == ("venv", (3, 13), ())  # the target Python, from pyvenv.cfg
    [warning] = found.warnings
    assert warning.endswith(" has no site-packages directory: no installed package is read")


# -- editable installs ------------------------------------------------------------------------------------


def _editable_package(root: Path, name: str, src_layout: bool) -> Path:
    (root / "pyproject.toml").parent.mkdir(parents=True)
    (root / "pyproject.toml").write_text('[build-system]\nrequires = ["setuptools>=64"]\n'
                                         'build-backend = "setuptools.build_meta"\n'
                                         f'[project]\nname = "{name}"\nversion = "0.1"\n')
    package = root / ("src" if src_layout else "") / name
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "base.py").write_text(PACKAGE["extpkg/base.py"])
    return root


@pytest.mark.timeout(600)
def test_editable_installs_are_read(tmp_path: Path, tool: Path) -> None:
    """``pip install -e``: setuptools maps a flat layout through an ``__editable__*finder.py`` (its
    MAPPING, read as text) and a src layout through a path line in a ``.pth`` file."""
    project = _project(tmp_path / "project")
    _make_venv(project / ".venv")
    flat = _editable_package(tmp_path / "flat", "extflat", src_layout=False)
    src = _editable_package(tmp_path / "srcpkg", "extsrc", src_layout=True)
    installed = subprocess.run([sys.executable, "-m", "pip", "--python", str(project / ".venv" / "bin" / "python"),
                                "install", "-q", "--no-deps", "-e", str(flat), "-e", str(src)],
                               capture_output=True, text=True, timeout=500)
    assert installed.returncode == 0, installed.stderr
    site = site_packages(project / ".venv" / "bin" / "python")
    assert list(site.glob("__editable__*extflat*finder.py"))  # the finder, not a path line, serves extflat
    found = environment.find(project=project)
    assert {flat.resolve(), (src / "src").resolve()} <= set(found.roots)
    (project / "user.py").write_text(USER.replace("extpkg", "extflat") + "\n\n" + USER.replace(
        "extpkg", "extsrc").replace("class Model", "class Other"))
    proc = _fwdlint(tool, project, "-v", ".")
    assert proc.returncode == 1, proc.stderr
    assert [line.split(" runs")[0] for line in proc.stdout.splitlines()] == [
        "user.py:5:9: FWD001 Model.generate", "user.py:13:9: FWD001 Other.generate"]
    assert "1 site dir (+2 from .pth files)" in proc.stderr


# -- issue 21: a configuration file never makes fwdlint run a program -------------------------------------


def _script(path: Path, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.mark.parametrize("config", ["pyproject.toml", "setup.cfg"])
def test_a_configured_program_is_never_run(tmp_path: Path, tool: Path, config: str) -> None:
    project = _project(tmp_path / "project")
    marker = tmp_path / "ran"
    _script(project / "tools" / "py", f'touch "{marker}"\nexec "{BASE_PYTHON}" "$@"\n')
    (project / config).write_text('[tool.fwdlint]\npython-executable = "tools/py"\n' if config.endswith(".toml")
                                  else "[flake8]\nfwd-python-executable = tools/py\n")
    proc = _fwdlint(tool, project, ".")
    assert proc.returncode == 2 and proc.stdout == "", proc.stderr
    assert "configured interpreter is read, never run" in proc.stderr and proc.stderr.count("\n") == 1
    if config == "setup.cfg":  # flake8 reads the same key and refuses it the same way
        flake8 = subprocess.run([str(tool), "-m", "flake8", "--select", "FWD", "."], cwd=project, capture_output=True,
                                text=True, stdin=subprocess.DEVNULL, timeout=120, env=_tool_env())
        assert flake8.returncode == 2 and flake8.stderr == proc.stderr, flake8.stderr
    assert not marker.exists()
    # named on the command line, the same program is the user's choice: it is asked
    asked = _fwdlint(tool, project, "--python", str(project / "tools" / "py"), ".")
    # it has no extpkg: Model's base is not read, and that is said (FWD005)
    assert asked.returncode == 1 and "FWD005 package 'extpkg' is not installed" in asked.stdout, asked.stderr
    assert marker.exists()


def test_a_configured_venv_is_read(made: tuple[str, Path], tool: Path, tmp_path: Path) -> None:
    kind, root = made
    project = _project(tmp_path / "project")
    (project / "setup.cfg").write_text(f"[fwdlint]\npython-executable = {root / '.venv' / 'bin' / 'python'}\n")
    proc = _fwdlint(tool, project, ".")
    assert proc.returncode == 1 and proc.stdout.startswith(FINDING), proc.stderr


def test_a_chatty_interpreter_is_cut_off(tmp_path: Path, tool: Path) -> None:
    project = _project(tmp_path / "project")
    chatty = _script(tmp_path / "bin" / "chatty", f"head -c 3000000 /dev/zero | tr '\\0' x\necho\n"
                                                  f'exec "{BASE_PYTHON}" "$@"\n')
    proc = _fwdlint(tool, project, "--python", str(chatty), ".")
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == (f"fwdlint: error: --python {chatty}: not a Python interpreter "
                           f"(more than {environment.MAX_OUTPUT} bytes of output)\n")


def test_a_silent_interpreter_times_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hang = _script(tmp_path / "bin" / "hang", "sleep 300 &\nwait\n")  # its child holds the pipe open too
    monkeypatch.setattr(environment, "QUERY_TIMEOUT", 1)
    with pytest.raises(environment.NoInterpreter, match="no answer within 1 s"):
        environment.find(str(hang))


def test_a_system_interpreter_named_on_the_command_line_is_asked(tmp_path: Path, tool: Path) -> None:
    project = _project(tmp_path / "project")
    proc = _fwdlint(tool, project, "-v", "--python", BASE_PYTHON, ".")
    assert proc.returncode == 1 and "FWD005 package 'extpkg'" in proc.stdout, proc.stderr  # not installed there
    line = proc.stderr.splitlines()[0]
    assert line.startswith(f"fwdlint: environment: interpreter {BASE_PYTHON} (from --python), python {VERSION}, ")
    payload = json.loads(_fwdlint(tool, project, "--python", BASE_PYTHON, "--format", "json", ".").stdout)
    assert [d["code"] for d in payload["diagnostics"]] == ["FWD005"]
