"""The deployment recipe of `docs/operations.md` (several workers: PostgreSQL and Redis), followed line by line.

`install_recipe` runs its install lines in a fresh virtual environment. `follow_recipe` runs the recipe's commands
with its variables, where only the hosts and ports are the caller's own (a fresh PostgreSQL database, a throwaway
Redis), and starts its `langflow run` with the workers it names.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import tomllib

from tests.support.redis_server import RedisServer
from tests.support.server_fixtures import (
    STARTUP_TIMEOUT_SECONDS,
    LangflowServer,
    langflow_executable,
    running_langflow_server,
    server_environment,
)

ROOT = Path(__file__).resolve().parents[2]
RECIPE_HEADING = "## Several workers and several servers"
INSTALL_TIMEOUT_SECONDS = 1_200


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


def run_line(command: list[str], environment: Mapping[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    """Run one line of the recipe from this checkout; fail with its output when it fails."""
    result = subprocess.run(
        command, cwd=ROOT, env=dict(environment), capture_output=True, text=True, timeout=timeout, check=False
    )
    if result.returncode != 0:
        msg = f"{shlex.join(command)} exited {result.returncode}:\n{result.stdout[-3000:]}{result.stderr[-3000:]}"
        raise RuntimeError(msg)
    return result


def install_recipe(venv: Path, timeout: float = INSTALL_TIMEOUT_SECONDS) -> dict[str, str]:
    """Create a virtual environment at `venv` and run the recipe's install lines in it, as in an activated one
    (`python`, `pip` and `langflow` are the fresh environment's); that environment's variables (no `LANGFLOW_*`)."""
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    bin_dir = venv / "bin"
    environment = {key: value for key, value in os.environ.items() if not key.startswith(("LANGFLOW_", "PYTHON"))}
    environment |= {"PATH": f"{bin_dir}{os.pathsep}{environment.get('PATH', '')}", "VIRTUAL_ENV": str(venv)}
    for line in deployment_recipe().install:
        run_line(line, environment, timeout)
    return environment


@contextmanager
def follow_recipe(
    work_dir: Path,
    database_url: str,
    redis: RedisServer,
    *,
    langflow: str | None = None,
    settings: Mapping[str, str] | None = None,
    startup_timeout: float = STARTUP_TIMEOUT_SECONDS,
) -> Iterator[LangflowServer]:
    """The recipe's exports and `langflow` lines, then its `langflow run`, with `langflow` (this environment's by
    default) and `settings` added to the exports (never replacing one)."""
    recipe = deployment_recipe()
    ours = {"LANGFLOW_DATABASE_URL": database_url, "LANGFLOW_REDIS_QUEUE_HOST": redis.host}
    ours["LANGFLOW_REDIS_QUEUE_PORT"] = str(redis.port)
    assert set(ours) <= set(recipe.exports), recipe.exports
    assert not set(settings or {}) & set(recipe.exports), f"{sorted(settings or {})} would replace the recipe's"
    every = {**recipe.exports, **ours, **(settings or {})}
    environment = {**server_environment(work_dir / "recipe-config", database_url), **every}
    executable = langflow or langflow_executable()
    for command in recipe.commands:
        run_line([executable, *command[1:]], environment, INSTALL_TIMEOUT_SECONDS)
    with running_langflow_server(
        work_dir,
        database_url,
        workers=recipe.workers,
        settings=every,
        executable=executable,
        startup_timeout=startup_timeout,
    ) as server:
        yield server
