"""Folds after the reply, the logic: a turn plans without a summary call, the fold runs in the background, one per
session, at most a capped number per process. An in-memory store and a scripted summarizer, no Langflow services.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import pytest

from langflow_summarizing_agent.engine.fold import CatchUp, SaveFailures, Summarizer
from langflow_summarizing_agent.engine.prompt import SUMMARY_PREFIX
from langflow_summarizing_agent.engine.records import Scope, ScopeKey
from langflow_summarizing_agent.engine.report import status_text
from langflow_summarizing_agent.engine.settings import FoldSettings
from langflow_summarizing_agent.engine.store import SessionStore
from langflow_summarizing_agent.engine.turn import Turn, fold_if_due, read_and_plan
from langflow_summarizing_agent.wiring import after_reply as timing
from langflow_summarizing_agent.wiring.after_reply import AfterReply, Reply, ReplySignal, TurnWork
from langflow_summarizing_agent.wiring.agent_turn import reply_of
from langflow_summarizing_agent.wiring.timing import Inline
from tests.support.fake_chat_model import FoldGate
from tests.support.fakes import InMemorySessionStore, InMemoryStore, RecordingSummarizer, make_messages

FOLD_BY_BATCH = {"window": 4, "fold_batch": 4, "history_token_budget": 0}


def key(session_id: str) -> ScopeKey:
    """The key a turn of `session_id` keys its fold after the reply on."""
    return Scope(flow_id="flow", user_id="user", session_id=session_id).key


SESSION, OTHER = key("session"), key("other")


def settings(**overrides: Any) -> FoldSettings:
    return FoldSettings(**{**FOLD_BY_BATCH, **overrides})


def chat(count: int) -> InMemoryStore:
    return InMemoryStore(make_messages([f"message {n}" for n in range(count)]))


def shown(turn: Turn) -> list[str]:
    return [m.text for m in turn.plan.send]


def folded(turn: Turn) -> int:
    return turn.fold.folded if turn.fold else 0


def what_the_turn_did(turn: Turn) -> list[str]:
    """The status's sentences after what the model got and what the whole conversation verbatim would take."""
    return status_text(turn).removeprefix("Summarizing Agent. ").removesuffix(".").split(". ")[2:]


async def prepare_history(store: SessionStore, summarizer: Summarizer, fold_settings: FoldSettings) -> Turn:
    """A turn that folds inline what is due (scripts, `lfx run`, the fold after the reply)."""
    return await fold_if_due(store, summarizer, fold_settings, failures=SaveFailures())


def fold_job(store: SessionStore, summarizer: Summarizer, fold_settings: FoldSettings) -> Any:
    """A background job as `wiring.agent_turn` starts one: the fold of a turn that folds what is due."""

    async def job() -> CatchUp | None:
        return (await prepare_history(store, summarizer, fold_settings)).fold

    return job


# The fold logic


async def test_a_due_fold_is_left_for_after_the_reply_and_every_message_still_reaches_the_model() -> None:
    store = chat(8)
    summarizer = RecordingSummarizer()

    turn = await read_and_plan(store, settings(), failures=SaveFailures())

    assert summarizer.calls == 0
    assert turn.due == "fold batch"
    assert shown(turn) == [f"message {n}" for n in range(8)], "a fold left for later hides nothing meanwhile"
    assert turn.plan.not_summarized == 0

    after_reply = await prepare_history(store, summarizer, settings())
    assert summarizer.calls == 1
    assert folded(after_reply) == 4
    next_turn = await read_and_plan(store, settings(), failures=SaveFailures())
    assert summarizer.calls == 1
    assert next_turn.plan.summary_text is not None and next_turn.plan.summary_text.startswith(SUMMARY_PREFIX)
    assert shown(next_turn) == [f"message {n}" for n in range(4, 8)]
    assert next_turn.due is None


async def test_a_turn_leaves_older_messages_that_no_longer_fit_to_the_fold_after_the_reply() -> None:
    # Two batches and more past the window (as after a summary model outage): the read holds n_messages + 2
    # batches, so the oldest go unread. Folding them inline made turns wait for a summary call under load.
    store = chat(30)
    summarizer = RecordingSummarizer()

    turn = await read_and_plan(store, settings(), failures=SaveFailures())

    assert summarizer.calls == 0, "the turn waited for a summary call"
    assert what_the_turn_did(turn) == [
        "A fold is due (fold batch); it runs after this reply",
        "17 earlier messages not summarized yet",
    ]
    assert turn.due is not None
    assert turn.plan.not_summarized > 0, "what no longer fits is counted as not summarized yet"
    assert shown(turn)[-4:] == [f"message {n}" for n in range(26, 30)], "the window still goes word for word"

    after_reply = await prepare_history(store, summarizer, settings())
    assert after_reply.summary.folded_count == 26
    assert what_the_turn_did(after_reply) == ["This turn folded 26 messages in 1 summary call"]
    assert summarizer.calls <= settings().max_folds_per_turn


