"""A turn in three steps: read, plan, catch up.

    read = await read_turn(store, settings)            # one store call, a frozen TurnRead
    plan = plan_turn(read, settings, now=...)          # pure: what goes word for word, what is folded
    result = await catch_up(read, plan, ...)           # at most Max Folds per Turn folds, one compare-and-swap save

The entry points, each returning a `Turn` that says what happened:
- `read_and_plan()`: the first two steps; a due catch-up is left for later (`Turn.due`);
- `plan_beside_running_fold()`: the same while the session's catch-up runs in this process (`Turn.busy`);
- `fold_if_due()`: all three, the catch-up under the session's fold lock (`Turn.busy` when it is held elsewhere);
- `compact()`: `/compact`, which folds what may be folded now.

Which one runs, and when, is the caller's choice (`wiring.timing`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from functools import cached_property

from langflow_summarizing_agent.engine.fold import CatchUp, Prefix, SaveFailures, Summarizer, catch_up
from langflow_summarizing_agent.engine.plan import Plan, TurnRead, is_compaction_exchange, plan_compaction, plan_turn
from langflow_summarizing_agent.engine.read import read_turn
from langflow_summarizing_agent.engine.records import StoredMessage, Summary, utcnow
from langflow_summarizing_agent.engine.settings import FoldSettings
from langflow_summarizing_agent.engine.store import SessionStore
from langflow_summarizing_agent.engine.tokens import ESTIMATE, TokenCounter


@dataclass(frozen=True)
class Turn:
    """What one turn read and planned, its catch-up, and what it left for later."""

    read: TurnRead
    plan: Plan
    """The plan the model's history comes from (after the catch-up, when there was one)."""
    fold: CatchUp | None = None
    """This turn's catch-up, if it made one."""
    busy: bool = False
    """A fold was due and the session's fold lock was held elsewhere: this turn used the previous summary."""
    due: str | None = None
    """Why a fold is due that this turn left for later (after the reply)."""
    counter: TokenCounter = ESTIMATE
    """How the turn's tokens were counted (`FoldSettings.counter`)."""
    compaction: bool = False
    """`/compact`: no model call, so no history is sent; the plan is what the next turn sends."""
    settled: tuple[str, ...] = ()
    """The settings the turn ran at other than the node's, in words (`FoldSettings.settled`)."""

    @property
    def summary(self) -> Summary:
        """The summary the model's history comes from."""
        return self.fold.summary if self.fold is not None else self.read.summary

    @cached_property
    def verbatim_history_tokens(self) -> int:
        """Tokens of the whole conversation sent word for word, folded messages included: the tokens the folds
        counted, the unfolded messages read, and the unfolded messages not read at the mean size read. A summary
        stored before folds counted tokens has its folded messages estimated at that mean too. Counted once: the
        status and the memory step both show it."""
        read = [m for m in (*self.read.older, *self.read.messages) if not is_compaction_exchange(m)]
        unfolded = [m for m in read if not self.summary.covers(m)]
        tokens = {m.id: self.counter.message(m) for m in read}
        mean = sum(tokens.values()) // len(read) if read else 0
        folded = self.summary.folded_tokens
        if folded is None:
            folded = sum(tokens[m.id] for m in read if self.summary.covers(m))
            folded += max(self.summary.folded_count - (len(read) - len(unfolded)), 0) * mean
        return folded + sum(tokens[m.id] for m in unfolded) + self.read.unread * mean


Planner = Callable[[TurnRead, FoldSettings, datetime], Plan]


def _plan(read: TurnRead, settings: FoldSettings, now: datetime) -> Plan:
    return plan_turn(read, settings, now=now)


def _plan_compaction(read: TurnRead, settings: FoldSettings, now: datetime) -> Plan:
    return plan_compaction(read, settings, now=now)


