"""Generate a directory of pathological Python files for the crash sweeps (issue 21).

Usage (from the repository root; OUTDIR outside the repository, e.g. under /tmp)::

    .venv/bin/python benchmarks/pathological.py OUTDIR [--scale N] [--timeout 60]

Writes ``OUTDIR/pyproject.toml`` (OUTDIR is its own project root), one directory per family and
``OUTDIR/MANIFEST.tsv``: per file its path relative to OUTDIR, family, kind, size parameter, bytes
and what the interpreter running this script says of it: ``compile(data, path, "exec",
ast.PyCF_ONLY_AST)`` in a fresh subprocess per file (compile itself may crash or hang), one of
``ok``, ``syntax``, ``encoding``, ``memory``, ``recursion``, ``crash`` (killed by a signal) or
``timeout``, with a one-line reason. ``benchmarks/sweep.py --dir NAME=PATH`` reads this verdict
for the files under PATH. Deterministic: no randomness, same bytes for the same arguments.

Families (most constructs twice: in ``forward`` and ``generate`` of an ``nn.Module`` subclass,
``generate`` calling ``self(x)`` so that the rules really analyse it, ``*_method.py``; and at
module level, ``*_module.py``):

* ``nesting/``: parentheses, lists, dicts, tuples, sets, calls ``f(f(...))``, subscripts
  ``x[x[...]]``, lambdas, comprehensions, unary ``-``/``~``/``not``, awaits-free conditional
  expressions, f-strings (quote kinds and format specs), at 10 .. 100,000 (the tokenizer's 200
  paren levels and the parser's limits are crossed on purpose: 199/200/201); indented blocks
  ``def``/``class``/``if``/``for``/``while``/``with``/``try``/``match`` at 10 .. 1,000 levels (one
  space per level; CPython's limit is 100: 99/100/101).
* ``chains/``: ``and``, ``or``, ``+``, ``*``, ``**``, ``|``, comparisons, attributes, method calls,
  calls ``f()()``, subscripts, adjacent string literals, ``elif``, conditional expressions,
  comprehension ``for`` clauses, tuple unpacking targets, assignment targets ``a = a = ...``,
  stacked decorators, base classes, keyword arguments, ``;`` statements on one line, methods in one
  class, classes in one file, imports: 10 .. 100,000 (x scale).
* ``literals/``: 1 MB and 10 MB (x scale) single-line str and bytes, raw and triple-quoted
  multi-line strings, escapes, ints of 4,300/4,301/100,000 decimal digits (CPython's int max str
  digits limit applies to decimal literals) and hex ints, floats, lists/tuples/dicts/sets of
  100,000 and 1,000,000 (x scale) constants, and one file of many small statements (5 MB x scale;
  ``--scale 10`` for the 50 MB file).
* ``bytes/``: NUL bytes (middle, end, in a string, in a comment), lone CR, CRLF, mixed line ends,
  form feeds, vertical tab, U+2028/U+0085/U+000C inside strings and comments (line breaks for
  ``str.splitlines`` but not for Python), BOM with/without cookie, BOM with a non-UTF-8 cookie,
  invalid UTF-8, UTF-8-encoded surrogates, overlong encodings, no trailing newline (after a block,
  a comment, a backslash), an empty file, only a BOM, only a comment, only blank lines, tabs/spaces
  mixes, Ctrl-Z, unterminated strings and brackets.
* ``encodings/``: one file per codec name Python knows (``encodings.aliases`` keys and values and
  the modules of the ``encodings`` package, deduplicated: 445 names on 3.11) declaring ``# -*-
  coding: NAME -*-``, holding non-ASCII text (a string, a comment and an identifier) encoded with it
  where the codec can; the same file with a cookie that lies (UTF-8 or cp1252 bytes); unknown names;
  cookie forms (``coding=``, vim, line 2 after a shebang, line 3 (ignored), two cookies).

Measured at ``--scale 1`` (Python 3.11.7, this 2-core machine, shared): 1,850 files, 206 MiB
(nesting 442 files/34 MiB, chains 344/80, literals 64/87, bytes 75/2, encodings 925/0.4),
generation 2 s, verdicts (one subprocess each) 80 s. CPython refuses 793 of them (syntax 504,
encoding 224, memory 28 -- the parser's "too deep" MemoryError --, recursion 37). Each step of
``--scale`` adds ~100 MiB (the 10 MB literals, the 1,000,000-element list, the 5 MB file).
"""

