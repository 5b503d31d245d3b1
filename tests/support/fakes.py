"""Fakes for the engine: an in-memory database of messages and summaries with a `SessionStore` per scope, and a
summarizer recording its input."""

from __future__ import annotations

from collections.abc import Collection
from contextlib import AbstractAsyncContextManager
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import Any
from uuid import UUID, uuid4

from langchain_core.messages import BaseMessage

from langflow_summarizing_agent.engine.records import (
    NO_CONTEXT,
    Change,
    Cursor,
    Role,
    Scope,
    StoredMessage,
    Summary,
    utcnow,
)
from langflow_summarizing_agent.engine.store import HeldScopes
from langflow_summarizing_agent.storage.versions import versions_kept
from tests.support.fake_chat_model import FakeChatModel

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def make_messages(texts: list[str], *, start: int = 0, same_timestamp: bool = False) -> list[StoredMessage]:
    """Alternating user/assistant messages, one second apart (or all at one instant)."""
    messages = []
    for offset, text in enumerate(texts):
        index = start + offset
        stamp = T0 if same_timestamp else T0 + timedelta(seconds=index)
        role: Role = "user" if index % 2 == 0 else "assistant"
        messages.append(StoredMessage(id=f"m{index:06d}", timestamp=stamp, role=role, text=text))
    return messages


SessionKey = tuple[str, str, str]
"""(flow, owner, session) of messages."""


class InMemoryDatabase:
    """Messages and summary rows in dicts: what `InMemorySessionStore`s read and write.

    Messages are kept per session, in `sessions`, with their context and error flag alongside.
    """

    def __init__(self) -> None:
        self.sessions: dict[SessionKey, list[StoredMessage]] = {}
        self.contexts: dict[str, str | None] = {}
        self.errors: set[str] = set()
        self.rows: dict[tuple[str, str, str, str], Summary] = {}
        self.versions: dict[str, list[tuple[Summary, Change]]] = {}
        """Per row id, the summaries saved with a `Change`, oldest first: what `storage.versions` keeps."""
        self.fold_marks: dict[tuple[str, str, str, str], datetime] = {}
        """When a fold was queued for a row's scope (`SessionStore.mark_fold_queued`), until it ends."""
        self.saves = 0
        self.reads = 0
        self.fold_locks = HeldScopes()

    def add_messages(
        self, session: SessionKey, messages: list[StoredMessage], *, context_id: str | None = None, error: bool = False
    ) -> None:
        self.sessions.setdefault(session, []).extend(messages)
        for message in messages:
            self.contexts[message.id] = context_id
            if error:
                self.errors.add(message.id)

    def delete_messages(self, message_ids: Collection[str]) -> None:
        """As Langflow's delete, without the purge the listeners add."""
        gone = set(map(str, message_ids))
        for key, messages in self.sessions.items():
            self.sessions[key] = [m for m in messages if m.id not in gone]

    def fold_queued(self, flow_id: Any, session_id: str, context_id: str | None, since: datetime) -> bool:
        """As `storage.store.session_fold_queued`: a marked row of the session (of one context when given)."""
        return any(
            (key[0], key[2]) == (str(flow_id), session_id)
            and (context_id is None or key[3] == (context_id or NO_CONTEXT))
            and key in self.rows
            and mark > since
            for key, mark in self.fold_marks.items()
        )

    def store(self, scope: Scope, *, before: Any = None, through: Any = None) -> InMemorySessionStore:
        return InMemorySessionStore(self, scope, before=before, through=through)


