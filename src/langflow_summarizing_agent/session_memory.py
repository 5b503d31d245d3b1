"""Session memory on Langflow's database: the state row and the message reads the fold needs.

Every function resolves the flow and owner with `langflow.memory._message_scope`, the check behind Langflow's
own `aget_messages()`: inside a graph run the executing graph's flow and owner win, and a caller asking for
another flow or owner gets nothing (None, False, [] or 0) rather than someone else's rows. Outside a graph
run both ids must be given and valid.

Without a Langflow database (standalone `lfx`, or langflow installed but its services not initialised) the
functions report "unsupported" the same way, without raising, so the component can fall back to last-N.
Database errors do raise.

Each call costs one statement (plus one migration check per process and database, see `migrate`).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from datetime import datetime, timezone
from functools import cache
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any
from uuid import UUID, uuid4

from lfx.utils.langflow_utils import has_langflow_db_backend
from sqlalchemy import Integer, and_, bindparam, delete, func, or_, true, tuple_, update
from sqlalchemy import inspect as sa_inspect
from sqlalchemy import select as sa_select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.sql.elements import ColumnElement
from sqlmodel import col, select

from langflow_summarizing_agent.migrate import ensure_migrated
from langflow_summarizing_agent.models import NO_CONTEXT, SCOPE_COLUMNS, TABLE_NAME, SessionMemoryStateTable
from langflow_summarizing_agent.state import Cursor, MemoryState, StoredMessage

if TYPE_CHECKING:
    from langflow.services.database.models.message.model import MessageTable
    from lfx.schema.message import Message

__all__ = [
    "LangflowSessionStore",
    "acount_messages_after",
    "adelete_session_memory_states",
    "aget_messages_after",
    "aget_recent_messages",
    "aget_session_memory_state",
    "as_chat_message",
    "asave_session_memory_state",
    "session_memory_supported",
]

USER_SENDER = "User"
"""`message.sender` of a user turn; every other sender is the assistant (as in `Message.to_lc_message`)."""

ERROR_CATEGORY = "error"


class UnsupportedDatabaseError(RuntimeError):
    """Langflow runs on a database other than SQLite or PostgreSQL; the component falls back to last-N."""


# Writes go through the Core table: ORM-enabled DML would add ORM bookkeeping to a single statement.
_TABLE = SessionMemoryStateTable.metadata.tables[TABLE_NAME]
_Scope = tuple[UUID, UUID]
Id = str | UUID


def session_memory_supported() -> bool:
    """True when Langflow's database is available; False under standalone lfx or before services start."""
    return has_langflow_db_backend()


async def aget_session_memory_state(
    *, flow_id: Id | None, user_id: Id | None, session_id: str, context_id: str | None = None
) -> MemoryState | None:
    """The stored state of the scope, or None when there is none, the scope does not resolve, or unsupported."""
    scope = await _resolved_scope(flow_id, user_id, session_id)
    if scope is None:
        return None
    from langflow.services.deps import session_scope

    async with session_scope() as session:
        row = (
            await session.exec(select(SessionMemoryStateTable).where(*_state_filters(scope, session_id, context_id)))
        ).first()
        return None if row is None else _to_memory_state(row)


async def asave_session_memory_state(
    state: MemoryState,
    *,
    flow_id: Id | None,
    user_id: Id | None,
    session_id: str,
    context_id: str | None = None,
    expected_version: int,
) -> bool:
    """Store `state` if the stored version is still `expected_version`; never overwrites another writer.

    `expected_version` 0 inserts the row (version 1); any other value is a compare-and-swap that bumps the
    version by one. False when another writer saved first (or the scope does not resolve, or unsupported).
    On success `state.version` and `state.updated_at` are set to what was stored.
    """
    if expected_version < 0:
        msg = f"expected_version must be 0 (insert) or a stored version, got {expected_version}"
        raise ValueError(msg)
    scope = await _resolved_scope(flow_id, user_id, session_id)
    if scope is None:
        return False
    from langflow.services.deps import session_scope

    now = datetime.now(timezone.utc)
    values = _state_values(state, updated_at=now)
    async with session_scope() as session:
        if expected_version == 0:
            dialect = (await session.connection()).dialect.name
            insert = _insert_if_absent(dialect).values(
                id=uuid4(),
                flow_id=scope[0],
                user_id=scope[1],
                session_id=session_id,
                context_id=context_id or NO_CONTEXT,
                version=1,
                created_at=now,
                **values,
            )
            # A concurrent insert of the same scope makes this a no-op, not an error. RETURNING tells the two
            # apart: under SQLAlchemy's psycopg dialect an INSERT's rowcount is -1.
            insert = insert.on_conflict_do_nothing(index_elements=list(SCOPE_COLUMNS)).returning(_TABLE.c.id)
            saved = (await session.exec(insert)).first() is not None
        else:
            update_stmt = (
                update(_TABLE)
                .where(*_state_filters(scope, session_id, context_id), _TABLE.c.version == expected_version)
                .values(version=_TABLE.c.version + 1, **values)
            )
            saved = (await session.exec(update_stmt)).rowcount == 1
    if saved:
        state.version = expected_version + 1
        state.updated_at = now
    return saved


