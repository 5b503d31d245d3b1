"""The session store's contract (`engine.store.SessionStore`), run unchanged on the in-memory fake, SQLite and
Postgres: its summary row.

Each backend gives a `Harness` (`contract_harness.py`, the `harness` fixture in this directory's conftest.py). The
compare-and-swap, scope and stale-row rules are stated once here, the message reads (cursor, ties, limits, error rows,
the turn's input, contexts) in `test_store_reads.py`; what only a database has (locks, constraints, Langflow's graph
scope, statement counts) stays in `test_database_store.py`, and the row purges, moves and session-wide reads
production runs through `SummaryRows` are in `test_summary_rows.py`.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import uuid
from datetime import datetime, timedelta, timezone

import pytest

from langflow_summarizing_agent.engine.records import Cursor, Summary
from tests.store.contract_harness import EVERY_BACKEND, Harness, at, saved
from tests.support.langflow_db import MemoryScope

pytestmark = EVERY_BACKEND


def won(results: list[Summary | None]) -> list[bool]:
    return [result is not None for result in results]


# Compare-and-swap


async def test_insert_then_compare_and_swap(harness: Harness, memory_scope: MemoryScope) -> None:
    store = harness.session(memory_scope)
    await harness.add(memory_scope, [(at(0), "hello")])
    first = await store.save(Summary(text="first"))
    assert first is not None
    assert (first.version, first.row_id is not None) == (1, True)

    assert await store.save(Summary(text="dup")) is None
    argument = dataclasses.replace(first, text="second", pinned={"k": "v"})
    unchanged = copy.deepcopy(argument)
    second = await store.save(argument)
    assert second is not None
    # A save returns what it stored and never changes its argument.
    assert argument == unchanged
    assert (second.text, second.version, second.row_id) == ("second", 2, first.row_id)
    assert await store.save(dataclasses.replace(first, text="stale")) is None

    stored = await store.load()
    assert (stored.text, stored.version, stored.row_id) == ("second", 2, first.row_id)


async def test_summary_round_trips_every_field(harness: Harness, memory_scope: MemoryScope) -> None:
    ids = await harness.add(memory_scope, [(at(3.000123), "hello")])
    cursor = Cursor(at(3.000123), ids[0])
    retry_after = datetime(2026, 5, 1, 8, 30, tzinfo=timezone(timedelta(hours=2)))
    summary = Summary(
        text="- the user runs PRJ-7",
        pinned={"project_id": "PRJ-7", "cluster": "EU cluster"},
        cursor=cursor,
        folded_count=12,
        summary_model="gpt-4o-mini",
        failed_folds=2,
        retry_after=retry_after,
        fold_failure="RuntimeError: the summary model could not be built",
    )
    store = harness.session(memory_scope)
    saved_summary = await store.save(summary)
    assert saved_summary is not None

    stored = await store.load()
    assert stored == saved_summary
    assert stored.retry_after is not None and stored.retry_after.tzinfo is not None


async def test_version_only_increases(harness: Harness, memory_scope: MemoryScope) -> None:
    summary = await saved(harness, memory_scope, "v0")
    store = harness.session(memory_scope)
    seen = []
    for expected in [1, 0, 2, 1, 3, 2, 4]:
        await store.save(dataclasses.replace(summary, text=f"v{expected}", version=expected))
        seen.append((await store.load()).version)
    assert seen == [2, 2, 3, 3, 4, 4, 5]


async def test_concurrent_writers_on_one_version_exactly_one_wins(harness: Harness, memory_scope: MemoryScope) -> None:
    base = await saved(harness, memory_scope, "base")
    store = harness.session(memory_scope)

    results = await asyncio.gather(*(store.save(dataclasses.replace(base, text=f"writer {n}")) for n in range(6)))

    assert won(results).count(True) == 1
    stored = await store.load()
    assert (stored.version, stored.text) == (2, f"writer {won(results).index(True)}")


async def test_concurrent_first_inserts_exactly_one_wins(harness: Harness, memory_scope: MemoryScope) -> None:
    await harness.add(memory_scope, [(at(0), "hello")])
    store = harness.session(memory_scope)

    results = await asyncio.gather(*(store.save(Summary(text=f"writer {n}")) for n in range(6)))

    assert won(results).count(True) == 1
    stored = await store.load()
    assert (stored.version, stored.text) == (1, f"writer {won(results).index(True)}")


async def test_a_save_that_read_before_a_reset_fails_even_after_a_fresh_row(
    harness: Harness, memory_scope: MemoryScope
) -> None:
    """ABA: a slow fold reads version 1, a reset deletes the row, another run stores a fresh version 1."""
    ids = await harness.add(memory_scope, [(at(0), "hello"), (at(1), "hi")])
    store = harness.session(memory_scope)
    assert await store.save(Summary(text="before the reset")) is not None
    read_by_slow_fold = await store.load()

    assert await harness.reset(memory_scope) == 1
    slow = dataclasses.replace(read_by_slow_fold, text="folded before the reset", cursor=Cursor(at(1), ids[1]))
    assert await store.save(slow) is None

    assert await store.save(Summary(text="rebuilt")) is not None
    assert (await store.load()).version == read_by_slow_fold.version
    assert await store.save(slow) is None
    assert (await store.load()).text == "rebuilt"


async def test_a_deleted_session_gets_no_row_back(harness: Harness, memory_scope: MemoryScope) -> None:
    """A fold that read the session before it was deleted cannot store a row for it, by insert or by swap."""
    ids = await harness.add(memory_scope, [(at(0), "hello"), (at(1), "hi")])
    store = harness.session(memory_scope)
    folded = Summary(text="greetings", cursor=Cursor(at(1), ids[1]), folded_count=2)

    await harness.delete(ids)
    assert await store.save(folded) is None
    assert await store.save(Summary(failed_folds=1)) is None
    assert await harness.count(memory_scope.flow_id) == 0

    ids = await harness.add(memory_scope, [(at(2), "again"), (at(3), "yes")])
    current = Summary(text="s", cursor=Cursor(at(2), ids[0]))
    assert await store.save(current) is not None
    read = await store.load()
    await harness.delete(ids)
    assert await store.save(dataclasses.replace(read, text="late")) is None


async def test_a_save_needs_its_cursor_message_in_the_session(harness: Harness, memory_scope: MemoryScope) -> None:
    ids = await harness.add(memory_scope, [(at(0), "hello"), (at(1), "hi")])
    elsewhere = dataclasses.replace(memory_scope, session_id=f"{memory_scope.session_id}-other")
    other_ids = await harness.add(elsewhere, [(at(0), "elsewhere")])
    store = harness.session(memory_scope)

    assert await store.save(Summary(cursor=Cursor(at(0), other_ids[0]))) is None
    assert await store.save(Summary(cursor=Cursor(at(1), ids[1]))) is not None


# Scope


async def test_no_context_is_one_row_whether_none_or_empty(harness: Harness, memory_scope: MemoryScope) -> None:
    await saved(harness, memory_scope, "none", context_id=None)
    assert await harness.session(memory_scope, context_id="").save(Summary()) is None
    assert (await harness.session(memory_scope, context_id="").load()).text == "none"


async def test_each_context_has_its_own_row(harness: Harness, memory_scope: MemoryScope) -> None:
    await harness.add(memory_scope, [(at(0), "hello")])
    for context_id in ("alpha", "beta", None):
        store = harness.session(memory_scope, context_id=context_id)
        assert await store.save(Summary(text=f"ctx {context_id}")) is not None
    for context_id in ("alpha", "beta", None):
        assert (await harness.session(memory_scope, context_id=context_id).load()).text == f"ctx {context_id}"
    assert await harness.session(memory_scope, context_id="gamma").load() == Summary()


@pytest.mark.parametrize("other", ["user", "flow"])
async def test_another_user_or_flow_cannot_read_or_overwrite(
    harness: Harness, memory_scope: MemoryScope, other: str
) -> None:
    """The purge part of this rule (`SummaryRows.purge` of another owner or flow) is in `test_summary_rows.py`."""
    owners = await saved(harness, memory_scope, "owner's")
    intruder = memory_scope.elsewhere(other)
    await harness.add(intruder, [(at(5), "x")])
    theirs = harness.session(intruder)

    assert await theirs.load() == Summary()
    assert await theirs.save(dataclasses.replace(owners, text="hijack")) is None
    assert [m.text for m in await theirs.messages(limit=10)] == ["x"]
    # Saving at version 0 only ever creates the intruder's own row.
    assert await theirs.save(Summary(text="own")) is not None

    stored = await harness.session(memory_scope).load()
    assert (stored.text, stored.version) == ("owner's", 1)
    assert [m.text for m in await harness.session(memory_scope).messages(limit=10)] == ["hello"]


async def test_unresolvable_ids_fail_closed(harness: Harness, memory_scope: MemoryScope) -> None:
    """The purge part of this rule (a purge of one owner keeps every other owner's row) is in `test_summary_rows.py`."""
    await saved(harness, memory_scope, "kept")
    for broken in (
        memory_scope.scope(user_id="not-a-uuid"),
        memory_scope.scope(user_id=None),
        memory_scope.scope(flow_id=None),
        memory_scope.scope(session_id=""),
    ):
        store = harness.make_store(broken)
        assert await store.load() == Summary()
        assert await store.load_turn(10) == (Summary(), [])
        assert await store.save(Summary()) is None
        assert await store.messages(limit=10) == []
        assert await store.messages(limit=10, newest=True) == []
        assert await store.count() == 0
    assert (await harness.session(memory_scope).load()).text == "kept"


# Stale rows


async def test_a_row_whose_cursor_message_is_gone_loads_emptied_and_is_replaced(
    harness: Harness, memory_scope: MemoryScope
) -> None:
    ids = await harness.add(memory_scope, [(at(i), f"m{i}") for i in range(4)])
    store = harness.session(memory_scope)
    folded = Summary(text="s", pinned={"k": "v"}, cursor=Cursor(at(2), ids[2]), folded_count=3)
    assert await store.save(folded) is not None

    await harness.delete([ids[2]])
    stale, read = await store.load_turn(10)
    assert (stale.text, stale.pinned, stale.cursor, stale.version) == ("", {}, None, 1)
    assert [m.id for m in read] == [ids[0], ids[1], ids[3]]
    assert await store.load() == stale

    fresh = dataclasses.replace(stale, text="fresh start", cursor=Cursor(at(3), ids[3]))
    assert await store.save(fresh) is not None
    assert (await store.load()).text == "fresh start"


async def test_a_row_without_cursor_is_stale_once_its_session_is_empty(
    harness: Harness, memory_scope: MemoryScope
) -> None:
    failing = Summary(failed_folds=2, retry_after=at(60))
    await harness.add(memory_scope, [(at(0), "hello")])
    store = harness.session(memory_scope)
    assert await store.save(failing) is not None
    assert (await store.load()).failed_folds == 2

    await harness.delete([m.id for m in await store.messages(limit=10)])
    assert (await store.load()).failed_folds == 0


async def test_why_the_last_fold_failed_is_kept_until_a_save_clears_it(
    harness: Harness, memory_scope: MemoryScope
) -> None:
    await harness.add(memory_scope, [(at(0), "hello")])
    store = harness.session(memory_scope)
    failing = await store.save(Summary(failed_folds=1, retry_after=at(30), fold_failure="TimeoutError: no answer"))
    assert failing is not None
    assert (await store.load()).fold_failure == "TimeoutError: no answer"

    assert await store.save(dataclasses.replace(failing, failed_folds=0, retry_after=None, fold_failure=None))
    assert (await store.load()).fold_failure is None


# A queued fold's mark


async def test_a_queued_fold_marks_the_summary_until_it_clears_its_own_mark(
    harness: Harness, memory_scope: MemoryScope
) -> None:
    before = datetime.now(timezone.utc) - timedelta(seconds=1)
    store = harness.session(memory_scope)
    first = await saved(harness, memory_scope, "first")
    assert not await harness.fold_queued(memory_scope, before)

    mark = await store.mark_fold_queued()
    assert mark is not None
    assert await harness.fold_queued(memory_scope, before)
    # The mark is no part of the summary: a save by compare-and-swap keeps it and still wins.
    assert await store.load() == first
    assert await store.save(dataclasses.replace(first, text="folded")) is not None
    assert await harness.fold_queued(memory_scope, before)

    await store.clear_fold_queued(mark)
    assert not await harness.fold_queued(memory_scope, before)


async def test_a_mark_older_than_the_bound_counts_as_gone(harness: Harness, memory_scope: MemoryScope) -> None:
    await saved(harness, memory_scope)
    mark = await harness.session(memory_scope).mark_fold_queued()
    assert mark is not None
    assert not await harness.fold_queued(memory_scope, mark)


async def test_clearing_an_earlier_mark_keeps_a_later_one(harness: Harness, memory_scope: MemoryScope) -> None:
    await saved(harness, memory_scope)
    here, elsewhere = harness.session(memory_scope), harness.session(memory_scope)
    earlier = await here.mark_fold_queued()
    assert earlier is not None
    await asyncio.sleep(0.002)
    later = await elsewhere.mark_fold_queued()
    assert later is not None and later > earlier

    await here.clear_fold_queued(earlier)
    assert await harness.fold_queued(memory_scope, earlier)
    await elsewhere.clear_fold_queued(later)
    assert not await harness.fold_queued(memory_scope, earlier - timedelta(seconds=1))


async def test_without_a_summary_or_scope_nothing_is_marked(harness: Harness, memory_scope: MemoryScope) -> None:
    await harness.add(memory_scope, [(at(0), "hello")])
    assert await harness.session(memory_scope).mark_fold_queued() is None
    await saved(harness, memory_scope)
    assert await harness.session(memory_scope, user_id=uuid.uuid4()).mark_fold_queued() is None
    assert await harness.session(memory_scope, session_id="").mark_fold_queued() is None


async def test_a_reset_takes_the_mark_with_the_summary(harness: Harness, memory_scope: MemoryScope) -> None:
    before = datetime.now(timezone.utc) - timedelta(seconds=1)
    await saved(harness, memory_scope)
    assert await harness.session(memory_scope).mark_fold_queued() is not None
    assert await harness.reset(memory_scope) == 1
    await saved(harness, memory_scope)
    assert not await harness.fold_queued(memory_scope, before)
