"""The facts codec (``lint_rules/facts/codec.py``): how a record is stored follows from its type, so
every fixture's facts come back equal, a row that is not ours is refused, ``FORMAT`` changes by
itself when a record's shape does, and the checked-in converters are what the generator writes."""

from __future__ import annotations

from typing import NamedTuple

import pytest
from fixture_cases import FIXTURES

from lint_rules.facts import codec, codec_generated, codec_generator
from lint_rules.facts.extract import extract
from lint_rules.facts.model import FileFacts
from lint_rules.source import decode

SOURCES = sorted(p for p in FIXTURES.rglob("*.py") if "/fix/" not in p.as_posix())


def test_every_fixture_comes_back_equal() -> None:
    stored = 0
    for path in SOURCES:
        facts = extract(decode(path.read_bytes()), str(path), "pkg.mod")
        assert codec.decode(codec.encode(facts), str(path)) == facts, path
        stored += bool(facts.classes)
    assert stored > 50  # the fixtures hold classes, methods, uses, marks, set-ups, patches...


@pytest.mark.parametrize("text", ["[]", '{"a": 1}', "[1, 2]", "not json"])
def test_a_row_that_is_not_ours_is_refused(text: str) -> None:
    with pytest.raises((ValueError, TypeError, IndexError)):
        codec.decode(text, "x.py")


def test_a_row_of_another_shape_is_refused() -> None:
    facts = FileFacts("x.py", "m", (), (), ())
    assert codec.decode(codec.encode(facts), "x.py") == facts
    shorter = codec.encode(facts)[: -len(",true]")] + "]"  # the row of a FileFacts without its last field
    with pytest.raises(ValueError):
        codec.decode(shorter, "x.py")


class _Old(NamedTuple):
    name: str
    lines: tuple[int, ...]


class _New(NamedTuple):
    name: str
    lines: tuple[int, ...]
    generated: bool = False


def test_the_format_follows_the_shape() -> None:
    assert codec_generator._shape(_Old).replace("_Old", "X") != codec_generator._shape(_New).replace("_New", "X")
    assert codec.FORMAT == codec_generator._digest(FileFacts)


def test_the_checked_in_converters_are_what_the_generator_writes() -> None:
    """After changing a record of ``facts/model.py``: ``python -m lint_rules.facts.codec_generator``."""
    with open(codec_generated.__file__, encoding="utf-8") as handle:
        assert handle.read() == codec_generator.module_text()
