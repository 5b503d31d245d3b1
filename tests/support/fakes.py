"""Fakes for the fold logic: the in-memory store (`StateStore`, `SessionStore`) and a summarizer recording its input."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from contextlib import AbstractAsyncContextManager
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import Any
from uuid import UUID, uuid4

from langchain_core.messages import BaseMessage

from langflow_summarizing_agent.state import (
    Cursor,
    HeldScopes,
    MemoryState,
    Rename,
    ScopedState,
    StoredMessage,
    utcnow,
)
from tests.support.fake_chat_model import FakeChatModel

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def make_messages(texts: list[str], *, start: int = 0, same_timestamp: bool = False) -> list[StoredMessage]:
    """Alternating user/assistant messages, one second apart (or all at one instant)."""
    messages = []
    for offset, text in enumerate(texts):
        index = start + offset
        stamp = T0 if same_timestamp else T0 + timedelta(seconds=index)
        role = "user" if index % 2 == 0 else "assistant"
        messages.append(StoredMessage(id=f"m{index:06d}", timestamp=stamp, role=role, text=text))
    return messages


ScopeKey = tuple[str, str, str]
"""(flow, owner, session) of messages."""


class InMemoryStateStore:
    """A `StateStore` over dicts, with the database store's contract (the contract suite runs on both).

    Messages are kept per session, in `sessions`, with their context and error flag alongside.
    """

    def __init__(self) -> None:
        self.sessions: dict[ScopeKey, list[StoredMessage]] = {}
        self.contexts: dict[str, str | None] = {}
        self.errors: set[str] = set()
        self.rows: dict[tuple[str, str, str, str], MemoryState] = {}
        self.saves = 0
        self.reads = 0
        self.fold_locks = HeldScopes()

    def add_messages(
        self, scope: ScopeKey, messages: list[StoredMessage], *, context_id: str | None = None, error: bool = False
    ) -> None:
        self.sessions.setdefault(scope, []).extend(messages)
        for message in messages:
            self.contexts[message.id] = context_id
            if error:
                self.errors.add(message.id)

    def delete_messages(self, message_ids: Collection[str]) -> None:
        """As Langflow's delete, without the purge the listeners add."""
        gone = set(map(str, message_ids))
        for scope, messages in self.sessions.items():
            self.sessions[scope] = [m for m in messages if m.id not in gone]

    def session(
        self,
        *,
        flow_id: Any,
        user_id: Any,
        session_id: str,
        context_id: str | None = None,
        exclude_ids: Iterable[Any] = (),
        until_id: Any = None,
    ) -> InMemorySessionStore:
        return InMemorySessionStore(self, flow_id, user_id, session_id, context_id, exclude_ids, until_id)

    async def states(self, *, flow_id: Any, session_id: str, context_id: str | None = None) -> list[ScopedState]:
        found = []
        for flow, user, session, context in sorted(self.rows):
            if (flow, session) == (_id(flow_id), session_id) and context_id in (None, context):
                current = self.session(flow_id=flow, user_id=user, session_id=session, context_id=context or None)
                found.append(ScopedState(UUID(user), context, await current.load_state()))
        return found

    async def reset(self, *, flow_id: Any, session_id: str, context_id: str | None = None) -> int:
        return self._delete(lambda f, u, s, c: (f, s) == (_id(flow_id), session_id) and context_id in (None, c))

    async def purge_sessions(self, *, flow_id: Any, session_ids: Collection[str], user_id: Any = None) -> int:
        owner = None if user_id is None else _id(user_id)
        if user_id is not None and owner is None:
            return 0
        return self._delete(lambda f, u, s, c: f == _id(flow_id) and s in session_ids and owner in (None, u))

    async def purge_flows(self, flow_ids: Collection[Any]) -> int:
        flows = {_id(flow_id) for flow_id in flow_ids}
        return self._delete(lambda f, u, s, c: f in flows)

    async def purge_messages(self, message_ids: Collection[Any]) -> int:
        gone = {str(message_id) for message_id in message_ids}
        doomed = []
        for key, state in self.rows.items():
            flow, user, session, context = key
            in_context = [
                m
                for m in self.sessions.get((flow, user, session), [])
                if not context or self.contexts.get(m.id) == context
            ]
            deleted = [m for m in in_context if m.id in gone]
            if not deleted:
                continue
            folded = any(state.covers(m) for m in deleted)
            if folded or len(deleted) == len(in_context):
                doomed.append(key)
        for key in doomed:
            del self.rows[key]
        return len(doomed)

    async def rename(self, renames: Iterable[Rename]) -> int:
        moved = 0
        for rename in renames:
            flow, user, old, new = (
                str(rename.flow_id),
                str(rename.user_id),
                rename.old_session_id,
                rename.new_session_id,
            )
            if old == new:
                continue
            for key in list(self.rows):
                if key[:2] != (flow, user):
                    continue
                if rename.whole_session and new is not None:
                    if key[2] == new:
                        del self.rows[key]
                elif key[2] in (old, new):
                    del self.rows[key]
            if rename.whole_session and new is not None:
                for key in [k for k in self.rows if k[:3] == (flow, user, old)]:
                    self.rows[(flow, user, new, key[3])] = self.rows.pop(key)
                    moved += 1
        return moved

    async def count(self, *, flow_id: Any = None) -> int:
        return sum(1 for key in self.rows if flow_id is None or key[0] == _id(flow_id))

    def _delete(self, matches: Any) -> int:
        doomed = [key for key in self.rows if matches(*key)]
        for key in doomed:
            del self.rows[key]
        return len(doomed)


