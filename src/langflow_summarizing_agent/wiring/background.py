"""Folds that run after the reply: on a Langflow server no turn waits for a summary call.

A turn on `langflow run` reads and plans without a summary call. When a fold is due, `agent_turn` starts it here
once the reply is produced, and a later turn uses the summary it saved. `FOLDS` is the process's one registry of
those folds, a plain registry of tasks by session scope: what a fold does is the job it is given.

- at most one fold per session scope, and at most `max_running` summary calls at once in the process (the
  environment variable `SUMMARIZING_AGENT_MAX_BACKGROUND_FOLDS`, default 4); more folds wait for a place, one per
  session: a later turn of a session whose fold still waits gives it its own job, so the fold that gets the place
  folds what the newest turn left, not what was due when it began to wait;
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
        """The fold each waiting session will run, and what it waits for first."""
        """The job of each fold still waiting for a place: the newest turn's."""
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
    ) -> bool:
        """Run `fold` in the background unless the session's fold is running; a fold still waiting runs `fold`
        instead of its own (after `after`, if it has not waited for it yet). With `after`, the fold waits for it
        first, holding the session's place but none of the process's summary calls. True when `fold` will run."""
        if key in self._jobs:
            self._jobs[key] = (fold, after)
            return True
        if key in self._tasks:
            return False
        self._jobs[key] = (fold, after)
        task = asyncio.get_running_loop().create_task(self._run(key), name="summarizing-agent-fold")
        self._tasks[key] = task
        task.add_done_callback(lambda done: self._tasks.pop(key) if self._tasks.get(key) is done else None)
        return True

    def take_outcome(self, key: ScopeKey) -> FoldResult | None:
        """The outcome of the session's last background fold, once: the next turn reports it."""
        return self._outcomes.pop(key, None)

    async def wait(self, key: ScopeKey) -> None:
        """Wait for the session's running fold, if any, to end (however it ends)."""
        task = self._tasks.get(key)
        if task is not None:
            await asyncio.wait([task])

    async def wait_for(self, match: Callable[[ScopeKey], bool]) -> None:
        """Wait for the running folds whose session `match` accepts to end."""
        tasks = [task for key, task in self._tasks.items() if match(key)]
        if tasks:
            await asyncio.wait(tasks)

    async def wait_all(self) -> None:
        """Wait for every running fold to end."""
        if self._tasks:
            await asyncio.wait(list(self._tasks.values()))

    async def shutdown(self) -> None:
        """Cancel every running fold and wait for them to end: their summaries stay as they were."""
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