async def adelete_session_memory_states(
    *, flow_id: Id | None, user_id: Id | None = None, session_ids: Collection[str] | None = None
) -> int:
    """Delete the state rows of `session_ids` in a flow, or of the whole flow when `session_ids` is None.

    Outside a graph run, `user_id=None` means every owner of the flow: the purge that follows Langflow deleting
    a flow's or a session's messages. Inside a graph run the graph's owner applies. Returns the rows deleted.
    """
    if session_ids is not None and not session_ids:
        return 0
    if not session_memory_supported():
        return 0
    from langflow.memory import _message_scope

    resolved_flow, resolved_owner = _message_scope(flow_id, user_id)
    # An owner that was given but does not resolve must not widen the purge to every owner.
    if resolved_flow is None or (resolved_owner is None and user_id is not None):
        return 0
    await ensure_migrated()
    from langflow.services.deps import session_scope

    stmt = delete(_TABLE).where(_TABLE.c.flow_id == resolved_flow)
    if resolved_owner is not None:
        stmt = stmt.where(_TABLE.c.user_id == resolved_owner)
    if session_ids is not None:
        stmt = stmt.where(_TABLE.c.session_id.in_(list(session_ids)))
    async with session_scope() as session:
        return (await session.exec(stmt)).rowcount


async def aget_messages_after(
    cursor: Cursor | None,
    *,
    flow_id: Id | None,
    user_id: Id | None,
    session_id: str,
    context_id: str | None = None,
    limit: int,
    exclude_ids: Iterable[Id] = (),
) -> list[StoredMessage]:
    """Up to `limit` messages after `cursor` (from the start when None), oldest first.

    Ordered by `(timestamp, id)` like Memory Base ingestion, skipping error rows (`error` or category
    `"error"`). A `context_id` narrows the read to that context; without one, every context of the session
    is read, as in `aget_messages()`.
    """
    scope = await _resolved_scope(flow_id, user_id, session_id)
    if scope is None or limit <= 0:
        return []
    from langflow.services.database.models.message.model import MessageTable

    filters = _message_filters(scope, session_id, context_id, exclude_ids)
    if cursor is not None:
        filters.append(_after(cursor))
    stmt = select(MessageTable).where(*filters).order_by(*_message_order(ascending=True)).limit(limit)
    return await _read_messages(stmt)


async def aget_recent_messages(
    *,
    flow_id: Id | None,
    user_id: Id | None,
    session_id: str,
    context_id: str | None = None,
    limit: int,
    after: Cursor | None = None,
    exclude_ids: Iterable[Id] = (),
) -> list[StoredMessage]:
    """The newest `limit` messages of the session (after `after` if given), oldest first, without `exclude_ids`
    and error rows."""
    scope = await _resolved_scope(flow_id, user_id, session_id)
    if scope is None or limit <= 0:
        return []
    stmt = _recent_statement(scope, session_id, context_id, exclude_ids, limit, after)
    return list(reversed(await _read_messages(stmt)))


def _recent_statement(
    scope: _Scope, session_id: str, context_id: str | None, exclude_ids: Iterable[Id], limit: int, after: Cursor | None
) -> Any:
    """The newest `limit` messages (after `after`), newest first."""
    from langflow.services.database.models.message.model import MessageTable

    filters = _message_filters(scope, session_id, context_id, exclude_ids)
    if after is not None:
        filters.append(_after(after))
    return select(MessageTable).where(*filters).order_by(*_message_order(ascending=False)).limit(limit)


