"""Isolation: another user, another flow or another context id never reads, overwrites or deletes a summary row.

Through the components (graph runs on Langflow's services, SQLite and Postgres: the Summarizing Agent's flow and the
Summarizing Message History's) and through the data functions.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timezone
from typing import Any

import pytest
import sqlalchemy as sa

from langflow_summarizing_agent.engine.prompt import SUMMARY_PREFIX
from langflow_summarizing_agent.engine.records import Summary
from langflow_summarizing_agent.storage.summaries import SUMMARIES, SummaryRows
from tests.support.agent_runs import FOLD_EACH_TURN, ChatSession
from tests.support.history_runs import SESSION_KINDS
from tests.support.langflow_db import LangflowDatabase, MemoryScope, database_store

VICTIM_TURNS = ["I'm on project PRJ-123 on the EU cluster.", "The deploy fails.", "Still failing.", "Any idea?"]
INTRUDER_TURNS = ["I'm on project PRJ-999 on the US cluster.", "Show me what you know.", "Everything?", "Sure?"]


async def summary_rows_of_session(session_id: str) -> list[dict[str, Any]]:
    """Every summary row with this session id, whoever owns it, read directly."""
    from langflow.services.deps import session_scope

    async with session_scope() as session:
        stmt = sa.select(SUMMARIES).where(SUMMARIES.c.session_id == session_id).order_by(SUMMARIES.c.id)
        rows = await (await session.connection()).execute(stmt)
        return [dict(row._mapping) for row in rows]


async def on_summary_rows(action: Callable[[SummaryRows], Any]) -> Any:
    """`action(SummaryRows)` on a connection of Langflow's database, in a transaction of its own."""
    from langflow.services.deps import session_scope

    async with session_scope() as session:
        return await session.run_sync(lambda sync: action(SummaryRows(sync.connection())))


def sent_text(chat: ChatSession) -> str:
    return "\n".join(str(message.content) for call in chat.model.calls for message in call)


# Through the component


@pytest.mark.parametrize("kind", SESSION_KINDS)
@pytest.mark.parametrize("other", ["user", "flow", "context"])
async def test_another_user_flow_or_context_on_the_same_session_id_never_touches_the_summary_row(
    langflow_db: LangflowDatabase, other: str, kind: type[ChatSession]
) -> None:
    victim = kind(settings=FOLD_EACH_TURN, context_id="ctx-a" if other == "context" else None)
    for text in VICTIM_TURNS:
        await victim.say(text)
    [victim_row] = await summary_rows_of_session(victim.session_id)
    assert victim_row["pinned"] == {"project_id": "PRJ-123", "cluster": "EU cluster"}
    assert victim_row["context_id"] == (victim.context_id or "")

    intruder = replace(
        victim,
        recorder_name=f"rec-{uuid.uuid4().hex[:8]}",
        context_id="ctx-b" if other == "context" else None,
        last_agent=None,
        user_id=uuid.uuid4() if other == "user" else victim.user_id,
        flow_id=uuid.uuid4() if other == "flow" else victim.flow_id,
    )
    for text in INTRUDER_TURNS:
        await intruder.say(text)

    assert intruder.model.fold_calls, "the intruder folded its own messages"
    assert "PRJ-123" not in sent_text(intruder), "never reads the victim's messages or summary"
    rows = await summary_rows_of_session(victim.session_id)
    assert len(rows) == 2
    assert victim_row in rows, "the victim's row is neither overwritten nor deleted"
    [intruder_row] = [row for row in rows if row["id"] != victim_row["id"]]
    assert intruder_row["pinned"] == {"project_id": "PRJ-999", "cluster": "US cluster"}

    await victim.say("Which cluster again?")
    summary = victim.sent_history()[0]
    assert summary.startswith(SUMMARY_PREFIX)
    assert "PRJ-123" in summary
    assert "PRJ-999" not in sent_text(victim)


# Through the data functions


@pytest.mark.parametrize("other", ["user", "flow", "context"])
async def test_the_store_never_crosses_user_flow_or_context(
    memory_scope: MemoryScope, insert_messages, other: str
) -> None:
    intruders_ids = {
        "user": replace(memory_scope, user_id=uuid.uuid4()),
        "flow": replace(memory_scope, flow_id=uuid.uuid4()),
        "context": memory_scope,
    }[other]
    owner = memory_scope.scope(context_id="ctx-a")
    intruder = intruders_ids.scope(context_id="ctx-b" if other == "context" else "ctx-a")
    for ids, scope in ((memory_scope, owner), (intruders_ids, intruder)):
        await insert_messages(ids, [(datetime.now(timezone.utc), "hello")], context_id=scope.context_id)
    assert await database_store(owner).save(Summary(text="owner's")) is not None
    owners = await database_store(owner).load()

    assert await database_store(intruder).load() == Summary()
    hijack = replace(owners, text="hijack")
    assert await database_store(intruder).save(hijack) is None
    if other != "context":
        # A purge covers every context of a session by design; it only ever reaches the caller's flow and owner.
        flow_id, user_id = intruders_ids.flow_id, intruders_ids.user_id
        purged = await on_summary_rows(
            lambda rows: rows.purge(flow_id, session_ids=[memory_scope.session_id], user_id=user_id)
        )
        assert purged == 0
    assert await database_store(intruder).save(Summary(text="own")) is not None

    stored = await database_store(owner).load()
    assert (stored.text, stored.version) == ("owner's", 1)
    assert (await database_store(intruder).load()).text == "own"
