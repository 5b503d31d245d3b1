"""Folds that run after the reply: on a Langflow server no turn waits for a summary call.

A turn on `langflow run` reads and plans without a summary call. When a fold is due, `agent_turn` starts it here
once the reply is produced, and a later turn uses the summary it saved. `FOLDS` is the process's one registry of
those folds, a plain registry of tasks by session scope: what a fold does is the job it is given.

- at most one fold per session scope, and at most `max_running` summary calls at once in the process (the
  environment variable `SUMMARIZING_AGENT_MAX_BACKGROUND_FOLDS`, default 4); more folds wait for a place, one per
  session: a later turn of a session whose fold still waits gives it its own job, so the fold that gets the place
  folds what the newest turn left, not what was due when it began to wait;
- a turn that finds its session's fold running leaves its job as the session's next fold, which starts when the
  running one ends (only the newest turn's: at most one running and one next fold per session), so what that turn
  left is folded without waiting for another turn;
- each fold holds the session's fold lock (`SessionStore.fold_lock`), so a fold running in another worker makes
  this one skip without a summary call;
- a fold that fails is logged and recorded for the session's next turn; one that is cancelled (the server shuts
  down) leaves the summary as it was, since only a completed fold saves.

Background folds need an event loop that outlives the turn. The `langflow.plugins` entry point turns them on
(`enable`), which only `langflow run` loads; `lfx run`, and a graph run to completion in a script, fold inline.
"""

from __future__ import annotations

import asyncio
import logging
import os
import weakref
from collections import OrderedDict
from collections.abc import Awaitable, Callable

from langflow_summarizing_agent.engine.fold import FoldResult
from langflow_summarizing_agent.engine.records import Summary

logger = logging.getLogger(__name__)

ScopeKey = tuple[str, ...]
"""A `Scope.key`."""

MAX_RUNNING_ENV = "SUMMARIZING_AGENT_MAX_BACKGROUND_FOLDS"
DEFAULT_MAX_RUNNING = 4
MAX_OUTCOMES = 10_000
"""Outcomes kept for sessions whose next turn has not come yet; the oldest are forgotten first."""


class BackgroundFolds:
    """The background folds of one process, by session scope."""

    def __init__(self, max_running: int = DEFAULT_MAX_RUNNING) -> None:
        self.enabled = False
        self.max_running = max_running
        self._tasks: dict[ScopeKey, asyncio.Task[None]] = {}
        self._jobs: dict[
            ScopeKey, tuple[Callable[[], Awaitable[FoldResult | None]], Callable[[], Awaitable[None]] | None]
        ] = {}
        """The fold each waiting session will run (the newest turn's job), and what it waits for first."""
        self._next: dict[
            ScopeKey, tuple[Callable[[], Awaitable[FoldResult | None]], Callable[[], Awaitable[None]] | None]
        ] = {}
        """The fold each session runs once its running fold ends: the newest turn's job."""
        self._outcomes: OrderedDict[ScopeKey, FoldResult] = OrderedDict()
        self._places: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = (
            weakref.WeakKeyDictionary()
        )

    def enable(self, max_running: int | None = None) -> None:
        """Fold after the reply from now on in this process (idempotent)."""
        if max_running is not None:
            if max_running < 1:
                msg = f"{MAX_RUNNING_ENV} must be at least 1, got {max_running}"
                raise ValueError(msg)
            self.max_running = max_running
        self.enabled = True

    def running(self, key: ScopeKey) -> bool:
        return key in self._tasks

    def waiting(self, key: ScopeKey) -> bool:
        """The session's fold waits (for its `after`, or for a place)."""
        return key in self._jobs

    def start(
        self,
        key: ScopeKey,
        fold: Callable[[], Awaitable[FoldResult | None]],
        *,
        after: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        """Run `fold` in the background. A fold of the session still waiting runs `fold` instead of its own (after
        `after`, if it has not waited for it yet); a fold of the session running now is followed by `fold`, in place
        of any job left for after it before. With `after`, the fold waits for it first, holding the session's place
        but none of the process's summary calls."""
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

    def take_outcome(self, key: ScopeKey) -> FoldResult | None:
        """The outcome of the session's last background fold, once: the next turn reports it."""
        return self._outcomes.pop(key, None)

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
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)
            logger.info("Summarizing Agent: cancelled %d background fold(s) at shutdown", len(tasks))

    async def _run(self, key: ScopeKey) -> None:
        try:
            waited = None
            while (after := self._jobs[key][1]) is not None and after is not waited:
                waited = after
                await after()
            async with self._place():
                fold, _ = self._jobs.pop(key)
                result = await fold()
        except asyncio.CancelledError:
            self._jobs.pop(key, None)
            logger.info("Summarizing Agent: a background fold was cancelled; the summary stays as it was")
            raise
        except Exception as exc:
            logger.exception("Summarizing Agent: a background fold failed; the summary stays as it was")
            self._record(key, FoldResult(Summary(), problems=(f"summary store unavailable ({type(exc).__name__})",)))
            return
        if result is None:
            return
        for problem in result.problems:
            logger.warning("Summarizing Agent: background fold: %s", problem)
        if result.calls:
            self._record(key, result)

    def _place(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        places = self._places.get(loop)
        if places is None:
            places = self._places[loop] = asyncio.Semaphore(self.max_running)
        return places

    def _record(self, key: ScopeKey, outcome: FoldResult) -> None:
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


FOLDS = BackgroundFolds()
"""This process's background folds."""
