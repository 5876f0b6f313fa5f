"""Issue 36: every file a configuration names is a regular file read with a size limit, and every bad
input is one line naming it and exit 2, from ``fwdlint`` and from flake8 (never a traceback, all
memory or a hang). Each run here is bounded itself: 2 GiB of address space and a timeout, so the code
before the fix failed these tests instead of taking the machine."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest
from fixture_cases import FLAKE8_FORMAT

MODEL = "import torch.nn as nn\n\n\nclass Net(nn.Module):\n    def run(self, x):\n        return self.a(x)\n"
LIMIT = 2 * 2**30


def _bounded() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT, resource.getrlimit(resource.RLIMIT_AS)[1]))


def bounded_run(cwd: Path, *args: str, flake8: bool = False, timeout: float = 60) -> subprocess.CompletedProcess:
    command = ["-m", "flake8", f"--format={FLAKE8_FORMAT}", "--select", "FWD"] if flake8 else ["-m", "lint_rules.cli"]
    return subprocess.run([sys.executable, *command, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, preexec_fn=_bounded)


def one_line(run: subprocess.CompletedProcess, *pieces: str) -> None:
    assert run.returncode == 2, (run.returncode, run.stderr[-2000:])
    assert len(run.stderr.splitlines()) == 1 and "Traceback" not in run.stderr, run.stderr[-2000:]
    assert all(piece in run.stderr for piece in pieces), run.stderr


def _project(tmp_path: Path, config: str) -> Path:
    (tmp_path / "pyproject.toml").write_text(config)
    (tmp_path / "m.py").write_text(MODEL)
    return tmp_path


@pytest.mark.parametrize("kind", ["dev-zero", "fifo", "directory"])
@pytest.mark.parametrize("front", ["cli", "flake8"])
def test_a_configured_record_must_be_a_regular_file(tmp_path: Path, kind: str, front: str) -> None:
    if kind == "dev-zero":
        target = "/dev/zero"
    elif kind == "fifo":
        os.mkfifo(tmp_path / "record.json")
        target = "record.json"
    else:
        (tmp_path / "record.json").mkdir()
        target = "record.json"
    project = _project(tmp_path, f'[tool.fwdlint]\nfrom-record = "{target}"\n')
    run = bounded_run(project, ".", flake8=front == "flake8", timeout=30)
    what = {"dev-zero": "a character device", "fifo": "a FIFO", "directory": "a directory"}[kind]
    one_line(run, "the record is", what, "not a regular file")
    assert run.stderr.startswith("pyproject.toml: error: [tool.fwdlint] 'from-record': "), run.stderr


@pytest.mark.parametrize("config,start", [
    ("setup.cfg:[fwdlint]\nfrom-record = missing.json\n", "setup.cfg: error: [fwdlint] 'from-record': "),
    ("setup.cfg:[flake8]\nfwd-from-record = missing.json\n", "setup.cfg: error: [flake8] 'fwd-from-record': "),
    (".flake8:[fwdlint]\nfrom_record = missing.json\n", ".flake8: error: [fwdlint] 'from_record': "),
    # an INI continuation: the path holds two newlines, the line shows them escaped
    ("tox.ini:[fwdlint]\nfrom-record = missing\n  .json\n  x\n", "tox.ini: error: [fwdlint] 'from-record': "),
], ids=["setup.cfg", "setup.cfg-flake8-section", "flake8-file", "tox.ini-multiline"])
@pytest.mark.parametrize("front", ["cli", "flake8"])
def test_a_configured_record_s_refusal_names_the_file_and_key(tmp_path: Path, config: str, start: str,
                                                              front: str) -> None:
    """The fuzzer's find (tests/test_config_fuzz.py): the line named the record but not the file and
    key that set it, and a multi-line INI value was printed over several lines."""
    name, text = config.split(":", 1)
    (tmp_path / name).write_text(text)
    (tmp_path / "m.py").write_text(MODEL)
    run = bounded_run(tmp_path, ".", flake8=front == "flake8", timeout=30)
    one_line(run, "missing", "no such record")
    assert run.stderr.startswith(start), run.stderr


@pytest.mark.parametrize("config", [
    'pyproject.toml:[tool.fwdlint]\ncache-dir = "a\\u0000b"\n', "setup.cfg:[fwdlint]\ncache-dir = a\0b\n",
    "setup.cfg:[flake8]\nfwd-cache-dir = a\0b\n"], ids=["toml", "ini", "ini-flake8-section"])
@pytest.mark.parametrize("front", ["cli", "flake8"])
def test_a_cache_dir_holding_a_nul_is_refused_in_one_line(tmp_path: Path, config: str, front: str) -> None:
    """It was a ValueError traceback from the cache's mkdir (cache_file._claim)."""
    name, text = config.split(":", 1)
    (tmp_path / name).write_text(text)
    (tmp_path / "m.py").write_text(MODEL)
    one_line(bounded_run(tmp_path, ".", flake8=front == "flake8", timeout=30), f"{name}: error:", "cache-dir",
             "a\\x00b holds a NUL")
    assert not (tmp_path / "a").exists()


