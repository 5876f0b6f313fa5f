"""``pytest --fwd-guard``: run the test suite with every DDP, FSDP1, FSDP2 and Fabric wrapper
guarded, so an unmarked forward entry fails the test that runs it.

Registered through the ``pytest11`` entry point. Without ``--fwd-guard`` nothing happens: this
module imports only pytest, and neither ``runtime_shim`` nor torch is imported by it.

* ``--fwd-guard`` (``--fwd-guard=error``): ``runtime_shim.install("error")`` when the session is
  configured. A method that runs a guarded model's forward computation outside the wrapper's
  forward raises ``UnmarkedEntryError`` in the test that calls it. A test that expects the error
  (``pytest.raises``) passes and is not listed. A bare ``--fwd-guard`` never takes the next
  argument as its mode (``pytest --fwd-guard tests`` runs ``tests``): the mode is only given with ``=``.
* ``--fwd-guard=warn``: ``install("warn")``: the tests run as they would, each unmarked entry
  warns once.

* ``--fwd-record PATH``: record every forward entry the tests run (``runtime_shim.recorder``,
  format ``lint_rules.run_record``) into a new record at ``PATH``: unmarked ones with the test that
  first ran them, marked ones to confirm their marks. Alone it guards in mode ``record``: the tests
  run unchanged. With ``--fwd-guard`` the guard's mode applies and the record is kept as well.
  ``fwdlint --from-record PATH`` then reports, fixes and counts what the tests found.

The terminal summary lists each offending ``Class.method`` once, with the first test that hit it.
Under pytest-xdist each worker guards its own process and hands what it saw to the controller
with the test report (``user_properties``), so the summary is the same with ``-n``; every worker
merges its entries into the one record.

Processes a test starts through ``multiprocessing`` (``torch.multiprocessing.spawn`` ranks) are
guarded and recorded too (``runtime_shim.spawned``): an unmarked entry there fails the rank, and so
the test, and the summary names it from the rank's error. Programs started anew (``torchrun``)
get ``FWD_SHIM_MODE`` and ``FWD_RECORD`` and are guarded if they import ``runtime_shim.auto``.
"""

from __future__ import annotations

import os
import re
from typing import Any, Optional

import pytest

from lint_rules.contract import GUARD_SUMMARY_ADVICE, counted, entry_of_message

MODES = ("error", "warn")  # --fwd-guard=MODE; a bare --fwd-guard is error
_PROPERTY = "fwd_unmarked_entry"  # user_properties key: "Class.method"
#: an UnmarkedEntryError as a spawned rank's traceback text names it (torch's ProcessRaisedException)
_IN_TRACEBACK = re.compile(r"UnmarkedEntryError: (\S+)")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("fwdlint", "fwdlint: the forward-entry contract at run time")
    # A bare --fwd-guard never takes the next argument (``pytest --fwd-guard tests``: tests is the
    # path to run): the mode is only ever given with "=". argparse looks a whole argument up among
    # the option strings before it splits it at "=", so "--fwd-guard=warn" is an option string of its own.
    group.addoption("--fwd-guard", "--fwd-guard=error", dest="fwd_guard", action="store_const", const="error",
                    default=None,
                    help="guard every DDP, FSDP and Fabric wrapper the tests create: an unmarked forward entry "
                         "fails its test; the summary lists each one")
    group.addoption("--fwd-guard=warn", dest="fwd_guard", action="store_const", const="warn",
                    help="the same guard, but each unmarked forward entry warns once and the tests run as they "
                         "would")
    group.addoption("--fwd-record", metavar="PATH", default=None,
                    help="record every forward entry the tests run into a new record at PATH (the tests run "
                         "unchanged unless --fwd-guard is given too); then: fwdlint --from-record PATH")


def pytest_configure(config: pytest.Config) -> None:
    mode = config.getoption("fwd_guard", None)
    record = config.getoption("fwd_record", None)
    if mode:
        _refuse_a_separate_mode(config)
    if mode or record:
        worker = hasattr(config, "workerinput")
        if record and not worker:
            _start_record(os.path.abspath(record))
        config.pluginmanager.register(Guard(mode or "record", record, worker), "fwdlint-guard")


