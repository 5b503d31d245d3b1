"""What the catch-up after the reply knows and does: the signal a turn waits for (`ReplySignal`), the `Reply` frozen
when it comes, the turn's work handed to the timing (`TurnWork`), and the fold job itself (`fold_after_reply`)."""

from __future__ import annotations

import enum
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, replace

from langflow_summarizing_agent.engine import report
from langflow_summarizing_agent.engine.fold import CatchUp, Prefix, SaveFailures, Summarizer
from langflow_summarizing_agent.engine.records import StoredMessage
from langflow_summarizing_agent.engine.settings import FoldSettings
from langflow_summarizing_agent.engine.store import SessionStore
from langflow_summarizing_agent.engine.turn import fold_if_due

logger = logging.getLogger(__name__)

FOLD_WAIT_SECONDS = 120.0
"""Longest wait for a session's folds running in any worker: by a read or reset through the API (past it, the answer's
`fold_pending` says so), or by a fold following them."""


class ReplySignal(enum.Enum):
    """What tells a turn's fold that the final reply is there."""

    BUILD_END = "the end of the agent's build"
    STORED_REPLY = "a final reply stored in the session"


@dataclass(frozen=True)
class Reply:
    """What the catch-up after the reply knows of it, frozen when the signal comes: the reply as the newest message not
    stored yet, and the prompt the agent sent with it, with the summarizer that asks on it."""

    upcoming: tuple[StoredMessage, ...] = ()
    prefix: Prefix | None = None


@dataclass(frozen=True)
class FoldsElsewhere:
    """What a fold job answers when the session's fold lock is held in another worker: `ended` waits for those folds
    (False: one still ran after `FOLD_WAIT_SECONDS`)."""

    ended: Callable[[], Awaitable[bool]]


FoldOutcome = CatchUp | FoldsElsewhere | None
FoldJob = Callable[[], Awaitable[FoldOutcome]]
"""A fold the timing runs, bound to its turn's reply."""
ReplyFold = Callable[[Reply], Awaitable[FoldOutcome]]
"""The fold a turn leaves for after its reply, given that reply."""
ReplyWait = Callable[[], Awaitable[None]]


@dataclass(frozen=True)
class TurnWork:
    """What the turn runner hands the timing: the turn's store, model and settings, the fold it would leave for after
    its reply, and the signal that fold waits for (`turn` names this turn for `AfterReply.built`)."""

    store: SessionStore
    summarizer: Summarizer
    settings: FoldSettings
    failures: SaveFailures
    fold_after_reply: ReplyFold
    signal: ReplySignal = ReplySignal.STORED_REPLY
    turn: Hashable = None


def fold_after_reply(
    name: str, store: SessionStore, summarizer: Summarizer, settings: FoldSettings, failures: SaveFailures
) -> ReplyFold:
    """The fold a turn leaves for after its reply: it plans the next turn, with the reply when the signal brought it,
    and folds what is due before that turn needs it; when the session's fold runs in another worker, it answers how to
    wait for it (`FoldsElsewhere`)."""

    async def fold(reply: Reply) -> FoldOutcome:
        started = time.monotonic()
        turn = await fold_if_due(
            store, summarizer, settings, failures=failures, upcoming=reply.upcoming, prefix=reply.prefix
        )
        scope = store.scope
        if turn.busy and scope.flow_id is not None:
            from langflow_summarizing_agent.storage.store import session_folds_ended

            return FoldsElsewhere(
                functools.partial(
                    session_folds_ended,
                    flow_id=scope.flow_id,
                    session_id=scope.session_id,
                    timeout_seconds=FOLD_WAIT_SECONDS,
                )
            )
        if turn.fold is None:
            for problem in report.problems(turn):
                logger.warning("%s: catch-up after the reply: %s", name, problem)
            return None
        return replace(turn.fold, seconds=time.monotonic() - started)

    return fold
