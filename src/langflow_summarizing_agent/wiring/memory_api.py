"""HTTP API to edit, seed and roll back a session's memory, and to read its versions. `plugin` serves it beside
`api` (read and reset), under the same `api.ROUTE_PREFIX`, with the same authentication and ownership rules
(writes need the flow's write permission, as a reset does).

Routes, each with `?flow_id=...[&context_id=...][&user_id=...]` naming one summary (`context_id` empty or left out:
"no context"; `user_id`: the owner of the session's messages, by default the flow's owner):

- `PATCH /sessions/{session_id}/summary`, body `{"summary": "...", "pinned": {"customer": "Acme", "cluster": null}}`:
  replace the summary text and set (a string) or clear (null) pinned facts, keys from the flow's Pinned Keys.
  `If-Match: <etag>` edits the summary read (its `etag` from the GET); `If-None-Match: *` seeds a session that has
  no summary yet, e.g. its pinned facts before its first turn.
- `POST /sessions/{session_id}/summary/rollback`, body `{"version": 3}`, with `If-Match`: restore that version's
  summary text and pinned facts, as a new version; the cursor stays, so no message is folded twice or lost.
- `GET /sessions/{session_id}/summary/versions`: each summary of the session with its kept versions, newest first,
  each with what made it (a fold and its cost, or a user's edit, seed or rollback).

A write based on a version that is no longer current answers 412 with the current summary; a write without
`If-Match` or `If-None-Match` answers 428. Each answer carries the new `ETag`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, NoReturn
from uuid import UUID

from fastapi import APIRouter, Body, Header, HTTPException, Query, Response, status
from langflow.api.utils import CurrentActiveUser, DbSession
from pydantic import BaseModel, Field

from langflow_summarizing_agent.engine.prompt import PINNED_VALUE_CHARS, count_words
from langflow_summarizing_agent.engine.settings import DEFAULT_SUMMARY_WORDS, FIELD_NAMES, pinned_keys_from
from langflow_summarizing_agent.storage.edits import (
    Expected,
    MemoryEdit,
    NoSuchOwnerError,
    NoSuchVersionError,
    StaleVersionError,
    session_versions,
    write_session_memory,
)
from langflow_summarizing_agent.storage.versions import Version
from langflow_summarizing_agent.wiring.api import (
    ROUTE_PREFIX,
    SummaryRead,
    ensure_flow_or_404,
    ensure_storage,
    etag,
    summary_read,
    valid_request,
)

__all__ = ["router"]

router = APIRouter(prefix=ROUTE_PREFIX, tags=["Summarizing Agent"])

ContextQuery = Annotated[str | None, Query(description="Only this context; empty or left out for 'no context'")]
OwnerQuery = Annotated[
    str | None, Query(description="Owner of the session's messages (the user who ran the flow); default: the flow's")
]
FlowQuery = Annotated[str | None, Query(description="UUID of the flow the session belongs to")]


class MemoryWrite(BaseModel):
    """An edit: the summary text to store, and pinned facts to set (a string) or clear (null)."""

    summary: str | None = Field(default=None, description="The new summary text; left out: unchanged")
    pinned: dict[str, str | None] = Field(default_factory=dict, description="Pinned facts to set, or clear with null")


class Rollback(BaseModel):
    version: int = Field(description="The version to restore, from GET .../summary/versions")


class VersionRead(BaseModel):
    version: int
    change: str
    """fold, edit, seed or rollback; `recorded` for a summary stored before versions were kept."""
    changed_by: UUID | None
    summary: str
    pinned: dict[str, str]
    folded_count: int
    """Messages the summary covers."""
    summary_model: str | None
    fold_calls: int
    fold_input_tokens: int
    fold_output_tokens: int
    fold_cached_tokens: int | None
    folded_messages: int
    """Messages this fold folded."""
    folded_messages_tokens: int
    rolled_back_to: int | None
    created_at: datetime


class SummaryVersions(BaseModel):
    context_id: str
    user_id: UUID
    version: int
    """The current version."""
    etag: str
    versions: list[VersionRead]


class SessionVersions(BaseModel):
    flow_id: UUID
    session_id: str
    summaries: list[SummaryVersions]


@router.patch("/sessions/{session_id}/summary")
async def edit_session_summary(
    session_id: str,
    session: DbSession,
    current_user: CurrentActiveUser,
    response: Response,
    write: Annotated[MemoryWrite, Body()],
    flow_id: FlowQuery = None,
    context_id: ContextQuery = None,
    user_id: OwnerQuery = None,
    if_match: Annotated[str | None, Header()] = None,
    if_none_match: Annotated[str | None, Header()] = None,
) -> SummaryRead:
    """Edit the session's summary text and pinned facts (`If-Match`), or seed them (`If-None-Match: *`)."""
    flow_uuid = valid_request(flow_id, session_id, context_id)
    flow = await ensure_flow_or_404(session, flow_uuid, current_user, write=True)
    expected = _expected(if_match, if_none_match)
    edit = _valid_edit(write, flow)
    await ensure_storage()
    return await _write(response, flow, flow_uuid, session_id, context_id, user_id, expected, edit, current_user.id)


