"""Where a summary's versions are written: the statements on `session_memory_version`, on the connection and in the
transaction of the summary row's own statement (`summaries.SummaryRows`).

Every save given a `Change` keeps the summary it stores as a version, and the newest `versions_kept()` of the row
stay; a row stored before versions were kept has its summary recorded first (change `recorded`), so an edit's
previous summary can always be rolled back to. A row's versions are deleted with it, in the same transaction.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID, uuid4

from sqlalchemy import Connection, delete, exists, insert, literal, select
from sqlalchemy.dialects import postgresql, sqlite

from langflow_summarizing_agent.engine.records import CHANGE_KINDS, Change, ChangeKind, Cursor, Summary, as_utc
from langflow_summarizing_agent.storage.models import TABLE_NAME, VERSION_TABLE_NAME, SessionMemoryVersionTable

__all__ = ["DEFAULT_VERSIONS_KEPT", "VERSIONS", "VERSIONS_KEPT_ENV", "Version", "VersionRows", "versions_kept"]

VERSIONS = SessionMemoryVersionTable.metadata.tables[VERSION_TABLE_NAME]
SUMMARIES = SessionMemoryVersionTable.metadata.tables[TABLE_NAME]
DEFAULT_VERSIONS_KEPT = 20
"""Versions kept per summary (one per owner and context of a session) unless `VERSIONS_KEPT_ENV` says otherwise."""
VERSIONS_KEPT_ENV = "SUMMARIZING_AGENT_VERSIONS_KEPT"
RECORDED = "recorded"
"""The change of a version recorded from a row stored before versions were kept: what made it is not known."""
_CHUNK = 500


def versions_kept() -> int:
    """How many versions each session summary keeps: `VERSIONS_KEPT_ENV`, else `DEFAULT_VERSIONS_KEPT`; 0 keeps none."""
    raw = os.environ.get(VERSIONS_KEPT_ENV, "").strip()
    if not raw:
        return DEFAULT_VERSIONS_KEPT
    try:
        kept = int(raw)
    except ValueError:
        kept = -1
    if kept < 0:
        msg = f"{VERSIONS_KEPT_ENV} must be a whole number of versions (0 keeps none), got {raw!r}"
        raise ValueError(msg)
    return kept


@dataclass(frozen=True)
class Version:
    """One summary a session's row held, and the change that made it (`change.kind`, or `recorded`)."""

    version: int
    summary: Summary
    change: str
    changed_by: str | None
    cost: Change
    """What the change cost and folded (zeros for a user's change)."""
    created_at: datetime