from __future__ import annotations

import argparse
import codecs
import encodings
import encodings.aliases
import pkgutil
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Optional

HEADER = "import torch.nn as nn\n\n\n"
# The construct in both methods: forward is analysed as the model's computation, generate as an
# entry that reaches it (self(x): FWD001 when the construct leaves the method analysable).
METHOD = ("class Net(nn.Module):\n    def forward(self, x):\n{forward}        return x\n\n"
          "    def generate(self, x):\n{body}        return self(x)\n")
ONCE = 100_000  # bytes of construct from which it goes in generate only (keeps the corpus small)
EXPR_SIZES = (10, 100, 199, 200, 201, 1_000, 10_000, 100_000)
BLOCK_SIZES = (10, 50, 99, 100, 101, 200, 1_000)
CHAIN_SIZES = (10, 100, 1_000, 10_000, 100_000)
MB = 1 << 20

# Decides in a fresh interpreter: compile may recurse, allocate or hang.
VERDICT = r"""
import ast, sys
path = sys.argv[1]
with open(path, "rb") as fh:
    data = fh.read()
def line(exc):
    text = (str(exc).splitlines() or [""])[0][:200]
    return f"{type(exc).__name__}: {text}".replace("\t", " ")
try:
    compile(data, path, "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
except MemoryError as exc:
    print("memory\t" + line(exc))
except RecursionError as exc:
    print("recursion\t" + line(exc))
except (UnicodeError, LookupError) as exc:
    print("encoding\t" + line(exc))
except SyntaxError as exc:
    encoding = any(w in str(exc) for w in ("encoding", "codec", "unicode error"))
    print(("encoding" if encoding else "syntax") + "\t" + line(exc) + f" (line {exc.lineno})")
except ValueError as exc:  # NUL bytes on 3.11
    print("syntax\t" + line(exc))
else:
    print("ok\t")
"""


@dataclass
class Generated:
    name: str  # relative to OUTDIR
    family: str
    kind: str
    size: str
    data: bytes


def in_method(body_lines: list[str]) -> str:
    """``body_lines`` (indented 8 spaces) in generate of an nn.Module subclass, and in forward
    too unless they are large."""
    body = "".join(f"        {line}\n" for line in body_lines)
    return HEADER + METHOD.format(forward=body if len(body) < ONCE else "", body=body)


def both(family: str, kind: str, n: int, expr: str) -> Iterator[Generated]:
    """One expression as ``y = EXPR`` in the methods and at module level."""
    yield Generated(f"{family}/{kind}_{n}_method.py", family, kind, str(n), in_method([f"y = {expr}"]).encode())
    yield Generated(f"{family}/{kind}_{n}_module.py", family, kind, str(n), f"{HEADER}y = {expr}\n".encode())


def blocks(family: str, kind: str, n: int, lines: list[str]) -> Iterator[Generated]:
    """Statement lines (own relative indentation) in the methods and at module level."""
    yield Generated(f"{family}/{kind}_{n}_method.py", family, kind, str(n), in_method(lines).encode())
    yield Generated(f"{family}/{kind}_{n}_module.py", family, kind, str(n), (HEADER + "".join(
        line + "\n" for line in lines)).encode())


# --- nesting ----------------------------------------------------------------------------------

def wrap(n: int, left: str, core: str, right: str) -> str:
    return left * n + core + right * n


