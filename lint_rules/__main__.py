"""``python -m lint_rules``: the ``fwdlint`` command, for environments where the console script is
not on ``PATH`` (a virtualenv that is not activated, ``python -m`` habits)."""

from __future__ import annotations

import sys

from lint_rules.cli import main

if __name__ == "__main__":
    sys.exit(main())
