"""Name resolution for one file: imports and aliases, as a small map instead of scope analysis.

``import torch.nn as nn`` makes ``nn.Module`` resolve to ``torch.nn.Module``; ``from .base import
Model`` (in package ``pkg.models``) makes ``Model`` resolve to ``pkg.models.base.Model``; a class
defined at the top of the file resolves to ``<module>.<Name>``. Imports anywhere in the file count
(a function-local import is still the name the code means). The collectors share this one
resolver; full scope analysis (LibCST's QualifiedNameProvider) cost TorchFix ~60% of its run time.
"""

from __future__ import annotations

import ast
import re
from typing import Optional

from lint_rules.facts.model import DESCRIPTORS
from lint_rules.facts.walk import dotted_name, string_value

_NON_NAMES = ("None", "Optional", "Union")


class Names:
    def __init__(self, module: str, is_package: bool) -> None:
        self.module = module
        self.package = module if is_package else module.rpartition(".")[0]
        self.imports: dict[str, str] = {}  # local name -> dotted target ("pkg.mod.Name")
        self.stars: list[str] = []  # modules imported with `from M import *`
        self.top_classes: set[str] = set()  # classes defined at the top of the file
        self.lines: dict[str, int] = {}  # local name (``*module`` for a star) -> line of its first import
        self.run_time: list[str] = []  # module-level names bound to what a call or lookup returns

    def resolve(self, dotted: str) -> str:
        head, _, rest = dotted.partition(".")
        target = self.imports.get(head)
        if target is None:
            if head in self.top_classes:
                target = f"{self.module}.{head}" if self.module else head
            else:
                return dotted
        return f"{target}.{rest}" if rest else target

    def dotted_ref(self, expr: Optional[ast.expr]) -> Optional[str]:
        dotted = dotted_name(expr)
        return self.resolve(dotted) if dotted else None

    def annotation_ref(self, annotation: Optional[ast.expr]) -> str:
        """The class an annotation names, unwrapping ``Optional[X]``, ``X | None`` and strings."""
        if annotation is None:
            return ""
        expr: ast.expr = annotation
        text = string_value(expr)
        if text is not None:  # "nn.Module | None", "Optional[Encoder]"
            names = re.findall(r"[A-Za-z_][\w.]*", text)
            names = [n for n in names if n.rsplit(".", 1)[-1] not in _NON_NAMES]
            return self.resolve(names[0]) if names else ""
        while True:
            if type(expr) is ast.BinOp and type(expr.op) is ast.BitOr:  # X | None
                left = "None" if type(expr.left) is ast.Constant and expr.left.value is None else \
                    self.dotted_ref(expr.left)
                expr = expr.right if left in (None, "None") else expr.left
            elif type(expr) is ast.Subscript and (dotted_name(expr.value) or "").rsplit(".", 1)[-1] in (
                    "Optional", "Union"):
                inner = expr.slice
                first = inner.elts[0] if type(inner) is ast.Tuple and inner.elts else inner
                expr = expr.value if type(first) is ast.Slice else first
            elif type(expr) is ast.Constant and expr.value is None:
                return "None"  # `-> None`, `list[int] | None`: said to be no module (not unknown)
            else:
                return self.dotted_ref(expr) or ""

    def absolute(self, module: Optional[str], dots: int) -> str:
        """The absolute module a (possibly relative) ``from`` import names."""
        name = module or ""
        if not dots:
            return name
        parts = self.package.split(".") if self.package else []
        base = parts[: len(parts) - (dots - 1)] if dots > 1 else parts
        return ".".join([*base, name] if name else base)

    def on_import(self, node: ast.Import | ast.ImportFrom) -> None:
        if type(node) is ast.Import:
            for alias in node.names:
                if alias.asname is not None:
                    self.imports[alias.asname] = alias.name
                    self.lines.setdefault(alias.asname, node.lineno)
                else:
                    head = alias.name.split(".", 1)[0]
                    self.imports.setdefault(head, head)
                    self.lines.setdefault(head, node.lineno)
            return
        base = self.absolute(node.module, node.level)
        if node.names[0].name == "*":
            self.stars.append(base)
            self.lines.setdefault(f"*{base}", node.lineno)
            return
        for alias in node.names:
            self.imports[alias.asname or alias.name] = f"{base}.{alias.name}" if base else alias.name
            self.lines.setdefault(alias.asname or alias.name, node.lineno)

    def on_alias(self, small: ast.Assign, top: bool = False) -> None:
        """``_static = staticmethod`` in a module or class body: ``@_static`` then means
        ``staticmethod`` (a method under it is no instance method, and must not be marked).
        ``top``: at module level, where a name bound to what a call or a lookup returns
        (``X, ok = optional_import(...)``, ``X = MAPPING[k]``) is bound at run time."""
        value = small.value
        if type(value) is ast.Call and value.args and len(small.targets) == 1 and type(small.targets[0]) is ast.Name \
                and self.resolve(dotted_name(value.func) or "") == "functools.partial":
            first = dotted_name(value.args[0])  # `LinearNoBias = partial(nn.Linear, bias=False)`: builds that class
            if first is not None:
                self.imports.setdefault(small.targets[0].id, self.resolve(first))
                return
        if top and type(value) in (ast.Call, ast.Subscript):
            for target in small.targets:
                for name in (target.elts if type(target) is ast.Tuple else (target,)):
                    if type(name) is ast.Name and name.id not in self.imports:
                        self.run_time.append(name.id)
        if len(small.targets) != 1 or type(small.targets[0]) is not ast.Name:
            return
        dotted = dotted_name(small.value)
        resolved = self.resolve(dotted) if dotted else ""
        if resolved.rpartition(".")[2] in DESCRIPTORS:
            self.imports.setdefault(small.targets[0].id, resolved)

    def decorators(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> tuple[str, ...]:
        """``@torch.no_grad()`` -> ``torch.no_grad``; unreadable decorators become ``?``."""
        found = []
        for expr in node.decorator_list:
            callee = expr.func if type(expr) is ast.Call else expr
            found.append(self.resolve(dotted_name(callee) or "?"))
        return tuple(found)

    def as_facts(self) -> tuple[tuple[str, str], ...]:
        return tuple(self.imports.items()) + tuple(("*", star) for star in self.stars)

    def lines_as_facts(self) -> tuple[tuple[str, int], ...]:
        return tuple(self.lines.items())
