"""Writes ``codec_generated.py``: the functions that convert each facts record to and from its
JSON row, from the records' annotations (``facts/model.py``).

Every fact is a ``NamedTuple`` of ``facts/model.py`` whose fields are ``str``, ``int``, ``bool``,
other fact records and tuples of these. A record is stored as the list of its field values in
declaration order (positional rows keep the store small and decode about 3x faster than dicts).
The converters are written as plain Python source (as fast as written by hand) once, here, and
checked in: generating and compiling them at every start cost a run about 40 ms (issue 37).
``FORMAT``, a digest of every record's field names and types, changes by itself when a fact's
shape does: old rows are then ignored. After changing a record, run

    .venv/bin/python -m lint_rules.facts.codec_generator

(``tests/test_codec.py`` fails while the checked-in module differs from what this writes).
"""

from __future__ import annotations

import functools
import hashlib
import typing
from typing import Any

from lint_rules.facts import model
from lint_rules.facts.model import FileFacts

_PLAIN = (str, int, bool)


@functools.lru_cache(maxsize=None)
def _type(annotation: Any) -> Any:
    """A field's annotation (a string: ``model`` postpones them) as the type it names."""
    if not isinstance(annotation, str):
        return annotation
    return eval(annotation, vars(model))  # model's own annotations, never data


def _is_record(kind: Any) -> bool:
    return isinstance(kind, type) and issubclass(kind, tuple) and hasattr(kind, "_fields")


@functools.lru_cache(maxsize=None)
def _fields(record: type) -> list[tuple[str, Any]]:
    """(name, type) of each stored field; a file's path is not stored (the store knows it)."""
    found = []
    for name in record._fields:  # type: ignore[attr-defined]
        annotation = record.__annotations__[name]  # postponed: a ForwardRef, as NamedTuple keeps them
        if (record, name) != (FileFacts, "path"):
            found.append((name, _type(getattr(annotation, "__forward_arg__", annotation))))
    return found


def _items(kind: Any) -> tuple[Any, ...]:
    """The item types of a tuple type: ``(X, Ellipsis)`` for ``tuple[X, ...]``."""
    if typing.get_origin(kind) is not tuple:
        raise TypeError(f"no stored form for {kind!r}")
    return typing.get_args(kind)


def _plain(kind: Any) -> bool:
    """JSON holds it as it is (tuples become lists; ``bool`` needs no conversion when written)."""
    return kind in _PLAIN or (not _is_record(kind)
                              and all(_plain(a) for a in _items(kind) if a is not Ellipsis))


def _decoded(kind: Any, value: str, depth: int) -> str:
    """A Python expression that reads ``value`` (an expression) back as ``kind``."""
    if kind is bool:
        return f"bool({value})"
    if kind in _PLAIN:
        return value
    if _is_record(kind):
        return f"_read_{kind.__name__}({value})"
    items, name = _items(kind), f"v{depth}"
    if len(items) == 2 and items[1] is Ellipsis:
        if items[0] in (str, int):
            return f"tuple({value})"
        # most such lists are empty: no comprehension is started for them
        return f"(tuple([{_decoded(items[0], name, depth + 1)} for {name} in {value}]) if {value} else ())"
    if all(item in (str, int) for item in items):
        return f"tuple(_sized({value}, {len(items)}))"
    return f"(lambda {name}: ({''.join(_decoded(a, f'{name}[{i}]', depth + 1) + ', ' for i, a in enumerate(items))}))" \
           f"(_sized({value}, {len(items)}))"


def _encoded(kind: Any, value: str, depth: int) -> str:
    """A Python expression that gives ``value`` (an expression of type ``kind``) a JSON form."""
    if _plain(kind):
        return value
    if _is_record(kind):
        return f"_write_{kind.__name__}({value})"
    items, name = _items(kind), f"v{depth}"
    if len(items) == 2 and items[1] is Ellipsis:
        return f"[{_encoded(items[0], name, depth + 1)} for {name} in {value}]"
    parts = ", ".join(_encoded(a, f"{name}[{i}]", depth + 1) for i, a in enumerate(items))
    return f"(lambda {name}: [{parts}])({value})"


def _records(kind: Any, found: dict[str, type]) -> dict[str, type]:
    """Every record type reachable from ``kind``, by name."""
    if _is_record(kind):
        if kind.__name__ not in found:
            found[kind.__name__] = kind
            for _, field in _fields(kind):
                _records(field, found)
    elif kind not in _PLAIN:
        for item in _items(kind):
            if item is not Ellipsis:
                _records(item, found)
    return found


def _source(records: dict[str, type]) -> str:
    """The converters of ``records``, one argument or item per line."""
    lines: list[str] = []
    for name, record in records.items():
        fields = _fields(record)
        path = ["path"] if record is FileFacts else []
        read = [*path, *(_decoded(kind, f"row[{i}]", 0) for i, (_, kind) in enumerate(fields))]
        write = [_encoded(kind, f"record.{field}", 0) for field, kind in fields]
        lines += ["", "", f"def _read_{name}(row{', path' if path else ''}):",
                  f"    row = _sized(row, {len(fields)})",
                  f"    return _new({name}, (", *(f"        {item}," for item in read), "    ))",
                  "", "", f"def _write_{name}(record):",
                  "    return [", *(f"        {item}," for item in write), "    ]"]
    return "\n".join(line + "  # noqa: E501" if len(line) > 120 else line for line in lines) + "\n"


def _shape(kind: Any) -> str:
    """The stored form of a type, spelled out: what ``FORMAT`` digests."""
    if _is_record(kind):
        return f"{kind.__name__}({','.join(f'{name}:{_shape(field)}' for name, field in _fields(kind))})"
    if kind in _PLAIN:
        return kind.__name__
    return f"tuple[{','.join('...' if a is Ellipsis else _shape(a) for a in _items(kind))}]"


def _digest(record: type) -> str:
    return hashlib.blake2b(_shape(record).encode(), digest_size=6).hexdigest()


_HEADER = '''"""Generated by ``python -m lint_rules.facts.codec_generator`` from the records of
``facts/model.py``: never edited by hand (``tests/test_codec.py`` compares it with what the
generator writes). ``codec.py`` encodes and decodes with these functions."""

# A row of another version's shape, or not ours, is refused by ``_sized``.
'''


def module_text() -> str:
    """The text of ``codec_generated.py``."""
    records = _records(FileFacts, {})
    names = "".join(f"    {name},\n" for name in sorted(records))
    return (_HEADER + "\nfrom lint_rules.facts.model import (\n" + names + ")\n\n"
            + f'FORMAT = "{_digest(FileFacts)}"  # the digest of every record\'s shape\n\n\n'
            + "_new = tuple.__new__  # a record made without its __new__, a Python function: the same tuple\n\n\n"
            + "def _sized(row, size):\n"
            + "    if len(row) != size:  # another version's row, or not ours\n"
            + '        raise ValueError(f"a row of {len(row)} values where {size} are stored")\n'
            + "    return row\n" + _source(records))


if __name__ == "__main__":
    from pathlib import Path

    Path(__file__).with_name("codec_generated.py").write_text(module_text(), encoding="utf-8")
