"""Benchmark: many sessions at once on a real `langflow run`, the stock Agent beside the Summarizing Agent, and faults.

    python -m benchmarks.load [--backends sqlite,postgres] [--users 4,8,16,24] [--faults all|none|NAME,...]

A bounded asyncio client (httpx) plays N simulated users per agent, each in a session of its own, chatting through the
run API (`POST /api/v1/run/{flow_id}`) with a think time between messages, a new connection per turn so the turns
spread over the workers. Both flows (Chat Input -> agent -> Chat Output, the stock Agent and the Summarizing Agent at
`n_messages=10`, everything else at its default) run side by side in the same phase, N users each, on one server:
SQLite with one worker, and PostgreSQL (a server of the benchmark's own, `benchmarks.own_postgres`) with two. The
model is offline and runs inside the server (`benchmarks.load_model`, the flow carries its code): agent calls take
`--agent-seconds`, summary calls `--summary-seconds`.

Per phase it reports turns per second; p50, p95 and p99 turn time; turns that waited for a summary call (one of the
session's summary calls ran between the turn's start and its first agent call) and turns that folded inline (the
reply's memory step says so); the fold queue wait (from the end of the turn whose reply started a fold to that
fold's first summary call); summary calls per exchange and wasted calls (successful calls whose fold was never
saved); failed turns; the server's RSS (all its processes); and the database connections in use (PostgreSQL:
`pg_stat_activity`; SQLite: the open handles of the database file).

After every phase the audit (`audit_phase`) reads every session from the database: each message the cursor covers is
folded exactly once and in order, `folded_count` is the number of messages the cursor covers, no message older than
the window is left unfolded once the folds have settled (but while a fold backs off), versions only went up while the
phase ran (the state rows are polled), and a session deleted through Langflow's monitor API keeps no state row. A
phase whose audit fails makes the benchmark exit 1, after writing its results.

Faults, each a phase on the two-worker PostgreSQL server (`--faults`): `pg_restart` (PostgreSQL stopped for
`--outage-seconds`, then started again), `worker_kill` (one worker SIGKILLed while one of its summary calls runs),
`summary_outage` (summary calls fail for `--summary-outage-seconds`, then succeed), `rejected_saves` (the database
rejects every save of a fold for as long, a trigger on the state table; the back-off of a failed save goes through),
`slow_summary` (summary calls take `--slow-summary-seconds`). Writes `load.json` and `load.png` (p95 turn time
against N, both agents, both backends) to `--out`. Every loop is bounded in count and time; only 127.0.0.1 is used.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import psutil
import sqlalchemy as sa

from benchmarks.load_model import MARKER, LoadModelComponent
from benchmarks.own_postgres import OwnPostgres, own_postgres
from benchmarks.revision import commit
from langflow_summarizing_agent.engine.fold import FOLD_RETRY_BASE
from langflow_summarizing_agent.engine.prompt import count_words
from langflow_summarizing_agent.engine.report import BUSY_NOTE
from langflow_summarizing_agent.engine.settings import (
    DEFAULT_FOLD_BATCH,
    DEFAULT_MAX_FOLDS_PER_TURN,
    DEFAULT_SUMMARY_WORDS,
)
from langflow_summarizing_agent.wiring.timing import DEFAULT_MAX_RUNNING, MAX_RUNNING_ENV
from tests.support.server_fixtures import (
    LangflowServer,
    _langflow_executable,
    _server_environment,
    running_langflow_server,
)

N_MESSAGES = 10
P95_RATIO_TARGET = 1.10
RSS_GROWTH_TARGET = 0.10
SATURATION_SHARE = 0.8
"""The stock Agent saturates at the first N whose turns per second fall below this share of linear scaling."""
REQUEST_TIMEOUT_SECONDS = 90.0
STARTUP_TIMEOUT_SECONDS = 400.0
"""Two workers booting on a busy 2-CPU machine take minutes."""
SAMPLE_SECONDS = 1.0
STATE_POLL_SECONDS = 0.25
SETTLE_QUIET_SECONDS = 3.0
SETTLE_TIMEOUT_SECONDS = 120.0
KILL_WAIT_SECONDS = 40.0
WARM_UP_TURNS = 4
"""Turns of each flow before a phase, on new connections, so that both workers have built it."""
FAULT_MARGIN_SECONDS = 5.0
"""A failed turn that ended this long after a fault's window closed is still counted as the fault's."""
DATABASE = "langflow_load"
FAULT_SERVER_LOGS = {"LANGFLOW_LOG_ENV": "container"}
"""Langflow's JSON logs, as its docs set them up for production (Grafana and Loki). Its default console renders
each logged exception's traceback with rich: ~0.75 s of CPU in the worker's event loop on this machine. A database
restart has Langflow log dozens of them, and every turn of both agents waited 20 to 90 s behind them."""
FAULTS = ("slow_summary", "summary_outage", "rejected_saves", "worker_kill", "pg_restart")
"""In the order they run: the database restart last."""
AGENTS = ("stock", "summarizing")
BACKENDS = ("sqlite", "postgres")
FOLDED_INLINE = " this turn ("
"""In the memory step of a turn that folded inline (`engine.report.memory_step_text`)."""
FOLD_RUNNING = BUSY_NOTE.lower()
"""In the memory step of a turn that found its session's fold running or waiting for a place."""
FILLER_TEXT = (
    "the deployment still shows the same error after the restart and the logs mention a timeout while the worker "
    "connects to the queue so I checked the settings again and they match the documentation"
)
FILLER = FILLER_TEXT.split(" ")


@dataclass
class TurnRecord:
    agent: str
    session: str
    index: int
    start: float
    end: float
    ok: bool
    error: str = ""
    inline: bool = False
    busy: bool = False
    """The reply's memory step says a fold of the session was running (or waiting for a place): this turn started
    no fold after its reply."""


@dataclass
class Phase:
    name: str
    backend: str
    users: int
    seconds: float
    think_seconds: float
    turns: list[TurnRecord] = field(default_factory=list)
    calls: list[dict[str, Any]] = field(default_factory=list)
    rss: list[tuple[float, float]] = field(default_factory=list)
    connections: list[tuple[float, int]] = field(default_factory=list)
    versions: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    started: float = 0.0
    ended: float = 0.0


def session_marker(agent: str, user: int) -> str:
    return f"s{AGENTS.index(agent)}{user:03d}"


def user_text(marker: str, index: int, words: int) -> str:
    filler = [FILLER[(index + n) % len(FILLER)] for n in range(max(words - 1, 0))]
    return " ".join([f"#{marker}-u{index}#", *filler])


# The server


def model_node(record_path: Path, control_path: Path, args: argparse.Namespace) -> LoadModelComponent:
    model = LoadModelComponent(_id="load_model")
    model.set(
        agent_seconds=args.agent_seconds,
        summary_seconds=args.summary_seconds,
        reply_words=args.message_words,
        control_path=str(control_path),
        record_path=str(record_path),
    )
    return model


def flow_data(agent: str, record_path: Path, control_path: Path, args: argparse.Namespace, name: str) -> dict:
    from lfx.components.input_output import ChatInput, ChatOutput
    from lfx.components.models_and_agents.agent import AgentComponent
    from lfx.graph import Graph

    from langflow_summarizing_agent.components.summarizing_agent.summarizing_agent import (
        SUMMARY_FIELDS,
        SummarizingAgentComponent,
    )

    chat_input = ChatInput(_id="chat_input")
    model = model_node(record_path, control_path, args)
    quiet = {"add_current_date_tool": False, "add_calculator_tool": False, "system_prompt": "You are a support agent."}
    if agent == "stock":
        node = AgentComponent(_id="agent")
        node.set(model=model.build_model, input_value=chat_input.message_response, n_messages=args.n_messages, **quiet)
    else:
        node = SummarizingAgentComponent(_id="agent")
        node.set(
            model=model.build_model,
            input_value=chat_input.message_response,
            n_messages=args.n_messages,
            summarize_older_messages=True,
            **quiet,
        )
    chat_output = ChatOutput(_id="chat_output")
    chat_output.set(input_value=node.message_response)
    flow = Graph(chat_input, chat_output).dump(name=name)
    if agent == "summarizing":
        template = next(n for n in flow["data"]["nodes"] if n["id"] == "agent")["data"]["node"]["template"]
        for name_ in SUMMARY_FIELDS:
            template[name_]["show"] = True
    return flow


