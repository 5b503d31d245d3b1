"""What only the database store has: row locks, the unique key, Langflow's graph scope, one-statement turns.

The rules every store keeps (scope, cursor, ties, compare-and-swap) are in `test_store_contract.py` and
`test_store_reads.py`; purges, renames and the session-wide read and reset in `test_summary_rows.py`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone

import psycopg
import pytest
import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError

from langflow_summarizing_agent.engine.records import Cursor, Scope, Summary
from langflow_summarizing_agent.engine.store import HeldScopes
from langflow_summarizing_agent.storage import store as sm
from langflow_summarizing_agent.storage.summaries import SUMMARIES
from langflow_summarizing_agent.wiring.messages import as_chat_message
from tests.support.langflow_db import LangflowDatabase, MemoryScope, database_store, stored_summary

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=timezone.utc)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


@contextmanager
def graph_run(flow_id: uuid.UUID | None, owner_id: uuid.UUID | None) -> Iterator[None]:
    """The ambient scope Langflow binds around a component's build (`get_instance_results`)."""
    from lfx.memory.flow_context import (
        reset_current_flow_id,
        reset_current_message_owner_id,
        set_current_flow_id,
        set_current_message_owner_id,
    )

    flow_token = set_current_flow_id(None if flow_id is None else str(flow_id))
    owner_token = set_current_message_owner_id(owner_id)
    try:
        yield
    finally:
        reset_current_message_owner_id(owner_token)
        reset_current_flow_id(flow_token)


def ids_of(scope: MemoryScope, **overrides) -> dict:
    """The scope's ids as keywords (`flow_id`, `user_id`, `session_id`, `context_id`), any overridden."""
    return dataclasses.asdict(scope.scope(**overrides))


def store_of(ids: dict, **extra) -> sm.DatabaseStore:
    return database_store(Scope(**ids), **extra)


async def save(ids: dict, summary: Summary) -> Summary | None:
    return await store_of(ids).save(summary)


def sync_engine(langflow_db: LangflowDatabase) -> sa.Engine:
    return sa.create_engine(langflow_db.url, poolclass=sa.pool.NullPool)


async def _wait_for_lock_waiters(admin: psycopg.AsyncConnection, count: int) -> None:
    for _ in range(200):
        cursor = await admin.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        row = await cursor.fetchone()
        if row is not None and row[0] >= count:
            return
        await asyncio.sleep(0.05)
    pytest.fail(f"expected {count} writers waiting on a row lock; they never queued")


