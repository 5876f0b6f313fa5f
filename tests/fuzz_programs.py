"""Random Python programs full of ``nn.Module`` classes, and the properties fwdlint must keep on
them (issue 11, "prove it at scale"). Imported by ``tests/test_fuzz.py`` (bounded, reproducible
CI examples) and ``benchmarks/fuzz.py`` (10,000+ programs).

Programs (``programs()``) come from four sources:

* ``generated``: module classes mixing every construct the analysis understands -- ``forward``;
  methods that call ``self(...)``, ``self.forward(...)``, ``super().forward(...)``, submodules
  (``self.enc(x)``, ``self.blocks[i](x)``, ``for b in self.blocks: b(x)``, ``self.heads["a"](x)``,
  aliases, checkpointing) and submodule methods (``self.enc.encode(x)``); chains of helpers with
  mutual recursion, private helpers, static/class methods, properties, generators, async methods,
  nested functions, lambdas and comprehensions; ``@forward_entry``/``@inference_entry`` in every
  import style, ``@torch.no_grad()`` and other decorators, comments between decorators;
  ``mark_forward_method``/``register_fsdp_forward_method`` registrations; ``fabric.setup``,
  ``DDP``, ``FSDP`` and ``fully_shard`` set-ups and calls on them, trainer classes;
  ``torch.compile`` (called inside ``torch.device("meta")``/``init_module`` blocks or not);
  ``with torch.device("meta"): self.x = Block()``, ``.to("meta")``, ``device="meta"``; instance
  forward patches in all spellings, class renames; ``# noqa`` variants; odd formatting (tabs, two- and
  eight-space indents, CRLF, CR and mixed line ends, semicolons, one-line defs, backslash
  continuations, comments between decorators, trailing whitespace, form feeds, U+2028/NEL in
  comments, BOM, utf-8/latin-1 encoding cookies, no final newline) and unicode identifiers,
  including NFKC-equivalent spellings (``ｆast`` is ``fast`` to Python);
* ``hypothesmith``: ``from_grammar()``/``from_node()`` programs (rarely a module class; they test
  that nothing raises on arbitrary valid code);
* ``hybrid``: a hypothesmith program with a generated model appended (fixes next to odd code);
* ``broken``: a generated program cut or spliced into invalid code (must be a clean per-file error).

Properties (``check_program``), each a named failure so the benchmark can count them:
the analyzer never raises and reports an error only for files Python cannot parse (or that only
LibCST rejects, counted apart); a warm facts cache gives the findings of a cold one, and so do
findings reused after a random edit of one file (``results``); for both fix
styles, ``plan`` + ``write`` raise nothing and report no error, and the fixed files parse (LibCST)
and compile (CPython), differ from the originals only by allowed inserted lines (decorators above
the reported ``def`` with its indentation, registrations after a set-up with its indentation,
imports), FWD301's ``patch_forward`` rewrite and one extended ``from runtime_shim import``, keep
the line ends, BOM and encoding; fixed findings are gone and none appears; a second fix changes
nothing. ``import_check`` imports the original and the fixed program in a subprocess: if the
original imports, the fixed one must, and every method the decorator style fixed must carry the
runtime mark. ``cli_check`` runs the ``fwdlint`` command and compares it with the in-process API.

Measured (2 cores, this machine): a generated program takes about 0.1-0.3 s through all
in-process properties (both fix styles), an import check about 2-4 s (torch, sometimes lightning).
"""

from __future__ import annotations

import ast
import atexit
import difflib
import io
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import tokenize
import unicodedata
import warnings
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Optional, Sequence

from hypothesis import strategies as st

# ----------------------------------------------------------------------------------------------
# Programs
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Program:
    """Python files (relative path -> bytes) and what the generator knows about them."""

    files: tuple[tuple[str, bytes], ...]
    origin: str  # "generated", "hypothesmith", "hybrid", "broken"
    module_classes: int  # nn.Module subclasses the generator wrote
    executable: bool = False  # ours, imports resolvable: safe to import (never hypothesmith code)
    given: tuple[str, ...] = ()  # the files handed to fwdlint (empty: every .py file); others it only reads

    def linted(self) -> list[tuple[str, bytes]]:
        return [(n, d) for n, d in self.files if (n in self.given if self.given else n.endswith(".py"))]

    def dump(self) -> str:
        """A readable rendering (for reports): each file's bytes as a Python literal per line."""
        parts = []
        for name, data in self.files:
            parts.append(f"# ---- {name} ({len(data)} bytes)")
            parts.extend(repr(line) for line in data.splitlines(keepends=True))
        return "\n".join(parts) + "\n"


MODEL_FILE = "fuzzmodel.py"
TRAIN_FILE = "fuzztrain.py"
# A vendored package: a project of its own (its setup.py marks it), so its classes are not ours
# and calls of their unmarked entry methods are FWD002 findings in the training file.
VENDOR_DIR = "third_party/vendored_lib"

# Class and method names: ASCII, non-ASCII, and NFKC-equivalent spellings. Python normalises
# identifiers with NFKC, so `ｆast` and `fast` are one name; `ﬁ` is `fi`.
CLASS_NAMES = ("Model", "Encoder", "Decoder", "Block", "GPT", "Head", "Tower", "Modèle", "Kodierer", "模型",
               "Ωmega", "Ｗide", "Net")
METHOD_NAMES = ("generate", "encode", "decode", "sample", "predict", "embed", "score", "infer", "rollout",
                "générer", "採樣", "ﬁlter_out", "ｓtep_once", "decode_all")
PRIVATE_NAMES = ("_run", "_helper", "_inner", "_core", "_ｐrivate", "_étape", "_loop")
SUB_NAMES = ("enc", "dec", "proj", "body", "编码器", "ｌayer", "trunk")
LIST_NAMES = ("blocks", "layers", "stack")
DICT_NAMES = ("heads", "branches")
NOQA_COMMENTS = ("  # noqa", "  # noqa: FWD001", "  # noqa:FWD001,E501", "  # NOQA: FWD", "  # noqa: E501",
                 "  # noqa : FWD001", "  #noqa", "  # noqa: FWD002")
ODD_COMMENTS = ("# plain comment", "# comment with U+2028 \u2028 inside", "# NEL \x85 here",
                "# form\x0cfeed", "# vertical\x0btab", "# file sep \x1c", "# é ü 模型", "#", "#: doc comment")


def nfkc(name: str) -> str:
    return unicodedata.normalize("NFKC", name)


@dataclass
class _Class:
    """A generated class, as later code sees it."""

    name: str
    is_module: bool
    methods: list[str] = field(default_factory=list)  # public instance methods
    all_methods: list[str] = field(default_factory=list)
    buildable: bool = True  # __init__ runs without compiling or failing
    lightning: bool = False


@dataclass
class _Module:
    """What a generated module needs: imports (by key), the names in use, classes so far."""

    nn: str = "nn"  # expression for torch.nn
    imports: dict[str, str] = field(default_factory=dict)
    mark_bound: bool = False  # the import binds mark_ref
    mark_ref: str = "forward_entry"
    classes: list[_Class] = field(default_factory=list)
    used: set[str] = field(default_factory=set)  # NFKC names taken by classes and functions
    executable: bool = True

    def need(self, key: str, line: str) -> None:
        self.imports.setdefault(key, line)

    def fresh(self, rng: random.Random, pool: Sequence[str], fallback: str) -> str:
        options = [n for n in pool if nfkc(n) not in self.used]
        name = rng.choice(options) if options else f"{fallback}{len(self.used)}"
        self.used.add(nfkc(name))
        return name


# A body is a list of (relative indent level, text). `x` is always bound.
Body = list[tuple[int, str]]


def _ref(rng: random.Random, name: str) -> str:
    """A reference to ``name``: usually as written, sometimes in its NFKC spelling (same name)."""
    if nfkc(name) != name and rng.randint(0, 3) == 0:
        return nfkc(name)
    return name


_SELF_CALLS = frozenset({"self_ = self(x)", "y = self(x)", "return self.forward(x)", "y = self.__call__(x)",
                         "nested", "comprehension", "if_self", "try_self", "with_no_grad", "walrus", "lambda",
                         "return super().forward(x)"})


