"""Where the summary row is written: every read and write of the `session_memory_state` table, on Langflow's database.

- `DatabaseStore` is the engine's `SessionStore` for one scope: a turn's read is one statement, a save one more
  (plus one migration check per process and database, see `migrate`).
- `StateRows` runs the table's statements on a synchronous connection inside a transaction someone else runs:
  `DatabaseStore` in its own, the listeners of `wiring.lifecycle` in the transaction that deletes or moves
  messages. It is where a summary row is inserted, compare-and-swapped, purged and moved.
- `session_summaries()` and `reset_session()` are the session-wide read and reset of the HTTP API.

No other module builds SQL on the table. The table's columns keep the names of the first migration; `models`
maps them to the code's names, and `_summary_values()` / `_to_summary()` map rows to `Summary` and back.

Scope: flow and owner are resolved with `langflow.memory._message_scope`, the check behind Langflow's own
`aget_messages()`: inside a graph run the executing graph's flow and owner win, and a caller asking for another
flow or owner gets nothing (an empty summary, None, [] or 0) rather than someone else's rows. Outside a graph run
both ids must be given and valid (a read or reset of a whole session may leave the owner out: every owner).

Without a Langflow database (standalone `lfx`, or langflow installed but its services not initialised) every call
answers "nothing" the same way, without raising, so the component can fall back to last-N. Database errors raise.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from functools import cache
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any
from uuid import UUID, uuid4

from lfx.utils.langflow_utils import has_langflow_db_backend
from sqlalchemy import (
    Connection,
    Integer,
    Table,
    and_,
    bindparam,
    case,
    delete,
    exists,
    func,
    literal,
    or_,
    true,
    tuple_,
    update,
)
from sqlalchemy import inspect as sa_inspect
from sqlalchemy import select as sa_select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.sql.elements import ColumnElement
from sqlmodel import col, select

from langflow_summarizing_agent.engine.records import (
    NO_CONTEXT,
    Cursor,
    Id,
    Scope,
    StoredMessage,
    Summary,
    as_utc,
    utcnow,
)
from langflow_summarizing_agent.engine.store import HeldScopes
from langflow_summarizing_agent.storage.migrate import ensure_migrated
from langflow_summarizing_agent.storage.models import SCOPE_COLUMNS, TABLE_NAME, SessionMemoryStateTable

if TYPE_CHECKING:
    from langflow.services.database.models.message.model import MessageTable
    from lfx.schema.message import Message

__all__ = [
    "DatabaseStore",
    "MessageDeletePlan",
    "Rename",
    "SessionSummary",
    "StateRows",
    "UnsupportedDatabaseError",
    "as_chat_message",
    "database_available",
    "in_session",
    "reset_session",
    "session_summaries",
]

USER_SENDER = "User"
"""`message.sender` of a user turn; every other sender is the assistant (as in `Message.to_lc_message`)."""

ERROR_CATEGORY = "error"

# The one handle on the table. Writes go through the Core table: ORM-enabled DML would add ORM bookkeeping to a
# single statement.
_TABLE = SessionMemoryStateTable.metadata.tables[TABLE_NAME]
# Ids per IN list: far below the bind-parameter limits of SQLite (32766) and Postgres (65535).
_CHUNK = 500
_Scope = tuple[UUID, UUID]
_FOLD_LOCKS = HeldScopes()
"""The fold locks this process holds, by scope; PostgreSQL's advisory locks hold them across processes."""
_ADVISORY_NAMESPACE = b"langflow_summarizing_agent.fold"


class UnsupportedDatabaseError(RuntimeError):
    """Langflow runs on a database other than SQLite or PostgreSQL; the component falls back to last-N."""


def database_available() -> bool:
    """True when Langflow's database is available; False under standalone lfx or before services start."""
    return has_langflow_db_backend()


@dataclass(frozen=True)
class SessionSummary:
    """A stored summary with the part of its scope a session-wide read does not fix: owner and context."""

    user_id: UUID
    context_id: str
    """`""` is "no context"."""
    summary: Summary


