"""A file's findings depend on its project's files, never on which files were checked before it.

The checks of one run share what they computed (class analyses, verdicts of method names), and
the flake8 plugin checks a file at a time, in several processes, each in its own order. So every
file of every fixture project, checked alone, must get exactly the findings it gets when the whole
project is checked, in either order. At first contact with timm 1.0.31, ``efficientvit_msra.py``
did not: a cycle through three classes left a "no" for good in a class other than the one that
closed the cycle (``fixtures/fwd001/cycle_across_classes``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fixture_cases import FIXTURES, cases, rule_fixture_dirs
from lint_rules.engine import Run, analyse
from lint_rules.layout import view_files


def _projects() -> list[tuple[str, Path, list[Path]]]:
    """(id, project root, files of its view to check): each rule's directory of one-file cases (one
    project: its cases, not the fixers' pairs under ``fix/``), each directory case, and the demo
    project. A project nested in a case (its own ``pyproject.toml``) is not in the case's view:
    checking its files would add them to it."""
    found = []
    for directory in rule_fixture_dirs():
        found.append((directory.name, directory, [Path(path) for path in view_files(directory, [])[0]]))
        found.extend((f"{directory.name}-{case.name}", case.cwd, [Path(path) for path in view_files(case.cwd, [])[0]])
                     for case in cases(directory) if case.cwd != directory)
    demo = FIXTURES / "demo_project"
    found.append(("demo", demo, sorted(demo.glob("*.py"))))
    return found


PROJECTS = _projects()


def _by_file(root: Path, paths: list[Path], cache: Path) -> dict[str, list]:
    """Findings by file (the facts from ``cache``: the findings are never stored, ``analyse``'s ``reuse``)."""
    result = analyse([str(path) for path in paths], Run(project_root=root, cache_dir=cache))
    found: dict[str, list] = {}
    for diagnostic in result.diagnostics:
        found.setdefault(diagnostic.path, []).append(diagnostic)
    return found


@pytest.mark.parametrize("name,root,files", PROJECTS, ids=[p[0] for p in PROJECTS])
def test_a_files_findings_do_not_depend_on_the_order_of_checks(name: str, root: Path, files: list[Path],
                                                               tmp_path: Path) -> None:
    together = _by_file(root, files, tmp_path)
    assert _by_file(root, files[::-1], tmp_path) == together
    for path in files:
        alone = _by_file(root, [path], tmp_path)
        assert alone.get(str(path), []) == together.get(str(path), []), path


def test_the_cycle_across_classes_is_found_whichever_file_is_checked_first(tmp_path: Path) -> None:
    """The case itself, with its expectations: every ``resize`` computes (``Probe``'s runs its backbone)."""
    project = FIXTURES / "fwd001" / "cycle_across_classes"
    blocks, probe = project / "vision" / "blocks.py", project / "vision" / "probe.py"
    expected = ["Block.resize", "Stage.resize", "Network.resize"]
    for order in ([blocks], [blocks, probe], [probe, blocks]):
        found = _by_file(project, order, tmp_path / str(len(order)) / order[0].name)
        assert [d.symbol for d in found[str(blocks)]] == expected, order
