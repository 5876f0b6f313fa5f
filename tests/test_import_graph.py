"""No import cycles between the modules of ``lint_rules`` and ``runtime_shim`` (issue 24).

The graph is read with ``ast``, never by importing: an edge for every ``import`` of a project
module, at the top of a module or inside a function (a function-level import that only dodges a
cycle is still a cycle), except those under ``if TYPE_CHECKING:`` (never executed). Every cycle
is reported, each by its modules and the lines that import.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Iterator, Union

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("lint_rules", "runtime_shim")

Graph = dict[str, dict[str, list[int]]]  # module -> imported module -> line numbers


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def project_modules(root: Path = ROOT, packages: tuple[str, ...] = PACKAGES) -> dict[str, Path]:
    return {_module_name(p, root): p for package in packages for p in sorted((root / package).rglob("*.py"))}


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> Iterator[Union[ast.Import, ast.ImportFrom]]:
    """Every import statement, at any depth, outside ``if TYPE_CHECKING:`` bodies."""
    for child in ast.iter_child_nodes(tree):
        if isinstance(child, ast.If) and _is_type_checking(child):
            for node in child.orelse:
                yield from _imports(ast.Module(body=[node], type_ignores=[]))
            continue
        if isinstance(child, (ast.Import, ast.ImportFrom)):
            yield child
        yield from _imports(child)


def _known(name: str, modules: dict[str, Path]) -> str:
    """The project module ``name`` refers to (itself, or the package holding the attribute), or ""."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name


def _targets(module: str, path: Path, node: Union[ast.Import, ast.ImportFrom], modules: dict[str, Path]) -> list[str]:
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        if node.level:
            package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
            base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
        else:
            base = node.module or ""
        # `from pkg import sub` imports the submodule; `from mod import name` imports mod
        names = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
    return [target for target in (_known(n, modules) for n in names) if target and target != module]


def import_graph(modules: dict[str, Path]) -> Graph:
    graph: Graph = {}
    for module, path in modules.items():
        edges = graph.setdefault(module, {})
        for node in _imports(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            for target in set(_targets(module, path, node, modules)):
                edges.setdefault(target, []).append(node.lineno)
    return graph


def cycles(graph: Graph) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in graph.get(node, {}):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def describe(component: list[str], graph: Graph) -> str:
    edges = [
        f"{a} -> {b} (line {', '.join(map(str, graph[a][b]))})"
        for a in component for b in component if b in graph[a]
    ]
    return " <-> ".join(component) + ": " + "; ".join(edges)


def test_project_import_graph_is_acyclic() -> None:
    graph = import_graph(project_modules())
    found = [describe(c, graph) for c in cycles(graph)]
    assert not found, "import cycles:\n" + "\n".join(found)


def _write(root: Path, files: dict[str, str]) -> dict[str, Path]:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return project_modules(root, ("pkg",))


def test_function_level_imports_count_and_type_checking_ones_do_not(tmp_path: Path) -> None:
    modules = _write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/a.py": "from pkg import b\n",
        "pkg/b.py": "def f():\n    from . import a\n",  # a cycle dodged by a function-level import
        "pkg/c.py": "from typing import TYPE_CHECKING\nfrom pkg.a import x\n"
                    "if TYPE_CHECKING:\n    from pkg import c2\n",
        "pkg/c2.py": "import pkg.c\n",
    })
    graph = import_graph(modules)
    assert graph["pkg.b"] == {"pkg.a": [2]}
    assert "pkg.c2" not in graph["pkg.c"]
    assert cycles(graph) == [["pkg.a", "pkg.b"]]
    assert describe(["pkg.a", "pkg.b"], graph) == "pkg.a <-> pkg.b: pkg.a -> pkg.b (line 1); pkg.b -> pkg.a (line 2)"


def test_every_cycle_is_reported(tmp_path: Path) -> None:
    modules = _write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/a.py": "import pkg.b\n",
        "pkg/b.py": "import pkg.a\n",
        "pkg/c.py": "from pkg.d import y\n",
        "pkg/d.py": "from .e import z\n",
        "pkg/e.py": "from .c import w\n",
    })
    assert cycles(import_graph(modules)) == [["pkg.a", "pkg.b"], ["pkg.c", "pkg.d", "pkg.e"]]