NEST_EXPR: dict[str, Callable[[int], str]] = {
    "paren": lambda n: wrap(n, "(", "x", ")"),
    "list": lambda n: wrap(n, "[", "x", "]"),
    "tuple": lambda n: wrap(n, "(", "x", ",)"),
    "set": lambda n: wrap(n, "{", "x", "}"),
    "dict": lambda n: wrap(n, "{1: ", "x", "}"),
    "call": lambda n: wrap(n, "f(", "x", ")"),
    "subscript": lambda n: wrap(n, "x[", "0", "]"),
    "lambda": lambda n: "lambda: " * n + "x",
    "comprehension": lambda n: wrap(n, "[", "x", " for x in x]"),
    "ifexp": lambda n: "x if x else " * n + "x",  # right-nested conditional expressions
    "unary_minus": lambda n: "- " * n + "x",
    "unary_invert": lambda n: "~" * n + "x",
    "not": lambda n: "not " * n + "x",
    "await_free_genexp": lambda n: wrap(n, "sum(", "x", " for x in x)"),
    "starred": lambda n: wrap(n, "[*", "x", "]"),
    "walrus": lambda n: wrap(n, "(y := ", "x", ")"),
}

FSTRING_QUOTES = ("'", '"', "'''", '"""')


def fstring(n: int, same_quote: bool) -> str:
    """f-strings nested n deep: quote kinds in turn (valid to 4 on 3.11), or one quote kind
    (valid from 3.12 only)."""
    out = "x"
    for level in range(n):
        quote = '"' if same_quote else FSTRING_QUOTES[level % 4]
        out = f"f{quote}{{{out}}}{quote}"
    return out


def format_spec(n: int) -> str:
    return 'f"{x:' + "{x:" * n + ">10" + "}" * n + '}"'


def block_nest(kind: str, n: int) -> list[str]:
    """n nested blocks, one space per level (deep files stay small)."""
    heads = {
        "def": "def f{i}():", "class": "class C{i}:", "if": "if x:", "for": "for i{i} in x:",
        "while": "while x:", "with": "with x as w{i}:", "try": "try:", "async_def": "async def f{i}():",
        "match": "match x:",
    }
    lines = []
    depth = 0
    for i in range(n):
        if kind == "match":  # match x: / case 1: both indent
            lines.append(" " * depth + "match x:")
            lines.append(" " * (depth + 1) + "case 1:")
            depth += 2
            continue
        lines.append(" " * depth + heads[kind].format(i=i))
        depth += 1
    lines.append(" " * depth + "y = x")
    if kind == "try":  # every try needs its handler, innermost first
        for i in reversed(range(n)):
            lines.append(" " * i + "except Exception:")
            lines.append(" " * (i + 1) + "pass")
    return lines


def nesting(scale: int) -> Iterator[Generated]:
    sizes = (*EXPR_SIZES[:-1], EXPR_SIZES[-1] * scale)
    for kind, make in NEST_EXPR.items():
        for n in sizes:
            yield from both("nesting", kind, n, make(n))
    for n in (1, 2, 3, 4, 5, 10, 100, 1_000):
        yield from both("nesting", "fstring_quotes", n, fstring(n, False))
        yield from both("nesting", "fstring_same_quote", n, fstring(n, True))
        yield from both("nesting", "fstring_format_spec", n, format_spec(n))
    for kind in ("def", "class", "if", "for", "while", "with", "try", "async_def", "match"):
        for n in BLOCK_SIZES:
            yield from blocks("nesting", f"block_{kind}", n, block_nest(kind, n))
    # deep blocks with 4 spaces each: the indentation of real code (long lines as well)
    for n in (99, 100, 101):
        lines = [" " * 4 * i + "if x:" for i in range(n)] + [" " * 4 * n + "y = x"]
        yield from blocks("nesting", "block_if_4spaces", n, lines)
    # a nested def chain that returns up: every level a closure over the one above
    for n in (10, 99, 100):
        lines = [" " * i + f"def g{i}(a{i}=x):" for i in range(n)] + [" " * n + "return " + " + ".join(
            f"a{i}" for i in range(n))]
        yield from blocks("nesting", "closures", n, lines)


# --- chains -----------------------------------------------------------------------------------