async def acount_messages_after(
    cursor: Cursor | None,
    before: Cursor,
    *,
    flow_id: Id | None,
    user_id: Id | None,
    session_id: str,
    context_id: str | None = None,
    exclude_ids: Iterable[Id] = (),
) -> int:
    """How many messages lie strictly between `cursor` (the start when None) and `before`."""
    scope = await _resolved_scope(flow_id, user_id, session_id)
    if scope is None:
        return 0
    from langflow.services.database.models.message.model import MessageTable
    from langflow.services.deps import session_scope

    filters = _message_filters(scope, session_id, context_id, exclude_ids)
    if cursor is not None:
        filters.append(_after(cursor))
    filters.append(_before(before))
    async with session_scope() as session:
        return int((await session.exec(select(func.count()).select_from(MessageTable).where(*filters))).one())


class LangflowSessionStore:
    """`SessionStore` for one scope on Langflow's database.

    `exclude_ids` holds the current turn's input: it is already stored when history is read, and the Agent
    receives it as the input, so no read returns it, nor what concurrent runs stored after it.

    `load_state` treats a row as stale, and returns it emptied, when its session lost the messages it covers:
    the cursor's message is gone (session deleted or renamed), or no message is left at all. The emptied
    state keeps the stored version, so the next save replaces the stale row by compare-and-swap.
    """

    def __init__(
        self,
        *,
        flow_id: Id | None,
        user_id: Id | None,
        session_id: str,
        context_id: str | None = None,
        exclude_ids: Iterable[Id] = (),
    ) -> None:
        self.flow_id = flow_id
        self.user_id = user_id
        self.session_id = session_id
        self.context_id = context_id
        self.exclude_ids = tuple(exclude_ids)

    async def load_state(self) -> MemoryState:
        scope = await _resolved_scope(self.flow_id, self.user_id, self.session_id)
        if scope is None:
            return MemoryState()
        from langflow.services.deps import session_scope

        async with session_scope() as session:
            return await self._read_state(session, scope)

    async def load_turn(self, limit: int) -> tuple[MemoryState, list[StoredMessage]]:
        scope = await _resolved_scope(self.flow_id, self.user_id, self.session_id)
        if scope is None:
            return MemoryState(), []
        from langflow.services.deps import session_scope

        excluded = _stored_ids(self.exclude_ids)
        params = {
            "flow_id": scope[0],
            "user_id": scope[1],
            "session_id": self.session_id,
            "state_context_id": self.context_id or NO_CONTEXT,
            "limit": limit,
            **{f"excluded_{index}": uid for index, uid in enumerate(excluded)},
        }
        if self.context_id:
            params["context_id"] = self.context_id
        # One statement on a turn without a fold, as the stock Agent's read: the unfolded messages, each with the
        # state row beside it. Only a turn with no unfolded message needs a second statement for the state.
        stmt = _turn_statement(with_context=bool(self.context_id), excluded=len(excluded))
        async with session_scope() as session:
            found = (await session.exec(stmt, params=params)).all()
            if not found:
                return await self._read_state(session, scope), []
        first = found[0]
        if first.state_id is None:
            state = MemoryState()
        elif first.state_covered_until_message_id is not None and first.cursor_id is None:
            # The cursor's message is gone: the state is stale, and the read above started at the session's start.
            state = MemoryState(version=first.state_version)
        else:
            state = _to_memory_state(first, _STATE_PREFIX)
            if first.cursor_id is not None:
                # The cursor as the read used it: its message's timestamp, so the fold's later reads agree.
                state.cursor = Cursor(_aware_utc(first.cursor_timestamp), str(first.cursor_id))
        return state, [_to_stored_message(row[0]) for row in reversed(found)]

    async def _read_state(self, session: Any, scope: _Scope) -> MemoryState:
        from langflow.services.database.models.message.model import MessageTable

        session_messages = select(MessageTable.id).where(
            col(MessageTable.flow_id) == scope[0],
            col(MessageTable.user_id) == scope[1],
            col(MessageTable.session_id) == self.session_id,
        )
        # One statement: the row and whether what it covers still exists.
        covered_exists = or_(
            and_(
                _TABLE.c.covered_until_message_id.is_(None),
                session_messages.exists(),
            ),
            session_messages.where(col(MessageTable.id) == _TABLE.c.covered_until_message_id).exists(),
        )
        stmt = select(SessionMemoryStateTable, covered_exists.label("covered_exists")).where(
            *_state_filters(scope, self.session_id, self.context_id)
        )
        found = (await session.exec(stmt)).first()
        if found is None:
            return MemoryState()
        row, is_current = found
        if not is_current:
            return MemoryState(version=row.version)
        return _to_memory_state(row)

    async def save_state(self, state: MemoryState, expected_version: int) -> bool:
        return await asave_session_memory_state(
            state,
            flow_id=self.flow_id,
            user_id=self.user_id,
            session_id=self.session_id,
            context_id=self.context_id,
            expected_version=expected_version,
        )

    async def recent(self, limit: int, after: Cursor | None = None) -> list[StoredMessage]:
        return await aget_recent_messages(
            flow_id=self.flow_id,
            user_id=self.user_id,
            session_id=self.session_id,
            context_id=self.context_id,
            limit=limit,
            after=after,
            exclude_ids=self.exclude_ids,
        )

    async def after(self, cursor: Cursor | None, limit: int) -> list[StoredMessage]:
        return await aget_messages_after(
            cursor,
            flow_id=self.flow_id,
            user_id=self.user_id,
            session_id=self.session_id,
            context_id=self.context_id,
            limit=limit,
            exclude_ids=self.exclude_ids,
        )

    async def count_after(self, cursor: Cursor | None, before: Cursor) -> int:
        return await acount_messages_after(
            cursor,
            before,
            flow_id=self.flow_id,
            user_id=self.user_id,
            session_id=self.session_id,
            context_id=self.context_id,
            exclude_ids=self.exclude_ids,
        )


