"""Langflow's services in this process on a fresh database (a SQLite file or a new Postgres database), removed after.

The same start-up a Langflow worker does; the benchmarks use `langflow_services`, the test suite's `langflow_db`
fixture does the same with `langflow_environment`.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

from tests.support.postgres_database import postgres_database

BACKENDS = ("sqlite", "postgres")


@asynccontextmanager
async def langflow_services(backend: str) -> AsyncIterator[str]:
    """Start Langflow's services on a fresh `backend` database; yield its URL; stop them and remove the database."""
    if backend not in BACKENDS:
        msg = f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}"
        raise ValueError(msg)
    from langflow.services.utils import initialize_services, teardown_services

    # Loaded before Langflow starts, as in a worker with the extension installed.
    import langflow_summarizing_agent.storage.models  # noqa: F401

    config_dir = Path(tempfile.mkdtemp(prefix=f"summarizing-agent-benchmark-{backend}-"))
    try:
        with _database(backend, config_dir) as url, langflow_environment(url, config_dir):
            await initialize_services()
            try:
                yield url
            finally:
                await teardown_services()
    finally:
        shutil.rmtree(config_dir, ignore_errors=True)


def database_backend() -> str:
    """The backend of the database Langflow's running services use."""
    from langflow.services.deps import get_db_service

    dialect = get_db_service().engine.dialect.name
    return "postgres" if dialect == "postgresql" else dialect


@contextmanager
def _database(backend: str, config_dir: Path) -> Iterator[str]:
    if backend == "sqlite":
        yield f"sqlite:///{config_dir / 'langflow.db'}"
        return
    with postgres_database("summarizing_agent_benchmark") as url:
        yield url


@contextmanager
def langflow_environment(url: str, config_dir: Path) -> Iterator[None]:
    """Points Langflow's settings at `url` and `config_dir`, restoring the environment afterwards."""
    values = {
        "LANGFLOW_DATABASE_URL": url,
        "LANGFLOW_CONFIG_DIR": str(config_dir),
        "LANGFLOW_SAVE_DB_IN_CONFIG_DIR": "true",
        "LANGFLOW_AUTO_LOGIN": "true",
    }
    saved = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
