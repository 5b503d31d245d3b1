"""When a catch-up after the reply runs: `AfterReply`, the timing, with one record per session scope (`_SessionFolds`)
and at most `max_running` summary calls at once in the process."""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from datetime import datetime

from langflow_summarizing_agent.engine.fold import CatchUp
from langflow_summarizing_agent.engine.records import ScopeKey, Summary
from langflow_summarizing_agent.engine.store import SessionStore
from langflow_summarizing_agent.engine.turn import Turn, compact, plan_beside_running_fold, read_and_plan
from langflow_summarizing_agent.wiring.after_reply.reply import (
    FoldJob,
    FoldOutcome,
    FoldsElsewhere,
    Reply,
    ReplySignal,
    ReplyWait,
    TurnWork,
)

logger = logging.getLogger(__name__)

MAX_RUNNING_ENV = "SUMMARIZING_AGENT_MAX_BACKGROUND_FOLDS"
DEFAULT_MAX_RUNNING = 4
MAX_SESSIONS = 10_000
"""Session records kept once their folds ended (for the report of the last one); the oldest are forgotten first."""
REPLY_WAIT_SECONDS = 600.0
"""Longest wait for the session's final reply before the catch-up after it runs anyway."""
QUEUED_MARK_SECONDS = REPLY_WAIT_SECONDS + 300.0
"""How long the mark of a queued fold counts (`SessionStore.mark_fold_queued`): longer than a fold waits for its
reply, a place and its summary calls; an older one is left by a worker that was killed, and ignored."""


@dataclass
class _Waiter:
    """A turn's wait for its final reply: the event its signal sets, and the reply it brought."""

    signal: ReplySignal
    turn: Hashable
    loop: asyncio.AbstractEventLoop
    event: asyncio.Event = field(default_factory=asyncio.Event)
    reply: Reply = field(default_factory=Reply)

    def set(self, reply: Reply | None = None) -> None:
        if reply is not None:
            self.reply = reply
        self.loop.call_soon_threadsafe(self.event.set)


@dataclass
class _SessionFolds:
    """What `AfterReply` keeps of one session: its fold task, the job it runs next, the job left for after it, the
    wait for the newest turn's reply, and the outcome of its last fold (reported by the next turn)."""

    task: asyncio.Task[None] | None = None
    job: tuple[FoldJob, ReplyWait | None] | None = None
    """The fold the waiting task will run (the newest turn's job), and what it waits for first."""
    following: tuple[FoldJob, ReplyWait | None] | None = None
    """The fold the session runs once its running fold ends: the newest turn's job."""
    waiter: _Waiter | None = None
    outcome: CatchUp | None = None
    store: SessionStore | None = None
    """The newest turn's store: its fold marks the summary while it is queued or runs, for reads elsewhere."""

    @property
    def idle(self) -> bool:
        return self.task is None and self.job is None and self.following is None and self.waiter is None


