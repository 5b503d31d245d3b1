"""The engine's `SessionStore` on Langflow's database, and the HTTP API's session-wide read and reset.

- `DatabaseStore` serves one scope: a turn's read is one statement (`load_turn`), a save one more. It reads
  messages through `messages` and writes the summary row through `summaries.SummaryRows`, each call in a
  transaction of its own. Its fold lock is the process's `HeldScopes`, and on PostgreSQL an advisory lock too.
- `session_summaries()` and `reset_session()` read and reset a whole session; `session_fold_queued()` and
  `session_folds_ended()` tell whether a fold of it is queued or running in any worker.

Nothing here migrates: the summary table is brought to head by `wiring.runtime.Runtime.ready()` (or
`langflow summarizing-agent migrate`) before a store is used.

Scope: flow and owner are resolved once per store (or call) with `langflow_private.message_scope`, the check
behind Langflow's own `aget_messages()`: inside a graph run the executing graph's flow and owner win, and a caller
asking for another flow or owner gets nothing (an empty summary, None, [] or 0) rather than someone else's rows.
Outside a graph run both ids must be given and valid (a read or reset of a whole session may leave the owner
out: every owner).

Without a Langflow database (standalone `lfx`, or langflow installed but its services not initialised) every call
answers "nothing" the same way, without raising, so the component can fall back to last-N. Database errors raise.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import replace
from datetime import datetime
from functools import cache
from typing import Any, TypeVar
from uuid import UUID

from alembic.util.exc import CommandError
from lfx.utils.langflow_utils import has_langflow_db_backend
from sqlalchemy import Integer, and_, bindparam, func, or_
from sqlalchemy import inspect as sa_inspect
from sqlalchemy import select as sa_select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.sql.elements import ColumnElement
from sqlmodel import col, select

from langflow_summarizing_agent.engine.records import (
    NO_CONTEXT,
    Change,
    Cursor,
    Id,
    Scope,
    StoredMessage,
    Summary,
    as_utc,
    utcnow,
)
from langflow_summarizing_agent.engine.store import HeldScopes
from langflow_summarizing_agent.storage import messages as message_reads
from langflow_summarizing_agent.storage.summaries import (
    SUMMARIES,
    SessionSummary,
    SummaryRows,
    summary_where,
    to_summary,
)

__all__ = ["DatabaseStore", "database_available", "reset_session", "session_fold_queued", "session_summaries"]

_T = TypeVar("_T")
_Owned = tuple[UUID, Any]
"""A resolved (flow_id, user_id); the owner is None in a session-wide call that names none (every owner)."""

_ADVISORY_NAMESPACE = b"langflow_summarizing_agent.fold"
_LOCK_NOT_AVAILABLE = "55P03"
"""PostgreSQL's SQLSTATE for a lock wait that passed `lock_timeout`."""

_UNRESOLVED: Any = object()


def database_available() -> bool:
    """True when Langflow's database is available; False under standalone lfx or before services start."""
    return has_langflow_db_backend()


STORE_FAILURES: tuple[type[BaseException], ...] = (SQLAlchemyError, OSError, TimeoutError, CommandError)
"""What the database, its connection or the summary table's migration raise: a failing store, not a defect."""


def failure_note(exc: BaseException) -> str:
    """How a turn reports an exception on its memory path: a failing store as one, any other exception as the
    unexpected error it is (a defect to report), both named by type."""
    if isinstance(exc, STORE_FAILURES):
        return f"summary store unavailable ({type(exc).__name__})"
    return f"unexpected error ({type(exc).__name__}: {str(exc)[:200]})"


