"""Imports point one way: live → agents → artifacts → conversations, the
interface modules (views, admin, commands…) on top of all four, the project's
shared helpers below them, and only live speaks to websockets; within the run
services, only the worker's execution executes a turn (the contracts in
pyproject.toml)."""

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.processes

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def test_no_app_imports_upward():
    # No cache: the check leaves nothing behind in the tree.
    checked = subprocess.run(
        [LINT_IMPORTS, "--config", ROOT / "pyproject.toml", "--no-cache", "--no-logo"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "4 kept, 0 broken" in checked.stdout
