"""The session store's contract, run unchanged on the in-memory fake, SQLite and Postgres.

Each backend gives a `Harness`: its `StateStore` and a way to store and delete chat messages as Langflow does
(without the listeners, which `test_session_lifecycle` covers). Scope, cursor, tie, compare-and-swap, purge and
rename rules are stated once here; what only a database has (locks, constraints, Langflow's graph scope, statement
counts) stays in `test_session_memory.py`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from langflow_summarizing_agent.state import Cursor, Summary, Rename, StateStore, StoredMessage
from tests.support.fakes import InMemoryStateStore
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
    store: StateStore
    add_rows: Callable[..., Awaitable[list[str]]]
    delete_rows: Callable[[list[str]], Awaitable[None]]
    move_rows: Callable[[MemoryScope, str], Awaitable[None]]

    async def add(self, scope: MemoryScope, rows: list[tuple[datetime, str]], **columns: Any) -> list[str]:
        """Store messages (User and Machine alternating); their ids in the order given."""
        return await self.add_rows(scope, rows, **columns)

    async def delete(self, message_ids: list[str]) -> None:
        """Delete messages behind the store's back, as raw SQL would."""
        await self.delete_rows(message_ids)

    async def move(self, scope: MemoryScope, new_session_id: str) -> None:
        """Move a session's messages to another session id behind the store's back."""
        await self.move_rows(scope, new_session_id)

    def session(self, scope: MemoryScope, **overrides: Any):
        return self.store.session(**scope.kwargs(**overrides))


@pytest.fixture
def harness(langflow_db: LangflowDatabase, insert_messages) -> Harness:
    if langflow_db.backend == STORE_IN_MEMORY:
        return _memory_harness()
    from langflow_summarizing_agent.session_memory import LangflowStore

    async def add(scope: MemoryScope, rows: list[tuple[datetime, str]], **columns: Any) -> list[str]:
        return [str(row.id) for row in await insert_messages(scope, rows, **columns)]

    return Harness(LangflowStore(), add, _delete_behind_langflows_back, _move_behind_langflows_back)


def _memory_harness() -> Harness:
    fake = InMemoryStateStore()

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

    async def move(scope: MemoryScope, new_session_id: str) -> None:
        old = (str(scope.flow_id), str(scope.user_id), scope.session_id)
        fake.sessions.setdefault((*old[:2], new_session_id), []).extend(fake.sessions.pop(old, []))

    return Harness(fake, add, delete, move)


async def _delete_behind_langflows_back(message_ids: list[str]) -> None:
    import sqlalchemy as sa
    from langflow.services.database.models.message.model import MessageTable
    from langflow.services.deps import get_db_service

    table = MessageTable.__table__
    async with get_db_service().engine.begin() as connection:
        await connection.execute(sa.delete(table).where(table.c.id.in_([uuid.UUID(i) for i in message_ids])))


async def _move_behind_langflows_back(scope: MemoryScope, new_session_id: str) -> None:
    import sqlalchemy as sa
    from langflow.services.database.models.message.model import MessageTable
    from langflow.services.deps import get_db_service

    table = MessageTable.__table__
    where = [table.c.flow_id == scope.flow_id, table.c.user_id == scope.user_id, table.c.session_id == scope.session_id]
    async with get_db_service().engine.begin() as connection:
        await connection.execute(sa.update(table).where(*where).values(session_id=new_session_id))


async def saved(harness: Harness, scope: MemoryScope, summary: str = "s", **overrides: Any) -> Summary:
    """A first save of the scope, after one message so the session exists; the saved state."""
    if not await harness.session(scope, **overrides).after(None, 1):
        await harness.add(scope, [(at(0), "hello")], **{k: v for k, v in overrides.items() if k == "context_id"})
    state = Summary(summary=summary)
    assert await harness.session(scope, **overrides).save_state(state, expected_version=0)
    return state


# Compare-and-swap


async def test_insert_then_compare_and_swap(harness: Harness, memory_scope: MemoryScope) -> None:
    store = harness.session(memory_scope)
    await harness.add(memory_scope, [(at(0), "hello")])
    first = Summary(summary="first")
    assert await store.save_state(first, expected_version=0)
    assert (first.version, first.row_id is not None) == (1, True)

    assert not await store.save_state(Summary(summary="dup"), expected_version=0)
    second = dataclasses.replace(first, summary="second")
    assert await store.save_state(second, expected_version=1)
    assert not await store.save_state(dataclasses.replace(first, summary="stale"), expected_version=1)

    stored = await store.load_state()
    assert (stored.summary, stored.version, stored.row_id) == ("second", 2, first.row_id)


