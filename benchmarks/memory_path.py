"""Memory-path cost: `get_memory_data()` of the Summarizing Agent against the stock Agent, and one state read/write.

Sessions of N rows inserted directly, with a summary whose cursor sits just before the window (the measured turns do
not fold; Postgres then analyzed, as autovacuum would). Each call runs on a fresh component in a graph run's scope, with
the ready flow's model selection (no API key: a turn that does not fold never builds the model).
"""

from __future__ import annotations

import functools
import gc
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta, timezone
from typing import Any

import numpy as np
import sqlalchemy as sa
from langflow.services.database.models.message.model import MessageTable
from langflow.services.deps import get_db_service, session_scope
from lfx.schema.message import Message

from benchmarks.script import filler_message
from langflow_summarizing_agent.engine.records import NO_CONTEXT, Cursor, Scope, Summary
from langflow_summarizing_agent.engine.report import problems
from langflow_summarizing_agent.engine.store import HeldScopes
from tests.support.flow_files import agent_template, load_support_flow
from tests.support.round_trips import statement_counter

N_MESSAGES, PINNED_KEYS, WARMUP = 10, ["project_id", "cluster"], 10
PINNED = {"project_id": "PRJ-123", "cluster": "EU cluster"}
SUMMARY_TEXT = "\n".join(f"- {filler_message(index)[:120]}" for index in range(0, 36, 2))


async def timed(
    prepare: Callable[[], Callable[[], Awaitable[Any]]], scope: tuple[uuid.UUID, uuid.UUID], repeats: int
) -> dict:
    """Median milliseconds of the call `prepare()` gives (prepared untimed), after `WARMUP` untimed calls, and the
    most statements and commits one call sent."""
    from lfx.memory import flow_context as context

    tokens = context.set_current_flow_id(scope[0]), context.set_current_message_owner_id(scope[1])
    samples = []
    for _ in range(WARMUP + repeats):
        call = prepare()
        gc.collect()
        gc.disable()
        try:
            with statement_counter() as trips:
                start = time.perf_counter()
                result = await call()
                seconds = time.perf_counter() - start
        finally:
            gc.enable()
        if callable(result):
            result()
        samples.append((seconds * 1000, trips.statements, trips.commits))
    context.reset_current_message_owner_id(tokens[1])
    context.reset_current_flow_id(tokens[0])
    times, statements, commits = zip(*samples[WARMUP:], strict=True)
    return {"ms": round(float(np.median(times)), 3), "statements": max(statements), "commits": max(commits)}


async def measure_memory_path(sizes: list[int], repeats: int) -> list[dict[str, Any]]:
    """Per session size: each agent's `get_memory_data()` timed and its round trips, and the ratio of the times."""
    if any(size < N_MESSAGES + 2 for size in sizes):
        msg = f"memory-path sessions need at least {N_MESSAGES + 2} messages (a window and a folded part)"
        raise ValueError(msg)
    costs = []
    for size in sizes:
        flow_id, user_id, session_id = uuid.uuid4(), uuid.uuid4(), f"memory-path-{size}"
        input_row = await _store_session(flow_id, user_id, session_id, size)
        cost: dict[str, Any] = {"messages": size}
        for kind in ("stock", "summarizing"):
            prepare = functools.partial(_memory_call, kind, flow_id, user_id, input_row)
            cost[kind] = await timed(prepare, (flow_id, user_id), repeats)
        costs.append({**cost, "ratio": round(cost["summarizing"]["ms"] / cost["stock"]["ms"], 2)})
    return costs


def _memory_call(kind: str, flow_id: uuid.UUID, user_id: uuid.UUID, input_row: Any) -> Callable[[], Awaitable[Any]]:
    """A fresh agent in a graph (not run) holding the turn's stored input: its `get_memory_data()`, which returns
    the check that the history was read and the turn did not fold."""
    from lfx.components.models_and_agents.agent import AgentComponent
    from lfx.graph import Graph

    from langflow_summarizing_agent.components.summarizing_agent.summarizing_agent import SummarizingAgentComponent
    from langflow_summarizing_agent.wiring.agent_turn import turn_of

    settings: dict[str, Any] = {"n_messages": N_MESSAGES}
    if kind == "summarizing":
        settings |= {"summarize_older_messages": True, "pinned_keys": PINNED_KEYS}
    agent = (SummarizingAgentComponent if kind == "summarizing" else AgentComponent)(_id="agent")
    current = Message(id=str(input_row.id), text=input_row.text, sender="User", session_id=input_row.session_id)
    agent.set(model=agent_template(load_support_flow())["model"]["value"], input_value=current, **settings)
    graph = Graph(agent, agent, flow_id=str(flow_id), user_id=str(user_id))
    graph.session_id = input_row.session_id
    graph.set_run_id()

    def check(history: Any) -> None:
        kept = turn_of(agent)
        turn = kept.turn if kept is not None else None
        if not history or (kind == "summarizing" and (turn is None or turn.fold is not None or problems(turn))):
            msg = f"{kind}: the measured turn read no history, or folded or failed: {turn}"
            raise RuntimeError(msg)

    async def call() -> Callable[[], None]:
        return functools.partial(check, await agent.get_memory_data())

    return call


