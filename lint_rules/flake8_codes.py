"""The flake8 plugin's reading of flake8's code selection: codes meant for fwdlint that name no rule
are refused (``refuse_unknown_codes``), and a run that checks FWD codes also selects the codes flake8
gives files no plugin can check (``select_unparsable``)."""

from __future__ import annotations

import argparse
import re
import sys
from typing import Iterator

#: flake8's own codes for a file it cannot read or tokenize (E902) or parse (E999): it runs no
#: plugin on such a file, so FWD000 cannot be reported there (``select_unparsable``).
UNPARSABLE = ("E902", "E999")


def _fwd_entries(options: argparse.Namespace) -> Iterator[tuple[str, str]]:
    """(option, entry) for every code in flake8's selection options that may be fwdlint's to judge:
    it starts with ``FW`` in any case (as the gate in ``flake8_plugin.Plugin.parse_options`` reads
    it), or with letters a slip away from ``FWD`` (``_meant_for_fwdlint``); other codes belong to
    other plugins, and flake8 owns them."""
    for name in ("select", "extend_select", "ignore", "extend_ignore"):
        for entry in getattr(options, name, None) or ():
            yield f"--{name.replace('_', '-')}", entry
    per_file = getattr(options, "per_file_ignores", "") or ""
    if "FW" in per_file.upper() or any(map(_meant_for_fwdlint, re.findall(r"[A-Za-z]+[0-9]*", per_file))):
        from flake8.utils import parse_files_to_codes_mapping  # flake8's own reading of its option

        for _, codes in parse_files_to_codes_mapping(per_file):
            yield from (("--per-file-ignores", code) for code in codes)


def _meant_for_fwdlint(entry: str) -> bool:
    """A code whose letters are a slip away from ``FWD`` (``FDW001``, ``FD001``, ``DWF``, ``fdw``: two of
    its letters in order, 2 to 4 letters) and that no installed flake8 plugin owns (the letters of
    each ``flake8.extension`` entry point's name: ``E``, ``F``, ``C``, ``B``, ...; local plugins are not
    seen), when fwdlint knows the code meant (``rule_codes.close_codes``). flake8 itself accepts any
    code, so ``--select FDW001`` would select nothing and pass forever."""
    import difflib

    letters = re.match(r"[A-Za-z]*", entry)[0].upper()  # type: ignore[index]
    if letters.startswith("FW") or not 2 <= len(letters) <= 4 or difflib.SequenceMatcher(
            None, letters, "FWD").ratio() < 0.6:
        return False
    from lint_rules.rule_codes import close_codes

    if not close_codes(entry):
        return False
    from importlib.metadata import entry_points

    owned = {re.match(r"[A-Z]*", ep.name)[0] for ep in entry_points(group="flake8.extension")}  # type: ignore[index]
    return letters not in owned


def refuse_unknown_codes(options: argparse.Namespace) -> None:
    """``flake8 --select FWD01`` (or ``fwd001``, ``FWD999``) would select no FWD rule and pass
    forever: one error line and exit status 2, as flake8's own usage errors. So would a slip in the
    prefix (``FDW001``, ``FD001``) that no installed plugin owns (``_meant_for_fwdlint``); the error
    says which code was meant."""
    for option, entry in _fwd_entries(options):
        if entry == "FWD000" or not (entry.upper().startswith("FW") or _meant_for_fwdlint(entry)):
            continue  # FWD000: the plugin's "cannot check"
        from lint_rules.bounded import printable
        from lint_rules.rule_codes import code_problem

        problem = code_problem(entry)
        if problem:
            sys.stderr.write(f"fwdlint: error: flake8 {option} {printable(entry)}: {problem}\n")
            raise SystemExit(2)


def select_unparsable(options: argparse.Namespace) -> None:
    """flake8 runs no plugin on a file Python cannot parse and reports E999 (E902: cannot read or
    tokenize) instead, which ``--select FWD`` filters out: such a file would pass as clean. So a
    run that checks FWD codes also selects those two, unless ``--ignore``/``--extend-ignore``
    names them (or a prefix of them)."""
    try:
        from flake8.style_guide import Decision, DecisionEngine

        engine = DecisionEngine(options)
    except (ImportError, AttributeError):  # a flake8 without the decision engine selects everything
        return
    ignored = [*(getattr(options, "ignore", None) or ()), *(getattr(options, "extend_ignore", None) or ())]
    add = [code for code in UNPARSABLE
           if engine.decision_for(code) is not Decision.Selected and not code.startswith(tuple(ignored))]
    if add:
        options.extend_select = [*(getattr(options, "extend_select", None) or ()), *add]
