"""``python3 dev.py test --fast`` (``pytest -m "not slow"``): never empty, free of torch processes and
real environments, and still holding every rule's fixtures and examples, the CLI, configuration, the
flake8 plugin and the store. Which tests are slow is said once, in tests/conftest.py."""

from __future__ import annotations

import subprocess
import sys
from fixture_cases import ROOT, rule_fixture_dirs
from slow_tests import SAMPLES, SLOW

sys.path.insert(0, str(ROOT))
import dev  # noqa: E402  (dev.py sits at the root of the checkout)

ESSENTIAL = ["test_fixtures.py", "test_rules.py", "test_cli.py", "test_config.py", "test_flake8_plugin.py",
             "test_store.py", "test_output_formats.py", "test_fix.py"]


def _collected(*args: str, paths: tuple[str, ...] = ("tests",)) -> list[str]:
    """Node ids relative to tests/ that pytest collects with ``args``."""
    proc = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args,
                           *paths], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return [line.removeprefix("tests/") for line in proc.stdout.splitlines() if "::" in line]


def test_dev_fast_is_pytest_not_slow() -> None:
    parallel = ["-n", "auto"]
    assert dev.pytest_args(["--fast"]) == ["-m", "not slow", *parallel]
    assert dev.pytest_args(["--fast", "-x", "tests/test_cli.py"]) == ["-m", "not slow", *parallel, "-x",
                                                                      "tests/test_cli.py"]
    assert dev.pytest_args(["-x"]) == [*parallel, "-x"]  # the whole suite stays the default


def test_the_fast_subset_keeps_the_essentials_and_leaves_out_the_slow() -> None:
    fast = _collected(*dev.FAST)
    files = {nodeid.split("::")[0] for nodeid in fast}
    assert len(fast) >= 200 and set(ESSENTIAL) <= files, sorted(files)
    assert not any(nodeid.startswith(("runtime/", "test_environment_real.py", "test_precommit.py", "test_fuzz.py"))
                   for nodeid in fast)
    for test in ("test_cli", "test_flake8_agrees_with_cli"):  # every rule's fixture cases, both front ends
        cases = [nodeid for nodeid in fast if nodeid.startswith(f"test_fixtures.py::{test}[")]
        codes = {nodeid.split("[")[1].split("-")[0] for nodeid in cases}
        assert {d.name.upper() for d in rule_fixture_dirs()} <= codes, (test, codes)
    examples = [nodeid for nodeid in fast if nodeid.startswith("test_rules.py::test_example_through_cli_and_flake8[")]
    assert len(examples) >= 20
    assert set(SAMPLES) <= set(fast)


def test_every_slow_entry_names_collected_tests() -> None:
    """A renamed test must not silently leave the slow set (or a sample the fast one)."""
    everything = _collected()
    stale = [prefix for prefix in [*SLOW, *SAMPLES] if not any(nodeid.startswith(prefix) for nodeid in everything)]
    assert stale == []
