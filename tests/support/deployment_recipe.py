"""The deployment recipe of `docs/operations.md` (several workers: PostgreSQL and Redis), followed line by line.

`follow_recipe` runs the recipe's commands with its variables, where only the hosts and ports are the test's own (a
fresh PostgreSQL database, a throwaway Redis), and starts its `langflow run` with the workers it names.
"""

from __future__ import annotations

import re
import shlex
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import tomllib

from tests.support.redis_server import RedisServer
from tests.support.server_fixtures import (
    LangflowServer,
    langflow_executable,
    running_langflow_server,
    server_environment,
)

ROOT = Path(__file__).resolve().parents[2]
RECIPE_HEADING = "## Several workers and several servers"


@dataclass(frozen=True)
class Recipe:
    extra: str
    """The package extra the recipe installs."""
    install: list[list[str]]
    """The install lines, run by `python` in the environment Langflow runs from."""
    exports: dict[str, str]
    commands: list[list[str]]
    """The `langflow ...` lines before the server starts."""
    workers: int


def deployment_recipe() -> Recipe:
    page = (ROOT / "docs" / "operations.md").read_text(encoding="utf-8")
    section = page[page.index(RECIPE_HEADING) :]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block, f"no bash block under {RECIPE_HEADING!r}"
    lines = [shlex.split(line) for line in block.group(1).splitlines() if line.strip()]
    install = [line for line in lines if line[0] == "python"]
    extras = [found.group(1) for line in install for word in line if (found := re.fullmatch(r"\.\[(\w+)\]", word))]
    assert len(extras) == 1, install
    exports = dict(line[1].split("=", 1) for line in lines if line[0] == "export")
    commands = [line for line in lines if line[0] == "langflow"]
    run = commands.pop()
    assert run[:2] == ["langflow", "run"], run
    return Recipe(extras[0], install, exports, commands, int(run[run.index("--workers") + 1]))


def extra_requirements(extra: str) -> list[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return project["optional-dependencies"][extra]


@contextmanager
def follow_recipe(work_dir: Path, database_url: str, redis: RedisServer) -> Iterator[LangflowServer]:
    recipe = deployment_recipe()
    ours = {"LANGFLOW_DATABASE_URL": database_url, "LANGFLOW_REDIS_QUEUE_HOST": redis.host}
    ours["LANGFLOW_REDIS_QUEUE_PORT"] = str(redis.port)
    assert set(ours) <= set(recipe.exports), recipe.exports
    settings = {**recipe.exports, **ours}
    environment = {**server_environment(work_dir / "recipe-config", database_url), **settings}
    for command in recipe.commands:
        result = subprocess.run(
            [langflow_executable(), *command[1:]], env=environment, capture_output=True, text=True, check=False
        )
        assert result.returncode == 0, f"{shlex.join(command)}:\n{result.stdout[-2000:]}{result.stderr[-2000:]}"
    with running_langflow_server(work_dir, database_url, workers=recipe.workers, settings=settings) as server:
        yield server