@contextmanager
def langflow_server(
    backend: str,
    work_dir: Path,
    pg: OwnPostgres | None,
    *,
    max_background_folds: int,
    migrated: bool = False,
    logs: dict[str, str] | None = None,
) -> Iterator[LangflowServer]:
    """`langflow run` on SQLite with one worker, or on `database` of `pg` with two; `logs`, Langflow's log settings
    (its default console when None)."""
    work_dir.mkdir(parents=True, exist_ok=True)
    if backend == "sqlite":
        url, workers = f"sqlite:///{work_dir / 'langflow.db'}", 1
    else:
        assert pg is not None
        url, workers = pg.database_url(DATABASE), 2
    settings = {"LANGFLOW_WORKER_TIMEOUT": "300", **(logs or {})}
    if max_background_folds:
        settings[MAX_RUNNING_ENV] = str(max_background_folds)
    if workers > 1 and not migrated:
        # Migrated once before the workers start: two workers migrating a fresh database at once were seen to
        # take minutes on a busy machine.
        config_dir = work_dir / "langflow-config"
        config_dir.mkdir(parents=True, exist_ok=True)
        migrate({**_server_environment(config_dir, url), **settings}, work_dir / "langflow-migration.log")
    with running_langflow_server(
        work_dir, url, workers=workers, startup_timeout=STARTUP_TIMEOUT_SECONDS, settings=settings
    ) as server:
        yield server


def migrate(environment: dict[str, str], log_path: Path) -> None:
    with log_path.open("wb") as log:
        subprocess.run(
            [_langflow_executable(), "migration"],
            env=environment,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            timeout=STARTUP_TIMEOUT_SECONDS,
            check=True,
        )


def server_processes(server: LangflowServer) -> list[psutil.Process]:
    try:
        root = psutil.Process(server.pid)
        return [root, *root.children(recursive=True)]
    except psutil.Error:
        return []


def worker_pids(server: LangflowServer) -> set[int]:
    """The processes that answer requests: those that ran a model call are workers, whatever forked them."""
    return {p.pid for p in server_processes(server)}


# Sampling while a phase runs


class Sampler:
    """Samples the server's RSS, the database connections in use and every state row's version, in a thread."""

    def __init__(self, server: LangflowServer, engine: sa.Engine, phase: Phase, flow_ids: dict[str, str]) -> None:
        self.server, self.engine, self.phase = server, engine, phase
        self.flow_id = flow_ids["summarizing"]
        self.sqlite_path = server.database_url.removeprefix("sqlite:///") if engine.dialect.name == "sqlite" else ""
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._resources, daemon=True)]
        self._threads.append(threading.Thread(target=self._states, daemon=True))

    def __enter__(self) -> Sampler:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()

    def _resources(self) -> None:
        while not self._stop.wait(SAMPLE_SECONDS):
            now = time.time()
            processes = server_processes(self.server)
            rss = 0
            handles = 0
            for process in processes:
                try:
                    rss += process.memory_info().rss
                    if self.sqlite_path:
                        handles += sum(1 for f in process.open_files() if f.path == self.sqlite_path)
                except psutil.Error:
                    continue
            self.phase.rss.append((now, rss / 2**20))
            if self.sqlite_path:
                self.phase.connections.append((now, handles))
            else:
                try:
                    with self.engine.connect() as connection:
                        count = connection.execute(sa.text(CONNECTIONS_SQL)).scalar_one()
                    self.phase.connections.append((now, int(count)))
                except sa.exc.SQLAlchemyError:
                    self.phase.connections.append((now, -1))

    def _states(self) -> None:
        flow = flow_key(self.engine, self.flow_id)
        while not self._stop.wait(STATE_POLL_SECONDS):
            try:
                with self.engine.connect() as connection:
                    rows = connection.execute(sa.text(VERSIONS_SQL), {"flow_id": flow}).all()
            except sa.exc.SQLAlchemyError:
                continue
            for session_id, version, folded_count in rows:
                seen = self.phase.versions.setdefault(session_id, [])
                if not seen or seen[-1] != (version, folded_count):
                    seen.append((version, folded_count))


CONNECTIONS_SQL = "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
VERSIONS_SQL = "SELECT session_id, version, absorbed_count FROM session_memory_state WHERE flow_id = :flow_id"


def flow_key(engine: sa.Engine, flow_id: str) -> Any:
    # SQLite stores UUIDs as 32 hex digits; Postgres has a uuid type.
    as_uuid = uuid.UUID(flow_id)
    return as_uuid.hex if engine.dialect.name == "sqlite" else as_uuid


def read_calls(record_path: Path) -> list[dict[str, Any]]:
    """The model's calls, one per call: its start record merged with its end record (a call without an end record
    was cut off, as by a killed worker)."""
    if not record_path.exists():
        return []
    starts: dict[tuple[int, float, str], dict[str, Any]] = {}
    for line in record_path.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        key = (record["pid"], record["start"], record["kind"])
        starts.setdefault(key, {**record, "end": None, "failed": None}).update(
            {k: v for k, v in record.items() if k in {"end", "failed"}}
        )
    return sorted(starts.values(), key=lambda c: c["start"])


# The simulated users


async def user_loop(
    client: httpx.AsyncClient,
    phase: Phase,
    agent: str,
    flow_id: str,
    user: int,
    deadline: float,
    args: argparse.Namespace,
) -> None:
    marker = session_marker(agent, user)
    session_id = f"load-{phase.name}-{marker}"
    # User n of each agent draws the same think times (common random numbers): the two agents' turns meet the
    # server's pauses (a garbage collection of the whole process, say) alike, so their turn times compare.
    rng = random.Random(f"{phase.name}-u{user}")
    # Users start spread over one think time, so the phase does not begin with every turn at once.
    await asyncio.sleep(rng.uniform(0, phase.think_seconds))
    for index in range(args.max_turns_per_user):
        if time.monotonic() >= deadline:
            return
        started = time.time()
        body = {
            "input_value": user_text(marker, index, args.message_words),
            "input_type": "chat",
            "output_type": "chat",
            "session_id": session_id,
        }
        try:
            response = await client.post(f"/api/v1/run/{flow_id}", json=body)
            text = response.text
            ok = response.status_code == 200 and f"#{marker}-a{index}#" in text
            error = "" if ok else f"HTTP {response.status_code}: {text[:200]}"
        except httpx.HTTPError as exc:
            ok, error = False, f"{type(exc).__name__}: {exc}"
        phase.turns.append(TurnRecord(agent, marker, index, started, time.time(), ok, error))
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return
        await asyncio.sleep(min(remaining, rng.uniform(0.5, 1.5) * phase.think_seconds))


async def drive(
    server: LangflowServer,
    api_key: str,
    phase: Phase,
    flow_ids: dict[str, str],
    args: argparse.Namespace,
    fault: Callable[[Phase], Any] | None = None,
) -> None:
    limits = httpx.Limits(max_connections=4 * phase.users + 8, max_keepalive_connections=0)
    deadline = time.monotonic() + phase.seconds
    phase.started = time.time()
    async with httpx.AsyncClient(
        base_url=server.base_url, headers={"x-api-key": api_key}, timeout=REQUEST_TIMEOUT_SECONDS, limits=limits
    ) as client:
        users = [
            user_loop(client, phase, agent, flow_ids[agent], user, deadline, args)
            for agent in AGENTS
            for user in range(phase.users)
        ]
        tasks = [asyncio.ensure_future(u) for u in users]
        if fault is not None:
            tasks.append(asyncio.ensure_future(fault(phase)))
        await asyncio.wait_for(asyncio.gather(*tasks), timeout=phase.seconds + 2 * REQUEST_TIMEOUT_SECONDS)
    phase.ended = time.time()


def settle(record_path: Path, engine: sa.Engine, flow_id: str) -> float:
    """Wait until no summary call runs and no state row changed for a while; the seconds waited (bounded)."""
    started = time.monotonic()
    flow = flow_key(engine, flow_id)
    last: Any = None
    quiet_since = time.monotonic()
    while time.monotonic() - started < SETTLE_TIMEOUT_SECONDS:
        # A call of a worker that was killed never ends: it is not running.
        running = any(
            c["end"] is None and c["kind"] == "summary" and psutil.pid_exists(c["pid"])
            for c in read_calls(record_path)[-500:]
        )
        try:
            with engine.connect() as connection:
                state = connection.execute(sa.text(VERSIONS_SQL), {"flow_id": flow}).all()
        except sa.exc.SQLAlchemyError:
            state = None
        if running or state != last:
            quiet_since = time.monotonic()
        last = state
        if time.monotonic() - quiet_since >= SETTLE_QUIET_SECONDS:
            break
        time.sleep(0.5)
    return time.monotonic() - started


