"""Many runs on one session at once in one process, with concurrent graph runs on Langflow's services (SQLite and
Postgres), through the Summarizing Agent and the Summarizing Message History: every run completes, no fold is lost or
applied twice, versions only go up, and no summary call is wasted (made, then thrown away because another run saved
first).
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import datetime, timedelta, timezone

import pytest
import sqlalchemy as sa

from langflow_summarizing_agent.engine.records import Cursor
from tests.support.agent_runs import ChatSession, scripted_session
from tests.support.fold_audit import FOLD_OFTEN, SummaryWatch, check_fold_bookkeeping
from tests.support.history_runs import SESSION_KINDS
from tests.support.langflow_db import LangflowDatabase, MemoryScope

CONCURRENT_RUNS = 16
T0 = datetime(2026, 2, 1, 12, 0, tzinfo=timezone.utc)
# Concurrent graph runs in one process


@pytest.mark.parametrize("kind", SESSION_KINDS)
async def test_concurrent_graph_runs_in_one_process_fold_each_message_once(
    langflow_db: LangflowDatabase, kind: type[ChatSession]
) -> None:
    # The history flow's model gets a prompt that ends with the question: its last line makes the reply's.
    echo = "question" if kind is ChatSession else "question_line"
    chat = scripted_session(FOLD_OFTEN, kind=kind, reply="Noted:", echo=echo, fold_answer="list", fold_delay=0.05)
    for index in range(3):
        await chat.say(f"warm-up question {index}")

    engine = sa.create_engine(langflow_db.url, poolclass=sa.pool.NullPool)
    try:
        with SummaryWatch(engine, chat.flow_id, chat.session_id) as watch:
            replies = await asyncio.gather(*(chat.say(f"concurrent question {n}") for n in range(CONCURRENT_RUNS)))
        for n, reply in enumerate(replies):
            assert reply.startswith("Noted:")
            assert reply.strip().endswith(f"concurrent question {n}")
        state = check_fold_bookkeeping(engine, chat.flow_id, chat.session_id)
        await chat.say("one more question once the dust has settled")
        settled = check_fold_bookkeeping(engine, chat.flow_id, chat.session_id)
    finally:
        engine.dispose()
    watch.assert_only_moved_forward(state)
    assert settled["version"] >= state["version"]
    assert len(chat.model.fold_calls) == settled["version"], "a summary call was thrown away"


async def test_a_turn_reads_only_what_was_stored_before_its_input(memory_scope: MemoryScope, insert_messages) -> None:
    """Messages a concurrent run stored after this turn's input stay unread, so a fold cannot pass over the input."""
    rows = await insert_messages(memory_scope, [(T0 + timedelta(seconds=n), f"m{n}") for n in range(6)])
    store = memory_scope.store(before=rows[2].id)

    assert [m.text for m in await store.messages(limit=10, newest=True)] == ["m0", "m1"]
    assert [m.text for m in await store.messages(limit=10, after=None)] == ["m0", "m1"]
    assert await store.count(after=None, before=Cursor(T0 + timedelta(hours=1), str(uuid.uuid4()))) == 2
    # An input that is not stored (no id in the table) hides nothing else.
    unstored = memory_scope.store(before=uuid.uuid4())
    assert len(await unstored.messages(limit=10, newest=True)) == 6
