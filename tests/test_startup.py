"""Start-up pays only for what it uses: LibCST (about 150 ms to import) is loaded only by the
parser processes and by ``--fix``, never by ``fwdlint --version`` or by a run whose files are all
in the facts cache. Each case is a fresh interpreter."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

MODEL = "import torch.nn as nn\n\n\nclass M(nn.Module):\n    def generate(self, x):\n        return self(x)\n"
# runs the CLI in this interpreter, then says whether LibCST was imported by it
PROBE = ("import sys\nfrom lint_rules.cli import main\ntry:\n    code = main(sys.argv[1:])\nexcept SystemExit as e:\n"
         "    code = e.code\nprint('libcst' in sys.modules, code)\n")


def _probe(cwd: Path, *args: str) -> tuple[str, str]:
    proc = subprocess.run([sys.executable, "-c", PROBE, *args], cwd=cwd, capture_output=True, text=True, timeout=120)
    assert "Traceback" not in proc.stderr, proc.stderr
    loaded, code = proc.stdout.splitlines()[-1].split()
    return loaded, code


def test_version_does_not_import_libcst(tmp_path: Path) -> None:
    assert _probe(tmp_path, "--version") == ("False", "0")


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_cold_and_warm_runs_leave_libcst_to_the_workers(tmp_path: Path, jobs: str) -> None:
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "model.py").write_text(MODEL)
    assert _probe(tmp_path, "-j", jobs, ".") == ("False", "1")  # cold: parsed (in this process: a small file)
    assert _probe(tmp_path, "-j", jobs, ".") == ("False", "1")  # warm: nothing parsed


def test_fix_imports_libcst_in_process(tmp_path: Path) -> None:
    """The control: the fixers edit with LibCST in fwdlint's own process."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "model.py").write_text(MODEL)
    assert _probe(tmp_path, "--fix", ".") == ("True", "0")


# the lint_rules modules the CLI imported, after it ran in this interpreter
MODULES = ("import sys\nfrom lint_rules.cli import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
           "print(' '.join(sorted(m for m in sys.modules if m.startswith('lint_rules'))))\n")


@pytest.mark.parametrize("option", ["--version", "--help"])
def test_version_and_help_import_only_the_parser(tmp_path: Path, option: str) -> None:
    """Neither the engine, the store, the rules, the reports nor the fixers: only what builds the parser."""
    proc = subprocess.run([sys.executable, "-c", MODULES, option], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)
    assert proc.stdout.splitlines()[-1].split() == ["lint_rules", "lint_rules.cli", "lint_rules.contract"]


def test_reused_findings_load_neither_the_facts_model_nor_the_rules(tmp_path: Path) -> None:
    """A warm run whose findings are reused (``lint_rules/results.py``) decodes no facts and runs no
    rule, so it imports neither; the first run, which analyses, is the control."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "model.py").write_text(MODEL)
    analysis = {"lint_rules.facts.model", "lint_rules.facts.codec", "lint_rules.project", "lint_rules.computation",
                "lint_rules.rules.fwd001_unmarked_entry"}
    runs = [subprocess.run([sys.executable, "-c", MODULES, "."], cwd=tmp_path, capture_output=True, text=True,
                           timeout=120).stdout.split() for _ in range(2)]
    assert analysis <= set(runs[0])
    assert not analysis & set(runs[1]) and "lint_rules.results" in runs[1]
    # nor what only other options need: a run record, SARIF, the parser processes
    assert not {"lint_rules.run_record", "lint_rules.sarif", "lint_rules.workers"} & set(runs[1])
