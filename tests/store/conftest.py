"""Shared fixtures of the store tests."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

import pytest

from langflow_summarizing_agent.engine.records import Role, Scope, StoredMessage
from langflow_summarizing_agent.engine.store import SessionStore
from tests.store.contract_harness import Harness
from tests.support.fakes import InMemoryDatabase
from tests.support.langflow_db import STORE_IN_MEMORY, LangflowDatabase, MemoryScope

# ---------------------------------------------------------------------------------------------------------------
# The session store's contract harness (`contract_harness.Harness`) on the backend of `langflow_db`.
# ---------------------------------------------------------------------------------------------------------------


@pytest.fixture
def harness(langflow_db: LangflowDatabase, insert_messages) -> Harness:
    if langflow_db.backend == STORE_IN_MEMORY:
        return _memory_harness()
    from tests.support.langflow_db import database_store

    async def add(scope: MemoryScope, rows: list[tuple[datetime, str]], **columns: Any) -> list[str]:
        return [str(row.id) for row in await insert_messages(scope, rows, **columns)]

    return Harness(
        database_store, add, _delete_behind_langflows_back, _reset_session, _count_summary_rows, _fold_queued
    )


def _memory_harness() -> Harness:
    fake = InMemoryDatabase()

    async def add(scope: MemoryScope, rows: list[tuple[datetime, str]], **columns: Any) -> list[str]:
        ids = []
        for index, (timestamp, text) in enumerate(rows):
            message_id = str(columns.get("id") or uuid.uuid4())
            role: Role = "user" if index % 2 == 0 else "assistant"
            message = StoredMessage(id=message_id, timestamp=timestamp, role=role, text=text)
            error = bool(columns.get("error")) or columns.get("category") == "error"
            key = (str(scope.flow_id), str(scope.user_id), scope.session_id)
            fake.add_messages(key, [message], context_id=columns.get("context_id"), error=error)
            ids.append(message_id)
        return ids

    async def delete(message_ids: list[str]) -> None:
        fake.delete_messages(message_ids)

    async def reset(scope: MemoryScope) -> int:
        rows = [key for key in fake.rows if (key[0], key[2]) == (str(scope.flow_id), scope.session_id)]
        for key in rows:
            del fake.rows[key]
            fake.fold_marks.pop(key, None)
        return len(rows)

    async def count(flow_id: uuid.UUID) -> int:
        return sum(1 for key in fake.rows if key[0] == str(flow_id))

    def make_store(scope: Scope, *, before: Any = None, through: Any = None) -> SessionStore:
        return fake.store(scope, before=before, through=through)

    async def queued(scope: MemoryScope, since: datetime) -> bool:
        return fake.fold_queued(scope.flow_id, scope.session_id, None, since)

    return Harness(make_store, add, delete, reset, count, queued)


async def _delete_behind_langflows_back(message_ids: list[str]) -> None:
    import sqlalchemy as sa
    from langflow.services.deps import get_db_service

    from langflow_summarizing_agent.storage.messages import message_table

    table = message_table()
    async with get_db_service().engine.begin() as connection:
        await connection.execute(sa.delete(table).where(table.c.id.in_([uuid.UUID(i) for i in message_ids])))


async def _reset_session(scope: MemoryScope) -> int:
    from langflow_summarizing_agent.storage.store import reset_session

    return await reset_session(flow_id=scope.flow_id, session_id=scope.session_id)


async def _count_summary_rows(flow_id: uuid.UUID) -> int:
    from langflow.services.deps import session_scope

    from langflow_summarizing_agent.storage.summaries import SummaryRows

    async with session_scope() as session:
        return await session.run_sync(lambda sync: SummaryRows(sync.connection()).count(flow_id))


async def _fold_queued(scope: MemoryScope, since: datetime) -> bool:
    from langflow_summarizing_agent.storage.store import session_fold_queued

    return await session_fold_queued(flow_id=scope.flow_id, session_id=scope.session_id, since=since)
