"""Finding the unmarked entry method behind a bypassed module call (slow path only).

When module computation is reached with no wrapper forward active in this thread, the shim
walks the Python stack once: frames whose ``self`` belongs to the guarded tree are methods of
the model. The outermost of them that is not ``forward`` (or a dunder) is the entry point the
user called; if there is none the module was called directly by user code (``ddp.module(x)``,
e.g. rank-0 evaluation), which is allowed. This costs a stack walk only when a bypass happens,
never on a routed or plain forward.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from types import FrameType
from typing import Any, Optional

import torch

from lint_rules.contract import CALL_IMPL, NEVER_ENTRY, format_chain, is_dunder
from lint_rules.contract import GUARD_KEY

_SHIM_DIR = os.path.dirname(os.path.abspath(__file__))
#: Frames in torch itself (module call machinery, FSDP's register_fsdp_forward_method wrapper,
#: checkpoint) are never the user's entry point.
_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep


@dataclass(frozen=True)
class Entry:
    """The unmarked method a bypass came from, and how it reached the module."""

    module: Any
    method: str
    chain: str
    caller: Optional[FrameType] = None  # the frame that called the entry method (for the run record)


def _skipped(frame: FrameType) -> bool:
    filename = os.path.abspath(frame.f_code.co_filename)
    return filename.startswith(_TORCH_DIR) or os.path.dirname(filename) == _SHIM_DIR


def _frame_self(frame: FrameType) -> Any:
    code = frame.f_code
    if not code.co_argcount or code.co_varnames[0] != "self":
        return None
    return frame.f_locals.get("self")


def _call_text(caller: Any, callee: Any, names: dict[int, str], via_call: bool) -> str:
    if callee is caller:
        target = "self"
    else:
        caller_name = names.get(id(caller), "")
        callee_name = names.get(id(callee), "?")
        prefix = caller_name + "." if caller_name else ""
        rel = callee_name[len(prefix):] if callee_name.startswith(prefix) else callee_name
        target = "self" + "".join(f"[{part}]" if part.isdigit() else f".{part}" for part in rel.split("."))
    return f"{target}(...)" if via_call else f"{target}.forward(...)"


def find_entry(record: Any, callee: Any, names: dict[int, str]) -> Optional[Entry]:
    """Return the unmarked entry method that led to ``callee``'s forward, or None for a direct call."""
    frame: Optional[FrameType] = sys._getframe(1)
    via_call = False
    first_outside = True
    tree: list[tuple[Any, str, int, FrameType]] = []  # innermost first
    while frame is not None:
        if _skipped(frame):
            if frame.f_code.co_name in CALL_IMPL and first_outside:
                via_call = True
        else:
            first_outside = False
            owner = _frame_self(frame)
            if owner is not None and getattr(owner, "__dict__", {}).get(GUARD_KEY) is record:
                tree.append((owner, frame.f_code.co_name, frame.f_lineno, frame))
        frame = frame.f_back
    entry_index = -1
    for index, (_, name, _, _) in enumerate(tree):
        if name not in NEVER_ENTRY and not is_dunder(name):
            entry_index = index  # keep going: the outermost one is the entry point
    if entry_index < 0:
        return None
    owner, method, _, entry_frame = tree[entry_index]
    steps = [name for _, name, _, _ in reversed(tree[: entry_index + 1])]
    inner_owner, _, inner_line, _ = tree[0]
    steps.append(f"{_call_text(inner_owner, callee, names, via_call)} at line {inner_line}")
    return Entry(module=owner, method=method, chain=format_chain(steps), caller=entry_frame.f_back)


def user_class_name(module: Any) -> str:
    """The user's class name, looking through FSDP2's dynamic ``FSDP<Name>`` subclass."""
    return user_class(module).__name__


def user_class(module: Any) -> type:
    """The user's class, looking through FSDP2's dynamic ``FSDP<Name>`` subclass."""
    for cls in type(module).__mro__:
        mod = getattr(cls, "__module__", "") or ""
        if mod.startswith("torch.distributed") or cls.__dict__.get("_fwd_shim_dynamic", False):
            continue
        if cls.__name__.startswith("FSDP") and any(
            b.__name__ == "FSDPModule" for b in cls.__bases__
        ):
            continue
        return cls
    return type(module)
