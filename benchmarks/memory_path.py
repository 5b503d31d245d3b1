"""Memory-path cost: `get_memory_data()` of the Summarizing Agent against the stock Agent, and one state read/write.

Sessions of N stored messages are inserted directly as `message` rows, with a state row whose cursor sits just
before the window, so the measured turns do not fold. On Postgres the tables are then analyzed, as autovacuum
would on a live database. The newest row plays the turn's input, stored before history
is read as in a real turn. Each call runs under the flow and owner scope a graph run sets, on a fresh component, and
is timed with `perf_counter`; database round trips are counted with SQLAlchemy's `before_cursor_execute` event.
Garbage is collected before each timed call, so no collection lands in one; what was alive before the measurement
started is frozen first (`gc.freeze`), so that collection walks only what the calls made, not Langflow's half a million
long-lived objects (most of a second each on a 2-CPU machine).

Both agents get the ready flow's model configuration (`flows/summarizing_support_agent.json`): the Language Model
field's provider selection (OpenAI gpt-4o-mini) and no API key, as a user who imported the flow has it; never a model
object. A turn that does not fold must not need the model.
"""

from __future__ import annotations

import gc
import json
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from benchmarks.script import filler_message
from tests.support.round_trips import RoundTrips, statement_counter

SUPPORT_FLOW = Path(__file__).resolve().parent.parent / "flows" / "summarizing_support_agent.json"

STOCK_N_MESSAGES = 10
PINNED_KEYS = ["project_id", "cluster"]
SUMMARY_TEXT = "\n".join(f"- {filler_message(index)[:120]}" for index in range(0, 36, 2))
PINNED = {"project_id": "PRJ-123", "cluster": "EU cluster"}
WARMUP = 10
"""Untimed calls first: the first calls of a code path pay for imports and statement compilation."""


@dataclass(frozen=True)
class PathCost:
    """Median milliseconds of one call; statements and commits: the most any repetition sent (each a round trip)."""

    messages: int
    stock_ms: float
    summarizing_ms: float
    ratio: float
    stock_statements: int
    stock_commits: int
    summarizing_statements: int
    summarizing_commits: int


@dataclass(frozen=True)
class StateCost:
    sessions: int
    read_ms: float
    write_ms: float
    read_statements: int
    read_commits: int
    write_statements: int
    write_commits: int


@dataclass(frozen=True)
class _Scope:
    flow_id: uuid.UUID
    user_id: uuid.UUID
    session_id: str


async def measure_memory_path(sizes: list[int], repeats: int) -> list[PathCost]:
    """Median time and round trips of one `get_memory_data()` per agent, per session size."""
    if any(size < STOCK_N_MESSAGES + 2 for size in sizes):
        msg = f"memory-path sessions need at least {STOCK_N_MESSAGES + 2} messages (a window and a folded part)"
        raise ValueError(msg)
    with _long_lived_frozen():
        return [await _measure_size(size, repeats) for size in sizes]


async def _measure_size(size: int, repeats: int) -> PathCost:
    scope = _Scope(uuid.uuid4(), uuid.uuid4(), f"memory-path-{size}")
    input_row = await _store_session(scope, size)
    stock_ms: list[float] = []
    ours_ms: list[float] = []
    stock_trips: list[RoundTrips] = []
    ours_trips: list[RoundTrips] = []
    for repeat in range(WARMUP + repeats):
        runs = [("stock", stock_ms, stock_trips), ("summarizing", ours_ms, ours_trips)]
        # Alternate who goes first, so neither always meets a cold cache.
        for kind, times, trips in runs if repeat % 2 == 0 else reversed(runs):
            seconds, counter = await _time_memory_call(kind, scope, input_row)
            if repeat >= WARMUP:
                times.append(seconds * 1000)
                trips.append(counter)
    stock, ours = statistics.median(stock_ms), statistics.median(ours_ms)
    return PathCost(
        messages=size,
        stock_ms=round(stock, 3),
        summarizing_ms=round(ours, 3),
        ratio=round(ours / stock, 2),
        stock_statements=max(c.statements for c in stock_trips),
        stock_commits=max(c.commits for c in stock_trips),
        summarizing_statements=max(c.statements for c in ours_trips),
        summarizing_commits=max(c.commits for c in ours_trips),
    )


