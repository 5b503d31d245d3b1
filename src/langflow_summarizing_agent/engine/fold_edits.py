"""How folds meet a user's edit of the memory: a batch never mixes messages stored before and after the edit, one
stored before it cannot correct it, and a catch-up whose save lost to an edit folds again on top of it
(`fold.catch_up`)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from langflow_summarizing_agent.engine.records import StoredMessage, Summary, as_utc

__all__ = ["batches", "edited_since", "said_before_edit"]


def batches(messages: Sequence[StoredMessage], size: int, edited_at: datetime | None) -> list[Sequence[StoredMessage]]:
    """`messages` in batches of at most `size`, the messages stored before a user's edit never in one batch with those
    stored after it: a batch either cannot correct the edit (`_said_before_edit`) or can."""
    split = len(messages)
    if edited_at is not None:
        split = next((n for n, m in enumerate(messages) if as_utc(m.timestamp) >= as_utc(edited_at)), len(messages))
    parts = (messages[:split], messages[split:])
    return [part[start : start + size] for part in parts for start in range(0, len(part), size)]


def said_before_edit(summary: Summary, batch: Sequence[StoredMessage]) -> bool:
    """True when a user edited the summary after every message of `batch` was stored: they cannot correct the edit."""
    return summary.edited_at is not None and bool(batch) and as_utc(batch[-1].timestamp) < as_utc(summary.edited_at)


def edited_since(read_summary: Summary, stored: Summary) -> bool:
    """True when `stored` is `read_summary` as a user edited, rolled back or seeded it (which keep the cursor), with no
    fold in between."""
    return (
        stored.edited_at is not None
        and stored.edited_at != read_summary.edited_at
        and read_summary.row_id in (None, stored.row_id)
        and _cursor_id(stored) == _cursor_id(read_summary)
    )


def _cursor_id(summary: Summary) -> str | None:
    """The cursor's message: a cursor read from its message row and one read from the summary row may differ in the
    timestamp's precision."""
    return None if summary.cursor is None else summary.cursor.message_id
