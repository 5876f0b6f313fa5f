"""pytest and fwdlint run as a user runs them, in a project directory: fresh processes, with none of
this test session's pytest or fwdlint environment variables (shared by the pytest plugin's tests)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Optional


def clean_env(extra: Optional[dict[str, str]] = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "FWD_"))}
    env["COLUMNS"] = "300"  # the short summary lines whole
    return {**env, **(extra or {})}


def run_pytest(project: Path, *args: str, env: Optional[dict[str, str]] = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rA", *args],
                          cwd=project, capture_output=True, text=True, timeout=800, env=clean_env(env))


def run_fwdlint(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "lint_rules.cli", *args], cwd=project, capture_output=True,
                          text=True, timeout=300, env=clean_env())
