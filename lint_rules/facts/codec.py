"""``FileFacts`` <-> JSON, for the facts store; how follows from the records' types.

A record is stored as the list of its field values in declaration order. The functions that
convert each record are generated from its annotations by ``codec_generator.py`` and checked in
(``codec_generated.py``), so a run compiles nothing when it starts; ``tests/test_codec.py`` fails
while they differ from what the generator writes (then run ``python -m
lint_rules.facts.codec_generator``). ``FORMAT``, a digest of every record's field names and types,
changes with a fact's shape: old rows are then ignored.

JSON, never pickle: a cache file must not be a way to run code.
"""

from __future__ import annotations

import json

from lint_rules.facts.codec_generated import FORMAT, _read_FileFacts as _READ, _write_FileFacts as _WRITE
from lint_rules.facts.model import FileFacts

__all__ = ["FORMAT", "decode", "encode"]


def encode(facts: FileFacts) -> str:
    """Everything but the path (the store is keyed by content; the caller knows the path)."""
    return json.dumps(_WRITE(facts), separators=(",", ":"))


def decode(text: str, path: str) -> FileFacts:
    """Raises ``ValueError`` (or ``TypeError``/``IndexError``) on anything that is not ours."""
    return _READ(json.loads(text), path)
