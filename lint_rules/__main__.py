"""``python -m lint_rules``: the ``fwdlint`` command, for environments where the console script is
not on ``PATH`` (a virtualenv that is not activated, ``python -m`` habits).

``python -m`` puts the working directory first on ``sys.path``; a checked project's own ``json.py``
or ``libcst.py`` would then replace the modules fwdlint imports. So that entry is dropped before
anything else is imported (``lint_rules`` itself is imported already: its submodules come from
its ``__path__``). In a source checkout run from its root, the directory holding ``lint_rules`` is
kept, but last: installed modules come first.
"""

from __future__ import annotations

import os
import sys


def _drop_working_directory(path: list[str]) -> None:
    """Remove the working directory ``-m`` put first on ``path``; re-add it last if it holds ``lint_rules``."""
    if not path:
        return
    try:
        cwd = os.path.realpath(os.getcwd())
    except OSError:  # the working directory is gone: nothing can be imported from it
        return
    if os.path.realpath(path[0] or os.curdir) != cwd:  # -P / PYTHONSAFEPATH: nothing was added
        return
    del path[0]
    home = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
    if home == cwd and cwd not in (os.path.realpath(entry or os.curdir) for entry in path):
        path.append(cwd)  # a source checkout that is not installed: multiprocessing children need it


if __name__ == "__main__":  # not when imported: another program's sys.path is its own business
    _drop_working_directory(sys.path)
    from lint_rules.cli import main  # after sys.path is cleaned

    sys.exit(main())