async def _time_memory_call(kind: str, scope: _Scope, input_row: Any) -> tuple[float, RoundTrips]:
    from langflow_summarizing_agent.engine.report import problems
    from langflow_summarizing_agent.wiring.agent_turn import turn_of

    agent = _agent(kind, scope, input_row)
    gc.collect()  # garbage of building the component is not the memory path's cost
    with _flow_scope(scope), statement_counter() as counter:
        start = time.perf_counter()
        history = await agent.get_memory_data()
        seconds = time.perf_counter() - start
    if not history:
        msg = f"{kind} get_memory_data() returned no history; the benchmark session is not visible"
        raise RuntimeError(msg)
    kept = turn_of(agent)
    turn = kept.turn if kept is not None else None
    if kind == "summarizing" and (turn is None or turn.fold is not None or problems(turn)):
        msg = f"the measured turn was meant not to fold, but it did or failed: {turn}"
        raise RuntimeError(msg)
    return seconds, counter


def _agent(kind: str, scope: _Scope, input_row: Any) -> Any:
    """A fresh Agent in a graph (not run), holding this turn's stored input, as inside a run."""
    from lfx.components.models_and_agents.agent import AgentComponent
    from lfx.graph import Graph
    from lfx.schema.message import Message

    from langflow_summarizing_agent.components.summarizing_agent.summarizing_agent import (
        SummarizingAgentComponent,
    )

    settings: dict[str, Any] = {"n_messages": STOCK_N_MESSAGES}
    agent: AgentComponent
    if kind == "stock":
        agent = AgentComponent(_id="agent")
    else:
        agent = SummarizingAgentComponent(_id="agent")
        settings |= {"summarize_older_messages": True, "pinned_keys": PINNED_KEYS}
    current_input = Message(
        id=str(input_row.id), text=input_row.text, sender="User", sender_name="User", session_id=scope.session_id
    )
    agent.set(model=flow_model_selection(), input_value=current_input, **settings)
    graph = Graph(agent, agent, flow_id=str(scope.flow_id), user_id=str(scope.user_id))
    graph.session_id = scope.session_id
    graph.set_run_id()
    return agent


def flow_model_selection() -> list[dict[str, Any]]:
    """The Language Model field's value in the ready flow: the provider and model picked there, as Langflow sets it."""
    flow = json.loads(SUPPORT_FLOW.read_text(encoding="utf-8"))
    [agent] = [node for node in flow["data"]["nodes"] if "SummarizingAgent" in node["data"]["type"]]
    selection = agent["data"]["node"]["template"]["model"]["value"]
    if not isinstance(selection, list) or not selection:
        msg = f"{SUPPORT_FLOW.name}: the agent's Language Model field holds no provider selection"
        raise RuntimeError(msg)
    return selection


async def _store_session(scope: _Scope, size: int) -> Any:
    """`size` message rows ending with the turn's input, and a state whose cursor is just before the window."""
    from langflow.services.database.models.message.model import MessageTable
    from langflow.services.deps import session_scope

    from langflow_summarizing_agent.engine.records import Cursor, Scope, Summary
    from langflow_summarizing_agent.engine.store import HeldScopes
    from langflow_summarizing_agent.storage.store import DatabaseStore

    start = datetime.now(timezone.utc) - timedelta(seconds=size)
    texts = [filler_message(index) for index in range(40)]
    rows = []
    for index in range(size):
        by_user = (size - 1 - index) % 2 == 0
        rows.append(
            MessageTable(
                flow_id=scope.flow_id,
                user_id=scope.user_id,
                session_id=scope.session_id,
                sender="User" if by_user else "Machine",
                sender_name="User" if by_user else "AI",
                text=texts[2 * (index % 20) + (0 if by_user else 1)],
                files=[],
                category="message",
                timestamp=start + timedelta(seconds=index),
            )
        )
    async with session_scope() as session:
        session.add_all(rows)
    await _analyze()
    # The window is the 10 messages before the input; everything older is folded.
    covered = rows[-2 - STOCK_N_MESSAGES]
    summary = Summary(
        text=SUMMARY_TEXT,
        pinned=dict(PINNED),
        cursor=Cursor(covered.timestamp, str(covered.id)),
        folded_count=size - 1 - STOCK_N_MESSAGES,
    )
    store = DatabaseStore(Scope(scope.flow_id, scope.user_id, scope.session_id), locks=HeldScopes())
    if await store.save(summary) is None:
        msg = "could not store the benchmark session's summary"
        raise RuntimeError(msg)
    return rows[-1]


async def measure_state_io(sessions: int, repeats: int) -> StateCost:
    """Median time of one state read and one compare-and-swap write with `sessions` state rows stored."""
    scopes = await _store_states(sessions)
    with _long_lived_frozen():
        return await _measure_state_io(scopes, repeats)