def _statement(rng: random.Random, mod: _Module, subs: dict[str, str], helpers: list[str], cls: _Class,
               has_base_forward: bool, forward: bool = False) -> Body:
    """One statement (or small block) of a method body, computing or not."""
    module_subs = [a for a, k in subs.items() if k.startswith(("module", "linear", "compiled"))]
    lists = [a for a, k in subs.items() if k == "list"]
    dicts = [a for a, k in subs.items() if k == "dict"]
    choices = ["return x", "x = x + 1", "pass", "n = sum(p.numel() for p in self.parameters())",
               "self.call_count = getattr(self, 'call_count', 0) + 1", "self_ = self(x)", "y = self(x)",
               "return self.forward(x)", "y = self.__call__(x)", "nested", "lambda", "comprehension",
               "if_self", "try_self", "with_no_grad", "walrus"]
    if has_base_forward:
        choices.append("return super().forward(x)")
    if module_subs:
        choices += ["sub_call", "sub_forward", "sub_alias", "sub_method", "checkpoint", "sub_reset",
                    "conditional_alias"]
    if lists:
        choices += ["list_index", "list_loop", "list_range", "list_enumerate", "list_comprehension"]
    if dicts:
        choices += ["dict_call", "dict_items"]
    if helpers:
        choices += ["helper", "helper", "helper_kw", "helper_getattr"]
    if "fn" in subs:
        choices.append("plain_attr_call")
    choices.append("continuation")
    if forward:  # forward itself must not call itself
        choices = [c for c in choices if c not in _SELF_CALLS]
    kind = rng.choice(choices)
    sub = rng.choice(module_subs) if module_subs else "enc"
    lst = rng.choice(lists) if lists else "blocks"
    dct = rng.choice(dicts) if dicts else "heads"
    helper = rng.choice(helpers) if helpers else "_run"
    simple = {
        "self_ = self(x)": [(0, "self_ = self(x)")],
        "sub_call": [(0, f"x = self.{_ref(rng, sub)}(x)")],
        "sub_forward": [(0, f"x = self.{sub}.forward(x)")],
        "sub_alias": [(0, f"m = self.{sub}"), (0, "x = m(x)")],
        "conditional_alias": [(0, f"m = self.{sub} if x is not None else self"), (0, "x = m(x)")],
        "checkpoint": [(0, f"x = torch.utils.checkpoint.checkpoint(self.{sub}, x, use_reentrant=False)")],
        "sub_reset": [(0, f"self.{sub}.train(False)")],
        "list_index": [(0, f"x = self.{lst}[0](x)")],
        "list_loop": [(0, f"for b in self.{lst}:"), (1, "x = b(x)")],
        "list_range": [(0, f"for i in range(len(self.{lst})):"), (1, f"x = self.{lst}[i](x)")],
        "list_enumerate": [(0, f"for i, layer in enumerate(self.{lst}):"), (1, "x = layer(x) if i >= 0 else x")],
        "list_comprehension": [(0, f"outs = [b(x) for b in self.{lst}]")],
        "dict_call": [(0, f'x = self.{dct}["a"](x)')],
        "dict_items": [(0, f"for key, head in self.{dct}.items():"), (1, "x = head(x)")],
        "helper": [(0, f"x = self.{_ref(rng, helper)}(x)")],
        "helper_kw": [(0, f"x = self.{helper}(x=x)")],
        "helper_getattr": [(0, f"x = getattr(self, {helper!r})(x)")],
        "plain_attr_call": [(0, "x = self.fn(x)")],
        "nested": [(0, "def inner(y):"), (1, "return self(y)"), (0, "x = inner(x)")],
        "lambda": [(0, f"f = lambda y: self.{sub}(y)" if module_subs else "f = lambda y: self(y)"),
                   (0, "x = f(x)")],
        "comprehension": [(0, "outs = {k: self(v) for k, v in enumerate([x])}")],
        "if_self": [(0, "if x is None:"), (1, "return self.forward(x)"), (0, "else:"), (1, "x = x")],
        "try_self": [(0, "try:"), (1, "x = self(x)"), (0, "except Exception:"), (1, "raise"),
                     (0, "finally:"), (1, "pass")],
        "with_no_grad": [(0, "with torch.no_grad():"), (1, "x = self(x)")],
        "walrus": [(0, "if (y := self(x)) is not None:"), (1, "x = y")],
        "continuation": [(0, "x = x \\\n+ 0")],
    }
    if kind == "sub_method":
        target = subs[sub]
        owner = next((c for c in mod.classes if target == f"module:{c.name}"), None)
        method = rng.choice(owner.all_methods) if owner is not None and owner.all_methods else "encode"
        return [(0, f"x = self.{sub}.{method}(x)")]
    return simple.get(kind, [(0, kind)])


def _method_body(rng: random.Random, mod: _Module, subs: dict[str, str], helpers: list[str], cls: _Class,
                 has_base_forward: bool, forward: bool = False) -> Body:
    body: Body = []
    if rng.randint(0, 5) == 0:
        body.append((0, rng.choice(('"""Docstring."""', "'''Docstring with é.'''", 'r"""raw"""'))))
    for _ in range(rng.randint(1, 3)):
        body += _statement(rng, mod, subs, helpers, cls, has_base_forward, forward)
    if not body[-1][1].startswith("return") or body[-1][0] != 0:
        body.append((0, "return x"))
    return body


def _semicolons(rng: random.Random, body: Body) -> Body:
    """Join runs of simple top-level statements with '; ' (Python allows it; fixers must keep it)."""
    if rng.randint(0, 5) != 0:
        return body
    out: Body = []
    compound = re.compile(r"^(if|for|while|try|with|def|class|else|elif|except|finally|async|@|return|\"|'|r\")")
    for level, text in body:
        if (out and level == 0 and out[-1][0] == 0 and not compound.match(text)
                and not compound.match(out[-1][1]) and not out[-1][1].endswith(":")):
            out[-1] = (0, f"{out[-1][1]}; {text}")
        else:
            out.append((level, text))
    return out


def _module_class(rng: random.Random, mod: _Module, indent: str, lines: list[str], level: int) -> _Class:
    """Append one class (lines at ``level``) and return what later code may use of it."""
    nn = mod.nn
    name = mod.fresh(rng, CLASS_NAMES, "Cls")
    cls = _Class(name=name, is_module=True)
    pad = indent * level
    inner = pad + indent
    # bases: nn.Module in its spelling, an earlier module class, a mixin, or LightningModule
    earlier = [c for c in mod.classes if c.is_module]
    base_kind = rng.choice(["nn"] * 5 + ["earlier"] * 2 + ["mixin", "lightning"])
    has_base_forward = False
    base = f"{nn}.Module"
    mixin_lines: list[str] = []
    if base_kind == "earlier" and earlier:
        parent = rng.choice(earlier)
        base = _ref(rng, parent.name)
        has_base_forward = True
        cls.methods += parent.methods
        cls.buildable = parent.buildable
        cls.lightning = parent.lightning
    elif base_kind == "mixin":
        mixin = mod.fresh(rng, ("GenerationMixin", "SamplerMixin", "Mixé"), "Mixin")
        mixin_lines = [f"{pad}class {mixin}:", f"{inner}def mix_generate(self, x):", f"{inner}{indent}return self(x)",
                       "", ""]
        base = f"{mixin}, {nn}.Module"
        cls.methods.append("mix_generate")
    elif base_kind == "lightning":
        mod.need("lightning", rng.choice(("from lightning.pytorch import LightningModule",
                                          "import lightning.pytorch as pl")))
        base = "LightningModule" if "LightningModule" in mod.imports["lightning"] else "pl.LightningModule"
        cls.lightning = True
    lines += mixin_lines
    # submodules
    subs: dict[str, str] = {}
    init: Body = [(0, "super().__init__()")]
    buildable_subs = [c for c in mod.classes if c.is_module and c.buildable and not c.lightning]
    for _ in range(rng.randint(0, 3)):
        attr = rng.choice(SUB_NAMES + LIST_NAMES + DICT_NAMES + ("fn", "size", "tpl", "frozen", "c", "_tpl"))
        if attr in subs:
            continue
        if attr in LIST_NAMES:
            subs[attr] = "list"
            init.append((0, f"self.{attr} = {nn}.ModuleList([{nn}.Linear(2, 2) for _ in range(2)])"))
        elif attr in DICT_NAMES:
            subs[attr] = "dict"
            init.append((0, f'self.{attr} = {nn}.ModuleDict({{"a": {nn}.Linear(2, 2)}})'))
        elif attr == "fn":
            subs[attr] = "plain"
            init.append((0, "self.fn = abs"))
        elif attr == "size":
            subs[attr] = "plain"
            init.append((0, "self.size = 2"))
        elif attr == "_tpl" and buildable_subs:
            subs[attr] = "plain"
            init.append((0, f"self._tpl = [{rng.choice(buildable_subs).name}()]"))
        elif attr == "tpl" and buildable_subs:  # FWD101
            sub = rng.choice(buildable_subs).name
            subs[attr] = f"module:{sub}"
            form = rng.randint(0, 2)
            if form == 0:
                init += [(0, 'with torch.device("meta"):'), (1, f"self.tpl = {sub}()")]
            elif form == 1:
                init += [(0, f"self.tpl = {sub}().to(\"meta\")")]
            else:
                init += [(0, f"self.tpl = {nn}.Linear(2, 2, device=\"meta\")")]
                subs[attr] = "linear"
        elif attr == "frozen" and any(k.startswith(("module", "linear")) for k in subs.values()):
            source = next(a for a, k in subs.items() if k.startswith(("module", "linear")))
            mod.need("copy", "import copy")
            subs[attr] = subs[source]
            init.append((0, f"self.frozen = copy.deepcopy(self.{source}).to(\"meta\")"))
        elif attr == "c" and buildable_subs:  # FWD201 when called in the meta block
            sub = rng.choice(buildable_subs).name
            subs[attr] = f"compiled:{sub}"
            init.append((0, f"self.c = torch.compile({sub}())"))
            if (rng.random() < 0.5):
                init += [(0, 'with torch.device("meta"):'), (1, "self.c(torch.zeros(2, 2))")]
                cls.buildable = False
        elif attr in SUB_NAMES:
            if buildable_subs and (rng.random() < 0.5):
                sub = rng.choice(buildable_subs)
                subs[attr] = f"module:{sub.name}"
                init.append((0, f"self.{attr} = {_ref(rng, sub.name)}()"))
            else:
                subs[attr] = "linear"
                init.append((0, f"self.{attr} = {nn}.Linear(2, 2)"))
    if rng.randint(0, 9) == 0:  # instance patch on self in __init__ (FWD301, fixable form)
        mod.need("types", "import types")
        init.append((0, "self.forward = types.MethodType(fast, self)"))
    if rng.randint(0, 14) == 0:
        init.append((0, "self.forward = self._fast_forward  # FWD301, not the plain form"))
        subs["_fast_forward"] = "plain"
    # methods
    count = rng.randint(0, 6)
    helpers = [mod.fresh(rng, PRIVATE_NAMES, "_h") for _ in range(rng.randint(0, 2))]
    publics = [mod.fresh(rng, METHOD_NAMES, "m") for _ in range(count)]
    if cls.lightning and (rng.random() < 0.5):
        publics.append("training_step")
    cls.all_methods = publics + helpers
    body_lines: list[str] = [f"{pad}{_class_head(rng, name, base, pad)}"]
    if rng.randint(0, 4) == 0:
        body_lines.append(inner + rng.choice(('"""A module."""', "x_scale = 2", "forward_alias = None")))
    body_lines += _def_lines(rng, inner, indent, "def __init__(self):", init, mod)
    if rng.randint(0, 7) != 0:
        forward_body = _balanced(_method_body(rng, mod, subs, [], cls, has_base_forward, forward=True))
        body_lines += _def_lines(rng, inner, indent, "def forward(self, x):", forward_body, mod)
    for method in publics + helpers:
        others = [h for h in helpers + publics if h != method]
        kind = rng.choice(["plain"] * 8 + ["static", "class", "property", "generator", "async",
                                           "static_alias", "one_line"])
        decorators = _decorators(rng, mod, kind, method)
        noqa = rng.choice(NOQA_COMMENTS) if rng.randint(0, 3) == 0 else ""  # noqa on FWD001: FWD002 at calls
        if kind in ("static", "static_alias"):
            if kind == "static_alias":
                body_lines.append(f"{inner}_static = staticmethod")
                decorators.insert(0, "@_static")
            else:  # usually outermost; innermost under a mark is FWD003 and fails at class definition
                decorators.insert(0 if rng.randint(0, 3) else len(decorators), "@staticmethod")
            header = f"def {method}(self, x):{noqa}" if kind == "static_alias" else f"def {method}(x):{noqa}"
            body: Body = [(0, "return self(x)")] if kind == "static_alias" else [(0, "return x")]
        elif kind == "class":
            decorators.insert(0, "@classmethod")
            header = f"def {method}(cls, x):{noqa}"
            body = [(0, "return cls")]
        elif kind == "property":
            decorators.insert(0, rng.choice(("@property", "@functools.cached_property")))
            if "cached" in decorators[0]:
                mod.need("functools", "import functools")
            header = f"def {method}(self):{noqa}"
            body = [(0, "x = torch.zeros(2, 2)")] + _method_body(rng, mod, subs, others, cls, has_base_forward)
        elif kind == "generator":
            header = f"def {method}(self, x):{noqa}"
            body = _method_body(rng, mod, subs, others, cls, has_base_forward)[:-1]
            body += [(0, rng.choice(("yield self(x)", "yield x", "y = yield self.forward(x)",
                                     "yield from [self(x)]", "if x is None:\n    yield x")))]
        elif kind == "async":
            header = f"async def {method}(self, x):{noqa}"
            body = _method_body(rng, mod, subs, others, cls, has_base_forward)
        elif kind == "one_line":
            header = f"def {method}(self, x): return self(x){noqa}"
            body = []
        else:
            header = _signature(rng, method, noqa)
            body = _semicolons(rng, _method_body(rng, mod, subs, others, cls, has_base_forward))
        body = _balanced(body) if body else body
        for decorator in decorators:
            body_lines.append(f"{inner}{decorator}")
        body_lines += _def_lines(rng, inner, indent, header, body, mod, decorated=True)
        if kind in ("plain", "one_line", "async") and not method.startswith("_") and method not in cls.methods:
            cls.methods.append(method)
    mod.classes.append(cls)
    lines += body_lines
    return cls


