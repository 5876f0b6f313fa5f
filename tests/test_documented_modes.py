"""Every mode ``FWD_SHIM_MODE`` accepts is documented where the modes are listed: the README's
quick look at ``runtime_shim.auto``, ``docs/runtime-shim.md`` (generated from the docstring:
``tests/test_docs.py`` keeps it in step) and ``runtime_shim.auto``'s docstring (issue 36, item 10:
``route`` worked but was in neither). Read as text: importing ``runtime_shim.auto`` would install the
shim."""

from __future__ import annotations

import ast
import re

from fixture_cases import ROOT

from lint_rules.contract import AUTO_MODES, DEFAULT_MODE


def test_the_readme_lists_every_mode() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    listed = re.search(r"import runtime_shim.auto +# FWD_SHIM_MODE=([^\n]*)", readme)
    assert listed, "the README's runtime_shim.auto line no longer lists the modes"
    modes = re.findall(r"\b(\w+)(?: \(default\))?(?:,| or|$)", listed[1])
    assert sorted(modes) == sorted(AUTO_MODES) and f"{DEFAULT_MODE} (default)" in listed[1], listed[1]


def test_the_runtime_page_says_what_each_mode_does() -> None:
    page = (ROOT / "docs" / "runtime-shim.md").read_text(encoding="utf-8")
    block = re.search(r"<!-- generated: shim-modes -->\n(.*?)<!-- end generated -->", page, re.DOTALL)
    assert block, "docs/runtime-shim.md lost its list of modes"
    for mode in AUTO_MODES:
        assert re.search(rf"^\* `{mode}`( \(the default\))?: \w", block[1], re.MULTILINE), (mode, block[1])


def test_the_auto_docstring_lists_every_mode() -> None:
    doc = ast.get_docstring(ast.parse((ROOT / "runtime_shim" / "auto.py").read_text(encoding="utf-8")))
    assert doc
    for mode in AUTO_MODES:
        assert re.search(rf"^\* ``{mode}``", doc, re.MULTILINE), (mode, doc)
