"""HTTP API to read and reset a session's summary. `plugin.install_routes_and_listeners` serves it.

Routes, under `ROUTE_PREFIX`:

- `GET /sessions/{session_id}/summary?flow_id=...[&context_id=...]`: the session's summaries (summary text, pinned
  values, cursor, how many messages the summary covers, version, summary model, updated time), one per context and
  message owner; `context_id` narrows to one context (`""` is "no context"). A summary whose messages are gone
  reads as empty, as the next turn sees it. A read waits for the session's catch-ups after the reply, queued or running,
  in whichever worker they are (up to `FOLD_WAIT_SECONDS`; `fold_pending` says when one has not saved by then, and
  each summary's `version` which one was read). A first fold, before the session has a summary, is not waited for.
  Each summary carries its `etag` (also the `ETag` header when the answer holds one summary), for the writes of
  `memory_api`: edit, seed and roll back, and read the versions.
- `DELETE` on the same path: reset, after the same wait. The rows are deleted and the next turn rebuilds the summary
  from the stored messages. Without `context_id` every context of the session is reset.
- `/sessions/{session_id}/state` is the same pair under its 0.1.0 path, deprecated; `states` in the answer is the
  same list as `summaries`.

Both use Langflow's authentication and the ownership rules of the monitor endpoints (`api/v1/monitor.py`): the
flow must be one the current user may read (write, to reset); a flow of another user answers the same 404 as a
missing one. Sessions belong to their flow, as in the monitor, so the flow check covers them.
"""

from __future__ import annotations

import asyncio
import time
from datetime import datetime, timedelta
from typing import Annotated, Any, NoReturn
from uuid import UUID

from fastapi import APIRouter, HTTPException, Query, Response, status
from langflow.api.utils import CurrentActiveUser, DbSession
from pydantic import BaseModel, Field

from langflow_summarizing_agent.engine.records import NO_CONTEXT, ScopeKey, Summary, utcnow
from langflow_summarizing_agent.storage.store import (
    reset_session,
    session_fold_queued,
    session_folds_ended,
    session_summaries,
)
from langflow_summarizing_agent.storage.summaries import SessionSummary
from langflow_summarizing_agent.wiring import runtime
from langflow_summarizing_agent.wiring.after_reply import FOLD_WAIT_SECONDS, QUEUED_MARK_SECONDS

__all__ = ["MAX_ID_LENGTH", "ROUTE_PREFIX", "router"]

ROUTE_PREFIX = "/api/v1/summarizing-agent"
MAX_ID_LENGTH = 1024
"""Longest session or context id the API accepts. Langflow sets no limit; ids it makes are far shorter."""
QUEUED_POLL_SECONDS = 0.1
"""How often a read waiting for a fold queued in another worker looks at the summary's mark again."""

router = APIRouter(prefix=ROUTE_PREFIX, tags=["Summarizing Agent"])


class CursorRead(BaseModel):
    """The last message folded into the summary."""

    message_id: UUID
    timestamp: datetime


class SummaryRead(BaseModel):
    context_id: str
    user_id: UUID
    """Owner of the messages the summary was built from (the user who ran the flow)."""
    summary: str
    pinned: dict[str, str]
    cursor: CursorRead | None
    folded_count: int
    """Messages the summary covers."""
    absorbed_count: int = Field(deprecated="Use folded_count; the same number.")
    version: int
    summary_model: str | None
    failed_folds: int
    retry_after: datetime | None
    fold_failure: str | None = None
    """Why the last fold failed, in a few words (never summary text nor a pinned value); None once one succeeds."""
    updated_at: datetime
    edited_at: datetime | None = None
    """When a user last edited, seeded or rolled back this summary; None if never."""
    edited_by: UUID | None = None
    etag: str = ""
    """This summary's version as an HTTP entity tag: send it as `If-Match` to edit or roll back what you read."""


class SessionSummaryRead(BaseModel):
    flow_id: UUID
    session_id: str
    summaries: list[SummaryRead]
    fold_pending: bool = False
    """True when a fold of the session, queued or running in any worker, had not saved after the read waited for it:
    each summary is the one before it (its `version` says which)."""
    fold_running: bool = Field(default=False, deprecated="Use fold_pending; the same value.")
    states: list[SummaryRead] = Field(deprecated="Use summaries; the same list.")


