"""A session's memory keeps versions, and a user can edit, seed and roll it back: `storage.versions` and
`storage.edits` on a real Langflow database, SQLite and Postgres.

A save given a `Change` keeps the summary it stores as a version (a fold's, with its cost); a back-off save keeps
none. A user's write is a compare-and-swap like a fold's save: whichever comes second loses. A row's versions go with
it, whatever path deletes it.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
import sqlalchemy as sa

from langflow_summarizing_agent.engine.records import Change, Cursor, Summary, utcnow
from langflow_summarizing_agent.storage.edits import (
    Expected,
    MemoryEdit,
    NoSuchVersionError,
    StaleVersionError,
    write_session_memory,
)
from langflow_summarizing_agent.storage.models import VERSION_TABLE_NAME
from langflow_summarizing_agent.storage.store import on_rows, reset_session, session_summaries
from langflow_summarizing_agent.storage.versions import VERSIONS_KEPT_ENV, Version, VersionRows
from langflow_summarizing_agent.wiring import lifecycle
from tests.support.langflow_db import LangflowDatabase, MemoryScope

T0 = datetime(2026, 4, 1, 9, 0, tzinfo=timezone.utc)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


@pytest.fixture
def listeners() -> Iterator[None]:
    """The listeners as the registrar installs them, removed afterwards so other tests see plain Langflow."""
    lifecycle.install_listeners()
    try:
        yield
    finally:
        lifecycle._remove_listeners()


async def four_messages(scope: MemoryScope, insert_messages: Any) -> list[Any]:
    return await insert_messages(scope, [(at(0), "first"), (at(1), "second"), (at(2), "third"), (at(3), "fourth")])


def cursor_at(message: Any) -> Cursor:
    return Cursor(message.timestamp.astimezone(timezone.utc), str(message.id))


def a_fold(messages: int = 2, **cost: Any) -> Change:
    return Change(kind="fold", messages=messages, **cost)


async def fold_saved(scope: MemoryScope, base: Summary, change: Change | None = None, **fields: Any) -> Summary:
    """`base` with `fields`, saved by the scope's store with `change` (None: a back-off's save); the saved summary."""
    saved = await scope.store().save(dataclasses.replace(base, **fields), change)
    assert saved is not None
    return saved


async def versions_of(summary: Summary) -> list[Version]:
    """The versions kept for `summary`'s row, newest first."""
    assert summary.row_id is not None
    row_id = uuid.UUID(summary.row_id)
    return await on_rows(lambda rows: VersionRows(rows.connection).versions(row_id))


async def write(scope: MemoryScope, expected: Expected, edit: MemoryEdit, **overrides: Any) -> Any:
    return await write_session_memory(
        flow_id=scope.flow_id,
        user_id=scope.user_id,
        session_id=scope.session_id,
        context_id=overrides.get("context_id"),
        expected=expected,
        edit=edit,
        by=overrides.get("by", scope.user_id),
    )


def expected_of(summary: Summary) -> Expected:
    return Expected(row_id=summary.row_id, version=summary.version)


def version_rows_in_table(langflow_db: LangflowDatabase, row_ids: list[str]) -> int:
    """Rows of the version table of the summary rows `row_ids`, counted on a connection of its own."""
    engine = sa.create_engine(langflow_db.url, poolclass=sa.pool.NullPool)
    try:
        table = sa.Table(VERSION_TABLE_NAME, sa.MetaData(), autoload_with=engine)
        ids = [uuid.UUID(row_id) for row_id in row_ids]
        with engine.connect() as connection:
            stmt = sa.select(sa.func.count()).select_from(table).where(table.c.summary_id.in_(ids))
            return int(connection.execute(stmt).scalar_one())
    finally:
        engine.dispose()


# A fold's save


