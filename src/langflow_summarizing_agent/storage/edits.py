"""A user's writes to a session's memory, and the reads of its versions: what the session summary API's edit, seed,
rollback and version routes run (`wiring.memory_api`).

Every write is a compare-and-swap on the summary row's id and version, the one a fold's save makes too
(`summaries.SummaryRows.save`): a write based on what another write (a fold, another edit) replaced is refused
with `StaleVersionError`, and a fold that read the summary before an edit loses its save instead of overwriting
the edit, then folds its messages again on top of the edit (`engine.fold.catch_up`). A write keeps the cursor, so
no message is folded twice or lost.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from uuid import UUID

from langflow_summarizing_agent.engine.records import NO_CONTEXT, Change, Summary, utcnow
from langflow_summarizing_agent.storage.store import on_rows, trusted_owner
from langflow_summarizing_agent.storage.summaries import SessionSummary, SummaryRows
from langflow_summarizing_agent.storage.versions import Version, VersionRows

__all__ = [
    "Expected",
    "MemoryEdit",
    "NoSuchOwnerError",
    "NoSuchVersionError",
    "StaleVersionError",
    "session_versions",
    "write_session_memory",
]


@dataclass(frozen=True)
class Expected:
    """The summary a write is based on: a row's id and version (HTTP `If-Match`), or none (`If-None-Match: *`)."""

    row_id: str | None = None
    version: int = 0
    """0: no summary is stored yet (a seed)."""
    any_version: bool = False
    """Whatever summary is stored (`If-Match: *`): refused only when none is."""


@dataclass(frozen=True)
class MemoryEdit:
    """A user's change: the summary text replaced, pinned facts set (a value) or cleared (None); or a rollback."""

    summary: str | None = None
    pinned: Mapping[str, str | None] = field(default_factory=dict)
    rollback_to: int | None = None
    """Restore this version's summary text and pinned facts (as a new version; the cursor stays)."""


class StaleVersionError(Exception):
    """The summary is not the one the write was based on: another write (a fold, another edit) came first."""

    def __init__(self, current: SessionSummary | None) -> None:
        self.current = current
        super().__init__("the summary changed since it was read" if current else "the summary does not exist")


class NoSuchVersionError(LookupError):
    """A rollback to a version the session does not keep."""


class NoSuchOwnerError(LookupError):
    """The flow or the owner named does not resolve (no such user, or no database)."""


async def write_session_memory(
    *,
    flow_id: UUID,
    user_id: UUID,
    session_id: str,
    context_id: str | None,
    expected: Expected,
    edit: MemoryEdit,
    by: UUID,
) -> SessionSummary:
    """Apply `edit` to the summary of one scope (`context_id` None or `""`: no context) if it is still `expected`;
    the summary as saved. Raises `StaleVersionError` or `NoSuchVersionError`."""
    scope = trusted_owner(flow_id, user_id)
    if scope is None:
        raise NoSuchOwnerError(str(user_id))
    context = context_id or NO_CONTEXT

    def write(rows: SummaryRows) -> SessionSummary:
        current = _one(rows.summaries(flow_id, session_id, context), user_id)
        found = (None, 0) if current is None else (current.summary.row_id, current.summary.version)
        if expected.any_version and current is None:
            raise StaleVersionError(None)
        if not expected.any_version and found != (expected.row_id if expected.version else None, expected.version):
            raise StaleVersionError(current)
        base = Summary() if current is None else current.summary
        now = utcnow()
        summary, change = _changed(rows, base, edit, by=str(by))
        summary = replace(summary, edited_at=now, edited_by=str(by))
        saved = rows.save(scope, session_id, context, summary, now, change)
        if saved is None:
            raise StaleVersionError(current)
        stored = replace(summary, row_id=str(saved), version=base.version + 1, updated_at=now)
        return SessionSummary(user_id, context, stored)

    return await on_rows(write)


async def session_versions(
    *, flow_id: UUID, user_id: UUID | None, session_id: str, context_id: str | None
) -> list[tuple[SessionSummary, list[Version]]]:
    """Each summary of the session (of one owner and context, when given) with its versions, newest first."""
    scope = trusted_owner(flow_id, None)
    if scope is None or not session_id:
        return []

    def read(rows: SummaryRows) -> list[tuple[SessionSummary, list[Version]]]:
        found = rows.summaries(flow_id, session_id, context_id)
        versions = VersionRows(rows.connection)
        return [
            (one, versions.versions(UUID(one.summary.row_id)))
            for one in found
            if one.summary.row_id and (user_id is None or one.user_id == user_id)
        ]

    return await on_rows(read)


def _one(found: list[SessionSummary], user_id: UUID) -> SessionSummary | None:
    return next((one for one in found if one.user_id == user_id), None)


def _changed(rows: SummaryRows, base: Summary, edit: MemoryEdit, *, by: str) -> tuple[Summary, Change]:
    if edit.rollback_to is not None:
        version = (
            None if base.row_id is None else VersionRows(rows.connection).version(UUID(base.row_id), edit.rollback_to)
        )
        if version is None:
            msg = f"version {edit.rollback_to} is not kept for this summary"
            raise NoSuchVersionError(msg)
        restored = replace(base, text=version.summary.text, pinned=dict(version.summary.pinned))
        return restored, Change(kind="rollback", by=by, rolled_back_to=edit.rollback_to)
    pinned = dict(base.pinned)
    for key, value in edit.pinned.items():
        if value is None:
            pinned.pop(key, None)
        else:
            pinned[key] = value
    text = base.text if edit.summary is None else edit.summary
    return replace(base, text=text, pinned=pinned), Change(kind="edit" if base.version else "seed", by=by)