class SessionSummaryReset(BaseModel):
    flow_id: UUID
    session_id: str
    deleted: int


@router.get("/sessions/{session_id}/summary")
@router.get("/sessions/{session_id}/state", deprecated=True, summary="Read Session Summary (use /summary)")
async def read_session_summary(
    session_id: str,
    session: DbSession,
    current_user: CurrentActiveUser,
    response: Response,
    flow_id: Annotated[str | None, Query(description="UUID of the flow the session belongs to")] = None,
    context_id: Annotated[str | None, Query(description="Only this context; empty for 'no context'")] = None,
) -> SessionSummaryRead:
    """The session's summary, one entry per context and message owner."""
    flow_uuid = valid_request(flow_id, session_id, context_id)
    await ensure_flow_or_404(session, flow_uuid, current_user, write=False)
    await ensure_storage()
    pending = not await folds_ended(flow_uuid, session_id, context_id)
    found = await session_summaries(flow_id=flow_uuid, session_id=session_id, context_id=context_id)
    if not found:
        raise HTTPException(
            status_code=status.HTTP_404_NOT_FOUND,
            detail=f"Session {session_id!r} of flow {flow_uuid} has no summary"
            + ("" if context_id is None else f" in context {context_id!r}"),
        )
    summaries = [summary_read(one) for one in found]
    if len(summaries) == 1:
        response.headers["ETag"] = summaries[0].etag
    return SessionSummaryRead(
        flow_id=flow_uuid,
        session_id=session_id,
        summaries=summaries,
        fold_pending=pending,
        fold_running=pending,
        states=summaries,
    )


@router.delete("/sessions/{session_id}/summary")
@router.delete("/sessions/{session_id}/state", deprecated=True, summary="Reset Session Summary (use /summary)")
async def reset_session_summary(
    session_id: str,
    session: DbSession,
    current_user: CurrentActiveUser,
    flow_id: Annotated[str | None, Query(description="UUID of the flow the session belongs to")] = None,
    context_id: Annotated[str | None, Query(description="Only this context; empty for 'no context'")] = None,
) -> SessionSummaryReset:
    """Delete the session's summary; the next turn rebuilds it from the stored messages."""
    flow_uuid = valid_request(flow_id, session_id, context_id)
    await ensure_flow_or_404(session, flow_uuid, current_user, write=True)
    await ensure_storage()
    await folds_ended(flow_uuid, session_id, context_id)
    deleted = await reset_session(flow_id=flow_uuid, session_id=session_id, context_id=context_id)
    return SessionSummaryReset(flow_id=flow_uuid, session_id=session_id, deleted=deleted)


async def folds_ended(flow_id: UUID, session_id: str, context_id: str | None) -> bool:
    """Wait for the session's catch-ups after the reply, queued or running, in this worker and in any other: a read or
    reset right after a turn sees what the catch-up after its reply saved, wherever it lands, even when that fold waits
    for a place. False when one has not ended after `FOLD_WAIT_SECONDS`."""
    deadline = time.monotonic() + FOLD_WAIT_SECONDS
    await runtime.current().timing.wait_for(
        lambda key: _in_session(key, flow_id=flow_id, session_id=session_id, context_id=context_id)
    )
    # Another worker's queued fold holds no lock yet: the mark on the summary tells of it.
    while await session_fold_queued(
        flow_id=flow_id,
        session_id=session_id,
        context_id=context_id,
        since=utcnow() - timedelta(seconds=QUEUED_MARK_SECONDS),
    ):
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(QUEUED_POLL_SECONDS)
    left = max(deadline - time.monotonic(), QUEUED_POLL_SECONDS)
    return await session_folds_ended(flow_id=flow_id, session_id=session_id, timeout_seconds=left)


def _in_session(key: ScopeKey, *, flow_id: UUID, session_id: str, context_id: str | None) -> bool:
    """True when a `Scope.key` belongs to the session (and context, when given)."""
    flow, _, session, context = key
    if session != session_id or (context_id is not None and context != (context_id or NO_CONTEXT)):
        return False
    try:
        return UUID(flow) == flow_id
    except ValueError:
        return False