async def test_a_fold_keeps_the_saved_summary_as_a_version_with_its_cost(
    memory_scope: MemoryScope, insert_messages
) -> None:
    messages = await four_messages(memory_scope, insert_messages)
    change = Change(kind="fold", calls=2, input_tokens=900, output_tokens=120, cached_tokens=300, messages=2, tokens=64)

    saved = await fold_saved(
        memory_scope,
        Summary(),
        change,
        text="They deploy on Fridays.",
        pinned={"project_id": "PRJ-1"},
        cursor=cursor_at(messages[1]),
        folded_count=2,
        folded_tokens=64,
        summary_model="gpt-x",
    )

    [version] = await versions_of(saved)
    assert (version.version, version.change, version.changed_by) == (1, "fold", None)
    assert version.cost == change
    kept = version.summary
    assert (kept.text, kept.pinned, kept.cursor, kept.folded_count, kept.folded_tokens, kept.summary_model) == (
        "They deploy on Fridays.",
        {"project_id": "PRJ-1"},
        cursor_at(messages[1]),
        2,
        64,
        "gpt-x",
    )
    assert (kept.version, kept.row_id) == (1, saved.row_id)


async def test_a_first_save_without_a_change_keeps_no_version(memory_scope: MemoryScope, insert_messages) -> None:
    await four_messages(memory_scope, insert_messages)

    saved = await fold_saved(memory_scope, Summary(), text="kept before versions")

    assert await versions_of(saved) == []


async def test_a_back_off_save_keeps_no_version(memory_scope: MemoryScope, insert_messages) -> None:
    messages = await four_messages(memory_scope, insert_messages)
    folded = await fold_saved(memory_scope, Summary(), a_fold(), text="folded", cursor=cursor_at(messages[1]))

    backed_off = await fold_saved(
        memory_scope, folded, None, failed_folds=1, retry_after=at(600), fold_failure="model timed out"
    )

    assert backed_off.version == 2
    assert [version.version for version in await versions_of(backed_off)] == [1]


