"""A warm run reports the last identical run's findings (``lint_rules/results.py``) only while
nothing they depend on changed: each change below must give what a run without any cache gives.
Every run is a fresh ``fwdlint`` process; ``-v`` says when findings were reused."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest
from fixture_cases import site_packages, torch_site

from lint_rules import results
from lint_rules.engine import Run, Session, _analyse

ROOT = Path(__file__).resolve().parent.parent
REUSED = "fwdlint: nothing the findings depend on changed"

MODEL = """import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return self.fc(x)

    def generate(self, x):
        return self(x)
"""
MARK = """from runtime_shim import mark_forward_method
from torch.nn.parallel import DistributedDataParallel as DDP

from model import Net

ddp = DDP(Net())
mark_forward_method(ddp, "generate")
"""
HEAD = """from extlib import Base


class Head(Base):
    def forward(self, x):
        return x

    def generate(self, x):
        return self(x)
"""


@dataclass
class Outcome:
    code: int
    out: str
    reused: bool


def lint(cwd: Path, *args: str) -> Outcome:
    proc = subprocess.run([sys.executable, "-m", "lint_rules.cli", "-v", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode in (0, 1), proc.stderr
    return Outcome(proc.returncode, proc.stdout, REUSED in proc.stderr)


def reused(cwd: Path, *args: str) -> Outcome:
    """A run that must reuse the last one's findings, which must be a cold run's."""
    warm, cold = lint(cwd, *args), lint(cwd, "--no-cache", *args)
    assert warm.reused and not cold.reused
    assert (warm.code, warm.out) == (cold.code, cold.out)
    return warm


def fresh(cwd: Path, *args: str) -> Outcome:
    """A run that must analyse again (something changed), and find what a cold run finds."""
    warm, cold = lint(cwd, *args), lint(cwd, "--no-cache", *args)
    assert not warm.reused
    assert (warm.code, warm.out) == (cold.code, cold.out)
    return warm


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "model.py").write_text(MODEL)
    (tmp_path / "train.py").write_text("from model import Net\n\nnet = Net()\n")
    return tmp_path


def test_nothing_changed_reuses_the_findings(project: Path) -> None:
    first = fresh(project, ".")
    assert first.code == 1 and "FWD001 Net.generate" in first.out
    assert reused(project, ".").out == first.out
    assert not lint(project, "model.py").reused  # other paths: another run, whose first time this is
    assert reused(project, "model.py").code == 1


def test_a_reused_run_keeps_the_steps_and_the_set_ups(project: Path) -> None:
    """The chain's steps and the set-up sites are stored with the findings: warm JSON and SARIF
    (and the edits ``--fix-edits`` computes) are a cold run's."""
    (project / "train.py").write_text("from torch.nn.parallel import DistributedDataParallel as DDP\n\n"
                                      "from model import Net\n\nddp = DDP(Net())\n")
    fresh(project, ".")  # the format is not part of a run's key: the findings are
    for fmt in (("--format", "json"), ("--format", "sarif"), ("--format", "json", "--fix-edits")):
        warm = reused(project, *fmt, ".")
        if fmt == ("--format", "json"):
            [finding] = json.loads(warm.out)["diagnostics"]
            assert [step["message"] for step in finding["steps"]] == ["generate", "self(...)"]
            assert finding["related"] == [{"message": "ddp set up with DDP: does not register generate",
                                           "path": "train.py", "line": 5}]


def test_an_edited_checked_file_is_analysed_again(project: Path) -> None:
    fresh(project, ".")
    (project / "model.py").write_text(MODEL.replace("    def generate", "    @staticmethod\n    def helper():\n"
                                                    "        return 1\n\n    def generate"))
    assert "FWD001 Net.generate" in fresh(project, ".").out
    (project / "model.py").write_text(MODEL.replace("return self(x)", "return x"))
    assert fresh(project, ".").code == 0