async def _resolved_scope(flow_id: Id | None, user_id: Id | None, session_id: str) -> _Scope | None:
    """The trusted (flow, owner) of a call, or None to answer "nothing" (unsupported, unresolved, no session)."""
    if not session_id or not session_memory_supported():
        return None
    from langflow.memory import _message_scope

    resolved_flow, resolved_owner = _message_scope(flow_id, user_id)
    if resolved_flow is None or resolved_owner is None:
        return None
    await ensure_migrated()
    return resolved_flow, resolved_owner


_EARLIEST = datetime(1, 1, 1, tzinfo=timezone.utc)
"""Lower keyset bound of a read without a cursor: before every stored message."""

_STATE_PREFIX = "state_"
_TURN_STATE_COLUMNS = tuple(
    _TABLE.c[name].label(_STATE_PREFIX + name)
    for name in (
        "id",
        "summary",
        "pinned",
        "covered_until_message_id",
        "covered_until_timestamp",
        "absorbed_count",
        "summary_model",
        "version",
        "failed_folds",
        "retry_after",
        "updated_at",
    )
)


@cache
def _turn_statement(*, with_context: bool, excluded: int) -> Any:
    """`load_turn`'s statement, built once per shape; the scope, input ids and limit are bound when it runs.

    The newest `:limit` messages after the state's cursor (all when there is none), newest first. Each row
    carries the state's columns (NULL without a state row) and the cursor's message id (NULL when the cursor's
    message is gone). The cursor is read from its message row, so the keyset bound compares `message.timestamp`
    with itself, and a plain range term lets the index stop at the cursor.

    Built once because building it and computing its cache key cost more than running it.
    """
    from langflow.services.database.models.message.model import MessageTable

    scope: tuple[Any, Any] = (bindparam("flow_id"), bindparam("user_id"))
    session_id: Any = bindparam("session_id")
    cursor_message = _message_alias("cursor_message")
    state_here = _state_filters(scope, session_id, bindparam("state_context_id"))

    # The cursor's message, looked up once and referenced by the bounds below.
    cursor = (
        select(col(cursor_message.timestamp).label("timestamp"), col(cursor_message.id).label("id"))
        .select_from(_TABLE)
        .join(
            cursor_message,
            and_(
                col(cursor_message.id) == _TABLE.c.covered_until_message_id,
                col(cursor_message.flow_id) == scope[0],
                col(cursor_message.user_id) == scope[1],
                col(cursor_message.session_id) == session_id,
            ),
        )
        .where(*state_here)
        .cte("turn_cursor")
    )
    cursor_timestamp = select(cursor.c.timestamp).scalar_subquery()
    cursor_id = select(cursor.c.id).scalar_subquery()
    lower = func.coalesce(cursor_timestamp, _EARLIEST)
    context: Any = bindparam("context_id") if with_context else None
    id_type = sa_inspect(MessageTable).columns["id"].type
    input_ids = [bindparam(f"excluded_{i}", type_=id_type) for i in range(excluded)]
    filters = _message_terms(scope, session_id, context, input_ids)
    filters += [
        col(MessageTable.timestamp) >= lower,
        or_(col(MessageTable.timestamp) > lower, col(MessageTable.id) > cursor_id),
    ]
    return (
        sa_select(
            MessageTable,
            *_TURN_STATE_COLUMNS,
            cursor_timestamp.label("cursor_timestamp"),
            cursor_id.label("cursor_id"),
        )
        .outerjoin(_TABLE, and_(*state_here))
        .where(*filters)
        .order_by(*_message_order(ascending=False))
        .limit(bindparam("limit", type_=Integer))
    )


