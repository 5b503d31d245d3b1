"""The signals that a reply is final: the Agent's own (`signal_build_end`), and a final reply Langflow stores
(`install_reply_listener`, `is_final_reply`), never a partial or empty row."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Hashable
from typing import Any

from langflow_summarizing_agent.engine.records import ScopeKey
from langflow_summarizing_agent.wiring.after_reply.folds import AfterReply
from langflow_summarizing_agent.wiring.after_reply.reply import Reply

logger = logging.getLogger(__name__)


def signal_build_end(
    timing: AfterReply, key: ScopeKey, turn: Hashable, take: Callable[[object], Reply]
) -> Callable[[object], None]:
    """Signal the session's fold (`AfterReply.built`) with the `Reply` that `take(reply message)` takes, once: when
    the returned callable is given the Agent's reply message (its `message_response` returned it), or else when the
    task building the Agent ends (`take(None)` then reads the built results).

    The task's end is the fallback for flows saved with an earlier version of the component (their code is what
    Langflow runs); a run that builds every vertex in one task (an lfx graph stepped in a script) gets its signal
    from the reply."""
    signalled = False

    def signal(message: object = None) -> None:
        nonlocal signalled
        if signalled:
            return
        signalled = True
        try:
            reply = take(message)
        except Exception:  # the fold then plans through the input, as without a reply
            logger.exception("Summarizing Agent: the reply could not be taken for the catch-up after it")
            reply = Reply()
        timing.built(key, turn, reply)

    task = asyncio.current_task()
    if task is not None:
        task.add_done_callback(lambda _: signal())
    return signal


REPLIES_KEY = "summarizing_agent_replies"
"""Where a database session keeps the sessions that got a final reply, from its flush to its commit."""


def install_reply_listener(timing: Callable[[], Any]) -> None:
    """Signal the fold timing `timing()` returns (the process's current one) when Langflow stores a final reply
    (`is_final_reply`), new or updated. Installed once, on SQLAlchemy's `Session` (Langflow's async sessions run on
    it); a later call changes nothing."""
    from sqlalchemy import event
    from sqlalchemy.orm import Session

    if event.contains(Session, "after_flush", _collect_replies):
        return
    event.listen(Session, "after_flush", _collect_replies)
    event.listen(Session, "after_commit", functools.partial(_signal_replies, timing))


def is_final_reply(row: Any) -> bool:
    """A stored message row is a final reply: of another sender than the user, in a session, not partial, with text."""
    properties = getattr(row, "properties", None)
    state = properties.get("state") if isinstance(properties, dict) else getattr(properties, "state", None)
    text = getattr(row, "text", None)
    return row.sender != "User" and bool(row.session_id) and state != "partial" and isinstance(text, str) and bool(text)


def _collect_replies(session: Any, _flush: Any) -> None:
    from langflow.services.database.models.message.model import MessageTable

    for row in (*session.new, *session.dirty):
        if isinstance(row, MessageTable) and is_final_reply(row):
            session.info.setdefault(REPLIES_KEY, set()).add((str(row.flow_id), str(row.session_id)))


def _signal_replies(timing: Callable[[], Any], session: Any) -> None:
    replies = session.info.pop(REPLIES_KEY, ())
    if replies:
        current = timing()
        for flow_id, session_id in replies:
            current.replied(flow_id, session_id)
