"""``import runtime_shim.auto``: ``install()`` with the mode from ``FWD_SHIM_MODE``, recording the
entries the run uses into ``FWD_RECORD`` when it is set (``record`` needs it). The modes:

* ``error`` (the default): marked methods are routed through the wrapper's forward, an unmarked
  entry point raises ``UnmarkedEntryError`` before it computes;
* ``warn``: the same, with a warning once per method instead;
* ``record``: detects like ``warn``, silently, and records the entries into ``FWD_RECORD``;
* ``route``: marked methods are routed, nothing is detected (what ``import runtime_shim`` alone
  does);
* ``off``: nothing is installed."""

from __future__ import annotations

import os

from lint_rules.contract import MODE_ENV_VAR, RECORD_ENV_VAR, mode_from_env

MODE = mode_from_env()
if MODE == "record" and not os.environ.get(RECORD_ENV_VAR, "").strip():
    raise ValueError(f"{MODE_ENV_VAR}=record: set {RECORD_ENV_VAR}=PATH, the file to record the entries in")
if MODE != "off":
    from runtime_shim import recorder
    from runtime_shim.installer import install

    recorder.start_from_env()
    install(MODE)