def _state_filters(scope: tuple[Any, Any], session_id: Any, context_id: Any) -> list[ColumnElement[bool]]:
    """The state row of a scope; values or bind parameters (a bind parameter is never tested for truth)."""
    if context_id is None or isinstance(context_id, str):
        context_id = context_id or NO_CONTEXT
    return [
        _TABLE.c.flow_id == scope[0],
        _TABLE.c.user_id == scope[1],
        _TABLE.c.session_id == session_id,
        _TABLE.c.context_id == context_id,
    ]


def _insert_if_absent(dialect: str) -> Any:
    if dialect == "postgresql":
        return postgresql.insert(_TABLE)
    if dialect == "sqlite":
        return sqlite.insert(_TABLE)
    msg = f"Session memory supports SQLite and PostgreSQL databases, not {dialect!r}"
    raise UnsupportedDatabaseError(msg)


def _state_values(state: MemoryState, *, updated_at: datetime) -> dict[str, Any]:
    cursor = state.cursor
    return {
        "summary": state.summary,
        "pinned": dict(state.pinned),
        "covered_until_message_id": None if cursor is None else UUID(cursor.message_id),
        "covered_until_timestamp": None if cursor is None else _naive_utc(cursor.timestamp),
        "absorbed_count": state.absorbed_count,
        "summary_model": state.summary_model,
        "failed_folds": state.failed_folds,
        "retry_after": None if state.retry_after is None else _aware_utc(state.retry_after),
        "updated_at": updated_at,
    }


def _to_memory_state(row: Any, prefix: str = "") -> MemoryState:
    """The state of a `SessionMemoryStateTable` row, or of a result row naming the state's columns `prefix` + name."""

    def value(name: str) -> Any:
        return getattr(row, prefix + name)

    cursor = None
    covered_id, covered_at = value("covered_until_message_id"), value("covered_until_timestamp")
    if covered_id is not None and covered_at is not None:
        cursor = Cursor(_aware_utc(covered_at), str(covered_id))
    retry_after = value("retry_after")
    return MemoryState(
        summary=value("summary"),
        pinned=dict(value("pinned") or {}),
        cursor=cursor,
        absorbed_count=value("absorbed_count"),
        summary_model=value("summary_model"),
        version=value("version"),
        failed_folds=value("failed_folds"),
        retry_after=None if retry_after is None else _aware_utc(retry_after),
        updated_at=_aware_utc(value("updated_at")),
    )


def _message_filters(
    scope: _Scope, session_id: str, context_id: str | None, exclude_ids: Iterable[Id]
) -> list[ColumnElement[bool]]:
    return _message_terms(scope, session_id, context_id or None, _stored_ids(exclude_ids))


def _message_terms(
    scope: tuple[Any, Any], session_id: Any, context_id: Any, excluded: Sequence[Any]
) -> list[ColumnElement[bool]]:
    """The session's readable messages without `excluded` and what was stored after it; values or bind parameters."""
    from langflow.services.database.models.message.model import MessageTable

    filters = [
        col(MessageTable.flow_id) == scope[0],
        col(MessageTable.user_id) == scope[1],
        col(MessageTable.session_id) == session_id,
        col(MessageTable.error).is_(False),
        # A NULL category is an ordinary message, not an error.
        func.coalesce(col(MessageTable.category), "") != ERROR_CATEGORY,
    ]
    if context_id is not None:
        filters.append(col(MessageTable.context_id) == context_id)
    if excluded:
        filters.append(col(MessageTable.id).not_in(excluded))
        # What a concurrent run stored after the current input is not read either: a fold that read it could move
        # the cursor past the input, which this run never sees, and the input would count as folded unsummarized.
        filters.extend(_stored_before(uid) for uid in excluded)
    return filters


