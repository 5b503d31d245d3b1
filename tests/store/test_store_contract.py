"""The session store's contract (`engine.store.SessionStore`), run unchanged on the in-memory fake, SQLite and
Postgres.

Each backend gives a `Harness`: a `SessionStore` per scope, a way to store and delete chat messages as Langflow does
(without the listeners, which `test_lifecycle` covers), and the two session-wide row operations the rules below
need (reset a session's rows, count a flow's rows). Scope, cursor, tie and compare-and-swap rules are stated once
here; what only a database has (locks, constraints, Langflow's graph scope, statement counts) stays in
`test_database_store.py`, and the row purges, moves and session-wide reads production runs through `SummaryRows` are
in `test_summary_rows.py`.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import uuid
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from langflow_summarizing_agent.engine.records import Cursor, Scope, StoredMessage, Summary
from langflow_summarizing_agent.engine.store import SessionStore
from tests.support.fakes import InMemoryDatabase
from tests.support.langflow_db import STORE_IN_MEMORY, LangflowDatabase, MemoryScope

pytestmark = pytest.mark.parametrize(
    "langflow_db",
    [STORE_IN_MEMORY, "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)],
    indirect=True,
)

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

    def session(self, scope: MemoryScope, *, before: Any = None, through: Any = None, **overrides: Any) -> SessionStore:
        """The store of `scope` (`context_id` and any id overridden), its reads ending before or through a message."""
        return self.make_store(scope.scope(**overrides), before=before, through=through)


@pytest.fixture
def harness(langflow_db: LangflowDatabase, insert_messages) -> Harness:
    if langflow_db.backend == STORE_IN_MEMORY:
        return _memory_harness()
    from tests.support.langflow_db import database_store

    async def add(scope: MemoryScope, rows: list[tuple[datetime, str]], **columns: Any) -> list[str]:
        return [str(row.id) for row in await insert_messages(scope, rows, **columns)]

    return Harness(database_store, add, _delete_behind_langflows_back, _reset_session, _count_summary_rows)


def _memory_harness() -> Harness:
    fake = InMemoryDatabase()

    async def add(scope: MemoryScope, rows: list[tuple[datetime, str]], **columns: Any) -> list[str]:
        ids = []
        for index, (timestamp, text) in enumerate(rows):
            message_id = str(columns.get("id") or uuid.uuid4())
            role = "user" if index % 2 == 0 else "assistant"
            message = StoredMessage(id=message_id, timestamp=timestamp, role=role, text=text)
            error = bool(columns.get("error")) or columns.get("category") == "error"
            key = (str(scope.flow_id), str(scope.user_id), scope.session_id)
            fake.add_messages(key, [message], context_id=columns.get("context_id"), error=error)
            ids.append(message_id)
        return ids

    async def delete(message_ids: list[str]) -> None:
        fake.delete_messages(message_ids)

    async def reset(scope: MemoryScope) -> int:
        rows = [key for key in fake.rows if (key[0], key[2]) == (str(scope.flow_id), scope.session_id)]
        for key in rows:
            del fake.rows[key]
        return len(rows)

    async def count(flow_id: uuid.UUID) -> int:
        return sum(1 for key in fake.rows if key[0] == str(flow_id))

    def make_store(scope: Scope, *, before: Any = None, through: Any = None) -> SessionStore:
        return fake.store(scope, before=before, through=through)

    return Harness(make_store, add, delete, reset, count)


async def _delete_behind_langflows_back(message_ids: list[str]) -> None:
    import sqlalchemy as sa
    from langflow.services.database.models.message.model import MessageTable
    from langflow.services.deps import get_db_service

    table = MessageTable.__table__
    async with get_db_service().engine.begin() as connection:
        await connection.execute(sa.delete(table).where(table.c.id.in_([uuid.UUID(i) for i in message_ids])))


async def _reset_session(scope: MemoryScope) -> int:
    from langflow_summarizing_agent.storage.store import reset_session

    return await reset_session(flow_id=scope.flow_id, session_id=scope.session_id)


async def _count_summary_rows(flow_id: uuid.UUID) -> int:
    from langflow.services.deps import session_scope

    from langflow_summarizing_agent.storage.summaries import SummaryRows

    async with session_scope() as session:
        return await session.run_sync(lambda sync: SummaryRows(sync.connection()).count(flow_id))


async def saved(harness: Harness, scope: MemoryScope, text: str = "s", **overrides: Any) -> Summary:
    """A first save of the scope, after one message so the session exists; the summary as saved."""
    if not await harness.session(scope, **overrides).messages(limit=1):
        await harness.add(scope, [(at(0), "hello")], **{k: v for k, v in overrides.items() if k == "context_id"})
    summary = await harness.session(scope, **overrides).save(Summary(text=text))
    assert summary is not None
    return summary


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
    intruder = dataclasses.replace(memory_scope, **{f"{other}_id": uuid.uuid4()})
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


# Message reads: cursor, ties, limits, error rows, the turn's input, contexts


async def test_messages_after_a_cursor_order_equal_timestamps_by_id(
    harness: Harness, memory_scope: MemoryScope
) -> None:
    same_instant = await harness.add(memory_scope, [(at(5), f"tied {n}") for n in range(6)])
    later = await harness.add(memory_scope, [(at(6), "later")])
    earlier = await harness.add(memory_scope, [(at(4), "earlier")])
    expected = earlier + sorted(same_instant) + later
    store = harness.session(memory_scope)

    everything = await store.messages(limit=100)
    assert [m.id for m in everything] == expected
    assert [m.id for m in await store.messages(limit=100, after=everything[3].cursor)] == expected[4:]
    assert [m.id for m in await store.messages(limit=100, after=everything[3].cursor, newest=True)] == expected[4:]

    paged: list[StoredMessage] = []
    cursor = None
    while page := await store.messages(limit=2, after=cursor):
        paged.extend(page)
        cursor = page[-1].cursor
    assert [m.id for m in paged] == expected


async def test_limits(harness: Harness, memory_scope: MemoryScope) -> None:
    await harness.add(memory_scope, [(at(n), f"m{n}") for n in range(7)])
    store = harness.session(memory_scope)

    assert [m.text for m in await store.messages(limit=3)] == ["m0", "m1", "m2"]
    assert [m.text for m in await store.messages(limit=3, newest=True)] == ["m4", "m5", "m6"]
    assert await store.messages(limit=0) == []
    assert await store.messages(limit=0, newest=True) == []
    assert len(await store.messages(limit=50, newest=True)) == 7


async def test_error_rows_are_skipped(harness: Harness, memory_scope: MemoryScope) -> None:
    await harness.add(memory_scope, [(at(0), "question")])
    await harness.add(memory_scope, [(at(1), "component failed")], error=True)
    await harness.add(memory_scope, [(at(2), "error category")], category="error")
    await harness.add(memory_scope, [(at(3), "answer")])
    store = harness.session(memory_scope)

    assert [m.text for m in await store.messages(limit=10)] == ["question", "answer"]
    assert [m.text for m in await store.messages(limit=10, newest=True)] == ["question", "answer"]
    assert await store.count(before=Cursor(at(9), str(uuid.uuid4()))) == 2


async def add_an_input_with_ties(harness: Harness, memory_scope: MemoryScope, then: str) -> uuid.UUID:
    """Three messages, the input, a message stored at its instant on each side of it by id, then `then`; returns the
    input's id."""
    input_id = uuid.uuid4()
    await harness.add(memory_scope, [(at(i), f"m{i}") for i in range(3)])
    await harness.add(memory_scope, [(at(5), "input")], id=input_id)
    await harness.add(memory_scope, [(at(5), "tie before")], id=uuid.UUID(int=input_id.int - 1))
    await harness.add(memory_scope, [(at(5), "tie after")], id=uuid.UUID(int=input_id.int + 1))
    await harness.add(memory_scope, [(at(6), then)])
    return input_id


