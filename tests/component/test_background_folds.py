"""Folds after the reply on whole turns: lfx graphs on Langflow's services (SQLite and Postgres) with background folds
on, as `langflow run` turns them on; on the Summarizing Agent's flow and, where marked, the Summarizing Message
History's, whose fold runs after the flow's reply.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.messages import AIMessage

from langflow_summarizing_agent.engine.prompt import SUMMARY_PREFIX
from langflow_summarizing_agent.engine.records import ScopeKey
from langflow_summarizing_agent.wiring import lifecycle
from langflow_summarizing_agent.wiring.after_reply import AfterReply
from langflow_summarizing_agent.wiring.agent_turn import turn_of
from tests.support.agent_runs import ChatSession, scripted_session
from tests.support.fake_chat_model import FOLD_PROMPT_START, FoldGate, is_fold_prompt, is_prefix_fold
from tests.support.history_runs import SESSION_KINDS
from tests.support.langflow_db import LangflowDatabase, stored_summary
from tests.support.runtimes import folding_after_replies

FOLD_BY_BATCH = {"n_messages": 5, "fold_batch": 4, "history_token_budget": 0}


# The registry


# Whole turns on Langflow's services

GRAPH_SETTINGS = {"summarize_older_messages": True, **FOLD_BY_BATCH}


@pytest.fixture
def background_folds() -> Iterator[AfterReply]:
    """Folds after the reply in this process, as `langflow run` has them."""
    with folding_after_replies() as folds:
        yield folds


def scope_key(session: Any) -> ScopeKey:
    return (str(session.flow_id), str(session.user_id), session.session_id, "")


async def say(session: Any, text: str) -> str:
    """One turn in a task of its own, as Langflow's server runs a build; a turn that waited for the gated fold would
    never answer."""
    reply = await asyncio.wait_for(asyncio.create_task(session.say(text)), timeout=60)
    await asyncio.sleep(0)  # the fold after the reply starts from the ended task's callbacks
    return reply


async def say_until_a_fold_runs(session: Any, folds: AfterReply) -> int:
    """Turns until a fold after the reply reaches the summary model (and waits at the model's gate)."""
    gate = session.model.fold_gate
    for turn in range(20):
        await say(session, f"question {turn}")
        started = asyncio.ensure_future(gate.started.wait())
        ended = asyncio.ensure_future(folds.wait_all())
        await asyncio.wait({started, ended}, timeout=60, return_when=asyncio.FIRST_COMPLETED)
        started.cancel()
        ended.cancel()
        if gate.started.is_set():
            return turn
    pytest.fail("no fold ran in 20 turns")


@pytest.mark.parametrize("kind", SESSION_KINDS)
async def test_the_fold_runs_after_the_reply_and_a_later_turn_uses_it(
    langflow_db: LangflowDatabase, background_folds: AfterReply, kind: type[ChatSession]
) -> None:
    session = scripted_session(GRAPH_SETTINGS, kind=kind, echo="user_messages")
    session.model.fold_gate = FoldGate()

    turn = await say_until_a_fold_runs(session, background_folds)

    # The reply came back while the fold waits at its gate: no turn waited for it.
    assert background_folds.running(scope_key(session))
    # The fold started once the turn's model had answered, not beside it.
    *_, answered, folding = session.model.calls
    assert is_fold_prompt(folding)
    assert f"question {turn}" in str(answered[-1].content)
    session.model.fold_gate.set()
    await background_folds.wait(scope_key(session))
    assert len(session.model.fold_calls) == 1

    reply = await say(session, "and now?")
    assert SUMMARY_PREFIX in reply, "the next turn's model got the summary"
    assert "Folded after the previous reply:" in session.last_status
    assert len(session.model.fold_calls) == 1


@pytest.mark.parametrize("kind", SESSION_KINDS)
async def test_a_turn_does_not_wait_for_the_sessions_running_fold(
    langflow_db: LangflowDatabase, background_folds: AfterReply, kind: type[ChatSession]
) -> None:
    session = scripted_session(GRAPH_SETTINGS, kind=kind)
    session.model.fold_gate = FoldGate()
    await say_until_a_fold_runs(session, background_folds)
    await say(session, "one more")
    await say(session, "and another")

    status = session.last_status
    assert "A fold of this session is running; this turn used the previous summary" in status
    assert len(session.model.fold_calls) == 1, "a second summary call while one runs"
    session.model.fold_gate.set()
    await background_folds.wait(scope_key(session))


@pytest.mark.parametrize("kind", SESSION_KINDS)
async def test_a_session_deleted_while_its_fold_runs_stays_deleted(
    langflow_db: LangflowDatabase, background_folds: AfterReply, kind: type[ChatSession]
) -> None:

    lifecycle.install_listeners()
    try:
        await delete_while_the_fold_runs(background_folds, kind)
    finally:
        lifecycle._remove_listeners()


async def delete_while_the_fold_runs(background_folds: AfterReply, kind: type[ChatSession]) -> None:
    from langflow.memory import adelete_messages

    session = scripted_session(GRAPH_SETTINGS, kind=kind)
    scope: dict[str, Any] = {"flow_id": session.flow_id, "user_id": session.user_id, "session_id": session.session_id}
    session.model.fold_gate = FoldGate()
    await say_until_a_fold_runs(session, background_folds)
    session.model.fold_gate.set()
    await background_folds.wait(scope_key(session))
    assert await stored_summary(**scope) is not None
    session.model.fold_gate = FoldGate()
    await say_until_a_fold_runs(session, background_folds)

    await adelete_messages(session.session_id, flow_id=session.flow_id, user_id=session.user_id)
    assert await stored_summary(**scope) is None, "Langflow's delete purges the state"
    session.model.fold_gate.set()
    await background_folds.wait(scope_key(session))

    assert await stored_summary(**scope) is None


async def test_compact_waits_for_the_running_fold_then_folds_the_rest(
    langflow_db: LangflowDatabase, background_folds: AfterReply
) -> None:
    session = scripted_session(GRAPH_SETTINGS)
    session.model.fold_gate = FoldGate()
    await say_until_a_fold_runs(session, background_folds)
    compact = asyncio.ensure_future(session.say("/compact"))
    await asyncio.sleep(0.2)
    assert not compact.done(), "/compact answered before the running fold ended"

    session.model.fold_gate.set()
    reply = await compact

    assert "Compacted the conversation" in reply
    scope: dict[str, Any] = {"flow_id": session.flow_id, "user_id": session.user_id, "session_id": session.session_id}
    state = await stored_summary(**scope)
    assert state is not None and state.version >= 1


async def test_a_message_alone_at_the_budget_makes_no_turn_wait_when_each_fold_ends_before_the_next_turn(
    langflow_db: LangflowDatabase, background_folds: AfterReply
) -> None:
    # A pasted log of ~900 tokens against a History Token Budget of 1,000: the window holding it crowds the older
    # messages out, and when it leaves the window it fits the budget no more. The fold after each reply plans the
    # next turn, the reply included, so that turn finds nothing it would have to fold inline.
    session = scripted_session(
        {**GRAPH_SETTINGS, "history_token_budget": 1_000, "summary_words": 50}, reply="Noted, thanks."
    )
    questions = [f"question {n}" for n in range(8)] + ["log line\n" * 500] + [f"question {n}" for n in range(8, 16)]
    folded_in_the_turn = []
    for number, text in enumerate(questions):
        await say(session, text)
        await background_folds.wait_all()  # a person reads the reply and types: the fold ends meanwhile
        kept = turn_of(session.last_agent)
        turn = kept.turn if kept is not None else None
        assert turn is not None and turn.plan.not_summarized == 0, "a message did not reach the model"
        if turn.fold is not None:
            folded_in_the_turn.append(number)

    assert len(session.model.fold_calls) >= 3
    assert folded_in_the_turn == [], "turns that waited for a summary call"


async def test_a_turn_whose_sessions_fold_waits_for_a_place_makes_no_summary_call(
    langflow_db: LangflowDatabase,
) -> None:
    # One place, taken by another session's fold held at its gate: this session's fold after the reply waits for
    # the place. Its later turns push older messages past what the model can be sent; folding them inline would
    # make the turn wait for a summary call that the waiting fold is about to make anyway.
    with folding_after_replies(max_running=1) as folds:
        await _a_waiting_fold_takes_the_turns_job(folds)


async def _a_waiting_fold_takes_the_turns_job(folds: AfterReply) -> None:
    other = scripted_session(GRAPH_SETTINGS)
    other.model.fold_gate = FoldGate()
    await say_until_a_fold_runs(other, folds)
    session = scripted_session(GRAPH_SETTINGS)

    turns = []
    for n in range(12):
        await say(session, f"question {n}")
        kept = turn_of(session.last_agent)
        assert kept is not None and kept.turn is not None
        turns.append(kept.turn)

    assert folds.running(scope_key(session)), "the session's fold waits for the place"
    assert session.model.fold_calls == [], "a turn folded inline while the session's fold waited for a place"
    assert turns[-1].busy
    assert turns[-1].plan.not_summarized > 0, "older messages wait for that fold, counted as not summarized yet"
    other.model.fold_gate.set()
    await folds.wait_all()
    assert len(session.model.fold_calls) >= 1, "the waiting fold ran once the place was free"


# The fold on the agent's prefix


async def _session_folding_after_replies(
    cached_share: float, folds: AfterReply, agent: dict[str, Any] | None = None, **model: Any
) -> Any:
    settings = {**GRAPH_SETTINGS, "pinned_keys": ["project_id"], **(agent or {})}
    session = scripted_session(settings, reported_cached_share=cached_share, reply="Noted.", **model)
    await say(session, "Our project is PRJ-123.")
    for number in range(8):
        await say(session, f"question {number}")
        await folds.wait_all()
        if session.model.fold_calls:
            return session
    pytest.fail("no fold ran in 9 turns")


async def test_a_fold_after_the_reply_sends_the_agents_prefix_unchanged_when_the_provider_caches(
    langflow_db: LangflowDatabase, background_folds: AfterReply
) -> None:
    session = await _session_folding_after_replies(0.5, background_folds)
    model = session.model
    fold_index = next(i for i, call in enumerate(model.calls) if is_fold_prompt(call))
    fold_call, agent_call = model.calls[fold_index], model.calls[fold_index - 1]

    # The prompt the agent sent, then its reply, then the instruction: every token before the instruction is the
    # agent's, so the provider serves it from its cache.
    assert fold_call[: len(agent_call)] == agent_call
    assert fold_call[len(agent_call)] == AIMessage(content="Noted.")
    assert len(fold_call) == len(agent_call) + 2
    assert is_prefix_fold(fold_call)
    assert model.tools[fold_index] == model.tools[fold_index - 1]
    # The batch is the oldest messages after the system prompt, and the summary keeps what they said.
    state = await stored_summary(flow_id=session.flow_id, user_id=session.user_id, session_id=session.session_id)
    assert state is not None and state.pinned == {"project_id": "PRJ-123"}
    reply = await say(session, "and now?")
    assert reply == "Noted."
    assert SUMMARY_PREFIX in str(model.agent_calls[-1][1].content)


async def test_a_fold_on_the_prefix_answered_with_a_tool_call_is_asked_again_quoted_without_tools(
    langflow_db: LangflowDatabase, background_folds: AfterReply
) -> None:
    tool_call = AIMessage(content="", tool_calls=[{"name": "evaluate_expression", "args": {}, "id": "call_1"}])
    session = await _session_folding_after_replies(
        0.5, background_folds, {"add_calculator_tool": True}, fold_script=[tool_call]
    )
    model = session.model
    on_prefix, quoted = (i for i, call in enumerate(model.calls) if is_fold_prompt(call))

    assert is_prefix_fold(model.calls[on_prefix])
    assert model.tools[on_prefix] == model.tools[on_prefix - 1] != [], "the agent's tools, as its call had them"
    assert model.tool_choices[on_prefix] == "none"
    assert str(model.calls[quoted][0].content).startswith(FOLD_PROMPT_START)
    assert model.tools[quoted] == []
    state = await stored_summary(flow_id=session.flow_id, user_id=session.user_id, session_id=session.session_id)
    assert state is not None and state.pinned == {"project_id": "PRJ-123"} and state.failed_folds == 0


async def test_without_a_caching_provider_the_fold_quotes_its_batch(
    langflow_db: LangflowDatabase, background_folds: AfterReply
) -> None:
    session = await _session_folding_after_replies(0.0, background_folds)
    fold_call = session.model.fold_calls[0]
    assert str(fold_call[0].content).startswith(FOLD_PROMPT_START)
    assert len(fold_call) == 2