@cache
def _message_alias(name: str) -> Any:
    """A named alias of `message`, built once: aliasing the mapped class costs more than the rest of a turn's
    statement building."""
    from langflow.services.database.models.message.model import MessageTable
    from sqlalchemy.orm import aliased

    return aliased(MessageTable, name=name)


def _stored_before(message_id: Any) -> ColumnElement[bool]:
    """Rows before `message_id` in keyset order; every row when that message is not stored."""
    from langflow.services.database.models.message.model import MessageTable

    current = _message_alias("turn_input")
    position = select(current.timestamp).where(col(current.id) == message_id).scalar_subquery()
    # NULL (the message is not stored) compares as unknown, which coalesces to every row.
    before = tuple_(col(MessageTable.timestamp), col(MessageTable.id)) < tuple_(position, message_id)
    return func.coalesce(before, true())


def _message_order(*, ascending: bool) -> tuple[Any, Any]:
    from langflow.services.database.models.message.model import MessageTable

    timestamp, message_id = col(MessageTable.timestamp), col(MessageTable.id)
    if ascending:
        return timestamp.asc(), message_id.asc()
    return timestamp.desc(), message_id.desc()


def _after(cursor: Cursor) -> ColumnElement[bool]:
    from langflow.services.database.models.message.model import MessageTable

    timestamp, message_id = _cursor_binds(cursor)
    # The plain range term lets the (session_id, timestamp, id) index stop at the cursor instead of filtering
    # every older row of a long session.
    return and_(
        col(MessageTable.timestamp) >= timestamp,
        or_(col(MessageTable.timestamp) > timestamp, col(MessageTable.id) > message_id),
    )


def _before(cursor: Cursor) -> ColumnElement[bool]:
    from langflow.services.database.models.message.model import MessageTable

    timestamp, message_id = _cursor_binds(cursor)
    return and_(
        col(MessageTable.timestamp) <= timestamp,
        or_(col(MessageTable.timestamp) < timestamp, col(MessageTable.id) < message_id),
    )


def _cursor_binds(cursor: Cursor) -> tuple[datetime, UUID]:
    # message.timestamp is typed UTCDateTime, which only binds aware datetimes.
    return _aware_utc(cursor.timestamp), UUID(cursor.message_id)


async def _read_messages(stmt: Any) -> list[StoredMessage]:
    from langflow.services.deps import session_scope

    async with session_scope() as session:
        rows: Sequence[MessageTable] = (await session.exec(stmt)).all()
        return [_to_stored_message(row) for row in rows]


def _to_stored_message(row: MessageTable) -> StoredMessage:
    return StoredMessage(
        id=str(row.id),
        timestamp=_aware_utc(row.timestamp),
        role="user" if row.sender == USER_SENDER else "assistant",
        text=row.text or "",
        files=tuple(PurePosixPath(str(path)).name for path in row.files or ()),
        # The row; `as_chat_message()` turns it into a Message only if it is sent verbatim.
        payload=row,
    )


async def as_chat_message(message: StoredMessage) -> Message:
    """The Message the stock Agent would get for this row, built exactly as `langflow.memory.aget_messages` does."""
    from langflow.schema.message import Message

    return await Message.create(**message.payload.model_dump())


def _stored_ids(ids: Iterable[Id]) -> list[UUID]:
    """The ids that can name a stored message; anything else names nothing to exclude."""
    return [uid for uid in map(_as_uuid, ids) if uid is not None]


def _as_uuid(value: Id) -> UUID | None:
    if isinstance(value, UUID):
        return value
    try:
        return UUID(str(value))
    except ValueError:
        return None  # Cannot be a stored message id, so there is nothing to exclude.


def _aware_utc(value: datetime) -> datetime:
    return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)


def _naive_utc(value: datetime) -> datetime:
    return value if value.tzinfo is None else value.astimezone(timezone.utc).replace(tzinfo=None)
