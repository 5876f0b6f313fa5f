"""Options shared by both front ends, and reading them from setup.cfg / tox.ini / .flake8.

The CLI reads a ``[fwdlint]`` section (keys ``module-bases``, ``mark-decorators``, ``select``,
``ignore``, ``exclude``, ``python-executable``) and falls back to the flake8 plugin's keys in ``[flake8]``
(``fwd-module-bases``, ``fwd-mark-decorators``), so one configuration serves both.
"""

from __future__ import annotations

import configparser
import re
from pathlib import Path

CONFIG_FILES = ("setup.cfg", "tox.ini", ".flake8")


def split_list(value: str | None) -> tuple[str, ...]:
    if not value:
        return ()
    return tuple(item for item in re.split(r"[,\s]+", value.strip()) if item)


def read_config(directory: Path) -> dict[str, tuple[str, ...]]:
    """Settings from the first config file in ``directory`` that has any."""
    for name in CONFIG_FILES:
        path = directory / name
        try:
            if not path.is_file():
                continue
        except OSError:  # a directory this user may not search (is_file raises on EACCES)
            continue
        parser = configparser.RawConfigParser()
        try:
            parser.read(path, encoding="utf-8")
        except (configparser.Error, UnicodeDecodeError):
            continue
        found: dict[str, tuple[str, ...]] = {}
        if parser.has_section("flake8"):
            for key in ("module-bases", "mark-decorators", "python-executable"):
                for variant in (f"fwd-{key}", f"fwd_{key.replace('-', '_')}"):
                    if parser.has_option("flake8", variant):
                        found[key] = split_list(parser.get("flake8", variant))
        if parser.has_section("fwdlint"):
            for key, value in parser.items("fwdlint"):
                found[key.replace("_", "-")] = split_list(value)
        if found:
            return found
    return {}
