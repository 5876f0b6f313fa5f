"""Property-based test of ``--fix`` (decorator style): modules assembled from random
combinations of the patterns in ``fixtures/`` (computation kinds, decorators, comments, noqa,
nested classes, import styles, docstrings, ``__future__``, name clashes, CRLF, BOM, tabs).

For every generated file: the fixed source parses and compiles; removing the inserted lines
gives back the original bytes (except an existing ``from runtime_shim import`` that gains a
name); a second fix is a no-op; no FWD001 remains.
"""

from __future__ import annotations

import difflib
import itertools
import tempfile
from pathlib import Path

import libcst as cst
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lint_rules.fix import run as fix
from lint_rules.engine import Run, analyse
from lint_rules.fix.verify import BOM

# Method bodies from fixtures/fwd001 (computation_self.py, computation_submodules.py, ...):
# (body lines, whether FWD001 reports it when undecorated and not private-called).
COMPUTING = (
    ("return self(x)",),
    ("return self.forward(x)",),
    ("return super().forward(x)",),
    ("return self.enc(x)",),
    ("return self.enc.forward(x)",),
    ("return self.blocks[0](x)",),
    ("for blk in self.blocks:", "    x = blk(x)", "return x"),
    ("m = self.enc", "return m(x)"),
    ("return [h(x) for h in self.blocks]",),
)
QUIET = (
    ("return x",),
    ("self.enc.reset_parameters()",),
    ("return list(self.enc.parameters())",),
)
DECORATORS = ((), ("@torch.no_grad()",), ("@functools.lru_cache(maxsize=None)", "@torch.inference_mode()"))
SPECIAL = ("property", "staticmethod", "noqa", "comment_between", "comment_above", "trailing_comment")
HEADERS = (
    (),
    ('"""Docstring."""',),
    ("#!/usr/bin/env python", "# -*- coding: utf-8 -*-"),
    ("from __future__ import annotations",),
    ('"""Doc."""', "from __future__ import annotations"),
)
IMPORT_STYLES = (
    ("import torch.nn as nn",),
    ("from torch import nn",),
    ("import functools", "", "import torch", "from torch import nn"),
    ("import torch.nn as nn", "from runtime_shim import guard"),
    ("import torch.nn as nn", "from runtime_shim import (", "    guard,", ")"),
    ("import runtime_shim", "import torch.nn as nn"),
    ("import torch.nn as nn", "from runtime_shim import forward_entry"),
    ("import torch.nn as nn", "from mylib import forward_entry"),
)

method = st.tuples(
    st.sampled_from(COMPUTING + QUIET),
    st.sampled_from(DECORATORS),
    st.sampled_from(SPECIAL + ("",) * 4),
    st.booleans(),  # private name, called from another method
)
klass = st.tuples(st.lists(method, min_size=1, max_size=4), st.booleans())  # nested in an outer class


def _class(name: str, methods: list, indent: str, level: int) -> list[str]:
    pad = indent * level
    lines = [f"{pad}class {name}(nn.Module):"]
    inner = pad + indent
    lines += [f"{inner}def __init__(self):", f"{inner}{indent}super().__init__()",
              f"{inner}{indent}self.enc = nn.Linear(2, 2)",
              f"{inner}{indent}self.blocks = nn.ModuleList([nn.Linear(2, 2)])", ""]
    lines += [f"{inner}def forward(self, x):", f"{inner}{indent}return x", ""]
    for number, (body, decorators, special, private) in enumerate(methods):
        mname = f"_helper{number}" if private else f"method{number}"
        if special == "comment_above":
            lines.append(f"{inner}# a comment above the method")
        if special == "property":
            lines.append(f"{inner}@property")
        elif special == "staticmethod":
            lines.append(f"{inner}@staticmethod")
        for decorator in decorators:
            lines.append(f"{inner}{decorator}")
        if special == "comment_between":
            lines.append(f"{inner}# between decorators and def")
        params = "x" if special == "staticmethod" else "self, x"
        if special == "property":
            params = "self"
        tail = {"noqa": "  # noqa: FWD001", "trailing_comment": "  # keep me   "}.get(special, "")
        lines.append(f"{inner}def {mname}({params}):{tail}")
        if special == "property":
            lines.append(f"{inner}{indent}x = None")
        lines += [f"{inner}{indent}{line}" for line in body]
        lines.append("")
        if private:
            lines += [f"{inner}def use{number}(self, x):", f"{inner}{indent}return self.{mname}(x)", ""]
    return lines


@st.composite
def modules(draw) -> bytes:
    header = draw(st.sampled_from(HEADERS))
    imports = draw(st.sampled_from(IMPORT_STYLES))
    indent = draw(st.sampled_from(("    ", "\t", "  ")))
    classes = draw(st.lists(klass, min_size=1, max_size=3))
    lines = [*header, *imports, "import functools", "import torch", "", ""]
    if draw(st.booleans()):
        lines += ["CONSTANT = 1", ""]
    for number, (methods, nested) in enumerate(classes):
        if nested:
            lines.append(f"class Outer{number}:")
            lines += _class(f"Inner{number}", methods, indent, 1)
        else:
            lines += _class(f"Model{number}", methods, indent, 0)
        lines += ["", ""]
    newline = draw(st.sampled_from(("\n", "\r\n")))
    text = newline.join(lines).rstrip() + newline
    data = text.encode("utf-8")
    if draw(st.booleans()):
        data = b"\xef\xbb\xbf" + data
    return data


_counter = itertools.count()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(modules())
def test_fix_properties(source: bytes) -> None:
    cst.parse_module(source)  # the generator only makes valid modules
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"generated_{next(_counter)}.py"
        path.write_bytes(source)
        before = [d for d in analyse([str(path)], Run()).diagnostics if d.code == "FWD001"]
        run = fix.plan([str(path)], Run())
        assert run.errors == [] and run.unfixed == []
        fix.write(run)
        fixed = path.read_bytes()
        # parses, compiles
        cst.parse_module(fixed)
        compile(fixed, str(path), "exec", dont_inherit=True)
        # only whole lines inserted (plus one name in an existing runtime_shim import); the BOM
        # belongs to the file, not to its first line (a new import may become the first line)
        assert fixed.startswith(BOM) == source.startswith(BOM)
        old_lines = source.removeprefix(BOM).splitlines(keepends=True)
        new_lines = fixed.removeprefix(BOM).splitlines(keepends=True)
        inserted = []
        for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False).get_opcodes():
            if tag == "equal":
                continue
            if tag == "insert":
                inserted += [line.strip() for line in new_lines[j1:j2]]
            else:
                assert all(b"runtime_shim import" in line or line.strip() in (b"guard,", b")")
                           for line in old_lines[i1:i2]), (tag, old_lines[i1:i2], new_lines[j1:j2])
        decorators = [line for line in inserted if line.startswith(b"@")]
        assert len(decorators) == len(before)
        assert all(line.endswith(b"forward_entry") or line.startswith(b"from runtime_shim import")
                   or line in (b"forward_entry,", b"forward_entry as shim_forward_entry,") for line in inserted)
        # nothing left to report, second pass is a no-op
        assert [d for d in analyse([str(path)], Run()).diagnostics if d.code == "FWD001"] == []
        again = fix.plan([str(path)], Run())
        assert again.changed == [] and again.unfixed == [] and again.errors == []