def _class_head(rng: random.Random, name: str, base: str, pad: str) -> str:
    form = rng.randint(0, 9)
    if form == 0:
        return f"class {name}(  # a comment in the bases\n{pad}    {base},\n{pad}):"
    if form == 1:
        return f"class {name}({base}, metaclass=type):" if "," not in base else f"class {name}({base}):"
    return f"class {name}({base}):"


def _signature(rng: random.Random, method: str, noqa: str) -> str:
    form = rng.randint(0, 7)
    if form == 0:
        return f"def {method}(\n        self,\n        x,\n        *args,\n        **kwargs,\n    ):{noqa}"
    if form == 1:
        return f"def {method}(self, x: torch.Tensor = None, *, n: int = 1) -> torch.Tensor:{noqa}"
    if form == 2:
        return f"def {method}(self, x, /):{noqa}"
    return f"def {method}(self, x):{noqa}"


def _balanced(body: Body) -> Body:
    """Drop a trailing line that leaves a block header without a body."""
    out = list(body)
    while out and out[-1][1].rstrip().endswith(":"):
        out.pop()
    return out or [(0, "return x")]


def _decorators(rng: random.Random, mod: _Module, kind: str, method: str) -> list[str]:
    decorators: list[str] = []
    if kind in ("static", "class", "static_alias") and rng.randint(0, 3) != 0:
        return decorators
    for _ in range(rng.randint(0, 2)):
        choice = rng.choice(("mark", "mark", "inference", "no_grad", "inference_mode", "comment", "lru",
                             "compile", "wraps_mark"))
        if kind == "async" and choice in ("mark", "inference", "wraps_mark") and rng.randint(0, 3) != 0:
            choice = "comment"  # a marked coroutine fails at class definition (FWD003): keep most programs importable
        if choice == "mark":
            decorators.append(f"@{_mark(rng, mod)}")
        elif choice == "inference":
            mod.need("inference_entry", "from runtime_shim import inference_entry")
            decorators.append("@inference_entry")
        elif choice == "no_grad":
            decorators.append("@torch.no_grad()")
        elif choice == "inference_mode":
            decorators.append("@torch.inference_mode()")
        elif choice == "comment":
            decorators.append(rng.choice(("# between decorators", "", "# noqa: FWD001")))
        elif choice == "lru":
            mod.need("functools", "import functools")
            decorators.append("@functools.lru_cache(maxsize=None)")
        elif choice == "compile":
            decorators.append("@torch.compile")
        else:
            decorators.append(f"@{_mark(rng, mod)}  # marked")
    if decorators and decorators[0] in ("", "# between decorators", "# noqa: FWD001"):
        decorators.insert(0, "@torch.no_grad()")  # a comment or blank line needs a decorator above it
    return decorators


def _mark(rng: random.Random, mod: _Module) -> str:
    if not mod.mark_bound:
        mod.mark_bound = True
        mod.need("mark", "from runtime_shim import forward_entry")
    return mod.mark_ref


def _def_lines(rng: random.Random, pad: str, indent: str, header: str, body: Body, mod: _Module,
               decorated: bool = False) -> list[str]:
    out = []
    head_lines = header.split("\n")
    out.append(pad + head_lines[0])
    out += [pad + extra for extra in head_lines[1:]]
    for level, text in body:
        for k, piece in enumerate(text.split("\n")):  # a second physical line is one level deeper
            out.append(pad + indent * (level + 1 + (k > 0)) + piece.lstrip())
    out.append("")
    return out


def _plain_class(rng: random.Random, mod: _Module, indent: str, lines: list[str]) -> None:
    """A class that is not a module: marks on it are FWD003; its patches are silent."""
    name = mod.fresh(rng, ("Helper", "Sampler", "Tokeniser", "Outil"), "Plain")
    lines.append(f"class {name}:")
    if (rng.random() < 0.5):
        lines.append(f"{indent}@{_mark(rng, mod)}")
    lines += [f"{indent}def run(self, x):", f"{indent}{indent}return x", ""]
    if (rng.random() < 0.5):
        mod.need("types", "import types")
        lines += [f"{indent}def patch(self):", f"{indent}{indent}self.forward = types.MethodType(fast, self)", ""]
    lines += [""]
    mod.classes.append(_Class(name=name, is_module=False, methods=["run"], all_methods=["run"]))


