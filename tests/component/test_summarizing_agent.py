"""The Summarizing Agent in real graph runs on Langflow's database (SQLite and Postgres), with a recording model."""

from __future__ import annotations

import uuid

from langchain_core.messages import HumanMessage, SystemMessage
from lfx.components.models_and_agents.agent import AgentComponent

from langflow_summarizing_agent.engine.plan import COMPACT_COMMAND, COMPACT_REPLY_PREFIX
from langflow_summarizing_agent.engine.prompt import SUMMARY_PREFIX
from langflow_summarizing_agent.engine.report import verbatim_history_tokens
from langflow_summarizing_agent.engine.tokens import counter_for
from langflow_summarizing_agent.wiring.agent_turn import turn_of
from tests.support.agent_runs import ChatSession
from tests.support.fake_chat_model import RECORDERS

FIRST = "I'm working on project PRJ-123 on the EU cluster."
ON = {"summarize_older_messages": True, "n_messages": 10, "pinned_keys": ["project_id", "cluster"]}


def transcript(call) -> list[tuple[str, str]]:
    return [(type(message).__name__, str(message.content)) for message in call]


def history_of(call) -> list:
    """The messages between the system prompt and the current input."""
    assert isinstance(call[0], SystemMessage)
    return call[1:-1]


async def hold_conversation(chat: ChatSession, exchanges: int) -> None:
    await chat.say(FIRST)
    for index in range(1, exchanges):
        await chat.say(f"Step {index}: the deploy still fails with error E{index:03d}; what should I check next?")


async def test_switch_off_sends_exactly_what_the_stock_agent_sends(langflow_db):
    stock = ChatSession(agent_class=AgentComponent, settings={"n_messages": 6})
    ours = ChatSession(settings={"n_messages": 6, "summarize_older_messages": False})
    for chat in (stock, ours):
        await hold_conversation(chat, 8)

    assert len(stock.model.calls) == len(ours.model.calls) == 8
    assert [transcript(c) for c in ours.model.calls] == [transcript(c) for c in stock.model.calls]


async def test_first_fact_reaches_the_model_at_the_end_of_a_120_message_session(langflow_db):
    chat = ChatSession(settings=ON)
    await hold_conversation(chat, 60)
    await chat.say("Which cluster were we on again?")

    last = chat.model.agent_calls[-1]
    summary = history_of(last)[0]
    assert isinstance(summary, HumanMessage)
    assert str(summary.content).startswith(SUMMARY_PREFIX)
    assert "project_id: PRJ-123" in str(summary.content)
    assert "cluster: EU cluster" in str(summary.content)
    assert str(last[-1].content) == "Which cluster were we on again?"
    assert all(FIRST not in str(m.content) for m in history_of(last)[1:])


async def test_model_input_stays_bounded_over_a_long_session(langflow_db):
    chat = ChatSession(settings={**ON, "history_token_budget": 2_000})
    await hold_conversation(chat, 60)

    for call in chat.model.agent_calls:
        assert counter_for("FakeChatModel").prompt(history_of(call)) <= 2_000, "the budget, in the model's tokens"
        assert len(history_of(call)) <= 10 + 2 * 20 + 1
    assert len(chat.model.fold_calls) <= 60 // 2


async def test_stock_agent_at_the_same_window_loses_the_first_fact(langflow_db):
    chat = ChatSession(agent_class=AgentComponent, settings={"n_messages": 10})
    await hold_conversation(chat, 30)
    await chat.say("Which cluster were we on again?")

    assert all("PRJ-123" not in str(m.content) for m in chat.model.agent_calls[-1])


async def test_summary_is_never_stored_as_a_chat_message(langflow_db):
    from langflow.memory import aget_messages

    chat = ChatSession(settings={**ON, "n_messages": 4, "fold_batch": 4})
    await hold_conversation(chat, 12)

    assert chat.model.fold_calls
    stored = await aget_messages(session_id=chat.session_id, flow_id=chat.flow_id, user_id=chat.user_id, order="ASC")
    assert len(stored) == 24
    assert not any(SUMMARY_PREFIX in (m.text or "") for m in stored)


