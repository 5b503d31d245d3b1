"""The storage protocol the engine is written against: one session's summary and messages.

`storage.store.DatabaseStore` implements it on Langflow's database; the tests implement it in memory, and one contract
suite runs on every implementation. The engine never sees SQL, a connection or a Langflow service.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Hashable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import datetime
from typing import Protocol

from langflow_summarizing_agent.engine.records import Change, Cursor, Scope, StoredMessage, Summary


class SessionStore(Protocol):
    """One scope's summary and messages; the scope is fixed when the store is made.

    Message reads skip error rows and end where the store was told to end (before the current turn's input, with
    what was stored after it; or with a given message, included). Without a context every context of the session
    is read, as Langflow's `aget_messages()` does. A scope that does not resolve (unknown or foreign flow or owner,
    no session) reads nothing and saves nothing.
    """

    @property
    def scope(self) -> Scope: ...

    async def load(self) -> Summary:
        """The stored summary, or `Summary()` when there is none.

        A stale row (its cursor message is gone from the session, or without a cursor, the session has no message
        left) comes back emptied (`Summary.emptied`), so the next save replaces it by compare-and-swap.
        """
        ...

    async def load_turn(self, limit: int) -> tuple[Summary, list[StoredMessage]]:
        """`load()` and `messages(after=summary.cursor, limit=limit, newest=True)` in one read."""
        ...

    async def messages(
        self, *, limit: int, after: Cursor | None = None, before: Cursor | None = None, newest: bool = False
    ) -> list[StoredMessage]:
        """Up to `limit` messages after `after` and before `before` (open ends when None), ascending: the newest
        of them when `newest`, else the oldest."""
        ...

    async def count(self, *, after: Cursor | None = None, before: Cursor | None = None) -> int:
        """How many messages lie after `after` and before `before`."""
        ...

    async def save(self, summary: Summary, change: Change | None = None) -> Summary | None:
        """Store `summary` if the stored row is still the one it was read from (`row_id`, `version`); the summary
        as stored (its new version), or None when the save lost. With `change` (what made the summary), the summary
        saved is kept as a version of the session's memory.

        Version 0 (nothing read) inserts version 1; otherwise a compare-and-swap that bumps the version. It loses
        when another writer saved first, when the row was reset or purged since, or when the session no longer
        holds the summary's cursor message (or, without a cursor, any message): a deleted session gets no row
        back. `summary` itself is never changed.
        """
        ...

    async def mark_fold_queued(self) -> datetime | None:
        """Mark the stored summary as having a fold queued (after the reply), so reads elsewhere wait for it; the
        mark, to clear it with, or None when there is no summary to mark. It never changes the version."""
        ...

    async def clear_fold_queued(self, mark: datetime) -> None:
        """Clear the mark `mark_fold_queued` returned, unless a later one replaced it."""
        ...

    def fold_lock(self) -> AbstractAsyncContextManager[bool]:
        """The scope's fold lock, held while the body runs: yields True to the one holder, and False at once to
        anyone else, who then makes no summary call. It holds within the process always, and across processes
        where the database can (a PostgreSQL advisory lock); compare-and-swap still guards every save."""
        ...


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
