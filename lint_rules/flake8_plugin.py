"""flake8 front end (thin): ``FWD`` codes from the same engine the ``fwdlint`` CLI uses.

flake8 runs every installed plugin on every file, so the plugin gates itself: when no FWD code
is selected (``flake8 --select E,F,W``) it does no parsing at all. flake8 applies ``# noqa``
and reports syntax errors itself; a file LibCST cannot parse yields nothing here.

Registrations (``mark_forward_method("name")``) count from every file flake8 was asked to check,
as in the CLI. Each file is otherwise analysed on its own, with the files it imports loaded as
needed, so two things need the CLI's whole-run view: mixins recognised through a subclass in
another file, and private helpers called only from a subclass in another file.
"""

from __future__ import annotations

import argparse
import ast
from pathlib import Path
from typing import Any, ClassVar, Iterator, Optional

import libcst as cst

from lint_rules import contract
from lint_rules.discover import python_files
from lint_rules.engine import check_file, decode, facts_from_source, new_index
from lint_rules.extract import extract
from lint_rules.project import Config, module_name_for
from lint_rules.rules import RULES

VERSION = "0.1.0"


def _marks_from(paths: list[str]) -> list:
    """Facts of the given files that contain registration calls (found by a text prefilter)."""
    found = []
    for path in python_files(paths):
        try:
            source = decode(Path(path).read_bytes())
        except (OSError, UnicodeDecodeError, SyntaxError, LookupError):
            continue
        if contract.MARK_METHOD_CALL in source or contract.FSDP_REGISTER_CALL in source:
            try:
                found.append(extract(source, path))
            except cst.ParserSyntaxError:
                continue
    return found


class Plugin:
    name = "fwdlint"
    version = VERSION

    enabled_codes: ClassVar[tuple[str, ...]] = tuple(rule.CODE for rule in RULES)
    config: ClassVar[Config] = Config()
    mark_facts: ClassVar[Optional[list]] = None
    filenames: ClassVar[list[str]] = []

    def __init__(self, tree: ast.AST, lines: list[str], filename: str) -> None:
        self.lines = lines
        self.filename = filename

    @classmethod
    def add_options(cls, parser: Any) -> None:
        parser.add_option("--fwd-module-bases", default="", parse_from_config=True,
                          comma_separated_list=True,
                          help="FWD: extra base classes that are nn.Module subclasses")
        parser.add_option("--fwd-mark-decorators", default=",".join(contract.DEFAULT_MARK_DECORATORS),
                          parse_from_config=True, comma_separated_list=True,
                          help="FWD: decorator names that mark a forward entry point")

    @classmethod
    def parse_options(cls, options: argparse.Namespace) -> None:
        cls.config = Config(module_bases=tuple(options.fwd_module_bases or ()),
                            mark_decorators=tuple(options.fwd_mark_decorators or ()))
        try:
            from flake8.style_guide import Decision, DecisionEngine

            engine = DecisionEngine(options)
            cls.enabled_codes = tuple(rule.CODE for rule in RULES
                                      if engine.decision_for(rule.CODE) is Decision.Selected)
        except (ImportError, AttributeError):  # a flake8 without the decision engine: run everything
            cls.enabled_codes = tuple(rule.CODE for rule in RULES)
        cls.filenames = list(getattr(options, "filenames", None) or ["."])
        cls.mark_facts = None

    def run(self) -> Iterator[tuple[int, int, str, type]]:
        if not self.enabled_codes:
            return
        source = "".join(self.lines)
        real = Path(self.filename) if self.filename not in ("stdin", "-") else None
        try:
            facts = facts_from_source(source, self.filename, real)
        except (cst.ParserSyntaxError, RecursionError):
            return  # flake8 reports syntax errors (E999) itself
        if Plugin.mark_facts is None:
            Plugin.mark_facts = _marks_from(self.filenames) if self.enabled_codes else []
        index = new_index(self.config)
        index.add(facts, module_name_for(real)[2] if real is not None else None)
        index.add_marks(Plugin.mark_facts)
        for diagnostic in check_file(index, facts, self.enabled_codes, (), honour_noqa=False):
            yield diagnostic.line, diagnostic.col, f"{diagnostic.code} {diagnostic.message}", type(self)