@pytest.mark.parametrize("key", ["extend-select", "extend-ignore"])
@pytest.mark.parametrize("front", ["cli", "flake8"])
def test_a_megabyte_long_code_is_refused_at_once(tmp_path: Path, key: str, front: str) -> None:
    """A 1 MB unknown code: the did-you-mean search was quadratic in its length (5.7 s at 100 kB; at
    1 MB it runs out of the 2 GiB this run gets). Now no suggestion is looked for past the length one
    could have, and the line shows the code shortened."""
    (tmp_path / "setup.cfg").write_text(f"[fwdlint]\n{key} = {'A' * 2**20}\n")
    (tmp_path / "m.py").write_text(MODEL)
    run = bounded_run(tmp_path, ".", flake8=front == "flake8", timeout=30)
    one_line(run, f"setup.cfg: error: [fwdlint] bad value for '{key}'", f"({2**20} characters)")
    assert len(run.stderr) < 1000, len(run.stderr)


def test_no_suggestion_is_lost_to_the_length_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """``close_codes`` skips codes longer than ``_SUGGEST_UP_TO``: the unbounded search finds nothing for
    them either (seeded codes just past the bound, made of the codes' own characters)."""
    import random

    from lint_rules import rule_codes

    rng = random.Random(36)
    alphabet = "".join(sorted(set("".join(rule_codes.CODES)))) + "X"
    longer = [rule_codes.CODES[i % len(rule_codes.CODES)] + "".join(rng.choice(alphabet) for _ in range(3 + i % 3))
              for i in range(300)]
    assert all(len(code) > rule_codes._SUGGEST_UP_TO for code in longer)
    assert all(rule_codes.close_codes(code) == [] for code in longer)
    monkeypatch.setattr(rule_codes, "_SUGGEST_UP_TO", 10**9)
    assert [code for code in longer if rule_codes.close_codes(code)] == []
    assert rule_codes.close_codes("FDW001") == ["FWD001"]  # the bound leaves ordinary slips alone


def test_a_record_larger_than_the_limit_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from lint_rules import bounded, run_record

    (tmp_path / "record.json").write_bytes(b" " * 2048)
    monkeypatch.setattr(bounded, "RECORD_LIMIT", 1024)
    with pytest.raises(run_record.RecordError, match="is too large"):
        run_record.load(str(tmp_path / "record.json"))


@pytest.mark.parametrize("kind", ["dev-zero", "fifo"])
def test_a_configuration_file_must_be_a_regular_file(tmp_path: Path, kind: str) -> None:
    if kind == "fifo":
        os.mkfifo(tmp_path / "fwd.toml")
    target = "/dev/zero" if kind == "dev-zero" else "fwd.toml"
    (tmp_path / "m.py").write_text(MODEL)
    run = bounded_run(tmp_path, "--config", target, "m.py", timeout=30)
    one_line(run, target, "the configuration file is", "not a regular file")


def _venv_with_finder(project: Path) -> Path:
    """The project's .venv with an editable install whose finder file the test fills."""
    site = project / ".venv" / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    site.mkdir(parents=True)
    (project / ".venv" / "pyvenv.cfg").write_text(f"home = /usr/bin\nversion = {sys.version_info[0]}."
                                                  f"{sys.version_info[1]}.0\n")
    (site / "__editable__.pkg-1.0.pth").write_text("import __editable___pkg_1_0_finder; "
                                                   "__editable___pkg_1_0_finder.install()\n")
    return site / "__editable___pkg_1_0_finder.py"


