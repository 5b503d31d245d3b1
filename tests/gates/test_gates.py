"""The package passes its gates: `ruff check`, `ruff format --check` and `mypy` on `src`, with the tools installed
beside the Python that runs the tests (the `test` extra)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


@pytest.mark.parametrize(
    "command",
    [
        pytest.param(["ruff", "check", "src"], id="ruff-check"),
        pytest.param(["ruff", "format", "--check", "src"], id="ruff-format"),
        pytest.param(["mypy", "src"], id="mypy"),
    ],
)
def test_the_package_passes(command: list[str]) -> None:
    tool = BIN / command[0]
    assert tool.is_file(), f"{tool} is missing: install the test extra (pip install -e '.[test]')"

    done = subprocess.run([str(tool), *command[1:]], cwd=ROOT, capture_output=True, text=True, timeout=600)

    assert done.returncode == 0, f"{' '.join(command)} failed:\n{done.stdout}{done.stderr}"