async def test_state_round_trips_every_field(harness: Harness, memory_scope: MemoryScope) -> None:
    ids = await harness.add(memory_scope, [(at(3.000123), "hello")])
    cursor = Cursor(at(3.000123), ids[0])
    retry_after = datetime(2026, 5, 1, 8, 30, tzinfo=timezone(timedelta(hours=2)))
    state = Summary(
        summary="- the user runs PRJ-7",
        pinned={"project_id": "PRJ-7", "cluster": "EU cluster"},
        cursor=cursor,
        folded_count=12,
        summary_model="gpt-4o-mini",
        failed_folds=2,
        retry_after=retry_after,
    )
    store = harness.session(memory_scope)
    assert await store.save_state(state, expected_version=0)

    stored = await store.load_state()
    assert stored == state
    assert stored.retry_after is not None and stored.retry_after.tzinfo is not None


async def test_version_only_increases(harness: Harness, memory_scope: MemoryScope) -> None:
    state = await saved(harness, memory_scope, "v0")
    store = harness.session(memory_scope)
    seen = []
    for expected in [1, 0, 2, 1, 3, 2, 4]:
        await store.save_state(dataclasses.replace(state, summary=f"v{expected}"), expected_version=expected)
        seen.append((await store.load_state()).version)
    assert seen == [2, 2, 3, 3, 4, 4, 5]


async def test_concurrent_writers_on_one_version_exactly_one_wins(harness: Harness, memory_scope: MemoryScope) -> None:
    base = await saved(harness, memory_scope, "base")
    store = harness.session(memory_scope)

    results = await asyncio.gather(
        *(store.save_state(dataclasses.replace(base, summary=f"writer {n}"), expected_version=1) for n in range(6))
    )

    assert results.count(True) == 1
    stored = await store.load_state()
    assert (stored.version, stored.summary) == (2, f"writer {results.index(True)}")


async def test_concurrent_first_inserts_exactly_one_wins(harness: Harness, memory_scope: MemoryScope) -> None:
    await harness.add(memory_scope, [(at(0), "hello")])
    store = harness.session(memory_scope)

    results = await asyncio.gather(
        *(store.save_state(Summary(summary=f"writer {n}"), expected_version=0) for n in range(6))
    )

    assert results.count(True) == 1
    stored = await store.load_state()
    assert (stored.version, stored.summary) == (1, f"writer {results.index(True)}")


async def test_a_save_that_read_before_a_reset_fails_even_after_a_fresh_row(
    harness: Harness, memory_scope: MemoryScope
) -> None:
    """ABA: a slow fold reads version 1, a reset deletes the row, another run stores a fresh version 1."""
    ids = await harness.add(memory_scope, [(at(0), "hello"), (at(1), "hi")])
    store = harness.session(memory_scope)
    assert await store.save_state(Summary(summary="before the reset"), expected_version=0)
    read_by_slow_fold = await store.load_state()

    assert await harness.store.reset(flow_id=memory_scope.flow_id, session_id=memory_scope.session_id) == 1
    slow = dataclasses.replace(read_by_slow_fold, summary="folded before the reset", cursor=Cursor(at(1), ids[1]))
    assert not await store.save_state(slow, expected_version=read_by_slow_fold.version)

    assert await store.save_state(Summary(summary="rebuilt"), expected_version=0)
    assert (await store.load_state()).version == read_by_slow_fold.version
    assert not await store.save_state(slow, expected_version=read_by_slow_fold.version)
    assert (await store.load_state()).summary == "rebuilt"


async def test_a_deleted_session_gets_no_row_back(harness: Harness, memory_scope: MemoryScope) -> None:
    """A fold that read the session before it was deleted cannot store a row for it, by insert or by swap."""
    ids = await harness.add(memory_scope, [(at(0), "hello"), (at(1), "hi")])
    store = harness.session(memory_scope)
    folded = Summary(summary="greetings", cursor=Cursor(at(1), ids[1]), folded_count=2)

    await harness.delete(ids)
    assert not await store.save_state(folded, expected_version=0)
    assert not await store.save_state(Summary(failed_folds=1), expected_version=0)
    assert await harness.store.count(flow_id=memory_scope.flow_id) == 0

    ids = await harness.add(memory_scope, [(at(2), "again"), (at(3), "yes")])
    current = Summary(summary="s", cursor=Cursor(at(2), ids[0]))
    assert await store.save_state(current, expected_version=0)
    read = await store.load_state()
    await harness.delete(ids)
    assert not await store.save_state(dataclasses.replace(read, summary="late"), expected_version=read.version)


