"""When a fold runs: an object chosen once, where the process starts, and handed to every turn in the runtime.

- `Inline`: a turn folds what is due before the model is called. For `lfx run` and scripts, where no event loop
  outlives the turn; the process's runtime uses it unless a server installed another.
- `AfterReply`: a turn never waits for a summary call. It reads and plans, and leaves the session's fold to run once
  the reply is produced; a later turn uses the summary it saved. The `langflow.plugins` entry point installs it on
  `langflow run` (`wiring.plugin`).

Both answer `/compact` with a fold in the turn (`AfterReply` first waits for the session's running fold).

"After the reply" is one mechanism for both components: the fold waits for the session's reply signal
(`AfterReply.replied`), with no polling. The Agent signals when its build ends, as the reply is its own output;
any component's reply signals when Langflow stores it (a message of another sender than the user in the session,
seen by the listener `runtime.install_reply_listener` installs). A fold whose reply never comes (a build that failed
before storing one) runs after `REPLY_WAIT_SECONDS`, or is replaced by the session's next turn.

`AfterReply` keeps at most one fold per session scope, and at most `max_running` summary calls at once in the
process (`SUMMARIZING_AGENT_MAX_BACKGROUND_FOLDS`, default 4); more folds wait for a place, one per session:
- a later turn of a session whose fold still waits gives it its own job, so the fold that gets the place folds
  what the newest turn left, not what was due when it began to wait;
- a turn that finds its session's fold running leaves its job as the session's next fold, which starts when the
  running one ends (only the newest turn's: at most one running and one next fold per session);
- each fold holds the session's fold lock (`SessionStore.fold_lock`): a fold that finds it held in another worker
  makes no summary call, waits for that fold without holding a place, and then runs again (waiting again if the
  other worker started the session's next fold meanwhile), so it follows them as the session's next fold would in
  one worker (unless a newer turn here left one);
- a fold that fails is logged and recorded for the session's next turn; one that is cancelled (the server shuts
  down) leaves the summary as it was, since only a completed fold saves.
"""

from __future__ import annotations

import asyncio
import logging
import os
import weakref
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from langflow_summarizing_agent.engine.fold import CatchUp, SaveFailures, Summarizer
from langflow_summarizing_agent.engine.records import Summary
from langflow_summarizing_agent.engine.settings import FoldSettings
from langflow_summarizing_agent.engine.store import SessionStore
from langflow_summarizing_agent.engine.turn import Turn, compact, fold_if_due, plan_beside_running_fold, read_and_plan

logger = logging.getLogger(__name__)

ScopeKey = tuple[str, ...]
"""A `Scope.key`: flow, owner, session, context."""

MAX_RUNNING_ENV = "SUMMARIZING_AGENT_MAX_BACKGROUND_FOLDS"
DEFAULT_MAX_RUNNING = 4
MAX_OUTCOMES = 10_000
"""Outcomes kept for sessions whose next turn has not come yet; the oldest are forgotten first."""
REPLY_WAIT_SECONDS = 600.0
"""Longest wait for the session's reply before the fold after it runs anyway."""
FOLD_WAIT_SECONDS = 120.0
"""Longest wait for a session's folds running in any worker: by a read or reset through the API (past it, the answer's
`fold_running` says so), or by a fold following them."""


@dataclass(frozen=True)
class FoldsElsewhere:
    """What a fold job answers when the session's fold lock is held in another worker: `ended` waits for those folds
    (False: one still ran after `FOLD_WAIT_SECONDS`)."""

    ended: Callable[[], Awaitable[bool]]


FoldJob = Callable[[], Awaitable[CatchUp | FoldsElsewhere | None]]
"""The fold a turn leaves for after its reply."""


@dataclass(frozen=True)
class TurnWork:
    """What the turn runner hands the timing: the turn's store, model and settings, and the fold it would leave for
    after its reply."""

    store: SessionStore
    summarizer: Summarizer
    settings: FoldSettings
    failures: SaveFailures
    fold_after_reply: FoldJob


