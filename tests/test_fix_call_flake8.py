"""``--fix`` leaves nothing for pyflakes: every fixture of ``fixtures/`` (each rule's cases, the
``before`` side of its fix pairs, the demo project, the runtime scripts with their model), fixed with
``fwdlint --fix`` in each style, gets no ``flake8 --select F`` finding it did not have before
(an ``import types`` that FWD301's rewrite left unused was one: F401)."""

from __future__ import annotations

import re
import shutil
from collections import Counter
from pathlib import Path

import pytest
from fixture_cases import FIXTURES, cases, run_cli, run_flake8


def _tree(root: Path) -> Path:
    """Every fixture case as a project of its own under ``root`` (a file case alone in its directory)."""
    for directory in sorted(p for p in FIXTURES.iterdir() if p.is_dir()):
        for case in cases(directory):
            target = root / directory.name / case.name
            if case.args == (".",):
                shutil.copytree(case.cwd, target)
            else:
                target.mkdir(parents=True)
                shutil.copyfile(case.files[0], target / case.files[0].name)
            (target / "pyproject.toml").touch()
    for case in sorted(FIXTURES.glob("fwd[0-9][0-9][0-9]/fix/*")):
        target = root / "fix_pairs" / f"{case.parent.parent.name}_{case.name}"
        if (case / "before.py").is_file():
            target.mkdir(parents=True)
            shutil.copyfile(case / "before.py", target / f"{case.name}.py")
        else:
            shutil.copytree(case / "before", target)
        (target / "pyproject.toml").touch()
    scripts = root / "fix_call_runtime_with_model"  # the scripts with the model they import
    shutil.copytree(FIXTURES / "fix_call_runtime", scripts)
    shutil.copyfile(FIXTURES / "runtime_models" / "unmarked_lm.py", scripts / "model.py")
    (scripts / "pyproject.toml").touch()
    return root


def _pyflakes(root: Path) -> Counter:
    """flake8's F findings by file, code and text (line numbers in texts move with the fix)."""
    proc = run_flake8(root, "--select", "F", ".")
    assert proc.returncode in (0, 1), proc.stderr
    found: Counter = Counter()
    for row in proc.stdout.splitlines():
        path, _, _, code, text = row.split("\t", 4)
        found[(path, code, re.sub(r"line \d+", "line N", text))] += 1
    return found


def _contents(root: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in sorted(root.rglob("*.py"))}


@pytest.mark.parametrize("style", ["decorator", "call"])
def test_fixed_fixtures_get_no_new_pyflakes_finding(style: str, tmp_path: Path) -> None:
    root = _tree(tmp_path / "fixtures")
    before, old = _pyflakes(root), _contents(root)
    run_cli(root, "--fix", "--fix-style", style, ".")  # findings left unfixed exit 1: not our question
    changed = [p for p, data in _contents(root).items() if data != old[p]]
    assert len(changed) >= (40 if style == "decorator" else 5), changed  # the fixes did run
    assert any("fwd301" in p.as_posix() for p in changed)  # ...including FWD301's rewrite
    new = _pyflakes(root) - before
    assert not new, sorted(new)