async def _measure_state_io(scopes: list[_Scope], repeats: int) -> StateCost:
    from langflow_summarizing_agent.engine.records import Scope
    from langflow_summarizing_agent.engine.store import HeldScopes
    from langflow_summarizing_agent.storage.store import DatabaseStore

    scope = scopes[len(scopes) // 2]
    store = DatabaseStore(Scope(scope.flow_id, scope.user_id, scope.session_id), locks=HeldScopes())

    async def read() -> Any:
        summary = await store.load()
        if summary.row_id is None or not summary.text:
            msg = "the stored benchmark summary was not found"
            raise RuntimeError(msg)
        return summary

    summary = await read()

    async def write() -> None:
        nonlocal summary
        saved = await store.save(summary)
        if saved is None:
            msg = "the benchmark's compare-and-swap write lost against nobody"
            raise RuntimeError(msg)
        summary = saved

    read_ms, read_trips = await _median_call(read, scope, repeats)
    write_ms, write_trips = await _median_call(write, scope, repeats)
    return StateCost(
        len(scopes),
        round(read_ms, 3),
        round(write_ms, 3),
        read_trips.statements,
        read_trips.commits,
        write_trips.statements,
        write_trips.commits,
    )


async def _median_call(call: Callable[[], Awaitable[Any]], scope: _Scope, repeats: int) -> tuple[float, RoundTrips]:
    times: list[float] = []
    trips: list[RoundTrips] = []
    for repeat in range(WARMUP + repeats):
        gc.collect()
        with _flow_scope(scope), statement_counter() as counter:
            start = time.perf_counter()
            await call()
            seconds = time.perf_counter() - start
        if repeat >= WARMUP:
            times.append(seconds * 1000)
            trips.append(counter)
    most = RoundTrips(max(c.statements for c in trips), max(c.commits for c in trips))
    return statistics.median(times), most


async def _store_states(sessions: int) -> list[_Scope]:
    """`sessions` state rows, each session with one message: 100 sessions per flow, each flow with its own owner."""
    from langflow.services.database.models.message.model import MessageTable
    from langflow.services.deps import get_db_service
    from sqlalchemy import insert

    from langflow_summarizing_agent.engine.records import NO_CONTEXT
    from langflow_summarizing_agent.storage.migrate import current_database_url, upgrade
    from langflow_summarizing_agent.storage.models import SessionMemoryStateTable

    await upgrade(current_database_url())
    now = datetime.now(timezone.utc)
    scopes: list[_Scope] = []
    flow_id = user_id = uuid.uuid4()
    for index in range(sessions):
        if index % 100 == 0:
            flow_id, user_id = uuid.uuid4(), uuid.uuid4()
        scopes.append(_Scope(flow_id, user_id, f"state-io-{index}"))
    rows = [
        {
            "id": uuid.uuid4(),
            "flow_id": s.flow_id,
            "user_id": s.user_id,
            "session_id": s.session_id,
            "context_id": NO_CONTEXT,
            "summary": SUMMARY_TEXT,
            "pinned": PINNED,
            "folded_count": 100,
            "version": 1,
            "failed_folds": 0,
            "created_at": now,
            "updated_at": now,
        }
        for s in scopes
    ]
    messages = [
        {
            "id": uuid.uuid4(),
            "flow_id": s.flow_id,
            "user_id": s.user_id,
            "session_id": s.session_id,
            "sender": "User",
            "sender_name": "User",
            "text": "hello",
            "timestamp": now,
            "files": [],
            "error": False,
            "edit": False,
            "is_output": False,
            "category": "message",
            "properties": {},
            "content_blocks": [],
        }
        for s in scopes
    ]
    tables = [(SessionMemoryStateTable.__table__, rows), (MessageTable.__table__, messages)]
    async with get_db_service().engine.begin() as connection:
        for table, values in tables:
            for start in range(0, len(values), 1_000):
                await connection.execute(insert(table), values[start : start + 1_000])
    await _analyze()
    return scopes


async def _analyze() -> None:
    """Postgres: refresh planner statistics after the bulk insert, as autovacuum does on a live database.

    Without them the planner guesses one row per session and may scan a whole session; Langflow never runs
    ANALYZE on SQLite, so neither does the benchmark.
    """
    from langflow.services.deps import get_db_service
    from sqlalchemy import text

    engine = get_db_service().engine
    if engine.dialect.name == "postgresql":
        async with engine.begin() as connection:
            await connection.execute(text("ANALYZE"))


@contextmanager
def _long_lived_frozen() -> Iterator[None]:
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


@contextmanager
def _flow_scope(scope: _Scope) -> Iterator[None]:
    """The flow and owner a graph run binds while a component executes."""
    from lfx.memory.flow_context import (
        reset_current_flow_id,
        reset_current_message_owner_id,
        set_current_flow_id,
        set_current_message_owner_id,
    )

    flow_token = set_current_flow_id(scope.flow_id)
    owner_token = set_current_message_owner_id(scope.user_id)
    try:
        yield
    finally:
        reset_current_message_owner_id(owner_token)
        reset_current_flow_id(flow_token)
