"""The session store: every read and write of the `session_memory_state` table, on Langflow's database.

`LangflowStore` implements `state.StateStore` (what the HTTP API reads and resets) and hands out
`LangflowSessionStore`s, which implement `state.SessionStore` (what a turn's fold reads and saves). `StateRows` runs
the same statements on a connection inside a transaction someone else runs: the Langflow listeners of `lifecycle`
use it to purge and move states in the transaction that deletes or moves messages. No other module builds SQL on
the state table.

Scope: flow and owner are resolved with `langflow.memory._message_scope`, the check behind Langflow's own
`aget_messages()`: inside a graph run the executing graph's flow and owner win, and a caller asking for another
flow or owner gets nothing (an empty state, False, [] or 0) rather than someone else's rows. Outside a graph run
both ids must be given and valid (a purge or read of a whole session may leave the owner out: every owner).

Without a Langflow database (standalone `lfx`, or langflow installed but its services not initialised) every call
answers "nothing" the same way, without raising, so the component can fall back to last-N. Database errors raise.

A turn's read is one statement, a save one more (plus one migration check per process and database, see `migrate`).
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator, Collection, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
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

from langflow_summarizing_agent.migrate import ensure_migrated
from langflow_summarizing_agent.models import NO_CONTEXT, SCOPE_COLUMNS, TABLE_NAME, SessionMemoryStateTable
from langflow_summarizing_agent.state import (
    Cursor,
    HeldScopes,
    Id,
    MemoryState,
    Rename,
    ScopedState,
    StoredMessage,
    as_utc,
    utcnow,
)

if TYPE_CHECKING:
    from langflow.services.database.models.message.model import MessageTable
    from lfx.schema.message import Message

__all__ = [
    "LangflowSessionStore",
    "LangflowStore",
    "MessageDeletePlan",
    "Rename",
    "StateRows",
    "UnsupportedDatabaseError",
    "as_chat_message",
    "in_session",
    "session_memory_supported",
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


def session_memory_supported() -> bool:
    """True when Langflow's database is available; False under standalone lfx or before services start."""
    return has_langflow_db_backend()


@dataclass
class MessageDeletePlan:
    """State rows a message delete touches, read before the messages are gone."""

    folded: set[UUID] = field(default_factory=set)
    """Rows with a deleted message at or before their cursor: deleted whatever remains."""
    touched: set[UUID] = field(default_factory=set)
    """Rows of a session that lost messages: deleted if nothing of their session (or context) remains."""

    def __bool__(self) -> bool:
        return bool(self.folded or self.touched)


class LangflowStore:
    """`StateStore` on Langflow's database: every session's state, for the HTTP API and the listeners."""

    def session(
        self,
        *,
        flow_id: Id | None,
        user_id: Id | None,
        session_id: str,
        context_id: str | None = None,
        exclude_ids: Iterable[Id] = (),
        until_id: Id | None = None,
    ) -> LangflowSessionStore:
        return LangflowSessionStore(
            flow_id=flow_id,
            user_id=user_id,
            session_id=session_id,
            context_id=context_id,
            exclude_ids=exclude_ids,
            until_id=until_id,
        )

    async def states(self, *, flow_id: Id, session_id: str, context_id: str | None = None) -> list[ScopedState]:
        flow = await _resolved_flow(flow_id)
        if flow is None or not session_id:
            return []
        return await _on_rows(lambda rows: rows.states(flow, session_id, context_id))

    async def reset(self, *, flow_id: Id, session_id: str, context_id: str | None = None) -> int:
        flow = await _resolved_flow(flow_id)
        if flow is None or not session_id:
            return 0
        return await _on_rows(lambda rows: rows.purge(flow, session_ids=[session_id], context_id=context_id))

    async def purge_sessions(self, *, flow_id: Id, session_ids: Collection[str], user_id: Id | None = None) -> int:
        if not session_ids:
            return 0
        scope = await _resolved_flow_and_owner(flow_id, user_id)
        if scope is None:
            return 0
        flow, owner = scope
        return await _on_rows(lambda rows: rows.purge(flow, session_ids=list(session_ids), user_id=owner))

    async def purge_flows(self, flow_ids: Collection[Id]) -> int:
        flows = [flow for flow in [await _resolved_flow(flow_id) for flow_id in flow_ids] if flow is not None]
        if not flows:
            return 0
        return await _on_rows(lambda rows: rows.purge_flows(flows))

    async def purge_messages(self, message_ids: Collection[Id]) -> int:
        ids = _stored_ids(message_ids)
        if not ids or not await _ready():
            return 0
        from langflow.services.database.models.message.model import MessageTable

        def purge(rows: StateRows) -> int:
            plan = rows.plan_message_delete(col(MessageTable.id).in_(ids))
            return rows.apply_message_delete(plan, deleted_ids=ids)

        return await _on_rows(purge)

    async def rename(self, renames: Iterable[Rename]) -> int:
        renames = list(renames)
        if not renames or not await _ready():
            return 0
        return await _on_rows(lambda rows: rows.apply_renames(renames))

    async def count(self, *, flow_id: Id | None = None) -> int:
        flow = None
        if flow_id is not None:
            flow = await _resolved_flow(flow_id)
            if flow is None:
                return 0
        elif not await _ready():
            return 0
        return await _on_rows(lambda rows: rows.count(flow))