def test_an_edit_the_analysis_cannot_see_reuses_the_findings(project: Path) -> None:
    """Findings depend on a file through its facts: a comment added at the end of a checked file or
    of a file of the view, a reworded docstring, leave them as they were (only the edited file is
    parsed, ``results.Lookup.found``); a comment that is a fact (``noqa``) does not."""
    first = fresh(project, ".")
    (project / "model.py").write_text(MODEL + "# a note at the end\n")
    assert reused(project, ".").out == first.out
    (project / "train.py").write_text((project / "train.py").read_text() + "# another\n")
    assert reused(project, ".").out == first.out
    (project / "model.py").write_text(MODEL.replace("        return self(x)",
                                                    '        """Calls the model."""\n        return self(x)')
                                      + "# a note at the end\n")
    assert not lint(project, ".").reused  # a docstring added moves the lines below it: other facts
    (project / "model.py").write_text(MODEL.replace("        return self(x)",
                                                    '        """Calls the net."""\n        return self(x)')
                                      + "# a note at the end\n")
    assert reused(project, ".").out != first.out  # the same facts as the run before, not the first one
    (project / "model.py").write_text(MODEL.replace("def generate(self, x):", "def generate(self, x):  # noqa: FWD001"))
    assert fresh(project, ".").code == 0


def test_a_run_found_by_its_facts_is_kept_under_its_files_too(project: Path) -> None:
    """After findings are reused for an unseen edit, the next run with the same files finds them by
    its key, without parsing or reading any file's facts."""
    paths = [str(project / "model.py"), str(project / "train.py")]

    def run() -> tuple[bool, bool]:  # (stored under the run's key, found)
        session = Session(Run(), paths[0])
        try:
            lookup = results.Lookup(session, paths)
            assert session.store.cache is not None
            by_key = session.store.cache.get(lookup.key) is not None
            found = lookup.found()
            if found is None:
                lookup.store(_analyse(session, paths))
            return by_key, found is not None
        finally:
            session.store.close()

    assert run() == (False, False)
    (project / "model.py").write_text(MODEL + "# a note at the end\n")
    assert run() == (False, True)
    assert run() == (True, True)


def test_a_registration_added_to_a_file_of_the_view_is_seen(project: Path) -> None:
    assert fresh(project, "model.py").code == 1  # train.py is only in the view
    (project / "train.py").write_text(MARK)
    assert fresh(project, "model.py").code == 0


def test_a_new_file_of_the_project_is_seen(project: Path) -> None:
    assert fresh(project, "model.py").code == 1
    (project / "marks.py").write_text(MARK)
    assert fresh(project, "model.py").code == 0
    (project / "marks.py").unlink()
    assert reused(project, "model.py").code == 1  # the project as the first run saw it


@pytest.fixture
def venv(tmp_path: Path) -> Path:
    env = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True, timeout=120)
    (site_packages(env / "bin" / "python") / "torch-from-tests.pth").write_text(f"{torch_site()}\n")
    return env


def test_a_package_installed_or_edited_since_is_read(project: Path, venv: Path) -> None:
    (project / "head.py").write_text(HEAD)
    args = ("--python", str(venv), "head.py")
    assert "FWD005 package 'extlib' is not installed" in fresh(project, *args).out  # Head's base is unknown
    assert reused(project, *args).code == 1
    package = site_packages(venv / "bin" / "python") / "extlib"
    package.mkdir()
    (package / "__init__.py").write_text("import torch.nn as nn\n\n\nclass Base(nn.Module):\n    pass\n")
    assert "FWD001 Head.generate" in fresh(project, *args).out  # the missing file the last run looked for
    assert reused(project, *args).code == 1
    (package / "__init__.py").write_text("class Base:\n    pass\n")
    assert fresh(project, *args).code == 0  # the installed file it read
    shutil.rmtree(package)
    assert "FWD005" in fresh(project, *args).out  # the package looked for and now missing


def test_other_options_and_configuration_are_another_run(project: Path) -> None:
    fresh(project, ".")
    assert fresh(project, "--select", "FWD002", ".").code == 0
    assert reused(project, ".").code == 1  # the first run's (a path keeps its last 3 runs)
    assert fresh(project, "--per-file-ignores", "model.py:FWD001", ".").code == 0
    (project / "pyproject.toml").write_text('[tool.fwdlint]\nignore = ["FWD001"]\n')
    assert fresh(project, ".").code == 0


def test_fwdlints_own_code_is_in_the_key(tmp_path: Path) -> None:
    package = tmp_path / "lint_rules"
    shutil.copytree(ROOT / "lint_rules", package, ignore=shutil.ignore_patterns("__pycache__"))
    before = results.code_digest(package)
    rule = package / "rules" / "fwd201_compiled_call_in_init_context.py"
    rule.write_text(rule.read_text() + "\n# a rule edited\n")
    assert results.code_digest(package) != before


