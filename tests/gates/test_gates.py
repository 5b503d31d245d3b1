"""The code passes its gates: `ruff check`, `ruff format --check` and `mypy` on the package, its tests and its
benchmarks, with the tools installed beside the Python that runs the tests (the `test` extra). They start the tools as
processes, so they live here and not in the unit layer."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
CHECKED = ["src", "tests", "benchmarks"]


@pytest.mark.parametrize(
    "command",
    [
        pytest.param(["ruff", "check", *CHECKED], id="ruff-check"),
        pytest.param(["ruff", "format", "--check", *CHECKED], id="ruff-format"),
        pytest.param(["mypy", *CHECKED], id="mypy"),
    ],
)
def test_the_code_passes(command: list[str]) -> None:
    tool = BIN / command[0]
    assert tool.is_file(), f"{tool} is missing: install the test extra (pip install -e '.[test]')"

    done = subprocess.run([str(tool), *command[1:]], cwd=ROOT, capture_output=True, text=True, timeout=600)

    assert done.returncode == 0, f"{' '.join(command)} failed:\n{done.stdout}{done.stderr}"
