"""The scale-out recipe of docs/operations.md installs as written: its install lines, run in a fresh virtual
environment from this checkout, give a `langflow` with the extension and the PostgreSQL driver, and the recipe's
`langflow summarizing-agent migrate` migrates a fresh PostgreSQL database from it.

Slow: the install brings Langflow whole (uv's cache, warm after the suite's own install, makes it about a minute).
`test_two_workers.py` starts its server by the rest of the recipe.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.deployment_recipe import ROOT, deployment_recipe
from tests.support.postgres_database import fresh_postgres_database

pytestmark = [pytest.mark.server, pytest.mark.postgres]

INSTALL_TIMEOUT_SECONDS = 1_200


def _run(command: list[str], environment: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        command, cwd=ROOT, env=environment, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert result.returncode == 0, f"{shlex.join(command)}:\n{result.stdout[-3000:]}{result.stderr[-3000:]}"
    return result


def test_the_recipes_install_lines_install_the_extension_in_a_fresh_environment(tmp_path: Path) -> None:
    recipe = deployment_recipe()
    subprocess.run([sys.executable, "-m", "venv", str(tmp_path / "venv")], check=True)
    bin_dir = tmp_path / "venv" / "bin"
    # As in an activated environment: `python`, `pip` and `langflow` are the fresh environment's.
    environment = {key: value for key, value in os.environ.items() if not key.startswith(("LANGFLOW_", "PYTHON"))}
    environment |= {"PATH": f"{bin_dir}{os.pathsep}{environment.get('PATH', '')}", "VIRTUAL_ENV": str(bin_dir.parent)}

    for line in recipe.install:
        _run(line, environment, INSTALL_TIMEOUT_SECONDS)

    _run(["python", "-c", "import langflow_summarizing_agent, psycopg"], environment, 120)
    with fresh_postgres_database("summarizing_agent_recipe") as database_url:
        for command in recipe.commands:
            found = _run(command, {**environment, "LANGFLOW_DATABASE_URL": database_url}, 300)
            assert "revision" in found.stdout.lower(), found.stdout
