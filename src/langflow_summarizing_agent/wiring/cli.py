"""`langflow summarizing-agent migrate`: apply this package's migrations and report the revision; and
`langflow summarizing-agent memory ...` (`memory_cli`): read and correct a session's memory on a running server.

Registered through Langflow's `langflow.cli_commands` entry point. A worker also migrates its database before it
first uses storage (`runtime.Runtime.ready`); the command is for operators who migrate before starting workers, or
check where a database stands.
"""

from __future__ import annotations

import asyncio

import typer
from sqlalchemy import create_engine, make_url, pool

from langflow_summarizing_agent.storage import migrate
from langflow_summarizing_agent.storage.summaries import SummaryRows
from langflow_summarizing_agent.wiring import memory_cli

COMMAND_GROUP = "summarizing-agent"


def register(app: typer.Typer) -> None:
    """Entry point: add the `summarizing-agent` command group to Langflow's root CLI."""
    group = typer.Typer(help="Summarizing Agent extension: migrations and session memory.", no_args_is_help=True)
    group.command("migrate")(migrate_command)
    group.add_typer(memory_cli.memory, name="memory")
    app.add_typer(group, name=COMMAND_GROUP)


def migrate_command(
    database_url: str | None = typer.Option(
        None,
        "--database-url",
        help="Database to migrate. Default: Langflow's configured database (LANGFLOW_DATABASE_URL or its default).",
        show_default=False,
    ),
) -> None:
    """Apply the Summarizing Agent's migrations and report the database's revision."""
    url = migrate.sync_database_url(database_url or _configured_database_url())
    shown = make_url(url).render_as_string(hide_password=True)
    try:
        before = migrate.current(url)
        asyncio.run(migrate.upgrade(url))
        after = migrate.current(url)
        stored = _stored_summaries(url)
    except Exception as exc:
        typer.echo(f"Migrating {shown} failed: {exc}", err=True)
        raise typer.Exit(1) from exc
    change = "already at head" if before == after else f"upgraded from {before or 'an empty schema'}"
    typer.echo(
        f"{shown}: revision {after} ({change}, version table {migrate.VERSION_TABLE}); {stored} summaries stored"
    )


def _stored_summaries(url: str) -> int:
    engine = create_engine(url, poolclass=pool.NullPool)
    try:
        with engine.connect() as connection:
            return SummaryRows(connection).count()
    finally:
        engine.dispose()


def _configured_database_url() -> str:
    """Langflow's database URL from its settings, as `langflow migration` reads them (environment, defaults)."""
    from langflow.services.deps import get_settings_service

    url = get_settings_service().settings.database_url
    if not url:
        msg = "Langflow has no database configured; pass --database-url or set LANGFLOW_DATABASE_URL."
        raise typer.BadParameter(msg)
    return url