@dataclass(frozen=True)
class Rename:
    """One session of one flow and owner whose messages moved to `new_session_id`."""

    flow_id: UUID
    user_id: UUID
    old_session_id: str
    new_session_id: str | None
    """None when the new id is not a plain value (an SQL expression): the summary is deleted, not moved."""
    whole_session: bool
    """True when every message moved into a session that had none: the summary can follow."""


@dataclass
class MessageDeletePlan:
    """Summary rows a message delete touches, read before the messages are gone."""

    folded: set[UUID] = field(default_factory=set)
    """Rows with a deleted message at or before their cursor: deleted whatever remains."""
    touched: set[UUID] = field(default_factory=set)
    """Rows of a session that lost messages: deleted if nothing of their session (or context) remains."""

    def __bool__(self) -> bool:
        return bool(self.folded or self.touched)


async def session_summaries(*, flow_id: Id, session_id: str, context_id: str | None = None) -> list[SessionSummary]:
    """The session's summaries, one per owner and context (only `context_id`'s when given), stale ones emptied."""
    flow = await _resolved_flow(flow_id)
    if flow is None or not session_id:
        return []
    return await _on_rows(lambda rows: rows.summaries(flow, session_id, context_id))


async def reset_session(*, flow_id: Id, session_id: str, context_id: str | None = None) -> int:
    """Delete the session's summaries (every context unless `context_id` is given); the rows deleted."""
    flow = await _resolved_flow(flow_id)
    if flow is None or not session_id:
        return 0
    return await _on_rows(lambda rows: rows.purge(flow, session_ids=[session_id], context_id=context_id))


