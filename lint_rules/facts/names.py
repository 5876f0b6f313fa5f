"""Name resolution for one file: imports and aliases, as a small map instead of scope analysis.

``import torch.nn as nn`` makes ``nn.Module`` resolve to ``torch.nn.Module``; ``from .base import
Model`` (in package ``pkg.models``) makes ``Model`` resolve to ``pkg.models.base.Model``; a class
defined at the top of the file resolves to ``<module>.<Name>``. Imports anywhere in the file count
(a function-local import is still the name the code means). Collectors and fixers share this one
resolver; full scope analysis (LibCST's QualifiedNameProvider) cost TorchFix ~60% of its run time.
"""

from __future__ import annotations

import re
from typing import Optional

import libcst as cst

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

    def resolve(self, dotted: str) -> str:
        head, _, rest = dotted.partition(".")
        target = self.imports.get(head)
        if target is None:
            if head in self.top_classes:
                target = f"{self.module}.{head}" if self.module else head
            else:
                return dotted
        return f"{target}.{rest}" if rest else target

    def dotted_ref(self, expr: Optional[cst.BaseExpression]) -> Optional[str]:
        if expr is None:
            return None
        dotted = dotted_name(expr)
        return self.resolve(dotted) if dotted else None

    def annotation_ref(self, annotation: Optional[cst.Annotation]) -> str:
        """The class an annotation names, unwrapping ``Optional[X]``, ``X | None`` and strings."""
        if annotation is None:
            return ""
        expr: cst.BaseExpression = annotation.annotation
        if isinstance(expr, cst.SimpleString):  # "nn.Module | None", "Optional[Encoder]"
            names = re.findall(r"[A-Za-z_][\w.]*", string_value(expr) or "")
            names = [n for n in names if n.rsplit(".", 1)[-1] not in _NON_NAMES]
            return self.resolve(names[0]) if names else ""
        while True:
            if isinstance(expr, cst.BinaryOperation):  # X | None
                left = self.dotted_ref(expr.left)
                expr = expr.right if left in (None, "None") else expr.left
            elif isinstance(expr, cst.Subscript) and (dotted_name(expr.value) or "").rsplit(".", 1)[-1] in (
                    "Optional", "Union") and expr.slice:
                first = expr.slice[0].slice
                expr = first.value if isinstance(first, cst.Index) else expr.value
            else:
                return self.dotted_ref(expr) or ""

    def absolute(self, module: Optional[cst.BaseExpression], dots: int) -> str:
        """The absolute module a (possibly relative) ``from`` import names."""
        name = dotted_name(module) if module is not None else ""
        if not dots:
            return name or ""
        parts = self.package.split(".") if self.package else []
        base = parts[: len(parts) - (dots - 1)] if dots > 1 else parts
        return ".".join([*base, name] if name else base)

    def on_import(self, node: cst.Import | cst.ImportFrom) -> None:
        if isinstance(node, cst.Import):
            for alias in node.names:
                full = dotted_name(alias.name) or ""
                if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                    self.imports[alias.asname.name.value] = full
                else:
                    head = full.split(".", 1)[0]
                    self.imports.setdefault(head, head)
            return
        base = self.absolute(node.module, len(node.relative))
        if isinstance(node.names, cst.ImportStar):
            self.stars.append(base)
            return
        for alias in node.names:
            name = dotted_name(alias.name) or ""
            local = alias.asname.name.value if alias.asname is not None and isinstance(
                alias.asname.name, cst.Name) else name
            self.imports[local] = f"{base}.{name}" if base else name

    def on_alias(self, small: cst.Assign) -> None:
        """``_static = staticmethod`` in a module or class body: ``@_static`` then means
        ``staticmethod`` (a method under it is no instance method, and must not be marked)."""
        if len(small.targets) != 1 or not isinstance(small.targets[0].target, cst.Name):
            return
        dotted = dotted_name(small.value)
        resolved = self.resolve(dotted) if dotted else ""
        if resolved.rpartition(".")[2] in DESCRIPTORS:
            self.imports.setdefault(small.targets[0].target.value, resolved)

    def decorators(self, node: cst.FunctionDef | cst.ClassDef) -> tuple[str, ...]:
        """``@torch.no_grad()`` -> ``torch.no_grad``; unreadable decorators become ``?``."""
        found = []
        for decorator in node.decorators:
            expr = decorator.decorator
            callee = expr.func if isinstance(expr, cst.Call) else expr
            found.append(self.resolve(dotted_name(callee) or "?"))
        return tuple(found)

    def as_facts(self) -> tuple[tuple[str, str], ...]:
        return tuple(self.imports.items()) + tuple(("*", star) for star in self.stars)