def _training_function(rng: random.Random, mod: _Module, indent: str, lines: list[str]) -> None:
    """Set-ups (Fabric, DDP, FSDP1, FSDP2), registrations, calls, compiled calls in init contexts,
    meta deferred init, instance patches."""
    modules = [c for c in mod.classes if c.is_module]
    if not modules:
        return
    cls = rng.choice(modules)
    methods = cls.methods or ["generate"]
    fname = mod.fresh(rng, ("train", "main", "run", "entraîner", "evaluate"), "fn")
    body: Body = []
    kind = rng.choice(("fabric", "fabric_tuple", "ddp", "fsdp", "fully_shard", "trainer_attr"))
    ref = _ref(rng, cls.name)
    if kind in ("fabric", "fabric_tuple", "trainer_attr"):
        target = {"fabric": "model", "fabric_tuple": "model", "trainer_attr": "self.model"}[kind]
        if kind == "fabric_tuple":
            body.append((0, f"model, opt = fabric.setup({ref}(), torch.optim.SGD([torch.zeros(1)], lr=0.1))"))
        elif kind == "fabric" and (rng.random() < 0.5):
            body += [(0, f"model = {ref}()"), (0, "model = fabric.setup(  # multi-line set-up"), (1, "model,"),
                     (0, ")")]
        else:
            body.append((0, f"{target} = fabric.setup({ref}())"))
        register = lambda m: (0, f'{target}.mark_forward_method("{m}")')  # noqa: E731
        call = lambda m: (0, f"y = {target}.{m}(x)")  # noqa: E731
    elif kind in ("ddp", "fsdp"):
        if kind == "ddp":
            mod.need("ddp", rng.choice((
                "from torch.nn.parallel import DistributedDataParallel as DDP",
                "from torch.nn.parallel import DistributedDataParallel")))
            wrapper = "DDP" if "as DDP" in mod.imports["ddp"] else "DistributedDataParallel"
        else:
            mod.need("fsdp", "from torch.distributed.fsdp import FullyShardedDataParallel as FSDP")
            wrapper = "FSDP"
        target = "ddp"
        body.append((0, f"ddp = {wrapper}({ref}())"))
        mod.need("shim_mfm", "from runtime_shim import mark_forward_method")
        register = lambda m: (0, f'mark_forward_method(ddp, "{m}")')  # noqa: E731
        call = lambda m: (0, f"y = ddp.module.{m}(x)")  # noqa: E731
    else:
        mod.need("fully_shard", "from torch.distributed.fsdp import fully_shard")
        body += [(0, f"net = {ref}()"), (0, "for layer in net.children():"), (1, "fully_shard(layer)"),
                 (0, "fully_shard(net)")]
        register = lambda m: (0, f'register_fsdp_forward_method(net, "{m}")')  # noqa: E731
        call = lambda m: (0, f"y = net.{m}(x)")  # noqa: E731
        if (rng.random() < 0.5):
            mod.need("register", "from torch.distributed.fsdp import register_fsdp_forward_method")
        else:
            register = lambda m: (0, f'print("{m}")')  # noqa: E731
    for method in [rng.choice(methods * 4 + ["forward", "missing_name"]) for _ in range(rng.randint(1, 3))]:
        if rng.randint(0, 2) == 0:
            body.append(register(method))
        if method not in ("forward", "missing_name") or (rng.random() < 0.5):
            text = call(method)[1]
            if rng.randint(0, 8) == 0:
                text += rng.choice(NOQA_COMMENTS[:4])
            body.append((0, text))
    body.append((0, "return y" if any("y =" in t for _, t in body) else "return None"))
    if kind == "trainer_attr":
        tname = mod.fresh(rng, ("Trainer", "Runner", "Entraîneur"), "Trainer")
        lines += [f"class {tname}:", f"{indent}def __init__(self, fabric, x):"]
        lines += [f"{indent}{indent}{indent * lvl}{t}" for lvl, t in body]
        lines += ["", ""]
    else:
        params = "fabric, x" if "fabric" in kind else "x"
        lines.append(f"def {fname}({params}):")
        lines += [f"{indent}{indent * lvl}{t}" for lvl, t in body]
        lines += ["", ""]


def _hazard_function(rng: random.Random, mod: _Module, indent: str, lines: list[str]) -> None:
    """FWD201 compiled calls in init contexts, deferred meta init, FWD301 patches and renames."""
    modules = [c for c in mod.classes if c.is_module]
    ref = _ref(rng, rng.choice(modules).name) if modules else f"{mod.nn}.Linear"
    args = "" if modules else "2, 2"
    fname = mod.fresh(rng, ("build", "patch", "setup_model", "préparer", "ｍake"), "hz")
    body: Body = []
    for _ in range(rng.randint(1, 4)):
        kind = rng.choice(("compiled_meta", "compiled_init_module", "compiled_ok", "deferred", "to_meta",
                           "patch", "patch", "patch_from_types", "patch_get", "patch_partial",
                           "patch_setattr", "patch_dict", "rename", "rename_class", "class_patch",
                           "patch_loop", "patch_semicolon", "patch_noqa", "patch_comment",
                           "patch_attr", "patch_lambda"))
        if kind == "compiled_meta":
            body += [(0, f"compiled = torch.compile({ref}({args}))"), (0, 'with torch.device("meta"):'),
                     (1, "compiled(torch.zeros(2, 2))")]
        elif kind == "compiled_init_module":
            body += [(0, f"compiled = torch.compile({ref}({args}))"), (0, "with fabric.init_module():"),
                     (1, "y = compiled(torch.zeros(2, 2))")]
        elif kind == "compiled_ok":
            body += [(0, f"compiled = torch.compile({ref}({args}))"), (0, "y = compiled(torch.zeros(2, 2))")]
        elif kind == "deferred":
            body += [(0, 'with torch.device("meta"):'), (1, f"big = {ref}({args})"),
                     (0, 'big.to_empty(device="cpu")')]
        elif kind == "to_meta":
            body += [(0, f'm = {ref}({args}).to("meta")')]
        else:
            mod.need("types", "import types")
            body.append((0, f"m = {ref}({args})"))
            patch = {
                "patch": "m.forward = types.MethodType(fast, m)",
                "patch_from_types": "m.forward = MethodType(fast, m)",
                "patch_get": "m.forward = fast.__get__(m)",
                "patch_partial": "m.forward = functools.partial(fast, m)",
                "patch_setattr": 'setattr(m, "forward", fast)',
                "patch_dict": 'm.__dict__["forward"] = fast',
                "rename": 'type(m).__name__ = "Renamed"',
                "rename_class": 'm.__class__.__name__ = "Renamed"',
                "class_patch": "type(m).forward = fast",
                "patch_loop": "for sub in m.modules():\n    sub.forward = types.MethodType(fast, sub)",
                "patch_semicolon": "n = 1; m.forward = types.MethodType(fast, m)",
                "patch_noqa": "m.forward = types.MethodType(fast, m)  # noqa: FWD301",
                "patch_comment": "m.forward = types.MethodType(fast, m)  # keep this comment   ",
                "patch_attr": "m.forward = types.MethodType(m.extra_forward, m)",
                "patch_lambda": "m.forward = types.MethodType(lambda self, x: x, m)",
            }[kind]
            if kind == "patch_from_types":
                mod.need("methodtype", "from types import MethodType")
            if kind == "patch_partial":
                mod.need("functools", "import functools")
            if kind == "patch_attr":
                body.append((0, "m.extra_forward = fast"))
            first, *rest = patch.split("\n")
            body.append((0, first))
            body += [(1, t.strip()) for t in rest]
    body.append((0, "return None"))
    lines.append(f"def {fname}(fabric, x):")
    lines += [f"{indent}{indent * lvl}{t}" for lvl, t in body]
    lines += ["", ""]


def _module_level_demo(rng: random.Random, mod: _Module, lines: list[str]) -> None:
    """Code that runs at import: build a model and patch its forward (FWD301 -> patch_forward)."""
    candidates = [c for c in mod.classes if c.is_module and c.buildable and not c.lightning]
    if not candidates:
        return
    cls = rng.choice(candidates)
    mod.need("types", "import types")
    lines += [f"_demo = {_ref(rng, cls.name)}()", "_demo.forward = types.MethodType(fast, _demo)", "", ""]


HEADERS = ("", '"""Module docstring."""', "#!/usr/bin/env python", "# Licence header\n# second line",
           '"""Doc."""\nfrom __future__ import annotations', "from __future__ import annotations",
           "# -*- coding: utf-8 -*-", "# -*- coding: latin-1 -*-", "# vim: set fileencoding=utf-8 :")
NN_STYLES = (("import torch.nn as nn", "nn"), ("from torch import nn", "nn"), ("import torch", "torch.nn"),
             ("import torch.nn as tnn", "tnn"), ("import torch.nn", "torch.nn"))
# (import line, the name a mark is written with, whether the import binds it)
SHIM_STYLES = (("", "forward_entry", False), ("from runtime_shim import forward_entry", "forward_entry", True),
               ("from runtime_shim import guard", "forward_entry", False),
               ("from runtime_shim import (\n    guard,  # comment\n)", "forward_entry", False),
               ("from runtime_shim import forward_entry as fe", "fe", True),
               ("import runtime_shim", "runtime_shim.forward_entry", True),
               ("import runtime_shim as rs", "rs.forward_entry", True),
               ("from runtime_shim import forward_entry  # noqa", "forward_entry", True))
CLASHES = ("", "forward_entry = None", "ｆorward_entry = 1  # the same name as forward_entry to Python",
           "def patch_forward():\n    return None", "mark_forward_method = print",
           "register_fsdp_forward_method = None")


def generated() -> st.SearchStrategy[Program]:
    """A module (sometimes a model file and a training file) built from the constructs above.

    Hypothesis draws one seed; the choices are made with ``random.Random``: drawing each of the
    ~300 choices through Hypothesis cost 40-90 ms per program, more than some of the properties.
    Shrinking is left to ``benchmarks/fuzz.py --minimise`` (deleting lines)."""
    return st.randoms(use_true_random=True).map(generate)


