"""Fresh PostgreSQL databases on 127.0.0.1:5432, created on demand and dropped afterwards (tests and benchmarks).

`postgres_database` creates and drops one. For tests, `fresh_postgres_database` checks the server first: locally a
missing server skips the tests that need it, with the reason; under `CI=true` it fails them, because CI must prove the
Postgres path.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit

import psycopg
from psycopg import sql

POSTGRES_ADMIN_URL = os.environ.get(
    "SUMMARIZING_AGENT_POSTGRES_ADMIN_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)
"""Where databases are created and dropped; its user must be allowed to CREATE DATABASE."""

CONNECT_TIMEOUT_SECONDS = 5


def running_in_ci() -> bool:
    return os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def _admin_connection() -> psycopg.Connection:
    return psycopg.connect(POSTGRES_ADMIN_URL, autocommit=True, connect_timeout=CONNECT_TIMEOUT_SECONDS)


def require_postgres() -> None:
    """Skip the calling test when Postgres is unreachable, or fail it when running in CI."""
    import pytest

    try:
        with _admin_connection():
            pass
    except psycopg.OperationalError as error:
        reason = (
            f"PostgreSQL is unreachable at {POSTGRES_ADMIN_URL} ({str(error).strip()}); start it, or point "
            "SUMMARIZING_AGENT_POSTGRES_ADMIN_URL at a server where this user may CREATE DATABASE"
        )
        if running_in_ci():
            pytest.fail(f"CI=true needs PostgreSQL: {reason}", pytrace=False)
        pytest.skip(reason)


def _sqlalchemy_url(database_name: str) -> str:
    # An explicit psycopg (3) driver: Langflow's startup check builds a sync engine, which otherwise wants psycopg2.
    admin_url = urlsplit(POSTGRES_ADMIN_URL)
    return admin_url._replace(scheme="postgresql+psycopg", path=f"/{database_name}").geturl()


@contextmanager
def postgres_database(prefix: str) -> Iterator[str]:
    """Create an empty database named `<prefix>_<random>`, yield its SQLAlchemy URL (`postgresql+psycopg://`), then
    drop it.

    The drop closes connections left open, so a server or engine that did not shut down cleanly cannot keep it.
    """
    database_name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    with _admin_connection() as connection:
        connection.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database_name)))
    try:
        yield _sqlalchemy_url(database_name)
    finally:
        with _admin_connection() as connection:
            connection.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(database_name)))


@contextmanager
def fresh_postgres_database(prefix: str = "summarizing_agent_test") -> Iterator[str]:
    """`postgres_database` for a test: skipped (or failed under CI) when PostgreSQL is unreachable."""
    require_postgres()
    with postgres_database(prefix) as url:
        yield url