@router.post("/sessions/{session_id}/summary/rollback")
async def roll_back_session_summary(
    session_id: str,
    session: DbSession,
    current_user: CurrentActiveUser,
    response: Response,
    rollback: Annotated[Rollback, Body()],
    flow_id: FlowQuery = None,
    context_id: ContextQuery = None,
    user_id: OwnerQuery = None,
    if_match: Annotated[str | None, Header()] = None,
) -> SummaryRead:
    """Restore a kept version's summary text and pinned facts as a new version; the cursor stays."""
    flow_uuid = valid_request(flow_id, session_id, context_id)
    flow = await ensure_flow_or_404(session, flow_uuid, current_user, write=True)
    expected = _expected(if_match, None)
    await ensure_storage()
    edit = MemoryEdit(rollback_to=rollback.version)
    return await _write(response, flow, flow_uuid, session_id, context_id, user_id, expected, edit, current_user.id)


@router.get("/sessions/{session_id}/summary/versions")
async def read_session_versions(
    session_id: str,
    session: DbSession,
    current_user: CurrentActiveUser,
    flow_id: FlowQuery = None,
    context_id: Annotated[str | None, Query(description="Only this context; empty for 'no context'")] = None,
    user_id: OwnerQuery = None,
) -> SessionVersions:
    """Each summary of the session with its kept versions, newest first."""
    flow_uuid = valid_request(flow_id, session_id, context_id)
    await ensure_flow_or_404(session, flow_uuid, current_user, write=False)
    await ensure_storage()
    found = await session_versions(
        flow_id=flow_uuid, user_id=_owner(user_id, None), session_id=session_id, context_id=context_id
    )
    if not found:
        _answer(status.HTTP_404_NOT_FOUND, f"Session {session_id!r} of flow {flow_uuid} has no summary")
    return SessionVersions(
        flow_id=flow_uuid,
        session_id=session_id,
        summaries=[
            SummaryVersions(
                context_id=one.context_id,
                user_id=one.user_id,
                version=one.summary.version,
                etag=etag(one.summary),
                versions=[_version_read(version) for version in versions],
            )
            for one, versions in found
        ],
    )


async def _write(
    response: Response,
    flow: Any,
    flow_id: UUID,
    session_id: str,
    context_id: str | None,
    user_id: str | None,
    expected: Expected,
    edit: MemoryEdit,
    by: UUID,
) -> SummaryRead:
    owner = _owner(user_id, flow)
    if owner is None:
        _answer(status.HTTP_422_UNPROCESSABLE_ENTITY, "user_id is required for this flow: pass the owner's UUID")
    try:
        saved = await write_session_memory(
            flow_id=flow_id,
            user_id=owner,
            session_id=session_id,
            context_id=context_id,
            expected=expected,
            edit=edit,
            by=by,
        )
    except StaleVersionError as exc:
        current = exc.current
        if current is None:
            _answer(
                status.HTTP_412_PRECONDITION_FAILED,
                f"Session {session_id!r} has no summary to edit: seed it with If-None-Match: *",
            )
        response_etag = etag(current.summary)
        raise HTTPException(
            status_code=status.HTTP_412_PRECONDITION_FAILED,
            detail={
                "message": "The summary changed since you read it (a fold or another edit). Read it again, "
                "then send your change with its new ETag as If-Match.",
                "current": summary_read(current).model_dump(mode="json"),
            },
            headers={"ETag": response_etag},
        ) from exc
    except NoSuchVersionError as exc:
        _answer(status.HTTP_422_UNPROCESSABLE_ENTITY, f"version: {exc}; GET .../summary/versions lists those kept")
    except NoSuchOwnerError as exc:
        _answer(status.HTTP_404_NOT_FOUND, f"user_id: no user {exc} of flow {flow_id}")
    read = summary_read(saved)
    response.headers["ETag"] = read.etag
    return read


def _expected(if_match: str | None, if_none_match: str | None) -> Expected:
    """The summary a write is based on, from its precondition headers (`If-Match` first, as RFC 9110 has it)."""
    if if_none_match is not None and if_match is None:
        if if_none_match.strip() != "*":
            _answer(
                status.HTTP_422_UNPROCESSABLE_ENTITY, "If-None-Match accepts only *: seed a session with no summary"
            )
        return Expected()
    if if_match is None:
        _answer(
            status.HTTP_428_PRECONDITION_REQUIRED,
            "Send If-Match with the summary's ETag (from GET .../summary) to edit it, or If-None-Match: * to seed "
            "a session that has no summary yet",
        )
    if if_match.strip() == "*":
        return Expected(any_version=True)
    row_id, dot, version = if_match.strip().strip('"').rpartition(".")
    try:
        if if_match.strip().startswith("W/") or not dot:
            raise ValueError
        return Expected(row_id=str(UUID(row_id)), version=int(version))
    except ValueError:
        _answer(
            status.HTTP_412_PRECONDITION_FAILED,
            f"If-Match {if_match[:80]!r} is no summary's ETag: send the etag GET .../summary answered",
        )


