"""``import runtime_shim.auto``: ``install()`` with the mode from ``FWD_SHIM_MODE`` (``off``: no-op)."""

from __future__ import annotations

from lint_rules.contract import mode_from_env

MODE = mode_from_env()
if MODE != "off":
    from runtime_shim.installer import install

    install(MODE)
