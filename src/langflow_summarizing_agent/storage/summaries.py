"""Where a summary row is written: the statements on the summary table, on a connection someone else's
transaction runs.

`SummaryRows` inserts, compare-and-swaps, purges and moves summary rows, and reads a whole session's; a save with a
`Change` keeps the summary as a version, and a purge deletes the rows' versions (`versions.VersionRows`). `store`
runs it in a transaction of its own (a turn's save, the HTTP API's session-wide read and reset); the listeners of
`wiring.lifecycle` run it in the transaction of the Langflow statement that deletes or moves messages. Every write
to the table is here; one read is not: a turn's read joins the summary row to the messages in one statement
(`store._turn_statement`).

The table is `models.TABLE_NAME`, and three of its columns keep the names of the first migration; `models` maps
them to the code's names, and `summary_values()` / `to_summary()` map rows to `Summary` and back.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any
from uuid import UUID, uuid4

from sqlalchemy import Connection, Table, and_, case, delete, exists, func, literal, or_, update
from sqlalchemy import inspect as sa_inspect
from sqlalchemy import select as sa_select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.sql.elements import ColumnElement

from langflow_summarizing_agent.engine.records import NO_CONTEXT, Change, Cursor, Scope, ScopeKey, Summary, as_utc
from langflow_summarizing_agent.storage.messages import message_table
from langflow_summarizing_agent.storage.models import SCOPE_COLUMNS, TABLE_NAME, SessionMemoryStateTable
from langflow_summarizing_agent.storage.versions import VersionRows

__all__ = [
    "SUMMARIES",
    "MessageDeletePlan",
    "Rename",
    "SessionSummary",
    "SummaryRows",
    "UnsupportedDatabaseError",
    "summary_where",
    "to_summary",
]

SUMMARIES = SessionMemoryStateTable.metadata.tables[TABLE_NAME]
"""The one handle on the table. Writes go through the Core table: ORM-enabled DML would add ORM bookkeeping to a
single statement."""

_CHUNK = 500
"""Ids per IN list: far below the bind-parameter limits of SQLite (32766) and Postgres (65535)."""

_Owned = tuple[UUID, UUID]
"""A resolved (flow_id, user_id)."""


class UnsupportedDatabaseError(RuntimeError):
    """Langflow runs on a database other than SQLite or PostgreSQL; the component falls back to last-N."""


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


class SummaryRows:
    """The summary table on one synchronous connection, inside a transaction its caller runs."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection

    def exists(self) -> bool:
        """The table is created by the migration step; before that there is no summary to keep in step."""
        return sa_inspect(self.connection).has_table(TABLE_NAME)

    def load(self, owned: _Owned, session_id: str, context_id: str | None) -> Summary:
        """One scope's summary, emptied when stale; `Summary()` without a row."""
        here = summary_where(
            flow_id=owned[0], user_id=owned[1], session_id=session_id, context_id=context_id or NO_CONTEXT
        )
        stmt = sa_select(SUMMARIES, _is_current().label("is_current")).where(*here)
        found = self.connection.execute(stmt).first()
        if found is None:
            return Summary()
        summary = to_summary(found)
        return summary if found.is_current else summary.emptied()

    def summaries(self, flow_id: UUID, session_id: str, context_id: str | None) -> list[SessionSummary]:
        """The session's summaries, one per owner and context (only `context_id`'s when given), stale ones emptied."""
        stmt = (
            sa_select(SUMMARIES, _is_current().label("is_current"))
            .where(*summary_where(flow_id=flow_id, session_id=session_id, context_id=_context_or_any(context_id)))
            .order_by(SUMMARIES.c.context_id, SUMMARIES.c.user_id)
        )
        found = []
        for row in self.connection.execute(stmt):
            summary = to_summary(row)
            found.append(SessionSummary(row.user_id, row.context_id, summary if row.is_current else summary.emptied()))
        return found

    def save(
        self,
        owned: _Owned,
        session_id: str,
        context_id: str | None,
        summary: Summary,
        now: datetime,
        change: Change | None = None,
    ) -> UUID | None:
        """Insert (version 0) or compare-and-swap (against `summary.version`) one scope's row; the row's id when
        saved, None when refused. With `change`, the summary saved is kept as a version.

        A user's change (an edit, seed or rollback) of a summary with no cursor needs no message in the session: a
        flow may seed a session's pinned facts before its first turn. Any other save needs the session (and the
        cursor's message) to exist."""
        expected_version = summary.version
        messages = message_table()
        in_session = and_(
            messages.c.flow_id == owned[0], messages.c.user_id == owned[1], messages.c.session_id == session_id
        )
        if summary.cursor is not None:
            in_session = and_(in_session, messages.c.id == UUID(summary.cursor.message_id))
        # A deleted session (or cursor message) gets no row back, even from a fold that read it before the delete.
        still_there: ColumnElement[bool] = exists().where(in_session)
        if change is not None and change.kind != "fold" and summary.cursor is None:
            still_there = literal(True)
        values = _summary_values(summary, updated_at=now)
        saved = self._saved(owned, session_id, context_id, summary, values, still_there, now, keep=change is not None)
        if saved is not None and change is not None:
            VersionRows(self.connection).record(saved, expected_version + 1, values, change, now)
        return saved

    def _saved(
        self,
        owned: _Owned,
        session_id: str,
        context_id: str | None,
        summary: Summary,
        values: dict[str, Any],
        still_there: ColumnElement[bool],
        now: datetime,
        *,
        keep: bool,
    ) -> UUID | None:
        expected_version = summary.version
        if expected_version == 0:
            row_id = uuid4()
            row = {
                "id": row_id,
                "flow_id": owned[0],
                "user_id": owned[1],
                "session_id": session_id,
                "context_id": context_id or NO_CONTEXT,
                "version": 1,
                "created_at": now,
                **values,
            }
            names = list(row)
            source = sa_select(*(literal(row[name], SUMMARIES.c[name].type).label(name) for name in names)).where(
                still_there
            )
            insert = _insert_statement(self.connection.dialect.name).from_select(
                [SUMMARIES.c[name] for name in names], source
            )
            # A concurrent insert of the same scope makes this a no-op, not an error. RETURNING tells the two
            # apart: under SQLAlchemy's psycopg dialect an INSERT's rowcount is -1.
            insert = insert.on_conflict_do_nothing(index_elements=list(SCOPE_COLUMNS)).returning(SUMMARIES.c.id)
            return row_id if self.connection.execute(insert).first() is not None else None
        if summary.row_id is None:
            return None
        row_id = UUID(summary.row_id)
        if keep:
            VersionRows(self.connection).record_previous(row_id, expected_version)
        stmt = (
            update(SUMMARIES)
            .where(
                SUMMARIES.c.id == row_id,
                *summary_where(
                    flow_id=owned[0], user_id=owned[1], session_id=session_id, context_id=context_id or NO_CONTEXT
                ),
                SUMMARIES.c.version == expected_version,
                still_there,
            )
            .values(version=SUMMARIES.c.version + 1, **values)
        )
        return row_id if self.connection.execute(stmt).rowcount == 1 else None

    def mark_fold_queued(self, owned: _Owned, session_id: str, context_id: str | None, mark: datetime) -> bool:
        """Mark one scope's row as having a fold queued since `mark`; False without a row."""
        here = summary_where(
            flow_id=owned[0], user_id=owned[1], session_id=session_id, context_id=context_id or NO_CONTEXT
        )
        stmt = update(SUMMARIES).where(*here).values(fold_queued_at=mark)
        return bool(self.connection.execute(stmt).rowcount)

    def clear_fold_queued(self, owned: _Owned, session_id: str, context_id: str | None, mark: datetime) -> None:
        """Clear one scope's mark if it is still `mark`: a fold queued later, here or elsewhere, keeps its own."""
        here = summary_where(
            flow_id=owned[0], user_id=owned[1], session_id=session_id, context_id=context_id or NO_CONTEXT
        )
        stmt = update(SUMMARIES).where(*here, SUMMARIES.c.fold_queued_at == mark).values(fold_queued_at=None)
        self.connection.execute(stmt)

    def fold_queued(self, flow_id: UUID, session_id: str, context_id: str | None, since: datetime) -> bool:
        """Whether a row of the session (of `context_id` when given) was marked after `since` and not cleared."""
        stmt = sa_select(
            exists().where(
                *summary_where(flow_id=flow_id, session_id=session_id, context_id=_context_or_any(context_id)),
                SUMMARIES.c.fold_queued_at > since,
            )
        )
        return bool(self.connection.execute(stmt).scalar())

    def purge(
        self,
        flow_id: UUID,
        *,
        session_ids: Sequence[str],
        user_id: UUID | None = None,
        context_id: str | None = None,
    ) -> int:
        """Delete the summaries of `session_ids` in a flow (of one owner, one context, when given); the rows deleted."""
        deleted = 0
        for chunk in _chunks(session_ids):
            deleted += len(
                self._deleted(
                    *summary_where(flow_id=flow_id, user_id=user_id, context_id=_context_or_any(context_id)),
                    SUMMARIES.c.session_id.in_(chunk),
                )
            )
        return deleted

    def purge_flows(self, flow_ids: Iterable[UUID]) -> list[ScopeKey]:
        """Delete every summary of the flows; the scopes whose summary was deleted."""
        deleted = []
        for chunk in _chunks(flow_ids):
            deleted += self._deleted(SUMMARIES.c.flow_id.in_(chunk))
        return deleted

    def plan_message_delete(self, where: ColumnElement[bool] | None) -> MessageDeletePlan:
        """The summaries of the sessions whose messages match `where`, and which of them folded one."""
        if not self.exists():
            return MessageDeletePlan()
        messages = message_table()
        cursor_timestamp, cursor_id = SUMMARIES.c.cursor_timestamp, SUMMARIES.c.cursor_message_id
        folded = and_(
            _in_summary_context(messages),
            cursor_id.is_not(None),
            or_(
                messages.c.timestamp < cursor_timestamp,
                and_(messages.c.timestamp == cursor_timestamp, messages.c.id <= cursor_id),
            ),
        )
        stmt = (
            sa_select(SUMMARIES.c.id, func.max(case((folded, 1), else_=0)))
            .select_from(SUMMARIES.join(messages, _same_scope(messages)))
            .group_by(SUMMARIES.c.id)
        )
        if where is not None:
            stmt = stmt.where(where)
        plan = MessageDeletePlan()
        for summary_id, has_folded in self.connection.execute(stmt):
            plan.touched.add(summary_id)
            if has_folded:
                plan.folded.add(summary_id)
        return plan

    def apply_message_delete(self, plan: MessageDeletePlan) -> list[ScopeKey]:
        """After the delete, delete what `plan` found: every folded summary, and touched summaries with no message
        left; the scopes whose summary was deleted."""
        messages = message_table()
        left = exists().where(_same_scope(messages), _in_summary_context(messages))
        deleted = []
        for chunk in _chunks(plan.folded):
            deleted += self._deleted(SUMMARIES.c.id.in_(chunk))
        for chunk in _chunks(plan.touched - plan.folded):
            deleted += self._deleted(SUMMARIES.c.id.in_(chunk), ~left)
        return deleted

    def apply_renames(self, renames: Iterable[Rename]) -> int:
        """Move or delete the summaries of renamed sessions; the rows moved."""
        moved = 0
        for rename in renames:
            if rename.old_session_id == rename.new_session_id:
                continue
            owner = summary_where(flow_id=rename.flow_id, user_id=rename.user_id)
            if rename.whole_session and rename.new_session_id is not None:
                # A summary of the new id is stale (it has no messages); the moved summary replaces it.
                self._deleted(*owner, SUMMARIES.c.session_id == rename.new_session_id)
                stmt = (
                    update(SUMMARIES)
                    .where(*owner, SUMMARIES.c.session_id == rename.old_session_id)
                    .values(session_id=rename.new_session_id)
                )
                moved += self.connection.execute(stmt).rowcount
                continue
            sessions = [rename.old_session_id]
            if rename.new_session_id is not None:
                sessions.append(rename.new_session_id)
            self._deleted(*owner, SUMMARIES.c.session_id.in_(sessions))
        return moved

    def count(self, flow_id: UUID | None = None) -> int:
        stmt = sa_select(func.count()).select_from(SUMMARIES)
        if flow_id is not None:
            stmt = stmt.where(SUMMARIES.c.flow_id == flow_id)
        return int(self.connection.execute(stmt).scalar_one())

    def _deleted(self, *where: ColumnElement[bool]) -> list[ScopeKey]:
        """Delete the rows matching `where`, and their versions; their scopes."""
        scope = [SUMMARIES.c[name] for name in SCOPE_COLUMNS]
        rows = self.connection.execute(delete(SUMMARIES).where(*where).returning(SUMMARIES.c.id, *scope)).all()
        VersionRows(self.connection).purge(row[0] for row in rows)
        return [Scope(*row[1:]).key for row in rows]


