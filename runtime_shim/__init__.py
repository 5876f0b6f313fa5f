"""Runtime half of fwdlint: enforces the forward-entry contract under DDP, FSDP and Fabric.

Only the decorator lives here so far; it needs no torch. Importing it costs nothing, so model
code can be decorated before any enforcement is installed.
"""

from __future__ import annotations

from runtime_shim.marks import forward_entry

__all__ = ["forward_entry"]