class VersionRows:
    """The version table on one synchronous connection, inside a transaction its caller runs."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection

    def record(self, summary_id: UUID, version: int, values: dict[str, Any], change: Change, now: datetime) -> None:
        """Keep the summary just saved as `version` of row `summary_id` (`values`: the row's columns as saved), then
        trim to the newest `versions_kept()`."""
        kept = versions_kept()
        if kept == 0:
            return
        row = {
            "id": uuid4(),
            "summary_id": summary_id,
            "version": version,
            "summary": values["summary"],
            "pinned": values["pinned"],
            "cursor_message_id": values["cursor_message_id"],
            "cursor_timestamp": values["cursor_timestamp"],
            "folded_count": values["folded_count"],
            "folded_tokens": values["folded_tokens"],
            "summary_model": values["summary_model"],
            "change": change.kind,
            "changed_by": None if change.by is None else UUID(str(change.by)),
            "fold_calls": change.calls,
            "fold_input_tokens": change.input_tokens,
            "fold_output_tokens": change.output_tokens,
            "fold_cached_tokens": change.cached_tokens,
            "folded_messages": change.messages,
            "folded_messages_tokens": change.tokens,
            "rolled_back_to": change.rolled_back_to,
            "created_at": now,
        }
        self.connection.execute(insert(VERSIONS).values(**row))
        self._trim(summary_id, kept)

    def versions(self, summary_id: UUID) -> list[Version]:
        """Row `summary_id`'s versions, newest first."""
        stmt = select(VERSIONS).where(VERSIONS.c.summary_id == summary_id).order_by(VERSIONS.c.version.desc())
        return [_version(row) for row in self.connection.execute(stmt)]

    def version(self, summary_id: UUID, version: int) -> Version | None:
        stmt = select(VERSIONS).where(VERSIONS.c.summary_id == summary_id, VERSIONS.c.version == version)
        row = self.connection.execute(stmt).first()
        return None if row is None else _version(row)

    def purge(self, summary_ids: Iterable[UUID]) -> None:
        """Delete the versions of deleted summary rows."""
        ids = list(summary_ids)
        for start in range(0, len(ids), _CHUNK):
            self.connection.execute(delete(VERSIONS).where(VERSIONS.c.summary_id.in_(ids[start : start + _CHUNK])))

    def record_previous(self, summary_id: UUID, version: int) -> None:
        """Before row `summary_id` is updated from `version`: when it has no version yet (stored before versions were
        kept, or while none were), keep its summary as it stands as a `recorded` version, so an edit can be rolled
        back. Nothing when the row is no longer at `version` (the update will lose) or a concurrent first change
        recorded it first."""
        if versions_kept():
            self.connection.execute(_previous_as_version(self.connection.dialect.name, summary_id, version))

    def _trim(self, summary_id: UUID, kept: int) -> None:
        newest = (
            select(VERSIONS.c.version)
            .where(VERSIONS.c.summary_id == summary_id)
            .order_by(VERSIONS.c.version.desc())
            .limit(kept)
        )
        floor = select(newest.subquery().c.version).order_by("version").limit(1).scalar_subquery()
        self.connection.execute(delete(VERSIONS).where(VERSIONS.c.summary_id == summary_id, VERSIONS.c.version < floor))


def _version(row: Any) -> Version:
    cursor = None
    if row.cursor_message_id is not None and row.cursor_timestamp is not None:
        cursor = Cursor(as_utc(row.cursor_timestamp), str(row.cursor_message_id))
    summary = Summary(
        text=row.summary,
        pinned=dict(row.pinned or {}),
        cursor=cursor,
        folded_count=row.folded_count,
        folded_tokens=row.folded_tokens,
        summary_model=row.summary_model,
        version=row.version,
        row_id=str(row.summary_id),
    )
    changed_by = None if row.changed_by is None else str(row.changed_by)
    # A `recorded` version was made by a fold or a save this package no longer knows: its cost is zero.
    kind: ChangeKind = "fold"
    for known in CHANGE_KINDS:
        if known == row.change:
            kind = known
    cost = Change(
        kind=kind,
        by=changed_by,
        calls=row.fold_calls,
        input_tokens=row.fold_input_tokens,
        output_tokens=row.fold_output_tokens,
        cached_tokens=row.fold_cached_tokens,
        messages=row.folded_messages,
        tokens=row.folded_messages_tokens,
        rolled_back_to=row.rolled_back_to,
    )
    return Version(row.version, summary, row.change, changed_by, cost, as_utc(row.created_at))


def _previous_as_version(dialect: str, summary_id: UUID, version: int) -> Any:
    """An INSERT ... SELECT keeping row `summary_id` at `version` as a `recorded` version (made when the row was last
    updated), when the row has no version yet; run before the row's update."""
    names = [
        "summary",
        "pinned",
        "cursor_message_id",
        "cursor_timestamp",
        "folded_count",
        "folded_tokens",
        "summary_model",
        "version",
    ]
    source = select(
        literal(uuid4(), VERSIONS.c.id.type).label("id"),
        SUMMARIES.c.id.label("summary_id"),
        *(SUMMARIES.c[name].label(name) for name in names),
        literal(RECORDED).label("change"),
        literal(0).label("fold_calls"),
        literal(0).label("fold_input_tokens"),
        literal(0).label("fold_output_tokens"),
        literal(0).label("folded_messages"),
        literal(0).label("folded_messages_tokens"),
        SUMMARIES.c.updated_at.label("created_at"),
    ).where(
        SUMMARIES.c.id == summary_id,
        SUMMARIES.c.version == version,
        ~exists().where(VERSIONS.c.summary_id == summary_id),
    )
    columns = [
        "id",
        "summary_id",
        *names,
        "change",
        "fold_calls",
        "fold_input_tokens",
        "fold_output_tokens",
        "folded_messages",
        "folded_messages_tokens",
        "created_at",
    ]
    statement = (postgresql.insert if dialect == "postgresql" else sqlite.insert)(VERSIONS).from_select(columns, source)
    return statement.on_conflict_do_nothing(index_elements=["summary_id", "version"])