def generate(rng: random.Random) -> Program:
    """One generated program (see ``generated``); the same ``rng`` state gives the same program."""
    header = rng.choice(HEADERS)
    nn_import, nn = rng.choice(NN_STYLES)
    shim_import, mark_ref, bound = rng.choice(SHIM_STYLES)
    clash = rng.choice(CLASHES) if rng.randint(0, 5) == 0 else ""
    if "orward_entry =" in clash:  # marks must still work: write them as rs.forward_entry
        shim_import, mark_ref, bound = "import runtime_shim as rs", "rs.forward_entry", True
    mod = _Module(nn=nn, mark_bound=bound, mark_ref=mark_ref)
    if shim_import:
        mod.need("shim", shim_import)
    indent = rng.choice(("    ",) * 4 + ("\t", "  ", "        "))
    # one file; or a model file and a training file, the model maybe vendored (FWD002)
    layout = rng.choice(("one",) * 7 + ("split", "vendored", "vendored"))
    split = layout != "one"
    body: list[str] = []
    if clash:
        body += clash.split("\n") + ["", ""]
        mod.used.add(nfkc(clash.split()[1].split("(")[0] if clash.startswith("def") else clash.split()[0]))
    body += ["def fast(self, x):", f"{indent}return x", "", ""]
    mod.used.add("fast")
    if rng.randint(0, 9) == 0:  # an import after code: the fixer's import goes after it
        body += ["import os  # an import after the first definition", "", ""]
    n_classes = rng.randint(1, 4)
    module_classes = 0
    for _ in range(n_classes):
        where = rng.choice(("top",) * 6 + ("nested", "in_function", "plain"))
        if where == "plain":
            _plain_class(rng, mod, indent, body)
            continue
        if where == "nested":
            outer = mod.fresh(rng, ("Outer", "Conteneur"), "Outer")
            body.append(f"class {outer}:")
            _module_class(rng, mod, indent, body, 1)
            mod.classes[-1].buildable = False  # reached as Outer.X only
            mod.classes.pop()
        elif where == "in_function":
            fname = mod.fresh(rng, ("make_model", "factory"), "factory")
            body.append(f"def {fname}():")
            cls = _module_class(rng, mod, indent, body, 1)
            mod.classes.pop()
            body.append(f"{indent}return {cls.name}")
        else:
            _module_class(rng, mod, indent, body, 0)
        module_classes += 1
        body += ["", ""]
    train: list[str] = []
    target = train if split else body
    for _ in range(rng.choice((0, 1, 1, 2, 2))):
        _training_function(rng, mod, indent, target)
    for _ in range(rng.randint(0, 2)):
        _hazard_function(rng, mod, indent, target)
    if not split and rng.randint(0, 3) == 0:
        _module_level_demo(rng, mod, body)
    base_imports = [nn_import, "import torch", "import torch.utils.checkpoint"]
    if (rng.random() < 0.5):
        base_imports.reverse()
    if rng.randint(0, 7) == 0:
        base_imports.append("try:\n    import numpy as np\nexcept ImportError:  # pragma: no cover\n    np = None")
    if rng.randint(0, 7) == 0:
        base_imports.append("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from runtime_shim import guard")
    extra = list(mod.imports.values())
    imports = base_imports + extra if (rng.random() < 0.5) else extra + base_imports
    model_text = _assemble(rng, header, imports, body, indent)
    model_path = f"{VENDOR_DIR}/{MODEL_FILE}" if layout == "vendored" and train else MODEL_FILE
    files = [(model_path, model_text)]
    given: tuple[str, ...] = ()
    if split and train:
        names = ", ".join(c.name for c in mod.classes if c.is_module)
        module = model_path[:-3].replace("/", ".")
        train_imports = ["import torch", nn_import, f"from {module} import {names}" if names else f"import {module}"]
        train_imports += [line for key, line in mod.imports.items() if key not in ("shim", "mark", "inference_entry")]
        train = ["def fast(self, x):", f"{indent}return x", "", ""] + train
        files.append((TRAIN_FILE, _assemble(rng, "", train_imports, train, indent)))
        if layout == "vendored":
            files.append((f"{VENDOR_DIR}/setup.py", b"# vendored: a project of its own\n"))
            given = (TRAIN_FILE,)
    return Program(tuple(files), "generated", module_classes, executable=mod.executable, given=given)


def _assemble(rng: random.Random, header: str, imports: list[str], body: list[str], indent: str) -> bytes:
    """Join, then apply file-level oddities: line ends, trailing whitespace, comments, form feeds,
    BOM and encoding cookie, no final newline."""
    lines: list[str] = header.split("\n") if header else []
    for block in imports:
        lines += block.replace("    ", indent).split("\n")
    lines += ["", ""] + body
    out: list[str] = []
    oddity = rng.randint(0, 3) == 0
    for line in lines:
        after_backslash = bool(out) and out[-1].endswith("\\")
        if oddity and line.strip() and not after_backslash and rng.randint(0, 12) == 0:
            pad = line[:len(line) - len(line.lstrip())]
            if not line.lstrip().startswith(("else", "except", "finally", "elif", ")")):
                out.append(pad + rng.choice(ODD_COMMENTS))
        if oddity and not line.strip() and rng.randint(0, 5) == 0:
            line = rng.choice(("\x0c", "   ", "\t", " \x0c"))
        if oddity and line.strip() and not line.endswith("\\") and rng.randint(0, 15) == 0:
            line += rng.choice(("  ", "\t", " "))
        out.append(line)
    ending = rng.choice(("\n",) * 30 + ("\r\n",) * 12 + ("mixed",) * 6 + ("\r",))
    if ending == "mixed":
        pieces = [line + rng.choice(("\n", "\r\n")) for line in out]
        text = "".join(pieces)
    else:
        text = ending.join(out) + ending
    if rng.randint(0, 9) == 0:
        text = text.rstrip("\r\n")  # no final newline
    encoding = "utf-8"
    if "latin-1" in header:
        try:
            return text.encode("latin-1")
        except UnicodeEncodeError:
            text = text.replace("latin-1", "utf-8", 1)
    data = text.encode(encoding)
    if rng.randint(0, 9) == 0:
        data = b"\xef\xbb\xbf" + data
    return data


# ----------------------------------------------------------------------------------------------
# Other sources: hypothesmith, hybrids, broken programs
# ----------------------------------------------------------------------------------------------


def _hypothesmith() -> st.SearchStrategy[str]:
    """Built once: a new ``from_grammar()`` strategy compiles the grammar again (seconds per draw).
    ``from_node`` is ~10x slower per example than ``from_grammar`` and its programs are tiny.
    No ``auto_target``: its ``target()`` calls made Hypothesis spend half of a mixed run on them."""
    if "hypothesmith" not in _SESSION:
        import hypothesmith
        import libcst

        grammar = hypothesmith.from_grammar(auto_target=False)
        node = hypothesmith.from_node(libcst.Module, auto_target=False)
        _SESSION["hypothesmith"] = st.integers(0, 4).flatmap(lambda k: node if k == 0 else grammar)
    return _SESSION["hypothesmith"]


@st.composite
def hypothesmith_programs(draw: Callable) -> Program:
    source = draw(_hypothesmith())
    return Program(((MODEL_FILE, source.encode("utf-8", "surrogatepass")),), "hypothesmith", 0)


_TAIL = """

import torch.nn as nn


class Appended(nn.Module):
    def forward(self, x):
        return x

    def generate(self, x):
        return self(x)


def main(fabric):
    model = fabric.setup(Appended())
    return model.generate(1)
"""


@st.composite
def hybrid_programs(draw: Callable) -> Program:
    """Arbitrary code around a model that both fix styles have something to do with."""
    source = draw(_hypothesmith())
    if draw(st.booleans()):
        text = source.rstrip("\n") + "\n" + _TAIL
    else:
        text = _TAIL.lstrip("\n") + "\n" + source
    return Program(((MODEL_FILE, text.encode("utf-8", "surrogatepass")),), "hybrid", 1)


@st.composite
def broken_programs(draw: Callable) -> Program:
    program = draw(generated())
    index = next(i for i, (name, _) in enumerate(program.files) if name == program.linted()[0][0])
    name, data = program.files[index]
    cut = draw(st.integers(0, max(0, len(data) - 1)))
    how = draw(st.sampled_from(("cut", "splice", "unbalanced", "nul", "bad_utf8", "bad_cookie", "dedent")))
    if how == "cut":
        data = data[:cut]
    elif how == "splice":
        junk = draw(st.sampled_from((b"(", b"def ", b"\n  ", b":", b"\n\tclass", b"'''", b"\\")))
        data = data[:cut] + junk + data[cut:]
    elif how == "unbalanced":
        data = data + b"\nclass Broken(nn.Module):\n    def generate(self, x:\n        return self(x)\n"
    elif how == "nul":
        data = data[:cut] + b"\x00" + data[cut:]
    elif how == "bad_utf8":
        data = data[:cut] + b"\xff\xfe" + data[cut:]
    elif how == "bad_cookie":
        data = b"# -*- coding: no-such-codec -*-\n" + data
    else:
        data = data.replace(b"\n    ", b"\n  ", 1) + b"\n    x = 1\n"
    files = program.files[:index] + ((name, data),) + program.files[index + 1:]
    return Program(files, "broken", program.module_classes, given=program.given)


#: Shares of each source in ``programs()`` (out of 20): most programs hold module classes.
MIX = (("generated", 16), ("hypothesmith", 2), ("hybrid", 1), ("broken", 1))
_SOURCES = {"generated": generated, "hypothesmith": hypothesmith_programs, "hybrid": hybrid_programs,
            "broken": broken_programs}


def programs(mix: Sequence[tuple[str, int]] = MIX) -> st.SearchStrategy[Program]:
    """Mostly generated module programs; some hypothesmith, hybrid and broken ones. The source is
    picked with ``random.Random`` (Hypothesis's own integer draws favour the ends of a range, which
    gave the last source half of the examples)."""
    strategies = {name: _SOURCES[name]() for name, _ in mix}
    names = [name for name, weight in mix for _ in range(weight)]
    return st.randoms(use_true_random=True).flatmap(lambda rng: strategies[rng.choice(names)])


# ----------------------------------------------------------------------------------------------
# Properties
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Failure:
    prop: str  # e.g. "analyse-raises", "fix-not-idempotent[call]"
    detail: str  # one line; numbers and names normalised by ``signature``

    def kind(self) -> str:
        """The signature without names (``Net.infer`` -> ``X``): what a minimised example must keep."""
        return re.sub(r"[^\s:()]+\.[^\s:()]+", "X", self.signature())

    def signature(self) -> str:
        text = re.sub(r"(/[^\s:]+)+/", "", self.detail)  # directories of the run
        text = re.sub(r"\d+", "N", text)
        text = re.sub(r"'[^']*'|\"[^\"]*\"", "'…'", text)
        return f"{self.prop}: {text[:160]}"