def test_a_file_changed_while_the_run_read_it_is_not_stored(project: Path) -> None:
    paths = [str(project / "model.py")]
    session = Session(Run(), paths[0])
    try:
        lookup = results.Lookup(session, paths)
        (project / "train.py").write_text(MARK)  # after the key was computed, before any file was read
        assert lookup.found() is None
        lookup.store(_analyse(session, paths))
        assert session.store.cache is not None and session.store.cache.get(lookup.key) is None
    finally:
        session.store.close()


ENCODER = """import torch.nn as nn


class Encoder(nn.Module):
    def forward(self, x):
        return self.encode(x)

    def encode(self, x):
        raise NotImplementedError
"""
IMPLEMENTATION = """import torch.nn as nn

from extlib.base import Encoder


class Linear(Encoder):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def encode(self, x):
        return self.fc(x)
"""
USER = """import torch.nn as nn

from extlib.base import Encoder


class Model(nn.Module):
    def __init__(self, enc: Encoder):
        super().__init__()
        self.enc = enc

    def forward(self, x):
        return self.enc(x)

    def generate(self, x):
        return self.enc.encode(x)
"""


def test_a_module_added_next_to_an_installed_abstract_class_is_seen(project: Path, venv: Path) -> None:
    """``Encoder.encode`` is abstract, so its overrides are looked for in the modules next to it
    (a directory listing, not a file looked for by name)."""
    package = site_packages(venv / "bin" / "python") / "extlib"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "base.py").write_text(ENCODER)
    (project / "user.py").write_text(USER)
    args = ("--python", str(venv), "user.py")
    assert fresh(project, *args).code == 0  # no override computes
    assert reused(project, *args).code == 0
    (package / "impl.py").write_text(IMPLEMENTATION)
    assert "FWD001 Model.generate" in fresh(project, *args).out


# flake8 checks a file at a time, in -j processes: each file's findings are stored and reused
# (``results.FileLookup``) while the project and what its view looked at on disk are as they were.
FLAKE8_REUSED = "fwdlint: findings reused: nothing they depend on changed"