class DatabaseStore:
    """The engine's `SessionStore` for one scope on Langflow's database.

    Reads end before `before` (the current turn's input: it is stored when history is read, and the Agent receives
    it as the input), leaving out what concurrent runs stored after it; or with `through`, included (what the fold
    after the reply reads). At most one of the two.
    """

    def __init__(self, scope: Scope, *, before: Id | None = None, through: Id | None = None) -> None:
        if before is not None and through is not None:
            msg = "a store's reads end before one message or through one, not both"
            raise ValueError(msg)
        self._scope_value = scope
        self._before = _as_uuid(before) if before is not None else None
        self._through = _as_uuid(through) if through is not None else None

    @property
    def scope(self) -> Scope:
        return self._scope_value

    async def load(self) -> Summary:
        scope = await self._resolved()
        if scope is None:
            return Summary()
        from langflow.services.deps import session_scope

        async with session_scope() as session:
            return await session.run_sync(
                lambda sync: StateRows(sync.connection()).load(scope, self.scope.session_id, self.scope.context_id)
            )

    async def load_turn(self, limit: int) -> tuple[Summary, list[StoredMessage]]:
        scope = await self._resolved()
        if scope is None:
            return Summary(), []
        if limit <= 0:
            return await self.load(), []
        from langflow.services.deps import session_scope

        context_id = self.scope.context_id
        params: dict[str, Any] = {
            "flow_id": scope[0],
            "user_id": scope[1],
            "session_id": self.scope.session_id,
            "state_context_id": context_id or NO_CONTEXT,
            "limit": limit,
        }
        if context_id:
            params["context_id"] = context_id
        if self._before is not None:
            params["before_id"] = self._before
        if self._through is not None:
            params["through_id"] = self._through
        stmt = _turn_statement(
            with_context=bool(context_id), before=self._before is not None, through=self._through is not None
        )
        async with session_scope() as session:
            found = (await session.exec(stmt, params=params)).all()
        if not found:
            # No unfolded message to read: the summary alone, by its own (stale-checking) read.
            return await self.load(), []
        first = found[0]
        if first.state_id is None:
            summary = Summary()
        elif first.state_cursor_message_id is not None and first.cursor_id is None:
            # The cursor's message is gone: the summary is stale, and the read above started at the session's start.
            summary = _to_summary(first, _STATE_PREFIX).emptied()
        else:
            summary = _to_summary(first, _STATE_PREFIX)
            if first.cursor_id is not None:
                # The cursor as the read used it: its message's timestamp, so the fold's later reads agree.
                summary = replace(summary, cursor=Cursor(as_utc(first.cursor_timestamp), str(first.cursor_id)))
        return summary, [_to_stored_message(row[0]) for row in reversed(found)]

    async def save(self, summary: Summary) -> Summary | None:
        if summary.version < 0:
            msg = f"a summary's version is 0 (nothing stored) or a stored version, got {summary.version}"
            raise ValueError(msg)
        scope = await self._resolved()
        if scope is None:
            return None
        from langflow.services.deps import session_scope

        now = utcnow()
        async with session_scope() as session:
            saved_row = await session.run_sync(
                lambda sync: StateRows(sync.connection()).save(
                    scope, self.scope.session_id, self.scope.context_id, summary, now
                )
            )
        if saved_row is None:
            return None
        return replace(summary, row_id=str(saved_row), version=summary.version + 1, updated_at=now)

    async def messages(
        self, *, limit: int, after: Cursor | None = None, before: Cursor | None = None, newest: bool = False
    ) -> list[StoredMessage]:
        scope = await self._resolved()
        if scope is None or limit <= 0:
            return []
        filters = self._message_filters(scope)
        if after is not None:
            filters.append(_after(after))
        if before is not None:
            filters.append(_before(before))
        order = _message_order(ascending=not newest)
        found = await _read_messages(select(_message_class()).where(*filters).order_by(*order).limit(limit))
        return list(reversed(found)) if newest else found

    async def count(self, *, after: Cursor | None = None, before: Cursor | None = None) -> int:
        scope = await self._resolved()
        if scope is None:
            return 0
        from langflow.services.deps import session_scope

        filters = self._message_filters(scope)
        if after is not None:
            filters.append(_after(after))
        if before is not None:
            filters.append(_before(before))
        async with session_scope() as session:
            stmt = select(func.count()).select_from(_message_class()).where(*filters)
            return int((await session.exec(stmt)).one())

    @asynccontextmanager
    async def fold_lock(self) -> AsyncIterator[bool]:
        key = self.scope.key
        async with _FOLD_LOCKS.hold(key) as held:
            scope = await self._resolved() if held else None
            if scope is None:
                yield False
                return
            from langflow.services.deps import get_db_service, session_scope

            if get_db_service().engine.dialect.name != "postgresql":
                yield True
                return
            async with session_scope() as session:
                # Held until this transaction ends, however the fold ends: no unlock to forget.
                statement = select(func.pg_try_advisory_xact_lock(_advisory_key(key)))
                yield bool((await session.exec(statement)).one())

    async def _resolved(self) -> _Scope | None:
        if not self.scope.session_id:
            return None
        return await _resolved_flow_and_owner(self.scope.flow_id, self.scope.user_id, owner_required=True)

    def _message_filters(self, scope: _Scope) -> list[ColumnElement[bool]]:
        return _message_terms(scope, self.scope.session_id, self.scope.context_id, self._before, self._through)