async def test_a_turn_folds_once_even_when_memory_is_read_twice(langflow_db):
    # Switched on late in a long session with one fold per turn: a fold is still due after the turn's fold, so a
    # second read in the same turn (a model remediation retry) would fold again if the turn's history were not kept.
    chat = ChatSession(settings={"n_messages": 4, "summarize_older_messages": False})
    await hold_conversation(chat, 36)
    chat.settings = {**ON, "n_messages": 4, "fold_batch": 4, "history_token_budget": 0, "max_folds_per_turn": 1}
    await chat.say("Where do we stand?")
    assert len(chat.model.fold_calls) == 1
    sent = [str(m.content) for m in history_of(chat.model.agent_calls[-1])]
    agent = chat.last_agent

    first = await agent.get_memory_data()
    second = await agent.get_memory_data()

    assert len(chat.model.fold_calls) == 1
    assert [m.text for m in first] == [m.text for m in second] == sent
    await chat.say("And now?")
    assert len(chat.model.fold_calls) == 2, "the next turn folds the rest"


async def test_failing_summarizer_never_blocks_a_turn(langflow_db):
    chat = ChatSession(settings={**ON, "n_messages": 4, "fold_batch": 4, "history_token_budget": 0}, fail_folds=True)
    await hold_conversation(chat, 12)

    assert len(chat.model.agent_calls) == 12
    assert chat.model.fold_calls
    assert all(len(history_of(c)) <= 4 + 2 * 4 + 1 for c in chat.model.agent_calls)
    assert "fold failed" in chat.last_status


async def test_compact_folds_now_and_answers_without_calling_the_agent(langflow_db):
    chat = ChatSession(settings={**ON, "n_messages": 4, "history_token_budget": 0})
    await hold_conversation(chat, 6)
    agent_calls_before = len(chat.model.agent_calls)

    answer = await chat.say(COMPACT_COMMAND)

    assert len(chat.model.agent_calls) == agent_calls_before
    assert len(chat.model.fold_calls) == 1
    assert answer.startswith(COMPACT_REPLY_PREFIX)
    assert "Pinned: project_id, cluster." in answer
    assert "PRJ-123" not in answer, "pinned values stay out of chat messages"

    await chat.say("And now?")
    sent = transcript(chat.model.agent_calls[-1])
    assert all(text != COMPACT_COMMAND and not text.startswith(COMPACT_REPLY_PREFIX) for _, text in sent)
    assert sent[1][1].startswith(SUMMARY_PREFIX)


async def test_a_connected_summary_model_does_the_folding(langflow_db):
    chat = ChatSession(
        settings={**ON, "n_messages": 4, "fold_batch": 4, "history_token_budget": 0},
        summary_recorder_name=f"summary-{uuid.uuid4().hex[:8]}",
    )
    await hold_conversation(chat, 8)

    summary_model = RECORDERS[chat.summary_recorder_name]
    assert summary_model.fold_calls
    assert not summary_model.agent_calls
    assert not chat.model.fold_calls
    assert "project_id: PRJ-123" in str(history_of(chat.model.agent_calls[-1])[0].content)


async def test_status_says_what_the_model_got_against_the_whole_conversation_verbatim(langflow_db):
    chat = ChatSession(settings={**ON, "n_messages": 4, "fold_batch": 4, "history_token_budget": 0})
    await hold_conversation(chat, 8)

    kept = turn_of(chat.last_agent)
    turn = kept.turn if kept is not None else None
    assert turn is not None and turn.summary.folded_count
    status = chat.last_status
    assert (
        f"The model got: summary covering {turn.summary.folded_count} messages plus {len(turn.plan.send)} recent "
        f"messages verbatim, ~{turn.plan.history_tokens:,} tokens (counted in o200k_base). Sending the whole "
        "conversation verbatim would take "
        f"~{verbatim_history_tokens(turn):,} tokens." in status
    )
    assert "stock Agent" not in status

    from langflow.memory import aget_messages

    stored = await aget_messages(session_id=chat.session_id, flow_id=chat.flow_id, user_id=chat.user_id, order="ASC")
    before_last_input = [m.to_lc_message() for m in stored[:-2]]
    whole = counter_for("FakeChatModel").prompt(before_last_input)
    assert abs(verbatim_history_tokens(turn) - whole) <= whole * 0.2
    assert turn.plan.history_tokens < verbatim_history_tokens(turn)


async def test_memory_off_with_zero_messages_even_when_the_switch_is_on(langflow_db):
    chat = ChatSession(settings={**ON, "n_messages": 0})
    await hold_conversation(chat, 4)

    assert all(len(call) == 2 for call in chat.model.agent_calls)
