"""Shared fixtures. Each group below says what it provides; add new groups rather than widening one."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import ExitStack
from datetime import datetime, timezone
from typing import Any

import pytest
import pytest_asyncio

from tests.support.langflow_db import (
    LANGFLOW_BACKENDS,
    STORE_IN_MEMORY,
    LangflowDatabase,
    MemoryScope,
    restart_langflow_services,
    stop_langflow_services,
)
from tests.support.postgres_database import fresh_postgres_database
from tests.support.services import langflow_environment

# ---------------------------------------------------------------------------------------------------------------
# Langflow services in this process, on a real database (session memory, migrations).
#
# `langflow_db` is parametrized over "sqlite" (a temporary file) and "postgres" (a fresh database on
# 127.0.0.1:5432, marked `postgres`). Langflow's services are process-global, so the fixture is session-scoped:
# pytest groups the tests by backend and initialises each backend once, tearing the previous one down first.
# Tests that need only one backend: `@pytest.mark.parametrize("langflow_db", ["sqlite"], indirect=True)`.
# Tests share the database; keep them apart with the fresh ids of `memory_scope`.
# ---------------------------------------------------------------------------------------------------------------


@pytest_asyncio.fixture(scope="session", loop_scope="session", params=LANGFLOW_BACKENDS)
async def langflow_db(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[LangflowDatabase]:
    """Langflow's services initialised in this process on a fresh database of the requested backend."""
    # Imported first on purpose: Langflow then starts with our models loaded, which must not put our table
    # into the metadata its startup migration check compares.
    import langflow_summarizing_agent.storage.models  # noqa: F401

    backend: str = request.param
    if backend == STORE_IN_MEMORY:
        # The contract suite's third backend: no Langflow services (the previous backend's are stopped already).
        yield LangflowDatabase(backend=backend, url="")
        return
    config_dir = tmp_path_factory.mktemp(f"langflow-{backend}")
    with ExitStack() as stack:
        if backend == "postgres":
            url = stack.enter_context(fresh_postgres_database())
        else:
            url = f"sqlite:///{config_dir / 'langflow.db'}"
        stack.enter_context(langflow_environment(url, config_dir))
        await restart_langflow_services()
        try:
            yield LangflowDatabase(backend=backend, url=url)
        finally:
            await stop_langflow_services()


@pytest.fixture
def memory_scope(langflow_db: LangflowDatabase) -> MemoryScope:
    """Fresh flow, owner and session ids on Langflow's database (so on each backend)."""
    return MemoryScope.new()


@pytest.fixture
def insert_messages(langflow_db: LangflowDatabase) -> Callable[..., Awaitable[list[Any]]]:
    """`await insert_messages(scope, [(timestamp, text), ...], **columns)` stores `message` rows, returns them.

    Senders alternate User / Machine starting with User; `columns` (error, category, context_id, sender, ...)
    apply to every row.
    """

    async def insert(scope: MemoryScope, rows: list[tuple[datetime, str]], **columns: Any) -> list[Any]:
        from langflow.services.database.models.message.model import MessageTable
        from langflow.services.deps import session_scope

        messages = []
        for index, (timestamp, text) in enumerate(rows):
            by_user = index % 2 == 0
            values: dict[str, Any] = {
                "sender": "User" if by_user else "Machine",
                "sender_name": "User" if by_user else "AI",
                **columns,
            }
            messages.append(
                MessageTable(
                    flow_id=scope.flow_id,
                    user_id=scope.user_id,
                    session_id=scope.session_id,
                    text=text,
                    timestamp=timestamp.astimezone(timezone.utc),
                    **values,
                )
            )
        async with session_scope() as session:
            session.add_all(messages)
        return messages

    return insert


@pytest.fixture(scope="session")
def migration_sqlite_url(tmp_path_factory: pytest.TempPathFactory) -> Callable[[], str]:
    """A factory of URLs of fresh, empty SQLite files (not Langflow's database)."""

    def new_url() -> str:
        return f"sqlite:///{tmp_path_factory.mktemp('migrations') / 'db.sqlite'}"

    return new_url


@pytest.fixture
def fresh_postgres_url() -> Iterator[str]:
    """A fresh, empty Postgres database (not Langflow's), dropped after the test."""
    with fresh_postgres_database() as url:
        yield url


pytest_plugins = ["tests.support.server_fixtures"]


# ---------------------------------------------------------------------------------------------------------------
# Options. `--update-screenshots`: the browser tests write the README's screenshots to docs/screenshots/ (otherwise
# to test-artifacts/, so a run leaves the checkout as it was); see tests/browser/conftest.py.
# ---------------------------------------------------------------------------------------------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-screenshots",
        action="store_true",
        help="write the browser tests' screenshots to docs/screenshots/ (the README's), not test-artifacts/",
    )