class StateRows:
    """The summary table on one synchronous connection, inside a transaction its caller runs.

    `DatabaseStore` and the session-wide functions run these in a transaction of their own; the listeners of
    `wiring.lifecycle` run them in the transaction of the Langflow statement they follow.
    """

    def __init__(self, connection: Connection) -> None:
        self.connection = connection

    def exists(self) -> bool:
        """The table is created on first use; before that there is no summary to keep in step."""
        return sa_inspect(self.connection).has_table(TABLE_NAME)

    def load(self, scope: _Scope, session_id: str, context_id: str | None) -> Summary:
        """One scope's summary, emptied when stale; `Summary()` without a row."""
        here = _state_where(
            flow_id=scope[0], user_id=scope[1], session_id=session_id, context_id=context_id or NO_CONTEXT
        )
        stmt = sa_select(_TABLE, _is_current().label("is_current")).where(*here)
        found = self.connection.execute(stmt).first()
        if found is None:
            return Summary()
        summary = _to_summary(found)
        return summary if found.is_current else summary.emptied()

    def summaries(self, flow_id: UUID, session_id: str, context_id: str | None) -> list[SessionSummary]:
        stmt = (
            sa_select(_TABLE, _is_current().label("is_current"))
            .where(*_state_where(flow_id=flow_id, session_id=session_id, context_id=_context_or_any(context_id)))
            .order_by(_TABLE.c.context_id, _TABLE.c.user_id)
        )
        found = []
        for row in self.connection.execute(stmt):
            summary = _to_summary(row)
            found.append(SessionSummary(row.user_id, row.context_id, summary if row.is_current else summary.emptied()))
        return found

    def save(
        self,
        scope: _Scope,
        session_id: str,
        context_id: str | None,
        summary: Summary,
        now: datetime,
    ) -> UUID | None:
        """Insert (version 0) or compare-and-swap (against `summary.version`) one scope's row; the row's id when
        saved, None when refused."""
        expected_version = summary.version
        messages = _message_table()
        in_session = and_(
            messages.c.flow_id == scope[0], messages.c.user_id == scope[1], messages.c.session_id == session_id
        )
        if summary.cursor is not None:
            in_session = and_(in_session, messages.c.id == UUID(summary.cursor.message_id))
        # A deleted session (or cursor message) gets no row back, even from a fold that read it before the delete.
        still_there = exists().where(in_session)
        values = _summary_values(summary, updated_at=now)
        if expected_version == 0:
            row_id = uuid4()
            row = {
                "id": row_id,
                "flow_id": scope[0],
                "user_id": scope[1],
                "session_id": session_id,
                "context_id": context_id or NO_CONTEXT,
                "version": 1,
                "created_at": now,
                **values,
            }
            names = list(row)
            source = sa_select(*(literal(row[name], _TABLE.c[name].type).label(name) for name in names)).where(
                still_there
            )
            insert = _insert_statement(self.connection.dialect.name).from_select(
                [_TABLE.c[name] for name in names], source
            )
            # A concurrent insert of the same scope makes this a no-op, not an error. RETURNING tells the two
            # apart: under SQLAlchemy's psycopg dialect an INSERT's rowcount is -1.
            insert = insert.on_conflict_do_nothing(index_elements=list(SCOPE_COLUMNS)).returning(_TABLE.c.id)
            return row_id if self.connection.execute(insert).first() is not None else None
        if summary.row_id is None:
            return None
        row_id = UUID(summary.row_id)
        stmt = (
            update(_TABLE)
            .where(
                _TABLE.c.id == row_id,
                *_state_where(
                    flow_id=scope[0], user_id=scope[1], session_id=session_id, context_id=context_id or NO_CONTEXT
                ),
                _TABLE.c.version == expected_version,
                still_there,
            )
            .values(version=_TABLE.c.version + 1, **values)
        )
        return row_id if self.connection.execute(stmt).rowcount == 1 else None

    def purge(
        self,
        flow_id: UUID,
        *,
        session_ids: Sequence[str],
        user_id: UUID | None = None,
        context_id: str | None = None,
    ) -> int:
        """Delete the states of `session_ids` in a flow (of one owner, one context, when given)."""
        deleted = 0
        for chunk in _chunks(session_ids):
            stmt = delete(_TABLE).where(
                *_state_where(flow_id=flow_id, user_id=user_id, context_id=_context_or_any(context_id)),
                _TABLE.c.session_id.in_(chunk),
            )
            deleted += self.connection.execute(stmt).rowcount
        return deleted

    def purge_flows(self, flow_ids: Iterable[UUID]) -> int:
        deleted = 0
        for chunk in _chunks(flow_ids):
            deleted += self.connection.execute(delete(_TABLE).where(_TABLE.c.flow_id.in_(chunk))).rowcount
        return deleted

    def plan_message_delete(self, where: ColumnElement[bool] | None) -> MessageDeletePlan:
        """The states of the sessions whose messages match `where`, and which of them folded one."""
        if not self.exists():
            return MessageDeletePlan()
        messages = _message_table()
        cursor_timestamp, cursor_id = _TABLE.c.cursor_timestamp, _TABLE.c.cursor_message_id
        folded = and_(
            _in_state_context(messages),
            cursor_id.is_not(None),
            or_(
                messages.c.timestamp < cursor_timestamp,
                and_(messages.c.timestamp == cursor_timestamp, messages.c.id <= cursor_id),
            ),
        )
        stmt = (
            sa_select(_TABLE.c.id, func.max(case((folded, 1), else_=0)))
            .select_from(_TABLE.join(messages, _same_scope(messages)))
            .group_by(_TABLE.c.id)
        )
        if where is not None:
            stmt = stmt.where(where)
        plan = MessageDeletePlan()
        for state_id, has_folded in self.connection.execute(stmt):
            plan.touched.add(state_id)
            if has_folded:
                plan.folded.add(state_id)
        return plan

    def apply_message_delete(self, plan: MessageDeletePlan, *, deleted_ids: Sequence[UUID] = ()) -> int:
        """Delete what `plan` found: every folded state, and touched states with no message left.

        `deleted_ids` names messages that are about to go and so do not count as left (a purge that runs before
        the delete); after the delete they are gone anyway.
        """
        messages = _message_table()
        left = [_same_scope(messages), _in_state_context(messages)]
        if deleted_ids:
            left.append(messages.c.id.not_in(list(deleted_ids)))
        deleted = 0
        for chunk in _chunks(plan.folded):
            deleted += self.connection.execute(delete(_TABLE).where(_TABLE.c.id.in_(chunk))).rowcount
        for chunk in _chunks(plan.touched - plan.folded):
            stmt = delete(_TABLE).where(_TABLE.c.id.in_(chunk), ~exists().where(*left))
            deleted += self.connection.execute(stmt).rowcount
        return deleted

    def apply_renames(self, renames: Iterable[Rename]) -> int:
        """Move or delete the states of renamed sessions; the rows moved."""
        moved = 0
        for rename in renames:
            if rename.old_session_id == rename.new_session_id:
                continue
            owner = _state_where(flow_id=rename.flow_id, user_id=rename.user_id)
            if rename.whole_session and rename.new_session_id is not None:
                # A state row of the new id is stale (it has no messages); the moved state replaces it.
                self.connection.execute(delete(_TABLE).where(*owner, _TABLE.c.session_id == rename.new_session_id))
                stmt = (
                    update(_TABLE)
                    .where(*owner, _TABLE.c.session_id == rename.old_session_id)
                    .values(session_id=rename.new_session_id)
                )
                moved += self.connection.execute(stmt).rowcount
                continue
            sessions = [rename.old_session_id]
            if rename.new_session_id is not None:
                sessions.append(rename.new_session_id)
            self.connection.execute(delete(_TABLE).where(*owner, _TABLE.c.session_id.in_(sessions)))
        return moved

    def count(self, flow_id: UUID | None = None) -> int:
        stmt = sa_select(func.count()).select_from(_TABLE)
        if flow_id is not None:
            stmt = stmt.where(_TABLE.c.flow_id == flow_id)
        return int(self.connection.execute(stmt).scalar_one())