def summary_where(
    *,
    flow_id: Any,
    user_id: Any = None,
    session_id: Any = None,
    context_id: Any = None,
) -> list[ColumnElement[bool]]:
    """The one scope filter on the summary table: values or bind parameters; None leaves a part open."""
    filters = [SUMMARIES.c.flow_id == flow_id]
    if user_id is not None:
        filters.append(SUMMARIES.c.user_id == user_id)
    if session_id is not None:
        filters.append(SUMMARIES.c.session_id == session_id)
    if context_id is not None:
        filters.append(SUMMARIES.c.context_id == context_id)
    return filters


def to_summary(row: Any, prefix: str = "") -> Summary:
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
        folded_tokens=value("folded_tokens"),
        summary_model=value("summary_model"),
        version=value("version"),
        failed_folds=value("failed_folds"),
        retry_after=None if retry_after is None else as_utc(retry_after),
        fold_failure=value("fold_failure"),
        updated_at=as_utc(value("updated_at")),
        row_id=str(value("id")),
        edited_at=None if value("edited_at") is None else as_utc(value("edited_at")),
        edited_by=None if value("edited_by") is None else str(value("edited_by")),
    )


def _context_or_any(context_id: str | None) -> str | None:
    """A session-wide call's context: None is every context, `""` is "no context"."""
    return None if context_id is None else (context_id or NO_CONTEXT)


