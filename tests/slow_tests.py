"""Which tests are slow: `python3 dev.py test --fast` is `pytest -m "not slow"`; tests/conftest.py
marks the tests named here. Said once, here, rather than by marks spread over the files."""

from __future__ import annotations

from typing import Optional

# Slow: starts torch processes, makes real environments, runs pre-commit, sweeps many inputs or
# waits for a timeout. Keys are node-id prefixes relative to tests/. A sweep keeps one case
# (SAMPLES) in the fast run, so its code path is still exercised there.
SLOW: dict[str, str] = {
    "runtime/": "torch imports and 2-rank gloo processes",
    "test_environment_real.py": "real environments made by venv, virtualenv and uv",
    "test_precommit.py": "pre-commit builds its hook environments",
    "test_target_version.py": "virtual environments of other Python versions",
    "test_fuzz.py": "hypothesis sweeps of generated programs",
    "test_isolation.py": "parser crashes, memory limits and timeouts",
    "test_fix_property.py": "fixes every property case and runs the results under torch",
    "test_fix_call_flake8.py": "fixes every fixture and runs flake8 over the results",
    "test_fix_call.py": "call-style fixes of many projects",
    "test_fix_patch_forward.py": "patch_forward fixes, run under torch",
    "test_fix_import_order.py": "fixes checked with isort, ruff, git apply and patch",
    "test_fix_pairs.py::test_fix_pair[": "every before/after pair of every fixer",
    "test_fix_edits.py::test_json_edits_give_what_fix_writes[": "every fixer's pair through the JSON edits",
    "test_fix.py::test_diff_applies_to_non_ascii_context[": "encodings through git apply and patch",
    "test_fix.py::test_fix_cli_exit_statuses": "many fix runs",
    "test_fix.py::test_parallel_fix_is_byte_identical": "a -j sweep",
    "test_writes_stay_inside.py": "links out of the project, diffs through git apply and patch",
    "test_store.py::test_concurrent_runs_share_the_cache_safely": "concurrent runs",
    "test_store_hygiene.py": "the cache under links, damage, concurrent versions and 500 edits",
    "test_hostile.py": "pathological files, FIFOs, unreadable directories",
    "test_environment.py": "virtual environments holding packages",
    "test_wrapped_calls_real_packages.py": "installs transformers, peft and accelerate into an environment",
    "test_vocabulary.py": "imports torch and lightning to read their names",
    "test_store.py::test_damaged_cache_is_rebuilt[": "every kind of damage",
    "test_hostile_inputs.py": "hostile files, some huge, and unreadable ones",
    "test_config_fuzz.py": "hostile values for every configuration key and file kind (issue 36)",
    "test_pathological_files.py": "a set of pathological files checked at -j 2 (issue 36)",
    "test_fix_bounded.py::test_a_fix_that_needs_more_memory": "LibCST parses 40,000 lines under a memory limit",
    "test_paths.py::test_exclude_patterns_match_the_printed_paths[": "every pattern form",
    "test_paths.py::test_a_root_far_above_gives_a_bounded_view": "a project root above 5,000 files",
    "test_output_formats.py::test_sarif_of_every_rule_fixture_is_valid[": "every rule's fixtures as SARIF",
    "test_fast_subset.py::test_every_slow_entry_names_collected_tests": "collects the whole suite, torch modules too",
}
SAMPLES = {
    "test_fix_pairs.py::test_fix_pair[FWD001-basic]",
    "test_fix_pairs.py::test_fix_pair[FWD301-basic]",
    "test_fix_edits.py::test_json_edits_give_what_fix_writes[FWD001-basic]",
    "test_fix_edits.py::test_json_edits_give_what_fix_writes[FWD001-call_style]",
    "test_fix_edits.py::test_json_edits_give_what_fix_writes[FWD002-vendored_library]",
    "test_fix_edits.py::test_json_edits_give_what_fix_writes[FWD004-at_set_up]",
    "test_fix_edits.py::test_json_edits_give_what_fix_writes[FWD301-basic]",
    "test_fix_call.py::test_call_style_pair",
    "test_store.py::test_damaged_cache_is_rebuilt[garbage]",
    "test_paths.py::test_exclude_patterns_match_the_printed_paths[sub/-left5]",
    "test_output_formats.py::test_sarif_of_every_rule_fixture_is_valid[fwd001]",
}
FAST_ONLY = "not slow"  # the marker expression of dev.py test --fast


def slow_reason(nodeid: str) -> Optional[str]:
    """Why the test with this node id (relative to tests/) is slow, or None."""
    if nodeid in SAMPLES:
        return None
    return next((reason for prefix, reason in SLOW.items() if nodeid.startswith(prefix)), None)
