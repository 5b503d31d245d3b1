"""Langflow's services in this process, on a real database: what the `langflow_db` fixture yields, fresh scope ids,
and reading a stored summary the way a turn reads it."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, replace
from typing import Any

import pytest

from langflow_summarizing_agent.engine.records import Scope, Summary

STORE_IN_MEMORY = "memory"
"""A `langflow_db` parameter for the store contract suite only: the in-memory fake store, no Langflow services."""

LANGFLOW_BACKENDS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
]


@dataclass(frozen=True)
class LangflowDatabase:
    """The database Langflow's services run on. `url` is a synchronous SQLAlchemy URL for direct access."""

    backend: str
    url: str


@dataclass(frozen=True)
class MemoryScope:
    """Fresh ids for one chat-history scope: a flow, an owner and a session in it."""

    flow_id: uuid.UUID
    user_id: uuid.UUID
    session_id: str

    @classmethod
    def new(cls) -> MemoryScope:
        return cls(uuid.uuid4(), uuid.uuid4(), f"session-{uuid.uuid4().hex[:8]}")

    def elsewhere(self, other: str) -> MemoryScope:
        """The same session id under a fresh owner (`other` "user") or in a fresh flow ("flow")."""
        if other == "user":
            return replace(self, user_id=uuid.uuid4())
        if other == "flow":
            return replace(self, flow_id=uuid.uuid4())
        raise ValueError(f"other is 'user' or 'flow', not {other!r}")

    def scope(self, **overrides: Any) -> Scope:
        """The engine's `Scope` of these ids (`context_id` and any id overridden)."""
        values: dict[str, Any] = {"flow_id": self.flow_id, "user_id": self.user_id, "session_id": self.session_id}
        return Scope(**{**values, **overrides})

    def store(self, *, before: Any = None, through: Any = None, locks: Any = None, **overrides: Any) -> Any:
        """A `DatabaseStore` of this scope, holding its fold lock in `locks` (the current runtime's by default)."""
        return database_store(self.scope(**overrides), before=before, through=through, locks=locks)


def database_store(scope: Scope, *, before: Any = None, through: Any = None, locks: Any = None) -> Any:
    """A `DatabaseStore` of `scope` as a turn makes it: with the fold locks of the current runtime unless given."""
    from langflow_summarizing_agent.storage.store import DatabaseStore
    from langflow_summarizing_agent.wiring import runtime

    held = runtime.current().fold_locks if locks is None else locks
    return DatabaseStore(scope, locks=held, before=before, through=through)


async def stored_summary(
    *, flow_id: Any, user_id: Any, session_id: str, context_id: str | None = None
) -> Summary | None:
    """A scope's summary as a turn loads it from Langflow's database; None when no row is stored."""
    summary = await database_store(Scope(flow_id, user_id, session_id, context_id)).load()
    return None if summary.row_id is None else summary


async def restart_langflow_services() -> None:
    """(Re)start Langflow's services from the current environment, as a Langflow worker does on startup, and bring
    the summary table to head, as a worker does before it first uses storage (`Runtime.ready`)."""
    from langflow.services.utils import initialize_services

    from langflow_summarizing_agent.storage.migrate import current_database_url, upgrade

    # Services left by an earlier fixture or test would keep their old settings (and database).
    await stop_langflow_services()
    await initialize_services()
    await upgrade(current_database_url())


async def stop_langflow_services() -> None:
    from lfx.services.manager import get_service_manager

    manager = get_service_manager()
    if not manager.services:
        return
    from langflow.services.utils import teardown_services

    # teardown_services() disposes every service and empties the manager, so the next start reads settings anew.
    await teardown_services()