async def _on_rows(action: Any) -> Any:
    """Run `action(StateRows)` in a transaction of its own."""
    from langflow.services.deps import session_scope

    async with session_scope() as session:
        return await session.run_sync(lambda sync: action(StateRows(sync.connection())))


async def _resolved_flow(flow_id: Id | None) -> UUID | None:
    scope = await _resolved_flow_and_owner(flow_id, None)
    return None if scope is None else scope[0]


async def _resolved_flow_and_owner(
    flow_id: Id | None, user_id: Id | None, *, owner_required: bool = False
) -> tuple[UUID, Any] | None:
    """The trusted (flow, owner) of a call, or None to answer "nothing" (unsupported or unresolved).

    The owner is None (every owner) only when none was asked for and none is required.
    """
    if not database_available():
        return None
    from langflow.memory import _message_scope

    resolved_flow, resolved_owner = _message_scope(flow_id, user_id)
    # An owner that was given but does not resolve must not widen a call to every owner.
    if resolved_flow is None or (resolved_owner is None and (owner_required or user_id is not None)):
        return None
    await ensure_migrated()
    return resolved_flow, resolved_owner


def _state_where(
    *,
    flow_id: Any,
    user_id: Any = None,
    session_id: Any = None,
    context_id: Any = None,
) -> list[ColumnElement[bool]]:
    """The one scope filter on the state table: values or bind parameters; None leaves a part open."""
    filters = [_TABLE.c.flow_id == flow_id]
    if user_id is not None:
        filters.append(_TABLE.c.user_id == user_id)
    if session_id is not None:
        filters.append(_TABLE.c.session_id == session_id)
    if context_id is not None:
        filters.append(_TABLE.c.context_id == context_id)
    return filters