def _is_current() -> ColumnElement[bool]:
    """Whether a summary's cursor message is still in its session (without a cursor: any message is, or a user wrote
    the row: a seed before the session's first message)."""
    messages = message_table()
    in_session = _same_scope(messages)
    return or_(
        and_(
            SUMMARIES.c.cursor_message_id.is_(None), or_(SUMMARIES.c.edited_at.is_not(None), exists().where(in_session))
        ),
        exists().where(in_session, messages.c.id == SUMMARIES.c.cursor_message_id),
    )


def _same_scope(messages: Table) -> ColumnElement[bool]:
    return and_(
        messages.c.flow_id == SUMMARIES.c.flow_id,
        messages.c.user_id == SUMMARIES.c.user_id,
        messages.c.session_id == SUMMARIES.c.session_id,
    )


def _in_summary_context(messages: Table) -> ColumnElement[bool]:
    """A summary without a context covers every context of its session, as the fold reads them."""
    return or_(SUMMARIES.c.context_id == NO_CONTEXT, messages.c.context_id == SUMMARIES.c.context_id)


def _insert_statement(dialect: str) -> Any:
    if dialect == "postgresql":
        return postgresql.insert(SUMMARIES)
    if dialect == "sqlite":
        return sqlite.insert(SUMMARIES)
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
        "folded_tokens": summary.folded_tokens,
        "summary_model": summary.summary_model,
        "failed_folds": summary.failed_folds,
        "retry_after": None if summary.retry_after is None else as_utc(summary.retry_after),
        "fold_failure": summary.fold_failure,
        "updated_at": updated_at,
        "edited_at": summary.edited_at,
        "edited_by": None if summary.edited_by is None else UUID(summary.edited_by),
    }


def _chunks(values: Iterable[Any]) -> Iterable[list[Any]]:
    items = list(values)
    for start in range(0, len(items), _CHUNK):
        yield items[start : start + _CHUNK]


def _naive_utc(value: datetime) -> datetime:
    return value if value.tzinfo is None else value.astimezone(timezone.utc).replace(tzinfo=None)
