"""Faults in the summary call and in the database: the turn completes, nothing is lost, and the status or log says why.

Real graph runs on Langflow's services (SQLite and Postgres), through the Summarizing Agent and the Summarizing
Message History (`SESSION_KINDS`). Each session folds once successfully, then meets the fault on its next fold.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import sqlalchemy as sa

from langflow_summarizing_agent.engine import turn as turn_module
from langflow_summarizing_agent.engine.prompt import SUMMARY_PREFIX
from langflow_summarizing_agent.engine.records import Summary
from langflow_summarizing_agent.storage.models import TABLE_NAME
from tests.support.agent_runs import FOLD_EACH_TURN, ChatSession, fold_once_then, scripted_session, state_of
from tests.support.history_runs import SESSION_KINDS, HistoryChatSession
from tests.support.langflow_db import LangflowDatabase


def assert_kept(before: Summary, after: Summary) -> None:
    assert (after.text, after.pinned, after.cursor, after.folded_count) == (
        before.text,
        before.pinned,
        before.cursor,
        before.folded_count,
    )


# The summary call fails or answers with something unusable


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        pytest.param(RuntimeError("provider unavailable"), "RuntimeError: provider unavailable", id="exception"),
        pytest.param("", "the summary model returned an empty answer", id="empty"),
        pytest.param("I'm sorry, I can't summarize that.", "not a JSON object", id="invalid-json"),
        pytest.param('["- a", "- b"]', "not a JSON object", id="json-array"),
        pytest.param('{"pinned": {"project_id": "PRJ-9"}, "notes": "- x"}', 'has no "summary" text', id="no-summary"),
        pytest.param('{"pinned": ["PRJ-9"], "summary": "- x"}', '"pinned" is not a JSON object', id="pinned-list"),
    ],
)
@pytest.mark.parametrize("kind", SESSION_KINDS)
async def test_unusable_summary_answer_keeps_summary_and_cursor_and_the_turn_runs(
    kind: type[ChatSession], langflow_db: LangflowDatabase, answer: Any, reason: str
) -> None:
    chat = scripted_session(FOLD_EACH_TURN, kind=kind, fold_script=[None, answer])
    before = await fold_once_then(chat)

    reply = await chat.say("Any other idea?")

    assert reply.strip() == "Noted."
    after = await state_of(chat)
    assert_kept(before, after)
    assert after.failed_folds == 1
    status = chat.last_status
    assert "fold failed" in status
    assert reason in status
    history = chat.sent_history()
    # Nothing lost: the summary of the first exchange, then every later message verbatim.
    assert history[0].startswith(SUMMARY_PREFIX)
    assert "project_id: PRJ-123" in history[0]
    assert history[1:] == [
        "The deploy fails with error E001.",
        "Noted.",
        "It still fails after a restart.",
        "Noted.",
    ]


@pytest.mark.parametrize("kind", SESSION_KINDS)
async def test_summary_call_over_the_timeout_is_abandoned_and_the_turn_runs(
    kind: type[ChatSession], langflow_db: LangflowDatabase
) -> None:
    chat = scripted_session({**FOLD_EACH_TURN, "summary_timeout": 0.2}, kind=kind)
    before = await fold_once_then(chat)
    chat.model.fold_delay = 5.0

    reply = await chat.say("Any other idea?")

    assert reply.strip() == "Noted."
    assert_kept(before, await state_of(chat))
    status = chat.last_status
    assert "fold failed" in status
    assert "TimeoutError" in status
    assert "0.2 s" in status
    assert len(chat.sent_history()) == 5


async def test_pinned_values_of_the_wrong_type_are_ignored_and_the_rest_of_the_fold_is_kept(
    langflow_db: LangflowDatabase, caplog: pytest.LogCaptureFixture
) -> None:
    answer = json.dumps({"pinned": {"project_id": {"id": "PRJ-9"}, "cluster": ["US cluster"]}, "summary": "- new"})
    chat = scripted_session(FOLD_EACH_TURN, fold_script=[None, answer])
    before = await fold_once_then(chat)

    with caplog.at_level(logging.INFO, logger="langflow_summarizing_agent"):
        await chat.say("Any other idea?")

    after = await state_of(chat)
    assert after.pinned == before.pinned
    assert after.text == "- new"
    assert after.folded_count == before.folded_count + 2
    assert "Ignoring pinned value of type dict for key 'project_id'" in caplog.text
    assert "Ignoring pinned value of type list for key 'cluster'" in caplog.text


# The database fails


async def execute(*statements: str) -> None:
    """DDL through Langflow's own engine: a blocking connection beside it would stall the event loop's readers."""
    from langflow.services.deps import session_scope

    async with session_scope() as session:
        connection = await session.connection()
        for statement in statements:
            await connection.execute(sa.text(statement))


@asynccontextmanager
async def state_table_renamed() -> AsyncIterator[None]:
    """The state table is missing, as after a botched restore, until the block ends."""
    away = f"{TABLE_NAME}_away"
    await execute(f"ALTER TABLE {TABLE_NAME} RENAME TO {away}")
    try:
        yield
    finally:
        await execute(f"ALTER TABLE {away} RENAME TO {TABLE_NAME}")


@asynccontextmanager
async def state_saves_fail(langflow_db: LangflowDatabase, session_id: str) -> AsyncIterator[None]:
    """Every update of this session's state row fails inside the database, until the block ends."""
    name = f"fail_save_{uuid.uuid4().hex[:8]}"
    if langflow_db.backend == "sqlite":
        await execute(
            f"CREATE TRIGGER {name} BEFORE UPDATE ON {TABLE_NAME} WHEN NEW.session_id = '{session_id}' "
            "BEGIN SELECT RAISE(ABORT, 'simulated write failure'); END"
        )
        drop = [f"DROP TRIGGER {name}"]
    else:
        await execute(
            f"CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN RAISE EXCEPTION 'simulated write failure'; END $$",
            f"CREATE TRIGGER {name} BEFORE UPDATE ON {TABLE_NAME} FOR EACH ROW "
            f"WHEN (NEW.session_id = '{session_id}') EXECUTE FUNCTION {name}()",
        )
        drop = [f"DROP TRIGGER {name} ON {TABLE_NAME}", f"DROP FUNCTION {name}()"]
    try:
        yield
    finally:
        await execute(*drop)


