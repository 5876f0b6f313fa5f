"""The linter half must install and run without torch (pre-commit environments)."""

from __future__ import annotations

import subprocess
import sys

from fixture_cases import FIXTURES, ROOT

BLOCK_TORCH = "import sys; sys.modules['torch'] = None; sys.modules['lightning'] = None; "


def test_linter_and_decorator_run_with_torch_unimportable() -> None:
    code = BLOCK_TORCH + (
        "from runtime_shim import forward_entry\n"
        "from lint_rules.cli import main\n"
        "import lint_rules.flake8_plugin\n"
        f"sys.exit(main(['--no-cache', {str(FIXTURES / 'demo_project')!r}]))\n"  # nothing written into fixtures/
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.count("FWD001") == 2