CHAIN_EXPR: dict[str, Callable[[int], str]] = {
    "and": lambda n: " and ".join(["x"] * n),
    "or": lambda n: " or ".join(["x"] * n),
    "plus": lambda n: " + ".join(["x"] * n),
    "mul": lambda n: " * ".join(["x"] * n),
    "pow": lambda n: " ** ".join(["x"] * n),  # right-associative
    "bitor": lambda n: " | ".join(["x"] * n),
    "compare": lambda n: " < ".join(["x"] * n),
    "attribute": lambda n: "x" + ".a" * n,
    "self_attribute": lambda n: "self" + ".a" * n,
    "method_call": lambda n: "x" + ".f()" * n,
    "self_method_call": lambda n: "self" + ".forward(x)" * n,
    "call": lambda n: "f" + "()" * n,
    "subscript": lambda n: "x" + "[0]" * n,
    "string_concat": lambda n: " ".join(['"s"'] * n),
    "fstring_concat": lambda n: " ".join(['f"{x}"'] * n),
    "ifexp_left": lambda n: "(" * (n - 1) + "x if x else x" + ") if x else x" * (n - 1),
    "comprehension_fors": lambda n: "[x " + " ".join(f"for x{i} in x" for i in range(n)) + "]",
    "comprehension_ifs": lambda n: "[x for x in x " + "if x " * n + "]",
    "kwargs": lambda n: "f(" + ", ".join(f"k{i}={i}" for i in range(n)) + ")",
    "args": lambda n: "self(" + ", ".join(["x"] * n) + ")",
    "lambda_params": lambda n: "lambda " + ", ".join(f"p{i}" for i in range(n)) + ": x",
}


def chain_blocks(kind: str, n: int) -> list[str]:
    if kind == "elif":
        return ["if x:", " y = 0"] + [line for i in range(n) for line in (f"elif x == {i}:", f" y = {i}")]
    if kind == "decorators":
        return [f"@d{i}" for i in range(n)] + ["def g(a):", " return a"]
    if kind == "bases":
        return ["class B(" + ", ".join(f"B{i}" for i in range(n)) + "):", " pass"]
    if kind == "semicolons":
        return ["; ".join(f"y{i} = x" for i in range(n))]
    if kind == "assign_targets":
        return [" = ".join(["y"] * n) + " = x"]
    if kind == "unpack_targets":
        return [", ".join(f"y{i}" for i in range(n)) + " = x"]
    if kind == "augmented":
        return ["y = x"] + ["y += x"] * n
    if kind == "imports":
        return ["import " + ", ".join(f"m{i}" for i in range(n))]
    if kind == "global_names":
        return ["def g():", " global " + ", ".join(f"v{i}" for i in range(n)), " return x"]
    if kind == "with_items":
        return ["with " + ", ".join(f"x as w{i}" for i in range(n)) + ":", " pass"]
    if kind == "except_clauses":
        return ["try:", " pass"] + [line for i in range(n) for line in (f"except E{i}:", " pass")]
    if kind == "match_cases":
        return ["match x:"] + [line for i in range(n) for line in (f" case {i}:", "  y = x")]
    raise ValueError(kind)


CHAIN_BLOCKS = ("elif", "decorators", "bases", "semicolons", "assign_targets", "unpack_targets", "augmented",
                "imports", "global_names", "with_items", "except_clauses", "match_cases")


def many_methods(n: int) -> bytes:
    methods = "".join(f"\n    def m{i}(self, x):\n        return self(x)\n" for i in range(n))
    return (HEADER + "class Net(nn.Module):\n    def forward(self, x):\n        return x\n" + methods).encode()


def many_classes(n: int) -> bytes:
    one = ("class Net{i}(nn.Module):\n    def forward(self, x):\n        return x\n\n"
           "    def generate(self, x):\n        return self(x)\n\n\n")
    return (HEADER + "".join(one.format(i=i) for i in range(n))).encode()


def subclass_chain(n: int) -> bytes:
    """Each class derives from the previous: the module bases are resolved through n levels."""
    lines = [HEADER, "class Net0(nn.Module):\n    def forward(self, x):\n        return x\n\n\n"]
    lines += [f"class Net{i}(Net{i - 1}):\n    def m{i}(self, x):\n        return self(x)\n\n\n" for i in range(1, n)]
    return "".join(lines).encode()


