"""Alembic migrations of this package's tables: an explicit step, never a side effect of a read or write.

`upgrade()` brings a database to head; `wiring.runtime.Runtime.ready()` runs it once per database before a turn or
the HTTP API uses storage, and `langflow summarizing-agent migrate` runs it for operators.

Our revisions keep their own version table (`VERSION_TABLE`) beside Langflow's `alembic_version` in the same
database. Concurrent migrators (several Langflow workers starting at once) are serialised: on Postgres by a
transaction-level advisory lock taken on the migration connection, on SQLite by a file lock next to the
database file. The loser of the race then finds the schema at head and does nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine, create_engine, event, make_url, pool, text

VERSION_TABLE = "summarizing_agent_alembic_version"

# Advisory lock keys are one bigint namespace per database; derive ours from a name so it cannot be
# Langflow's fixed migration key.
_PG_LOCK_KEY = int.from_bytes(hashlib.sha256(b"langflow_summarizing_agent.migrate").digest()[:8], "big", signed=True)
_PG_LOCK_TIMEOUT = "180s"
_SQLITE_BUSY_TIMEOUT_S = 60


def script_location() -> Path:
    """The migration scripts: inside the installed package (wheel), else the source checkout's `migrations/`."""
    package_dir = Path(__file__).resolve().parents[1]
    for candidate in (package_dir / "migrations", package_dir.parents[1] / "migrations"):
        if (candidate / "env.py").is_file():
            return candidate
    msg = f"Migration scripts not found next to {package_dir}; the package is installed without its migrations."
    raise FileNotFoundError(msg)


def sync_database_url(url: str) -> str:
    """A URL for a synchronous engine, from Langflow's async one (`sqlite+aiosqlite`, `postgresql+psycopg`)."""
    driver, sep, rest = url.partition("://")
    if not sep:
        msg = f"Not a database URL: {url!r}"
        raise ValueError(msg)
    if driver.startswith("sqlite"):
        driver = "sqlite"
    elif driver in {"postgres", "postgresql", "postgresql+asyncpg"}:
        # psycopg 3 serves both sync and async engines; asyncpg has no sync mode.
        driver = "postgresql+psycopg"
    return f"{driver}://{rest}"


def head() -> str:
    """The newest revision shipped with the package."""
    revision = ScriptDirectory.from_config(_alembic_config()).get_current_head()
    if revision is None:
        msg = f"No migration revisions in {script_location()}"
        raise RuntimeError(msg)
    return revision


def current_database_url() -> str:
    """Langflow's current database, as a URL for a synchronous engine; raises when its services are not running."""
    from lfx.utils.langflow_utils import has_langflow_db_backend

    if not has_langflow_db_backend():
        msg = "Langflow's database service is not running; migrate with `langflow summarizing-agent migrate`."
        raise RuntimeError(msg)
    from langflow.services.deps import get_db_service

    return sync_database_url(get_db_service().database_url)


async def upgrade(url: str) -> None:
    """Bring the database's summary table to head; a database at head is left as it is.

    Blocking work runs in a thread. Raises when the migration fails.
    """
    await asyncio.to_thread(_upgrade, url)


def _upgrade(url: str) -> None:
    with _migration_connection(url) as connection:
        command.upgrade(_alembic_config(connection), "head")


def downgrade(url: str, revision: str) -> str | None:
    """Revert migrations down to `revision` (`"base"` removes our tables); returns the revision afterwards."""
    with _migration_connection(url) as connection:
        command.downgrade(_alembic_config(connection), revision)
        return _current_revision(connection)


def current(url: str) -> str | None:
    """The database's revision of our migrations, or None when none is applied."""
    engine = _engine(url)
    try:
        with engine.connect() as connection:
            return _current_revision(connection)
    finally:
        engine.dispose()


def _alembic_config(connection: Connection | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(script_location()))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def _current_revision(connection: Connection) -> str | None:
    return MigrationContext.configure(connection, opts={"version_table": VERSION_TABLE}).get_current_revision()


def _engine(url: str) -> Engine:
    sync_url = sync_database_url(url)
    if sync_url.startswith("sqlite"):
        engine = create_engine(sync_url, poolclass=pool.NullPool, connect_args={"timeout": _SQLITE_BUSY_TIMEOUT_S})
        # pysqlite defers BEGIN and commits before DDL; take the transaction ourselves so a migration
        # is all-or-nothing and holds the write lock from the start (as Langflow's env.py does).
        event.listen(engine, "connect", _sqlite_autocommit_driver)
        event.listen(engine, "begin", _sqlite_begin_immediate)
        return engine
    # prepare_threshold=None keeps PgBouncer in transaction mode working, as in Langflow.
    return create_engine(sync_url, poolclass=pool.NullPool, connect_args={"prepare_threshold": None})


def _sqlite_autocommit_driver(dbapi_connection: Any, _connection_record: Any) -> None:
    dbapi_connection.isolation_level = None


def _sqlite_begin_immediate(connection: Connection) -> None:
    connection.exec_driver_sql("BEGIN IMMEDIATE")


@contextlib.contextmanager
def _migration_connection(url: str) -> Iterator[Connection]:
    """One transaction on one connection, held under the migration lock until it commits."""
    engine = _engine(url)
    try:
        with _sqlite_file_lock(engine), engine.begin() as connection:
            if connection.dialect.name == "postgresql":
                connection.execute(text(f"SET LOCAL lock_timeout = '{_PG_LOCK_TIMEOUT}'"))
                connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_LOCK_KEY})
            yield connection
    finally:
        engine.dispose()


@contextlib.contextmanager
def _sqlite_file_lock(engine: Engine) -> Iterator[None]:
    """Exclusive lock on `<database file>.summarizing-agent-migrate.lock`; no-op for other databases."""
    database = make_url(engine.url).database if engine.dialect.name == "sqlite" else None
    if not database or database == ":memory:" or database.startswith("file:"):
        yield
        return
    try:
        import fcntl
    except ImportError:  # Windows: BEGIN IMMEDIATE and the busy timeout still serialise writers.
        yield
        return
    lock_path = Path(database).with_name(Path(database).name + ".summarizing-agent-migrate.lock")
    with lock_path.open("a") as lock_file:
        fcntl.flock(lock_file, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock_file, fcntl.LOCK_UN)
