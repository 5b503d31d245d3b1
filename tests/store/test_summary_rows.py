"""Session-wide row operations, as production runs them: `SummaryRows` on a connection (the listeners' purges and
moves), and `session_summaries()` / `reset_session()` (the HTTP API's session-wide read and reset).

On SQLite and Postgres: these ran on the in-memory fake too while the fake had a store of summary rows; the fake now has
only the `SessionStore` protocol, whose rules are in `test_store_contract.py` and `test_store_reads.py`.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any, TypeVar

import pytest

from langflow_summarizing_agent.engine.records import Cursor, Summary
from langflow_summarizing_agent.storage.store import reset_session, session_summaries
from langflow_summarizing_agent.storage.summaries import Rename, SummaryRows
from tests.support.langflow_db import MemoryScope

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=timezone.utc)
_T = TypeVar("_T")


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


async def on_rows(action: Callable[[SummaryRows], _T]) -> _T:
    """`action(SummaryRows)` on a connection in a transaction of its own, as the listeners run it in Langflow's."""
    from langflow.services.deps import session_scope

    async with session_scope() as session:
        return await session.run_sync(lambda sync: action(SummaryRows(sync.connection())))


async def purge(flow_id: uuid.UUID, session_ids: list[str], *, user_id: uuid.UUID | None = None) -> int:
    return await on_rows(lambda rows: rows.purge(flow_id, session_ids=session_ids, user_id=user_id))


async def purge_messages(message_ids: list[str]) -> int:
    """The rows a delete of `message_ids` takes with it, as the listeners run it: planned before the delete, applied
    after it, in its transaction."""
    from langflow_summarizing_agent.storage.messages import message_table

    ids = [uuid.UUID(i) for i in message_ids]
    messages = message_table()

    def purge_for(rows: SummaryRows) -> int:
        plan = rows.plan_message_delete(messages.c.id.in_(ids))
        rows.connection.execute(messages.delete().where(messages.c.id.in_(ids)))
        return len(rows.apply_message_delete(plan))

    return await on_rows(purge_for)


async def count(flow_id: uuid.UUID | None = None) -> int:
    return await on_rows(lambda rows: rows.count(flow_id))


async def add(insert_messages, scope: MemoryScope, rows: list[tuple[datetime, str]], **columns: Any) -> list[str]:
    return [str(row.id) for row in await insert_messages(scope, rows, **columns)]


async def saved(insert_messages, scope: MemoryScope, text: str = "s", **overrides: Any) -> Summary:
    """A first save of the scope, after one message so the session exists; the summary as saved."""
    if not await scope.store(**overrides).messages(limit=1):
        await insert_messages(scope, [(at(0), "hello")], **{k: v for k, v in overrides.items() if k == "context_id"})
    summary = await scope.store(**overrides).save(Summary(text=text))
    assert summary is not None
    return summary


async def move_behind_langflows_back(scope: MemoryScope, new_session_id: str) -> None:
    """Move a session's messages to another session id on a plain connection, which no listener sees."""
    import sqlalchemy as sa
    from langflow.services.deps import get_db_service

    from langflow_summarizing_agent.storage.messages import message_table

    table = message_table()
    where = [table.c.flow_id == scope.flow_id, table.c.user_id == scope.user_id, table.c.session_id == scope.session_id]
    async with get_db_service().engine.begin() as connection:
        await connection.execute(sa.update(table).where(*where).values(session_id=new_session_id))


# Owners and flows


@pytest.mark.parametrize("other", ["user", "flow"])
async def test_another_user_or_flow_cannot_delete(memory_scope: MemoryScope, insert_messages, other: str) -> None:
    """The purge part of the contract's `test_another_user_or_flow_cannot_read_or_overwrite`."""
    await saved(insert_messages, memory_scope, "owner's")
    intruder = memory_scope.elsewhere(other)
    await insert_messages(intruder, [(at(5), "x")])

    assert await purge(intruder.flow_id, [memory_scope.session_id], user_id=intruder.user_id) == 0
    assert await intruder.store().save(Summary(text="own")) is not None

    stored = await memory_scope.store().load()
    assert (stored.text, stored.version) == ("owner's", 1)
    assert [m.text for m in await memory_scope.store().messages(limit=10)] == ["hello"]


async def test_a_purge_of_one_owner_never_widens_to_every_owner(memory_scope: MemoryScope, insert_messages) -> None:
    """Was the purge of an unresolvable owner ("not-a-uuid") purging nothing; production purges with owner UUIDs."""
    await saved(insert_messages, memory_scope, "kept")

    assert await purge(memory_scope.flow_id, [memory_scope.session_id], user_id=uuid.uuid4()) == 0
    assert (await memory_scope.store().load()).text == "kept"
    assert await purge(memory_scope.flow_id, [memory_scope.session_id], user_id=memory_scope.user_id) == 1


# Every session: read, reset, purge, rename, count


