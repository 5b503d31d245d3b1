"""The session store's contract (`engine.store.SessionStore`), run unchanged on the in-memory fake, SQLite and
Postgres: its message reads.

Each backend gives a `Harness` (`contract_harness.py`, the `harness` fixture in this directory's conftest.py). The
rules of the reads (cursor, ties, limits, error rows, the turn's input, contexts, the turn's one read) are stated
once here; the summary row's (compare-and-swap, scope, stale rows) in `test_store_contract.py`.
"""

from __future__ import annotations

import dataclasses
import uuid

from langflow_summarizing_agent.engine.records import Cursor, StoredMessage, Summary
from tests.store.contract_harness import EVERY_BACKEND, Harness, at
from tests.support.langflow_db import MemoryScope

pytestmark = EVERY_BACKEND


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
