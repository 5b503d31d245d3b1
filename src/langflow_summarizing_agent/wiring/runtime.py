"""The runtime: what this process keeps across turns, built once where the process starts.

A `Runtime` holds the folds that run after the reply (or none, where folds run inline), the token usage the
providers reported, the back-off of saves that failed, the fold locks this process holds, and the databases whose
summary table it has migrated. `langflow run` installs one through the `langflow.plugins` entry point
(`wiring.plugin`); where no server loop outlives the turn (`lfx run`, a script), the components get the process's
inline runtime, made on first use. Tests build the runtime they need and install it with `using()`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from langflow_summarizing_agent.engine.fold import SaveFailures
from langflow_summarizing_agent.engine.records import ScopeKey
from langflow_summarizing_agent.engine.store import HeldScopes
from langflow_summarizing_agent.wiring.timing import FoldTiming, Inline
from langflow_summarizing_agent.wiring.usage import SessionUsage


@dataclass
class Runtime:
    """This process's memory of turns: one object, handed to the turn runner."""

    timing: FoldTiming = field(default_factory=Inline)
    """When a turn's due fold runs."""
    usage: SessionUsage = field(default_factory=SessionUsage)
    save_failures: SaveFailures = field(default_factory=SaveFailures)
    fold_locks: HeldScopes = field(default_factory=HeldScopes)
    migrated: set[str] = field(default_factory=set)
    """The database URLs whose summary table this runtime has brought to head."""
    _migrating: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def ready(self) -> None:
        """Bring the summary table of Langflow's current database to head, once per database in this runtime."""
        from langflow_summarizing_agent.storage.migrate import current_database_url, upgrade

        url = current_database_url()
        if url in self.migrated:
            return
        async with self._migrating:
            if url not in self.migrated:
                await upgrade(url)
                self.migrated.add(url)

    def forget(self, key: ScopeKey) -> None:
        """Drop what this process keeps of a deleted session."""
        self.usage.forget(key)
        self.save_failures.forget(key)
        self.timing.forget(key)


_installed: Runtime | None = None
_inline: Runtime | None = None


def install(runtime: Runtime) -> Runtime:
    """Make `runtime` this process's runtime; idempotent: the first one installed stays."""
    global _installed
    if _installed is None:
        _installed = runtime
    return _installed


def current() -> Runtime:
    """The installed runtime, else the process's inline runtime (folds in the turn)."""
    global _inline
    if _installed is not None:
        return _installed
    if _inline is None:
        _inline = Runtime()
    return _inline


@contextmanager
def using(runtime: Runtime) -> Iterator[Runtime]:
    """Make `runtime` the current one while the block runs (tests and benchmarks)."""
    global _installed
    before = _installed
    _installed = runtime
    try:
        yield runtime
    finally:
        _installed = before