class InMemorySessionStore:
    """One scope of an `InMemoryDatabase`: the `SessionStore` the engine runs on, with the database store's
    contract (the contract suite runs on both)."""

    def __init__(self, database: InMemoryDatabase, scope: Scope, *, before: Any = None, through: Any = None) -> None:
        if before is not None and through is not None:
            raise ValueError("a store's reads end before one message or through one, not both")
        self.database = database
        self._scope = scope
        self.before = str(before) if before is not None else None
        self.through = str(through) if through is not None else None
        self.session_key = (_id(scope.flow_id), _id(scope.user_id), scope.session_id)

    @property
    def scope(self) -> Scope:
        return self._scope

    def fold_lock(self) -> AbstractAsyncContextManager[bool]:
        return self.database.fold_locks.hold(self.scope.key)

    async def mark_fold_queued(self) -> datetime | None:
        if not self._resolved or self._row_key not in self.database.rows:
            return None
        mark = self.database.fold_marks[self._row_key] = utcnow()
        return mark

    async def clear_fold_queued(self, mark: datetime) -> None:
        if self._resolved and self.database.fold_marks.get(self._row_key) == mark:
            del self.database.fold_marks[self._row_key]

    @property
    def _resolved(self) -> bool:
        return None not in self.session_key and bool(self.session_key[2])

    @property
    def _row_key(self) -> tuple[str, str, str, str]:
        flow, user, session = self.session_key
        return (str(flow), str(user), session, self.scope.context_id or NO_CONTEXT)

    def _session_messages(self) -> list[StoredMessage]:
        return self.database.sessions.get(self.session_key, []) if self._resolved else []  # type: ignore[arg-type]

    def _readable(self) -> list[StoredMessage]:
        ordered = sorted(self._session_messages(), key=lambda m: m.cursor)
        before = [m.cursor for m in ordered if m.id == self.before]
        through = [m.cursor for m in ordered if m.id == self.through]
        context_id = self.scope.context_id
        return [
            m
            for m in ordered
            if m.id not in self.database.errors
            and (context_id is None or self.database.contexts.get(m.id) == context_id)
            and m.id != self.before
            # What a concurrent run stored after the input is not read either.
            and all(m.cursor < bound for bound in before)
            and all(m.cursor <= end for end in through)
        ]

    async def load(self) -> Summary:
        if not self._resolved:
            return Summary()
        self.database.reads += 1
        summary = self.database.rows.get(self._row_key)
        if summary is None:
            return Summary()
        seeded = summary.cursor is None and summary.edited_at is not None
        return summary if seeded or self._is_current(summary.cursor) else summary.emptied()

    async def load_turn(self, limit: int) -> tuple[Summary, list[StoredMessage]]:
        summary = await self.load()
        return summary, await self.messages(limit=limit, after=summary.cursor, newest=True)

    async def save(self, summary: Summary, change: Change | None = None) -> Summary | None:
        if summary.version < 0:
            raise ValueError(f"a summary's version is 0 (nothing stored) or a stored version, got {summary.version}")
        by_user = change is not None and change.kind != "fold" and summary.cursor is None
        if not self._resolved or not (by_user or self._is_current(summary.cursor)):
            return None
        current = self.database.rows.get(self._row_key)
        if summary.version == 0:
            if current is not None:
                return None
            row_id: str | None = str(uuid4())
        elif current is None or (current.row_id, current.version) != (summary.row_id, summary.version):
            return None
        else:
            row_id = current.row_id
        saved = replace(
            summary, pinned=dict(summary.pinned), row_id=row_id, version=summary.version + 1, updated_at=utcnow()
        )
        self.database.rows[self._row_key] = saved
        self.database.saves += 1
        if change is not None and row_id is not None and versions_kept():
            kept = self.database.versions.setdefault(row_id, [])
            if current is not None and not kept:
                kept.append((current, Change(kind="fold")))
            kept.append((saved, change))
            del kept[: max(len(kept) - versions_kept(), 0)]
        return saved

    async def messages(
        self, *, limit: int, after: Cursor | None = None, before: Cursor | None = None, newest: bool = False
    ) -> list[StoredMessage]:
        self.database.reads += 1
        if limit <= 0:
            return []
        found = [
            m for m in self._readable() if (after is None or m.cursor > after) and (before is None or m.cursor < before)
        ]
        return found[-limit:] if newest else found[:limit]

    async def count(self, *, after: Cursor | None = None, before: Cursor | None = None) -> int:
        self.database.reads += 1
        return sum(
            1 for m in self._readable() if (after is None or m.cursor > after) and (before is None or m.cursor < before)
        )

    def _is_current(self, cursor: Cursor | None) -> bool:
        """What the database store checks: the cursor message is in the session, or without one, any message is."""
        messages = self._session_messages()
        if cursor is None:
            return bool(messages)
        return any(m.id == cursor.message_id for m in messages)


class InMemoryStore(InMemorySessionStore):
    """One session of its own `InMemoryDatabase`, for the engine tests: `messages` and `summary` are its rows."""

    def __init__(self, messages: list[StoredMessage] | None = None) -> None:
        super().__init__(InMemoryDatabase(), Scope("flow", "owner", "session"))
        self.database.add_messages(self.session_key, list(messages or []))  # type: ignore[arg-type]

    @property
    def messages_stored(self) -> list[StoredMessage]:
        return self.database.sessions.setdefault(self.session_key, [])  # type: ignore[arg-type]

    @property
    def summary(self) -> Summary | None:
        return self.database.rows.get(self._row_key)

    @summary.setter
    def summary(self, value: Summary | None) -> None:
        if value is None:
            self.database.rows.pop(self._row_key, None)
        else:
            self.database.rows[self._row_key] = value

    @property
    def saves(self) -> int:
        return self.database.saves

    @property
    def reads(self) -> int:
        return self.database.reads

    def add(self, *texts: str) -> None:
        self.messages_stored.extend(make_messages(list(texts), start=len(self.messages_stored)))


def _id(value: Any) -> str | None:
    """An id as the fake stores it; None for what the database store cannot resolve (None, blank, not a UUID)."""
    if value is None or value == "":
        return None
    text = str(value)
    if text in {"flow", "owner"}:
        return text
    try:
        return str(UUID(text))
    except ValueError:
        return None


class RecordingSummarizer:
    """The engine's summarizer: a `FakeChatModel` that records the prompts it receives.

    `answers` are the next fold answers, in order (a text or an exception to raise); after them the model's facts
    answer.
    """

    def __init__(self, answers: list[str | BaseException] | None = None) -> None:
        self.model = FakeChatModel(fold_script=list(answers or []))

    async def __call__(self, prompt: list[BaseMessage]) -> str:
        return await self.model.respond(prompt)

    @property
    def prompts(self) -> list[list[BaseMessage]]:
        return self.model.calls

    @property
    def answers(self) -> list[str | BaseException]:
        return self.model.fold_script

    @property
    def calls(self) -> int:
        return len(self.model.calls)
