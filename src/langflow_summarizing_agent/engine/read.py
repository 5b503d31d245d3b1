"""The read: what a plan needs from the store, as one frozen `TurnRead`.

A turn's read is one statement (`SessionStore.load_turn`) in the common case. It reads more only when the session
needs it: `/compact` exchanges take places in the read, the window reaches back past the cursor (a budget fold, a
reset, or an earlier version of this package took part of it), or a long session switched on lies between the
cursor and the newest messages.
"""

from __future__ import annotations

from collections.abc import Sequence

from langflow_summarizing_agent.engine.plan import TurnRead, is_compaction_exchange
from langflow_summarizing_agent.engine.records import StoredMessage, Summary
from langflow_summarizing_agent.engine.settings import FoldSettings
from langflow_summarizing_agent.engine.store import SessionStore


async def read_turn(store: SessionStore, settings: FoldSettings, *, upcoming: Sequence[StoredMessage] = ()) -> TurnRead:
    """The summary and the messages a plan needs, in as few reads as the session allows. `upcoming` are messages
    not stored yet that the plan counts as the newest (see `TurnRead`)."""
    summary, messages = await store.load_turn(settings.read_limit)
    # Rows this turn reads: more when /compact exchanges take places in the read.
    limit = settings.read_limit
    while len(messages) == limit:
        extra = sum(1 for m in messages if is_compaction_exchange(m))
        if limit - extra >= settings.read_limit:
            break
        limit = settings.read_limit + extra
        messages = await store.messages(limit=limit, after=summary.cursor, newest=True)
    messages, limit = await _with_folded_window(store, settings, summary, messages, limit)
    older, unread = await _from_cursor(store, settings, summary, messages, limit)
    return TurnRead(summary, tuple(messages), tuple(older), unread, tuple(upcoming))


async def _with_folded_window(
    store: SessionStore, settings: FoldSettings, summary: Summary, messages: list[StoredMessage], limit: int
) -> tuple[list[StoredMessage], int]:
    """The newest messages whether folded or not, when the window reaches back past the cursor.

    The first read returns only unfolded messages; the window goes word for word even where an earlier fold took
    part of it.
    """
    visible = sum(1 for m in messages if not is_compaction_exchange(m))
    if summary.cursor is None or visible >= settings.window or len(messages) >= limit:
        return messages, limit
    limit = settings.read_limit
    while True:
        recent = await store.messages(limit=limit, newest=True)
        extra = sum(1 for m in recent if is_compaction_exchange(m))
        if len(recent) < limit or limit - extra >= settings.read_limit:
            return recent, limit
        limit = settings.read_limit + extra


async def _from_cursor(
    store: SessionStore, settings: FoldSettings, summary: Summary, messages: list[StoredMessage], limit: int
) -> tuple[list[StoredMessage], int]:
    """When the read does not reach back to the cursor: the unfolded messages from the cursor forwards (up to the
    catch-up bound) and how many more lie between them and the read."""
    if len(messages) < limit or summary.covers(messages[0]):
        return [], 0
    gap = await store.count(after=summary.cursor, before=messages[0].cursor)
    if not gap:
        return [], 0
    between = await store.messages(limit=gap, after=summary.cursor)
    older: list[StoredMessage] = []
    taken = 0
    for message in between:
        if taken == settings.catch_up_messages:
            break
        older.append(message)
        taken += not is_compaction_exchange(message)
    unread = sum(1 for m in between[len(older) :] if not is_compaction_exchange(m))
    return older, unread
