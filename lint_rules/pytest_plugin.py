"""``pytest --fwd-guard``: run the test suite with every DDP, FSDP1, FSDP2 and Fabric wrapper
guarded, so an unmarked forward entry fails the test that runs it.

Registered through the ``pytest11`` entry point. Without ``--fwd-guard`` nothing happens: this
module imports only pytest, and neither ``runtime_shim`` nor torch is imported by it.

* ``--fwd-guard`` (``--fwd-guard=error``): ``runtime_shim.install("error")`` when the session is
  configured. A method that runs a guarded model's forward computation outside the wrapper's
  forward raises ``UnmarkedEntryError`` in the test that calls it. A test that expects the error
  (``pytest.raises``) passes and is not listed.
* ``--fwd-guard=warn``: ``install("warn")``: the tests run as they would, each unmarked entry
  warns once.

The terminal summary lists each offending ``Class.method`` once, with the first test that hit it.
Under pytest-xdist each worker guards its own process and hands what it saw to the controller
with the test report (``user_properties``), so the summary is the same with ``-n``.

Only the pytest processes are guarded: ranks that a test starts as processes of their own
(``torch.multiprocessing.spawn``) are not.
"""

from __future__ import annotations

from typing import Any, Optional

import pytest

from lint_rules.contract import entry_of_message

_PROPERTY = "fwd_unmarked_entry"  # user_properties key: "Class.method"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("fwdlint", "fwdlint: the forward-entry contract at run time")
    group.addoption("--fwd-guard", nargs="?", const="error", default=None, choices=("error", "warn"),
                    metavar="error|warn",
                    help="guard every DDP, FSDP and Fabric wrapper the tests create: an unmarked forward entry "
                         "fails its test (error, the default) or warns (warn); the summary lists each one")


def pytest_configure(config: pytest.Config) -> None:
    mode = config.getoption("fwd_guard", None)
    if mode:
        config.pluginmanager.register(Guard(mode, worker=hasattr(config, "workerinput")), "fwdlint-guard")


class Guard:
    def __init__(self, mode: str, worker: bool) -> None:
        from runtime_shim.installer import install

        install(mode)
        self.mode = mode
        self.worker = worker  # an xdist worker: its controller prints the summary
        self.hits: dict[str, str] = {}  # "Class.method" -> the first test that ran it

    def _hit(self, entry: str, nodeid: str) -> None:
        self.hits.setdefault(entry, nodeid)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[Any]) -> Any:
        outcome = yield
        entry = _unmarked_entry(call.excinfo.value if call.excinfo is not None else None)
        if entry:
            outcome.get_result().user_properties.append((_PROPERTY, entry))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        for key, value in report.user_properties:
            if key == _PROPERTY:
                self._hit(value, report.nodeid)

    def pytest_warning_recorded(self, warning_message: Any, when: str, nodeid: str, location: Any) -> None:
        from runtime_shim.errors import UnmarkedEntryWarning

        if issubclass(warning_message.category, UnmarkedEntryWarning):
            self._hit(entry_of_message(str(warning_message.message)), nodeid)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.worker or not self.hits:
            return
        terminalreporter.section(f"fwdlint: unmarked forward entries (--fwd-guard={self.mode})")
        for entry, nodeid in sorted(self.hits.items()):
            terminalreporter.line(f"{entry}  first run by {nodeid}")
        terminalreporter.line("mark each with @forward_entry from runtime_shim, or register it after the set-up "
                              "(fwdlint --explain FWD001)")

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        from runtime_shim import uninstall

        uninstall()


def _unmarked_entry(error: Optional[BaseException]) -> str:
    """The ``Class.method`` of an ``UnmarkedEntryError`` that failed a test, also when another
    exception wraps it (its cause or context)."""
    from runtime_shim.errors import UnmarkedEntryError

    seen = 0
    while error is not None and seen < 16:
        if isinstance(error, UnmarkedEntryError):
            return entry_of_message(str(error))
        error, seen = error.__cause__ or error.__context__, seen + 1
    return ""
