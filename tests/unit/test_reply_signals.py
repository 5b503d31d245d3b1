"""Which signal starts a fold after the reply: the Agent's waits for the end of its own build and takes the reply
frozen then; the Message History's waits for a final reply stored in the session. A stored row that is partial or
empty is no final reply (`is_final_reply`)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from langflow_summarizing_agent.engine.fold import CatchUp, SaveFailures
from langflow_summarizing_agent.engine.records import StoredMessage, Summary, utcnow
from langflow_summarizing_agent.engine.settings import FoldSettings
from langflow_summarizing_agent.wiring.after_reply import AfterReply, Reply, ReplySignal, TurnWork, is_final_reply
from tests.support.fakes import InMemoryStore, RecordingSummarizer, make_messages

REPLY = Reply((StoredMessage(id="reply", timestamp=utcnow(), role="assistant", text="Noted."),))


def agent_work(store: InMemoryStore, received: list[Reply], turn: str = "turn 1") -> TurnWork:
    async def fold_after_reply(reply: Reply) -> CatchUp | None:
        received.append(reply)
        return CatchUp(Summary())

    settings = FoldSettings(window=4, fold_batch=4, history_token_budget=0)
    summarizer = RecordingSummarizer()
    return TurnWork(store, summarizer, settings, SaveFailures(), fold_after_reply, ReplySignal.BUILD_END, turn)


async def test_the_agents_fold_waits_for_its_build_end_and_folds_with_the_reply_taken_then() -> None:
    store = InMemoryStore(make_messages([f"message {n}" for n in range(8)]))
    flow_id, _, session_id, _ = key = store.scope.key
    received: list[Reply] = []
    folds = AfterReply()

    await folds.turn(agent_work(store, received))
    folds.replied(flow_id, session_id)
    folds.built(key, "an earlier turn", Reply())
    await asyncio.sleep(0.05)
    assert received == [], "a stored row, or another build's end, started the Agent's fold before its reply"

    folds.built(key, "turn 1", REPLY)
    await folds.wait(key)
    assert received == [REPLY]


async def test_a_later_agent_turn_takes_the_waiting_fold_with_its_own_reply() -> None:
    store = InMemoryStore(make_messages([f"message {n}" for n in range(8)]))
    key = store.scope.key
    first: list[Reply] = []
    second: list[Reply] = []
    folds = AfterReply()

    await folds.turn(agent_work(store, first, "turn 1"))
    await folds.turn(agent_work(store, second, "turn 2"))
    folds.built(key, "turn 2", REPLY)
    await folds.wait(key)

    assert (first, second) == ([], [REPLY])


def row(sender: str = "Machine", text: str = "The reply.", properties: Any = None) -> SimpleNamespace:
    return SimpleNamespace(sender=sender, session_id="s", text=text, properties=properties or {"state": "complete"})


def test_a_final_reply_is_another_senders_stored_text_that_is_not_partial() -> None:
    assert is_final_reply(row())
    assert is_final_reply(row(properties=SimpleNamespace(state="complete")))
    assert not is_final_reply(row(properties={"state": "partial"})), "the Agent's row stored before its model call"
    assert not is_final_reply(row(properties=SimpleNamespace(state="partial")))
    assert not is_final_reply(row(text="")), "a streamed Chat Output row before its text"
    assert not is_final_reply(row(sender="User"))


async def test_a_message_history_turn_whose_reply_was_never_stored_lets_the_next_turn_fold_at_once() -> None:
    store = InMemoryStore(make_messages([f"message {n}" for n in range(8)]))
    key = store.scope.key
    first: list[Reply] = []
    second: list[Reply] = []
    folds = AfterReply()

    await folds.turn(history_work(store, first))
    await asyncio.sleep(0.05)
    assert first == [], "the fold waits for the stored reply"
    await folds.turn(history_work(store, second))
    await asyncio.wait_for(folds.wait(key), timeout=5)

    assert (first, second) == ([], [Reply()]), "no Chat Output stored the reply: the next turn is its sign"


def history_work(store: InMemoryStore, received: list[Reply]) -> TurnWork:
    work = agent_work(store, received)
    return TurnWork(work.store, work.summarizer, work.settings, work.failures, work.fold_after_reply)