def assert_stock_last_n(chat: ChatSession) -> None:
    """The turn ran on the stock history: the last `n_messages - 1` stored messages before the input, no summary."""
    assert chat.sent_history() == ["It still fails after a restart.", "Noted."]


@pytest.mark.parametrize("kind", SESSION_KINDS)
async def test_state_read_failure_falls_back_to_last_n_and_logs_the_error(
    kind: type[ChatSession], langflow_db: LangflowDatabase, caplog: pytest.LogCaptureFixture
) -> None:
    chat = scripted_session(FOLD_EACH_TURN, kind=kind)
    before = await fold_once_then(chat)

    async with state_table_renamed():
        with caplog.at_level(logging.ERROR, logger="langflow_summarizing_agent"):
            reply = await chat.say("Any other idea?")

    assert reply.strip() == "Noted."
    assert_stock_last_n(chat)
    assert "summary store unavailable" in chat.last_status
    assert "summary store unavailable" in caplog.text
    assert TABLE_NAME in caplog.text
    assert_kept(before, await state_of(chat))


@pytest.mark.parametrize("kind", SESSION_KINDS)
async def test_an_unexpected_error_falls_back_to_last_n_and_is_named_as_one(
    kind: type[ChatSession],
    langflow_db: LangflowDatabase,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    chat = scripted_session(FOLD_EACH_TURN, kind=kind)
    await fold_once_then(chat)

    def defect(*args: object, **kwargs: object) -> None:
        raise TypeError("a defect in the plan")

    monkeypatch.setattr(turn_module, "plan_turn", defect)
    with caplog.at_level(logging.ERROR, logger="langflow_summarizing_agent"):
        reply = await chat.say("Any other idea?")

    assert reply.strip() == "Noted."
    assert_stock_last_n(chat)
    assert "unexpected error (TypeError: a defect in the plan)" in chat.last_status
    assert "summary store unavailable" not in chat.last_status + caplog.text
    assert "a defect in the plan" in caplog.text and "Traceback" in caplog.text


@pytest.mark.parametrize("kind", SESSION_KINDS)
async def test_a_state_save_failure_counts_as_a_failed_fold_and_backs_off(
    kind: type[ChatSession], langflow_db: LangflowDatabase, caplog: pytest.LogCaptureFixture
) -> None:
    chat = scripted_session(FOLD_EACH_TURN, kind=kind)
    before = await fold_once_then(chat)
    folds = len(chat.model.fold_calls)

    async with state_saves_fail(langflow_db, chat.session_id):
        with caplog.at_level(logging.WARNING, logger="langflow_summarizing_agent"):
            reply = await chat.say("Any other idea?")

    assert reply.strip() == "Noted."
    assert len(chat.model.fold_calls) == folds + 1
    status = chat.last_status
    assert "the summary could not be saved" in status
    assert "counted as failed fold 1" in status
    assert "simulated write failure" in caplog.text
    assert_kept(before, await state_of(chat))
    # Nothing lost: the stored summary, then every later message verbatim.
    history = chat.sent_history()
    assert history[0].startswith(SUMMARY_PREFIX)
    assert history[1:] == [
        "The deploy fails with error E001.",
        "Noted.",
        "It still fails after a restart.",
        "Noted.",
    ]

    # The database is back, but the back-off holds: no summary call until it ends, and the status says so.
    await chat.say("And now?")
    assert len(chat.model.fold_calls) == folds + 1
    assert "next try after" in chat.last_status
    if kind is HistoryChatSession:
        return
    # /compact does not wait for the back-off.
    await chat.say("/compact")
    assert (await state_of(chat)).folded_count > before.folded_count