# The audit


MESSAGES_SQL = (
    "SELECT id, text FROM message WHERE flow_id = :flow_id AND session_id = :session_id "
    # What a fold reads: not the error rows Langflow stores for a failed turn (as during a database restart).
    "AND COALESCE(error, :no) = :no AND COALESCE(category, '') <> 'error' ORDER BY timestamp, id"
)
STATE_SQL = (
    "SELECT session_id, summary, absorbed_count, covered_until_message_id, version, failed_folds, retry_after "
    "FROM session_memory_state WHERE flow_id = :flow_id"
)


def message_marker(text: str) -> str | None:
    found = MARKER.search(text or "")
    return f"{found.group(1)}-{found.group(2)}{found.group(3)}" if found else None


REPLIES_SQL = "SELECT text, content_blocks FROM message WHERE flow_id = :flow_id AND sender <> 'User'"


def read_memory_steps(engine: sa.Engine, phase: Phase, flow_id: str) -> None:
    """Marks the turns whose reply's memory step (stored with the reply) says it folded inline or found the session's
    fold running."""
    with engine.connect() as connection:
        replies = connection.execute(sa.text(REPLIES_SQL), {"flow_id": flow_key(engine, flow_id)}).all()
    steps = {}
    for reply in replies:
        marker = message_marker(reply.text)
        if marker is not None:
            steps[marker] = (
                json.dumps(reply.content_blocks)
                if not isinstance(reply.content_blocks, str)
                else (reply.content_blocks)
            )
    for turn in phase.turns:
        step = steps.get(f"{turn.session}-a{turn.index}", "")
        turn.inline, turn.busy = FOLDED_INLINE in step, FOLD_RUNNING in step


def delete_sessions(server: LangflowServer, token: str, session_ids: list[str]) -> list[str]:
    """Delete sessions through Langflow's monitor API, as the Playground does; the ids it deleted."""
    deleted = []
    with server.client(token=token) as client:
        for session_id in session_ids:
            response = client.delete(f"/api/v1/monitor/messages/session/{session_id}")
            if response.status_code in {200, 204}:
                deleted.append(session_id)
    return deleted


NO_STATE_ROW = SimpleNamespace(summary=None, covered_until_message_id=None, absorbed_count=0, failed_folds=0)
"""The state a session has before its first saved fold."""


def audit_phase(
    engine: sa.Engine,
    phase: Phase,
    flow_id: str,
    delete: Callable[[], list[str]] = list,
    n_messages: int = N_MESSAGES,
    summary_words: int = DEFAULT_SUMMARY_WORDS,
    chatted: Sequence[str] = (),
) -> dict[str, Any]:
    """Per session, from the database: what the summary covers, folded exactly once; a session that `chatted` with
    a fold due and saved no summary at all is a problem too. Then `delete` deletes some sessions (returning their
    ids), and none of them may leave its state row behind."""
    flow = flow_key(engine, flow_id)
    problems: list[str] = []
    sessions = 0
    folded_messages = 0
    unfolded_waiting = 0
    with engine.connect() as connection:
        rows = {row.session_id: row for row in connection.execute(sa.text(STATE_SQL), {"flow_id": flow})}
        # A session that chatted and saved no summary is audited as one with an empty summary.
        for session_id, row in {**dict.fromkeys(chatted, NO_STATE_ROW), **rows}.items():
            sessions += 1
            stored = connection.execute(
                sa.text(MESSAGES_SQL), {"flow_id": flow, "session_id": session_id, "no": False}
            ).all()
            ids = [str(uuid.UUID(str(m.id))) for m in stored]
            markers = [message_marker(m.text) for m in stored]
            summary = [message_marker(line) for line in (row.summary or "").splitlines()]
            summary = [m for m in summary if m]
            cursor = str(uuid.UUID(str(row.covered_until_message_id))) if row.covered_until_message_id else None
            covered = markers[: ids.index(cursor) + 1] if cursor in ids else []
            if cursor is not None and cursor not in ids:
                problems.append(f"{session_id}: the cursor names no stored message")
            if len(summary) != len(set(summary)):
                doubled = sorted({m for m in summary if summary.count(m) > 1})
                problems.append(f"{session_id}: folded twice: {doubled}")
            if summary != covered:
                clipped = count_words(row.summary or "") >= summary_words
                problems.append(
                    f"{session_id}: the summary folds {len(summary)} messages, the cursor covers "
                    f"{len(covered)}; first difference at {_first_difference(summary, covered)}"
                    + (
                        f" (the summary is at the Summary Word Budget, {summary_words} words: clipped)"
                        if clipped
                        else ""
                    )
                )
            if row.absorbed_count != len(covered):
                problems.append(f"{session_id}: folded_count {row.absorbed_count}, the cursor covers {len(covered)}")
            older = max(len(stored) - (n_messages - 1), 0)
            waiting = max(older - len(covered), 0)
            backing_off = row.failed_folds > 0
            if waiting >= DEFAULT_FOLD_BATCH and not backing_off:
                not_folded = "are not folded" if row is not NO_STATE_ROW else "and no summary saved"
                problems.append(f"{session_id}: {waiting} messages older than the window {not_folded}")
            unfolded_waiting += waiting
            folded_messages += len(covered)
            seen = phase.versions.get(session_id, [])
            versions = [v for v, _ in seen]
            if versions != sorted(set(versions)):
                problems.append(f"{session_id}: the version went down or was saved twice: {seen}")
            counts = [c for _, c in seen]
            if counts != sorted(counts):
                problems.append(f"{session_id}: a saved fold was undone: {seen}")
    deleted = delete()
    with engine.connect() as connection:
        left = {row.session_id for row in connection.execute(sa.text(STATE_SQL), {"flow_id": flow})}
    problems += [
        f"{session_id}: deleted, but its state row is still there" for session_id in deleted if session_id in left
    ]
    return {
        "holds": not problems,
        "sessions": sessions,
        "deleted_sessions": len(deleted),
        "folded_messages": folded_messages,
        "unfolded_older_messages": unfolded_waiting,
        "problems": problems[:50],
    }


def _first_difference(a: list[Any], b: list[Any]) -> str:
    for n, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return f"position {n} ({x} against {y})"
    return f"position {min(len(a), len(b))} (one list ends)"


# What a phase measured


def quantile(values: list[float], share: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(share * (len(ordered) - 1))))]


BOOTSTRAP_RESAMPLES = 2000


def p95_ratio_interval(stock: list[float], ours: list[float], seed: int = 0) -> list[float] | None:
    """The 95% percentile-bootstrap interval of the Summarizing Agent's p95 turn time over the stock Agent's: the
    turns of each agent resampled with replacement. At a phase's few hundred turns, the p95 is a handful of the
    slowest turns, and one server pause moves it."""
    if not stock or not ours:
        return None
    draw = random.Random(seed)
    ratios = sorted(
        quantile(draw.choices(ours, k=len(ours)), 0.95) / max(quantile(draw.choices(stock, k=len(stock)), 0.95), 1e-9)
        for _ in range(BOOTSTRAP_RESAMPLES)
    )
    return [round(quantile(ratios, 0.025), 3), round(quantile(ratios, 0.975), 3)]