def _libpq_url(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://", 1)


@pytest.mark.postgres
@pytest.mark.parametrize("langflow_db", ["postgres"], indirect=True)
async def test_postgres_writers_racing_on_one_version(
    langflow_db: LangflowDatabase, memory_scope: MemoryScope, insert_messages
) -> None:
    """Two writers on two connections, both in flight on the same version: one wins, the other sees None."""
    await insert_messages(memory_scope, [(at(0), "hello")])
    base = await save(ids_of(memory_scope), Summary(text="base"))
    assert base is not None

    async with (
        await psycopg.AsyncConnection.connect(_libpq_url(langflow_db.url)) as blocker,
        await psycopg.AsyncConnection.connect(_libpq_url(langflow_db.url), autocommit=True) as observer,
    ):
        # Hold the row so both writers are provably inside their UPDATE before either can finish.
        await blocker.execute(
            "SELECT id FROM session_memory_state WHERE flow_id = %s AND session_id = %s FOR UPDATE",
            (memory_scope.flow_id, memory_scope.session_id),
        )
        writers = [
            asyncio.create_task(save(ids_of(memory_scope), dataclasses.replace(base, text=f"writer {n}")))
            for n in range(2)
        ]
        await _wait_for_lock_waiters(observer, 2)
        await blocker.rollback()
        results = [saved is not None for saved in await asyncio.gather(*writers)]

    assert sorted(results) == [False, True]
    loser_view = await stored_summary(**ids_of(memory_scope))
    assert loser_view is not None
    assert (loser_view.version, loser_view.text) == (2, f"writer {results.index(True)}")


@pytest.mark.postgres
@pytest.mark.parametrize("langflow_db", ["postgres"], indirect=True)
async def test_postgres_first_inserts_racing(
    langflow_db: LangflowDatabase, memory_scope: MemoryScope, insert_messages
) -> None:
    """Two first inserts of one scope, both waiting on the unique key: one row, one saved."""
    await insert_messages(memory_scope, [(at(0), "hello")])
    async with (
        await psycopg.AsyncConnection.connect(_libpq_url(langflow_db.url)) as blocker,
        await psycopg.AsyncConnection.connect(_libpq_url(langflow_db.url), autocommit=True) as observer,
    ):
        # An uncommitted insert of the same key makes both writers wait on the unique index.
        await blocker.execute(
            "INSERT INTO session_memory_state (id, flow_id, user_id, session_id, context_id, summary, pinned,"
            " absorbed_count, version, failed_folds, created_at, updated_at)"
            " VALUES (%s, %s, %s, %s, '', '', '{}', 0, 1, 0, now(), now())",
            (uuid.uuid4(), memory_scope.flow_id, memory_scope.user_id, memory_scope.session_id),
        )
        writers = [asyncio.create_task(save(ids_of(memory_scope), Summary(text=f"writer {n}"))) for n in range(2)]
        await _wait_for_lock_waiters(observer, 2)
        await blocker.rollback()
        results = [saved is not None for saved in await asyncio.gather(*writers)]

    assert sorted(results) == [False, True]
    stored = await stored_summary(**ids_of(memory_scope))
    assert stored is not None
    assert (stored.version, stored.text) == (1, f"writer {results.index(True)}")


async def test_database_refuses_a_second_no_context_row(
    langflow_db: LangflowDatabase, memory_scope: MemoryScope, insert_messages
) -> None:
    await insert_messages(memory_scope, [(at(0), "hello")])
    assert await save(ids_of(memory_scope), Summary()) is not None
    now = datetime.now(timezone.utc)
    duplicate = {
        "id": uuid.uuid4(),
        "flow_id": memory_scope.flow_id,
        "user_id": memory_scope.user_id,
        "session_id": memory_scope.session_id,
        "summary": "",
        "pinned": {},
        "folded_count": 0,
        "version": 1,
        "failed_folds": 0,
        "created_at": now,
        "updated_at": now,
    }
    engine = sync_engine(langflow_db)
    try:
        # context_id left out: the column default ('') applies, as for any writer that does not set it.
        with pytest.raises(IntegrityError), engine.begin() as connection:
            connection.execute(sa.insert(SUMMARIES).values(duplicate))
    finally:
        engine.dispose()


async def test_graph_run_cannot_widen_flow_or_owner(memory_scope: MemoryScope, insert_messages) -> None:
    await insert_messages(memory_scope, [(at(0), "hello"), (at(1), "hi")])
    assert await save(ids_of(memory_scope), Summary(text="mine")) is not None
    victim = MemoryScope.new()
    await insert_messages(victim, [(at(0), "secret")])
    victims = await save(ids_of(victim), Summary(text="victim's"))
    assert victims is not None

    with graph_run(memory_scope.flow_id, memory_scope.user_id):
        # The graph's own scope resolves, with or without the ids spelled out.
        implicit = {"flow_id": None, "user_id": None, "session_id": memory_scope.session_id}
        for own in (implicit, ids_of(memory_scope)):
            stored = await stored_summary(**own)
            assert stored is not None
            assert stored.text == "mine"
            assert len(await store_of(own).messages(limit=10)) == 2

        for widened in (ids_of(victim), ids_of(victim, flow_id=memory_scope.flow_id), ids_of(victim, user_id=None)):
            assert await stored_summary(**widened) is None
            assert await store_of(widened).messages(limit=10) == []
            assert await store_of(widened).messages(limit=10, newest=True) == []
            assert await save(widened, dataclasses.replace(victims, text="hijack")) is None
        # The session-wide read and reset of the HTTP API resolve the flow the same way.
        assert await sm.session_summaries(flow_id=victim.flow_id, session_id=victim.session_id) == []
        assert await sm.reset_session(flow_id=victim.flow_id, session_id=victim.session_id) == 0

    with graph_run(None, memory_scope.user_id):
        # A graph without a flow id binds "no flow": explicit ids do not get around it.
        assert await stored_summary(**ids_of(memory_scope)) is None
        assert await store_of(ids_of(memory_scope)).messages(limit=10) == []

    stored_victim = await stored_summary(**ids_of(victim))
    assert stored_victim is not None
    assert (stored_victim.text, stored_victim.version) == ("victim's", 1)


async def test_verbatim_messages_are_built_as_langflow_builds_them(memory_scope: MemoryScope, insert_messages) -> None:
    from langflow.memory import aget_messages

    await insert_messages(memory_scope, [(at(0), "from the user"), (at(1), "from the agent")])

    stored = await store_of(ids_of(memory_scope)).messages(limit=10)
    reference = await aget_messages(
        session_id=memory_scope.session_id, flow_id=memory_scope.flow_id, user_id=memory_scope.user_id, order="ASC"
    )
    assert [m.role for m in stored] == ["user", "assistant"]
    assert [m.text for m in stored] == ["from the user", "from the agent"]
    built = [await as_chat_message(m) for m in stored]
    assert [type(m) for m in built] == [type(m) for m in reference]
    assert [m.model_dump() for m in built] == [m.model_dump() for m in reference]
    assert all(m.timestamp.tzinfo is not None for m in stored)


async def _turn_by_separate_reads(store: sm.DatabaseStore, limit: int) -> tuple[Summary, list[str]]:
    summary = await store.load()
    return summary, [m.id for m in await store.messages(limit=limit, after=summary.cursor, newest=True)]


async def _turn(store: sm.DatabaseStore, limit: int) -> tuple[Summary, list[str]]:
    summary, messages = await store.load_turn(limit)
    return summary, [m.id for m in messages]


async def test_load_turn_reads_what_separate_summary_and_recent_reads_give(
    memory_scope: MemoryScope, insert_messages
) -> None:
    """No row, a cursor (with a timestamp tie after it), no unfolded message, a row without a cursor, a stale row."""
    from langflow.memory import adelete_messages

    rows = await insert_messages(memory_scope, [(at(i), f"m{i}") for i in range(6)] + [(at(5), "tie")])
    current_input = (await insert_messages(memory_scope, [(at(9), "the turn's input")]))[0]
    store = store_of(ids_of(memory_scope), before=str(current_input.id))
    ids = [str(r.id) for r in rows]
    tie_order = sorted(ids[5:])  # equal timestamps are read in id order

    summary, read = await _turn(store, limit=4)
    assert (summary, read) == (Summary(), ids[3:5] + tie_order)
    assert (summary, read) == await _turn_by_separate_reads(store, 4)

    folded = await store.save(Summary(text="s", pinned={"k": "v"}, cursor=Cursor(at(5), tie_order[0]), folded_count=6))
    assert folded is not None
    summary, read = await _turn(store, limit=4)
    assert (summary.text, summary.pinned, summary.cursor, summary.version, read) == (
        "s",
        {"k": "v"},
        folded.cursor,
        1,
        [tie_order[1]],
    )
    assert (summary, read) == await _turn_by_separate_reads(store, 4)

    folded = await store.save(dataclasses.replace(folded, cursor=Cursor(at(5), tie_order[1])))
    assert folded is not None
    assert await _turn(store, limit=4) == ((await store.load()), [])
    assert (await store.load()).text == "s"

    failing = Summary(failed_folds=2, retry_after=at(60), row_id=folded.row_id, version=2)
    assert await store.save(failing) is not None
    summary, read = await _turn(store, limit=3)
    assert (summary.failed_folds, summary.cursor, summary.version, read) == (2, None, 3, ids[4:5] + tie_order)
    assert (summary, read) == await _turn_by_separate_reads(store, 3)

    # The cursor's message is gone, the rest stays: a stale summary, read from the start.
    assert await store.save(dataclasses.replace(folded, cursor=Cursor(at(2), ids[2]), version=3)) is not None
    await delete_rows_behind_langflows_back([rows[2].id])
    summary, read = await _turn(store, limit=10)
    assert (summary.text, summary.cursor, summary.version, read) == ("", None, 4, ids[:2] + ids[3:5] + tie_order)
    assert (summary, read) == await _turn_by_separate_reads(store, 10)

    await adelete_messages(memory_scope.session_id, flow_id=memory_scope.flow_id, user_id=memory_scope.user_id)
    summary, read = await _turn(store, limit=10)
    assert (summary.text, summary.version, read) == ("", 4, [])


async def delete_rows_behind_langflows_back(message_ids: list[uuid.UUID]) -> None:
    """A delete on a plain connection, which no session listener sees (as raw SQL by an operator)."""
    from langflow.services.deps import get_db_service

    from langflow_summarizing_agent.storage.messages import message_table

    table = message_table()
    async with get_db_service().engine.begin() as connection:
        await connection.execute(sa.delete(table).where(table.c.id.in_(message_ids)))


async def move_rows_behind_langflows_back(message_ids: list[uuid.UUID], session_id: str) -> None:
    """An update on a plain connection, which no session listener sees."""
    from langflow.services.deps import get_db_service

    from langflow_summarizing_agent.storage.messages import message_table

    table = message_table()
    async with get_db_service().engine.begin() as connection:
        await connection.execute(sa.update(table).where(table.c.id.in_(message_ids)).values(session_id=session_id))


async def test_load_turn_keeps_to_its_context_and_stops_at_the_turns_input(
    memory_scope: MemoryScope, insert_messages
) -> None:
    """Other contexts, error rows and what was stored after the input (a timestamp tie goes by id) are not read."""
    input_id = uuid.UUID("80000000-0000-4000-8000-000000000000")
    ctx = {"context_id": "ctx"}
    rows = await insert_messages(memory_scope, [(at(i), f"m{i}") for i in range(4)], **ctx)
    await insert_messages(memory_scope, [(at(1.5), "other context")], context_id="other")
    await insert_messages(memory_scope, [(at(2.5), "failed")], error=True, **ctx)
    await insert_messages(memory_scope, [(at(2.6), "error category")], category="error", **ctx)
    await insert_messages(memory_scope, [(at(5), "input")], id=input_id, **ctx)
    await insert_messages(memory_scope, [(at(5), "tie before")], id=uuid.UUID(int=input_id.int - 1), **ctx)
    await insert_messages(memory_scope, [(at(5), "tie after")], id=uuid.UUID(int=input_id.int + 1), **ctx)
    await insert_messages(memory_scope, [(at(6), "a concurrent run's")], **ctx)
    store = store_of(ids_of(memory_scope, **ctx), before=str(input_id))

    summary, messages = await store.load_turn(10)
    assert (summary, [m.text for m in messages]) == (Summary(), ["m0", "m1", "m2", "m3", "tie before"])

    # A summary row of the session without a context is another scope; this context's row bounds the read.
    assert await store.save(Summary(text="ctx", cursor=Cursor(at(1), str(rows[1].id)))) is not None
    no_context = store_of(ids_of(memory_scope), before=str(input_id))
    assert await no_context.save(Summary(text="none")) is not None
    summary, messages = await store.load_turn(10)
    assert (summary.text, [m.text for m in messages]) == ("ctx", ["m2", "m3", "tie before"])


async def test_load_turn_bounds_the_read_by_the_cursor_message_itself(
    memory_scope: MemoryScope, insert_messages
) -> None:
    """A cursor whose message is in another session is stale; a stored timestamp that differs from the message's
    gives way to the message's, so the returned cursor is the one the read used."""
    rows = await insert_messages(memory_scope, [(at(i), f"m{i}") for i in range(5)])
    other_session = dataclasses.replace(memory_scope, session_id=f"{memory_scope.session_id}-other")
    await insert_messages(other_session, [(at(3), "elsewhere")])
    store = store_of(ids_of(memory_scope))

    assert await store.save(Summary(text="s", cursor=Cursor(at(3), str(rows[3].id)))) is not None
    await move_rows_behind_langflows_back([rows[3].id], other_session.session_id)
    summary, read = await _turn(store, limit=10)
    assert (summary.text, summary.cursor, read) == ("", None, [str(r.id) for r in rows if r.id != rows[3].id])

    shifted = Cursor(at(3.5), str(rows[1].id))  # the message says at(1)
    assert await store.save(dataclasses.replace(summary, text="s", cursor=shifted)) is not None
    summary, read = await _turn(store, limit=10)
    remaining = [str(r.id) for r in rows[2:] if r.id != rows[3].id]
    assert (summary.text, summary.cursor, read) == ("s", Cursor(at(1), str(rows[1].id)), remaining)
    assert read == [m.id for m in await store.messages(limit=10, after=summary.cursor, newest=True)]


async def test_load_turn_is_one_statement_when_unfolded_messages_exist(
    langflow_db: LangflowDatabase, memory_scope: MemoryScope, insert_messages
) -> None:
    """The turn without a fold costs the database what the stock Agent's history read costs: one statement."""
    from tests.support.round_trips import statement_counter

    rows = await insert_messages(memory_scope, [(at(i), f"m{i}") for i in range(30)])
    store = store_of(ids_of(memory_scope), before=str(rows[-1].id))
    for cursor in (None, Cursor(at(20), str(rows[20].id))):
        if cursor is not None:
            assert await store.save(Summary(text="s", cursor=cursor)) is not None
        with statement_counter() as trips:
            summary, messages = await store.load_turn(5)
        assert (summary.cursor, [m.text for m in messages]) == (cursor, ["m24", "m25", "m26", "m27", "m28"])
        assert (trips.statements, trips.commits) == (1, 1)


# Without Langflow's database


def test_unsupported_without_langflow_services_answers_empty(tmp_path) -> None:
    """A fresh process where langflow is installed but its services never started: nothing raises."""
    script = textwrap.dedent(
        """
        import asyncio, uuid
        from datetime import datetime, timezone
        from langflow_summarizing_agent.engine.records import Cursor, Scope, Summary
        from langflow_summarizing_agent.engine.store import HeldScopes
        from langflow_summarizing_agent.storage import store as sm

        async def main():
            ids = {"flow_id": uuid.uuid4(), "user_id": uuid.uuid4(), "session_id": "s"}
            cursor = Cursor(datetime.now(timezone.utc), str(uuid.uuid4()))
            store = sm.DatabaseStore(Scope(**ids), locks=HeldScopes())
            async with store.fold_lock() as held:
                pass
            return [
                sm.database_available(),
                await store.load() == Summary(),
                await store.load_turn(5) == (Summary(), []),
                await store.save(Summary()),
                await store.messages(limit=5),
                await store.messages(limit=5, newest=True),
                await store.count(before=cursor),
                await sm.session_summaries(flow_id=ids["flow_id"], session_id="s"),
                await sm.reset_session(flow_id=ids["flow_id"], session_id="s"),
                held,
            ]

        print(asyncio.run(main()))
        """
    )
    env = {key: value for key, value in os.environ.items() if not key.startswith("LANGFLOW_")}
    env["LANGFLOW_CONFIG_DIR"] = str(tmp_path)
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120, check=False
    )

    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().splitlines()[-1] == "[False, True, True, None, [], [], 0, [], 0, False]"
    assert not any(tmp_path.glob("*.db")), "no database may be created when Langflow's services are not running"