async def test_a_turn_that_finds_the_sessions_fold_running_makes_no_summary_call() -> None:
    store = chat(30)
    store.summary = None
    summarizer = RecordingSummarizer()

    async with store.fold_lock() as held:
        assert held
        turn = await read_and_plan(store, settings(), failures=SaveFailures())

    assert summarizer.calls == 0
    assert turn.due is not None, "the fold is left for after the reply, where the lock decides who folds"
    assert not folded(turn)
    assert shown(turn)[-4:] == [f"message {n}" for n in range(26, 30)], "the window still goes word for word"


async def test_a_fold_that_finds_the_work_done_under_the_lock_makes_no_summary_call() -> None:
    store = chat(8)
    other = RecordingSummarizer()
    summarizer = RecordingSummarizer()

    class FoldedMeanwhile(InMemorySessionStore):
        """Another worker's fold saves between this fold's read and its taking the lock."""

        def fold_lock(self) -> AbstractAsyncContextManager[bool]:
            @asynccontextmanager
            async def lock() -> AsyncIterator[bool]:
                await prepare_history(store, other, settings())
                async with store.fold_lock() as held:
                    yield held

            return lock()

    late = FoldedMeanwhile(store.database, store.scope)

    turn = await prepare_history(late, summarizer, settings())

    assert other.calls == 1
    assert summarizer.calls == 0, "a summary call whose result would be thrown away"
    assert turn.summary.folded_count == 4


class BuiltAgent:
    """What `reply_of` reads of a component: its results, as Langflow's `Component.get_results()` returns them."""

    def __init__(self, results: object) -> None:
        self.results = results

    def get_results(self) -> object:
        if isinstance(self.results, Exception):
            raise self.results
        return self.results


def test_the_fold_after_the_reply_plans_with_the_reply_of_this_build_only() -> None:
    from lfx.schema.message import Message

    earlier = {"response": Message(text="the reply of an earlier build")}

    [reply] = reply_of(BuiltAgent({"response": Message(text="Noted.")}), earlier)
    assert (reply.role, reply.text) == ("assistant", "Noted.")
    assert reply_of(BuiltAgent(earlier), earlier) == (), "a build that failed has no reply of its own"
    assert reply_of(BuiltAgent(RuntimeError("no results")), None) == ()
    assert reply_of(BuiltAgent({"response": "not a message"}), None) == ()


def test_the_fold_lock_holds_per_session() -> None:
    store = chat(2)
    other_session = InMemoryStore(make_messages(["hello"]))

    async def check() -> None:
        async with store.fold_lock() as first, store.fold_lock() as second, other_session.fold_lock() as third:
            assert (first, second, third) == (True, False, True)
        async with store.fold_lock() as again:
            assert again

    asyncio.run(check())


# The registry


class Gate:
    """A fold that waits for `open()`, recording that it started and how it ended."""

    def __init__(self) -> None:
        self.opened = asyncio.Event()
        self.started = asyncio.Event()
        self.cancelled = False

    async def fold(self) -> CatchUp | None:
        self.started.set()
        try:
            await self.opened.wait()
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        store = chat(8)
        return (await prepare_history(store, RecordingSummarizer(), settings())).fold


async def test_one_background_fold_per_session_and_a_later_turns_job_runs_once_it_ends() -> None:
    # A turn that finds its session's fold running leaves its job for after it: otherwise what that turn left
    # waits for another turn, which may never come (seen in the load benchmark with a 30 s summary model).
    folds = AfterReply()
    running, older, newer = Gate(), Gate(), Gate()

    folds.start(SESSION, running.fold)
    await running.started.wait()
    folds.start(SESSION, older.fold)
    folds.start(SESSION, newer.fold)
    await asyncio.sleep(0.05)
    assert not newer.started.is_set(), "a second fold of a session beside the running one"
    assert folds.running(SESSION)
    running.opened.set()
    await asyncio.wait_for(newer.started.wait(), timeout=10)
    first = folds.previous(SESSION)
    assert first is not None and (first.folded, first.calls) == (4, 1)
    assert folds.previous(SESSION) is None, "the next turn reports an outcome once"
    newer.opened.set()
    await folds.wait(SESSION)

    assert not folds.running(SESSION)
    assert not older.started.is_set(), "only the newest turn's job follows the running fold"