def _refuse_a_separate_mode(config: pytest.Config) -> None:
    """``pytest --fwd-guard warn``: the mode is given with "=", so ``warn`` is a path here; unless
    there is such a file, say how to spell it instead of "file or directory not found: warn"."""
    for arg in config.args:
        if arg in MODES and not os.path.exists(os.path.join(config.invocation_params.dir, arg)):
            raise pytest.UsageError(f"--fwd-guard takes its mode after '=': --fwd-guard={arg} "
                                    f"('{arg}' is not a file or directory to test)")


def _start_record(path: str) -> None:
    """A new, empty record for this session: never over a file that is not a record. A ``path``
    that is a symlink stays one: its target is the record (``run_record.merge`` writes through),
    so the target is what starts anew, never the link (which would leave the target stale)."""
    from lint_rules.run_record import RecordError, load

    target = os.path.realpath(path)
    if os.path.islink(target):  # a loop (realpath gives up on it): nothing to write through to
        raise pytest.UsageError(f"--fwd-record {path}: a symlink loop; not replacing it")
    if os.path.exists(target):
        try:
            load(target)
        except RecordError as exc:
            raise pytest.UsageError(f"--fwd-record: {exc}; not replacing it") from None
        os.unlink(target)
    if not os.path.isdir(os.path.dirname(target)):
        raise pytest.UsageError(f"--fwd-record {path}: no such directory"
                                + (f" (it is a link to {target})" if target != path else ""))


class Guard:
    def __init__(self, mode: str, record: Optional[str], worker: bool) -> None:
        from runtime_shim import recorder, spawned
        from runtime_shim.installer import install

        self.record = os.path.abspath(record) if record else None
        if self.record:
            recorder.start(self.record)
        install(mode, single_device=True)  # a suite on one device must find what fails under DDP
        spawned.follow(mode, self.record)
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

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        from runtime_shim import recorder

        recorder.stop()  # this process's entries are in the record before the controller reads it

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.worker:
            return
        hits = dict(self.hits)
        recorded = self._recorded(hits)
        if hits:
            terminalreporter.section(f"fwdlint: unmarked forward entries (--fwd-guard={self.mode})"
                                     if self.mode != "record" else "fwdlint: unmarked forward entries")
            for entry, nodeid in sorted(hits.items()):
                terminalreporter.line(f"{entry}  first run by {nodeid}" if nodeid else entry)
            terminalreporter.line(GUARD_SUMMARY_ADVICE)
        if recorded:
            terminalreporter.line(recorded)

    def _recorded(self, hits: dict[str, str]) -> str:
        """Adds the record's unmarked entries to ``hits``; the line that says what was recorded."""
        from lint_rules.run_record import RecordError, load

        if not self.record:
            return ""
        try:
            entries = load(self.record) if os.path.exists(self.record) else []
        except RecordError as exc:
            return f"fwdlint: {exc}"
        for entry in entries:
            if not entry.marked:
                hits.setdefault(f"{entry.cls.rpartition('.')[2]}.{entry.method}", entry.test)
        unmarked = sum(not e.marked for e in entries)
        recorded = counted(len(entries), "forward entry", "forward entries")
        return (f"fwdlint: recorded {recorded} ({unmarked} unmarked, {len(entries) - unmarked} marked) in "
                f"{self.record}; report them with: fwdlint --from-record {self.record}")

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        from runtime_shim import spawned, uninstall

        spawned.unfollow()
        uninstall()


def _unmarked_entry(error: Optional[BaseException]) -> str:
    """The ``Class.method`` of an ``UnmarkedEntryError`` that failed a test, also when another
    exception wraps it (its cause or context)."""
    from runtime_shim.errors import UnmarkedEntryError

    seen = 0
    while error is not None and seen < 16:
        if isinstance(error, UnmarkedEntryError):
            return entry_of_message(str(error))
        spawned = _IN_TRACEBACK.search(str(error))  # a spawned rank's, as text
        if spawned:
            return spawned.group(1)
        error, seen = error.__cause__ or error.__context__, seen + 1
    return ""