class FoldTiming(Protocol):
    """When a turn's due fold runs."""

    async def turn(self, work: TurnWork) -> Turn: ...

    async def compact(self, work: TurnWork) -> Turn: ...

    def previous(self, key: ScopeKey) -> CatchUp | None:
        """The fold that ran after the session's previous reply, once: the next turn reports it."""
        ...

    def replied(self, flow_id: str, session_id: str) -> None:
        """The session's reply is produced."""
        ...

    def forget(self, key: ScopeKey) -> None:
        """Drop the report of a deleted session's last fold."""
        ...

    async def wait_for(self, match: Callable[[ScopeKey], bool]) -> None:
        """Wait for the folds running in this process whose session `match` accepts."""
        ...


class Inline:
    """Folds in the turn, before the model is called."""

    async def turn(self, work: TurnWork) -> Turn:
        return await fold_if_due(work.store, work.summarizer, work.settings, failures=work.failures)

    async def compact(self, work: TurnWork) -> Turn:
        return await compact(work.store, work.summarizer, work.settings, failures=work.failures)

    def previous(self, key: ScopeKey) -> CatchUp | None:
        return None

    def replied(self, flow_id: str, session_id: str) -> None:
        return None

    def forget(self, key: ScopeKey) -> None:
        return None

    async def wait_for(self, match: Callable[[ScopeKey], bool]) -> None:
        return None


