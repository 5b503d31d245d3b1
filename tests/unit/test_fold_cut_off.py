"""A fold whose answer was cut off is a failed fold: a JSON that never closes, or an answer its provider says stopped
at the length limit, leaves the summary as it was, backs off and says why, quoted or on the agent's prefix."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

from langflow_summarizing_agent.engine.fold import Prefix, SaveFailures
from langflow_summarizing_agent.engine.report import memory_step_text, status_text
from langflow_summarizing_agent.engine.settings import FoldSettings
from langflow_summarizing_agent.engine.tokens import as_lc_message
from langflow_summarizing_agent.engine.turn import fold_if_due
from langflow_summarizing_agent.wiring.summary_model import summarizer_for
from tests.support.fake_chat_model import FakeChatModel, fold_json, is_prefix_fold
from tests.support.fakes import InMemoryStore, RecordingSummarizer, make_messages

PINNED = ("project_id",)
CLOCK = datetime(2026, 1, 1, tzinfo=timezone.utc)
CUT_OFF_JSON = '{"pinned": {"project_id": "PRJ-7"}, "summary": "- Facts in the conv'
"""The answer of a summary model that reached its length limit in the middle of the summary."""


async def test_a_fold_answered_with_json_cut_off_keeps_the_previous_summary_and_backs_off():
    settings = FoldSettings(window=9, fold_batch=20, pinned_keys=PINNED, history_token_budget=0)
    store = InMemoryStore(make_messages(["I work on PRJ-123.", *(f"message {i}" for i in range(1, 29))]))
    await fold_if_due(store, RecordingSummarizer(), settings, failures=SaveFailures())
    before = store.summary
    store.add(*[f"later {i}" for i in range(20)])

    turn = await fold_if_due(
        store, RecordingSummarizer([CUT_OFF_JSON]), settings, now=lambda: CLOCK, failures=SaveFailures()
    )

    after = store.summary
    assert (after.text, after.pinned, after.cursor) == (before.text, {"project_id": "PRJ-123"}, before.cursor)
    assert (after.failed_folds, after.retry_after) == (1, CLOCK + timedelta(seconds=30))
    assert "the summary model's answer was cut off before its JSON closed" in status_text(turn)
    assert "fold failed once; next try in 30 s" in memory_step_text(turn, PINNED, 0.1, now=CLOCK)


async def test_a_fold_on_the_agents_prefix_its_provider_cut_off_is_not_asked_again_and_backs_off():
    settings = FoldSettings(window=2, fold_batch=2, pinned_keys=PINNED, history_token_budget=0)
    store = InMemoryStore(make_messages(["Project PRJ-123.", "Noted.", "q1", "a1", "q2", "a2"]))
    cut_off = AIMessage(
        content=fold_json({"project_id": "PRJ-7"}, "- Facts"), response_metadata={"stop_reason": "max_tokens"}
    )
    model = FakeChatModel(fold_script=[cut_off])
    agent_call = [SystemMessage(content="You help."), *map(as_lc_message, store.messages_stored)]
    prefix = Prefix(
        (*agent_call, HumanMessage(content="q3"), AIMessage(content="a3")), summarizer_for(lambda: model, 5)
    )

    turn = await fold_if_due(
        store, summarizer_for(lambda: model, 5), settings, prefix=prefix, now=lambda: CLOCK, failures=SaveFailures()
    )

    assert turn.fold is not None and (turn.fold.folded, turn.fold.calls, turn.fold.on_prefix) == (0, 1, 1)
    assert is_prefix_fold(model.calls[0])
    assert (turn.summary.pinned, turn.summary.cursor, turn.summary.failed_folds) == ({}, None, 1)
    assert turn.summary.retry_after == CLOCK + timedelta(seconds=30)
    assert 'cut off at its length limit (stop_reason "max_tokens"); lower Summary Word Budget' in status_text(turn)