async def test_reads_stop_at_the_turns_input(harness: Harness, memory_scope: MemoryScope) -> None:
    """The input is not read, nor what a concurrent run stored after it (a timestamp tie goes by id)."""
    input_id = await add_an_input_with_ties(harness, memory_scope, then="a concurrent run's")
    store = harness.session(memory_scope, before=str(input_id))

    expected = ["m0", "m1", "m2", "tie before"]
    assert [m.text for m in await store.messages(limit=10, newest=True)] == expected
    assert [m.text for m in await store.messages(limit=10)] == expected
    assert [m.text for m in (await store.load_turn(10))[1]] == expected
    assert await store.count(before=Cursor(at(9), str(uuid.uuid4()))) == 4


async def test_reads_through_the_input_end_with_it(harness: Harness, memory_scope: MemoryScope) -> None:
    """A fold after the reply reads through the turn's input: it is read, what was stored after it is not."""
    input_id = await add_an_input_with_ties(harness, memory_scope, then="the reply")
    store = harness.session(memory_scope, through=str(input_id))

    expected = ["m0", "m1", "m2", "tie before", "input"]
    assert [m.text for m in await store.messages(limit=10, newest=True)] == expected
    assert [m.text for m in await store.messages(limit=10)] == expected
    assert [m.text for m in (await store.load_turn(10))[1]] == expected
    assert await store.count(before=Cursor(at(9), str(uuid.uuid4()))) == 5


