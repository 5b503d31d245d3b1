"""The Summarizing Message History in real graph runs on Langflow's database (SQLite and Postgres): a flow that builds
its own prompt (Chat Input -> Prompt with {memory} -> Language Model -> Chat Output), with a recording model."""

from __future__ import annotations

import uuid

import pytest
from lfx.components.models_and_agents.memory import MemoryComponent

from langflow_summarizing_agent.engine.prompt import SUMMARY_PREFIX
from langflow_summarizing_agent.wiring.agent_turn import turn_of
from tests.support.agent_runs import FOLD_EACH_TURN, ChatSession, state_of
from tests.support.history_runs import HistoryChatSession, history_settings

FIRST = "I'm working on project PRJ-123 on the EU cluster."
TURNS = [
    FIRST,
    "The deploy fails with error E001.",
    "It still fails after a restart.",
    "The logs show a timeout on the database.",
    "Which cluster were we on again?",
]


def memory_part(prompt: str) -> str:
    """The {memory} part of the Prompt the model received."""
    return prompt.split("Conversation so far:\n", 1)[1].split("\n\nAnswer the customer's last message:", 1)[0]


async def hold(chat: ChatSession, turns: list[str] = TURNS) -> None:
    for text in turns:
        await chat.say(text)


async def test_switch_off_retrieves_exactly_what_the_stock_message_history_retrieves(langflow_db):
    stock = HistoryChatSession(history_class=MemoryComponent, settings={"n_messages": 4})
    ours = HistoryChatSession(settings={"n_messages": 4, "summarize_older_messages": False})
    for chat in (stock, ours):
        await hold(chat)

    assert [c[-1].content for c in ours.model.agent_calls] == [c[-1].content for c in stock.model.agent_calls]
    assert not ours.model.fold_calls


async def test_the_prompt_holds_the_summary_first_then_the_stock_window_formatted_by_the_template(langflow_db):
    stock = HistoryChatSession(history_class=MemoryComponent, settings={"n_messages": 2})
    ours = HistoryChatSession(settings=history_settings())
    for chat in (stock, ours):
        await hold(chat)

    memory = memory_part(ours.last_prompt)
    stock_window = memory_part(stock.last_prompt)
    summary, window = memory.split("\n", 1)[0], memory
    assert summary.startswith(SUMMARY_PREFIX)
    assert "project_id: PRJ-123" in memory
    assert "cluster: EU cluster" in memory
    assert memory.endswith("\n" + stock_window), "the window is the stock one, formatted by the Template"
    assert stock_window == "AI: Noted.\nUser: Which cluster were we on again?"
    assert FIRST not in window.replace(stock_window, ""), "the first message reaches the model through the summary"
    assert ours.model.fold_calls, "the summary model is the one picked for it"
    state = await state_of(ours)
    assert state.pinned == {"project_id": "PRJ-123", "cluster": "EU cluster"}


async def test_the_table_output_starts_with_the_summary_row(langflow_db):
    chat = HistoryChatSession(settings=history_settings())
    await hold(chat)

    frame = await chat.last_agent.retrieve_messages_dataframe()
    rows = frame.to_dict("records")
    assert rows[0]["text"].startswith(SUMMARY_PREFIX)
    assert [row["text"] for row in rows[1:]] == ["Noted.", "Which cluster were we on again?"]


async def test_descending_order_keeps_the_summary_first_and_reverses_the_window(langflow_db):
    chat = HistoryChatSession(settings=history_settings(order="Descending"))
    await hold(chat)

    memory = memory_part(chat.last_prompt)
    assert memory.startswith(SUMMARY_PREFIX)
    assert memory.endswith("\nUser: Which cluster were we on again?\nAI: Noted.")


@pytest.mark.parametrize(
    ("settings", "field"),
    [({"sender_type": "User"}, "Sender Type"), ({"sender_name": "AI"}, "Sender Name")],
)
async def test_a_sender_filter_is_refused_with_what_to_change(langflow_db, settings, field):
    chat = HistoryChatSession(settings=history_settings(**settings))
    with pytest.raises(Exception, match=field) as refused:
        await chat.say(FIRST)
    assert "Summarize Older Messages off" in str(refused.value)

    await HistoryChatSession(settings={**history_settings(**settings), "summarize_older_messages": False}).say(FIRST)


async def test_a_failed_fold_never_fails_the_run_and_the_window_still_goes(langflow_db):
    chat = HistoryChatSession(settings=history_settings(), fail_folds=True)
    await hold(chat, TURNS[:4])

    assert len(chat.model.agent_calls) == 4, "every run answered"
    assert chat.model.fold_calls, "folds were tried"
    memory = memory_part(chat.last_prompt)
    assert FIRST in memory, "every unfolded message is still retrieved"
    assert "failed" in turn_of(chat.last_agent).report


async def test_an_agent_and_a_message_history_in_one_session_share_its_summary(langflow_db):
    agent = ChatSession(settings=FOLD_EACH_TURN)
    await hold(agent, TURNS[:3])
    by_agent = await state_of(agent)
    history = HistoryChatSession(
        settings=history_settings(), flow_id=agent.flow_id, user_id=agent.user_id, session_id=agent.session_id
    )
    await history.say("Remind me of the project.")

    memory = memory_part(history.last_prompt)
    assert memory.startswith(SUMMARY_PREFIX)
    assert "project_id: PRJ-123" in memory
    await agent.say("And the cluster?")
    shared = await state_of(agent)
    assert shared.row_id == by_agent.row_id, "one summary row per session"
    assert shared.version > by_agent.version
    assert shared.folded_count > by_agent.folded_count
    assert "cluster: EU cluster" in str(agent.model.agent_calls[-1][1].content)


async def test_store_mode_is_the_stock_one(langflow_db):
    stored = []
    for history_class in (MemoryComponent, HistoryChatSession.history_class):
        history = history_class(_id="history")
        history.set(mode="Store", message="a note to keep", session_id=f"s-{uuid.uuid4().hex[:6]}")
        stored.append(type(history).store_message)
    assert stored[0] is stored[1]
