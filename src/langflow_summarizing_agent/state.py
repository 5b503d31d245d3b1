"""What a session's memory is made of, and the storage protocol the rest of the package is written against.

The fold logic (`fold.py`) sees only `SessionStore`, one scope's memory. The HTTP API and the Langflow listeners
see `StateStore`, every scope's. `session_memory.py` implements both on Langflow's database; the tests implement
them in memory, and one contract suite runs on every implementation.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Collection, Hashable, Iterable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Literal, Protocol
from uuid import UUID

Role = Literal["user", "assistant"]
Id = str | UUID


def utcnow() -> datetime:
    """The package's one clock: an aware UTC datetime."""
    return datetime.now(timezone.utc)


def as_utc(value: datetime) -> datetime:
    """`value` as an aware UTC datetime; a naive value is taken as UTC (what the database stores)."""
    return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)


@dataclass(frozen=True, order=True)
class Cursor:
    """Position of the last message folded into the summary, ordered like Langflow's keyset reads."""

    timestamp: datetime
    message_id: str


@dataclass(frozen=True)
class StoredMessage:
    """A chat message as stored by Langflow, reduced to what the fold needs.

    `payload` carries the original `lfx.schema.message.Message`, handed to the Agent unchanged when the
    message is sent verbatim.
    """

    id: str
    timestamp: datetime
    role: Role
    text: str
    payload: Any = None
    files: tuple[str, ...] = ()
    """Names of the files attached to the message."""

    @property
    def cursor(self) -> Cursor:
        return Cursor(self.timestamp, self.id)


@dataclass
class MemoryState:
    """The per-session row: summary, pinned facts and the cursor of the last folded message.

    `row_id` and `version` identify what was read: version 0 (no `row_id`) means no row is stored. A save names
    both, so a save that read a row that was reset or purged since (and maybe stored anew: a new row has a new id)
    never succeeds: the pair never repeats for a scope. `failed_folds` and `retry_after` implement the back-off
    of a summarizer (or a save) that keeps failing.
    """

    summary: str = ""
    pinned: dict[str, str] = field(default_factory=dict)
    cursor: Cursor | None = None
    folded_count: int = 0
    """Messages the summary covers."""
    summary_model: str | None = None
    version: int = 0
    failed_folds: int = 0
    retry_after: datetime | None = None
    updated_at: datetime | None = None
    row_id: str | None = None

    def covers(self, message: StoredMessage) -> bool:
        """True when `message` is at or before the cursor, i.e. already folded."""
        return self.cursor is not None and message.cursor <= self.cursor

    def emptied(self) -> MemoryState:
        """A state with nothing folded that a save can still compare-and-swap against this one's row."""
        return MemoryState(version=self.version, row_id=self.row_id, updated_at=self.updated_at)


@dataclass(frozen=True)
class ScopedState:
    """A stored state with the part of its scope a session-wide read does not fix: owner and context."""

    user_id: UUID
    context_id: str
    """`""` is "no context"."""
    state: MemoryState


@dataclass(frozen=True)
class Rename:
    """One session of one flow and owner whose messages moved to `new_session_id`."""

    flow_id: UUID
    user_id: UUID
    old_session_id: str
    new_session_id: str | None
    """None when the new id is not a plain value (an SQL expression): the state is deleted, not moved."""
    whole_session: bool
    """True when every message moved into a session that had none: the state can follow."""


class HeldScopes:
    """Scopes whose fold lock this process holds: the part of `SessionStore.fold_lock` a process can give."""

    def __init__(self) -> None:
        self._held: set[Hashable] = set()
        self._mutex = threading.Lock()

    @asynccontextmanager
    async def hold(self, key: Hashable) -> AsyncIterator[bool]:
        with self._mutex:
            taken = key not in self._held
            self._held.add(key)
        try:
            yield taken
        finally:
            if taken:
                with self._mutex:
                    self._held.discard(key)

    def held(self, key: Hashable) -> bool:
        return key in self._held


