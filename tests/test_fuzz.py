"""Property-based fuzzing of fwdlint (issue 11): bounded, reproducible examples for CI.

Programs and properties live in ``fuzz_programs.py`` (``benchmarks/fuzz.py`` runs the same ones on
10,000+ programs). Every test is ``derandomize=True``: CI sees the same examples on every run, and
a failure prints the program (each file's bytes, one line per ``repr``) and the broken property.

* ``test_the_analyzer_never_raises``: generated, hypothesmith, hybrid and broken programs; no
  exception, a per-file error exactly for what Python cannot parse, the warm cache agrees.
* ``test_fix_*`` (both fix styles): plan + write raise nothing and report no error; the output
  parses and compiles, differs only by allowed lines, fixed findings are gone, none is added, and a
  second fix changes nothing.
* ``test_fixed_programs_import``: five fixed programs imported in one subprocess (torch loads
  once): the original imports, so the fixed ones must, with the fixed methods marked at run time.
* ``test_the_cli_agrees_with_the_api``: ``fwdlint --format json`` and ``fwdlint --fix`` through the
  command line, for two programs.
* ``test_the_generator_*``: the generator writes valid code and reaches every rule and both fixers
  (so the properties above cannot pass by testing nothing).

Measured on 2 cores: about 75 s for the whole file.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import fuzz_programs as fp
import pytest
from hypothesis import HealthCheck, Phase, given, settings

pytestmark = pytest.mark.timeout(600)

# No shrinking: one shrink step is a whole fwdlint run, and Hypothesis gave up after five minutes
# on the first failure it met. A failing program is printed as generated; benchmarks/fuzz.py
# --minimise-dir makes it small.
CI = settings(derandomize=True, deadline=None, database=None, print_blob=False,
              phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))


def _report(outcome: fp.Outcome) -> str:
    lines = [f"{f.prop}: {f.detail}" for f in outcome.failures]
    return "\n".join(lines) + "\n\nprogram:\n" + outcome.program.dump()


@settings(CI, max_examples=150)
@given(fp.programs())
def test_the_analyzer_never_raises(program: fp.Program) -> None:
    outcome = fp.Outcome(program)
    work = fp.fresh_workdir()
    try:
        paths = fp.write_program(program, work / "original")
        fp.check_analysis(outcome, paths, work / "original")
    finally:
        fp.discard(work)
    assert not outcome.failures, _report(outcome)


def _fix(program: fp.Program, style: str) -> fp.Outcome:
    work = fp.fresh_workdir()
    try:
        return fp.check_program(program, work, styles=(style,), analysis=False)
    finally:
        fp.discard(work)


@settings(CI, max_examples=50)
@given(fp.generated())
def test_fix_decorator_style(program: fp.Program) -> None:
    outcome = _fix(program, "decorator")
    assert not outcome.failures, _report(outcome)


@settings(CI, max_examples=50)
@given(fp.generated())
def test_fix_call_style(program: fp.Program) -> None:
    outcome = _fix(program, "call")
    assert not outcome.failures, _report(outcome)


def _collect(count: int, tries: int) -> list[tuple[fp.Outcome, Path]]:
    """The first ``count`` generated programs that something was fixed in (both styles), with
    their working directories (the caller discards them)."""
    found: list[tuple[fp.Outcome, Path]] = []

    @settings(CI, max_examples=tries)
    @given(fp.generated())
    def collect(program: fp.Program) -> None:
        if len(found) >= count or not program.executable:
            return
        work = fp.fresh_workdir()
        outcome = fp.check_program(program, work, analysis=False)
        if any(outcome.fixed.values()):
            found.append((outcome, work))
        else:
            fp.discard(work)

    collect()
    return found


def test_fixed_programs_import() -> None:
    found = _collect(5, 40)
    try:
        outcomes = [outcome for outcome, _ in found]
        assert len(outcomes) == 5
        fp.import_check(outcomes)
        imported = sum(o.file_errors["imports"] for o in outcomes)
        assert imported >= 3, [o.file_errors for o in outcomes]  # the check must have had something to check
        failures = [o for o in outcomes if any(f.prop.startswith("import") for f in o.failures)]
        assert not failures, "\n\n".join(_report(o) for o in failures)
    finally:
        for _, work in found:
            fp.discard(work)


def test_the_cli_agrees_with_the_api() -> None:
    found = _collect(2, 20)
    try:
        assert len(found) == 2
        for outcome, work in found:
            fp.cli_check(outcome, work)
        failures = [o for o, _ in found if any(f.prop.startswith("cli") for f in o.failures)]
        assert not failures, "\n\n".join(_report(o) for o in failures)
    finally:
        for _, work in found:
            fp.discard(work)


def test_the_generator_writes_valid_code_that_reaches_every_rule_and_fixer() -> None:
    findings: Counter = Counter()
    fixed: Counter = Counter()
    with_classes = []

    @settings(CI, max_examples=25)
    @given(fp.generated())
    def run(program: fp.Program) -> None:
        for name, data in program.files:
            assert fp.python_parses(data), f"the generator wrote invalid code in {name}:\n{program.dump()}"
        with_classes.append(program.module_classes > 0)
        work = fp.fresh_workdir()
        try:
            outcome = fp.check_program(program, work, styles=("decorator",))
        finally:
            fp.discard(work)
        findings.update(outcome.findings)
        fixed.update({code: n for (_, code), n in outcome.fixed.items()})

    run()
    assert sum(with_classes) >= 0.8 * len(with_classes), with_classes  # (some hold plain classes only)
    assert {"FWD001", "FWD002", "FWD003", "FWD101", "FWD201", "FWD301"} <= set(findings), findings
    assert {"FWD001", "FWD002", "FWD301"} <= set(fixed), fixed
