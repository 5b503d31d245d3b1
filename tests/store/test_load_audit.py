"""The load benchmark's audit (`benchmarks.load.audit_phase`) on a real Langflow database: it counts the messages a
fold reads, so the error row Langflow stores for a turn that failed (as during a database restart) is no message the
summary must name."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta, timezone

import pytest
import sqlalchemy as sa

from benchmarks.load import Phase, audit_phase
from langflow_summarizing_agent.engine.records import Cursor, Scope, Summary
from langflow_summarizing_agent.storage.database import DatabaseStore
from tests.support.langflow_db import LangflowDatabase, MemoryScope

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=timezone.utc)
MARKERS = ["s1001-u0", "s1001-a0", "s1001-u1", "s1001-a1", "s1001-u2", "s1001-a2"]


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


@pytest.mark.parametrize("with_error_row", [False, True])
async def test_the_audit_holds_when_a_failed_turn_left_an_error_row_among_the_folded_messages(
    langflow_db: LangflowDatabase, memory_scope: MemoryScope, insert_messages, with_error_row: bool
) -> None:
    scope = memory_scope
    messages = [(at(n), f"#{marker}# words") for n, marker in enumerate(MARKERS)]
    stored = await insert_messages(scope, messages[:3])
    if with_error_row:
        # What Langflow stores when a component fails: an error row from the machine, between the turn's question
        # (stored) and the next one.
        await insert_messages(
            scope,
            [(at(2.5), "Error running graph: connection failed")],
            sender="Machine",
            sender_name="AI",
            error=True,
            category="error",
        )
    stored += await insert_messages(scope, messages[3:])
    newest = stored[-1]
    summary = Summary(
        text="\n".join(f"- folded #{marker}#" for marker in MARKERS),
        cursor=Cursor(newest.timestamp, str(newest.id)),
        folded_count=len(MARKERS),
    )
    saved = await DatabaseStore(Scope(**dataclasses.asdict(scope.scope()))).save(summary)
    assert saved is not None

    engine = sa.create_engine(langflow_db.url, poolclass=sa.pool.NullPool)
    try:
        phase = Phase(name="audit", backend=langflow_db.backend, users=1, seconds=1.0, think_seconds=0.0)
        audit = audit_phase(engine, phase, str(scope.flow_id), deleted=[], n_messages=2)
    finally:
        engine.dispose()
    assert audit["problems"] == []
    assert audit["holds"]
    assert audit["folded_messages"] == len(MARKERS)
