"""Alembic environment for this package's tables, beside Langflow's in the same database.

Run through `langflow_summarizing_agent.storage.migrate`, which passes an open connection in
`config.attributes["connection"]` after taking the migration lock on it. The version table is our own,
so Langflow's `alembic_version` is never read or written here.
"""

from __future__ import annotations

from alembic import context

from langflow_summarizing_agent.storage.migrate import VERSION_TABLE
from langflow_summarizing_agent.storage.models import Base

target_metadata = Base.metadata


def include_name(name: str | None, type_: str, parent_names: dict[str, str | None]) -> bool:
    """Keep autogenerate to our tables: the database also holds Langflow's, which we never touch."""
    if type_ != "table":
        return True
    return name == VERSION_TABLE or name in target_metadata.tables


def run_migrations_online() -> None:
    connection = context.config.attributes.get("connection")
    if connection is None:
        msg = (
            "Run these migrations through langflow_summarizing_agent.storage.migrate (upgrade/downgrade), "
            "not bare alembic."
        )
        raise RuntimeError(msg)
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        version_table=VERSION_TABLE,
        include_name=include_name,
        render_as_batch=True,
    )
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    msg = "Offline (--sql) migrations are not supported; use langflow_summarizing_agent.storage.migrate."
    raise RuntimeError(msg)
run_migrations_online()
