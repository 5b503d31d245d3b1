"""The read: what a plan needs from the store, as one frozen `TurnRead`.

A turn's read is one statement (`SessionStore.load_turn`) in the common case. It reads more only when the session
needs it: the unfolded messages go on past the first read (folds failing or waiting, `/compact` exchanges taking
places in it), the window reaches back past the cursor (a budget fold, a reset, or an earlier version of this package
took part of it), or a long session switched on lies between the cursor and the newest messages.
"""

from __future__ import annotations

from collections.abc import Sequence

from langflow_summarizing_agent.engine.plan import TurnRead, budget_tokens, is_compaction_exchange
from langflow_summarizing_agent.engine.records import StoredMessage, Summary
from langflow_summarizing_agent.engine.settings import FoldSettings
from langflow_summarizing_agent.engine.store import SessionStore


async def read_turn(store: SessionStore, settings: FoldSettings, *, upcoming: Sequence[StoredMessage] = ()) -> TurnRead:
    """The summary and the messages a plan needs, in as few reads as the session allows. `upcoming` are messages
    not stored yet that the plan counts as the newest (see `TurnRead`)."""
    summary, messages = await store.load_turn(settings.read_limit)
    messages, reached = await _back_to_cursor(store, settings, summary, messages)
    if reached:
        messages = await _with_folded_window(store, settings, summary, messages)
        return TurnRead(summary, tuple(messages), upcoming=tuple(upcoming))
    older, unread = await _from_cursor(store, settings, summary, messages)
    return TurnRead(summary, tuple(messages), tuple(older), unread, tuple(upcoming))


async def _back_to_cursor(
    store: SessionStore, settings: FoldSettings, summary: Summary, messages: list[StoredMessage]
) -> tuple[list[StoredMessage], bool]:
    """The unfolded messages a plan may send, and whether they reach back to the cursor.

    Every unfolded message that fits the budget goes (a message leaves the model's view only by being folded), so
    the read goes on back, in keyset pages each twice the last, until it reaches the cursor, or it holds
    `read_limit` messages (`/compact` exchanges left out) and, with a budget, more tokens than the budget holds: no
    older message could be sent then. Without a budget, `read_limit` bounds it.
    """
    page = settings.read_limit
    reached = len(messages) < page
    while not reached and not _enough(messages, settings):
        page *= 2
        earlier = await store.messages(limit=page, after=summary.cursor, before=messages[0].cursor, newest=True)
        messages = [*earlier, *messages]
        reached = len(earlier) < page
    return messages, reached


def _enough(messages: Sequence[StoredMessage], settings: FoldSettings) -> bool:
    visible = [m for m in messages if not is_compaction_exchange(m)]
    if len(visible) < settings.read_limit:
        return False
    budget = settings.history_token_budget
    return budget <= 0 or sum(budget_tokens(m, settings) for m in visible) > budget


async def _with_folded_window(
    store: SessionStore, settings: FoldSettings, summary: Summary, messages: list[StoredMessage]
) -> list[StoredMessage]:
    """The newest messages whether folded or not, when the window reaches back past the cursor.

    The unfolded messages read reach back to the cursor; the window goes word for word even where an earlier fold
    took part of it.
    """
    visible = sum(1 for m in messages if not is_compaction_exchange(m))
    if summary.cursor is None or visible >= settings.window:
        return messages
    limit = settings.read_limit
    while True:
        recent = await store.messages(limit=limit, newest=True)
        extra = sum(1 for m in recent if is_compaction_exchange(m))
        if len(recent) < limit or limit - extra >= settings.read_limit:
            return recent
        limit = settings.read_limit + extra


async def _from_cursor(
    store: SessionStore, settings: FoldSettings, summary: Summary, messages: list[StoredMessage]
) -> tuple[list[StoredMessage], int]:
    """When the read does not reach back to the cursor: the unfolded messages from the cursor forwards (up to the
    catch-up bound) and how many more lie between them and the read."""
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