def rounded(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


def turn_seconds(phase: Phase, agent: str) -> list[float]:
    return [t.end - t.start for t in phase.turns if t.agent == agent and t.ok]


def agent_metrics(phase: Phase, agent: str, summary_state: dict[str, list[str]]) -> dict[str, Any]:
    turns = [t for t in phase.turns if t.agent == agent]
    done = [t for t in turns if t.ok]
    seconds = turn_seconds(phase, agent)
    span = max(phase.ended - phase.started, 1e-9)
    sessions = {session_marker(agent, u) for u in range(phase.users)}
    calls = [c for c in phase.calls if c["session"] in sessions]
    summary_calls = [c for c in calls if c["kind"] == "summary"]
    first_agent_call: dict[tuple[str, int], tuple[float, int]] = {}
    for call in calls:
        if call["kind"] == "agent" and call["folded"]:
            session, _, index = call["folded"][0].partition("-u")
            first_agent_call.setdefault((session, int(index)), (call["start"], call["pid"]))
    by_session: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for call in summary_calls:
        by_session[call["session"]].append(call)
    waited = []
    for turn in turns:
        # A summary call of the session, in the worker that ran the turn, inside the turn before its first agent
        # call: the turn waited for it (one in the other worker, or after the reply, did not hold the turn up).
        until, pid = first_agent_call.get((turn.session, turn.index), (turn.end, None))
        if any(
            turn.start <= c["start"] and (c["end"] or turn.end) <= until and pid in (None, c["pid"])
            for c in by_session[turn.session]
        ):
            waited.append(turn)
    queue_waits = fold_queue_waits(turns, by_session)
    succeeded = [c for c in summary_calls if c["end"] is not None and not c["failed"]]
    on_chain = set()
    for call in succeeded:
        final = summary_state.get(call["session"], [])
        chain = call["previous"] + call["folded"]
        if chain and final[: len(chain)] == chain:
            on_chain.add((call["session"], len(call["previous"]), len(chain)))
    return {
        "turns": len(turns),
        "turns_per_second": round(len(done) / span, 3),
        "p50_seconds": rounded(quantile(seconds, 0.50)),
        "p95_seconds": rounded(quantile(seconds, 0.95)),
        "p99_seconds": rounded(quantile(seconds, 0.99)),
        "failed_turns": len(turns) - len(done),
        "failures": [
            f"{t.session} turn {t.index} at +{t.start - phase.started:.1f} s: {t.error}" for t in turns if not t.ok
        ][:20],
        "turns_waited": len(waited),
        "turns_folded_inline": sum(1 for t in turns if t.inline),
        "turns_that_found_the_fold_running": sum(1 for t in turns if t.busy),
        "fold_queue_wait_p50_seconds": rounded(quantile(queue_waits, 0.50)),
        "fold_queue_wait_p95_seconds": rounded(quantile(queue_waits, 0.95)),
        "fold_queue_wait_max_seconds": rounded(max(queue_waits, default=None) if queue_waits else None),
        "summary_calls": len(summary_calls),
        "failed_summary_calls": sum(1 for c in summary_calls if c["failed"]),
        "cut_off_summary_calls": sum(1 for c in summary_calls if c["end"] is None),
        "summary_calls_per_exchange": round(len(summary_calls) / len(done), 3) if done else None,
        "wasted_summary_calls": len(succeeded) - len(on_chain),
        "most_calls_in_one_fold": most_calls_in_one_fold(summary_calls, saved_counts(phase)),
        "retried_within_backoff": retried_within_backoff(by_session),
    }


def fold_queue_waits(turns: list[TurnRecord], by_session: dict[str, list[dict[str, Any]]]) -> list[float]:
    """For each fold's first summary call, the wait since the end of the turn whose reply started the fold: the
    session's last turn before the call that did not find a fold running (those started none)."""
    waits = []
    by_turns: dict[str, list[TurnRecord]] = defaultdict(list)
    for turn in sorted(turns, key=lambda t: t.end):
        by_turns[turn.session].append(turn)
    for session, calls in by_session.items():
        for call in fold_starts(calls):
            before = [t for t in by_turns[session] if t.end <= call["start"]]
            while before and before[-1].busy:
                before.pop()
            if before:
                waits.append(call["start"] - before[-1].end)
    return waits


def fold_starts(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The calls that began a fold: not one folding on from the call before it in the same worker."""
    starts, chains = [], {}
    for call in calls:
        if chains.get(call["pid"]) != call["previous"] or not call["previous"]:
            starts.append(call)
        chains[call["pid"]] = None if call["failed"] or call["end"] is None else call["previous"] + call["folded"]
    return starts


def most_calls_in_one_fold(summary_calls: list[dict[str, Any]], saved_counts: dict[str, set[int]]) -> int:
    """Most summary calls one fold made. A fold's first call folds on from a saved summary: its previous summary
    lists as many messages as a saved state row's `absorbed_count` (the polled `saved_counts` of its session). Each
    next call of the fold, in the same worker, folds on from the call before it, whose summary is not saved yet (it
    lists a count between two saved ones). A fold queued behind the one running starts from that one's save."""
    most = 0
    runs: dict[tuple[str, int], tuple[list[str], int]] = {}
    for call in summary_calls:
        key = (call["session"], call["pid"])
        chain, count = runs.get(key, ([], 0))
        starts = not call["previous"] or len(call["previous"]) in saved_counts.get(call["session"], set())
        count = count + 1 if not starts and chain and call["previous"] == chain else 1
        runs[key] = ([] if call["failed"] or call["end"] is None else call["previous"] + call["folded"], count)
        most = max(most, count)
    return most


def saved_counts(phase: Phase) -> dict[str, set[int]]:
    """Each session's `absorbed_count`s its state row held while the phase ran, by session marker."""
    return {session_id.rsplit("-", 1)[-1]: {count for _, count in seen} for session_id, seen in phase.versions.items()}


def retried_within_backoff(by_session: dict[str, list[dict[str, Any]]]) -> int:
    """Summary calls that started less than the first back-off after a failed call of the same session, in any
    worker: the back-off did not hold."""
    base = FOLD_RETRY_BASE.total_seconds()
    early = 0
    for calls in by_session.values():
        for failed in (c for c in calls if c["failed"] and c["end"] is not None):
            if any(failed["end"] < c["start"] < failed["end"] + base for c in calls):
                early += 1
    return early


def rss_metrics(phase: Phase) -> dict[str, Any]:
    values = [mb for _, mb in phase.rss if mb > 0]
    if len(values) < 3:
        return {
            "rss_mb_start": None,
            "rss_mb_after_warmup": None,
            "rss_mb_end": None,
            "rss_growth": None,
            "rss_mb_max": None,
        }
    after_warmup = statistics.median(values[len(values) // 3 : len(values) // 3 + 3])
    end = statistics.median(values[-3:])
    return {
        "rss_mb_start": round(values[0], 1),
        "rss_mb_after_warmup": round(after_warmup, 1),
        "rss_mb_end": round(end, 1),
        "rss_mb_max": round(max(values), 1),
        "rss_growth": round(end / after_warmup - 1, 4),
    }


def phase_report(phase: Phase, summary_state: dict[str, list[str]], audit: dict[str, Any]) -> dict[str, Any]:
    connections = [n for _, n in phase.connections if n >= 0]
    return {
        "name": phase.name,
        "backend": phase.backend,
        "users_per_agent": phase.users,
        "seconds": round(phase.ended - phase.started, 1),
        "think_seconds": phase.think_seconds,
        "agents": {agent: agent_metrics(phase, agent, summary_state) for agent in AGENTS},
        "p95_ratio_interval": p95_ratio_interval(*(turn_seconds(phase, agent) for agent in AGENTS)),
        **rss_metrics(phase),
        "db_connections_max": max(connections, default=None),
        "db_connections_median": statistics.median(connections) if connections else None,
        "events": phase.events,
        "audit": audit,
    }


def final_summaries(engine: sa.Engine, flow_id: str) -> dict[str, list[str]]:
    """Per session marker, the markers the stored summary folds, in order."""
    with engine.connect() as connection:
        rows = connection.execute(sa.text(STATE_SQL), {"flow_id": flow_key(engine, flow_id)}).all()
    found = {}
    for row in rows:
        markers = [m for m in (message_marker(line) for line in (row.summary or "").splitlines()) if m]
        found[row.session_id.rsplit("-", 1)[-1]] = markers
    return found


# Faults


def write_control(path: Path, **values: Any) -> None:
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(values))
    temporary.replace(path)


def event(phase: Phase, what: str, **details: Any) -> None:
    phase.events.append({"at": round(time.time() - phase.started, 2), "event": what, **details})
    print(f"  +{time.time() - phase.started:6.1f} s  {what} {details or ''}", flush=True)


def pg_restart_fault(pg: OwnPostgres, at: float, outage: float) -> Callable[[Phase], Any]:
    async def fault(phase: Phase) -> None:
        await asyncio.sleep(at)
        event(phase, "postgres stopped")
        await asyncio.to_thread(pg.stop, "fast")
        await asyncio.sleep(outage)
        await asyncio.to_thread(pg.start)
        event(phase, "postgres started")

    return fault


def worker_kill_fault(server: LangflowServer, record_path: Path, at: float) -> Callable[[Phase], Any]:
    async def fault(phase: Phase) -> None:
        await asyncio.sleep(at)
        deadline = time.monotonic() + KILL_WAIT_SECONDS
        workers = worker_pids(server) - {server.pid}
        while time.monotonic() < deadline:
            running = [c for c in read_calls(record_path) if c["kind"] == "summary" and c["end"] is None]
            running = [c for c in running if c["pid"] in workers and c["start"] > phase.started]
            if running:
                killed = running[-1]
                os.kill(killed["pid"], signal.SIGKILL)
                event(
                    phase,
                    "worker killed",
                    pid=killed["pid"],
                    summary_calls_running=len(running),
                    session=killed["session"],
                    folding=killed["folded"],
                )
                return
            await asyncio.sleep(0.1)
        event(phase, "no summary call ran in a worker; nothing killed")

    return fault


def control_fault(control_path: Path, at: float, seconds: float, **values: Any) -> Callable[[Phase], Any]:
    async def fault(phase: Phase) -> None:
        await asyncio.sleep(at)
        write_control(control_path, **values)
        event(phase, "summary model changed", **values)
        if seconds > 0:
            await asyncio.sleep(seconds)
            write_control(control_path)
            event(phase, "summary model restored")

    return fault


def event_times(phase: Phase) -> dict[str, float]:
    """When each event of the phase happened, in wall-clock seconds."""
    return {e["event"]: phase.started + e["at"] for e in phase.events}


REJECT_SAVES_SQL = (
    "CREATE OR REPLACE FUNCTION load_reject_fold_saves() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
    "IF (TG_OP = 'INSERT' AND NEW.absorbed_count > 0) OR (TG_OP = 'UPDATE' AND NEW.absorbed_count IS DISTINCT FROM "
    "OLD.absorbed_count) THEN RAISE EXCEPTION 'load benchmark: the summary save is rejected'; END IF; RETURN NEW; "
    "END $$",
    "CREATE TRIGGER load_reject_fold_saves BEFORE INSERT OR UPDATE ON session_memory_state FOR EACH ROW "
    "EXECUTE FUNCTION load_reject_fold_saves()",
)
"""Rejects every save of a fold (it moves `absorbed_count`), and lets the back-off of a failed one through (it
keeps the summary as it was): a save that fails while the database is up."""
ACCEPT_SAVES_SQL = (
    "DROP TRIGGER load_reject_fold_saves ON session_memory_state",
    "DROP FUNCTION load_reject_fold_saves()",
)


def rejected_saves_fault(engine: sa.Engine, at: float, seconds: float) -> Callable[[Phase], Any]:
    def run(statements: tuple[str, ...]) -> None:
        with engine.begin() as connection:
            for statement in statements:
                connection.execute(sa.text(statement))

    async def fault(phase: Phase) -> None:
        await asyncio.sleep(at)
        try:
            await asyncio.to_thread(run, REJECT_SAVES_SQL)
            event(phase, "summary saves rejected")
            await asyncio.sleep(seconds)
        finally:
            # Also when the phase ends early: the next faults run on the same database.
            await asyncio.to_thread(run, ACCEPT_SAVES_SQL)
            event(phase, "summary saves accepted")

    return fault


def rejected_saves(phase: Phase, margin: float = 2.0) -> dict[str, int]:
    """The summarizing sessions' folds whose save the database rejected (the last call of a fold that ended while
    saves were rejected: no call folded on from it), and the summary calls of the same session that started within
    the first back-off after one, in any worker, not folding on from it: a retry the back-off should have held."""
    times = event_times(phase)
    start, end = times.get("summary saves rejected"), times.get("summary saves accepted")
    if start is None or end is None:
        return {"folds": 0, "retried_within_backoff": 0}
    sessions = {session_marker("summarizing", u) for u in range(phase.users)}
    calls = [c for c in phase.calls if c["kind"] == "summary" and c["session"] in sessions]
    base = FOLD_RETRY_BASE.total_seconds()
    folds = early = 0
    for last in calls:
        if last["failed"] or last["end"] is None or not start <= last["end"] <= end - margin:
            continue
        chain = last["previous"] + last["folded"]
        same = [c for c in calls if c["session"] == last["session"] and c["start"] > last["end"]]
        if any(c["previous"] == chain for c in same):
            continue  # the same fold's next batch: the save comes after it
        folds += 1
        early += sum(1 for c in same if c["start"] < last["end"] + base)
    return {"folds": folds, "retried_within_backoff": early}


def failures_during(phase: Phase, start_event: str, end_event: str, margin: float) -> dict[str, int]:
    """Failed turns per agent that ran into the window between two events (plus `margin` after), and outside it."""
    times = event_times(phase)
    start, end = times.get(start_event), times.get(end_event, times.get(start_event))
    counts = {f"{agent}_{where}": 0 for agent in AGENTS for where in ("inside", "outside")}
    for turn in phase.turns:
        if turn.ok:
            continue
        inside = start is not None and end is not None and turn.end >= start and turn.start <= end + margin
        counts[f"{turn.agent}_{'inside' if inside else 'outside'}"] += 1
    return counts


def folds_across(phase: Phase, summary_state: dict[str, list[str]], start_event: str, end_event: str) -> dict[str, int]:
    """Summarizing sessions with a saved fold before the fault, those of them with at least Fold Batch answered turns
    after it (twice Fold Batch new messages: a fold is due again), and how many of each saved a fold after it. A
    session that goes on with its summary folds on from it once it is chatting again."""
    times = event_times(phase)
    start, end = times.get(start_event), times.get(end_event, times.get(start_event))
    before, after = set(), set()
    for call in phase.calls:
        chain = call["previous"] + call["folded"]
        saved = call["kind"] == "summary" and call["end"] is not None and not call["failed"]
        if not saved or not chain or summary_state.get(call["session"], [])[: len(chain)] != chain:
            continue
        if start is not None and call["end"] < start:
            before.add(call["session"])
        elif end is not None and call["start"] > end:
            after.add(call["session"])
    answered_after: dict[str, int] = defaultdict(int)
    for turn in phase.turns:
        if turn.agent == "summarizing" and turn.ok and end is not None and turn.start > end:
            answered_after[turn.session] += 1
    chatting = {session for session in before if answered_after[session] >= DEFAULT_FOLD_BATCH}
    return {
        "before": len(before),
        "before_and_after": len(before & after),
        "chatting_after": len(chatting),
        "chatting_after_and_folded": len(chatting & after),
    }


# One phase end to end


def run_phase(
    server: LangflowServer,
    engine: sa.Engine,
    work_dir: Path,
    args: argparse.Namespace,
    *,
    name: str,
    backend: str,
    users: int,
    seconds: float,
    fault: Callable[[Path, Path], Callable[[Phase], Any] | None] = lambda record, control: None,
    control: dict[str, Any] | None = None,
    window: tuple[str, str] | None = None,
) -> dict[str, Any]:
    record_path = work_dir / f"{name}-calls.jsonl"
    control_path = work_dir / f"{name}-control.json"
    write_control(control_path, **(control or {}))
    token = server.superuser_token
    flow_ids = {}
    with server.client(token=token) as client:
        for agent in AGENTS:
            data = flow_data(agent, record_path, control_path, args, f"load-{name}-{agent}")
            created = client.post("/api/v1/flows/", json=data)
            created.raise_for_status()
            flow_ids[agent] = created.json()["id"]
    warm_up(server, flow_ids)
    phase = Phase(name, backend, users, seconds, args.think_seconds)
    print(f"{name}: {users} users per agent for {seconds:g} s", flush=True)
    with Sampler(server, engine, phase, flow_ids):
        asyncio.run(drive(server, server.superuser_api_key, phase, flow_ids, args, fault(record_path, control_path)))
        write_control(control_path)
        settled = settle(record_path, engine, flow_ids["summarizing"])
    phase.events.append(
        {"at": round(time.time() - phase.started, 2), "event": "folds settled", "waited_seconds": round(settled, 1)}
    )
    phase.calls = read_calls(record_path)
    with (work_dir / f"{name}-turns.jsonl").open("w", encoding="utf-8") as turns:
        turns.writelines(json.dumps(asdict(turn)) + "\n" for turn in phase.turns)
    read_memory_steps(engine, phase, flow_ids["summarizing"])
    summary_state = final_summaries(engine, flow_ids["summarizing"])
    summarizing_sessions = [f"load-{name}-{session_marker('summarizing', u)}" for u in range(users)]
    # Every session is audited, then a quarter of them (at least one) is deleted and must leave no state row.
    audit = audit_phase(
        engine,
        phase,
        flow_ids["summarizing"],
        lambda: delete_sessions(server, token, summarizing_sessions[: max(1, users // 4)]),
        args.n_messages,
        chatted=summarizing_sessions,
    )
    report = phase_report(phase, summary_state, audit)
    if window is not None:
        report["failed_turns_in_fault"] = failures_during(phase, *window, margin=FAULT_MARGIN_SECONDS)
        report["sessions_folding_across_fault"] = folds_across(phase, summary_state, *window)
    if name == "rejected_saves":
        report["rejected_saves"] = rejected_saves(phase)
    killed = next((e for e in phase.events if e["event"] == "worker killed"), None)
    if killed is not None:
        # The messages the killed worker was folding: a later fold of that session takes them, once (the audit).
        final = set(summary_state.get(killed["session"], []))
        report["killed_fold"] = {
            "session": killed["session"],
            "messages": len(killed["folding"]),
            "folded_since": sum(marker in final for marker in killed["folding"]),
        }
    print(phase_text(report), flush=True)
    return report


def warm_up(server: LangflowServer, flow_ids: dict[str, str]) -> None:
    """A few turns of each flow outside the measurement: the first build of a flow in a worker is slow."""
    for agent, flow_id in flow_ids.items():
        for n in range(WARM_UP_TURNS):
            body = {
                "input_value": f"#w{AGENTS.index(agent)}-u{n}# hello",
                "input_type": "chat",
                "output_type": "chat",
                "session_id": f"warm-up-{uuid.uuid4().hex[:8]}",
            }
            with server.client(api_key=server.superuser_api_key) as client:
                client.post(f"/api/v1/run/{flow_id}", json=body)


def phase_text(report: dict[str, Any]) -> str:
    lines = []
    for agent, m in report["agents"].items():
        lines.append(
            f"  {agent:12} turns {m['turns']:4d} ({m['turns_per_second']:.2f}/s)  p50/p95/p99 "
            f"{m['p50_seconds']}/{m['p95_seconds']}/{m['p99_seconds']} s  failed {m['failed_turns']}  waited "
            f"{m['turns_waited']}  inline {m['turns_folded_inline']}  queue p50/p95 "
            f"{m['fold_queue_wait_p50_seconds']}/{m['fold_queue_wait_p95_seconds']} s  calls/ex "
            f"{m['summary_calls_per_exchange']}  wasted {m['wasted_summary_calls']}"
        )
    lines.append(
        f"  RSS {report['rss_mb_after_warmup']} -> {report['rss_mb_end']} MB (growth {report['rss_growth']}), "
        f"DB connections max {report['db_connections_max']}; audit "
        f"{'holds' if report['audit']['holds'] else 'FAILS: ' + '; '.join(report['audit']['problems'][:5])}"
    )
    return "\n".join(lines)


# The benchmark


def load_runs(server: LangflowServer, engine: sa.Engine, work_dir: Path, args: argparse.Namespace, backend: str):
    return [
        run_phase(
            server,
            engine,
            work_dir,
            args,
            name=f"{backend}-n{users}",
            backend=backend,
            users=users,
            seconds=args.phase_seconds,
        )
        for users in args.users
    ]


def fault_runs(
    server: LangflowServer, engine: sa.Engine, work_dir: Path, args: argparse.Namespace, pg: OwnPostgres
) -> dict[str, dict[str, Any]]:
    results: dict[str, dict[str, Any]] = {}
    for name in args.faults:
        try:
            results[name] = {
                **fault_run(server, engine, work_dir, args, pg, name),
                "commit": commit(),
                "max_background_folds": args.fault_max_background_folds or DEFAULT_MAX_RUNNING,
            }
        except Exception as exc:  # noqa: BLE001 - one fault that cannot run is reported; the others still run
            print(f"{name}: did not complete: {type(exc).__name__}: {exc}", flush=True)
            results[name] = {"error": f"{type(exc).__name__}: {exc}"}
    return results


def fault_run(
    server: LangflowServer, engine: sa.Engine, work_dir: Path, args: argparse.Namespace, pg: OwnPostgres, name: str
) -> dict[str, Any]:
    at, outage = args.fault_at_seconds, args.summary_outage_seconds
    if name == "pg_restart":
        # Late enough that every session has folded before it, long enough after it for the next folds.
        restart_at = args.restart_at_seconds
        phase = {
            "seconds": restart_at + args.outage_seconds + args.restart_recovery_seconds,
            "fault": lambda r, c: pg_restart_fault(pg, restart_at, args.outage_seconds),
            "window": ("postgres stopped", "postgres started"),
        }
    elif name == "rejected_saves":
        phase = {
            "seconds": at + outage + args.recovery_seconds,
            "fault": lambda r, c: rejected_saves_fault(engine, at, outage),
            "window": ("summary saves rejected", "summary saves accepted"),
        }
    elif name == "worker_kill":
        phase = {
            "seconds": args.fault_seconds,
            "fault": lambda r, c: worker_kill_fault(server, r, at),
            "window": ("worker killed", "worker killed"),
        }
    elif name == "summary_outage":
        phase = {
            "seconds": at + outage + args.recovery_seconds,
            "fault": lambda r, c: control_fault(c, at, outage, fail_summary=True),
            "window": ("summary model changed", "summary model restored"),
        }
    else:
        phase = {"seconds": args.fault_seconds, "control": {"summary_seconds": args.slow_summary_seconds}}
    return run_phase(server, engine, work_dir, args, name=name, backend="postgres", users=args.fault_users, **phase)


def saturation(runs: list[dict[str, Any]]) -> int | None:
    """The first N at which the stock Agent's turns per second fell below `SATURATION_SHARE` of N times its rate per
    user at the smallest N: the server no longer keeps up with its users."""
    if not runs:
        return None
    first = runs[0]
    per_user = first["agents"]["stock"]["turns_per_second"] / first["users_per_agent"]
    for run in runs[1:]:
        if run["agents"]["stock"]["turns_per_second"] < SATURATION_SHARE * per_user * run["users_per_agent"]:
            return run["users_per_agent"]
    return None


def targets(backend: str, runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    saturated = saturation(runs)
    measured = [r for r in runs if saturated is None or r["users_per_agent"] <= saturated]
    rows = []
    for run in measured:
        n, stock, ours = run["users_per_agent"], run["agents"]["stock"], run["agents"]["summarizing"]
        limit = P95_RATIO_TARGET * (stock["p95_seconds"] or 0)
        p95: Any = ours["p95_seconds"]
        if (interval := run.get("p95_ratio_interval")) and stock["p95_seconds"] and p95 is not None:
            p95 = (
                f"{p95} s ({p95 / stock['p95_seconds']:.2f} x stock; 95% bootstrap interval of this phase's turns "
                f"{interval[0]:.2f}-{interval[1]:.2f} x)"
            )
        rows += [
            _target(
                backend,
                n,
                "p95 turn time, Summarizing",
                p95,
                f"<= {P95_RATIO_TARGET:g} x stock {stock['p95_seconds']} s = {limit:.3f} s",
                ours["p95_seconds"] is not None and ours["p95_seconds"] <= limit,
            ),
            _target(
                backend, n, "turns that waited for a summary call", ours["turns_waited"], "0", ours["turns_waited"] == 0
            ),
            _target(
                backend,
                n,
                "failed turns, both agents",
                stock["failed_turns"] + ours["failed_turns"],
                "0",
                stock["failed_turns"] + ours["failed_turns"] == 0,
            ),
            _target(
                backend,
                n,
                "lost or doubled folds (audit problems)",
                len(run["audit"]["problems"]),
                "0",
                run["audit"]["holds"],
            ),
            _target(
                backend,
                n,
                "RSS growth after warm-up",
                run["rss_growth"],
                f"< {RSS_GROWTH_TARGET:.0%}",
                run["rss_growth"] is not None and run["rss_growth"] < RSS_GROWTH_TARGET,
            ),
        ]
    return rows


def fault_targets(report: dict[str, Any]) -> list[dict[str, Any]]:
    """Each fault's PASS/FAIL rows: what the issue's faults promise, from the fault runs' reports."""
    rows = []
    for name, run in report["faults"].items():
        # A fault kept from an earlier run is scored with the users and places it ran with.
        users = run.get("users_per_agent", report["fault_users"])
        places = 2 * (run.get("max_background_folds") or report["fault_max_background_folds"])
        if "error" in run:
            rows.append(_target("postgres", users, f"{name}: the fault ran", run["error"], "completes", False))
            continue
        ours, stock = run["agents"]["summarizing"], run["agents"]["stock"]
        # Only the database outage and the killed worker fail turns; the summary faults leave every turn running.
        window = run.get("failed_turns_in_fault") if name in ("pg_restart", "worker_kill") else None
        outside = window["stock_outside"] + window["summarizing_outside"] if window else None
        failed = stock["failed_turns"] + ours["failed_turns"] if outside is None else outside
        where = "failed turns, both agents" if outside is None else "failed turns outside the fault, both agents"
        rows += [
            _target("postgres", users, f"{name}: {where}", failed, "0", failed == 0),
            _target(
                "postgres",
                users,
                f"{name}: turns that waited for a summary call",
                ours["turns_waited"],
                "0",
                ours["turns_waited"] == 0,
            ),
            _target(
                "postgres",
                users,
                f"{name}: lost or doubled folds (audit problems)",
                len(run["audit"]["problems"]),
                "0",
                run["audit"]["holds"],
            ),
        ]
        if name == "summary_outage":
            rows.append(
                _target(
                    "postgres",
                    users,
                    f"{name}: summary calls within the back-off after a failed one, any worker",
                    ours["retried_within_backoff"],
                    "0",
                    ours["retried_within_backoff"] == 0,
                )
            )
        if name in ("summary_outage", "rejected_saves"):
            most = report.get("max_folds_per_turn", DEFAULT_MAX_FOLDS_PER_TURN)
            rows += [
                _target(
                    "postgres",
                    users,
                    f"{name}: most folds in one catch-up, the catch-up included",
                    ours["most_calls_in_one_fold"],
                    f"<= Max Folds per Turn ({most})",
                    ours["most_calls_in_one_fold"] <= most,
                ),
            ]
        if name == "rejected_saves" and (rejected := run.get("rejected_saves")):
            rows.append(
                _target(
                    "postgres",
                    users,
                    f"{name}: summary calls within the back-off after a rejected save, any worker",
                    f"{rejected['retried_within_backoff']} after {rejected['folds']} rejected saves",
                    "0, after at least 1",
                    rejected["folds"] >= 1 and rejected["retried_within_backoff"] == 0,
                )
            )
        if name == "slow_summary":
            # One fold per session at a time: a fold waits at most for the sessions ahead of it, a call each.
            slow = report.get("slow_summary_seconds", 30.0)
            bound = -(-users // places) * slow
            wait = ours["fold_queue_wait_max_seconds"]
            settled = next((e["waited_seconds"] for e in run["events"] if e["event"] == "folds settled"), None)
            rows += [
                _target(
                    "postgres",
                    users,
                    f"{name}: fold queue wait, max",
                    wait,
                    f"<= {users} sessions over {places} places x {slow:g} s = {bound:g} s",
                    wait is not None and wait <= bound,
                ),
                _target(
                    "postgres",
                    users,
                    f"{name}: seconds until the folds settled after the last turn",
                    settled,
                    f"< {SETTLE_TIMEOUT_SECONDS:g} s",
                    settled is not None and settled < SETTLE_TIMEOUT_SECONDS,
                ),
            ]
        # A fault the sessions must outlast with their summaries; the outage's catch-up is its row above.
        if name == "worker_kill" and (across := run.get("sessions_folding_across_fault")):
            rows.append(
                _target(
                    "postgres",
                    users,
                    f"{name}: sessions that folded before the fault and fold on after it",
                    f"{across['before_and_after']} of {across['before']}",
                    "all, at least 1",
                    across["before"] >= 1 and across["before_and_after"] == across["before"],
                )
            )
        if name == "worker_kill" and (killed := run.get("killed_fold")):
            rows.append(
                _target(
                    "postgres",
                    users,
                    f"{name}: messages of the killed fold folded by a later fold",
                    f"{killed['folded_since']} of {killed['messages']}",
                    "all, at least 1",
                    killed["messages"] >= 1 and killed["folded_since"] == killed["messages"],
                )
            )
        if name == "pg_restart" and (across := run.get("sessions_folding_across_fault")):
            chatting = across.get("chatting_after", across["before"])
            folded = across.get("chatting_after_and_folded", across["before_and_after"])
            rows.append(
                _target(
                    "postgres",
                    users,
                    f"{name}: sessions that folded before the fault and, chatting again after it "
                    f"({DEFAULT_FOLD_BATCH}+ answered turns), folded on",
                    f"{folded} of {chatting}; {across['before_and_after']} of all {across['before']} folded before",
                    "all, at least 1",
                    chatting >= 1 and folded == chatting,
                )
            )
    return rows


def _target(backend: str, n: int, name: str, measured: Any, limit: str, holds: bool) -> dict[str, Any]:
    return {"backend": backend, "users": n, "name": name, "measured": measured, "limit": limit, "holds": bool(holds)}


def plot(report: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(8, 4.5))
    for backend, runs in report["runs"].items():
        for agent, style in (("stock", "--"), ("summarizing", "-")):
            xs = [r["users_per_agent"] for r in runs]
            ys = [r["agents"][agent]["p95_seconds"] for r in runs]
            axis.plot(xs, ys, style, marker="o", label=f"{agent}, {backend}")
    axis.set_xlabel("concurrent users per agent (N)")
    axis.set_ylabel("p95 turn time (s)")
    axis.set_title(
        f"p95 turn time against N: agent calls {report['agent_seconds']:g} s, summary calls "
        f"{report['summary_seconds']:g} s"
    )
    axis.legend()
    axis.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    def numbers(text: str) -> list[int]:
        return [int(x) for x in text.split(",") if x.strip()]

    def names(choices: tuple[str, ...]) -> Callable[[str], list[str]]:
        def parse(text: str) -> list[str]:
            if text == "all":
                return list(choices)
            chosen = [] if text == "none" else [x.strip() for x in text.split(",") if x.strip()]
            unknown = set(chosen) - set(choices)
            if unknown:
                msg = f"unknown: {', '.join(sorted(unknown))}; choose from {', '.join(choices)}, all or none"
                raise argparse.ArgumentTypeError(msg)
            return chosen

        return parse

    parser = argparse.ArgumentParser(prog="python -m benchmarks.load", description=__doc__.split("\n")[0])
    parser.add_argument("--backends", type=names(BACKENDS), default=list(BACKENDS))
    parser.add_argument("--users", type=numbers, default=[1, 2, 4, 6, 8, 10], help="N, concurrent users per agent")
    parser.add_argument("--phase-seconds", type=float, default=120.0, help="length of each load phase")
    parser.add_argument("--think-seconds", type=float, default=2.0, help="mean pause between a reply and the next")
    parser.add_argument("--max-turns-per-user", type=int, default=60)
    parser.add_argument(
        "--n-messages", type=int, default=N_MESSAGES, help="Number of Chat History Messages, both agents"
    )
    parser.add_argument("--message-words", type=int, default=150, help="words of each message, user and model")
    parser.add_argument("--agent-seconds", type=float, default=0.3)
    parser.add_argument("--summary-seconds", type=float, default=2.0)
    parser.add_argument(
        "--max-background-folds",
        type=int,
        default=0,
        help=f"{MAX_RUNNING_ENV} for the server (0: its default, {DEFAULT_MAX_RUNNING})",
    )
    parser.add_argument("--faults", type=names(FAULTS), default=list(FAULTS))
    parser.add_argument("--fault-users", type=int, default=3)
    parser.add_argument(
        "--fault-max-background-folds",
        type=int,
        default=1,
        help=f"{MAX_RUNNING_ENV} for the server of the faults (0: its default, {DEFAULT_MAX_RUNNING})",
    )
    parser.add_argument("--fault-seconds", type=float, default=70.0)
    parser.add_argument("--fault-at-seconds", type=float, default=30.0)
    parser.add_argument("--outage-seconds", type=float, default=5.0, help="PostgreSQL down this long")
    parser.add_argument("--restart-at-seconds", type=float, default=60.0, help="PostgreSQL stopped this far in")
    parser.add_argument(
        "--restart-recovery-seconds",
        type=float,
        default=150.0,
        help="the phase goes on this long after PostgreSQL is back (turns in flight at the restart hang up to the "
        "client's 90 s timeout, for both agents)",
    )
    parser.add_argument("--summary-outage-seconds", type=float, default=60.0)
    parser.add_argument("--recovery-seconds", type=float, default=50.0)
    parser.add_argument("--slow-summary-seconds", type=float, default=30.0)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    parser.add_argument(
        "--keep-records",
        type=Path,
        default=None,
        help="copy each phase's model calls and turns (*-calls.jsonl, *-turns.jsonl) and the servers' logs here",
    )
    parser.add_argument(
        "--rescore",
        type=Path,
        default=None,
        help="recompute the saturation point and the targets of a saved load.json from its runs, and exit",
    )
    return parser.parse_args(argv)


def rescore(path: Path) -> int:
    """The saturation points and targets of saved results, from their runs, with this version's rules."""
    report = json.loads(path.read_text())
    rescored = {"command": f"python -m benchmarks.load --rescore {path}", "commit": commit()}
    report["targets"] = []
    for backend, runs in report["runs"].items():
        report.setdefault("runs_measured", {}).setdefault(
            backend, {"command": report["command"], "commit": report["commit"]}
        )["rescored"] = rescored
        report[f"stock_saturates_at_{backend}"] = saturation(runs)
        report["targets"] += targets(backend, runs)
    if report.get("faults"):
        report["faults_rescored"] = rescored
    report["fault_targets"] = fault_targets(report) if report.get("faults") else []
    path.write_text(json.dumps(report, indent=1) + "\n")
    print(report_text(report))
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.rescore is not None:
        return rescore(args.rescore)
    report: dict[str, Any] = {
        "command": shlex.join(["python", "-m", "benchmarks.load", *(sys.argv[1:] if argv is None else argv)]),
        "commit": commit(),
        "cpus": os.cpu_count(),
        "agent_seconds": args.agent_seconds,
        "summary_seconds": args.summary_seconds,
        "think_seconds": args.think_seconds,
        "phase_seconds": args.phase_seconds,
        "message_words": args.message_words,
        "n_messages": args.n_messages,
        "max_background_folds": args.max_background_folds or DEFAULT_MAX_RUNNING,
        "max_folds_per_turn": DEFAULT_MAX_FOLDS_PER_TURN,
        "fault_users": args.fault_users,
        "fault_max_background_folds": args.fault_max_background_folds or DEFAULT_MAX_RUNNING,
        "slow_summary_seconds": args.slow_summary_seconds,
        "fault_server_logs": FAULT_SERVER_LOGS,
        "runs": {},
        "faults": {},
        "targets": [],
    }
    with tempfile.TemporaryDirectory(prefix="summarizing-agent-load-") as temporary:
        work_dir = Path(temporary)
        os.chmod(work_dir, 0o777)
        for backend in args.backends:
            pg_context = own_postgres() if backend == "postgres" else _no_postgres()
            with pg_context as pg:
                if args.users:
                    with (
                        langflow_server(
                            backend,
                            work_dir / backend,
                            pg,
                            max_background_folds=args.max_background_folds,
                        ) as server,
                        database_engine(server) as engine,
                    ):
                        runs = load_runs(server, engine, work_dir / backend, args, backend)
                    report["runs"][backend] = runs
                    report["targets"] += targets(backend, runs)
                    report[f"stock_saturates_at_{backend}"] = saturation(runs)
                if backend == "postgres" and args.faults:
                    # A server of its own, with fewer places for folds after the reply: with the few sessions this
                    # machine serves, more sessions fold at once than there are places, as with many more sessions
                    # and the default.
                    with (
                        langflow_server(
                            backend,
                            work_dir / "faults",
                            pg,
                            max_background_folds=args.fault_max_background_folds,
                            migrated=bool(args.users),
                            logs=FAULT_SERVER_LOGS,
                        ) as server,
                        database_engine(server) as engine,
                    ):
                        report["faults"] = fault_runs(server, engine, work_dir / "faults", args, pg)
        if args.keep_records is not None:
            keep_records(work_dir, args.keep_records)
    report = with_earlier_parts(report, args)
    report["fault_targets"] = fault_targets(report) if report["faults"] else []
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "load.json").write_text(json.dumps(report, indent=1) + "\n")
    if report["runs"]:
        plot(report, args.out / "load.png")
    print(report_text(report))
    print(f"\nWrote {args.out / 'load.json'} and {args.out / 'load.png'}")
    audits = [r["audit"] for runs in report["runs"].values() for r in runs] + [
        f["audit"] for f in report["faults"].values() if "audit" in f
    ]
    broken = [a for a in audits if not a["holds"]]
    if broken:
        print(f"AUDIT FAILED in {len(broken)} run(s): " + " | ".join("; ".join(a["problems"][:3]) for a in broken))
        return 1
    return 0


def keep_records(work_dir: Path, to: Path) -> None:
    """The model calls and the turns of every phase and the servers' logs, kept to read a run again."""
    for path in [*work_dir.rglob("*-calls.jsonl"), *work_dir.rglob("*-turns.jsonl"), *work_dir.rglob("*.log")]:
        target = to / path.relative_to(work_dir)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
    print(f"Kept the model calls and server logs in {to}", flush=True)


FAULT_KEYS = (
    "faults_command",
    "faults_commit",
    "fault_users",
    "fault_max_background_folds",
    "slow_summary_seconds",
    "fault_server_logs",
    "faults",
)


def with_earlier_parts(report: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """The parts of the saved results file this run did not measure stay, each with the command and commit it was
    measured at: the load phases of a backend not run (`--backends`, `--users ""`) and the faults not run
    (`--faults`, or a run without PostgreSQL)."""
    measured = {"command": report["command"], "commit": report["commit"]}
    report = {
        **report,
        "runs_measured": {
            backend: {**measured, "max_background_folds": report["max_background_folds"]} for backend in report["runs"]
        },
    }
    if report["faults"]:
        report.update(faults_command=report["command"], faults_commit=report["commit"])
    path = args.out / "load.json"
    if not path.exists():
        return report
    earlier = json.loads(path.read_text())
    earlier_measured = earlier.get("runs_measured") or {
        backend: {
            "command": earlier["command"],
            "commit": earlier["commit"],
            "max_background_folds": earlier.get("max_background_folds"),
            **({"rescored": earlier["rescored"]} if "rescored" in earlier else {}),
        }
        for backend in earlier.get("runs", {})
    }
    merged = {key: value for key, value in report.items() if key != "rescored"}
    kept = [b for b in earlier.get("runs", {}) if b not in report["runs"]]
    if kept:
        runs = {**report["runs"], **{b: earlier["runs"][b] for b in kept}}
        merged["runs"] = {b: runs[b] for b in BACKENDS if b in runs}
        merged["runs_measured"] = {b: report["runs_measured"].get(b) or earlier_measured[b] for b in merged["runs"]}
        every = [*(t for t in earlier.get("targets", []) if t["backend"] in kept), *report["targets"]]
        merged["targets"] = [t for b in merged["runs"] for t in every if t["backend"] == b]
        for backend in kept:
            merged[f"stock_saturates_at_{backend}"] = earlier.get(f"stock_saturates_at_{backend}")
    earlier.setdefault("faults_command", earlier.get("command"))
    earlier.setdefault("faults_commit", earlier.get("commit"))
    if not report["faults"]:
        merged.update({key: earlier[key] for key in FAULT_KEYS if key in earlier})
    else:
        # Some faults re-run: the others keep their saved results, each with the commit and places it ran with.
        for name, fault in earlier.get("faults", {}).items():
            merged["faults"].setdefault(
                name,
                {
                    "commit": earlier["faults_commit"],
                    "max_background_folds": earlier.get("fault_max_background_folds"),
                    **fault,
                },
            )
    return merged


@contextmanager
def database_engine(server: LangflowServer) -> Iterator[sa.Engine]:
    engine = sa.create_engine(server.database_url, poolclass=sa.pool.NullPool)
    try:
        yield engine
    finally:
        engine.dispose()


@contextmanager
def _no_postgres() -> Iterator[None]:
    yield None


def report_text(report: dict[str, Any]) -> str:
    lines = ["", "Targets:"]
    for t in [*report["targets"], *report.get("fault_targets", [])]:
        lines.append(
            f"{'PASS' if t['holds'] else 'FAIL'}  {t['backend']} N={t['users']} {t['name']}: "
            f"{t['measured']} (target {t['limit']})"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