def _context_or_any(context_id: str | None) -> str | None:
    """A session-wide call's context: None is every context, `""` is "no context"."""
    return None if context_id is None else (context_id or NO_CONTEXT)


def _is_current() -> ColumnElement[bool]:
    """Whether a state row's cursor message is still in its session (without a cursor: any message is)."""
    messages = _message_table()
    in_session = [
        messages.c.flow_id == _TABLE.c.flow_id,
        messages.c.user_id == _TABLE.c.user_id,
        messages.c.session_id == _TABLE.c.session_id,
    ]
    return or_(
        and_(_TABLE.c.cursor_message_id.is_(None), exists().where(*in_session)),
        exists().where(*in_session, messages.c.id == _TABLE.c.cursor_message_id),
    )


def _same_scope(messages: Table) -> ColumnElement[bool]:
    return and_(
        messages.c.flow_id == _TABLE.c.flow_id,
        messages.c.user_id == _TABLE.c.user_id,
        messages.c.session_id == _TABLE.c.session_id,
    )


def _in_state_context(messages: Table) -> ColumnElement[bool]:
    """A state without a context covers every context of its session, as the fold reads them."""
    return or_(_TABLE.c.context_id == NO_CONTEXT, messages.c.context_id == _TABLE.c.context_id)


def _insert_statement(dialect: str) -> Any:
    if dialect == "postgresql":
        return postgresql.insert(_TABLE)
    if dialect == "sqlite":
        return sqlite.insert(_TABLE)
    msg = f"Summaries need a SQLite or PostgreSQL database, not {dialect!r}"
    raise UnsupportedDatabaseError(msg)


def _summary_values(summary: Summary, *, updated_at: datetime) -> dict[str, Any]:
    cursor = summary.cursor
    return {
        "summary": summary.text,
        "pinned": dict(summary.pinned),
        "cursor_message_id": None if cursor is None else UUID(cursor.message_id),
        "cursor_timestamp": None if cursor is None else _naive_utc(cursor.timestamp),
        "folded_count": summary.folded_count,
        "summary_model": summary.summary_model,
        "failed_folds": summary.failed_folds,
        "retry_after": None if summary.retry_after is None else as_utc(summary.retry_after),
        "updated_at": updated_at,
    }


def _to_summary(row: Any, prefix: str = "") -> Summary:
    """The summary of a result row naming the table's columns by key, or `prefix` + key."""

    def value(name: str) -> Any:
        return getattr(row, prefix + name)

    cursor = None
    cursor_id, cursor_at = value("cursor_message_id"), value("cursor_timestamp")
    if cursor_id is not None and cursor_at is not None:
        cursor = Cursor(as_utc(cursor_at), str(cursor_id))
    retry_after = value("retry_after")
    return Summary(
        text=value("summary"),
        pinned=dict(value("pinned") or {}),
        cursor=cursor,
        folded_count=value("folded_count"),
        summary_model=value("summary_model"),
        version=value("version"),
        failed_folds=value("failed_folds"),
        retry_after=None if retry_after is None else as_utc(retry_after),
        updated_at=as_utc(value("updated_at")),
        row_id=str(value("id")),
    )


def _chunks(values: Iterable[Any]) -> Iterable[list[Any]]:
    items = list(values)
    for start in range(0, len(items), _CHUNK):
        yield items[start : start + _CHUNK]


def _message_class() -> Any:
    from langflow.services.database.models.message.model import MessageTable

    return MessageTable


def _message_table() -> Table:
    return _message_class().__table__


_EARLIEST = datetime(1, 1, 1, tzinfo=timezone.utc)
"""Lower keyset bound of a read without a cursor: before every stored message."""

_STATE_PREFIX = "state_"
_TURN_STATE_COLUMNS = tuple(
    _TABLE.c[name].label(_STATE_PREFIX + name)
    for name in (
        "id",
        "summary",
        "pinned",
        "cursor_message_id",
        "cursor_timestamp",
        "folded_count",
        "summary_model",
        "version",
        "failed_folds",
        "retry_after",
        "updated_at",
    )
)


