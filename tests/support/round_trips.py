"""Round trips to Langflow's database: statements and commits, counted while a block runs (tests and benchmarks)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any


@dataclass
class RoundTrips:
    statements: int = 0
    commits: int = 0


@contextmanager
def statement_counter() -> Iterator[RoundTrips]:
    """Counts statements and commits sent to Langflow's database (a round trip each) while the block runs."""
    from langflow.services.deps import get_db_service
    from sqlalchemy import event

    counter = RoundTrips()
    engine = get_db_service().engine.sync_engine

    def statement(*_: Any) -> None:
        counter.statements += 1

    def commit(*_: Any) -> None:
        counter.commits += 1

    event.listen(engine, "before_cursor_execute", statement)
    event.listen(engine, "commit", commit)
    try:
        yield counter
    finally:
        event.remove(engine, "commit", commit)
        event.remove(engine, "before_cursor_execute", statement)