async def _store_session(flow_id: uuid.UUID, user_id: uuid.UUID, session_id: str, size: int) -> Any:
    """`size` message rows ending with the turn's input, and a summary whose cursor is just before the window."""
    from langflow_summarizing_agent.storage.store import DatabaseStore

    start = datetime.now(timezone.utc) - timedelta(seconds=size)
    texts = [filler_message(index) for index in range(40)]
    scope: dict[str, Any] = {"flow_id": flow_id, "user_id": user_id, "session_id": session_id, "category": "message"}
    rows = []
    for i in range(size):
        reply = (size - 1 - i) % 2  # the last row, the turn's input, is the user's
        sender, name = ("Machine", "AI") if reply else ("User", "User")
        text, at = texts[2 * (i % 20) + reply], start + timedelta(seconds=i)
        rows.append(MessageTable(**scope, sender=sender, sender_name=name, text=text, files=[], timestamp=at))
    async with session_scope() as session:
        session.add_all(rows)
    await _analyze()
    covered = rows[-2 - N_MESSAGES]
    summary = Summary(SUMMARY_TEXT, dict(PINNED), Cursor(covered.timestamp, str(covered.id)), size - 1 - N_MESSAGES)
    if await DatabaseStore(Scope(flow_id, user_id, session_id), locks=HeldScopes()).save(summary) is None:
        msg = "could not store the benchmark session's summary"
        raise RuntimeError(msg)
    return rows[-1]


async def measure_state_io(sessions: int, repeats: int) -> dict[str, Any]:
    """One summary read and one compare-and-swap write with `sessions` summaries stored (100 sessions a flow)."""
    from langflow_summarizing_agent.storage.migrate import current_database_url, upgrade
    from langflow_summarizing_agent.storage.models import SessionMemoryStateTable
    from langflow_summarizing_agent.storage.store import DatabaseStore

    await upgrade(current_database_url())
    now = datetime.now(timezone.utc)
    flows = [(uuid.uuid4(), uuid.uuid4()) for _ in range(0, sessions, 100)]
    scopes = [Scope(*flows[i // 100], f"state-io-{i}") for i in range(sessions)]
    state = {"created_at": now, "updated_at": now, "folded_count": 100, "version": 1, "failed_folds": 0}
    state |= {"summary": SUMMARY_TEXT, "pinned": PINNED, "context_id": NO_CONTEXT}
    message = {"sender": "User", "sender_name": "User", "text": "hello", "timestamp": now, "files": [], "error": False}
    message |= {"edit": False, "is_output": False, "category": "message", "properties": {}, "content_blocks": []}
    keys = [{"flow_id": s.flow_id, "user_id": s.user_id, "session_id": s.session_id} for s in scopes]
    async with get_db_service().engine.begin() as connection:
        for table, row in ((SessionMemoryStateTable, state), (MessageTable, message)):
            rows = [{**row, "id": uuid.uuid4(), **key} for key in keys]
            for start in range(0, len(rows), 1_000):
                await connection.execute(sa.insert(table.__table__), rows[start : start + 1_000])  # type: ignore[union-attr]
    await _analyze()
    middle = len(scopes) // 2
    scope, ids = scopes[middle], flows[middle // 100]
    store = DatabaseStore(scope, locks=HeldScopes())
    summary = await store.load()
    if summary.row_id is None:
        msg = "the stored benchmark summary was not found"
        raise RuntimeError(msg)

    async def write() -> None:
        nonlocal summary
        saved = await store.save(summary)
        if saved is None:
            msg = "the benchmark's compare-and-swap write lost against nobody"
            raise RuntimeError(msg)
        summary = saved

    return {
        "sessions": sessions,
        "read": await timed(lambda: store.load, ids, repeats),
        "write": await timed(lambda: write, ids, repeats),
    }


async def _analyze() -> None:
    """Postgres: planner statistics after the bulk insert, as autovacuum would; Langflow never analyzes SQLite."""
    engine = get_db_service().engine
    if engine.dialect.name == "postgresql":
        async with engine.begin() as connection:
            await connection.execute(sa.text("ANALYZE"))