@pytest.mark.parametrize("kind", ["fifo", "recursion", "memory", "huge"])
@pytest.mark.parametrize("front", ["cli", "flake8"])
def test_an_environment_file_that_cannot_be_read_is_skipped_with_a_warning(tmp_path: Path, kind: str,
                                                                           front: str) -> None:
    project = _project(tmp_path, "")
    finder = _venv_with_finder(project)
    if kind == "fifo":
        os.mkfifo(finder)
    else:
        nested = {"recursion": "-" * 3000 + "1", "memory": "-" * 100_000 + "1", "huge": "1" + " " * 2**21}[kind]
        finder.write_text(f"MAPPING = {nested}\n")
    run = bounded_run(project, "m.py", *(["-v"] if front == "cli" else []), flake8=front == "flake8", timeout=60)
    assert run.returncode in (0, 1) and "Traceback" not in run.stderr, run.stderr[-2000:]
    warning = [line for line in run.stderr.splitlines() if "__editable___pkg_1_0_finder.py" in line]
    assert len(warning) == 1 and warning[0].startswith("fwdlint: warning:") and "skipped" in warning[0], run.stderr


def _hard_limit() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (3 * 2**30, 3 * 2**30))


@pytest.mark.parametrize("front", ["cli", "flake8"])
def test_workers_lower_their_memory_limit_to_the_inherited_one_never_raise_it(tmp_path: Path, front: str) -> None:
    """``ulimit -v`` (3 GiB, hard) under a larger FWDLINT_WORKER_MEMORY: every worker failed with 'not
    allowed to raise maximum limit'; now they run under the inherited limit."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "m.py").write_text(MODEL.replace("self.a(x)", "self(x)"))
    command = ["-m", "flake8", f"--format={FLAKE8_FORMAT}", "--select", "FWD"] if front == "flake8" else \
        ["-m", "lint_rules.cli", "--no-cache"]
    run = subprocess.run([sys.executable, *command, *(["--fwd-no-cache"] if front == "flake8" else []), "m.py"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120, preexec_fn=_hard_limit,
                         env={**os.environ, "FWDLINT_WORKER_MEMORY": "8192"})
    assert run.returncode == 1 and "FWD001" in run.stdout and "error" not in run.stderr, (run.stdout, run.stderr)


RECORD_ENTRY = ('{"format": "fwdlint-record", "schema": 1, "entries": [{"class": "m.Net", "method": "run", '
                '"marked": false, "wrapper": "ddp", "defined_in": "m.Net", "file": "\\u0000", "line": 4, '
                '"site": "t.py:3", "test": "", "wrapped_at": "t.py:2", "count": 1}]}')


@pytest.mark.parametrize("config,files,args,pieces", [
    ("[tool.fwdlint]\nselect = " + "[" * 500 + "]" * 500 + "\n", {}, (), ("pyproject.toml", "nested too deeply")),
    ("", {}, ("--python", "p" * 5000), ("--python ppp", "5000 characters", "File name too long")),
    ('[tool.fwdlint]\npython-executable = "./' + "p" * 5000 + '"\n', {}, (), ("python-executable", "too long")),
    ('[tool.fwdlint]\nfrom-record = "a\\u0000b"\n', {}, (), ("a\\x00b", "not a usable path")),
    ("", {"r.json": "[" * 100_000}, ("--from-record", "r.json"), ("r.json", "nested too deeply")),
    ("", {"r.json": RECORD_ENTRY}, ("--from-record", "r.json"), ("r.json", "'file' holds a NUL")),
], ids=["select-nested", "python-long", "python-executable-long", "record-nul-path", "record-brackets",
        "record-entry-nul"])
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, config: str, files: dict[str, str], args: tuple[str, ...],
                                          pieces: tuple[str, ...]) -> None:
    project = _project(tmp_path, config)
    for name, text in files.items():
        (project / name).write_text(text)
    one_line(bounded_run(project, *args, "m.py"), *pieces)


@pytest.mark.parametrize("first", ["loop", "long", "both"])
def test_a_bad_first_path_is_that_path_s_error_line(tmp_path: Path, first: str) -> None:
    project = _project(tmp_path, "")
    (project / "loop").symlink_to("loop")
    paths = {"loop": ["loop"], "long": ["a" * 300], "both": ["a" * 300, "loop"]}[first]
    run = bounded_run(project, *paths, "m.py")
    assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr[-2000:]
    assert len(run.stderr.splitlines()) == len(paths), run.stderr
    assert all(": error: cannot read:" in line for line in run.stderr.splitlines()), run.stderr


def test_a_record_with_a_byte_order_mark_is_read(tmp_path: Path) -> None:
    from lint_rules import run_record

    (tmp_path / "r.json").write_bytes(b"\xef\xbb\xbf" + RECORD_ENTRY.replace("\\u0000", "m.py").encode())
    (entry,) = run_record.load(str(tmp_path / "r.json"))
    assert entry.file == str(tmp_path / "m.py")