def chains(scale: int) -> Iterator[Generated]:
    sizes = (*CHAIN_SIZES[:-1], CHAIN_SIZES[-1] * scale)
    for kind, make in CHAIN_EXPR.items():
        for n in sizes:
            yield from both("chains", kind, n, make(n))
    for kind in CHAIN_BLOCKS:
        for n in sizes:
            yield from blocks("chains", kind, n, chain_blocks(kind, n))
    for n in sizes:
        yield Generated(f"chains/methods_{n}.py", "chains", "methods", str(n), many_methods(n))
        yield Generated(f"chains/subclasses_{n}.py", "chains", "subclasses", str(n), subclass_chain(n))
    for n in sorted({*sizes[:-1], 10_000 * scale}):  # ~150 bytes each
        yield Generated(f"chains/classes_{n}.py", "chains", "classes", str(n), many_classes(n))


# --- huge literals ------------------------------------------------------------------------------

def many_statements(size: int) -> bytes:
    """Small statements, all in methods of module classes, up to ``size`` bytes."""
    parts, total, i = [HEADER], len(HEADER), 0
    while total < size:
        chunk = (f"class Net{i}(nn.Module):\n    def forward(self, x):\n"
                 + "".join(f"        y{j} = x + {j}\n" for j in range(100))
                 + "        return x\n\n    def generate(self, x):\n        return self(x)\n\n\n")
        parts.append(chunk)
        total += len(chunk)
        i += 1
    return "".join(parts).encode()