async def test_only_the_newest_versions_kept_remain(
    memory_scope: MemoryScope, insert_messages, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(VERSIONS_KEPT_ENV, "3")
    messages = await four_messages(memory_scope, insert_messages)
    summary = Summary()
    for n in range(5):
        summary = await fold_saved(
            memory_scope, summary, a_fold(), text=f"fold {n + 1}", cursor=cursor_at(messages[n % 4])
        )

    kept = await versions_of(summary)

    assert [(version.version, version.summary.text) for version in kept] == [
        (5, "fold 5"),
        (4, "fold 4"),
        (3, "fold 3"),
    ]


# A user's edit


async def test_editing_a_row_stored_before_versions_records_its_previous_summary_first(
    memory_scope: MemoryScope, insert_messages
) -> None:
    messages = await four_messages(memory_scope, insert_messages)
    before = await fold_saved(
        memory_scope,
        Summary(),
        text="stored before versions",
        pinned={"project_id": "PRJ-1"},
        cursor=cursor_at(messages[1]),
        folded_count=2,
    )
    editor = uuid.uuid4()
    started = utcnow()

    written = await write(
        memory_scope,
        expected_of(before),
        MemoryEdit(summary="edited by hand", pinned={"owner": "Ada", "project_id": None}),
        by=editor,
    )

    assert (written.summary.version, written.summary.row_id) == (2, before.row_id)
    edit, recorded = await versions_of(before)
    assert (recorded.version, recorded.change, recorded.changed_by) == (1, "recorded", None)
    assert (recorded.summary.text, recorded.summary.pinned) == ("stored before versions", {"project_id": "PRJ-1"})
    assert (edit.version, edit.change, edit.changed_by) == (2, "edit", str(editor))
    assert (edit.summary.text, edit.summary.pinned, edit.summary.cursor) == (
        "edited by hand",
        {"owner": "Ada"},
        cursor_at(messages[1]),
    )
    row = await memory_scope.store().load()
    assert (row.text, row.version, row.edited_by) == ("edited by hand", 2, str(editor))
    assert row.edited_at is not None and started <= row.edited_at <= utcnow()


async def test_a_write_based_on_a_replaced_summary_is_refused_with_the_current_one(
    memory_scope: MemoryScope, insert_messages
) -> None:
    messages = await four_messages(memory_scope, insert_messages)
    read = await fold_saved(memory_scope, Summary(), a_fold(), text="folded", cursor=cursor_at(messages[1]))
    await write(memory_scope, expected_of(read), MemoryEdit(summary="first edit"))

    with pytest.raises(StaleVersionError) as refused:
        await write(memory_scope, expected_of(read), MemoryEdit(summary="second edit"))

    current = refused.value.current
    assert current is not None
    assert (current.user_id, current.summary.text, current.summary.version) == (memory_scope.user_id, "first edit", 2)
    assert (await memory_scope.store().load()).text == "first edit"


async def test_a_fold_that_read_before_an_edit_loses_its_save(memory_scope: MemoryScope, insert_messages) -> None:
    messages = await four_messages(memory_scope, insert_messages)
    await fold_saved(memory_scope, Summary(), a_fold(), text="folded", cursor=cursor_at(messages[1]), folded_count=2)
    read = await memory_scope.store().load()
    await write(memory_scope, expected_of(read), MemoryEdit(summary="edited", pinned={"owner": "Ada"}))

    lost = await memory_scope.store().save(
        dataclasses.replace(read, text="folded further", cursor=cursor_at(messages[3]), folded_count=4), a_fold()
    )

    assert lost is None
    row = await memory_scope.store().load()
    assert (row.text, row.pinned, row.cursor, row.folded_count, row.version) == (
        "edited",
        {"owner": "Ada"},
        cursor_at(messages[1]),
        2,
        2,
    )
    assert [(version.version, version.change) for version in await versions_of(row)] == [(2, "edit"), (1, "fold")]


# Seeding a session before its first message


async def test_seeding_a_session_without_messages_keeps_its_pinned_facts_for_the_first_turn(
    memory_scope: MemoryScope, insert_messages
) -> None:
    seeded = await write(memory_scope, Expected(), MemoryEdit(pinned={"customer": "ACME", "plan": "gold"}))

    assert (seeded.summary.version, seeded.summary.pinned) == (1, {"customer": "ACME", "plan": "gold"})
    [shown] = await session_summaries(flow_id=memory_scope.flow_id, session_id=memory_scope.session_id)
    assert (shown.user_id, shown.summary.pinned, shown.summary.version) == (
        memory_scope.user_id,
        {"customer": "ACME", "plan": "gold"},
        1,
    )
    assert shown.summary.edited_at is not None
    [version] = await versions_of(seeded.summary)
    assert (version.change, version.changed_by) == ("seed", str(memory_scope.user_id))

    await insert_messages(memory_scope, [(at(0), "hello")])
    loaded = await memory_scope.store().load()

    assert (loaded.pinned, loaded.cursor, loaded.version, loaded.row_id) == (
        {"customer": "ACME", "plan": "gold"},
        None,
        1,
        seeded.summary.row_id,
    )


async def test_seeding_a_session_that_has_a_summary_is_refused(memory_scope: MemoryScope, insert_messages) -> None:
    messages = await four_messages(memory_scope, insert_messages)
    await fold_saved(memory_scope, Summary(), a_fold(), text="folded", cursor=cursor_at(messages[1]))

    with pytest.raises(StaleVersionError) as refused:
        await write(memory_scope, Expected(), MemoryEdit(pinned={"customer": "ACME"}))

    assert refused.value.current is not None
    assert refused.value.current.summary.text == "folded"
    assert (await memory_scope.store().load()).pinned == {}


# Rollback


async def test_a_rollback_restores_a_versions_text_and_pinned_facts_keeping_the_cursor(
    memory_scope: MemoryScope, insert_messages
) -> None:
    messages = await four_messages(memory_scope, insert_messages)
    first = await fold_saved(
        memory_scope,
        Summary(),
        a_fold(),
        text="first",
        pinned={"plan": "gold"},
        cursor=cursor_at(messages[1]),
        folded_count=2,
    )
    second = await fold_saved(
        memory_scope,
        first,
        a_fold(),
        text="second",
        pinned={"plan": "silver", "region": "eu"},
        cursor=cursor_at(messages[3]),
        folded_count=4,
    )

    rolled = await write(memory_scope, expected_of(second), MemoryEdit(rollback_to=1))

    row = await memory_scope.store().load()
    assert (row.text, row.pinned, row.cursor, row.folded_count, row.version) == (
        "first",
        {"plan": "gold"},
        cursor_at(messages[3]),
        4,
        3,
    )
    assert row.edited_by == str(memory_scope.user_id)
    assert rolled.summary.version == 3
    newest = (await versions_of(row))[0]
    assert (newest.version, newest.change, newest.cost.rolled_back_to, newest.changed_by) == (
        3,
        "rollback",
        1,
        str(memory_scope.user_id),
    )
    assert (newest.summary.text, newest.summary.pinned, newest.summary.cursor) == (
        "first",
        {"plan": "gold"},
        cursor_at(messages[3]),
    )


async def test_a_rollback_to_a_version_no_longer_kept_is_refused(
    memory_scope: MemoryScope, insert_messages, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(VERSIONS_KEPT_ENV, "2")
    messages = await four_messages(memory_scope, insert_messages)
    summary = Summary()
    for n in range(3):
        summary = await fold_saved(memory_scope, summary, a_fold(), text=f"fold {n + 1}", cursor=cursor_at(messages[n]))

    with pytest.raises(NoSuchVersionError):
        await write(memory_scope, expected_of(summary), MemoryEdit(rollback_to=1))
    with pytest.raises(NoSuchVersionError):
        await write(memory_scope, expected_of(summary), MemoryEdit(rollback_to=7))

    row = await memory_scope.store().load()
    assert (row.text, row.version, row.edited_at) == ("fold 3", 3, None)


# A row's versions go with it


async def summaries_with_versions(scope: MemoryScope, insert_messages: Any) -> list[str]:
    """Summaries of `scope`'s session in no context and in "ctx", each with a fold and an edit kept; their row ids."""
    messages = await four_messages(scope, insert_messages)
    row_ids = []
    for context_id in (None, "ctx"):
        store = scope.store(context_id=context_id)
        folded = await store.save(Summary(text="folded", cursor=cursor_at(messages[1])), a_fold())
        assert folded is not None
        await write(scope, expected_of(folded), MemoryEdit(summary="edited"), context_id=context_id)
        assert folded.row_id is not None
        row_ids.append(folded.row_id)
    return row_ids


async def test_resetting_a_session_deletes_its_versions(
    langflow_db: LangflowDatabase, memory_scope: MemoryScope, insert_messages
) -> None:
    row_ids = await summaries_with_versions(memory_scope, insert_messages)
    assert version_rows_in_table(langflow_db, row_ids) == 4

    assert await reset_session(flow_id=memory_scope.flow_id, session_id=memory_scope.session_id) == 2

    assert version_rows_in_table(langflow_db, row_ids) == 0


async def test_deleting_a_whole_session_through_langflow_deletes_its_versions(
    listeners: None, langflow_db: LangflowDatabase, memory_scope: MemoryScope, insert_messages
) -> None:
    from langflow.memory import adelete_messages

    row_ids = await summaries_with_versions(memory_scope, insert_messages)
    other = MemoryScope(memory_scope.flow_id, memory_scope.user_id, f"{memory_scope.session_id}-other")
    other_ids = await summaries_with_versions(other, insert_messages)

    await adelete_messages(memory_scope.session_id, flow_id=memory_scope.flow_id, user_id=memory_scope.user_id)

    assert version_rows_in_table(langflow_db, row_ids) == 0
    assert version_rows_in_table(langflow_db, other_ids) == 4