async def test_a_save_needs_its_cursor_message_in_the_session(harness: Harness, memory_scope: MemoryScope) -> None:
    ids = await harness.add(memory_scope, [(at(0), "hello"), (at(1), "hi")])
    elsewhere = dataclasses.replace(memory_scope, session_id=f"{memory_scope.session_id}-other")
    other_ids = await harness.add(elsewhere, [(at(0), "elsewhere")])
    store = harness.session(memory_scope)

    assert not await store.save_state(Summary(cursor=Cursor(at(0), other_ids[0])), expected_version=0)
    assert await store.save_state(Summary(cursor=Cursor(at(1), ids[1])), expected_version=0)


# Scope


async def test_no_context_is_one_row_whether_none_or_empty(harness: Harness, memory_scope: MemoryScope) -> None:
    await saved(harness, memory_scope, "none", context_id=None)
    assert not await harness.session(memory_scope, context_id="").save_state(Summary(), expected_version=0)
    assert (await harness.session(memory_scope, context_id="").load_state()).summary == "none"


async def test_each_context_has_its_own_row(harness: Harness, memory_scope: MemoryScope) -> None:
    await harness.add(memory_scope, [(at(0), "hello")])
    for context_id in ("alpha", "beta", None):
        store = harness.session(memory_scope, context_id=context_id)
        assert await store.save_state(Summary(summary=f"ctx {context_id}"), expected_version=0)
    for context_id in ("alpha", "beta", None):
        assert (await harness.session(memory_scope, context_id=context_id).load_state()).summary == f"ctx {context_id}"
    assert await harness.session(memory_scope, context_id="gamma").load_state() == Summary()


@pytest.mark.parametrize("other", ["user", "flow"])
async def test_another_user_or_flow_cannot_read_overwrite_or_delete(
    harness: Harness, memory_scope: MemoryScope, other: str
) -> None:
    owners = await saved(harness, memory_scope, "owner's")
    intruder = memory_scope.kwargs(**{f"{other}_id": uuid.uuid4()})
    await harness.add(MemoryScope(intruder["flow_id"], intruder["user_id"], memory_scope.session_id), [(at(5), "x")])
    theirs = harness.store.session(**intruder)

    assert await theirs.load_state() == Summary()
    assert not await theirs.save_state(dataclasses.replace(owners, summary="hijack"), expected_version=1)
    assert [m.text for m in await theirs.after(None, 10)] == ["x"]
    assert (
        await harness.store.purge_sessions(
            flow_id=intruder["flow_id"], user_id=intruder["user_id"], session_ids=[memory_scope.session_id]
        )
        == 0
    )
    # Saving at version 0 only ever creates the intruder's own row.
    assert await theirs.save_state(Summary(summary="own"), expected_version=0)

    stored = await harness.session(memory_scope).load_state()
    assert (stored.summary, stored.version) == ("owner's", 1)
    assert [m.text for m in await harness.session(memory_scope).after(None, 10)] == ["hello"]


async def test_unresolvable_ids_fail_closed(harness: Harness, memory_scope: MemoryScope) -> None:
    await saved(harness, memory_scope, "kept")
    for broken in (
        memory_scope.kwargs(user_id="not-a-uuid"),
        memory_scope.kwargs(user_id=None),
        memory_scope.kwargs(flow_id=None),
        memory_scope.kwargs(session_id=""),
    ):
        store = harness.store.session(**broken)
        assert await store.load_state() == Summary()
        assert await store.load_turn(10) == (Summary(), [])
        assert not await store.save_state(Summary(), expected_version=0)
        assert await store.after(None, 10) == []
        assert await store.recent(10) == []
    # An owner that does not resolve must not turn into "every owner".
    purge = {"flow_id": memory_scope.flow_id, "session_ids": [memory_scope.session_id], "user_id": "not-a-uuid"}
    assert await harness.store.purge_sessions(**purge) == 0
    assert (await harness.session(memory_scope).load_state()).summary == "kept"


