"""The load benchmark's audit (`benchmarks.load_audit.audit_phase`) on a real Langflow database: it counts the
messages a fold reads, so the error row Langflow stores for a turn that failed (as during a database restart) is no
message the summary must name; and it fails on each rule broken: a message folded twice, a `folded_count` other than
what the cursor covers, a version that went down, a deleted session's summary row left behind."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta, timezone

import pytest
import sqlalchemy as sa

from benchmarks.load_audit import audit_phase
from langflow_summarizing_agent.engine.records import Cursor, Scope, Summary
from tests.support.langflow_db import LangflowDatabase, MemoryScope, database_store

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=timezone.utc)
MARKERS = ["s1001-u0", "s1001-a0", "s1001-u1", "s1001-a1", "s1001-u2", "s1001-a2"]


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


async def folded_session(
    memory_scope: MemoryScope, insert_messages, *, summary_markers: list[str] = MARKERS, folded_count: int = 6
) -> None:
    """The session of `memory_scope` with `MARKERS` stored and a saved summary listing `summary_markers`, its
    cursor at the newest message."""
    stored = await insert_messages(memory_scope, [(at(n), f"#{marker}# words") for n, marker in enumerate(MARKERS)])
    newest = stored[-1]
    summary = Summary(
        text="\n".join(f"- folded #{marker}#" for marker in summary_markers),
        cursor=Cursor(newest.timestamp, str(newest.id)),
        folded_count=folded_count,
    )
    assert await database_store(Scope(**dataclasses.asdict(memory_scope.scope()))).save(summary) is not None


def audit(langflow_db: LangflowDatabase, memory_scope: MemoryScope, **options) -> dict:
    engine = sa.create_engine(langflow_db.url, poolclass=sa.pool.NullPool)
    try:
        delete = options.pop("delete", None)
        if delete:
            options["delete"] = lambda: delete(engine)
        return audit_phase(engine, memory_scope.flow_id, n_messages=2, **options)
    finally:
        engine.dispose()


async def test_the_audit_holds_on_a_session_folded_once(
    langflow_db: LangflowDatabase, memory_scope: MemoryScope, insert_messages
) -> None:
    await folded_session(memory_scope, insert_messages)
    result = audit(langflow_db, memory_scope, versions={memory_scope.session_id: [(1, 2), (2, 4), (3, 6)]})
    assert result["problems"] == []
    assert result["holds"]
    assert (result["sessions"], result["folded_messages"]) == (1, len(MARKERS))


async def test_the_audit_fails_on_a_message_folded_twice(
    langflow_db: LangflowDatabase, memory_scope: MemoryScope, insert_messages
) -> None:
    await folded_session(memory_scope, insert_messages, summary_markers=[*MARKERS[:3], *MARKERS[2:]], folded_count=6)
    result = audit(langflow_db, memory_scope)
    assert not result["holds"]
    assert any("folded twice" in problem and MARKERS[2] in problem for problem in result["problems"])


async def test_the_audit_fails_on_a_folded_count_other_than_what_the_cursor_covers(
    langflow_db: LangflowDatabase, memory_scope: MemoryScope, insert_messages
) -> None:
    await folded_session(memory_scope, insert_messages, folded_count=4)
    result = audit(langflow_db, memory_scope)
    assert not result["holds"]
    assert result["problems"] == [f"{memory_scope.session_id}: folded_count 4, the cursor covers 6"]


@pytest.mark.parametrize("summary_words", [12, 300])
async def test_the_audit_fails_on_a_message_left_out_of_the_summary_and_says_when_it_was_clipped(
    langflow_db: LangflowDatabase, memory_scope: MemoryScope, insert_messages, summary_words: int
) -> None:
    # Four of six lines of three words: at a budget of 12 words the engine clipped the rest.
    await folded_session(memory_scope, insert_messages, summary_markers=MARKERS[:4])
    result = audit(langflow_db, memory_scope, summary_words=summary_words)
    assert not result["holds"]
    [problem] = [p for p in result["problems"] if "the summary folds 4 messages, the cursor covers 6" in p]
    assert ("clipped" in problem) is (summary_words == 12)


@pytest.mark.parametrize(("messages", "holds"), [(4, True), (10, False)])
async def test_the_audit_fails_on_a_session_that_chatted_with_a_fold_due_and_saved_no_summary(
    langflow_db: LangflowDatabase, memory_scope: MemoryScope, insert_messages, messages: int, holds: bool
) -> None:
    # At a window of 2, 4 messages leave 3 older ones (no fold due yet); 10 leave 9, over Fold Batch (8).
    await insert_messages(memory_scope, [(at(n), f"#s1001-u{n}# words") for n in range(messages)])
    result = audit(langflow_db, memory_scope, chatted=[memory_scope.session_id])
    assert result["sessions"] == 1
    assert result["holds"] is holds
    if not holds:
        assert result["problems"] == [
            f"{memory_scope.session_id}: 9 messages older than the window and no summary saved"
        ]


async def test_the_audit_fails_on_a_version_that_went_down(
    langflow_db: LangflowDatabase, memory_scope: MemoryScope, insert_messages
) -> None:
    await folded_session(memory_scope, insert_messages)
    result = audit(langflow_db, memory_scope, versions={memory_scope.session_id: [(1, 2), (3, 6), (2, 4)]})
    assert not result["holds"]
    assert any("the version went down" in problem for problem in result["problems"])


@pytest.mark.parametrize("purged", [True, False])
async def test_the_audit_deletes_after_checking_folds_and_fails_on_a_summary_row_left_behind(
    langflow_db: LangflowDatabase, memory_scope: MemoryScope, insert_messages, purged: bool
) -> None:
    await folded_session(memory_scope, insert_messages)

    def delete(engine: sa.Engine) -> list[str]:
        # What a session delete does to the summary row when the purge works (`purged`), or not at all.
        if purged:
            with engine.begin() as connection:
                connection.execute(
                    sa.text("DELETE FROM session_memory_state WHERE session_id = :session_id"),
                    {"session_id": memory_scope.session_id},
                )
        return [memory_scope.session_id]

    result = audit(langflow_db, memory_scope, delete=delete)
    # The deleted session was audited before it went: its folds count.
    assert (result["sessions"], result["folded_messages"], result["deleted_sessions"]) == (1, len(MARKERS), 1)
    assert result["holds"] is purged
    if not purged:
        assert result["problems"] == [f"{memory_scope.session_id}: deleted, but its state row is still there"]


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
    saved = await database_store(Scope(**dataclasses.asdict(scope.scope()))).save(summary)
    assert saved is not None

    engine = sa.create_engine(langflow_db.url, poolclass=sa.pool.NullPool)
    try:
        audit = audit_phase(engine, scope.flow_id, n_messages=2)
    finally:
        engine.dispose()
    assert audit["problems"] == []
    assert audit["holds"]
    assert audit["folded_messages"] == len(MARKERS)


async def edited_session(memory_scope: MemoryScope, insert_messages, *, tamper: str = "") -> None:
    """The session of `memory_scope` with `MARKERS` stored, folded two messages at a time with versions kept, its
    pinned fact edited between the first two folds and rolled back to version 1 after the last; `tamper` breaks one
    rule in the last fold: "pinned" (the fold changes the edited fact) or "twice" (it folds a message again)."""
    from langflow_summarizing_agent.engine.records import Change
    from langflow_summarizing_agent.storage.edits import Expected, MemoryEdit, write_session_memory

    stored = await insert_messages(memory_scope, [(at(n), f"#{marker}# words") for n, marker in enumerate(MARKERS)])
    store = database_store(Scope(**dataclasses.asdict(memory_scope.scope())))
    summary = Summary()
    for end in (2, 4, 6):
        markers = MARKERS[:end] if not (tamper == "twice" and end == 6) else [*MARKERS[:end], MARKERS[0]]
        pinned = {"cluster": "eu-1"} if tamper == "pinned" and end == 6 else summary.pinned
        folded = dataclasses.replace(
            summary,
            text="\n".join(f"- folded #{marker}#" for marker in markers),
            pinned=pinned,
            cursor=Cursor(stored[end - 1].timestamp, str(stored[end - 1].id)),
            folded_count=end,
        )
        saved = await store.save(folded, Change(kind="fold", calls=1, messages=2))
        assert saved is not None
        summary = saved
        if end == 2:
            written = await write_session_memory(
                flow_id=memory_scope.flow_id,
                user_id=memory_scope.user_id,
                session_id=memory_scope.session_id,
                context_id=None,
                expected=Expected(summary.row_id, summary.version),
                edit=MemoryEdit(pinned={"cluster": "eu-3"}),
                by=memory_scope.user_id,
            )
            summary = written.summary
    await write_session_memory(
        flow_id=memory_scope.flow_id,
        user_id=memory_scope.user_id,
        session_id=memory_scope.session_id,
        context_id=None,
        expected=Expected(summary.row_id, summary.version),
        edit=MemoryEdit(rollback_to=1),
        by=memory_scope.user_id,
    )


@pytest.mark.parametrize(
    ("tamper", "problem"),
    [("", None), ("pinned", "the fold changed the pinned facts"), ("twice", "did not fold exactly the messages")],
)
async def test_the_version_audit_follows_folds_edits_and_a_rollback_and_fails_on_each_rule_broken(
    langflow_db: LangflowDatabase, memory_scope: MemoryScope, insert_messages, tamper: str, problem: str | None
) -> None:
    await edited_session(memory_scope, insert_messages, tamper=tamper)

    result = audit(langflow_db, memory_scope, rolled_back={memory_scope.session_id}, versions_kept=20)

    assert result["holds"] is (problem is None), result["problems"]
    if problem is not None:
        assert [p for p in result["problems"] if problem in p], result["problems"]


async def test_the_version_audit_fails_on_more_versions_than_kept_and_on_versions_left_behind(
    langflow_db: LangflowDatabase, memory_scope: MemoryScope, insert_messages
) -> None:
    await edited_session(memory_scope, insert_messages)

    def delete(engine: sa.Engine) -> list[str]:
        # The summary row goes without its versions, as a purge that forgot them would.
        with engine.begin() as connection:
            connection.execute(
                sa.text("DELETE FROM session_memory_state WHERE session_id = :session_id"),
                {"session_id": memory_scope.session_id},
            )
        return [memory_scope.session_id]

    result = audit(langflow_db, memory_scope, rolled_back={memory_scope.session_id}, versions_kept=3, delete=delete)

    assert f"{memory_scope.session_id}: 5 versions kept, more than 3" in result["problems"]
    assert "5 versions outlived their summary row" in result["problems"]
