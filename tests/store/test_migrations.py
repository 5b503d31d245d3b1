"""Migrations: upgrade and downgrade on real databases, beside Langflow, from a wheel, under concurrency, by CLI."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from langflow_summarizing_agent.storage import migrate
from langflow_summarizing_agent.storage.models import SCOPE_CONSTRAINT, TABLE_NAME, VERSION_TABLE_NAME
from langflow_summarizing_agent.wiring.runtime import Runtime
from tests.support.langflow_db import LangflowDatabase, restart_langflow_services, stored_summary

REPO_ROOT = Path(__file__).resolve().parents[2]
REVISIONS = sorted((REPO_ROOT / "migrations" / "versions").glob("*.py"))
FIRST_REVISION_ID = "3f9c1a7e5b20"
FOLDED_TOKENS_REVISION_ID = "8d2e4b6a1c37"
FOLD_FAILURE_REVISION_ID = "5b7d9e1f3a42"
FOLD_QUEUED_REVISION_ID = "c4a8e2f6d913"
SUBPROCESS_TIMEOUT_SECONDS = 180


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def empty_database_url(request: pytest.FixtureRequest, migration_sqlite_url: Callable[[], str]) -> str:
    """A fresh, empty database of each backend, not Langflow's."""
    if request.param == "sqlite":
        return migration_sqlite_url()
    return request.getfixturevalue("fresh_postgres_url")