class DatabaseStore:
    """The engine's `SessionStore` for one scope on Langflow's database.

    Reads end before `before` (the current turn's input: it is stored when history is read, and the Agent receives
    it as the input), leaving out what concurrent runs stored after it; or with `through`, included (what the fold
    after the reply reads). At most one of the two. `locks` are the fold locks this process holds (one per
    process, kept by its `Runtime`).
    """

    def __init__(self, scope: Scope, *, locks: HeldScopes, before: Id | None = None, through: Id | None = None) -> None:
        if before is not None and through is not None:
            msg = "a store's reads end before one message or through one, not both"
            raise ValueError(msg)
        self._scope = scope
        self._locks = locks
        self._before = message_reads.as_message_id(before) if before is not None else None
        self._through = message_reads.as_message_id(through) if through is not None else None
        self._owned: _Owned | None = _UNRESOLVED

    @property
    def scope(self) -> Scope:
        return self._scope

    async def load(self) -> Summary:
        owned = self._resolved()
        if owned is None:
            return Summary()
        return await on_rows(lambda rows: rows.load(owned, self.scope.session_id, self.scope.context_id))

    async def load_turn(self, limit: int) -> tuple[Summary, list[StoredMessage]]:
        owned = self._resolved()
        if owned is None:
            return Summary(), []
        if limit <= 0:
            return await self.load(), []
        from langflow.services.deps import session_scope

        context_id = self.scope.context_id
        params: dict[str, Any] = {
            "flow_id": owned[0],
            "user_id": owned[1],
            "session_id": self.scope.session_id,
            "summary_context_id": context_id or NO_CONTEXT,
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
        if first.summary_id is None:
            summary = Summary()
        elif first.summary_cursor_message_id is not None and first.cursor_id is None:
            # The cursor's message is gone: the summary is stale, and the read above started at the session's start.
            summary = to_summary(first, _SUMMARY_PREFIX).emptied()
        else:
            summary = to_summary(first, _SUMMARY_PREFIX)
            if first.cursor_id is not None:
                # The cursor as the read used it: its message's timestamp, so the fold's later reads agree.
                summary = replace(summary, cursor=Cursor(as_utc(first.cursor_timestamp), str(first.cursor_id)))
        return summary, [message_reads.to_stored_message(row[0]) for row in reversed(found)]

    async def save(self, summary: Summary, change: Change | None = None) -> Summary | None:
        if summary.version < 0:
            msg = f"a summary's version is 0 (nothing stored) or a stored version, got {summary.version}"
            raise ValueError(msg)
        owned = self._resolved()
        if owned is None:
            return None
        now = utcnow()
        saved_row = await on_rows(
            lambda rows: rows.save(owned, self.scope.session_id, self.scope.context_id, summary, now, change)
        )
        if saved_row is None:
            return None
        return replace(summary, row_id=str(saved_row), version=summary.version + 1, updated_at=now)

    async def messages(
        self, *, limit: int, after: Cursor | None = None, before: Cursor | None = None, newest: bool = False
    ) -> list[StoredMessage]:
        owned = self._resolved()
        if owned is None or limit <= 0:
            return []
        filters = self._message_filters(owned, after, before)
        return await message_reads.read_messages(filters, limit=limit, newest=newest)

    async def count(self, *, after: Cursor | None = None, before: Cursor | None = None) -> int:
        owned = self._resolved()
        if owned is None:
            return 0
        from langflow.services.deps import session_scope

        filters = self._message_filters(owned, after, before)
        async with session_scope() as session:
            stmt = select(func.count()).select_from(message_reads.message_class()).where(*filters)
            return int((await session.exec(stmt)).one())

    async def mark_fold_queued(self) -> datetime | None:
        owned = self._resolved()
        if owned is None:
            return None
        mark = utcnow()
        marked = await on_rows(
            lambda rows: rows.mark_fold_queued(owned, self.scope.session_id, self.scope.context_id, mark)
        )
        return mark if marked else None

    async def clear_fold_queued(self, mark: datetime) -> None:
        owned = self._resolved()
        if owned is not None:
            await on_rows(
                lambda rows: rows.clear_fold_queued(owned, self.scope.session_id, self.scope.context_id, mark)
            )

    @asynccontextmanager
    async def fold_lock(self) -> AsyncIterator[bool]:
        key = self.scope.key
        async with self._locks.hold(key) as held:
            if not held or self._resolved() is None:
                yield False
                return
            from langflow.services.deps import get_db_service, session_scope

            if get_db_service().engine.dialect.name != "postgresql":
                yield True
                return
            async with session_scope() as session:
                # Held until this transaction ends, however the fold ends: no unlock to forget.
                statement = select(func.pg_try_advisory_xact_lock(_advisory_key(key)))
                held = bool((await session.exec(statement)).one())
                if held:
                    # Shared by every running fold of the session, in any worker: `session_folds_ended` waits on it.
                    session_key = _session_key(self.scope.flow_id, self.scope.session_id)
                    await session.exec(select(func.pg_advisory_xact_lock_shared(session_key)))
                yield held

    def _resolved(self) -> _Owned | None:
        """The scope's trusted (flow, owner), resolved on first use; None to answer "nothing"."""
        if self._owned is _UNRESOLVED:
            self._owned = (
                trusted_owner(self.scope.flow_id, self.scope.user_id, owner_required=True)
                if self.scope.session_id
                else None
            )
        return self._owned

    def _message_filters(self, owned: _Owned, after: Cursor | None, before: Cursor | None) -> list[ColumnElement[bool]]:
        filters = message_reads.message_terms(
            owned, self.scope.session_id, self.scope.context_id, self._before, self._through
        )
        if after is not None:
            filters.append(message_reads.after(after))
        if before is not None:
            filters.append(message_reads.before(before))
        return filters


async def session_summaries(*, flow_id: Id, session_id: str, context_id: str | None = None) -> list[SessionSummary]:
    """The session's summaries, one per owner and context (only `context_id`'s when given), stale ones emptied."""
    owned = trusted_owner(flow_id, None)
    if owned is None or not session_id:
        return []
    return await on_rows(lambda rows: rows.summaries(owned[0], session_id, context_id))


async def session_fold_queued(*, flow_id: Id, session_id: str, context_id: str | None = None, since: datetime) -> bool:
    """Whether a catch-up after the reply, queued or running in any worker, marked the session's summary (of
    `context_id` when given) after `since` and has not ended."""
    owned = trusted_owner(flow_id, None)
    if owned is None or not session_id:
        return False
    return await on_rows(lambda rows: rows.fold_queued(owned[0], session_id, context_id, since))


async def session_folds_ended(*, flow_id: Id, session_id: str, timeout_seconds: float) -> bool:
    """Wait up to `timeout_seconds` for the session's folds running in any worker; False when one still runs.

    On PostgreSQL every fold holds the session's advisory lock in shared mode, so taking it exclusively waits for
    them all. On SQLite the folds run in the one worker, which waits for its own (`FoldTiming.wait_for`).
    """
    if not database_available():
        return True
    from langflow.services.deps import get_db_service, session_scope
    from sqlalchemy.exc import DBAPIError

    if get_db_service().engine.dialect.name != "postgresql":
        return True
    try:
        async with session_scope() as session:
            # `SET LOCAL lock_timeout`: the wait ends with this transaction's first lock error past the timeout.
            lock_timeout = f"{max(1, round(timeout_seconds * 1000))}ms"
            await session.exec(select(func.set_config("lock_timeout", lock_timeout, True)))
            await session.exec(select(func.pg_advisory_xact_lock(_session_key(flow_id, session_id))))
    except DBAPIError as exc:
        if getattr(exc.orig, "sqlstate", None) == _LOCK_NOT_AVAILABLE:
            return False
        raise
    return True


async def reset_session(*, flow_id: Id, session_id: str, context_id: str | None = None) -> int:
    """Delete the session's summaries (every context unless `context_id` is given); the rows deleted."""
    owned = trusted_owner(flow_id, None)
    if owned is None or not session_id:
        return 0
    return await on_rows(lambda rows: rows.purge(owned[0], session_ids=[session_id], context_id=context_id))


async def on_rows(action: Callable[[SummaryRows], _T]) -> _T:
    """Run `action(SummaryRows)` in a transaction of its own."""
    from langflow.services.deps import session_scope

    async with session_scope() as session:
        return await session.run_sync(lambda sync: action(SummaryRows(sync.connection())))


def trusted_owner(flow_id: Id | None, user_id: Id | None, *, owner_required: bool = False) -> _Owned | None:
    """The trusted (flow, owner) of a call, or None to answer "nothing" (no database, or unresolved).

    The owner is None (every owner) only when none was asked for and none is required.
    """
    if not database_available():
        return None
    from langflow_summarizing_agent import langflow_private

    resolved_flow, resolved_owner = langflow_private.message_scope(flow_id, user_id)
    # An owner that was given but does not resolve must not widen a call to every owner.
    if resolved_flow is None or (resolved_owner is None and (owner_required or user_id is not None)):
        return None
    return resolved_flow, resolved_owner


def _session_key(flow_id: Id | None, session_id: str) -> int:
    """The advisory lock key of a whole session of a flow (every owner and context)."""
    try:
        flow = str(UUID(str(flow_id)))
    except ValueError:
        flow = str(flow_id)
    return _advisory_key(("session", flow, session_id))


def _advisory_key(key: tuple[str, ...]) -> int:
    """A scope as a PostgreSQL advisory lock key (a signed 64-bit integer)."""
    digest = hashlib.blake2b("\x1f".join(key).encode(), digest_size=8, key=_ADVISORY_NAMESPACE).digest()
    return int.from_bytes(digest, "big", signed=True)


_SUMMARY_PREFIX = "summary_"
_TURN_SUMMARY_COLUMNS = tuple(
    SUMMARIES.c[name].label(_SUMMARY_PREFIX + name)
    for name in (
        "id",
        "summary",
        "pinned",
        "cursor_message_id",
        "cursor_timestamp",
        "folded_count",
        "folded_tokens",
        "summary_model",
        "version",
        "failed_folds",
        "retry_after",
        "fold_failure",
        "updated_at",
        "edited_at",
        "edited_by",
    )
)


@cache
def _turn_statement(*, with_context: bool, before: bool, through: bool) -> Any:
    """`load_turn`'s statement, built once per shape; the scope, input ids and limit are bound when it runs.

    The newest `:limit` messages after the summary's cursor (all when there is none), newest first. Each row
    carries the summary's columns (NULL without a summary row) and the cursor's message id (NULL when the cursor's
    message is gone). The cursor is read from its message row, so the keyset bound compares `message.timestamp`
    with itself, and a plain range term lets the index stop at the cursor.

    Built once because building it and computing its cache key cost more than running it.
    """
    from langflow.services.database.models.message.model import MessageTable

    owned: tuple[Any, Any] = (bindparam("flow_id"), bindparam("user_id"))
    session_id: Any = bindparam("session_id")
    cursor_message = message_reads.message_alias("cursor_message")
    summary_here = summary_where(
        flow_id=owned[0], user_id=owned[1], session_id=session_id, context_id=bindparam("summary_context_id")
    )

    # The cursor's message, looked up once and referenced by the bounds below.
    cursor = (
        select(col(cursor_message.timestamp).label("timestamp"), col(cursor_message.id).label("id"))
        .select_from(SUMMARIES)
        .join(
            cursor_message,
            and_(
                col(cursor_message.id) == SUMMARIES.c.cursor_message_id,
                col(cursor_message.flow_id) == owned[0],
                col(cursor_message.user_id) == owned[1],
                col(cursor_message.session_id) == session_id,
            ),
        )
        .where(*summary_here)
        .cte("turn_cursor")
    )
    cursor_timestamp = select(cursor.c.timestamp).scalar_subquery()
    cursor_id = select(cursor.c.id).scalar_subquery()
    lower = func.coalesce(cursor_timestamp, message_reads.EARLIEST)
    context: Any = bindparam("context_id") if with_context else None
    id_type = sa_inspect(MessageTable).columns["id"].type
    before_id = bindparam("before_id", type_=id_type) if before else None
    through_id = bindparam("through_id", type_=id_type) if through else None
    filters = message_reads.message_terms(owned, session_id, context, before_id, through_id)
    filters += [
        col(MessageTable.timestamp) >= lower,
        or_(col(MessageTable.timestamp) > lower, col(MessageTable.id) > cursor_id),
    ]
    return (
        sa_select(
            MessageTable,
            *_TURN_SUMMARY_COLUMNS,
            cursor_timestamp.label("cursor_timestamp"),
            cursor_id.label("cursor_id"),
        )
        .outerjoin(SUMMARIES, and_(*summary_here))
        .where(*filters)
        .order_by(*message_reads.message_order(ascending=False))
        .limit(bindparam("limit", type_=Integer))
    )