# Message reads: cursor, ties, limits, error rows, the turn's input, contexts


async def test_messages_after_a_cursor_order_equal_timestamps_by_id(
    harness: Harness, memory_scope: MemoryScope
) -> None:
    same_instant = await harness.add(memory_scope, [(at(5), f"tied {n}") for n in range(6)])
    later = await harness.add(memory_scope, [(at(6), "later")])
    earlier = await harness.add(memory_scope, [(at(4), "earlier")])
    expected = earlier + sorted(same_instant) + later
    store = harness.session(memory_scope)

    everything = await store.after(None, 100)
    assert [m.id for m in everything] == expected
    assert [m.id for m in await store.after(everything[3].cursor, 100)] == expected[4:]
    assert [m.id for m in await store.recent(100, after=everything[3].cursor)] == expected[4:]

    paged: list[StoredMessage] = []
    cursor = None
    while page := await store.after(cursor, 2):
        paged.extend(page)
        cursor = page[-1].cursor
    assert [m.id for m in paged] == expected


async def test_limits(harness: Harness, memory_scope: MemoryScope) -> None:
    await harness.add(memory_scope, [(at(n), f"m{n}") for n in range(7)])
    store = harness.session(memory_scope)

    assert [m.text for m in await store.after(None, 3)] == ["m0", "m1", "m2"]
    assert [m.text for m in await store.recent(3)] == ["m4", "m5", "m6"]
    assert await store.after(None, 0) == []
    assert await store.recent(0) == []
    assert len(await store.recent(50)) == 7


async def test_error_rows_are_skipped(harness: Harness, memory_scope: MemoryScope) -> None:
    await harness.add(memory_scope, [(at(0), "question")])
    await harness.add(memory_scope, [(at(1), "component failed")], error=True)
    await harness.add(memory_scope, [(at(2), "error category")], category="error")
    await harness.add(memory_scope, [(at(3), "answer")])
    store = harness.session(memory_scope)

    assert [m.text for m in await store.after(None, 10)] == ["question", "answer"]
    assert [m.text for m in await store.recent(10)] == ["question", "answer"]
    assert await store.count_after(None, Cursor(at(9), str(uuid.uuid4()))) == 2


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
    store = harness.session(memory_scope, exclude_ids=[str(input_id)])

    expected = ["m0", "m1", "m2", "tie before"]
    assert [m.text for m in await store.recent(10)] == expected
    assert [m.text for m in await store.after(None, 10)] == expected
    assert [m.text for m in (await store.load_turn(10))[1]] == expected
    assert await store.count_after(None, Cursor(at(9), str(uuid.uuid4()))) == 4


async def test_reads_through_the_input_end_with_it(harness: Harness, memory_scope: MemoryScope) -> None:
    """A fold after the reply reads through the turn's input: it is read, what was stored after it is not."""
    input_id = await add_an_input_with_ties(harness, memory_scope, then="the reply")
    store = harness.session(memory_scope, until_id=str(input_id))

    expected = ["m0", "m1", "m2", "tie before", "input"]
    assert [m.text for m in await store.recent(10)] == expected
    assert [m.text for m in await store.after(None, 10)] == expected
    assert [m.text for m in (await store.load_turn(10))[1]] == expected
    assert await store.count_after(None, Cursor(at(9), str(uuid.uuid4()))) == 5


async def test_count_between_cursors(harness: Harness, memory_scope: MemoryScope) -> None:
    await harness.add(memory_scope, [(at(1), f"tied {n}") for n in range(4)] + [(at(2), "last")])
    store = harness.session(memory_scope)
    ordered = await store.after(None, 10)

    assert await store.count_after(None, ordered[-1].cursor) == 4
    assert await store.count_after(ordered[0].cursor, ordered[-1].cursor) == 3
    assert await store.count_after(ordered[1].cursor, ordered[2].cursor) == 0


async def test_a_context_narrows_reads_and_no_context_reads_every_context(
    harness: Harness, memory_scope: MemoryScope
) -> None:
    await harness.add(memory_scope, [(at(0), "in alpha")], context_id="alpha")
    await harness.add(memory_scope, [(at(1), "in beta")], context_id="beta")

    assert [m.text for m in await harness.session(memory_scope, context_id="alpha").after(None, 10)] == ["in alpha"]
    everything = await harness.session(memory_scope, context_id=None).after(None, 10)
    assert [m.text for m in everything] == ["in alpha", "in beta"]


