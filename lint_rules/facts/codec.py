"""``FileFacts`` <-> JSON, for the facts store; how follows from the records' types.

Every fact is a frozen dataclass of ``facts/model.py`` whose fields are ``str``, ``int``, ``bool``,
other fact records and tuples of these. A record is stored as the list of its field values in
declaration order (positional rows keep the store small and decode about 3x faster than dicts).
The functions that convert each record are written from its annotations when this module is
imported (as plain Python source, compiled once: as fast as written by hand), so a new fact (a
record type, a field of ``FileFacts``) needs no code here. ``FORMAT``, a digest of every record's
field names and types, changes by itself when a fact's shape does: old rows are then ignored.

JSON, never pickle: a cache file must not be a way to run code.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import typing
from typing import Any

from lint_rules.facts import model
from lint_rules.facts.model import FileFacts

_PLAIN = (str, int, bool)


@functools.lru_cache(maxsize=None)
def _type(annotation: str) -> Any:
    """A field's annotation (a string: ``model`` postpones them) as the type it names."""
    return eval(annotation, vars(model))  # model's own annotations, never data


@functools.lru_cache(maxsize=None)
def _fields(record: type) -> list[tuple[str, Any]]:
    """(name, type) of each stored field; a file's path is not stored (the store knows it)."""
    return [(f.name, _type(f.type) if isinstance(f.type, str) else f.type)
            for f in dataclasses.fields(record) if (record, f.name) != (FileFacts, "path")]


def _items(kind: Any) -> tuple[Any, ...]:
    """The item types of a tuple type: ``(X, Ellipsis)`` for ``tuple[X, ...]``."""
    if typing.get_origin(kind) is not tuple:
        raise TypeError(f"no stored form for {kind!r}")
    return typing.get_args(kind)


def _plain(kind: Any) -> bool:
    """JSON holds it as it is (tuples become lists; ``bool`` needs no conversion when written)."""
    return kind in _PLAIN or (not dataclasses.is_dataclass(kind)
                              and all(_plain(a) for a in _items(kind) if a is not Ellipsis))


def _decoded(kind: Any, value: str, depth: int) -> str:
    """A Python expression that reads ``value`` (an expression) back as ``kind``."""
    if kind is bool:
        return f"bool({value})"
    if kind in _PLAIN:
        return value
    if dataclasses.is_dataclass(kind):
        return f"_read_{kind.__name__}({value})"
    items, name = _items(kind), f"v{depth}"
    if len(items) == 2 and items[1] is Ellipsis:
        if items[0] in (str, int):
            return f"tuple({value})"
        return f"tuple([{_decoded(items[0], name, depth + 1)} for {name} in {value}])"
    return f"(lambda {name}: ({''.join(_decoded(a, f'{name}[{i}]', depth + 1) + ', ' for i, a in enumerate(items))}))" \
           f"(_sized({value}, {len(items)}))"


def _encoded(kind: Any, value: str, depth: int) -> str:
    """A Python expression that gives ``value`` (an expression of type ``kind``) a JSON form."""
    if _plain(kind):
        return value
    if dataclasses.is_dataclass(kind):
        return f"_write_{kind.__name__}({value})"
    items, name = _items(kind), f"v{depth}"
    if len(items) == 2 and items[1] is Ellipsis:
        return f"[{_encoded(items[0], name, depth + 1)} for {name} in {value}]"
    parts = ", ".join(_encoded(a, f"{name}[{i}]", depth + 1) for i, a in enumerate(items))
    return f"(lambda {name}: [{parts}])({value})"


def _records(kind: Any, found: dict[str, type]) -> dict[str, type]:
    """Every record type reachable from ``kind``, by name."""
    if dataclasses.is_dataclass(kind):
        if kind.__name__ not in found:
            found[kind.__name__] = kind
            for _, field in _fields(kind):
                _records(field, found)
    elif kind not in _PLAIN:
        for item in _items(kind):
            if item is not Ellipsis:
                _records(item, found)
    return found


def _sized(row: list[Any], size: int) -> list[Any]:
    if len(row) != size:  # another version's row, or not ours
        raise ValueError(f"a row of {len(row)} values where {size} are stored")
    return row


def _source(records: dict[str, type]) -> str:
    lines = []
    for name, record in records.items():
        fields = _fields(record)
        path = "path, " if record is FileFacts else ""
        read = ", ".join(_decoded(kind, f"row[{i}]", 0) for i, (_, kind) in enumerate(fields))
        write = ", ".join(_encoded(kind, f"record.{field}", 0) for field, kind in fields)
        lines += [f"def _read_{name}(row{', path' if path else ''}):",
                  f"    row = _sized(row, {len(fields)})",
                  f"    return {name}({path}{read})",
                  f"def _write_{name}(record):",
                  f"    return [{write}]"]
    return "\n".join(lines) + "\n"


def _shape(kind: Any) -> str:
    """The stored form of a type, spelled out: what ``FORMAT`` digests."""
    if dataclasses.is_dataclass(kind):
        return f"{kind.__name__}({','.join(f'{name}:{_shape(field)}' for name, field in _fields(kind))})"
    if kind in _PLAIN:
        return kind.__name__
    return f"tuple[{','.join('...' if a is Ellipsis else _shape(a) for a in _items(kind))}]"


_RECORDS = _records(FileFacts, {})
_NAMESPACE: dict[str, Any] = {**_RECORDS, "_sized": _sized}
exec(compile(_source(_RECORDS), "<facts codec>", "exec"), _NAMESPACE)  # our own types only, never data
_READ, _WRITE = _NAMESPACE["_read_FileFacts"], _NAMESPACE["_write_FileFacts"]


def _digest(record: type) -> str:
    return hashlib.blake2b(_shape(record).encode(), digest_size=6).hexdigest()


FORMAT = _digest(FileFacts)


def encode(facts: FileFacts) -> str:
    """Everything but the path (the store is keyed by content; the caller knows the path)."""
    return json.dumps(_WRITE(facts), separators=(",", ":"))


def decode(text: str, path: str) -> FileFacts:
    """Raises ``ValueError`` (or ``TypeError``/``IndexError``) on anything that is not ours."""
    return _READ(json.loads(text), path)