def literals(scale: int) -> Iterator[Generated]:
    fam = "literals"
    for mb in (1, 10 * scale):
        n = mb * MB
        yield from both(fam, "str", n, '"' + "a" * n + '"')
        yield from both(fam, "bytes", n, 'b"' + "a" * n + '"')
    for n in (MB,):
        yield from both(fam, "str_escapes", n, '"' + "\\x41" * (n // 4) + '"')
        yield from both(fam, "str_nonascii", n, '"' + "é" * (n // 2) + '"')
        yield from both(fam, "fstring", n, 'f"' + "a" * n + '{x}"')
        yield from both(fam, "triple_quoted_lines", n, '"""' + "a\n" * (n // 2) + '"""')
        yield from both(fam, "comment", n, "x  # " + "c" * n)
        yield from both(fam, "identifier", n, "x" * n)
    for digits in (4_300, 4_301, 100_000, 1_000_000 * scale):
        yield from both(fam, "int_decimal", digits, "1" * digits)
        yield from both(fam, "int_hex", digits, "0x" + "f" * digits)
        yield from both(fam, "float", digits, "1" * digits + ".5")
        yield from both(fam, "int_underscored", digits, "_".join(["1"] * digits))
    n = 1_000_000 * scale  # ~7 MB x scale, module level only
    yield Generated(f"{fam}/list_{n}_module.py", fam, "list", str(n),
                    f"{HEADER}y = [{', '.join(str(i) for i in range(n))}]\n".encode())
    for n in (100_000,):
        yield from both(fam, "list", n, "[" + ", ".join(str(i) for i in range(n)) + "]")
        yield from both(fam, "tuple", n, "(" + ", ".join(str(i) for i in range(n)) + ")")
        yield from both(fam, "set", n, "{" + ", ".join(str(i) for i in range(n)) + "}")
        yield from both(fam, "dict", n, "{" + ", ".join(f"{i}: {i}" for i in range(n)) + "}")
        yield from both(fam, "list_of_str", n, "[" + ", ".join(f'"s{i}"' for i in range(n)) + "]")
    size = 5 * MB * scale
    yield Generated(f"{fam}/many_statements_{size}.py", fam, "many_statements", str(size), many_statements(size))


# --- bytes ------------------------------------------------------------------------------------

VALID = in_method(["y = x"]).encode()


def bytes_family() -> Iterator[Generated]:
    def g(name: str, data: bytes) -> Generated:
        return Generated(f"bytes/{name}.py", "bytes", name, "", data)

    half = VALID.index(b"class")
    yield g("empty", b"")
    yield g("only_newline", b"\n")
    yield g("only_blank_lines", b"\n\n   \n\t\n")
    yield g("only_comment", b"# only a comment\n")
    yield g("only_comment_no_newline", b"# only a comment")
    yield g("only_bom", codecs.BOM_UTF8)
    yield g("only_cookie", b"# -*- coding: latin-1 -*-\n")
    yield g("only_backslash", b"\\")
    yield g("only_formfeed", b"\x0c")
    yield g("nul_middle", VALID[:half] + b"\x00" + VALID[half:])
    yield g("nul_end", VALID + b"\x00")
    yield g("nul_in_string", VALID.replace(b"y = x", b'y = "a\x00b"'))
    yield g("nul_in_comment", VALID.replace(b"y = x", b"y = x  # a\x00b"))
    yield g("nul_only", b"\x00")
    yield g("lone_cr", VALID.replace(b"\n", b"\r"))
    yield g("crlf", VALID.replace(b"\n", b"\r\n"))
    lines = VALID.split(b"\n")
    ends = (b"\n", b"\r\n", b"\r")
    yield g("mixed_line_ends", b"".join(line + ends[i % 3] for i, line in enumerate(lines)))
    yield g("cr_then_lf_blank", VALID.replace(b"\n\n", b"\r\r\n\n"))
    yield g("formfeed_line_start", VALID.replace(b"\n    def", b"\n\x0c    def"))
    yield g("formfeed_in_indent", VALID.replace(b"        y = x", b"    \x0c    y = x"))
    yield g("formfeed_mid_line", VALID.replace(b"y = x", b"y = \x0cx"))
    yield g("vertical_tab", VALID.replace(b"y = x", b"y = \x0bx"))
    for cp, label in ((0x2028, "u2028"), (0x2029, "u2029"), (0x85, "nel"), (0x1C, "fs"), (0x0C, "ff")):
        ch = chr(cp).encode()
        yield g(f"{label}_in_string", VALID.replace(b"y = x", b'y = "a' + ch + b'b"'))
        yield g(f"{label}_in_comment", VALID.replace(b"y = x", b"y = x  # a" + ch + b"b"))
        docstring = b'    def forward(self, x):\n        """a' + ch + b'b"""\n'
        yield g(f"{label}_in_docstring", VALID.replace(b"    def forward(self, x):\n", docstring))
    yield g("bom", codecs.BOM_UTF8 + VALID)
    yield g("bom_utf8_cookie", codecs.BOM_UTF8 + b"# -*- coding: utf-8 -*-\n" + VALID)
    yield g("bom_latin1_cookie", codecs.BOM_UTF8 + b"# -*- coding: latin-1 -*-\n" + VALID)
    yield g("bom_unknown_cookie", codecs.BOM_UTF8 + b"# -*- coding: nonexistent -*-\n" + VALID)
    yield g("bom_twice", codecs.BOM_UTF8 * 2 + VALID)
    yield g("bom_utf16", codecs.BOM_UTF16_LE + VALID)
    yield g("bom_crlf", codecs.BOM_UTF8 + VALID.replace(b"\n", b"\r\n"))
    yield g("invalid_utf8_string", VALID.replace(b"y = x", b'y = "\xff\xfe"'))
    yield g("invalid_utf8_comment", VALID.replace(b"y = x", b"y = x  # \xff"))
    yield g("invalid_utf8_identifier", VALID.replace(b"y = x", b"y\xff = x"))
    yield g("invalid_utf8_truncated_end", VALID + b"# \xe2\x82")
    yield g("surrogate_utf8_string", VALID.replace(b"y = x", b'y = "\xed\xa0\x80"'))
    yield g("surrogate_utf8_comment", VALID.replace(b"y = x", b"y = x  # \xed\xb0\x80"))
    yield g("surrogate_escape_string", VALID.replace(b"y = x", b'y = "\\ud800"'))
    yield g("overlong_utf8", VALID.replace(b"y = x", b'y = "\xc0\xaf"'))
    yield g("latin1_no_cookie", VALID.replace(b"y = x", b'y = "caf\xe9"'))
    yield g("nonascii_identifier", VALID.replace(b"y = x", "café = x; ŷ = café".encode()))
    yield g("nfkc_identifier", VALID.replace(b"y = x", "ﬁ = x; y = fi".encode()))
    yield g("no_trailing_newline", VALID.rstrip(b"\n"))
    yield g("no_trailing_newline_comment", VALID + b"# end")
    yield g("no_trailing_newline_indented_comment", VALID + b"        # end")
    yield g("no_trailing_newline_backslash", VALID + b"y = x \\")
    yield g("trailing_backslash_newline", VALID + b"\\\n")
    yield g("trailing_whitespace_no_newline", VALID + b"    ")
    yield g("trailing_crlf_only", VALID.rstrip(b"\n") + b"\r\n")
    yield g("tabs_then_spaces", VALID.replace(b"        return self(x)", b"\t\treturn self(x)"))
    yield g("tab_space_mix_ambiguous", VALID.replace(b"        y = x\n        return x", b"\ty = x\n        return x"))
    yield g("ctrl_z", VALID + b"\x1a")
    yield g("ctrl_z_middle", VALID[:half] + b"\x1a\n" + VALID[half:])
    yield g("escape_char", VALID.replace(b"y = x", b"y = x  # \x1b[31m"))
    yield g("unterminated_string", VALID.replace(b"y = x", b'y = "abc'))
    yield g("unterminated_triple", VALID.replace(b"y = x", b'y = """abc'))
    yield g("unclosed_bracket", VALID.replace(b"y = x", b"y = (x"))
    yield g("unopened_bracket", VALID.replace(b"y = x", b"y = x)"))
    yield g("dedent_mismatch", VALID.replace(b"        return x", b"      return x"))
    yield g("very_long_line", VALID.replace(b"y = x", b"y = x" + b" " * MB + b"+ x"))
    yield g("many_blank_lines", VALID.replace(b"\n\n", b"\n" * 200_000))
    yield g("many_continuations", VALID.replace(b"y = x", b"y = x" + b" \\\n+ x" * 10_000))


# --- encodings --------------------------------------------------------------------------------

SAMPLE = "éüñßøЖжαβ€中日한ş"  # one of each script; each codec gets the ones it can encode


def codec_names() -> list[str]:
    names = set(encodings.aliases.aliases) | set(encodings.aliases.aliases.values())
    names |= {m.name for m in pkgutil.iter_modules(encodings.__path__) if m.name != "aliases"}
    return sorted(names)


def encodable(name: str) -> str:
    out = ""
    for ch in SAMPLE:
        try:
            if ch.encode(name).decode(name) == ch:
                out += ch
        except Exception:  # any codec error: LookupError, non-text codecs, stateful ones
            pass
    return out


def encoded_file(name: str, text: str) -> str:
    ident = next((c for c in text if c.isidentifier()), "")
    body = [f'y = "{text}"  # {text}'] + ([f"v{ident} = y"] if ident else [])
    return f"# -*- coding: {name} -*-\n" + in_method(body)


def safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", name)[:80]


def encodings_family() -> Iterator[Generated]:
    fam = "encodings"
    seen: set[str] = set()
    for name in codec_names():
        base = safe(name)
        while base in seen:
            base += "_"
        seen.add(base)
        text = encodable(name)
        source = encoded_file(name, text)
        try:
            data = source.encode(name)
        except Exception:  # not a text codec, unknown here, or refuses the cookie line
            data = encoded_file(name, "").encode("ascii")
        yield Generated(f"{fam}/enc_{base}.py", fam, "declared", name, data)
        lie_text = "é€"
        lie = encoded_file(name, lie_text).encode("utf-8")
        if lie == data:  # a UTF-8 family codec: lie with cp1252 bytes instead
            lie = encoded_file(name, lie_text).encode("cp1252")
        yield Generated(f"{fam}/lie_{base}.py", fam, "lying", name, lie)
    unknown = ("nonexistent", "utf-9", "utf_8_bogus", "latin-1.", "_", "-", ".", "x" * 300, "UTF-8-SIG",
               "Utf8", "LATIN-1", "utf8mb4", "ucs-2", "unicode", "binary", "ascii8", "cp65001", "mbcs", "oem")
    for i, name in enumerate(unknown):
        data = encoded_file(name, "").encode("ascii")
        yield Generated(f"{fam}/unknown_{i:02d}_{safe(name)[:20]}.py", fam, "unknown", name, data)
    body = in_method(['y = "é"']).encode("latin-1")
    forms = {
        "coding_equals": b"# coding=latin-1\n",
        "vim": b"# vim: set fileencoding=latin-1 :\n",
        "emacs_no_dashes": b"# coding: latin-1\n",
        "shebang_line2": b"#!/usr/bin/env python\n# -*- coding: latin-1 -*-\n",
        "line3_ignored": b"#!/usr/bin/env python\n#\n# -*- coding: latin-1 -*-\n",
        "after_code_ignored": b"import os\n# -*- coding: latin-1 -*-\n",
        "two_cookies": b"# -*- coding: latin-1 -*-\n# -*- coding: utf-8 -*-\n",
        "blank_line1": b"\n# -*- coding: latin-1 -*-\n",
        "formfeed_line1": b"\x0c# -*- coding: latin-1 -*-\n",
        "cookie_crlf": b"# -*- coding: latin-1 -*-\r\n",
        "cookie_cr": b"# -*- coding: latin-1 -*-\r",
        "indented_cookie": b"    # -*- coding: latin-1 -*-\n",
        "cookie_in_docstring": b'"""\n# -*- coding: latin-1 -*-\n"""\n',
        "backslash_line1": b"\\\n# -*- coding: latin-1 -*-\n",
    }
    for label, head in forms.items():
        yield Generated(f"{fam}/form_{label}.py", fam, "cookie_form", label, head + body)
    utf16 = in_method(['y = "é"'])
    yield Generated(f"{fam}/form_utf16_bom_no_cookie.py", fam, "cookie_form", "utf16", utf16.encode("utf-16"))
    yield Generated(f"{fam}/form_utf32_cookie.py", fam, "cookie_form", "utf32",
                    ("# -*- coding: utf-32 -*-\n" + utf16).encode("utf-32"))


# --- driver -----------------------------------------------------------------------------------

FAMILIES = {"nesting": nesting, "chains": chains, "literals": literals,
            "bytes": lambda scale: bytes_family(), "encodings": lambda scale: encodings_family()}


def verdict(path: Path, timeout: float) -> tuple[str, str]:
    """CPython's word on one file, from a fresh interpreter of the one running this script."""
    try:
        proc = subprocess.run([sys.executable, "-I", "-S", "-c", VERDICT, str(path)], capture_output=True,
                              text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return "timeout", f"compile did not finish in {timeout:g} s"
    if proc.returncode < 0:
        return "crash", f"interpreter killed by signal {-proc.returncode}"
    if proc.returncode != 0 or "\t" not in proc.stdout:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        kind = "memory" if "MemoryError" in last else "recursion" if "RecursionError" in last else "crash"
        return kind, f"exit {proc.returncode}: {last[:200]}"
    kind, reason = proc.stdout.rstrip("\n").split("\t", 1)
    return kind, reason


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("outdir", type=Path)
    parser.add_argument("--scale", type=int, default=1, help="multiplies the largest sizes (default 1)")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per file for CPython's verdict")
    parser.add_argument("--families", default=",".join(FAMILIES), help="comma-separated subset")
    args = parser.parse_args(argv)
    out: Path = args.outdir
    out.mkdir(parents=True, exist_ok=True)
    (out / "pyproject.toml").write_text('[project]\nname = "pathological"\nversion = "0"\n')
    start = time.perf_counter()
    written: list[tuple[str, ...]] = []  # name, family, kind, size, bytes (the data is not kept)
    for family in args.families.split(","):
        (out / family).mkdir(exist_ok=True)
        for item in FAMILIES[family](args.scale):
            (out / item.name).write_bytes(item.data)
            written.append((item.name, item.family, item.kind, item.size, str(len(item.data))))
    generated = time.perf_counter() - start
    rows = ["name\tfamily\tkind\tsize\tbytes\tverdict\treason"]
    for row in written:
        kind, reason = verdict(out / row[0], args.timeout)
        rows.append("\t".join((*row, kind, reason)))
    (out / "MANIFEST.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    total = sum(int(row[4]) for row in written)
    print(f"{len(written)} files, {total / MB:.0f} MiB in {out}; generated in {generated:.0f} s, "
          f"verdicts in {time.perf_counter() - start - generated:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