async def test_waiting_for_a_session_waits_for_the_fold_that_follows_its_running_one() -> None:
    folds = AfterReply()
    running, following = Gate(), Gate()
    folds.start(SESSION, running.fold)
    await running.started.wait()
    folds.start(SESSION, following.fold)
    running.opened.set()
    following.opened.set()

    await folds.wait(SESSION)

    assert following.started.is_set() and not folds.running(SESSION)


class OtherWorker:
    """The session's fold lock held by another worker for `folds_there` folds in a row, each until `done` is set: a
    job that finds it answers how to wait for it (`FoldsElsewhere`), then folds; `places_taken` says whether this
    worker's place was held meanwhile."""

    def __init__(self, folds: AfterReply, folds_there: int = 1) -> None:
        self.folds, self.done, self.runs = folds, asyncio.Event(), 0
        self.places_taken: list[bool] = []
        self.folds_there = folds_there

    async def ended(self) -> bool:
        self.places_taken.append(folds_running := self.folds._place().locked())
        await self.done.wait()
        self.done.clear()
        self.folds_there -= 1
        return not folds_running

    async def job(self) -> CatchUp | timing.FoldsElsewhere | None:
        self.runs += 1
        if self.folds_there:
            return timing.FoldsElsewhere(self.ended)
        return (await prepare_history(chat(8), RecordingSummarizer(), settings())).fold


async def test_a_fold_that_finds_the_sessions_fold_in_another_worker_follows_it_without_holding_a_place() -> None:
    # Otherwise what the turns on this worker left waits for another turn, which may never come (seen in the load
    # benchmark: two workers, a 30 s summary model, a session's last turns on the worker not running its fold).
    folds = AfterReply(max_running=1)
    elsewhere = OtherWorker(folds)
    folds.start(SESSION, elsewhere.job)
    await asyncio.sleep(0.05)
    assert folds.running(SESSION) and elsewhere.runs == 1
    elsewhere.done.set()
    await folds.wait(SESSION)

    assert elsewhere.runs == 2, "the fold ran again once the other worker's fold ended"
    assert elsewhere.places_taken == [False], "it waited without holding one of the worker's places"
    outcome = folds.previous(SESSION)
    assert outcome is not None and outcome.calls == 1


async def test_a_fold_follows_the_other_workers_next_fold_too() -> None:
    # Seen in the load benchmark (slow summary model, two workers): the other worker started the session's next fold
    # the moment the one waited for ended, and the job here, finding the lock held again, gave up; 12 messages older
    # than the window stayed unfolded after the session's last turn.
    folds = AfterReply(max_running=1)
    elsewhere = OtherWorker(folds, folds_there=2)
    folds.start(SESSION, elsewhere.job)
    await asyncio.sleep(0.05)
    elsewhere.done.set()
    await asyncio.sleep(0.05)
    assert folds.running(SESSION) and elsewhere.runs == 2, "it waits for the other worker's next fold"
    elsewhere.done.set()
    await folds.wait(SESSION)

    assert elsewhere.runs == 3
    assert elsewhere.places_taken == [False, False], "it waited without holding one of the worker's places"
    outcome = folds.previous(SESSION)
    assert outcome is not None and outcome.calls == 1


async def test_a_newer_turns_fold_here_takes_over_from_the_one_waiting_for_another_worker() -> None:
    folds = AfterReply()
    elsewhere, newer = OtherWorker(folds), Gate()
    folds.start(SESSION, elsewhere.job)
    await asyncio.sleep(0.05)
    folds.start(SESSION, newer.fold)
    newer.opened.set()
    elsewhere.done.set()
    await folds.wait(SESSION)

    assert elsewhere.runs == 1 and newer.started.is_set(), "only the newest turn's fold follows"


async def test_the_process_runs_at_most_max_running_folds_at_once() -> None:
    folds = AfterReply(max_running=1)
    first, second = Gate(), Gate()
    folds.start(key("a"), first.fold)
    folds.start(key("b"), second.fold)
    await first.started.wait()
    await asyncio.sleep(0.05)

    assert not second.started.is_set(), "the second fold started beyond the cap"
    first.opened.set()
    second.opened.set()
    await folds.wait(key("a"))
    await folds.wait(key("b"))
    assert second.started.is_set()


