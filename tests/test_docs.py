"""The documentation keeps step with the code (issue 35): every page ``docs/generate.py`` writes
(the rule pages, the README's rule list, the configuration keys, the JSON fields, the shim's modes)
reads as the script would write it now, and the configuration page names every key the code accepts."""

from __future__ import annotations

import importlib.util
import re
from types import ModuleType

from fixture_cases import ROOT

from lint_rules import rules, settings


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("fwdlint_docs_generate", ROOT / "docs" / "generate.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_generated_pages_are_up_to_date() -> None:
    stale = [str(path.relative_to(ROOT)) for path, text in _generator().pages().items()
             if not path.exists() or path.read_text(encoding="utf-8") != text]
    assert not stale, f"out of date (run python docs/generate.py): {stale}"


def test_every_rule_has_a_page_and_a_readme_row() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for rule in rules.RULES:
        page = (ROOT / "docs" / "rules" / f"{rule.CODE}.md").read_text(encoding="utf-8")
        assert page.startswith("<!-- Generated") and f"# {rule.CODE} {rule.NAME}\n" in page
        assert f"[{rule.CODE}](docs/rules/{rule.CODE}.md)" in readme


def test_the_configuration_page_names_every_key() -> None:
    page = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    keys = re.search(r"<!-- generated: config-keys -->\n(.*?)<!-- end generated -->", page, re.DOTALL)
    assert keys, "the configuration page lost its generated key table"
    for key in settings.KEYS:
        assert f"| `{key}` |" in keys[1], key
    for key in settings.FLAKE8_KEYS:
        assert f"`fwd-{key}`" in keys[1], key


def test_the_pages_the_readme_links_exist() -> None:
    for name in ("README.md", "CONTRIBUTING.md", *(str(p.relative_to(ROOT)) for p in (ROOT / "docs").rglob("*.md"))):
        text = re.sub(r"```.*?```|`[^`\n]*`", "", (ROOT / name).read_text(encoding="utf-8"), flags=re.DOTALL)
        for target in re.findall(r"\]\(([^)#:]+?)(?:#[^)]*)?\)", text):
            assert (ROOT / name).parent.joinpath(target).exists(), (name, target)