def flake8(cwd: Path, *args: str) -> Outcome:
    proc = subprocess.run([sys.executable, "-m", "flake8", "-v", "--select", "FWD", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=180, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    return Outcome(proc.returncode, proc.stdout, FLAKE8_REUSED in proc.stderr)


def flake8_reused(cwd: Path, *args: str) -> Outcome:
    warm, cold = flake8(cwd, *args), flake8(cwd, "--fwd-no-cache", *args)
    assert warm.reused and not cold.reused
    assert (warm.code, sorted(warm.out.splitlines())) == (cold.code, sorted(cold.out.splitlines()))
    return warm


def flake8_fresh(cwd: Path, *args: str) -> Outcome:
    warm, cold = flake8(cwd, *args), flake8(cwd, "--fwd-no-cache", *args)
    assert not warm.reused
    assert (warm.code, sorted(warm.out.splitlines())) == (cold.code, sorted(cold.out.splitlines()))
    return warm


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_flake8_reuses_a_files_findings_while_nothing_they_depend_on_changed(project: Path, jobs: str) -> None:
    (project / "other.py").write_text(MODEL.replace("Net", "Other"))
    first = flake8_fresh(project, "-j", jobs, ".")
    assert first.code == 1 and "FWD001 Net.generate" in first.out and "FWD001 Other.generate" in first.out
    assert flake8_reused(project, "-j", jobs, ".").out.count("FWD001") == 2
    assert flake8_reused(project, "-j", jobs, "model.py").code == 1  # pre-commit's staged files: the same rows
    (project / "train.py").write_text(MARK)  # a registration in another file of the view
    assert "FWD001 Net.generate" not in flake8_fresh(project, "-j", jobs, ".").out
    marks = MARK.replace("model import Net", "other import Other").replace("Net()", "Other()")
    (project / "marks.py").write_text(marks)
    assert flake8_fresh(project, "-j", jobs, ".").code == 0
    (project / "marks.py").unlink()
    assert flake8_reused(project, "-j", jobs, ".").out.count("FWD001") == 1  # as the run before saw it


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_flake8_an_edit_the_analysis_cannot_see_reuses_the_findings(project: Path, jobs: str) -> None:
    """As the command does: a comment added at the end of a file leaves every file's facts as they
    were, so each file's findings are found by the files' facts (the edited files parsed first)."""
    (project / "other.py").write_text(MODEL.replace("Net", "Other"))

    def rows(outcome: Outcome) -> list[str]:
        return sorted(line.removeprefix("./") for line in outcome.out.splitlines())

    first = rows(flake8_fresh(project, "-j", jobs, "."))
    assert len(first) == 2
    (project / "model.py").write_text(MODEL + "# a note at the end\n")
    assert rows(flake8_reused(project, "-j", jobs, ".")) == first
    (project / "train.py").write_text((project / "train.py").read_text() + "# another\n")
    assert rows(flake8_reused(project, "-j", jobs, "model.py", "other.py")) == first  # pre-commit's
    (project / "model.py").write_text(MODEL.replace("        return self(x)",
                                                    '        """Calls the model."""\n        return self(x)'))
    moved = flake8_fresh(project, "-j", jobs, ".").out  # a docstring added moves the lines below it: other facts
    assert "Net.generate runs forward computation outside forward (generate -> self(...) at line 14)" in moved


def test_flake8_reads_a_package_installed_or_edited_since(project: Path, venv: Path) -> None:
    (project / "head.py").write_text(HEAD)
    args = ("--fwd-python-executable", str(venv), "head.py")
    assert "FWD005 package 'extlib' is not installed" in flake8_fresh(project, *args).out
    assert flake8_reused(project, *args).code == 1
    package = site_packages(venv / "bin" / "python") / "extlib"
    package.mkdir()
    (package / "__init__.py").write_text("import torch.nn as nn\n\n\nclass Base(nn.Module):\n    pass\n")
    assert "FWD001 Head.generate" in flake8_fresh(project, *args).out  # the package looked for, missing before
    (package / "__init__.py").write_text("class Base:\n    pass\n")
    assert flake8_fresh(project, *args).code == 0  # the installed file it read


def test_flake8_a_file_outside_the_project_listing_is_checked_as_before(project: Path) -> None:
    """``node_modules`` is left out of project views but flake8 checks it: it joins the view of the
    process that checks it, so the files checked after it there are neither reused nor stored."""
    (project / "node_modules").mkdir()
    (project / "node_modules" / "marks.py").write_text(MARK)
    # checked in the order given: model.py with marks.py in its view, where the registration is seen
    assert flake8(project, "-j", "1", "node_modules/marks.py", "model.py").code == 0
    assert flake8_fresh(project, "-j", "1", "model.py").code == 1  # alone: the view is the project's
    assert flake8_reused(project, "-j", "1", "model.py").code == 1


@contextmanager
def model_lookup(project: Path) -> Iterator[tuple[Session, results.FileLookup, str, str]]:
    """A session with the stored findings of ``project`` (as the flake8 plugin's), for model.py and its key."""
    path = str(project / "model.py")
    session = Session(Run(), path)
    try:
        root = session.root_for(path)
        session.view_paths(root, [path])
        lookup = results.FileLookup(session, root, session.listed[root])
        [key] = session.store.read_keys([path])
        assert isinstance(key, str) and session.store.cache is not None
        yield session, lookup, path, key
    finally:
        session.store.close()


def test_flake8_findings_of_a_file_changed_while_the_process_read_it_are_not_stored(project: Path) -> None:
    with model_lookup(project) as (session, lookup, path, key):
        assert session.store.cache is not None and session.store.cache.get(lookup._file_key(path, key)) is None
        assert lookup.checking(path)
        (project / "train.py").write_text(MARK)  # after the key was computed, before any file was read
        root = session.root_for(path)
        view = session.view(root, [path])
        facts = session.store.facts(path)
        view.add(facts, "model")  # type: ignore[arg-type]
        lookup.computed(path, key, session.check(view, facts))  # type: ignore[arg-type]
        lookup.store(view)
        assert lookup.found(path, key) is None


def test_a_damaged_stored_file_finding_is_checked_again(project: Path) -> None:
    with model_lookup(project) as (session, lookup, path, key):
        cache = session.store.cache
        assert cache is not None
        cache.put("Q:empty", "[[]]", "Q:" + path)  # a probe list whose probe is empty
        for damaged in ("not json", "[1]", '["Q:missing", []]', '["Q:empty", []]', '["Q:empty", [[]]]'):
            cache.put(lookup._file_key(path, key), damaged, "F:" + path)
            assert lookup.found(path, key) is None, damaged
