"""A file's digest is taken from its stamp (``lint_rules/stamps.py``) only while the stamp is what
it was when the file was read and hashed: every change of its bytes gives another stamp, and a file
too young to trust is read again."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from lint_rules import stamps
from lint_rules.engine import Run, analyse
from lint_rules.store import FactsStore

MODEL = """import torch.nn as nn


class Net(nn.Module):
    def forward(self, x):
        return x

    def generate(self, x):
        return self(x)
"""


def _project(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "model.py").write_text(MODEL)
    return tmp_path


def _findings(path: Path, cache: bool = True) -> list[tuple[int, str]]:
    result = analyse([str(path)], Run(cache=cache), reuse=cache)
    return [(d.line, d.code) for d in result.diagnostics]


def _keys_without_reading(path: Path) -> list[object]:
    store = FactsStore(path.parent / ".fwdlint_cache")
    try:
        return store.read_keys([str(path)], locate=True)
    finally:
        store.close()


def test_a_settled_file_is_keyed_without_reading_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stamps, "SETTLED_NS", 0)
    model = _project(tmp_path) / "model.py"
    _findings(model)
    first = _keys_without_reading(model)

    def refused(self: Path) -> bytes:
        raise AssertionError(f"{self} read")

    monkeypatch.setattr(Path, "read_bytes", refused)
    assert _keys_without_reading(model) == first


def test_same_size_and_modification_time_with_other_bytes_is_read_again(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stamps, "SETTLED_NS", 0)
    model = _project(tmp_path) / "model.py"
    before = os.stat(model)
    assert _findings(model) == [(8, "FWD001")]
    model.write_text(MODEL.replace("def generate", "def gen_rate"))  # same size
    os.utime(model, ns=(before.st_atime_ns, before.st_mtime_ns))  # and the time put back: only ctime moved
    assert os.stat(model).st_size == before.st_size
    assert _findings(model) == _findings(model, cache=False) == [(8, "FWD001")]
    model.write_text(MODEL.replace("return self(x)", "return x + 1 "))
    os.utime(model, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert _findings(model) == _findings(model, cache=False) == []


def test_a_young_file_is_not_trusted_by_stamp(tmp_path: Path) -> None:
    model = _project(tmp_path) / "model.py"
    _findings(model)
    store = FactsStore(tmp_path / ".fwdlint_cache")
    try:
        assert store.cache is not None and str(model) not in store.cache.stamps()
    finally:
        store.close()
