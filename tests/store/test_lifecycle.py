"""A summary goes wherever its messages go: deletes and renames of chat history keep the summary rows in step.

The listeners driven in-process with the statements Langflow's delete and rename paths issue, on SQLite and
Postgres.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from sqlalchemy import delete, update
from sqlmodel import col, select

from langflow_summarizing_agent.engine.records import Cursor, Summary
from langflow_summarizing_agent.storage.summaries import SUMMARIES, SummaryRows
from langflow_summarizing_agent.wiring import lifecycle, runtime
from tests.support.langflow_db import MemoryScope

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=timezone.utc)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


@pytest.fixture
def listeners() -> Iterator[None]:
    """The listeners as the registrar installs them, removed afterwards so other tests see plain Langflow."""
    lifecycle.install_listeners()
    try:
        yield
    finally:
        lifecycle._remove_listeners()


async def save_folded(scope: MemoryScope, cursor_message: Any, *, context_id: str | None = None, **kw: Any) -> None:
    summary = Summary(
        text=f"summary up to {cursor_message.text}",
        pinned={"project_id": "PRJ-1"},
        cursor=Cursor(cursor_message.timestamp, str(cursor_message.id)),
        folded_count=2,
        **kw,
    )
    assert await scope.store(context_id=context_id).save(summary) is not None


async def summary_rows(flow_id: uuid.UUID) -> list[tuple[str, str, str]]:
    """(session_id, context_id, summary) of every summary row of the flow."""
    from langflow.services.deps import session_scope

    async with session_scope() as session:
        columns = select(SUMMARIES.c.session_id, SUMMARIES.c.context_id, SUMMARIES.c.summary)
        rows = await session.exec(columns.where(SUMMARIES.c.flow_id == flow_id))
        return sorted(tuple(row) for row in rows)


async def message_texts(scope: MemoryScope, session_id: str | None = None) -> list[str]:
    from langflow.services.database.models.message.model import MessageTable
    from langflow.services.deps import session_scope

    async with session_scope() as session:
        rows = await session.exec(
            select(MessageTable.text)
            .where(
                col(MessageTable.flow_id) == scope.flow_id,
                col(MessageTable.session_id) == (session_id or scope.session_id),
            )
            .order_by(col(MessageTable.timestamp))
        )
        return list(rows)


async def delete_message_ids(ids: list[uuid.UUID]) -> None:
    """The statement of `DELETE /api/v1/monitor/messages` and the session deletes (`message/crud.py`)."""
    from langflow.services.database.models.message.model import MessageTable
    from langflow.services.deps import session_scope

    async with session_scope() as session:
        await session.exec(
            delete(MessageTable).where(col(MessageTable.id).in_(ids)).execution_options(synchronize_session="fetch")
        )


async def rename_like_the_monitor(scope: MemoryScope, old: str, new: str) -> None:
    """`PATCH /api/v1/monitor/messages/session/{old}`: load the messages, set `session_id`, flush."""
    from langflow.services.database.models.message.model import MessageTable
    from langflow.services.deps import session_scope

    async with session_scope() as session:
        messages = (
            await session.exec(
                select(MessageTable).where(
                    col(MessageTable.flow_id) == scope.flow_id, col(MessageTable.session_id) == old
                )
            )
        ).all()
        for message in messages:
            message.session_id = new
        session.add_all(messages)
        await session.flush()


async def four_messages(scope: MemoryScope, insert_messages, **columns: Any) -> list[Any]:
    return await insert_messages(
        scope, [(at(0), "first"), (at(1), "second"), (at(2), "third"), (at(3), "fourth")], **columns
    )


# Installation


def test_installing_twice_listens_once(listeners: None) -> None:
    from sqlalchemy.orm import Session

    lifecycle.install_listeners()

    assert lifecycle.listeners_installed()
    dispatch = Session().dispatch
    assert list(dispatch.do_orm_execute).count(lifecycle._on_orm_execute) == 1
    assert list(dispatch.before_flush).count(lifecycle._before_flush) == 1


# Deletes


async def two_sessions_with_summaries(scope: MemoryScope, insert_messages: Any) -> MemoryScope:
    """Four messages in `scope`'s session, with summaries in no context and in "ctx", and the same in another session
    of the flow, with one summary; returns that other session."""
    messages = await four_messages(scope, insert_messages)
    other = MemoryScope(scope.flow_id, scope.user_id, f"{scope.session_id}-other")
    other_messages = await four_messages(other, insert_messages)
    await save_folded(scope, messages[1])
    await save_folded(scope, messages[1], context_id="ctx")
    await save_folded(other, other_messages[1])
    return other


async def test_deleting_a_whole_session_deletes_its_summary_in_every_context(
    listeners: None, memory_scope: MemoryScope, insert_messages
) -> None:
    from langflow.memory import adelete_messages

    other = await two_sessions_with_summaries(memory_scope, insert_messages)

    await adelete_messages(memory_scope.session_id, flow_id=memory_scope.flow_id, user_id=memory_scope.user_id)

    assert await summary_rows(memory_scope.flow_id) == [(other.session_id, "", "summary up to second")]
    assert await message_texts(other) == ["first", "second", "third", "fourth"]


async def test_deleting_a_session_drops_its_usage_scale_and_save_back_off_with_its_summary(
    listeners: None, memory_scope: MemoryScope, insert_messages
) -> None:
    from langflow.memory import adelete_messages

    other = await two_sessions_with_summaries(memory_scope, insert_messages)
    keys = [memory_scope.scope().key, memory_scope.scope(context_id="ctx").key, other.scope().key]
    with runtime.using(runtime.Runtime()) as kept:
        for key in keys:
            kept.usage.observe(key, counted=100, reported=150)
            kept.save_failures.record(key, Summary(failed_folds=1, retry_after=at(60)))

        await adelete_messages(memory_scope.session_id, flow_id=memory_scope.flow_id, user_id=memory_scope.user_id)

    assert [kept.usage.scale(key) for key in keys] == [1.0, 1.0, 1.5]
    assert [kept.save_failures.applied(key, Summary()).failed_folds for key in keys] == [0, 0, 1]


async def test_deleting_a_folded_message_discards_the_summary(
    listeners: None, memory_scope: MemoryScope, insert_messages
) -> None:
    messages = await four_messages(memory_scope, insert_messages)
    await save_folded(memory_scope, messages[1])

    await delete_message_ids([messages[0].id])

    assert await summary_rows(memory_scope.flow_id) == []
    assert await message_texts(memory_scope) == ["second", "third", "fourth"]


async def test_deleting_the_cursor_message_itself_discards_the_summary(
    listeners: None, memory_scope: MemoryScope, insert_messages
) -> None:
    messages = await four_messages(memory_scope, insert_messages)
    await save_folded(memory_scope, messages[1])

    await delete_message_ids([messages[1].id])

    assert await summary_rows(memory_scope.flow_id) == []


async def test_deleting_only_unfolded_messages_keeps_the_summary(
    listeners: None, memory_scope: MemoryScope, insert_messages
) -> None:
    messages = await four_messages(memory_scope, insert_messages)
    await save_folded(memory_scope, messages[1])

    await delete_message_ids([messages[2].id, messages[3].id])

    assert await summary_rows(memory_scope.flow_id) == [(memory_scope.session_id, "", "summary up to second")]
    assert await message_texts(memory_scope) == ["first", "second"]


async def test_a_message_at_the_cursor_timestamp_after_the_cursor_id_is_unfolded(
    listeners: None, memory_scope: MemoryScope, insert_messages
) -> None:
    same_instant = await insert_messages(memory_scope, [(at(0), "a"), (at(0), "b")])
    first, second = sorted(same_instant, key=lambda m: str(m.id))
    await save_folded(memory_scope, first)

    await delete_message_ids([second.id])
    assert len(await summary_rows(memory_scope.flow_id)) == 1

    await delete_message_ids([first.id])
    assert await summary_rows(memory_scope.flow_id) == []


async def test_a_deleted_message_of_another_context_keeps_that_contexts_summary(
    listeners: None, memory_scope: MemoryScope, insert_messages
) -> None:
    in_a = await insert_messages(memory_scope, [(at(0), "a1"), (at(1), "a2")], context_id="a")
    in_b = await insert_messages(memory_scope, [(at(2), "b1"), (at(3), "b2")], context_id="b")
    await save_folded(memory_scope, in_a[1], context_id="a")
    await save_folded(memory_scope, in_b[1], context_id="b")
    await save_folded(memory_scope, in_b[1])

    await delete_message_ids([in_b[0].id])

    # The no-context summary folded every context of the session, so it goes too.
    assert await summary_rows(memory_scope.flow_id) == [(memory_scope.session_id, "a", "summary up to a2")]


async def test_deleting_every_message_deletes_a_summary_without_cursor(
    listeners: None, memory_scope: MemoryScope, insert_messages
) -> None:
    messages = await insert_messages(memory_scope, [(at(0), "only")])
    store = memory_scope.store()
    assert await store.save(Summary(failed_folds=2)) is not None

    await delete_message_ids([messages[0].id])

    assert await summary_rows(memory_scope.flow_id) == []


async def test_deleting_one_message_object_follows_the_same_rule(
    listeners: None, memory_scope: MemoryScope, insert_messages
) -> None:
    from langflow.memory import delete_message

    messages = await four_messages(memory_scope, insert_messages)
    await save_folded(memory_scope, messages[1])

    await delete_message(messages[3].id)
    assert len(await summary_rows(memory_scope.flow_id)) == 1

    await delete_message(messages[0].id)
    assert await summary_rows(memory_scope.flow_id) == []
    assert await message_texts(memory_scope) == ["second", "third"]


async def test_a_rolled_back_delete_keeps_the_summary(
    listeners: None, memory_scope: MemoryScope, insert_messages
) -> None:
    from langflow.services.database.models.message.model import MessageTable
    from langflow.services.deps import session_scope

    messages = await four_messages(memory_scope, insert_messages)
    await save_folded(memory_scope, messages[1])

    with pytest.raises(RuntimeError, match="abort"):
        async with session_scope() as session:
            await session.exec(delete(MessageTable).where(col(MessageTable.session_id) == memory_scope.session_id))
            assert await session_summary_count(session, memory_scope) == 0
            raise RuntimeError("abort")

    assert len(await summary_rows(memory_scope.flow_id)) == 1
    assert len(await message_texts(memory_scope)) == 4


async def session_summary_count(session: Any, scope: MemoryScope) -> int:
    rows = await session.exec(select(SUMMARIES.c.id).where(SUMMARIES.c.flow_id == scope.flow_id))
    return len(rows.all())


def break_the_summary_delete(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(rows: SummaryRows, plan: Any, **_: Any) -> int:
        from sqlalchemy import text

        rows.connection.execute(text("SELECT * FROM no_such_table_for_summaries"))
        return 0

    monkeypatch.setattr(SummaryRows, "apply_message_delete", broken)


async def test_a_failure_in_the_listener_does_not_fail_langflows_delete(
    listeners: None, memory_scope: MemoryScope, insert_messages, monkeypatch: pytest.MonkeyPatch, caplog
) -> None:
    messages = await four_messages(memory_scope, insert_messages)
    await save_folded(memory_scope, messages[1])
    break_the_summary_delete(monkeypatch)

    await delete_message_ids([messages[0].id, messages[1].id])

    assert await message_texts(memory_scope) == ["third", "fourth"]
    assert "could not delete the summaries of deleted messages" in caplog.text
    assert "ignored and rebuilt only if its cursor message is no longer in its session" in caplog.text
    # The lazy check is the backstop: the cursor message is gone, so the summary is not used.
    assert (await memory_scope.store().load()).text == ""


async def test_after_a_failed_delete_a_summary_whose_cursor_message_remains_stays_in_use(
    listeners: None, memory_scope: MemoryScope, insert_messages, monkeypatch: pytest.MonkeyPatch, caplog
) -> None:
    messages = await four_messages(memory_scope, insert_messages)
    await save_folded(memory_scope, messages[1])
    break_the_summary_delete(monkeypatch)

    await delete_message_ids([messages[0].id])

    assert await message_texts(memory_scope) == ["second", "third", "fourth"]
    assert "otherwise its summary stays in use" in caplog.text
    # As the log says: the lazy check does not catch a folded message deleted before the cursor.
    summary = await memory_scope.store().load()
    assert summary.text == "summary up to second"


# Renames


async def test_a_renamed_session_keeps_its_summary_under_the_new_id(
    listeners: None, memory_scope: MemoryScope, insert_messages
) -> None:
    messages = await four_messages(memory_scope, insert_messages)
    await save_folded(memory_scope, messages[1])
    await save_folded(memory_scope, messages[1], context_id="ctx")
    renamed = f"{memory_scope.session_id}-renamed"

    await rename_like_the_monitor(memory_scope, memory_scope.session_id, renamed)

    assert await summary_rows(memory_scope.flow_id) == [
        (renamed, "", "summary up to second"),
        (renamed, "ctx", "summary up to second"),
    ]
    summary = await memory_scope.store(session_id=renamed).load()
    assert (summary.text, summary.cursor) == ("summary up to second", Cursor(at(1), str(messages[1].id)))


async def test_renaming_into_a_session_with_messages_discards_both_summaries(
    listeners: None, memory_scope: MemoryScope, insert_messages
) -> None:
    messages = await four_messages(memory_scope, insert_messages)
    target = MemoryScope(memory_scope.flow_id, memory_scope.user_id, f"{memory_scope.session_id}-target")
    target_messages = await four_messages(target, insert_messages)
    await save_folded(memory_scope, messages[1])
    await save_folded(target, target_messages[1])

    await rename_like_the_monitor(memory_scope, memory_scope.session_id, target.session_id)

    assert await summary_rows(memory_scope.flow_id) == []
    assert len(await message_texts(target)) == 8


async def test_a_bulk_update_of_session_id_moves_the_summary(
    listeners: None, memory_scope: MemoryScope, insert_messages
) -> None:
    from langflow.services.database.models.message.model import MessageTable
    from langflow.services.deps import session_scope

    messages = await four_messages(memory_scope, insert_messages)
    await save_folded(memory_scope, messages[1])
    renamed = f"{memory_scope.session_id}-bulk"

    async with session_scope() as session:
        await session.exec(
            update(MessageTable)
            .where(
                col(MessageTable.flow_id) == memory_scope.flow_id,
                col(MessageTable.session_id) == memory_scope.session_id,
            )
            .values(session_id=renamed)
        )

    assert await summary_rows(memory_scope.flow_id) == [(renamed, "", "summary up to second")]


async def test_moving_part_of_a_session_discards_its_summary(
    listeners: None, memory_scope: MemoryScope, insert_messages
) -> None:
    from langflow.services.database.models.message.model import MessageTable
    from langflow.services.deps import session_scope

    messages = await four_messages(memory_scope, insert_messages)
    await save_folded(memory_scope, messages[1])

    async with session_scope() as session:
        await session.exec(update(MessageTable).where(MessageTable.id == messages[3].id).values(session_id="elsewhere"))

    assert await summary_rows(memory_scope.flow_id) == []
    assert await message_texts(memory_scope) == ["first", "second", "third"]
