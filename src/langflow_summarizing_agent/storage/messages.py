"""Reads of Langflow's `message` table: a session's readable messages in keyset order on `(timestamp, id)`.

A cursor (`Cursor`) is a position in that order. Every bound is a plain range term on `timestamp` plus the
tie-break on `id`, so the `(session_id, timestamp, id)` index stops at the cursor instead of filtering every older
row of a long session. Rows come back as `StoredMessage`, carrying the row itself for `wiring.messages`, which
turns a message that is sent verbatim into Langflow's `Message`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone
from functools import cache
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any
from uuid import UUID

from sqlalchemy import Table, and_, func, or_, true, tuple_
from sqlalchemy.sql.elements import ColumnElement
from sqlmodel import col, select

from langflow_summarizing_agent.engine.records import Cursor, Id, StoredMessage, as_utc

if TYPE_CHECKING:
    from langflow.services.database.models.message.model import MessageTable

__all__ = [
    "EARLIEST",
    "ERROR_CATEGORY",
    "USER_SENDER",
    "after",
    "as_message_id",
    "before",
    "message_alias",
    "message_class",
    "message_order",
    "message_table",
    "message_terms",
    "read_messages",
    "to_stored_message",
]

USER_SENDER = "User"
"""`message.sender` of a user turn; every other sender is the assistant (as in `Message.to_lc_message`)."""

ERROR_CATEGORY = "error"

EARLIEST = datetime(1, 1, 1, tzinfo=timezone.utc)
"""Lower keyset bound of a read without a cursor: before every stored message."""


def message_class() -> Any:
    from langflow.services.database.models.message.model import MessageTable

    return MessageTable


def message_table() -> Table:
    table: Table = message_class().__table__
    return table


def message_terms(
    owned: tuple[Any, Any], session_id: Any, context_id: Any, before_id: Any = None, through_id: Any = None
) -> list[ColumnElement[bool]]:
    """The session's readable messages of a (flow, owner), before `before_id` (left out with what was stored after
    it) or through `through_id` (included) when given; values or bind parameters."""
    from langflow.services.database.models.message.model import MessageTable

    filters = [
        col(MessageTable.flow_id) == owned[0],
        col(MessageTable.user_id) == owned[1],
        col(MessageTable.session_id) == session_id,
        col(MessageTable.error).is_(False),
        # A NULL category is an ordinary message, not an error.
        func.coalesce(col(MessageTable.category), "") != ERROR_CATEGORY,
    ]
    if context_id is not None:
        filters.append(col(MessageTable.context_id) == context_id)
    if before_id is not None:
        filters.append(col(MessageTable.id) != before_id)
        # What a concurrent run stored after the current input is not read either: a fold that read it could move
        # the cursor past the input, which this run never sees, and the input would count as folded unsummarized.
        filters.append(_stored_before(before_id))
    if through_id is not None:
        filters.append(_stored_before(through_id, inclusive=True))
    return filters


@cache
def message_alias(name: str) -> Any:
    """A named alias of `message`, built once: aliasing the mapped class costs more than the rest of a turn's
    statement building."""
    from langflow.services.database.models.message.model import MessageTable
    from sqlalchemy.orm import aliased

    return aliased(MessageTable, name=name)


def message_order(*, ascending: bool) -> tuple[Any, Any]:
    from langflow.services.database.models.message.model import MessageTable

    timestamp, message_id = col(MessageTable.timestamp), col(MessageTable.id)
    if ascending:
        return timestamp.asc(), message_id.asc()
    return timestamp.desc(), message_id.desc()


def after(cursor: Cursor) -> ColumnElement[bool]:
    """Messages after `cursor` in keyset order."""
    from langflow.services.database.models.message.model import MessageTable

    timestamp, message_id = _cursor_binds(cursor)
    return and_(
        col(MessageTable.timestamp) >= timestamp,
        or_(col(MessageTable.timestamp) > timestamp, col(MessageTable.id) > message_id),
    )


def before(cursor: Cursor) -> ColumnElement[bool]:
    """Messages before `cursor` in keyset order."""
    from langflow.services.database.models.message.model import MessageTable

    timestamp, message_id = _cursor_binds(cursor)
    return and_(
        col(MessageTable.timestamp) <= timestamp,
        or_(col(MessageTable.timestamp) < timestamp, col(MessageTable.id) < message_id),
    )


async def read_messages(filters: Sequence[ColumnElement[bool]], *, limit: int, newest: bool) -> list[StoredMessage]:
    """Up to `limit` messages matching `filters`, ascending: the newest of them when `newest`, else the oldest."""
    from langflow.services.deps import session_scope

    stmt = select(message_class()).where(*filters).order_by(*message_order(ascending=not newest)).limit(limit)
    async with session_scope() as session:
        rows: Sequence[MessageTable] = (await session.exec(stmt)).all()
        found = [to_stored_message(row) for row in rows]
    return list(reversed(found)) if newest else found


def to_stored_message(row: MessageTable) -> StoredMessage:
    return StoredMessage(
        id=str(row.id),
        timestamp=as_utc(row.timestamp),
        role="user" if row.sender == USER_SENDER else "assistant",
        text=row.text or "",
        files=tuple(PurePosixPath(str(path)).name for path in row.files or ()),
        # The row; `wiring.messages.as_chat_message()` turns it into a Message only if it is sent verbatim.
        payload=row,
    )


def as_message_id(value: Id) -> UUID | None:
    """`value` as a message id; None when it cannot be one (so there is no stored message to end a read at)."""
    if isinstance(value, UUID):
        return value
    try:
        return UUID(str(value))
    except ValueError:
        return None


def _stored_before(message_id: Any, *, inclusive: bool = False) -> ColumnElement[bool]:
    """Rows before `message_id` (and it, if `inclusive`) in keyset order; every row when that message is not stored."""
    from langflow.services.database.models.message.model import MessageTable

    current = message_alias("turn_input")
    position = select(current.timestamp).where(col(current.id) == message_id).scalar_subquery()
    row = tuple_(col(MessageTable.timestamp), col(MessageTable.id))
    # NULL (the message is not stored) compares as unknown, which coalesces to every row.
    bound = row <= tuple_(position, message_id) if inclusive else row < tuple_(position, message_id)
    return func.coalesce(bound, true())


def _cursor_binds(cursor: Cursor) -> tuple[datetime, UUID]:
    # message.timestamp is typed UTCDateTime, which only binds aware datetimes.
    return as_utc(cursor.timestamp), UUID(cursor.message_id)
