"""The memory step: the agent's reply carries one content block that the Playground shows in the expandable part of
the reply, as it shows tool calls. It says what the summary covers, what goes verbatim, which keys are pinned, what
this turn folded, with which model, and how and why summary calls fail; never the summary text nor a pinned value.

In-process on Langflow's database.
"""

from __future__ import annotations

import json
import re
from typing import Any

from lfx.schema.content_types import ToolContent

from langflow_summarizing_agent.engine.prompt import SUMMARY_PREFIX
from langflow_summarizing_agent.engine.report import verbatim_history_tokens
from langflow_summarizing_agent.wiring.agent_turn import MEMORY_STEP_NAME, MEMORY_STEP_TITLE, turn_of
from tests.support.agent_runs import ChatSession

FIRST = "I'm working on project PRJ-123 on the EU cluster."
PINNED_VALUES = ("PRJ-123", "EU cluster")
ON = {"summarize_older_messages": True, "n_messages": 4, "fold_batch": 4, "history_token_budget": 0}


async def _stored_replies(chat: ChatSession) -> list[Any]:
    from langflow.memory import aget_messages

    stored = await aget_messages(session_id=chat.session_id, flow_id=chat.flow_id, user_id=chat.user_id, order="ASC")
    return [message for message in stored if message.sender != "User"]


def _memory_steps(blocks: list[Any]) -> list[Any]:
    return [block for block in blocks if getattr(block, "name", None) == MEMORY_STEP_NAME]


async def _hold(chat: ChatSession, exchanges: int) -> None:
    await chat.say(FIRST)
    for turn in range(1, exchanges):
        await chat.say(f"Step {turn}: the deploy still fails; what next?")


async def test_each_reply_carries_one_memory_step_first_with_the_turns_numbers(langflow_db):
    chat = ChatSession(settings={**ON, "pinned_keys": ["project_id", "cluster"]})
    await _hold(chat, 8)

    kept = turn_of(chat.last_agent)
    turn = kept.turn if kept is not None else None
    assert turn is not None and turn.summary.folded_count
    replies = await _stored_replies(chat)
    assert len(replies) == 8
    for reply in replies:
        [step] = _memory_steps(reply.content_blocks)
        assert reply.content_blocks[0] is step
        assert isinstance(step, ToolContent)
        assert step.header["title"] == MEMORY_STEP_TITLE
    last_step = replies[-1].content_blocks[0].output
    assert last_step.startswith(
        f"Memory:\n\n- summary covers {turn.summary.folded_count} earlier messages, last folded by FakeChatModel\n"
        f"- {len(turn.plan.send)} recent messages verbatim"
    )
    assert "\n- pinned: project_id, cluster\n" in last_step
    assert f"~{turn.plan.history_tokens:,} history tokens sent" in last_step
    assert f"the whole conversation verbatim: ~{verbatim_history_tokens(turn):,}" in last_step
    folding = [r.content_blocks[0].output for r in replies if "this turn" in r.content_blocks[0].output]
    assert folding
    assert all(re.search(r"\n- folded \d+ messages? this turn \(1 summary call, \d+\.\d s\)", text) for text in folding)


async def test_no_summary_text_nor_pinned_value_is_in_any_stored_message(langflow_db):
    from langflow.memory import aget_messages

    chat = ChatSession(settings={**ON, "pinned_keys": ["project_id", "cluster"]})
    await _hold(chat, 8)

    assert chat.model.fold_calls
    stored = await aget_messages(session_id=chat.session_id, flow_id=chat.flow_id, user_id=chat.user_id, order="ASC")
    rows = json.dumps([m.model_dump(mode="json") for m in stored])
    assert SUMMARY_PREFIX not in rows
    replies = json.dumps([m.model_dump(mode="json") for m in stored if m.sender != "User"])
    assert MEMORY_STEP_NAME in replies
    assert all(value not in replies for value in PINNED_VALUES)


async def test_the_step_shows_failed_summary_updates_and_the_back_off(langflow_db):
    chat = ChatSession(settings=ON, fail_folds=True)
    await _hold(chat, 6)

    [step] = _memory_steps((await _stored_replies(chat))[-1].content_blocks)
    # Why, in the error's own words, as a nested item: the turn that failed may have been another's.
    assert re.search(
        r"\n- fold failed once; next try in \d+ s\n  - RuntimeError: summary provider unavailable\n", step.output
    )


async def test_compact_replies_carry_the_step_too(langflow_db):
    chat = ChatSession(settings=ON)
    await _hold(chat, 6)
    await chat.say("/compact")

    [step] = _memory_steps((await _stored_replies(chat))[-1].content_blocks)
    assert step.output.startswith("Memory:\n\n- summary covers")


async def test_with_the_switch_off_replies_carry_no_memory_step(langflow_db):
    chat = ChatSession(settings={**ON, "summarize_older_messages": False})
    await _hold(chat, 3)

    assert all(not _memory_steps(reply.content_blocks) for reply in await _stored_replies(chat))
