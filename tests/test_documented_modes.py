"""Every mode ``FWD_SHIM_MODE`` accepts is documented where the modes are listed: the README's
``runtime_shim.auto`` block and ``runtime_shim.auto``'s docstring (issue 36, item 10: ``route``
worked but was in neither). Read as text: importing ``runtime_shim.auto`` would install the shim."""

from __future__ import annotations

import ast
import re

from fixture_cases import ROOT

from lint_rules.contract import AUTO_MODES, DEFAULT_MODE


def test_the_readme_lists_every_mode() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    listed = re.search(r"mode from FWD_SHIM_MODE: ([^;]*);", readme)
    assert listed, "the README's runtime_shim.auto block no longer lists the modes"
    modes = [m.strip().split()[0] for m in listed[1].split(",")]
    assert sorted(modes) == sorted(AUTO_MODES) and f"{DEFAULT_MODE} (default)" in listed[1], listed[1]
    block = readme[listed.start():readme.index("```", listed.start())]
    for mode in AUTO_MODES:  # and says what each does
        assert re.search(rf"#\s+(\w+ / )?{mode}(: | / )", block), (mode, block)


def test_the_auto_docstring_lists_every_mode() -> None:
    doc = ast.get_docstring(ast.parse((ROOT / "runtime_shim" / "auto.py").read_text(encoding="utf-8")))
    assert doc
    for mode in AUTO_MODES:
        assert re.search(rf"^\* ``{mode}``", doc, re.MULTILINE), (mode, doc)
