"""The session's reply signal: a fold left for after the reply starts once Langflow stores a message of another
sender than the user in the session, with no polling."""

from __future__ import annotations

import asyncio
from datetime import datetime, timezone
from typing import Any

from langflow_summarizing_agent.engine.fold import CatchUp
from langflow_summarizing_agent.engine.records import Summary
from tests.support.langflow_db import MemoryScope
from tests.support.runtimes import folding_after_replies

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=timezone.utc)


async def test_a_stored_reply_starts_the_sessions_fold_and_a_user_message_does_not(
    memory_scope: MemoryScope, insert_messages: Any
) -> None:
    other = MemoryScope.new()
    started = asyncio.Event()

    async def fold() -> CatchUp | None:
        started.set()
        return CatchUp(Summary())

    with folding_after_replies() as folds:
        key = memory_scope.scope().key
        folds.start(key, fold, after=folds._reply_of(key))
        await insert_messages(memory_scope, [(T0, "the user's question")])
        await insert_messages(other, [(T0, "another session's question"), (T0, "another session's reply")])
        await asyncio.sleep(0.1)
        assert not started.is_set(), "a user message or another session's reply started the fold"

        await insert_messages(memory_scope, [(T0, "a question"), (T0, "the reply")])
        await asyncio.wait_for(started.wait(), timeout=5)
        await folds.wait(key)