class AfterReply:
    """Folds after the reply, in the background, by session scope."""

    def __init__(self, max_running: int | None = None) -> None:
        if max_running is not None and max_running < 1:
            msg = f"{MAX_RUNNING_ENV} must be at least 1, got {max_running}"
            raise ValueError(msg)
        self.max_running = max_running or DEFAULT_MAX_RUNNING
        self._tasks: dict[ScopeKey, asyncio.Task[None]] = {}
        self._jobs: dict[ScopeKey, tuple[FoldJob, Callable[[], Awaitable[None]] | None]] = {}
        """The fold each waiting session will run (the newest turn's job), and what it waits for first."""
        self._next: dict[ScopeKey, tuple[FoldJob, Callable[[], Awaitable[None]] | None]] = {}
        """The fold each session runs once its running fold ends: the newest turn's job."""
        self._outcomes: OrderedDict[ScopeKey, CatchUp] = OrderedDict()
        self._replies: dict[ScopeKey, tuple[asyncio.Event, asyncio.AbstractEventLoop]] = {}
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
        self.start(key, work.fold_after_reply, after=self._reply_of(key))
        return turn

    async def compact(self, work: TurnWork) -> Turn:
        """Wait for the session's running fold, then fold what may be folded now."""
        await self.wait(work.store.scope.key)
        return await compact(work.store, work.summarizer, work.settings, failures=work.failures)

    def previous(self, key: ScopeKey) -> CatchUp | None:
        return self._outcomes.pop(key, None)

    def replied(self, flow_id: str, session_id: str) -> None:
        for key, (event, loop) in list(self._replies.items()):
            if key[0] == flow_id and key[2] == session_id:
                del self._replies[key]
                loop.call_soon_threadsafe(event.set)

    def forget(self, key: ScopeKey) -> None:
        self._outcomes.pop(key, None)

    def _reply_of(self, key: ScopeKey) -> Callable[[], Awaitable[None]]:
        """Waits for the session's next reply signal (`replied`), or `REPLY_WAIT_SECONDS`."""
        event = asyncio.Event()
        earlier = self._replies.pop(key, None)
        if earlier is not None:
            # The session's fold waiting for an earlier turn's reply takes this turn's job, and waits for its reply.
            earlier[0].set()
        self._replies[key] = (event, asyncio.get_running_loop())

        async def wait() -> None:
            try:
                await asyncio.wait_for(event.wait(), REPLY_WAIT_SECONDS)
            except TimeoutError:
                logger.info("Summarizing Agent: no reply within %.0f s; the fold after it runs now", REPLY_WAIT_SECONDS)

        return wait

    def running(self, key: ScopeKey) -> bool:
        return key in self._tasks

    def waiting(self, key: ScopeKey) -> bool:
        """The session's fold waits (for its `after`, or for a place)."""
        return key in self._jobs

    def start(
        self,
        key: ScopeKey,
        fold: FoldJob,
        *,
        after: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        """Run `fold` in the background. A fold of the session still waiting runs `fold` instead of its own, after
        `after`; a fold of the session running now is followed by `fold`, in place of any job left for after it
        before. With `after`, the fold waits for it first, holding the session's place but none of the process's
        summary calls."""
        if key in self._jobs:
            self._jobs[key] = (fold, after)
        elif key in self._tasks:
            self._next[key] = (fold, after)
        else:
            self._jobs[key] = (fold, after)
            task = asyncio.get_running_loop().create_task(self._run(key), name="summarizing-agent-fold")
            self._tasks[key] = task
            task.add_done_callback(lambda done: self._ended(key, done))

    def _ended(self, key: ScopeKey, task: asyncio.Task[None]) -> None:
        if self._tasks.get(key) is task:
            self._tasks.pop(key)
        following = self._next.pop(key, None)
        if following is not None and not task.cancelled():
            self.start(key, following[0], after=following[1])

    async def wait(self, key: ScopeKey) -> None:
        """Wait for the session's running fold, and the one left for after it, to end (however they end)."""
        await self.wait_for(lambda k: k == key)

    async def wait_for(self, match: Callable[[ScopeKey], bool]) -> None:
        """Wait for the folds whose session `match` accepts to end, those that follow them included."""
        # A fold's end starts the session's next fold before its waiters resume (its callbacks run in order).
        while tasks := [task for key, task in self._tasks.items() if match(key)]:
            await asyncio.wait(tasks)

    async def wait_all(self) -> None:
        """Wait for every fold to end, those that follow them included."""
        await self.wait_for(lambda _: True)

    async def shutdown(self) -> None:
        """Cancel every running fold and wait for them to end: their summaries stay as they were."""
        self._next.clear()
        self._replies.clear()
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)
            logger.info("Summarizing Agent: cancelled %d background fold(s) at shutdown", len(tasks))

    async def _run(self, key: ScopeKey) -> None:
        try:
            result = await self._when_replied_and_placed(key)
        except asyncio.CancelledError:
            self._jobs.pop(key, None)
            logger.info("Summarizing Agent: a background fold was cancelled; the summary stays as it was")
            raise
        except Exception as exc:
            logger.exception("Summarizing Agent: a background fold failed; the summary stays as it was")
            self._record(key, CatchUp(Summary(), problems=(f"summary store unavailable ({type(exc).__name__})",)))
            return
        if result is None:
            return
        for problem in result.problems:
            logger.warning("Summarizing Agent: background fold: %s", problem)
        if result.calls:
            self._record(key, result)

    async def _when_replied_and_placed(self, key: ScopeKey) -> CatchUp | None:
        """Run the session's newest job once its reply came and a place is free. A newer turn may replace the job
        meanwhile: its fold waits for that turn's reply. A job that finds the session's fold running in another
        worker runs again after it, as often as it finds one there, unless a newer turn here left the session's next
        fold."""
        waited: Callable[[], Awaitable[None]] | None = None
        while True:
            after = self._jobs[key][1]
            if after is not None and after is not waited:
                waited = after
                await after()
                continue
            async with self._place():
                fold, after = self._jobs[key]
                if after is None or after is waited:
                    del self._jobs[key]
                    outcome = await fold()
                    break
        while isinstance(outcome, FoldsElsewhere):
            # A newer turn here may have left the session's next fold meanwhile: it folds what this one would. The
            # other worker may start its own next fold as soon as the one waited for ends: this one follows that too.
            if key in self._next or not await outcome.ended() or key in self._next:
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

    def _record(self, key: ScopeKey, outcome: CatchUp) -> None:
        self._outcomes[key] = outcome
        self._outcomes.move_to_end(key)
        while len(self._outcomes) > MAX_OUTCOMES:
            self._outcomes.popitem(last=False)


def max_running_from_environment() -> int | None:
    raw = os.environ.get(MAX_RUNNING_ENV, "").strip()
    if not raw:
        return None
    try:
        return int(raw)
    except ValueError:
        msg = f"{MAX_RUNNING_ENV} must be a whole number of folds, got {raw!r}"
        raise ValueError(msg) from None