class AfterReply:
    """Folds after the final reply, in the background, one record per session scope."""

    def __init__(self, max_running: int | None = None) -> None:
        if max_running is not None and max_running < 1:
            msg = f"{MAX_RUNNING_ENV} must be at least 1, got {max_running}"
            raise ValueError(msg)
        self.max_running = max_running or DEFAULT_MAX_RUNNING
        self._sessions: OrderedDict[ScopeKey, _SessionFolds] = OrderedDict()
        self._places: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = (
            weakref.WeakKeyDictionary()
        )

    async def turn(self, work: TurnWork) -> Turn:
        """Read and plan, and leave the due fold for after the reply (or for after the session's running fold)."""
        key = work.store.scope.key
        if self.running(key):
            turn = await plan_beside_running_fold(work.store, work.settings, failures=work.failures)
        else:
            turn = await read_and_plan(work.store, work.settings, failures=work.failures)
        unanswered = self._stored_reply_never_came(key)
        waiter = self._wait_for_reply(key, work.signal, work.turn)
        self._sessions[key].store = work.store

        async def fold() -> FoldOutcome:
            return await work.fold_after_reply(waiter.reply)

        if unanswered and work.signal is ReplySignal.STORED_REPLY:
            # The previous turn's reply was never stored (a flow without a Chat Output): this turn is the sign that
            # it ended, so the session's fold runs now instead of waiting for a signal that may never come.
            self._sessions[key].waiter = None
            self.start(key, fold)
        else:
            self.start(key, fold, after=functools.partial(self._reply_came, key, waiter))
        return turn

    def _stored_reply_never_came(self, key: ScopeKey) -> bool:
        session = self._sessions.get(key)
        waiter = session.waiter if session is not None else None
        return waiter is not None and waiter.signal is ReplySignal.STORED_REPLY and not waiter.event.is_set()

    async def compact(self, work: TurnWork) -> Turn:
        """Wait for the session's running fold, then fold what may be folded now."""
        await self.wait(work.store.scope.key)
        return await compact(work.store, work.summarizer, work.settings, failures=work.failures)

    def previous(self, key: ScopeKey) -> CatchUp | None:
        """The fold that ran after the session's previous reply, once: the next turn reports it."""
        session = self._sessions.get(key)
        if session is None:
            return None
        outcome, session.outcome = session.outcome, None
        self._tidy(key)
        return outcome

    def replied(self, flow_id: str, session_id: str) -> None:
        """A final reply is stored in the session: the folds waiting for one (`ReplySignal.STORED_REPLY`) go on."""
        for key, session in list(self._sessions.items()):
            waiter = session.waiter
            if key[0] == flow_id and key[2] == session_id and waiter and waiter.signal is ReplySignal.STORED_REPLY:
                session.waiter = None
                waiter.set()

    def built(self, key: ScopeKey, turn: Hashable, reply: Reply) -> None:
        """The Agent's build of `turn` ended with `reply`: the session's fold waiting for it goes on."""
        session = self._sessions.get(key)
        waiter = session.waiter if session is not None else None
        if session is not None and waiter is not None and waiter.turn == turn:
            session.waiter = None
            waiter.set(reply)

    def forget(self, key: ScopeKey) -> None:
        """Drop the report of a deleted session's last fold."""
        session = self._sessions.get(key)
        if session is not None:
            session.outcome = None
            self._tidy(key)

    def _wait_for_reply(self, key: ScopeKey, signal: ReplySignal, turn: Hashable) -> _Waiter:
        session = self._session(key)
        earlier = session.waiter
        if earlier is not None:
            # The session's fold waiting for an earlier turn's reply takes this turn's job, and waits for its reply.
            earlier.set()
        session.waiter = _Waiter(signal, turn, asyncio.get_running_loop())
        return session.waiter

    async def _reply_came(self, key: ScopeKey, waiter: _Waiter) -> None:
        """Waits for the turn's reply signal, or `REPLY_WAIT_SECONDS`."""
        try:
            await asyncio.wait_for(waiter.event.wait(), REPLY_WAIT_SECONDS)
        except TimeoutError:
            logger.info("Summarizing Agent: no reply within %.0f s; the catch-up after it runs now", REPLY_WAIT_SECONDS)
            session = self._sessions.get(key)
            if session is not None and session.waiter is waiter:
                session.waiter = None

    def running(self, key: ScopeKey) -> bool:
        session = self._sessions.get(key)
        return session is not None and session.task is not None

    def waiting(self, key: ScopeKey) -> bool:
        """The session's fold waits (for its `after`, or for a place)."""
        session = self._sessions.get(key)
        return session is not None and session.job is not None

    def start(self, key: ScopeKey, fold: FoldJob, *, after: ReplyWait | None = None) -> None:
        """Run `fold` in the background. A fold of the session still waiting runs `fold` instead of its own, after
        `after`; a fold of the session running now is followed by `fold`, in place of any job left for after it
        before. With `after`, the fold waits for it first, holding the session's place but none of the process's
        summary calls."""
        session = self._session(key)
        if session.job is not None:
            session.job = (fold, after)
        elif session.task is not None:
            session.following = (fold, after)
        else:
            session.job = (fold, after)
            task = asyncio.get_running_loop().create_task(self._run(key, session), name="summarizing-agent-fold")
            session.task = task
            task.add_done_callback(lambda done: self._ended(key, session, done))

    def _ended(self, key: ScopeKey, session: _SessionFolds, task: asyncio.Task[None]) -> None:
        if session.task is task:
            session.task = None
        following, session.following = session.following, None
        if following is not None and not task.cancelled():
            self.start(key, following[0], after=following[1])
        self._tidy(key)

    async def wait(self, key: ScopeKey) -> None:
        """Wait for the session's running fold, and the one left for after it, to end (however they end)."""
        await self.wait_for(lambda k: k == key)

    async def wait_for(self, match: Callable[[ScopeKey], bool]) -> None:
        """Wait for the folds whose session `match` accepts to end, those that follow them included."""
        # A fold's end starts the session's next fold before its waiters resume (its callbacks run in order).
        while tasks := [s.task for key, s in list(self._sessions.items()) if s.task is not None and match(key)]:
            await asyncio.wait(tasks)

    async def wait_all(self) -> None:
        """Wait for every fold to end, those that follow them included."""
        await self.wait_for(lambda _: True)

    async def shutdown(self) -> None:
        """Cancel every running fold and wait for them to end: their summaries stay as they were."""
        tasks = []
        for session in self._sessions.values():
            session.following = session.waiter = None
            if session.task is not None:
                tasks.append(session.task)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)
            logger.info("Summarizing Agent: cancelled %d background fold(s) at shutdown", len(tasks))

    def _session(self, key: ScopeKey) -> _SessionFolds:
        session = self._sessions.get(key)
        if session is None:
            session = self._sessions[key] = _SessionFolds()
        self._sessions.move_to_end(key)
        return session

    def _tidy(self, key: ScopeKey) -> None:
        session = self._sessions.get(key)
        if session is not None and session.idle and session.outcome is None:
            del self._sessions[key]

    async def _run(self, key: ScopeKey, session: _SessionFolds) -> None:
        """Fold with the summary marked meanwhile; a fold left to follow this one keeps the mark until it marks its
        own."""
        mark = await _marked(session.store)
        try:
            await self._fold(key, session)
        finally:
            if mark is not None and session.following is None:
                await _cleared(session.store, mark)

    async def _fold(self, key: ScopeKey, session: _SessionFolds) -> None:
        try:
            result = await self._when_replied_and_placed(session)
        except asyncio.CancelledError:
            session.job = None
            logger.info("Summarizing Agent: a background fold was cancelled; the summary stays as it was")
            raise
        except Exception as exc:
            from langflow_summarizing_agent.storage.store import failure_note

            note = failure_note(exc)
            logger.exception("Summarizing Agent: a background fold failed (%s); the summary stays as it was", note)
            self._record(key, session, CatchUp(Summary(), problems=(note,)))
            return
        if result is None:
            return
        for problem in result.problems:
            logger.warning("Summarizing Agent: background fold: %s", problem)
        if result.calls:
            self._record(key, session, result)

    async def _when_replied_and_placed(self, session: _SessionFolds) -> CatchUp | None:
        """Run the session's newest job once its reply came and a place is free. A newer turn may replace the job
        meanwhile: its fold waits for that turn's reply. A job that finds the session's fold running in another
        worker runs again after it, as often as it finds one there, unless a newer turn here left the session's next
        fold."""
        waited: ReplyWait | None = None
        while True:
            assert session.job is not None
            after = session.job[1]
            if after is not None and after is not waited:
                waited = after
                await after()
                continue
            async with self._place():
                assert session.job is not None
                fold, after = session.job
                if after is None or after is waited:
                    session.job = None
                    outcome = await fold()
                    break
        while isinstance(outcome, FoldsElsewhere):
            # A newer turn here may have left the session's next fold meanwhile: it folds what this one would. The
            # other worker may start its own next fold as soon as the one waited for ends: this one follows that too.
            if session.following is not None or not await outcome.ended() or session.following is not None:
                return None
            async with self._place():
                outcome = await fold()
        return outcome if isinstance(outcome, CatchUp) else None

    def _place(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        places = self._places.get(loop)
        if places is None:
            places = self._places[loop] = asyncio.Semaphore(self.max_running)
        return places

    def _record(self, key: ScopeKey, session: _SessionFolds, outcome: CatchUp) -> None:
        session.outcome = outcome
        if self._sessions.get(key) is not session:
            self._sessions[key] = session
        self._sessions.move_to_end(key)
        while len(self._sessions) > MAX_SESSIONS:
            oldest = next((k for k, s in self._sessions.items() if s.idle), None)
            if oldest is None or oldest == key:
                break
            del self._sessions[oldest]


async def _marked(store: SessionStore | None) -> datetime | None:
    """Mark the summary as having a fold queued; a failing mark never fails the fold (reads elsewhere then do not
    wait for it)."""
    if store is None:
        return None
    try:
        return await store.mark_fold_queued()
    except Exception as exc:
        from langflow_summarizing_agent.storage.store import failure_note

        logger.warning(
            "Summarizing Agent: could not mark a queued fold (%s); reads elsewhere miss it",
            failure_note(exc),
            exc_info=True,
        )
        return None


async def _cleared(store: SessionStore | None, mark: datetime) -> None:
    if store is None:
        return
    try:
        await store.clear_fold_queued(mark)
    except Exception as exc:
        from langflow_summarizing_agent.storage.store import failure_note

        logger.warning(
            "Summarizing Agent: could not clear a fold's mark (%s); it lapses", failure_note(exc), exc_info=True
        )


def max_running_from_environment() -> int | None:
    raw = os.environ.get(MAX_RUNNING_ENV, "").strip()
    if not raw:
        return None
    try:
        return int(raw)
    except ValueError:
        msg = f"{MAX_RUNNING_ENV} must be a whole number of folds, got {raw!r}"
        raise ValueError(msg) from None
