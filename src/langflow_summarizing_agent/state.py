"""What a session's memory is made of, and the narrow storage protocol the fold logic is written against.

The fold logic (`fold.py`) only sees these types. `session_memory.py` implements `SessionStore` on Langflow's
database; tests implement it in memory.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Protocol

Role = Literal["user", "assistant"]


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

    `version` 0 means the row is not stored yet. `failed_folds` and `retry_after` implement the back-off of a
    summarizer that keeps failing.
    """

    summary: str = ""
    pinned: dict[str, str] = field(default_factory=dict)
    cursor: Cursor | None = None
    absorbed_count: int = 0
    summary_model: str | None = None
    version: int = 0
    failed_folds: int = 0
    retry_after: datetime | None = None
    updated_at: datetime | None = None

    def covers(self, message: StoredMessage) -> bool:
        """True when `message` is at or before the cursor, i.e. already folded."""
        return self.cursor is not None and message.cursor <= self.cursor


class SessionStore(Protocol):
    """Storage for one session's scope: (flow, user, session, context). Scope is fixed when the store is made."""

    async def load_state(self) -> MemoryState:
        """The stored state, or a fresh `MemoryState()` (version 0) when there is none.

        A stale row (its cursor message was deleted) comes back emptied but keeps its version, so the next save
        still compare-and-swaps against it.
        """
        ...

    async def load_turn(self, limit: int) -> tuple[MemoryState, list[StoredMessage]]:
        """`load_state()` and `recent(limit, after=state.cursor)` in one read."""
        ...

    async def save_state(self, state: MemoryState, expected_version: int) -> bool:
        """Insert (expected_version 0) or compare-and-swap on version. False when another writer saved first."""
        ...

    async def recent(self, limit: int, after: Cursor | None = None) -> list[StoredMessage]:
        """The newest `limit` messages after `after` (of the whole session when None), ascending, without the
        current input."""
        ...

    async def after(self, cursor: Cursor | None, limit: int) -> list[StoredMessage]:
        """Up to `limit` messages after `cursor` (all from the start when None), ascending."""
        ...

    async def count_after(self, cursor: Cursor | None, before: Cursor) -> int:
        """How many messages lie after `cursor` and before `before`."""
        ...