async def test_count_between_cursors(harness: Harness, memory_scope: MemoryScope) -> None:
    await harness.add(memory_scope, [(at(1), f"tied {n}") for n in range(4)] + [(at(2), "last")])
    store = harness.session(memory_scope)
    ordered = await store.messages(limit=10)

    assert await store.count(before=ordered[-1].cursor) == 4
    assert await store.count(after=ordered[0].cursor, before=ordered[-1].cursor) == 3
    assert await store.count(after=ordered[1].cursor, before=ordered[2].cursor) == 0


async def test_a_context_narrows_reads_and_no_context_reads_every_context(
    harness: Harness, memory_scope: MemoryScope
) -> None:
    await harness.add(memory_scope, [(at(0), "in alpha")], context_id="alpha")
    await harness.add(memory_scope, [(at(1), "in beta")], context_id="beta")

    in_alpha = await harness.session(memory_scope, context_id="alpha").messages(limit=10)
    assert [m.text for m in in_alpha] == ["in alpha"]
    everything = await harness.session(memory_scope, context_id=None).messages(limit=10)
    assert [m.text for m in everything] == ["in alpha", "in beta"]
    empty_context = harness.session(memory_scope, context_id="")
    assert [m.text for m in await empty_context.messages(limit=10)] == ["in alpha", "in beta"]
    assert await empty_context.count() == 2
    assert [m.text for m in (await empty_context.load_turn(10))[1]] == ["in alpha", "in beta"]


async def test_load_turn_reads_the_summary_and_what_follows_its_cursor(
    harness: Harness, memory_scope: MemoryScope
) -> None:
    ids = await harness.add(memory_scope, [(at(i), f"m{i}") for i in range(6)] + [(at(5), "tie")])
    store = harness.session(memory_scope)
    tie_order = sorted(ids[5:])

    summary, read = await store.load_turn(4)
    assert (summary, [m.id for m in read]) == (Summary(), ids[3:5] + tie_order)

    folded = await store.save(Summary(text="s", pinned={"k": "v"}, cursor=Cursor(at(5), tie_order[0]), folded_count=6))
    assert folded is not None
    summary, read = await store.load_turn(4)
    assert (summary, [m.id for m in read]) == (folded, [tie_order[1]])

    folded = await store.save(dataclasses.replace(folded, cursor=Cursor(at(5), tie_order[1])))
    assert folded is not None
    assert await store.load_turn(4) == (folded, [])


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