class LangflowSessionStore:
    """`SessionStore` for one scope on Langflow's database.

    `exclude_ids` holds the current turn's input: it is already stored when history is read, and the Agent
    receives it as the input, so no read returns it, nor what concurrent runs stored after it.
    """

    def __init__(
        self,
        *,
        flow_id: Id | None,
        user_id: Id | None,
        session_id: str,
        context_id: str | None = None,
        exclude_ids: Iterable[Id] = (),
        until_id: Id | None = None,
    ) -> None:
        self.flow_id = flow_id
        self.user_id = user_id
        self.session_id = session_id
        self.context_id = context_id or None
        self.exclude_ids = tuple(exclude_ids)
        self.until_id = until_id
        self._until = _as_uuid(until_id) if until_id is not None else None

    @property
    def key(self) -> tuple[str, ...]:
        return (str(self.flow_id), str(self.user_id), self.session_id, self.context_id or NO_CONTEXT)

    async def load_state(self) -> MemoryState:
        scope = await self._scope()
        if scope is None:
            return MemoryState()
        from langflow.services.deps import session_scope

        async with session_scope() as session:
            return await session.run_sync(
                lambda sync: StateRows(sync.connection()).load(scope, self.session_id, self.context_id)
            )

    async def load_turn(self, limit: int) -> tuple[MemoryState, list[StoredMessage]]:
        scope = await self._scope()
        if scope is None:
            return MemoryState(), []
        if limit <= 0:
            return await self.load_state(), []
        from langflow.services.deps import session_scope

        excluded = _stored_ids(self.exclude_ids)
        params: dict[str, Any] = {
            "flow_id": scope[0],
            "user_id": scope[1],
            "session_id": self.session_id,
            "state_context_id": self.context_id or NO_CONTEXT,
            "limit": limit,
        }
        if self.context_id:
            params["context_id"] = self.context_id
        params.update({f"excluded_{i}": uid for i, uid in enumerate(excluded)})
        if self._until is not None:
            params["until_id"] = self._until
        stmt = _turn_statement(
            with_context=bool(self.context_id), excluded=len(excluded), until=self._until is not None
        )
        async with session_scope() as session:
            found = (await session.exec(stmt, params=params)).all()
        if not found:
            # No unfolded message to read: the state alone, by its own (stale-checking) read.
            return await self.load_state(), []
        first = found[0]
        if first.state_id is None:
            state = MemoryState()
        elif first.state_cursor_message_id is not None and first.cursor_id is None:
            # The cursor's message is gone: the state is stale, and the read above started at the session's start.
            state = _to_memory_state(first, _STATE_PREFIX).emptied()
        else:
            state = _to_memory_state(first, _STATE_PREFIX)
            if first.cursor_id is not None:
                # The cursor as the read used it: its message's timestamp, so the fold's later reads agree.
                state.cursor = Cursor(as_utc(first.cursor_timestamp), str(first.cursor_id))
        return state, [_to_stored_message(row[0]) for row in reversed(found)]

    async def save_state(self, state: MemoryState, expected_version: int) -> bool:
        if expected_version < 0:
            msg = f"expected_version must be 0 (insert) or a stored version, got {expected_version}"
            raise ValueError(msg)
        scope = await self._scope()
        if scope is None:
            return False
        from langflow.services.deps import session_scope

        now = utcnow()
        async with session_scope() as session:
            saved_row = await session.run_sync(
                lambda sync: StateRows(sync.connection()).save(
                    scope, self.session_id, self.context_id, state, expected_version, now
                )
            )
        if saved_row is None:
            return False
        state.row_id = str(saved_row)
        state.version = expected_version + 1
        state.updated_at = now
        return True

    async def recent(self, limit: int, after: Cursor | None = None) -> list[StoredMessage]:
        scope = await self._scope()
        if scope is None or limit <= 0:
            return []
        filters = self._message_filters(scope)
        if after is not None:
            filters.append(_after(after))
        stmt = select(_message_class()).where(*filters).order_by(*_message_order(ascending=False)).limit(limit)
        return list(reversed(await _read_messages(stmt)))

    async def after(self, cursor: Cursor | None, limit: int) -> list[StoredMessage]:
        scope = await self._scope()
        if scope is None or limit <= 0:
            return []
        filters = self._message_filters(scope)
        if cursor is not None:
            filters.append(_after(cursor))
        stmt = select(_message_class()).where(*filters).order_by(*_message_order(ascending=True)).limit(limit)
        return await _read_messages(stmt)

    async def count_after(self, cursor: Cursor | None, before: Cursor) -> int:
        scope = await self._scope()
        if scope is None:
            return 0
        from langflow.services.deps import session_scope

        filters = self._message_filters(scope)
        if cursor is not None:
            filters.append(_after(cursor))
        filters.append(_before(before))
        async with session_scope() as session:
            stmt = select(func.count()).select_from(_message_class()).where(*filters)
            return int((await session.exec(stmt)).one())

    @asynccontextmanager
    async def fold_lock(self) -> AsyncIterator[bool]:
        async with _FOLD_LOCKS.hold(self.key) as held:
            scope = await self._scope() if held else None
            if scope is None:
                yield False
                return
            from langflow.services.deps import get_db_service, session_scope

            if get_db_service().engine.dialect.name != "postgresql":
                yield True
                return
            async with session_scope() as session:
                # Held until this transaction ends, however the fold ends: no unlock to forget.
                statement = select(func.pg_try_advisory_xact_lock(_advisory_key(self.key)))
                yield bool((await session.exec(statement)).one())

    async def _scope(self) -> _Scope | None:
        if not self.session_id:
            return None
        return await _resolved_flow_and_owner(self.flow_id, self.user_id, owner_required=True)

    def _message_filters(self, scope: _Scope) -> list[ColumnElement[bool]]:
        return _message_terms(scope, self.session_id, self.context_id, _stored_ids(self.exclude_ids), self._until)