async def test_summaries_lists_every_owner_and_context_of_a_session(memory_scope: MemoryScope, insert_messages) -> None:
    other_owner = dataclasses.replace(memory_scope, user_id=uuid.uuid4())
    await saved(insert_messages, memory_scope, "mine")
    await saved(insert_messages, memory_scope, "in ctx", context_id="ctx")
    await saved(insert_messages, other_owner, "theirs")

    found = await session_summaries(flow_id=memory_scope.flow_id, session_id=memory_scope.session_id)
    assert sorted((str(s.user_id), s.context_id, s.summary.text) for s in found) == sorted(
        [
            (str(memory_scope.user_id), "", "mine"),
            (str(memory_scope.user_id), "ctx", "in ctx"),
            (str(other_owner.user_id), "", "theirs"),
        ]
    )
    narrowed = await session_summaries(
        flow_id=memory_scope.flow_id, session_id=memory_scope.session_id, context_id="ctx"
    )
    assert [s.summary.text for s in narrowed] == ["in ctx"]
    assert await session_summaries(flow_id=uuid.uuid4(), session_id=memory_scope.session_id) == []


async def test_reset_deletes_one_context_or_every_context(memory_scope: MemoryScope, insert_messages) -> None:
    await saved(insert_messages, memory_scope, "none")
    await saved(insert_messages, memory_scope, "a", context_id="a")
    await saved(insert_messages, memory_scope, "b", context_id="b")
    ids: dict[str, Any] = {"flow_id": memory_scope.flow_id, "session_id": memory_scope.session_id}

    assert await reset_session(**ids, context_id="a") == 1
    assert await memory_scope.store(context_id="a").load() == Summary()
    assert await reset_session(**ids, context_id="") == 1
    assert (await memory_scope.store(context_id="b").load()).text == "b"
    assert await reset_session(**ids) == 1
    assert await count(memory_scope.flow_id) == 0


async def test_purge_by_session_ids(memory_scope: MemoryScope, insert_messages) -> None:
    sessions = [dataclasses.replace(memory_scope, session_id=f"{memory_scope.session_id}-{n}") for n in range(3)]
    for scope in sessions:
        await saved(insert_messages, scope)
    flow, user = memory_scope.flow_id, memory_scope.user_id

    assert await purge(flow, [], user_id=user) == 0
    assert await purge(flow, [s.session_id for s in sessions[:2]], user_id=user) == 2
    assert await sessions[0].store().load() == Summary()
    assert (await sessions[2].store().load()).version == 1


async def test_purge_by_flow_covers_every_owner(memory_scope: MemoryScope, insert_messages) -> None:
    other_owner = dataclasses.replace(memory_scope, user_id=uuid.uuid4())
    other_flow = dataclasses.replace(memory_scope, flow_id=uuid.uuid4())
    await saved(insert_messages, memory_scope)
    await saved(insert_messages, memory_scope, context_id="ctx")
    await saved(insert_messages, other_owner)
    await saved(insert_messages, other_flow)

    assert len(await on_rows(lambda rows: rows.purge_flows([memory_scope.flow_id]))) == 3
    assert await other_owner.store().load() == Summary()
    assert (await other_flow.store().load()).version == 1
    assert await purge(memory_scope.flow_id, [memory_scope.session_id]) == 0


async def test_purge_by_message_ids_drops_only_summaries_that_folded_one(
    memory_scope: MemoryScope, insert_messages
) -> None:
    ids = await add(insert_messages, memory_scope, [(at(i), f"m{i}") for i in range(6)])
    store = memory_scope.store()
    assert await store.save(Summary(text="s", cursor=Cursor(at(2), ids[2]))) is not None

    assert await purge_messages([ids[4]]) == 0
    assert (await store.load()).text == "s"
    assert await purge_messages([ids[1]]) == 1
    assert await store.load() == Summary()


async def test_purge_by_message_ids_drops_a_summary_whose_session_loses_every_message(
    memory_scope: MemoryScope, insert_messages
) -> None:
    ids = await add(insert_messages, memory_scope, [(at(0), "hello"), (at(1), "hi")])
    await memory_scope.store().save(Summary(failed_folds=1))

    assert await purge_messages(ids[:1]) == 0
    assert await purge_messages(ids) == 1
    assert await count(memory_scope.flow_id) == 0


async def test_rename_moves_a_whole_session_and_drops_both_on_a_merge(
    memory_scope: MemoryScope, insert_messages
) -> None:
    renamed = dataclasses.replace(memory_scope, session_id=f"{memory_scope.session_id}-renamed")
    await saved(insert_messages, memory_scope, "moves")
    flow, user = memory_scope.flow_id, memory_scope.user_id

    await move_behind_langflows_back(memory_scope, renamed.session_id)
    moved = await on_rows(
        lambda rows: rows.apply_renames([Rename(flow, user, memory_scope.session_id, renamed.session_id, True)])
    )
    assert moved == 1
    found = await session_summaries(flow_id=flow, session_id=renamed.session_id)
    assert [s.summary.text for s in found] == ["moves"]
    assert await session_summaries(flow_id=flow, session_id=memory_scope.session_id) == []

    await saved(insert_messages, memory_scope, "second")
    merge = [Rename(flow, user, memory_scope.session_id, renamed.session_id, False)]
    assert await on_rows(lambda rows: rows.apply_renames(merge)) == 0
    assert await count(flow) == 0


async def test_count(memory_scope: MemoryScope, insert_messages) -> None:
    other_flow = dataclasses.replace(memory_scope, flow_id=uuid.uuid4())
    await saved(insert_messages, memory_scope)
    await saved(insert_messages, memory_scope, context_id="ctx")
    await saved(insert_messages, other_flow)

    assert await count(memory_scope.flow_id) == 2
    assert await count(other_flow.flow_id) == 1
    assert await count() >= 3