class InMemorySessionStore:
    """One scope of an `InMemoryStateStore`: the `SessionStore` the fold runs on."""

    def __init__(
        self,
        store: InMemoryStateStore,
        flow_id: Any,
        user_id: Any,
        session_id: str,
        context_id: str | None = None,
        exclude_ids: Iterable[Any] = (),
        until_id: Any = None,
    ) -> None:
        self.store = store
        self.until_id = str(until_id) if until_id is not None else None
        self.scope = (_id(flow_id), _id(user_id), session_id)
        self.context_id = context_id or None
        self.exclude_ids = {str(message_id) for message_id in exclude_ids}

    @property
    def key(self) -> tuple[str, ...]:
        return (*map(str, self.scope), self.context_id or "")

    def fold_lock(self) -> AbstractAsyncContextManager[bool]:
        return self.store.fold_locks.hold(self._row_key)

    @property
    def _resolved(self) -> bool:
        return None not in self.scope and bool(self.scope[2])

    @property
    def _row_key(self) -> tuple[str, str, str, str]:
        flow, user, session = self.scope
        return (str(flow), str(user), session, self.context_id or "")

    def _session_messages(self) -> list[StoredMessage]:
        return self.store.sessions.get(self.scope, []) if self._resolved else []  # type: ignore[arg-type]

    def _readable(self) -> list[StoredMessage]:
        ordered = sorted(self._session_messages(), key=lambda m: m.cursor)
        inputs = [m.cursor for m in ordered if m.id in self.exclude_ids]
        ends = [m.cursor for m in ordered if m.id == self.until_id]
        return [
            m
            for m in ordered
            if m.id not in self.store.errors
            and (self.context_id is None or self.store.contexts.get(m.id) == self.context_id)
            and m.id not in self.exclude_ids
            # What a concurrent run stored after the input is not read either.
            and all(m.cursor < bound for bound in inputs)
            and all(m.cursor <= end for end in ends)
        ]

    async def load_state(self) -> MemoryState:
        if not self._resolved:
            return MemoryState()
        self.store.reads += 1
        state = self.store.rows.get(self._row_key)
        if state is None:
            return MemoryState()
        copy = replace(state, pinned=dict(state.pinned))
        return copy if self._is_current(copy.cursor) else copy.emptied()

    async def load_turn(self, limit: int) -> tuple[MemoryState, list[StoredMessage]]:
        state = await self.load_state()
        return state, await self.recent(limit, after=state.cursor)

    async def save_state(self, state: MemoryState, expected_version: int) -> bool:
        if expected_version < 0:
            raise ValueError(f"expected_version must be 0 (insert) or a stored version, got {expected_version}")
        if not self._resolved or not self._is_current(state.cursor):
            return False
        current = self.store.rows.get(self._row_key)
        if expected_version == 0:
            if current is not None:
                return False
            row_id = str(uuid4())
        elif current is None or (current.row_id, current.version) != (state.row_id, expected_version):
            return False
        else:
            row_id = current.row_id
        state.row_id, state.version, state.updated_at = row_id, expected_version + 1, utcnow()
        self.store.rows[self._row_key] = replace(state, pinned=dict(state.pinned))
        self.store.saves += 1
        return True

    async def recent(self, limit: int, after: Cursor | None = None) -> list[StoredMessage]:
        self.store.reads += 1
        if limit <= 0:
            return []
        return [m for m in self._readable() if after is None or m.cursor > after][-limit:]

    async def after(self, cursor: Cursor | None, limit: int) -> list[StoredMessage]:
        self.store.reads += 1
        return [m for m in self._readable() if cursor is None or m.cursor > cursor][: max(limit, 0)]

    async def count_after(self, cursor: Cursor | None, before: Cursor) -> int:
        self.store.reads += 1
        return sum(1 for m in self._readable() if (cursor is None or m.cursor > cursor) and m.cursor < before)

    def _is_current(self, cursor: Cursor | None) -> bool:
        """What the database store checks: the cursor message is in the session, or without one, any message is."""
        messages = self._session_messages()
        if cursor is None:
            return bool(messages)
        return any(m.id == cursor.message_id for m in messages)


class InMemoryStore(InMemorySessionStore):
    """One session of its own `InMemoryStateStore`, for the fold tests: `messages` and `state` are its rows."""

    def __init__(self, messages: list[StoredMessage] | None = None) -> None:
        super().__init__(InMemoryStateStore(), "flow", "owner", "session")
        self.store.add_messages(self.scope, list(messages or []))  # type: ignore[arg-type]

    @property
    def messages(self) -> list[StoredMessage]:
        return self.store.sessions.setdefault(self.scope, [])  # type: ignore[arg-type]

    @property
    def state(self) -> MemoryState | None:
        return self.store.rows.get(self._row_key)

    @state.setter
    def state(self, value: MemoryState | None) -> None:
        if value is None:
            self.store.rows.pop(self._row_key, None)
        else:
            self.store.rows[self._row_key] = value

    @property
    def saves(self) -> int:
        return self.store.saves

    @property
    def reads(self) -> int:
        return self.store.reads

    def add(self, *texts: str) -> None:
        self.messages.extend(make_messages(list(texts), start=len(self.messages)))


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
    """The fold logic's summarizer: a `FakeChatModel` that records the prompts it receives.

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