class StateRows:
    """The state table on one synchronous connection, inside a transaction its caller runs.

    `LangflowStore` and `LangflowSessionStore` run these in their own transaction; the listeners of `lifecycle` run
    them in the transaction of the Langflow statement they follow.
    """

    def __init__(self, connection: Connection) -> None:
        self.connection = connection

    def exists(self) -> bool:
        """The table is created on first use; before that there is no state to keep in step."""
        return sa_inspect(self.connection).has_table(TABLE_NAME)

    def load(self, scope: _Scope, session_id: str, context_id: str | None) -> MemoryState:
        """One scope's state, emptied when stale; a fresh state without a row."""
        here = _state_where(
            flow_id=scope[0], user_id=scope[1], session_id=session_id, context_id=context_id or NO_CONTEXT
        )
        stmt = sa_select(_TABLE, _is_current().label("is_current")).where(*here)
        found = self.connection.execute(stmt).first()
        if found is None:
            return MemoryState()
        state = _to_memory_state(found)
        return state if found.is_current else state.emptied()

    def states(self, flow_id: UUID, session_id: str, context_id: str | None) -> list[ScopedState]:
        stmt = (
            sa_select(_TABLE, _is_current().label("is_current"))
            .where(*_state_where(flow_id=flow_id, session_id=session_id, context_id=_context_or_any(context_id)))
            .order_by(_TABLE.c.context_id, _TABLE.c.user_id)
        )
        found = []
        for row in self.connection.execute(stmt):
            state = _to_memory_state(row)
            found.append(ScopedState(row.user_id, row.context_id, state if row.is_current else state.emptied()))
        return found

    def save(
        self,
        scope: _Scope,
        session_id: str,
        context_id: str | None,
        state: MemoryState,
        expected_version: int,
        now: datetime,
    ) -> UUID | None:
        """Insert or compare-and-swap one scope's row; the row's id when saved, None when refused."""
        messages = _message_table()
        in_session = and_(
            messages.c.flow_id == scope[0], messages.c.user_id == scope[1], messages.c.session_id == session_id
        )
        if state.cursor is not None:
            in_session = and_(in_session, messages.c.id == UUID(state.cursor.message_id))
        # A deleted session (or cursor message) gets no row back, even from a fold that read it before the delete.
        still_there = exists().where(in_session)
        values = _state_values(state, updated_at=now)
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
        if state.row_id is None:
            return None
        row_id = UUID(state.row_id)
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