@contextmanager
def inspected(url: str) -> Iterator[sa.Inspector]:
    engine = sa.create_engine(migrate.sync_database_url(url), poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as connection:
            yield sa.inspect(connection)
    finally:
        engine.dispose()


def version_rows(url: str) -> list[str]:
    engine = sa.create_engine(migrate.sync_database_url(url), poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as connection:
            return list(connection.execute(sa.text(f"SELECT version_num FROM {migrate.VERSION_TABLE}")).scalars())
    finally:
        engine.dispose()


def subprocess_env(**extra: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("LANGFLOW_")}
    env.update(extra)
    return env


async def test_upgrade_to_head_and_downgrade_to_base(empty_database_url: str) -> None:
    url = empty_database_url
    assert migrate.current(url) is None

    await migrate.upgrade(url)
    assert migrate.current(url) == migrate.head()
    with inspected(url) as inspector:
        tables = set(inspector.get_table_names())
        assert {TABLE_NAME, migrate.VERSION_TABLE} <= tables
        assert "alembic_version" not in tables, "Langflow's version table is not ours to create"
        unique = {c["name"]: c["column_names"] for c in inspector.get_unique_constraints(TABLE_NAME)}
        assert unique[SCOPE_CONSTRAINT] == ["flow_id", "user_id", "session_id", "context_id"]
    await migrate.upgrade(url)
    assert version_rows(url) == [migrate.head()]

    assert migrate.downgrade(url, "base") is None
    with inspected(url) as inspector:
        assert TABLE_NAME not in inspector.get_table_names()
    assert migrate.current(url) is None

    await migrate.upgrade(url)
    assert migrate.current(url) == migrate.head()


@pytest.mark.parametrize("revision", REVISIONS, ids=[path.stem for path in REVISIONS])
def test_migration_file_passes_langflow_validator(revision: Path) -> None:
    # The class behind `python -m langflow.alembic.migration_validator --strict`, without a 5 s interpreter start.
    from langflow.alembic.migration_validator import MigrationValidator

    report = MigrationValidator(strict_mode=True).validate_migration_file(revision)

    assert (report["valid"], report["phase"], report["violations"], report["warnings"]) == (True, "EXPAND", [], [])


async def test_a_row_stored_before_folded_tokens_keeps_its_summary_with_its_tokens_unknown(
    empty_database_url: str,
) -> None:
    url = empty_database_url
    await migrate.upgrade(url)
    migrate.downgrade(url, FIRST_REVISION_ID)
    engine = sa.create_engine(migrate.sync_database_url(url), poolclass=sa.pool.NullPool)
    try:
        with engine.begin() as connection:
            connection.execute(
                sa.text(
                    f"INSERT INTO {TABLE_NAME} (id, flow_id, user_id, session_id, context_id, summary, pinned, "
                    "absorbed_count, version, failed_folds, created_at, updated_at) VALUES (:id, :flow, :user, "
                    "'s1', '', 'Earlier: the deploy fails.', '{}', 12, 3, 0, :now, :now)"
                ),
                {
                    "id": uuid.uuid4().hex if url.startswith("sqlite") else uuid.uuid4(),
                    "flow": uuid.uuid4().hex if url.startswith("sqlite") else uuid.uuid4(),
                    "user": uuid.uuid4().hex if url.startswith("sqlite") else uuid.uuid4(),
                    "now": "2026-12-01 00:00:00",
                },
            )
        await migrate.upgrade(url)
        with engine.connect() as connection:
            row = connection.execute(sa.text(f"SELECT summary, absorbed_count, folded_tokens FROM {TABLE_NAME}")).one()
    finally:
        engine.dispose()

    assert tuple(row) == ("Earlier: the deploy fails.", 12, None)


async def test_a_row_stored_before_fold_failures_were_kept_has_none(empty_database_url: str) -> None:
    url = empty_database_url
    await migrate.upgrade(url)
    migrate.downgrade(url, FOLDED_TOKENS_REVISION_ID)
    with inspected(url) as inspector:
        assert "fold_failure" not in {column["name"] for column in inspector.get_columns(TABLE_NAME)}

    await migrate.upgrade(url)

    with inspected(url) as inspector:
        columns = {column["name"]: column for column in inspector.get_columns(TABLE_NAME)}
    assert columns["fold_failure"]["nullable"] is True


async def test_the_queued_fold_mark_is_added_and_dropped(empty_database_url: str) -> None:
    url = empty_database_url
    await migrate.upgrade(url)
    migrate.downgrade(url, FOLD_FAILURE_REVISION_ID)
    with inspected(url) as inspector:
        assert "fold_queued_at" not in {column["name"] for column in inspector.get_columns(TABLE_NAME)}

    await migrate.upgrade(url)

    with inspected(url) as inspector:
        columns = {column["name"]: column for column in inspector.get_columns(TABLE_NAME)}
    assert columns["fold_queued_at"]["nullable"] is True


async def test_the_version_table_and_the_edit_marks_are_added_and_dropped(empty_database_url: str) -> None:
    url = empty_database_url
    await migrate.upgrade(url)
    migrate.downgrade(url, FOLD_QUEUED_REVISION_ID)
    with inspected(url) as inspector:
        assert VERSION_TABLE_NAME not in inspector.get_table_names()
        assert not {"edited_at", "edited_by"} & {column["name"] for column in inspector.get_columns(TABLE_NAME)}
    uuid_value = (lambda: uuid.uuid4().hex) if url.startswith("sqlite") else uuid.uuid4
    engine = sa.create_engine(migrate.sync_database_url(url), poolclass=sa.pool.NullPool)
    try:
        with engine.begin() as connection:
            connection.execute(
                sa.text(
                    f"INSERT INTO {TABLE_NAME} (id, flow_id, user_id, session_id, context_id, summary, pinned, "
                    "absorbed_count, version, failed_folds, created_at, updated_at) VALUES (:id, :flow, :user, "
                    "'s1', '', 'Earlier: the deploy fails.', '{}', 12, 3, 0, :now, :now)"
                ),
                {"id": uuid_value(), "flow": uuid_value(), "user": uuid_value(), "now": "2026-12-01 00:00:00"},
            )

        await migrate.upgrade(url)

        with inspected(url) as inspector:
            assert VERSION_TABLE_NAME in inspector.get_table_names()
            columns = {column["name"]: column for column in inspector.get_columns(TABLE_NAME)}
            unique = {c["name"]: c["column_names"] for c in inspector.get_unique_constraints(VERSION_TABLE_NAME)}
        assert (columns["edited_at"]["nullable"], columns["edited_by"]["nullable"]) == (True, True)
        assert unique["uq_session_memory_version"] == ["summary_id", "version"]
        with engine.connect() as connection:
            row = connection.execute(sa.text(f"SELECT summary, version, edited_at, edited_by FROM {TABLE_NAME}")).one()
            versions = connection.execute(sa.text(f"SELECT count(*) FROM {VERSION_TABLE_NAME}")).scalar_one()
        assert (tuple(row), versions) == (("Earlier: the deploy fails.", 3, None, None), 0)

        migrate.downgrade(url, FOLD_QUEUED_REVISION_ID)

        with inspected(url) as inspector:
            assert VERSION_TABLE_NAME not in inspector.get_table_names()
            assert not {"edited_at", "edited_by"} & {column["name"] for column in inspector.get_columns(TABLE_NAME)}
        with engine.connect() as connection:
            kept = connection.execute(sa.text(f"SELECT summary FROM {TABLE_NAME}")).scalar_one()
        assert kept == "Earlier: the deploy fails."
    finally:
        engine.dispose()


def test_our_table_stays_out_of_langflow_metadata() -> None:
    from sqlmodel import SQLModel

    from langflow_summarizing_agent.storage.models import Base

    assert TABLE_NAME in Base.metadata.tables
    assert TABLE_NAME not in SQLModel.metadata.tables


async def test_langflow_restarts_on_a_database_with_our_table(langflow_db: LangflowDatabase) -> None:
    await Runtime().ready()
    assert migrate.current(langflow_db.url) == migrate.head()

    # Langflow's startup runs its migration check (which refuses unknown tables in its metadata) again.
    await restart_langflow_services()

    assert migrate.current(langflow_db.url) == migrate.head()
    with inspected(langflow_db.url) as inspector:
        assert {"alembic_version", "message", TABLE_NAME} <= set(inspector.get_table_names())


async def test_storage_does_not_migrate_and_ready_does(langflow_db: LangflowDatabase) -> None:
    migrate.downgrade(langflow_db.url, "base")
    assert migrate.current(langflow_db.url) is None

    ids: dict[str, Any] = {"flow_id": uuid.uuid4(), "user_id": uuid.uuid4(), "session_id": "first-use"}
    with pytest.raises(sa.exc.DBAPIError):
        await stored_summary(**ids)
    assert migrate.current(langflow_db.url) is None

    await Runtime().ready()
    assert migrate.current(langflow_db.url) == migrate.head()
    assert await stored_summary(**ids) is None


async def test_ready_twice_is_a_noop(langflow_db: LangflowDatabase) -> None:
    runtime = Runtime()
    await runtime.ready()
    new_connections: list[object] = []

    def count(dbapi_connection: object, _record: object) -> None:
        new_connections.append(dbapi_connection)

    # Any migration run opens a new connection (NullPool engine); a cached "done" opens none.
    sa.event.listen(sa.Engine, "connect", count)
    try:
        await runtime.ready()
    finally:
        sa.event.remove(sa.Engine, "connect", count)

    assert new_connections == []
    assert version_rows(langflow_db.url) == [migrate.head()]


UPGRADE_AFTER_BARRIER = textwrap.dedent(
    """
    import asyncio, sys, time
    from pathlib import Path
    from langflow_summarizing_agent.storage import migrate

    url, ready, go = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    ready.touch()
    while not go.exists():
        time.sleep(0.01)
    asyncio.run(migrate.upgrade(url))
    print(migrate.current(url))
    """
)


def test_concurrent_upgrades_from_several_processes_all_succeed(empty_database_url: str, tmp_path: Path) -> None:
    """Workers starting at once on one fresh database: each upgrade succeeds, the schema is created once."""
    go = tmp_path / "go"
    processes = []
    for n in range(4):
        ready = tmp_path / f"ready-{n}"
        argv = [sys.executable, "-c", UPGRADE_AFTER_BARRIER, empty_database_url, str(ready), str(go)]
        processes.append((ready, subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)))
    deadline = time.monotonic() + SUBPROCESS_TIMEOUT_SECONDS
    while not all(ready.exists() for ready, _ in processes) and time.monotonic() < deadline:
        time.sleep(0.05)
    go.touch()

    outputs = [process.communicate(timeout=SUBPROCESS_TIMEOUT_SECONDS) for _, process in processes]

    for (_, process), (stdout, stderr) in zip(processes, outputs, strict=True):
        assert process.returncode == 0, stderr[-3000:]
        assert stdout.strip().splitlines()[-1] == migrate.head()
    assert version_rows(empty_database_url) == [migrate.head()]


def test_migrations_run_from_an_installed_wheel(tmp_path: Path, migration_sqlite_url: Callable[[], str]) -> None:
    wheel_dir, site_dir = tmp_path / "wheel", tmp_path / "site"
    build = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(wheel_dir)]
    subprocess.run([*build, str(REPO_ROOT)], check=True, capture_output=True, timeout=SUBPROCESS_TIMEOUT_SECONDS)
    [wheel] = wheel_dir.glob("langflow_summarizing_agent-*.whl")
    install = [sys.executable, "-m", "pip", "install", "--no-deps", "--target", str(site_dir), str(wheel)]
    subprocess.run(install, check=True, capture_output=True, timeout=SUBPROCESS_TIMEOUT_SECONDS)
    url = migration_sqlite_url()

    script = "import asyncio, sys; from langflow_summarizing_agent.storage import migrate; "
    script += "print(migrate.script_location()); asyncio.run(migrate.upgrade(sys.argv[1])); "
    script += "print(migrate.current(sys.argv[1]))"
    result = subprocess.run(
        [sys.executable, "-c", script, url],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=subprocess_env(PYTHONPATH=str(site_dir)),
        timeout=SUBPROCESS_TIMEOUT_SECONDS,
        check=False,
    )

    assert result.returncode == 0, result.stderr[-3000:]
    location, revision = result.stdout.strip().splitlines()[-2:]
    assert Path(location) == site_dir / "langflow_summarizing_agent" / "migrations"
    assert revision == migrate.head()


@pytest.mark.parametrize("langflow_db", ["sqlite"], indirect=True)
def test_cli_migrate_applies_and_reports(
    langflow_db: LangflowDatabase, migration_sqlite_url: Callable[[], str]
) -> None:
    from langflow.__main__ import app
    from typer.testing import CliRunner

    runner = CliRunner()
    url = migration_sqlite_url()

    first = runner.invoke(app, ["summarizing-agent", "migrate", "--database-url", url])
    again = runner.invoke(app, ["summarizing-agent", "migrate", "--database-url", url])
    configured = runner.invoke(app, ["summarizing-agent", "migrate"])

    assert first.exit_code == 0, first.output
    assert f"revision {migrate.head()} (upgraded from an empty schema" in first.output
    assert first.output.rstrip().endswith("; 0 summaries stored")
    assert "already at head" in again.output
    # Without --database-url it migrates the database Langflow is configured with.
    assert configured.exit_code == 0, configured.output
    assert configured.output.startswith(f"{langflow_db.url}: revision {migrate.head()}")