def valid_request(flow_id: str | None, session_id: str, context_id: str | None) -> UUID:
    """The flow id as a UUID; refuses ids no session can have, saying which and why."""
    if flow_id is None or not flow_id.strip():
        _refuse("flow_id is required: pass the UUID of the flow the session belongs to, as ?flow_id=...")
    try:
        flow_uuid = UUID(flow_id.strip())
    except ValueError:
        _refuse(f"flow_id must be a flow's UUID (like 3fa85f64-5717-4562-b3fc-2c963f66afa6), got {flow_id[:80]!r}")
    if not session_id.strip():
        _refuse("session_id must not be empty or blank")
    for name, value in (("session_id", session_id), ("context_id", context_id)):
        if value is not None and len(value) > MAX_ID_LENGTH:
            _refuse(f"{name} is {len(value)} characters long; at most {MAX_ID_LENGTH} are accepted")
    return flow_uuid


def _refuse(detail: str) -> NoReturn:
    raise HTTPException(status_code=status.HTTP_422_UNPROCESSABLE_ENTITY, detail=detail)


async def ensure_flow_or_404(session: Any, flow_id: UUID, user: Any, *, write: bool) -> Any:
    """The monitor's flow check (`_ensure_flow_action_or_404`), with a denial answered like a missing flow; the flow
    (its row as loaded; a virtual flow id gives a row of None)."""
    from langflow.services.authorization import FlowAction, ensure_flow_permission
    from langflow.services.authorization.fetch import authorized_or_owner_scoped, deny_to_404
    from langflow.services.database.models.flow.model import Flow, is_virtual_flow_id

    not_found = f"Flow {flow_id} not found"
    flow = None
    if not is_virtual_flow_id(flow_id):
        # SQLModel types the column attributes as their values; they are the columns the helper expects.
        flow = await authorized_or_owner_scoped(
            session,
            Flow,
            id_column=Flow.id,  # type: ignore[arg-type]
            resource_id=flow_id,
            owner_column=Flow.user_id,  # type: ignore[arg-type]
            owner_id=user.id,
        )
    # The flow check is the request's one use of its database session. Ending its transaction returns the connection
    # to the pool (Langflow's sessions keep loaded rows on commit), so a read or reset that then waits for a catch-up,
    # up to FOLD_WAIT_SECONDS, holds none.
    await session.commit()
    if flow is None:
        raise HTTPException(status_code=status.HTTP_404_NOT_FOUND, detail=not_found)
    try:
        await ensure_flow_permission(
            user,
            FlowAction.WRITE if write else FlowAction.READ,
            flow_id=flow.id,
            flow_user_id=flow.user_id,
            workspace_id=getattr(flow, "workspace_id", None),
            folder_id=getattr(flow, "folder_id", None),
        )
    except HTTPException as exc:
        raise deny_to_404(exc, detail=not_found) from exc
    return flow


async def ensure_storage() -> None:
    try:
        await runtime.current().ready()
    except Exception as exc:
        raise HTTPException(
            status_code=status.HTTP_503_SERVICE_UNAVAILABLE,
            detail=f"The summary table is not ready ({exc}); run `langflow summarizing-agent migrate`.",
        ) from exc


def summary_read(found: SessionSummary) -> SummaryRead:
    summary = found.summary
    cursor = None
    if summary.cursor is not None:
        cursor = CursorRead(message_id=UUID(summary.cursor.message_id), timestamp=summary.cursor.timestamp)
    return SummaryRead(
        context_id=found.context_id,
        user_id=found.user_id,
        summary=summary.text,
        pinned=dict(summary.pinned),
        cursor=cursor,
        folded_count=summary.folded_count,
        absorbed_count=summary.folded_count,
        version=summary.version,
        summary_model=summary.summary_model,
        failed_folds=summary.failed_folds,
        retry_after=summary.retry_after,
        fold_failure=summary.fold_failure,
        updated_at=summary.updated_at,
        edited_at=summary.edited_at,
        edited_by=None if summary.edited_by is None else UUID(summary.edited_by),
        etag=etag(summary),
    )


def etag(summary: Summary) -> str:
    """A summary's row and version as a strong entity tag; `'"0"'` when nothing is stored."""
    return f'"{summary.row_id}.{summary.version}"' if summary.row_id else '"0"'