@dataclass
class Outcome:
    program: Program
    findings: Counter = field(default_factory=Counter)  # code -> count (first analysis)
    fixed: Counter = field(default_factory=Counter)  # (style, code) -> count
    unfixed: Counter = field(default_factory=Counter)  # (style, reason class) -> count
    file_errors: Counter = field(default_factory=Counter)  # kind -> count (clean per-file errors)
    failures: list[Failure] = field(default_factory=list)
    fixed_dirs: dict[str, Path] = field(default_factory=dict)  # style -> directory with the fixed files
    fixed_symbols: dict[str, list[str]] = field(default_factory=dict)  # style -> FWD001 symbols fixed

    def fail(self, prop: str, detail: str) -> None:
        self.failures.append(Failure(prop, detail.replace("\n", " ")[:500]))


STYLES = ("decorator", "call")
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")


def python_parses(data: bytes) -> bool:
    """CPython's parser's verdict (what fwdlint must agree with), for text valid in its declared
    encoding: CPython 3.11 also runs files with invalid UTF-8 inside comments, which fwdlint
    refuses to decode (a clean per-file error, counted, not a failure)."""
    try:  # the parser alone (no compiler): it emits no SyntaxWarning
        data.decode(_encoding(data))
        compile(data, "<fuzz>", "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
    except (SyntaxError, ValueError, UnicodeError, LookupError):
        return False
    return True


def _encoding(data: bytes) -> str:
    return tokenize.detect_encoding(io.BytesIO(data).readline)[0]


def _lines(data: bytes) -> list[str]:
    return _LINE.findall(data.decode(_encoding(data)).removeprefix("\ufeff"))


def write_program(program: Program, directory: Path) -> list[str]:
    """The program's files in ``directory`` (a project root: it holds a pyproject.toml); returns
    the paths of the files fwdlint is given, in ``program.linted()`` order."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "pyproject.toml").write_text("# fuzz project root\n")
    for name, data in program.files:
        (directory / name).parent.mkdir(parents=True, exist_ok=True)
        (directory / name).write_bytes(data)
    return [str(directory / name) for name, _ in program.linted()]


def _run(directory: Path, cache_dir: Optional[Path] = None):  # -> lint_rules.engine.Run
    """Options for one program's project. The facts cache is shared by all programs of a session:
    it is keyed by content, so a program's own files are always extracted afresh the first time,
    while installed files (``torch/__init__.py``, which FWD201 reads to resolve ``torch.zeros``
    inside a meta block: about 1 s) are parsed once."""
    from lint_rules import environment
    from lint_rules.engine import Run

    if "env" not in _SESSION:
        _SESSION["env"] = environment.find()
        _SESSION["cache"] = Path(tempfile.mkdtemp(prefix="fwdfuzz-cache-"))
        atexit.register(shutil.rmtree, _SESSION["cache"], True)
    return Run(project_root=directory, environment=_SESSION["env"], cache_dir=cache_dir or _SESSION["cache"])


_SESSION: dict = {}

_WARM_UP = b"""import torch
import lightning.pytorch
from lightning.fabric import Fabric
from torch.distributed.fsdp import fully_shard
from torch.nn.parallel import DistributedDataParallel
import runtime_shim


def build():
    with torch.device("meta"):
        return torch.zeros(2)
"""


def _cold_cache(target: Path) -> Path:
    """A facts cache that knows the installed files programs use (torch's ``__init__.py`` costs
    about 1 s to read) but none of the program's: a copy of one made once per session. The
    session's shared cache would answer for a program seen before, hiding what it is to test."""
    if "template" not in _SESSION or not _SESSION["template"].exists():  # (a clean-up of /tmp may remove it)
        from lint_rules.engine import analyse

        template = Path(tempfile.mkdtemp(prefix="fwdfuzz-template-"))
        atexit.register(shutil.rmtree, template, True)
        (template / "warm_up.py").write_bytes(_WARM_UP)
        analyse([str(template / "warm_up.py")], _run(template, template / "cache"))
        _SESSION["template"] = template / "cache"
    shutil.copytree(_SESSION["template"], target)
    return target


_ALLOWED_INSERT = (
    re.compile(r"@[\w.]*(forward_entry|fe)$"),
    re.compile(r"from runtime_shim import [\w, ]+$"),
    re.compile(r"from torch\.distributed\.fsdp import register_fsdp_forward_method( as \w+)?$"),
    re.compile(r"[\w.]+\.mark_forward_method\(\"[^\"]+\"\)$"),
    re.compile(r"[\w.]*register_fsdp_forward_method\([\w.]+, \"[^\"]+\"\)$"),
    re.compile(r"[\w.]*mark_forward_method\([\w.]+, \"[^\"]+\"\)$"),
    re.compile(r"(\w+ as )?\w+,$"),  # one more name in a parenthesised import
)
_PATCH = re.compile(r"^(?P<pad>\s*)(?P<recv>[\w.]+)\.forward = (?:types\.)?MethodType\((?P<fn>\w+), (?P=recv)\)"
                    r"(?P<rest>\s*(#.*)?)$")
_PATCHED = re.compile(r"^(?P<pad>\s*)[\w.]*patch_forward\((?P<recv>[\w.]+), (?P<fn>\w+)\)(?P<rest>\s*(#.*)?)$")
_DEF = re.compile(r"^\s*(?:async\s+)?def\s+(\w+)")


def _eol(line: str) -> str:
    return line[len(line.rstrip("\r\n")):]


def _statement_spans(source: bytes) -> tuple[dict[int, int], list[tuple[int, int]]]:
    """For the old source: 1-based end line -> indentation column of the innermost simple statement
    ending there; and the line spans of module-level ``from runtime_shim import`` statements."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return {}, []
    ends: dict[int, int] = {}
    spans = []
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt) and node.end_lineno is not None:
            if not hasattr(node, "body"):  # simple statements
                ends[node.end_lineno] = max(ends.get(node.end_lineno, -1), node.col_offset)
        if isinstance(node, ast.ImportFrom) and node.module in ("runtime_shim", "torch.distributed.fsdp"):
            spans.append((node.lineno, node.end_lineno or node.lineno))
    return ends, spans


_UNUSED_TYPES_IMPORT = re.compile(r"(import types|from types import MethodType)( as \w+)?$")


def changes_allowed(old: bytes, new: bytes, fixed_methods: Sequence[str]) -> Optional[str]:
    """None if ``new`` is ``old`` plus allowed edits, else why not (one line)."""
    if old.startswith(b"\xef\xbb\xbf") != new.startswith(b"\xef\xbb\xbf"):
        return "the byte order mark changed"
    try:
        if _encoding(old) != _encoding(new):
            return "the encoding changed"
        old_lines, new_lines = _lines(old), _lines(new)
    except (SyntaxError, UnicodeError, LookupError) as error:
        return f"cannot decode: {error}"
    endings = {_eol(line) for line in old_lines if _eol(line)} or {"\n", "\r\n", "\r"}
    ends, import_spans = _statement_spans(old)
    decorated: list[str] = []
    matcher = difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        olds, news = old_lines[i1:i2], new_lines[j1:j2]
        in_import = i2 > i1 and all(any(a <= line <= b for a, b in import_spans) for line in range(i1 + 1, i2 + 1))
        # the last line gains a line end before new lines are appended
        if olds and i2 == len(old_lines) and not _eol(olds[-1]) and news and news[0].rstrip("\r\n") == olds[-1]:
            olds, news = olds[:-1], news[1:]
            if not olds and not news:
                continue
        if tag != "insert" and any(_UNUSED_TYPES_IMPORT.match(line.strip()) for line in olds):
            # FWD301's rewrite drops the `types` import it left unused, with its section's blank line
            # (tests/test_fix_call_flake8.py checks it was unused); what replaces it is an insertion,
            # or the import extended next to it (checked as a whole by _imports_extended)
            kept = [i1 + k + 1 for k, line in enumerate(olds)
                    if line.strip() and not _UNUSED_TYPES_IMPORT.match(line.strip())]
            if kept and all(any(a <= line <= b for a, b in import_spans) for line in kept):
                continue
            if not kept:
                if not news:
                    continue
                olds, tag = [], "insert"
        if tag in ("replace", "delete") and olds and not in_import:
            if len(olds) != len(news):
                return f"line {i1 + 1} changed: {olds!r} -> {news!r}"
            for before, after in zip(olds, news):
                a, b = _PATCH.match(before.rstrip("\r\n")), _PATCHED.match(after.rstrip("\r\n"))
                if not (a and b and a["pad"] == b["pad"] and a["recv"] == b["recv"] and a["fn"] == b["fn"]
                        and a["rest"] == b["rest"] and _eol(before) == _eol(after)):
                    return f"line {i1 + 1} changed: {before!r} -> {after!r}"
            continue
        if in_import and olds:
            continue  # an extended import: checked as a whole by _imports_extended
        for k, line in enumerate(news):
            text = line.rstrip("\r\n")
            stripped = text.strip()
            if not any(p.match(stripped) for p in _ALLOWED_INSERT):
                return f"unexpected inserted line {stripped!r}"
            if _eol(line) and _eol(line) not in endings:
                return f"inserted line {stripped!r} ends with {_eol(line)!r}, the file uses {sorted(endings)!r}"
            pad = text[:len(text) - len(text.lstrip())]
            if stripped.startswith("@"):
                following = next((n for n in new_lines[j1 + k + 1:] if n.strip() and not n.strip().startswith("#")), "")
                follow_pad = following[:len(following) - len(following.lstrip())]
                if pad != follow_pad:
                    return f"decorator {stripped!r} indented {pad!r}, its def {follow_pad!r}"
                name = next((m.group(1) for n in new_lines[j1 + k + 1:] if (m := _DEF.match(n))), "")
                decorated.append(name)
            elif "mark_forward_method" in stripped or "register_fsdp_forward_method(" in stripped:
                column = ends.get(i1)
                if column is None:
                    return f"registration {stripped!r} not right after a statement (old line {i1})"
                if len(pad.expandtabs(1)) != column and len(pad) != column:
                    return f"registration {stripped!r} indented {pad!r}, its set-up at column {column}"
    if sorted(map(nfkc, decorated)) != sorted(map(nfkc, fixed_methods)):
        return f"decorated {sorted(decorated)!r}, fixed findings {sorted(fixed_methods)!r}"
    return _imports_extended(old, new) or _comments_kept(old, new)


_ADDED_NAMES = frozenset({"forward_entry", "patch_forward", "mark_forward_method", "register_fsdp_forward_method"})


def _from_imports(source: bytes) -> list[tuple[str, list[tuple[str, Optional[str]]]]]:
    tree = ast.parse(source)
    return [(node.module or "", [(a.name, a.asname) for a in node.names]) for node in tree.body
            if isinstance(node, ast.ImportFrom)]


def _imports_extended(old: bytes, new: bytes) -> Optional[str]:
    """Module-level ``from`` imports: the old ones, in order, each kept or given allowed names,
    plus new ones of allowed names only."""
    olds, news = _from_imports(old), _from_imports(new)
    # FWD301's rewrite drops a `from types import MethodType` it left unused
    dropped = [entry for entry in olds if entry[0] == "types" and all(n == "MethodType" for n, _ in entry[1])
               and entry not in news]
    if dropped:
        names = b"|".join(re.escape((alias or name).encode()) for _, imported in dropped for name, alias in imported)
        used = re.compile(rb"(?<![.\w])(%s)\b" % names)
        rest = b"\n".join(line for line in new.splitlines()
                          if not line.lstrip().startswith((b"from types", b"import types")))
        if not used.search(rest):
            olds = [entry for entry in olds if entry not in dropped]
    i = 0
    for module, names in news:
        if i < len(olds) and olds[i][0] == module and [n for n in names if n in olds[i][1]] == olds[i][1]:
            extra = [n for n in names if n not in olds[i][1]]
            i += 1
        else:
            extra = names
            if module not in ("runtime_shim", "torch.distributed.fsdp"):
                return f"a new import from {module}"
        if any(name not in _ADDED_NAMES for name, _ in extra):
            return f"import from {module} gained {extra!r}"
    if i != len(olds):
        return f"import {olds[i]!r} lost"
    return None


def _comments(source: bytes) -> list[str]:
    text = re.sub(r"\r\n?", "\n", source.decode(_encoding(source)))  # tokenize's readline knows \n only
    return [t.string for t in tokenize.generate_tokens(io.StringIO(text).readline) if t.type == tokenize.COMMENT]


def _comments_kept(old: bytes, new: bytes) -> Optional[str]:
    """Fixers add no comment and drop none: the comment tokens are the same, in order."""
    try:
        before, after = _comments(old), _comments(new)
    except (tokenize.TokenError, SyntaxError, UnicodeError):
        return None
    if before != after:
        diff = [c for c in difflib.ndiff(before, after) if c[:1] in "+-"]
        return f"comments changed: {diff[:3]!r}"
    return None


def _error_kind(message: str) -> str:
    if message.startswith("LibCST cannot parse"):
        return "libcst-rejects-valid"
    if message.startswith("too deeply nested"):
        return "too-deep"
    if message.startswith(("syntax error", "cannot decode")):
        return "syntax"
    return "other"


def _key_findings(diagnostics: Iterable) -> Counter:
    return Counter((d.path, d.code, d.symbol) for d in diagnostics)


def check_program(program: Program, workdir: Path, styles: Sequence[str] = STYLES, analysis: bool = True) -> Outcome:
    """The in-process properties on ``program``: the analysis ones (``analysis``) and the fix
    ones for each of ``styles``. Files go under ``workdir`` (kept for ``import_check``)."""
    outcome = Outcome(program)
    source_dir = workdir / "original"
    paths = write_program(program, source_dir)
    if analysis and not check_analysis(outcome, paths, source_dir):
        return outcome
    for style in styles:
        check_fix(outcome, style, workdir / style)
    return outcome


def check_analysis(outcome: Outcome, paths: list[str], directory: Path) -> bool:
    """The analyzer never raises; it reports an error exactly for the files Python cannot parse
    (or LibCST alone cannot); a warm cache gives the cold findings. False if it raised."""
    with warnings.catch_warnings():  # compile() warns about odd hypothesmith code ('str' is not callable)
        warnings.simplefilter("ignore")
        return _check_analysis(outcome, paths, directory)


def _check_analysis(outcome: Outcome, paths: list[str], directory: Path) -> bool:
    from lint_rules.engine import analyse

    cache = _cold_cache(directory.parent / "cache")
    try:
        cold = analyse(paths, _run(directory, cache))  # the program's files are extracted ...
        warm = analyse(paths, _run(directory, cache))  # ... and now read back from the cache
    except Exception as error:  # noqa: BLE001 -- any exception is the failure we look for
        outcome.fail("analyse-raises", f"{type(error).__name__}: {error}")
        return False
    errors = {e.path: e.message for e in cold.errors}
    for path, (_, data) in zip(paths, outcome.program.linted()):
        message = errors.get(path)
        if message is None and not python_parses(data):
            outcome.fail("invalid-accepted", f"{Path(path).name}: Python cannot parse it, fwdlint reports no error")
        elif message is not None:
            kind = _error_kind(message)
            outcome.file_errors[kind] += 1
            if python_parses(data) and kind not in ("libcst-rejects-valid", "too-deep"):
                outcome.fail("error-on-valid", message)
    outcome.findings.update(d.code for d in cold.diagnostics)
    if sorted(cold.diagnostics) != sorted(warm.diagnostics) or sorted(cold.errors) != sorted(warm.errors):
        outcome.fail("cache-differs", f"cold {len(cold.diagnostics)} findings, warm {len(warm.diagnostics)}")
    _check_reuse(outcome, paths, directory, cache)
    return True


#: Edits ``_check_reuse`` makes at a random line: a comment, a blank line, a statement; b"": the line deleted.
_EDITS = (b"# a comment\n", b"\n", b"    pass\n", b"")


def _check_reuse(outcome: Outcome, paths: list[str], directory: Path, cache: Path) -> None:
    """After a random edit of one file (a copy of the program), a run that may reuse stored findings
    (``results``: by the files' contents, or by their facts) finds what a cold cache finds."""
    from lint_rules.engine import analyse

    if not paths:
        return
    edited_dir = directory.parent / "edited"
    shutil.copytree(directory, edited_dir)
    edited = [str(edited_dir / os.path.relpath(path, directory)) for path in paths]
    analyse(edited, _run(edited_dir, cache), reuse=True)  # stores this run's findings
    rng = random.Random(outcome.program.dump())
    target = Path(rng.choice(edited))
    lines = target.read_bytes().splitlines(keepends=True)
    edit = rng.choice(_EDITS)  # a comment: at the end half the time (the facts stay: the findings are reused)
    at = len(lines) if edit == _EDITS[0] and rng.random() < 0.5 else rng.randrange(len(lines) + 1)
    if edit and at == len(lines) and lines and not lines[-1].endswith((b"\n", b"\r")):
        edit = b"\n" + edit  # after the last line, not on it
    if edit:
        lines.insert(at, edit)
    elif at < len(lines):
        del lines[at]
    target.write_bytes(b"".join(lines))
    reused = analyse(edited, _run(edited_dir, cache), reuse=True)
    fresh = analyse(edited, _run(edited_dir, _cold_cache(directory.parent / "edited-cache")))
    if sorted(reused.diagnostics) != sorted(fresh.diagnostics) or sorted(reused.errors) != sorted(fresh.errors):
        outcome.fail("reuse-differs", f"after {edit!r} at line {at + 1} of {target.name}: {len(fresh.diagnostics)} "
                                      f"findings, reused {len(reused.diagnostics)} (reused: {reused.reused})")


def _round_trip_note(path: str) -> str:
    """Why a fix was refused, when the cause is LibCST printing the unchanged file differently."""
    try:
        import libcst as cst

        data = Path(path).read_bytes()
        if cst.parse_module(data).bytes != data:
            return " (LibCST's own round trip of this file changes it)"
    except Exception:  # noqa: BLE001 -- only a note
        pass
    return ""


def _reported(run) -> list:  # FixRun -> the diagnostics its analysis made (each is fixed or not)
    return [d for f in run.files for d in f.fixed] + [u.diagnostic for u in run.unfixed]


def check_fix(outcome: Outcome, style: str, directory: Path) -> None:
    """``fix_in_passes`` (what ``--fix`` runs) in ``style`` on a copy of the program in ``directory``:
    nothing raises, no error for a file Python parses (a refusal because LibCST's round trip of the
    file is lossy is counted, not failed), output valid and only allowed edits, fixed findings
    gone, none added, a further ``plan`` changes nothing."""
    with warnings.catch_warnings():  # fwdlint compiles fixed code; odd code makes compile() warn
        warnings.simplefilter("ignore")
        _check_fix(outcome, style, directory)


REFUSED = "fix not applied: the fix would change existing line"


def _check_fix(outcome: Outcome, style: str, directory: Path) -> None:
    from lint_rules.engine import analyse
    from lint_rules.fix import run as fix

    program = outcome.program
    paths = write_program(program, directory)
    parses = {path: python_parses(data) for path, (_, data) in zip(paths, program.linted())}
    try:
        before = _key_findings(analyse(paths, _run(directory)).diagnostics)  # = what plan() reports
        run = fix.fix_in_passes(paths, _run(directory), style=style)  # what --fix does
    except Exception as error:  # noqa: BLE001
        outcome.fail(f"fix-raises[{style}]", f"{type(error).__name__}: {error}")
        return
    outcome.fixed_dirs[style] = directory
    for d in run.fixed:
        outcome.fixed[(style, d.code)] += 1
    for u in run.unfixed:
        outcome.unfixed[(style, re.sub(r"\S*\d\S*|'[^']*'", "…", u.reason)[:70])] += 1
        if u.reason.startswith("cannot find"):  # the fixer lost the finding's statement
            outcome.fail(f"fix-cannot-find[{style}]", f"{u.diagnostic.code} {u.diagnostic.symbol}: {u.reason}")
    for error in run.errors:
        if error.message.startswith(REFUSED) and "round trip" in _round_trip_note(error.path):
            # LibCST cannot reproduce this file byte for byte: the fix is refused and the file left
            # untouched (the safety gate working), counted rather than failed
            outcome.unfixed[(style, "refused: LibCST round trip")] += 1
        elif parses.get(error.path, True):
            outcome.fail(f"fix-error[{style}]", error.message + _round_trip_note(error.path))
    fixed_methods: dict[str, list[str]] = {}
    for d in run.fixed:
        if d.code == "FWD001" and style == "decorator":
            fixed_methods.setdefault(d.path, []).append(d.symbol.rpartition(".")[2])
    outcome.fixed_symbols[style] = [d.symbol for d in run.fixed if d.code == "FWD001"]
    changed = False
    for name, old in program.files:
        path = str(directory / name)
        new = Path(path).read_bytes()
        if new == old:
            continue
        if path not in paths:
            outcome.fail(f"fix-edits-other-file[{style}]", f"{name} was not given to fwdlint but changed")
            continue
        changed = True
        try:
            import libcst as cst

            cst.parse_module(new)
            compile(new, path, "exec", dont_inherit=True)
        except Exception as error:  # noqa: BLE001
            outcome.fail(f"fix-output-invalid[{style}]", f"{name}: {type(error).__name__}: {error}")
            continue
        why = changes_allowed(old, new, fixed_methods.get(path, []) if style == "decorator" else [])
        if why is not None:
            outcome.fail(f"fix-changes-other-lines[{style}]", f"{name}: {why}")
    if not changed and not run.fixed:
        return
    try:
        again = fix.plan(paths, _run(directory), style=style)
    except Exception as error:  # noqa: BLE001
        outcome.fail(f"fix-raises[{style}]", f"second pass: {type(error).__name__}: {error}")
        return
    now = _key_findings(_reported(again))
    gone = _key_findings(run.fixed)
    added = now - before
    if added:
        outcome.fail(f"fix-adds-finding[{style}]", ", ".join(f"{c} {s}" for _, c, s in sorted(added)))
    left = sorted(key for key in gone if now[key] > before[key] - gone[key])
    if left:
        outcome.fail(f"fix-leaves-fixed-finding[{style}]", ", ".join(f"{c} {s}" for _, c, s in left))
    again_errors = [e for e in again.errors if parses.get(e.path, True)
                    and not (e.message.startswith(REFUSED) and "round trip" in _round_trip_note(e.path))]
    if again.changed or again_errors:
        what = "; ".join([f"{Path(f.path).name} changes again" for f in again.changed]
                         + [e.message for e in again_errors])
        outcome.fail(f"fix-not-idempotent[{style}]", what)


# ----------------------------------------------------------------------------------------------
# Import check (subprocess) and CLI check
# ----------------------------------------------------------------------------------------------

_IMPORTER = r"""
import importlib, json, sys, unicodedata
def attempt(directory, names, symbols):
    sys.path.insert(0, directory)
    result = {}
    try:
        for name in names:
            importlib.import_module(name)
        result["ok"] = True
        from runtime_shim.marks import is_marked
        unmarked = []
        for symbol in symbols:  # Class.method as fwdlint names it; Python stores NFKC names
            obj = sys.modules.get(names[0])
            for part in symbol.split("."):
                obj = getattr(obj, unicodedata.normalize("NFKC", part), None) if obj is not None else None
            if obj is not None and not is_marked(obj):
                unmarked.append(symbol)
        result["unmarked"] = unmarked
    except BaseException as error:
        result["ok"] = False
        result["error"] = f"{type(error).__name__}: {error}"[:400]
    finally:
        sys.path.remove(directory)
        for name in names:
            sys.modules.pop(name, None)
    return result
out = [[attempt(d, names, symbols) for d, symbols in dirs] for names, dirs in json.loads(sys.argv[1])]
print(json.dumps(out))
"""


def import_check(outcomes: Sequence[Outcome], timeout: float = 300.0) -> None:
    """Import each program's original and fixed versions in one subprocess (torch loads once):
    if the original imports, every fixed version must, with the fixed methods marked."""
    chosen = [o for o in outcomes if o.program.executable and o.fixed_dirs]
    if not chosen:
        return
    spec = []
    for outcome in chosen:
        names = [name[:-3].replace("/", ".") for name, _ in
                 sorted(outcome.program.linted(), key=lambda f: f[0] != MODEL_FILE)]
        original = next(iter(outcome.fixed_dirs.values())).parent / "original"
        dirs = [(str(original), [])] + [(str(d), outcome.fixed_symbols.get(style, []) if style == "decorator" else [])
                                        for style, d in outcome.fixed_dirs.items()]
        spec.append((names, dirs))
    try:
        proc = subprocess.run([sys.executable, "-c", _IMPORTER, json.dumps(spec)], capture_output=True, text=True,
                              timeout=timeout, cwd=tempfile.gettempdir())
        results = json.loads(proc.stdout.strip().splitlines()[-1])
    except subprocess.TimeoutExpired:
        for outcome in chosen:
            outcome.fail("import-timeout", f"importing took more than {timeout:.0f} s")
        return
    except (ValueError, IndexError):
        for outcome in chosen:
            outcome.fail("import-crashed", proc.stderr.strip()[-300:])
        return
    for outcome, (first, *rest) in zip(chosen, results):
        outcome.file_errors["imports" if first["ok"] else "does-not-import"] += 1
        if not first["ok"]:
            continue
        for style, result in zip(outcome.fixed_dirs, rest):
            if not result["ok"]:
                outcome.fail(f"import[{style}]", f"the original imports, the fixed one does not: {result['error']}")
            elif result.get("unmarked"):
                outcome.fail(f"import-unmarked[{style}]", f"fixed but not marked at run time: {result['unmarked']}")


def _same_lint_rules() -> dict[str, str]:
    """The environment for a ``python -m lint_rules.cli`` that runs the lint_rules this process
    imported (not whatever the interpreter's installed copy points at)."""
    import lint_rules

    root = str(Path(lint_rules.__file__).resolve().parent.parent)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([root, *filter(None, [env.get("PYTHONPATH")])])
    return env


def cli_check(outcome: Outcome, workdir: Path) -> None:
    """``fwdlint --format json`` and ``fwdlint --fix`` through the command line agree with the API."""
    from lint_rules.engine import analyse

    program = outcome.program
    directory = workdir / "cli"
    paths = write_program(program, directory)
    names = [name for name, _ in program.linted()]
    proc = subprocess.run([sys.executable, "-m", "lint_rules.cli", "--format", "json", "--no-cache", *names],
                          cwd=directory, capture_output=True, text=True, timeout=300, env=_same_lint_rules())
    if "Traceback" in proc.stderr or proc.returncode not in (0, 1, 2):
        outcome.fail("cli-crashes", proc.stderr.strip()[-300:])
        return
    data = json.loads(proc.stdout)
    api = analyse(paths, _run(directory))
    cli_rows = sorted((d["path"], d["line"], d["col"], d["code"]) for d in data["diagnostics"])
    api_rows = sorted((Path(d.path).relative_to(directory).as_posix(), d.line, d.col + 1, d.code)
                      for d in api.diagnostics)
    if cli_rows != api_rows:
        outcome.fail("cli-differs", f"CLI {cli_rows[:4]} API {api_rows[:4]}")
    expected = 2 if api.errors else 1 if api.diagnostics else 0
    if proc.returncode != expected:
        outcome.fail("cli-exit-status", f"exit {proc.returncode}, expected {expected}")
    for style, fixed_dir in outcome.fixed_dirs.items():
        target = workdir / f"cli-{style}"
        write_program(program, target)
        proc = subprocess.run([sys.executable, "-m", "lint_rules.cli", "--fix", "--fix-style", style, "--no-cache",
                               *names], cwd=target, capture_output=True, text=True, timeout=300, env=_same_lint_rules())
        if "Traceback" in proc.stderr:
            outcome.fail(f"cli-crashes[{style}]", proc.stderr.strip()[-300:])
            continue
        for name in names:
            if (target / name).read_bytes() != (fixed_dir / name).read_bytes():
                outcome.fail(f"cli-fix-differs[{style}]", f"{name}: fwdlint --fix and fix.plan+write disagree")


def fresh_workdir(parent: Optional[Path] = None) -> Path:
    return Path(tempfile.mkdtemp(prefix="fwdfuzz-", dir=parent))


def discard(workdir: Path) -> None:
    shutil.rmtree(workdir, ignore_errors=True)
