"""The forward-entry contract: the vocabulary shared by ``lint_rules`` and ``runtime_shim``.

Both halves import this module (it must stay torch-free and import nothing heavy), so the
linter and the runtime enforcement can never disagree on what a mark is called, which methods
are routed by default, or how a finding is worded.
"""

from __future__ import annotations

from typing import Iterable

#: Name of the decorator that marks a method as a forward entry point.
DECORATOR_NAME = "forward_entry"

#: Module that exports the decorator (what ``--fix`` imports from).
DECORATOR_MODULE = "runtime_shim"

#: Attribute the decorator sets on the function; the runtime reads it, the linter never needs it.
MARK_ATTRIBUTE = "__fwd_entry__"

#: Other decorator names that mean the same (Lightning's proposed ``@inference_entry``).
DEFAULT_MARK_DECORATORS: tuple[str, ...] = ("inference_entry",)

#: Calls that register a method by name at run time: ``obj.mark_forward_method("generate")``
#: (Lightning Fabric, and ours) and ``register_fsdp_forward_method(obj, "generate")`` (FSDP2).
MARK_METHOD_CALL = "mark_forward_method"
FSDP_REGISTER_CALL = "register_fsdp_forward_method"

#: Methods that Lightning routes through the strategy wrapper by itself.
LIGHTNING_STEP_METHODS: frozenset[str] = frozenset(
    {"training_step", "validation_step", "test_step", "predict_step"}
)

#: Never entry points: the forward itself and the call protocol.
NEVER_ENTRY: frozenset[str] = frozenset({"forward", "__call__", "_call_impl", "_wrapped_call_impl"})


def is_dunder(name: str) -> bool:
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


def format_chain(chain: Iterable[str]) -> str:
    """``["generate", "_sample", "self(...) at line 88"]`` -> ``generate -> _sample -> self(...) at line 88``."""
    return " -> ".join(chain)


def unmarked_entry_message(cls: str, method: str, chain: str) -> str:
    """FWD001's message text; the runtime's ``UnmarkedEntryError`` uses the same words."""
    return (
        f"{cls}.{method} runs the module's forward computation outside forward ({chain}) "
        f"but is not marked as a forward entry point; decorate it with @{DECORATOR_NAME} "
        f"or call model.{MARK_METHOD_CALL}('{method}') after fabric.setup()"
    )
