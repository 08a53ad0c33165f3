"""Imports point one way: live → the conversation workflow → agents → the
library → artifacts → conversations' records, the interface modules (views, admin,
commands…) too but for the upward edges the contract names, the project's
shared helpers below them, and only live speaks to websockets; within the run
services, only the worker's execution executes a turn; no model imports a tool
(the contracts in pyproject.toml)."""

import subprocess
import sys
import tomllib
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
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    assert f"{len(contracts)} kept, 0 broken" in checked.stdout


@pytest.mark.parametrize("app", ["conversations", "projects"])
def test_every_module_of_a_split_app_is_in_one_of_its_layers(app):
    # conversations and projects are named module by module across two layers: a
    # module added to one and named in neither would be in no layer, its imports unchecked.
    contract = next(
        c
        for c in tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
        if c["id"] == "apps-one-way"
    )
    named = [name.strip() for layer in contract["layers"] for name in layer.split(":")]
    modules = sorted(
        f"{app}.{path.stem if path.is_file() else path.name}"
        for path in (ROOT / app).iterdir()
        if (path.suffix == ".py" and path.stem != "__init__") or (path / "__init__.py").exists()
    )

    assert modules == sorted(name for name in named if name.startswith(f"{app}."))