async def _ready() -> bool:
    if not session_memory_supported():
        return False
    await ensure_migrated()
    return True


async def _resolved_flow(flow_id: Id | None) -> UUID | None:
    scope = await _resolved_flow_and_owner(flow_id, None)
    return None if scope is None else scope[0]


async def _resolved_flow_and_owner(
    flow_id: Id | None, user_id: Id | None, *, owner_required: bool = False
) -> tuple[UUID, Any] | None:
    """The trusted (flow, owner) of a call, or None to answer "nothing" (unsupported or unresolved).

    The owner is None (every owner) only when none was asked for and none is required.
    """
    if not session_memory_supported():
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
    msg = f"Session memory supports SQLite and PostgreSQL databases, not {dialect!r}"
    raise UnsupportedDatabaseError(msg)


def _state_values(state: MemoryState, *, updated_at: datetime) -> dict[str, Any]:
    cursor = state.cursor
    return {
        "summary": state.summary,
        "pinned": dict(state.pinned),
        "cursor_message_id": None if cursor is None else UUID(cursor.message_id),
        "cursor_timestamp": None if cursor is None else _naive_utc(cursor.timestamp),
        "folded_count": state.folded_count,
        "summary_model": state.summary_model,
        "failed_folds": state.failed_folds,
        "retry_after": None if state.retry_after is None else as_utc(state.retry_after),
        "updated_at": updated_at,
    }


def _to_memory_state(row: Any, prefix: str = "") -> MemoryState:
    """The state of a result row naming the state's columns by key, or `prefix` + key."""

    def value(name: str) -> Any:
        return getattr(row, prefix + name)

    cursor = None
    cursor_id, cursor_at = value("cursor_message_id"), value("cursor_timestamp")
    if cursor_id is not None and cursor_at is not None:
        cursor = Cursor(as_utc(cursor_at), str(cursor_id))
    retry_after = value("retry_after")
    return MemoryState(
        summary=value("summary"),
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
def _turn_statement(*, with_context: bool, excluded: int, until: bool = False) -> Any:
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
    input_ids = [bindparam(f"excluded_{i}", type_=id_type) for i in range(excluded)]
    until_id = bindparam("until_id", type_=id_type) if until else None
    filters = _message_terms(scope, session_id, context, input_ids, until_id)
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
    scope: tuple[Any, Any], session_id: Any, context_id: Any, excluded: Sequence[Any], until: Any = None
) -> list[ColumnElement[bool]]:
    """The session's readable messages without `excluded` and what was stored after it, and up to `until` included
    when given; values or bind parameters."""
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
    if until is not None:
        filters.append(_stored_before(until, inclusive=True))
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


def in_session(key: tuple[str, ...], *, flow_id: UUID, session_id: str, context_id: str | None = None) -> bool:
    """True when a `LangflowSessionStore.key` belongs to the session (and context, when given)."""
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