async def test_load_turn_reads_the_state_and_what_follows_its_cursor(
    harness: Harness, memory_scope: MemoryScope
) -> None:
    ids = await harness.add(memory_scope, [(at(i), f"m{i}") for i in range(6)] + [(at(5), "tie")])
    store = harness.session(memory_scope)
    tie_order = sorted(ids[5:])

    state, read = await store.load_turn(4)
    assert (state, [m.id for m in read]) == (Summary(), ids[3:5] + tie_order)

    folded = Summary(summary="s", pinned={"k": "v"}, cursor=Cursor(at(5), tie_order[0]), folded_count=6)
    assert await store.save_state(folded, expected_version=0)
    state, read = await store.load_turn(4)
    assert (state, [m.id for m in read]) == (folded, [tie_order[1]])

    folded.cursor = Cursor(at(5), tie_order[1])
    assert await store.save_state(folded, expected_version=1)
    assert await store.load_turn(4) == (folded, [])


# Stale rows


async def test_a_row_whose_cursor_message_is_gone_loads_emptied_and_is_replaced(
    harness: Harness, memory_scope: MemoryScope
) -> None:
    ids = await harness.add(memory_scope, [(at(i), f"m{i}") for i in range(4)])
    store = harness.session(memory_scope)
    folded = Summary(summary="s", pinned={"k": "v"}, cursor=Cursor(at(2), ids[2]), folded_count=3)
    assert await store.save_state(folded, expected_version=0)

    await harness.delete([ids[2]])
    stale, read = await store.load_turn(10)
    assert (stale.summary, stale.pinned, stale.cursor, stale.version) == ("", {}, None, 1)
    assert [m.id for m in read] == [ids[0], ids[1], ids[3]]
    assert await store.load_state() == stale

    fresh = dataclasses.replace(stale, summary="fresh start", cursor=Cursor(at(3), ids[3]))
    assert await store.save_state(fresh, expected_version=stale.version)
    assert (await store.load_state()).summary == "fresh start"


async def test_a_row_without_cursor_is_stale_once_its_session_is_empty(
    harness: Harness, memory_scope: MemoryScope
) -> None:
    failing = Summary(failed_folds=2, retry_after=at(60))
    await harness.add(memory_scope, [(at(0), "hello")])
    store = harness.session(memory_scope)
    assert await store.save_state(failing, expected_version=0)
    assert (await store.load_state()).failed_folds == 2

    await harness.delete([m.id for m in await store.after(None, 10)])
    assert (await store.load_state()).failed_folds == 0


# Every session: read, reset, purge, rename, count


async def test_states_lists_every_owner_and_context_of_a_session(harness: Harness, memory_scope: MemoryScope) -> None:
    other_owner = dataclasses.replace(memory_scope, user_id=uuid.uuid4())
    await saved(harness, memory_scope, "mine")
    await saved(harness, memory_scope, "in ctx", context_id="ctx")
    await saved(harness, other_owner, "theirs")

    found = await harness.store.states(flow_id=memory_scope.flow_id, session_id=memory_scope.session_id)
    assert sorted((str(s.user_id), s.context_id, s.state.summary) for s in found) == sorted(
        [
            (str(memory_scope.user_id), "", "mine"),
            (str(memory_scope.user_id), "ctx", "in ctx"),
            (str(other_owner.user_id), "", "theirs"),
        ]
    )
    narrowed = await harness.store.states(
        flow_id=memory_scope.flow_id, session_id=memory_scope.session_id, context_id="ctx"
    )
    assert [s.state.summary for s in narrowed] == ["in ctx"]
    assert await harness.store.states(flow_id=uuid.uuid4(), session_id=memory_scope.session_id) == []


async def test_reset_deletes_one_context_or_every_context(harness: Harness, memory_scope: MemoryScope) -> None:
    await saved(harness, memory_scope, "none")
    await saved(harness, memory_scope, "a", context_id="a")
    await saved(harness, memory_scope, "b", context_id="b")
    ids = {"flow_id": memory_scope.flow_id, "session_id": memory_scope.session_id}

    assert await harness.store.reset(**ids, context_id="a") == 1
    assert await harness.session(memory_scope, context_id="a").load_state() == Summary()
    assert await harness.store.reset(**ids, context_id="") == 1
    assert (await harness.session(memory_scope, context_id="b").load_state()).summary == "b"
    assert await harness.store.reset(**ids) == 1
    assert await harness.store.count(flow_id=memory_scope.flow_id) == 0