@cache
def _turn_statement(*, with_context: bool, before: bool, through: bool) -> Any:
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
    state_here = _state_where(
        flow_id=scope[0], user_id=scope[1], session_id=session_id, context_id=bindparam("state_context_id")
    )

    # The cursor's message, looked up once and referenced by the bounds below.
    cursor = (
        select(col(cursor_message.timestamp).label("timestamp"), col(cursor_message.id).label("id"))
        .select_from(_TABLE)
        .join(
            cursor_message,
            and_(
                col(cursor_message.id) == _TABLE.c.cursor_message_id,
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
    before_id = bindparam("before_id", type_=id_type) if before else None
    through_id = bindparam("through_id", type_=id_type) if through else None
    filters = _message_terms(scope, session_id, context, before_id, through_id)
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


def _message_terms(
    scope: tuple[Any, Any], session_id: Any, context_id: Any, before: Any = None, through: Any = None
) -> list[ColumnElement[bool]]:
    """The session's readable messages, before `before` (left out with what was stored after it) or through
    `through` (included) when given; values or bind parameters."""
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
    if before is not None:
        filters.append(col(MessageTable.id) != before)
        # What a concurrent run stored after the current input is not read either: a fold that read it could move
        # the cursor past the input, which this run never sees, and the input would count as folded unsummarized.
        filters.append(_stored_before(before))
    if through is not None:
        filters.append(_stored_before(through, inclusive=True))
    return filters


@cache
def _message_alias(name: str) -> Any:
    """A named alias of `message`, built once: aliasing the mapped class costs more than the rest of a turn's
    statement building."""
    from langflow.services.database.models.message.model import MessageTable
    from sqlalchemy.orm import aliased

    return aliased(MessageTable, name=name)


def _stored_before(message_id: Any, *, inclusive: bool = False) -> ColumnElement[bool]:
    """Rows before `message_id` (and it, if `inclusive`) in keyset order; every row when that message is not stored."""
    from langflow.services.database.models.message.model import MessageTable

    current = _message_alias("turn_input")
    position = select(current.timestamp).where(col(current.id) == message_id).scalar_subquery()
    row = tuple_(col(MessageTable.timestamp), col(MessageTable.id))
    # NULL (the message is not stored) compares as unknown, which coalesces to every row.
    before = row <= tuple_(position, message_id) if inclusive else row < tuple_(position, message_id)
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
    return as_utc(cursor.timestamp), UUID(cursor.message_id)


async def _read_messages(stmt: Any) -> list[StoredMessage]:
    from langflow.services.deps import session_scope

    async with session_scope() as session:
        rows: Sequence[MessageTable] = (await session.exec(stmt)).all()
        return [_to_stored_message(row) for row in rows]


def _to_stored_message(row: MessageTable) -> StoredMessage:
    return StoredMessage(
        id=str(row.id),
        timestamp=as_utc(row.timestamp),
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


def _as_uuid(value: Id) -> UUID | None:
    if isinstance(value, UUID):
        return value
    try:
        return UUID(str(value))
    except ValueError:
        return None  # Cannot be a stored message id, so there is nothing to exclude.


def in_session(key: tuple[str, ...], *, flow_id: UUID, session_id: str, context_id: str | None = None) -> bool:
    """True when a `Scope.key` belongs to the session (and context, when given)."""
    flow, _, session, context = key
    if session != session_id or (context_id is not None and context != (context_id or NO_CONTEXT)):
        return False
    return _as_uuid(flow) == flow_id


def _advisory_key(key: tuple[str, ...]) -> int:
    """A scope as a PostgreSQL advisory lock key (a signed 64-bit integer)."""
    digest = hashlib.blake2b("\x1f".join(key).encode(), digest_size=8, key=_ADVISORY_NAMESPACE).digest()
    return int.from_bytes(digest, "big", signed=True)


def _naive_utc(value: datetime) -> datetime:
    return value if value.tzinfo is None else value.astimezone(timezone.utc).replace(tzinfo=None)
