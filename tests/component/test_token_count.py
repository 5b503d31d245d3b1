"""The agent's turns count tokens as its model does: the model's tokenizer, corrected by the usage its provider
reports. Real graph runs on Langflow's services (SQLite and Postgres); the fake model reports usage as a provider."""

from __future__ import annotations

from langflow_summarizing_agent.engine.tokens import counter_for
from langflow_summarizing_agent.engine.turn import Turn
from langflow_summarizing_agent.wiring.agent_turn import turn_of
from tests.support.agent_runs import ChatSession, scripted_session
from tests.support.langflow_db import LangflowDatabase

SETTINGS = {"summarize_older_messages": True, "n_messages": 5, "fold_batch": 4}


def last_turn(chat: ChatSession) -> Turn | None:
    kept = turn_of(chat.last_agent)
    return kept.turn if kept is not None else None


async def test_the_usage_the_provider_reports_scales_the_next_turns_count(langflow_db: LangflowDatabase) -> None:
    chat = scripted_session(SETTINGS, reported_scale=2.0, reported_cached_share=0.0)
    await chat.say("The deploy of PRJ-123 fails with error E001.")
    first = last_turn(chat)
    assert first is not None and first.counter == counter_for("FakeChatModel"), "no report yet: o200k as it is"

    await chat.say("It still fails after a restart.")
    second = last_turn(chat)
    assert second is not None
    assert 1.9 < second.counter.scale <= 2.0, "the provider counts twice what o200k counts"
    assert "provider-reported usage" in chat.last_status
    unscaled = counter_for("FakeChatModel")
    counted = sum(unscaled.message(m) for m in second.plan.send)
    assert second.plan.history_tokens >= 1.9 * counted
