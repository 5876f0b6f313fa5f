"""Exception and warning types raised by the runtime shim (torch-free)."""

from __future__ import annotations


class UnmarkedEntryError(RuntimeError):
    """An unmarked method ran module computation on a guarded model, outside the wrapper's forward.

    Raised at the first module-forward boundary the method reaches, before that module computes.
    """


class UnmarkedEntryWarning(UserWarning):
    """``mode="warn"`` counterpart of :class:`UnmarkedEntryError`, issued once per method."""


class UnusedParametersError(RuntimeError):
    """A method routed through DDP's forward returned an output that does not reach some parameters
    DDP waits for in backward (``find_unused_parameters=False``); raised when backward starts."""


class MetaDeviceError(RuntimeError):
    """A guarded model was run while parameters or buffers were still on the meta device."""