def _valid_edit(write: MemoryWrite, flow: Any) -> MemoryEdit:
    """The edit, refused with the field and the rule when a key is not one of the flow's Pinned Keys, a value is
    too long, or the summary is longer than the flow's Summary Word Budget."""
    if write.summary is None and not write.pinned:
        _answer(status.HTTP_422_UNPROCESSABLE_ENTITY, "Nothing to change: send summary, pinned, or both")
    keys, words = _node_settings(flow)
    for key, value in write.pinned.items():
        if key not in keys:
            allowed = ", ".join(keys) if keys else "none: its nodes' Pinned Keys are empty"
            _answer(
                status.HTTP_422_UNPROCESSABLE_ENTITY,
                f"pinned: {key[:80]!r} is not one of this flow's {FIELD_NAMES['pinned_keys']} ({allowed}). Add it "
                f"to {FIELD_NAMES['pinned_keys']} on the node, or use one of those.",
            )
        if value is not None and not value.strip():
            _answer(status.HTTP_422_UNPROCESSABLE_ENTITY, f"pinned: {key!r} is blank; send null to clear it")
        if value is not None and len(value) > PINNED_VALUE_CHARS:
            _answer(
                status.HTTP_422_UNPROCESSABLE_ENTITY,
                f"pinned: {key!r} is {len(value)} characters long; at most {PINNED_VALUE_CHARS} are kept",
            )
    if write.summary is not None and count_words(write.summary) > words:
        _answer(
            status.HTTP_422_UNPROCESSABLE_ENTITY,
            f"summary: {count_words(write.summary)} words, more than this flow's {FIELD_NAMES['summary_words']} "
            f"({words}). Shorten it, or raise {FIELD_NAMES['summary_words']} on the node.",
        )
    pinned = {key: None if value is None else value.strip() for key, value in write.pinned.items()}
    return MemoryEdit(summary=write.summary, pinned=pinned)


def _node_settings(flow: Any) -> tuple[tuple[str, ...], int]:
    """The Pinned Keys of every node of the flow that has them (the Summarizing Agent, the Summarizing Message
    History), and the largest Summary Word Budget among them."""
    keys: list[str] = []
    words = 0
    nodes = ((getattr(flow, "data", None) or {}).get("nodes")) or []
    for node in nodes:
        template = ((node.get("data") or {}).get("node") or {}).get("template") or {}
        if "pinned_keys" not in template:
            continue
        try:
            found = pinned_keys_from((template.get("pinned_keys") or {}).get("value"))
        except ValueError:
            found = ()
        keys += [key for key in found if key not in keys]
        try:
            budget = int((template.get("summary_words") or {}).get("value") or DEFAULT_SUMMARY_WORDS)
        except (TypeError, ValueError):
            budget = DEFAULT_SUMMARY_WORDS
        words = max(words, budget)
    return tuple(keys), words or DEFAULT_SUMMARY_WORDS


def _owner(user_id: str | None, flow: Any) -> UUID | None:
    """The owner a request names, else the flow's (None when there is no flow row to take it from)."""
    if user_id is not None:
        try:
            return UUID(user_id.strip())
        except ValueError:
            _answer(status.HTTP_422_UNPROCESSABLE_ENTITY, f"user_id must be a user's UUID, got {user_id[:80]!r}")
    owner = getattr(flow, "user_id", None)
    return None if owner is None else UUID(str(owner))


def _version_read(version: Version) -> VersionRead:
    cost = version.cost
    return VersionRead(
        version=version.version,
        change=version.change,
        changed_by=None if version.changed_by is None else UUID(version.changed_by),
        summary=version.summary.text,
        pinned=dict(version.summary.pinned),
        folded_count=version.summary.folded_count,
        summary_model=version.summary.summary_model,
        fold_calls=cost.calls,
        fold_input_tokens=cost.input_tokens,
        fold_output_tokens=cost.output_tokens,
        fold_cached_tokens=cost.cached_tokens,
        folded_messages=cost.messages,
        folded_messages_tokens=cost.tokens,
        rolled_back_to=cost.rolled_back_to,
        created_at=version.created_at,
    )


def _answer(code: int, detail: str) -> NoReturn:
    raise HTTPException(status_code=code, detail=detail)
