"""The scale-out recipe of docs/operations.md installs as written: its install lines, run in a fresh virtual
environment from this checkout, give a `langflow` with the extension and the PostgreSQL driver, and the recipe's
`langflow summarizing-agent migrate` migrates a fresh PostgreSQL database from it.

Slow: the install brings Langflow whole (uv's cache, warm after the suite's own install, makes it about a minute).
`test_two_workers.py` starts its server by the rest of the recipe.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.deployment_recipe import deployment_recipe, install_recipe, run_line
from tests.support.postgres_database import fresh_postgres_database

pytestmark = [pytest.mark.server, pytest.mark.postgres]


def test_the_recipes_install_lines_install_the_extension_in_a_fresh_environment(tmp_path: Path) -> None:
    environment = install_recipe(tmp_path / "venv")

    run_line(["python", "-c", "import langflow_summarizing_agent, psycopg"], environment, 120)
    with fresh_postgres_database("summarizing_agent_recipe") as database_url:
        for command in deployment_recipe().commands:
            found = run_line(command, {**environment, "LANGFLOW_DATABASE_URL": database_url}, 300)
            assert "revision" in found.stdout.lower(), found.stdout