async def test_purge_by_session_ids(harness: Harness, memory_scope: MemoryScope) -> None:
    sessions = [dataclasses.replace(memory_scope, session_id=f"{memory_scope.session_id}-{n}") for n in range(3)]
    for scope in sessions:
        await saved(harness, scope)
    owner = {"flow_id": memory_scope.flow_id, "user_id": memory_scope.user_id}

    assert await harness.store.purge_sessions(**owner, session_ids=[]) == 0
    assert await harness.store.purge_sessions(**owner, session_ids=[s.session_id for s in sessions[:2]]) == 2
    assert await harness.session(sessions[0]).load_state() == Summary()
    assert (await harness.session(sessions[2]).load_state()).version == 1


async def test_purge_by_flow_covers_every_owner(harness: Harness, memory_scope: MemoryScope) -> None:
    other_owner = dataclasses.replace(memory_scope, user_id=uuid.uuid4())
    other_flow = dataclasses.replace(memory_scope, flow_id=uuid.uuid4())
    await saved(harness, memory_scope)
    await saved(harness, memory_scope, context_id="ctx")
    await saved(harness, other_owner)
    await saved(harness, other_flow)

    assert await harness.store.purge_flows([memory_scope.flow_id]) == 3
    assert await harness.session(other_owner).load_state() == Summary()
    assert (await harness.session(other_flow).load_state()).version == 1
    assert await harness.store.purge_sessions(flow_id=memory_scope.flow_id, session_ids=[memory_scope.session_id]) == 0


async def test_purge_by_message_ids_drops_only_summaries_that_folded_one(
    harness: Harness, memory_scope: MemoryScope
) -> None:
    ids = await harness.add(memory_scope, [(at(i), f"m{i}") for i in range(6)])
    store = harness.session(memory_scope)
    assert await store.save_state(Summary(summary="s", cursor=Cursor(at(2), ids[2])), expected_version=0)

    assert await harness.store.purge_messages([ids[4]]) == 0
    assert (await store.load_state()).summary == "s"
    assert await harness.store.purge_messages([ids[1]]) == 1
    assert await store.load_state() == Summary()


async def test_purge_by_message_ids_drops_a_state_whose_session_loses_every_message(
    harness: Harness, memory_scope: MemoryScope
) -> None:
    ids = await harness.add(memory_scope, [(at(0), "hello"), (at(1), "hi")])
    await harness.session(memory_scope).save_state(Summary(failed_folds=1), expected_version=0)

    assert await harness.store.purge_messages(ids[:1]) == 0
    assert await harness.store.purge_messages(ids) == 1
    assert await harness.store.count(flow_id=memory_scope.flow_id) == 0


async def test_rename_moves_a_whole_session_and_drops_both_on_a_merge(
    harness: Harness, memory_scope: MemoryScope
) -> None:
    renamed = dataclasses.replace(memory_scope, session_id=f"{memory_scope.session_id}-renamed")
    await saved(harness, memory_scope, "moves")
    flow, user = memory_scope.flow_id, memory_scope.user_id

    await harness.move(memory_scope, renamed.session_id)
    moved = await harness.store.rename([Rename(flow, user, memory_scope.session_id, renamed.session_id, True)])
    assert moved == 1
    found = await harness.store.states(flow_id=flow, session_id=renamed.session_id)
    assert [s.state.summary for s in found] == ["moves"]
    assert await harness.store.states(flow_id=flow, session_id=memory_scope.session_id) == []

    await saved(harness, memory_scope, "second")
    assert await harness.store.rename([Rename(flow, user, memory_scope.session_id, renamed.session_id, False)]) == 0
    assert await harness.store.count(flow_id=flow) == 0


async def test_count(harness: Harness, memory_scope: MemoryScope) -> None:
    other_flow = dataclasses.replace(memory_scope, flow_id=uuid.uuid4())
    await saved(harness, memory_scope)
    await saved(harness, memory_scope, context_id="ctx")
    await saved(harness, other_flow)

    assert await harness.store.count(flow_id=memory_scope.flow_id) == 2
    assert await harness.store.count(flow_id=other_flow.flow_id) == 1
    assert await harness.store.count() >= 3
