"""The session store's contract harness, shared by `test_store_contract.py` and `test_store_reads.py`.

Each backend (the in-memory fake, SQLite and Postgres) gives a `Harness`: a `SessionStore` per scope, a way to store
and delete chat messages as Langflow does (without the listeners, which `test_lifecycle` covers), and the
session-wide row operations the rules need (reset a session's rows, count a flow's rows, read a queued fold's mark).
The `harness` fixture, which builds it on the backend of `langflow_db`, is in this directory's conftest.py;
`EVERY_BACKEND` parametrizes a contract module over the three backends.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from langflow_summarizing_agent.engine.records import Summary
from langflow_summarizing_agent.engine.store import SessionStore
from tests.support.langflow_db import STORE_IN_MEMORY, MemoryScope

EVERY_BACKEND = pytest.mark.parametrize(
    "langflow_db",
    [STORE_IN_MEMORY, "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)],
    indirect=True,
)
"""The backends every contract rule runs on: `pytestmark = EVERY_BACKEND`."""


T0 = datetime(2026, 1, 1, 12, 0, tzinfo=timezone.utc)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


@dataclasses.dataclass
class Harness:
    make_store: Callable[..., SessionStore]
    """`make_store(scope, before=..., through=...)`: the backend's `SessionStore` of one `Scope`."""
    add_rows: Callable[..., Awaitable[list[str]]]
    delete_rows: Callable[[list[str]], Awaitable[None]]
    reset_rows: Callable[[MemoryScope], Awaitable[int]]
    count_rows: Callable[[uuid.UUID], Awaitable[int]]
    queued_rows: Callable[[MemoryScope, datetime], Awaitable[bool]]

    async def add(self, scope: MemoryScope, rows: list[tuple[datetime, str]], **columns: Any) -> list[str]:
        """Store messages (User and Machine alternating); their ids in the order given."""
        return await self.add_rows(scope, rows, **columns)

    async def delete(self, message_ids: list[str]) -> None:
        """Delete messages behind the store's back, as raw SQL would."""
        await self.delete_rows(message_ids)

    async def reset(self, scope: MemoryScope) -> int:
        """Delete the session's summary rows (every owner and context) as the HTTP API's reset does; the rows
        deleted."""
        return await self.reset_rows(scope)

    async def count(self, flow_id: uuid.UUID) -> int:
        """The flow's summary rows (every owner, session and context)."""
        return await self.count_rows(flow_id)

    async def fold_queued(self, scope: MemoryScope, since: datetime) -> bool:
        """Whether a fold marked the session's summary (any owner or context) after `since`, as the HTTP API reads."""
        return await self.queued_rows(scope, since)

    def session(self, scope: MemoryScope, *, before: Any = None, through: Any = None, **overrides: Any) -> SessionStore:
        """The store of `scope` (`context_id` and any id overridden), its reads ending before or through a message."""
        return self.make_store(scope.scope(**overrides), before=before, through=through)


async def saved(harness: Harness, scope: MemoryScope, text: str = "s", **overrides: Any) -> Summary:
    """A first save of the scope, after one message so the session exists; the summary as saved."""
    if not await harness.session(scope, **overrides).messages(limit=1):
        await harness.add(scope, [(at(0), "hello")], **{k: v for k, v in overrides.items() if k == "context_id"})
    summary = await harness.session(scope, **overrides).save(Summary(text=text))
    assert summary is not None
    return summary
