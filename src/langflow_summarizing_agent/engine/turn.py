"""A turn in three steps: read, plan, fold.

    read = await read_turn(store, settings)            # one store call, a frozen TurnRead
    plan = plan_turn(read, settings, now=...)          # pure: what goes word for word, what is folded
    result = await fold(read, plan, settings, ...)     # at most Max Folds per Turn calls, one compare-and-swap save

`read_and_plan()` makes the first two steps. `fold_now()` makes all three under the session's fold lock (reading
there, so a fold that finished meanwhile leaves nothing due and makes no call) and plans once more with the summary
that comes out. `fold_if_due()` is the two together: a turn that folds inline, as scripts and `lfx run` do,
and the fold after the reply, which may pass the prompt the agent just sent as `prefix` for the fold to ask on.
Which one runs, and when, is the caller's choice (`wiring.agent_turn`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from functools import cached_property

from langchain_core.messages import BaseMessage

from langflow_summarizing_agent.engine.fold import FoldResult, SaveFailures, Summarizer, fold
from langflow_summarizing_agent.engine.plan import Plan, TurnRead, is_compaction_exchange, plan_compaction, plan_turn
from langflow_summarizing_agent.engine.read import read_turn
from langflow_summarizing_agent.engine.records import StoredMessage, Summary, utcnow
from langflow_summarizing_agent.engine.settings import FoldSettings
from langflow_summarizing_agent.engine.store import SessionStore
from langflow_summarizing_agent.engine.tokens import ESTIMATE, TokenCounter


@dataclass(frozen=True)
class Turn:
    """What one turn read and planned, the fold it made, and what it left for later."""

    read: TurnRead
    plan: Plan
    """The plan the model's history comes from (after the fold, when there was one)."""
    fold: FoldResult | None = None
    """The fold this turn made, if it made one."""
    busy: bool = False
    """A fold was due and the session's fold lock was held elsewhere: this turn used the previous summary."""
    due: str | None = None
    """Why a fold is due that the caller left for after the reply."""
    counter: TokenCounter = ESTIMATE
    """How the turn's tokens were counted (`FoldSettings.counter`)."""

    @property
    def summary(self) -> Summary:
        """The summary the model's history comes from."""
        return self.fold.summary if self.fold is not None else self.read.summary

    @cached_property
    def verbatim_history_tokens(self) -> int:
        """Tokens of the whole conversation sent word for word: the messages read, and the folded or unread messages
        that were not read at the mean size read. Counted once: the status and the memory step both show it."""
        read = [m for m in (*self.read.older, *self.read.messages) if not is_compaction_exchange(m)]
        if not read:
            return 0
        known = sum(self.counter.message(m) for m in read)
        covered = sum(1 for m in read if self.summary.covers(m))
        missing = max(self.summary.folded_count - covered, 0) + self.read.unread
        return known + missing * known // len(read)


async def read_and_plan(
    store: SessionStore,
    settings: FoldSettings,
    *,
    compact: bool = False,
    upcoming: Sequence[StoredMessage] = (),
    now: Callable[[], datetime] = utcnow,
    failures: SaveFailures,
) -> Turn:
    """Read and plan, without a summary call."""
    read = await read_turn(store, settings, upcoming=upcoming)
    read = read.with_summary(failures.applied(store.scope.key, read.summary))
    return Turn(read, (plan_compaction if compact else plan_turn)(read, settings, now=now()), counter=settings.counter)


async def fold_now(
    store: SessionStore,
    summarizer: Summarizer,
    settings: FoldSettings,
    *,
    compact: bool = False,
    upcoming: Sequence[StoredMessage] = (),
    now: Callable[[], datetime] = utcnow,
    failures: SaveFailures,
    prefix: Sequence[BaseMessage] | None = None,
) -> Turn | None:
    """Under the session's fold lock: read, plan, fold what is due, and plan again with the summary that comes out.
    None, with no read and no call, when the lock is held elsewhere."""
    async with store.fold_lock() as held:
        if not held:
            return None
        turn = await read_and_plan(store, settings, compact=compact, upcoming=upcoming, now=now, failures=failures)
        if not turn.plan.fold:
            return turn
        result = await fold(
            turn.read, turn.plan, settings, summarizer, store, now=now, failures=failures, prefix=prefix
        )
        read = turn.read.with_summary(result.summary)
        return Turn(read, plan_turn(read, settings, now=now()), fold=result, counter=settings.counter)


async def fold_if_due(
    store: SessionStore,
    summarizer: Summarizer,
    settings: FoldSettings,
    *,
    compact: bool = False,
    upcoming: Sequence[StoredMessage] = (),
    now: Callable[[], datetime] = utcnow,
    failures: SaveFailures,
    prefix: Sequence[BaseMessage] | None = None,
) -> Turn:
    """Read and plan; when a fold is due, fold now (or, when the session's fold runs elsewhere, say it is busy)."""
    turn = await read_and_plan(store, settings, compact=compact, upcoming=upcoming, now=now, failures=failures)
    if not turn.plan.fold:
        return turn
    folded = await fold_now(
        store, summarizer, settings, compact=compact, upcoming=upcoming, now=now, failures=failures, prefix=prefix
    )
    return folded if folded is not None else replace(turn, busy=True)
