"""``python -m lint_rules``: the ``fwdlint`` command, for environments where the console script is
not on ``PATH`` (a virtualenv that is not activated, ``python -m`` habits). The working directory
is off ``sys.path`` already (``lint_rules/__init__.py``)."""

import sys

from lint_rules.cli import main

if __name__ == "__main__":
    sys.exit(main())
