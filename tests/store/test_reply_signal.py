"""The session's final-reply signal: a fold left for after a stored reply starts once Langflow stores a message of
another sender than the user in the session that is final (not partial, with text), new or updated, with no
polling. Langflow stores the Agent's reply as partial before it calls the model, and a streamed Chat Output row empty
before its text: neither starts a fold."""

from __future__ import annotations

import asyncio
from datetime import datetime, timezone
from typing import Any

from langflow_summarizing_agent.engine.fold import CatchUp
from langflow_summarizing_agent.engine.records import ScopeKey, Summary
from langflow_summarizing_agent.wiring.after_reply import AfterReply, ReplySignal
from tests.support.langflow_db import MemoryScope
from tests.support.runtimes import folding_after_replies

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=timezone.utc)


async def waiting_fold(folds: AfterReply, key: ScopeKey) -> asyncio.Event:
    """A fold of the session left for after its stored reply; the event is set once it starts."""
    started = asyncio.Event()

    async def fold() -> CatchUp | None:
        started.set()
        return CatchUp(Summary())

    waiter = folds._wait_for_reply(key, ReplySignal.STORED_REPLY, "turn")
    folds.start(key, fold, after=lambda: folds._reply_came(key, waiter))
    return started


async def test_a_stored_reply_starts_the_sessions_fold_and_a_user_message_does_not(
    memory_scope: MemoryScope, insert_messages: Any
) -> None:
    other = MemoryScope.new()
    with folding_after_replies() as folds:
        key = memory_scope.scope().key
        started = await waiting_fold(folds, key)
        await insert_messages(memory_scope, [(T0, "the user's question")])
        await insert_messages(other, [(T0, "another session's question"), (T0, "another session's reply")])
        await asyncio.sleep(0.1)
        assert not started.is_set(), "a user message or another session's reply started the fold"

        await insert_messages(memory_scope, [(T0, "a question"), (T0, "the reply")])
        await asyncio.wait_for(started.wait(), timeout=5)
        await folds.wait(key)


async def test_a_partial_or_empty_reply_row_starts_no_fold_and_its_final_update_does(
    memory_scope: MemoryScope, insert_messages: Any
) -> None:
    from langflow.services.database.models.message.model import MessageTable
    from langflow.services.deps import session_scope

    with folding_after_replies() as folds:
        key = memory_scope.scope().key
        started = await waiting_fold(folds, key)
        [partial] = await insert_messages(memory_scope, [(T0, "")], sender="Machine", properties={"state": "partial"})
        [empty] = await insert_messages(memory_scope, [(T0, "")], sender="Machine")
        async with session_scope() as session:
            row = await session.get(MessageTable, partial.id)
            assert row is not None
            row.text = "Working on it"
            session.add(row)
        await asyncio.sleep(0.1)
        assert not started.is_set(), "Langflow's partial row, or an empty streamed row, started the fold"

        async with session_scope() as session:
            row = await session.get(MessageTable, empty.id)
            assert row is not None
            row.text = "The whole reply, streamed."
            session.add(row)
        await asyncio.wait_for(started.wait(), timeout=5)
        await folds.wait(key)