class SessionStore(Protocol):
    """One scope's memory: (flow, owner, session, context), fixed when the store is made.

    Message reads skip error rows and the current turn's input (and what was stored after it). Without a context
    every context of the session is read, as Langflow's `aget_messages()` does. A scope that does not resolve
    (unknown or foreign flow or owner, no session) reads nothing and saves nothing.
    """

    @property
    def key(self) -> tuple[str, ...]:
        """The scope, as a hashable value."""
        ...

    async def load_state(self) -> MemoryState:
        """The stored state, or a fresh `MemoryState()` when there is none.

        A stale row (its cursor message is gone from the session, or without a cursor, the session has no message
        left) comes back emptied (`MemoryState.emptied`), so the next save replaces it by compare-and-swap.
        """
        ...

    async def load_turn(self, limit: int) -> tuple[MemoryState, list[StoredMessage]]:
        """`load_state()` and `recent(limit, after=state.cursor)` in one read."""
        ...

    async def save_state(self, state: MemoryState, expected_version: int) -> bool:
        """Store `state` if the stored row is still the one it was read from (`state.row_id`), at `expected_version`.

        `expected_version` 0 (no row read) inserts version 1; otherwise a compare-and-swap that bumps the version.
        Refused (False) when another writer saved first, when the row was reset or purged since, or when the
        session no longer holds `state`'s cursor message (or, without a cursor, any message): a deleted session
        gets no row back. On success `state.row_id`, `state.version` and `state.updated_at` are what was stored.
        """
        ...

    async def recent(self, limit: int, after: Cursor | None = None) -> list[StoredMessage]:
        """The newest `limit` messages after `after` (of the whole session when None), ascending."""
        ...

    async def after(self, cursor: Cursor | None, limit: int) -> list[StoredMessage]:
        """Up to `limit` messages after `cursor` (all from the start when None), ascending."""
        ...

    async def count_after(self, cursor: Cursor | None, before: Cursor) -> int:
        """How many messages lie after `cursor` and before `before`."""
        ...

    def fold_lock(self) -> AbstractAsyncContextManager[bool]:
        """The scope's fold lock, held while the body runs: yields True to the one holder, and False at once to
        anyone else, who then makes no summary call. It holds within the process always, and across processes
        where the database can (a PostgreSQL advisory lock); compare-and-swap still guards every save."""
        ...


class StateStore(Protocol):
    """Every scope's memory: what the HTTP API and the Langflow listeners read and change.

    Flow and owner ids that do not resolve change nothing and read nothing; an owner given but unresolved never
    widens a purge to every owner.
    """

    def session(
        self,
        *,
        flow_id: Id | None,
        user_id: Id | None,
        session_id: str,
        context_id: str | None = None,
        exclude_ids: Iterable[Id] = (),
        until_id: Id | None = None,
    ) -> SessionStore:
        """One scope's store; `exclude_ids` names the current turn's input, which reads leave out with what was
        stored after it; reads end with `until_id` (included) when given: what a fold after the reply reads."""
        ...

    async def states(self, *, flow_id: Id, session_id: str, context_id: str | None = None) -> list[ScopedState]:
        """The session's states, one per owner and context (only `context_id`'s when given), stale ones emptied."""
        ...

    async def reset(self, *, flow_id: Id, session_id: str, context_id: str | None = None) -> int:
        """Delete the session's states (every context unless `context_id` is given); the rows deleted."""
        ...

    async def purge_sessions(self, *, flow_id: Id, session_ids: Collection[str], user_id: Id | None = None) -> int:
        """Delete the states of `session_ids` in a flow, of every owner when `user_id` is None."""
        ...

    async def purge_flows(self, flow_ids: Collection[Id]) -> int:
        """Delete every state of the flows."""
        ...

    async def purge_messages(self, message_ids: Collection[Id]) -> int:
        """Before these messages are deleted: delete the states that folded one of them, and the states whose
        session (or context) has no other message."""
        ...

    async def rename(self, renames: Iterable[Rename]) -> int:
        """After sessions' messages moved: move a session's states when the whole session moved into a session
        without messages of its own, else delete the states of both. The rows moved."""
        ...

    async def count(self, *, flow_id: Id | None = None) -> int:
        """How many states are stored (of one flow when given)."""
        ...