async def test_a_fold_waiting_for_a_place_runs_the_newest_turns_job() -> None:
    # A fold that waited for a place would otherwise fold what was due when its turn ended, and the turns after it
    # (which start no fold while one waits) would leave their messages to the fold after it.
    folds = AfterReply(max_running=1)
    other, older, newer = Gate(), Gate(), Gate()
    folds.start(OTHER, other.fold)
    await other.started.wait()

    folds.start(SESSION, older.fold)
    assert folds.waiting(SESSION)
    folds.start(SESSION, newer.fold)  # a later turn hands its job to the fold still waiting
    other.opened.set()
    newer.opened.set()
    await folds.wait(SESSION)

    assert newer.started.is_set()
    assert not older.started.is_set()
    assert not folds.waiting(SESSION) and not folds.running(SESSION)


async def test_shutdown_cancels_running_folds_and_leaves_the_state_as_it_was(caplog: pytest.LogCaptureFixture) -> None:
    folds = AfterReply()
    store = chat(8)
    summarizer = RecordingSummarizer()
    summarizer.model.fold_gate = FoldGate()
    folds.start(store.scope.key, fold_job(store, summarizer, settings()))
    await summarizer.model.fold_gate.started.wait()

    with caplog.at_level(logging.INFO, logger=timing.__name__):
        await folds.shutdown()

    assert store.summary is None, "a cancelled fold saved"
    assert not folds.running(store.scope.key)
    assert "cancelled" in caplog.text


async def test_a_failed_background_fold_is_logged_and_reported_to_the_next_turn(
    caplog: pytest.LogCaptureFixture,
) -> None:
    folds = AfterReply()
    store = chat(8)
    summarizer = RecordingSummarizer([RuntimeError("provider down")])

    with caplog.at_level(logging.WARNING, logger=timing.__name__):
        folds.start(store.scope.key, fold_job(store, summarizer, settings()))
        await folds.wait(store.scope.key)

    outcome = folds.previous(store.scope.key)
    assert outcome is not None and outcome.folded == 0
    assert "provider down" in " ".join(outcome.problems)
    assert "provider down" in caplog.text
    assert store.summary is not None and store.summary.failed_folds == 1, "the back-off applies as for an inline fold"


def test_a_cap_below_one_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(timing.MAX_RUNNING_ENV, "0")
    with pytest.raises(ValueError, match=timing.MAX_RUNNING_ENV):
        AfterReply(timing.max_running_from_environment())
    monkeypatch.setenv(timing.MAX_RUNNING_ENV, "many")
    with pytest.raises(ValueError, match="whole number"):
        timing.max_running_from_environment()


# When the fold runs: the timing chosen where the process starts


def work(
    store: SessionStore, summarizer: RecordingSummarizer, signal: ReplySignal = ReplySignal.STORED_REPLY
) -> TurnWork:
    job = fold_job(store, summarizer, settings())

    async def fold_after_reply(reply: Reply) -> CatchUp | None:
        return await job()

    return TurnWork(store, summarizer, settings(), SaveFailures(), fold_after_reply, signal, turn="turn")


async def test_inline_timing_folds_in_the_turn() -> None:
    store = chat(8)
    summarizer = RecordingSummarizer()

    turn = await Inline().turn(work(store, summarizer))

    assert summarizer.calls == 1 and folded(turn) == 4
    assert turn.due is None and not turn.busy


async def test_after_reply_timing_folds_only_once_the_sessions_reply_is_signalled() -> None:
    store = chat(8)
    summarizer = RecordingSummarizer()
    folds = AfterReply()
    flow_id, _, session_id, _ = store.scope.key

    turn = await folds.turn(work(store, summarizer))
    await asyncio.sleep(0.05)

    assert turn.due == "fold batch" and summarizer.calls == 0
    assert folds.running(store.scope.key), "the fold waits for the reply"
    folds.replied(flow_id, "another session")
    await asyncio.sleep(0.05)
    assert summarizer.calls == 0, "another session's reply started this session's fold"
    folds.replied(flow_id, session_id)
    await folds.wait(store.scope.key)
    assert summarizer.calls == 1
    outcome = folds.previous(store.scope.key)
    assert outcome is not None and outcome.folded == 4


async def test_compaction_waits_for_the_sessions_fold_after_the_reply() -> None:
    store = chat(8)
    gated = RecordingSummarizer()
    gated.model.fold_gate = FoldGate()
    folds = AfterReply()
    flow_id, _, session_id, _ = store.scope.key
    await folds.turn(work(store, gated))
    folds.replied(flow_id, session_id)
    await gated.model.fold_gate.started.wait()

    compaction = asyncio.create_task(folds.compact(work(store, RecordingSummarizer())))
    await asyncio.sleep(0.05)
    assert not compaction.done(), "/compact did not wait for the running fold"
    gated.model.fold_gate.set()
    turn = await compaction

    assert turn.summary.folded_count >= 4, "/compact went on from the fold it waited for"