async def test_the_fold_lock_holds_across_worker_processes_on_postgres_and_within_one_on_sqlite(
    langflow_db: LangflowDatabase, memory_scope: MemoryScope
) -> None:
    store = memory_scope.store(locks=HeldScopes())
    # Another worker process has the database but none of this process's locks.
    another_worker = memory_scope.store(locks=HeldScopes())
    async with (
        store.fold_lock() as here,
        store.fold_lock() as again_here,
        another_worker.fold_lock() as in_another_worker,
    ):
        assert (here, again_here) == (True, False)
        assert in_another_worker is (langflow_db.backend != "postgres")
    async with store.fold_lock() as after_release:
        assert after_release


@pytest.mark.parametrize("langflow_db", ["postgres"], indirect=True)
async def test_a_session_wide_read_waits_for_the_sessions_fold_running_in_another_worker(
    langflow_db: LangflowDatabase, memory_scope: MemoryScope
) -> None:
    # Another worker (locks of its own, a connection of its own) folds one context of the session.
    another_worker = memory_scope.store(locks=HeldScopes(), context_id="ctx")
    other_session = MemoryScope.new()

    async def ended(scope: MemoryScope, seconds: float) -> bool:
        return await sm.session_folds_ended(flow_id=scope.flow_id, session_id=scope.session_id, timeout_seconds=seconds)

    assert await ended(memory_scope, 0.2)
    async with another_worker.fold_lock() as held:
        assert held
        assert not await ended(memory_scope, 0.2)
        assert await ended(other_session, 0.2)
        waiting = asyncio.create_task(ended(memory_scope, 30))
        await asyncio.sleep(0.5)
        assert not waiting.done()
    assert await waiting