async def _read_and_plan(
    store: SessionStore,
    settings: FoldSettings,
    planner: Planner,
    *,
    upcoming: Sequence[StoredMessage],
    now: Callable[[], datetime],
    failures: SaveFailures,
) -> Turn:
    read = await read_turn(store, settings, upcoming=upcoming)
    read = read.with_summary(failures.applied(store.scope.key, read.summary))
    return Turn(read, planner(read, settings, now()), counter=settings.counter, settled=settings.settled)


async def read_and_plan(
    store: SessionStore,
    settings: FoldSettings,
    *,
    failures: SaveFailures,
    now: Callable[[], datetime] = utcnow,
) -> Turn:
    """Read and plan, without a summary call; a due catch-up is left for later (`Turn.due`)."""
    turn = await _read_and_plan(store, settings, _plan, upcoming=(), now=now, failures=failures)
    return replace(turn, due=turn.plan.reason) if turn.plan.fold else turn


async def plan_beside_running_fold(
    store: SessionStore,
    settings: FoldSettings,
    *,
    failures: SaveFailures,
    now: Callable[[], datetime] = utcnow,
) -> Turn:
    """Read and plan while the session's catch-up runs: it takes what is due, and this turn uses the summary there
    is (`Turn.busy`)."""
    turn = await _read_and_plan(store, settings, _plan, upcoming=(), now=now, failures=failures)
    return replace(turn, busy=True)


async def _fold_under_lock(
    store: SessionStore,
    summarizer: Summarizer,
    settings: FoldSettings,
    planner: Planner,
    *,
    upcoming: Sequence[StoredMessage],
    now: Callable[[], datetime],
    failures: SaveFailures,
    prefix: Prefix | None,
) -> Turn | None:
    """Under the session's fold lock: read, plan, catch up on what is due, and plan again with the summary that comes
    out (reading there, so a catch-up that finished meanwhile leaves nothing due). None when the lock is held
    elsewhere."""
    async with store.fold_lock() as held:
        if not held:
            return None
        turn = await _read_and_plan(store, settings, planner, upcoming=upcoming, now=now, failures=failures)
        if not turn.plan.fold:
            return turn
        result = await catch_up(
            turn.read, turn.plan, settings, summarizer, store, now=now, failures=failures, prefix=prefix
        )
        read = turn.read.with_summary(result.summary)
        plan = plan_turn(read, settings, now=now())
        return Turn(read, plan, fold=result, counter=settings.counter, settled=settings.settled)


async def fold_if_due(
    store: SessionStore,
    summarizer: Summarizer,
    settings: FoldSettings,
    *,
    failures: SaveFailures,
    upcoming: Sequence[StoredMessage] = (),
    prefix: Prefix | None = None,
    now: Callable[[], datetime] = utcnow,
) -> Turn:
    """Read and plan; when a fold is due, catch up now, or, when the session's catch-up runs elsewhere, say it is busy.

    `upcoming` are messages not stored yet that count as the newest (the reply, for the catch-up after it); `prefix` is
    the prompt the agent just sent and its reply, with the summarizer that asks on it (`engine.fold.catch_up`)."""
    turn = await _read_and_plan(store, settings, _plan, upcoming=upcoming, now=now, failures=failures)
    if not turn.plan.fold:
        return turn
    folded = await _fold_under_lock(
        store, summarizer, settings, _plan, upcoming=upcoming, now=now, failures=failures, prefix=prefix
    )
    return folded if folded is not None else replace(turn, busy=True)


async def compact(
    store: SessionStore,
    summarizer: Summarizer,
    settings: FoldSettings,
    *,
    failures: SaveFailures,
    now: Callable[[], datetime] = utcnow,
) -> Turn:
    """`/compact`: fold what may be folded now, whatever the triggers say; busy when the fold lock is held
    elsewhere."""
    folded = await _fold_under_lock(
        store, summarizer, settings, _plan_compaction, upcoming=(), now=now, failures=failures, prefix=None
    )
    if folded is not None:
        return replace(folded, compaction=True)
    turn = await _read_and_plan(store, settings, _plan_compaction, upcoming=(), now=now, failures=failures)
    return replace(turn, busy=True, compaction=True)
