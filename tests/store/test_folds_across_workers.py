"""A fold after the reply that finds the session's fold running in another worker (PostgreSQL: another worker holds
the session's advisory lock) makes no summary call, answers how to wait for that fold, and folds once it ended."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone

import pytest

from langflow_summarizing_agent.engine.fold import CatchUp, SaveFailures
from langflow_summarizing_agent.engine.settings import FoldSettings
from langflow_summarizing_agent.engine.store import HeldScopes
from langflow_summarizing_agent.wiring.after_reply import FoldsElsewhere, Reply, fold_after_reply
from tests.support.fakes import RecordingSummarizer
from tests.support.langflow_db import LangflowDatabase, MemoryScope

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


@pytest.mark.parametrize("langflow_db", ["postgres"], indirect=True)
async def test_the_fold_after_the_reply_follows_the_sessions_fold_running_in_another_worker(
    langflow_db: LangflowDatabase, memory_scope: MemoryScope, insert_messages
) -> None:
    await insert_messages(memory_scope, [(T0 + timedelta(seconds=n), f"message {n}") for n in range(12)])
    summarizer = RecordingSummarizer()
    settings = FoldSettings(window=3, fold_batch=4, history_token_budget=0)
    store = memory_scope.store(locks=HeldScopes())
    fold = fold_after_reply("Summarizing Agent", store, summarizer, settings, SaveFailures())
    another_worker = memory_scope.store(locks=HeldScopes())

    async with another_worker.fold_lock() as held:
        assert held
        waiting = await fold(Reply())
        assert isinstance(waiting, FoldsElsewhere), waiting
        ended = asyncio.ensure_future(waiting.ended())
        await asyncio.sleep(0.5)
        assert not ended.done(), "it waits for the other worker's fold"
    assert await asyncio.wait_for(ended, timeout=30)
    assert summarizer.calls == 0, "no summary call beside the other worker's fold"

    folded = await fold(Reply())
    assert isinstance(folded, CatchUp) and folded.folded >= 4 and summarizer.calls == 1
