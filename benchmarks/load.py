"""Benchmark: many sessions at once on a real `langflow run`, the stock Agent beside the Summarizing Agent, and faults.

    python -m benchmarks.load [--backends sqlite,postgres] [--users 1,2,4] [--faults all|none|NAME,...]

N users per agent (httpx) chat through the run API with both flows on one server: SQLite with one worker, PostgreSQL
(a server of its own) with two; the offline model (`benchmarks.load_model`) runs inside it. Every session of a
phase is audited (`tests.support.load_audit`; a failed audit exits 1). The faults run on PostgreSQL. Metrics and
faults: docs/benchmarks.md, "Under load and faults". Writes `load.json` and `load.png` to `--out`, keeping the parts of
a saved `load.json` it did not run. Every loop is bounded in count and time; only 127.0.0.1 is used.
"""

from __future__ import annotations

import argparse
import asyncio
import glob
import json
import os
import random
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager, nullcontext, suppress
from dataclasses import asdict, dataclass, field
from itertools import cycle, islice
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import psutil
import psycopg
import sqlalchemy as sa

from benchmarks.revision import commit
from langflow_summarizing_agent.engine.report import BUSY_NOTE
from langflow_summarizing_agent.engine.settings import DEFAULT_FOLD_BATCH, DEFAULT_MAX_FOLDS_PER_TURN
from langflow_summarizing_agent.wiring.timing import DEFAULT_MAX_RUNNING, MAX_RUNNING_ENV
from tests.support import load_audit
from tests.support.load_audit import chain, on_final, read_calls, saved
from tests.support.server_fixtures import LangflowServer, langflow_executable, running_langflow_server
from tests.support.server_fixtures import server_environment as environment

P95_RATIO_TARGET, RSS_GROWTH = 1.10, 0.10
SATURATION_SHARE = 0.8  # the stock Agent saturates where its turns per second fall below this share of linear
REQUEST_TIMEOUT_SECONDS, STARTUP_TIMEOUT_SECONDS = 90.0, 400.0  # two workers on a busy machine boot in minutes
POLL_SECONDS = 0.25  # the state rows; the RSS and database connections every fourth poll
SETTLE_QUIET_SECONDS, SETTLE_TIMEOUT_SECONDS, KILL_WAIT_SECONDS = 3.0, 120.0, 40.0
WARM_UP_TURNS = 4  # of each flow before a phase, so that both workers have built it
FAULT_MARGIN_SECONDS = 5.0  # a failed turn that ended this long after a fault is still the fault's
# Langflow's JSON logs, as in production: its console renders each exception's traceback with rich (~0.75 s of a
# worker's event loop); a database restart logs dozens, and both agents' turns waited 20 to 90 s.
FAULT_SERVER_LOGS = {"LANGFLOW_LOG_ENV": "container"}
FAULTS = ("slow_summary", "summary_outage", "rejected_saves", "worker_kill", "pg_restart")  # the restart last
AGENTS, BACKENDS, PG_USER = ("stock", "summarizing"), ("sqlite", "postgres"), "postgres"
WINDOWS = {  # the events that open and close each fault but `slow_summary` (which lasts the whole phase)
    "pg_restart": ("postgres stopped", "postgres started"),
    "worker_kill": ("worker killed", "worker killed"),
    "summary_outage": ("summary model changed", "summary model restored"),
    "rejected_saves": ("summary saves rejected", "summary saves accepted"),
}
FOLDED_INLINE = " this turn ("  # in the memory step of a turn that folded inline (`engine.report.memory_step_text`)
TEXT = (
    "the deployment still shows the same error after the restart and the logs mention a timeout while the worker "
    "connects to the queue so I checked the settings again and they match the documentation"
)
CHAT = {"input_type": "chat", "output_type": "chat"}
SHOWN = ("turns", "turns_per_second", "p95_seconds", "failed_turns", "turns_waited", "summary_calls_per_exchange")
VERSIONS_SQL = "SELECT session_id, version, absorbed_count FROM session_memory_state WHERE flow_id = :flow_id"
CONNECTIONS_SQL = "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
REPLIES_SQL = "SELECT text, content_blocks FROM message WHERE flow_id = :flow_id AND sender <> 'User'"
REJECT_SAVES_SQL = (  # every save of a fold (it moves `absorbed_count`); the back-off of a failed one goes through
    "CREATE OR REPLACE FUNCTION load_reject_fold_saves() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
    "IF (TG_OP = 'INSERT' AND NEW.absorbed_count > 0) OR (TG_OP = 'UPDATE' AND NEW.absorbed_count IS DISTINCT FROM "
    "OLD.absorbed_count) THEN RAISE EXCEPTION 'load benchmark: the summary save is rejected'; END IF; RETURN NEW; "
    "END $$",
    "CREATE TRIGGER load_reject_fold_saves BEFORE INSERT OR UPDATE ON session_memory_state FOR EACH ROW "
    "EXECUTE FUNCTION load_reject_fold_saves()",
)
RESTART_TARGET = (
    f"sessions that folded before the fault and, chatting again after it ({DEFAULT_FOLD_BATCH}+ answered turns), "
    "folded on"
)
ACCEPT_SAVES_SQL = ("DROP FUNCTION load_reject_fold_saves() CASCADE",)  # the trigger with it


@dataclass
class Turn:
    agent: str
    session: str
    index: int
    start: float
    end: float
    ok: bool
    error: str = ""
    inline: bool = False
    busy: bool = False  # the memory step says a fold of the session was running or waiting: this turn started none


@dataclass
class Phase:
    """One phase: what to run (`run_phase` takes it whole) and what it measured."""

    name: str
    backend: str
    users: int
    seconds: float
    work_dir: Path
    fault: Callable[[Phase], Awaitable[Any]] | None = None
    control: dict[str, Any] = field(default_factory=dict)
    turns: list[Turn] = field(default_factory=list)
    calls: list[dict[str, Any]] = field(default_factory=list)
    rss: list[float] = field(default_factory=list)
    connections: list[int] = field(default_factory=list)
    versions: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    started: float = 0.0
    ended: float = 0.0

    def path(self, suffix: str) -> Path:
        return self.work_dir / f"{self.name}-{suffix}"

    def sessions(self, agent: str) -> list[str]:
        return [f"s{AGENTS.index(agent)}{user:03d}" for user in range(self.users)]

    def event(self, what: str, **details: Any) -> None:
        self.events.append({"at": round(time.time() - self.started, 2), "event": what, **details})
        print(f"  +{time.time() - self.started:6.1f} s  {what} {details or ''}", flush=True)


def flow_data(agent: str, phase: Phase, args: Any) -> Any:
    from lfx.components.input_output import ChatInput, ChatOutput
    from lfx.components.models_and_agents.agent import AgentComponent
    from lfx.graph import Graph

    from benchmarks.load_model import LoadModelComponent
    from langflow_summarizing_agent.components.summarizing_agent import summarizing_agent as ours

    chat_input, chat_output = ChatInput(_id="chat_input"), ChatOutput(_id="chat_output")
    model = LoadModelComponent(_id="load_model")
    model.set(agent_seconds=args.agent_seconds, summary_seconds=args.summary_seconds, reply_words=args.message_words)
    model.set(control_path=str(phase.path("control.json")), record_path=str(phase.path("calls.jsonl")))
    node = AgentComponent(_id="agent") if agent == "stock" else ours.SummarizingAgentComponent(_id="agent")
    quiet = {"add_current_date_tool": False, "add_calculator_tool": False, "system_prompt": "You are a support agent."}
    quiet |= {"summarize_older_messages": True} if agent == "summarizing" else {}
    node.set(model=model.build_model, input_value=chat_input.message_response, n_messages=args.n_messages, **quiet)
    chat_output.set(input_value=node.message_response)
    flow = Graph(chat_input, chat_output).dump(name=f"load-{phase.name}-{agent}")
    for name in ours.SUMMARY_FIELDS if agent == "summarizing" else ():
        next(n for n in flow["data"]["nodes"] if n["id"] == "agent")["data"]["node"]["template"][name]["show"] = True
    return flow


class OwnPostgres:
    """A PostgreSQL server of this process's own, which the fault `pg_restart` stops and starts: `initdb` into a
    temporary directory, 127.0.0.1 on a free port, trust authentication. `initdb` refuses to run as root: as root the
    commands run as `postgres`."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="summarizing-agent-load-pg-"))
        if os.geteuid() == 0:
            shutil.chown(self.root, user=PG_USER, group=PG_USER)
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.bin = Path(
            [shutil.which("pg_ctl") or "pg_ctl", *sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))][-1]
        )

    def database_url(self, name: str) -> str:
        """The SQLAlchemy URL of database `name`, created when missing."""
        with psycopg.connect(f"postgresql://{PG_USER}@127.0.0.1:{self.port}/postgres", autocommit=True) as admin:
            if admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone() is None:
                admin.execute(f'CREATE DATABASE "{name}"')
        return f"postgresql+psycopg://{PG_USER}@127.0.0.1:{self.port}/{name}"

    def run(self, command: str, *options: str) -> None:
        as_user = ["runuser", "-u", PG_USER, "--"] if os.geteuid() == 0 else []
        command_line = [*as_user, str(self.bin.parent / command), "-D", str(self.root / "data"), *options]
        subprocess.run(command_line, check=True, capture_output=True, timeout=60)

    def start(self) -> None:
        """Start it and wait until it accepts connections (`pg_ctl -w`)."""
        settings = f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.root} -c max_connections=200 -c fsync=off"
        self.run("pg_ctl", "start", "-w", "-l", str(self.root / "postgres.log"), "-o", settings)

    def stop(self, mode: str = "fast") -> None:
        self.run("pg_ctl", "stop", "-w", "-m", mode)


@contextmanager
def own_postgres() -> Iterator[OwnPostgres]:
    """Create, start and yield a PostgreSQL server of this process's own; stop and remove it after."""
    server = OwnPostgres()
    try:
        server.run("initdb", "-U", PG_USER, "--auth=trust", "-E", "UTF8", "--no-sync")
        server.start()
        yield server
    finally:
        with suppress(subprocess.CalledProcessError):
            server.stop("immediate")
        shutil.rmtree(server.root, ignore_errors=True)


@contextmanager
def langflow_server(
    work_dir: Path, pg: OwnPostgres | None, places: int, logs: dict[str, str] | None = None
) -> Iterator[tuple[LangflowServer, sa.Engine]]:
    """`langflow run` on SQLite with one worker, or on PostgreSQL with two, and an engine on its database."""
    (work_dir / "langflow-config").mkdir(parents=True, exist_ok=True)
    url = pg.database_url("langflow_load") if pg else f"sqlite:///{work_dir / 'langflow.db'}"
    settings = {"LANGFLOW_WORKER_TIMEOUT": "300", **(logs or {}), **({MAX_RUNNING_ENV: str(places)} if places else {})}
    if pg:  # migrated before the workers start: two workers migrating a fresh database at once took minutes
        with (work_dir / "langflow-migration.log").open("wb") as log:
            env = {**environment(work_dir / "langflow-config", url), **settings}
            subprocess.run([langflow_executable(), "migration"], env=env, stdout=log, stderr=log, check=True)
    workers, timeout = 2 if pg else 1, STARTUP_TIMEOUT_SECONDS
    with running_langflow_server(work_dir, url, workers=workers, startup_timeout=timeout, settings=settings) as server:
        yield server, sa.create_engine(url, poolclass=sa.pool.NullPool)


def server_processes(server: LangflowServer) -> list[psutil.Process]:
    with suppress(psutil.Error):
        root = psutil.Process(server.pid)
        return [root, *root.children(recursive=True)]
    return []


class Sampler(threading.Thread):
    """Polls every state row's version, and the server's RSS and the database connections in use."""

    def __init__(self, server: LangflowServer, engine: sa.Engine, phase: Phase, flow_id: str) -> None:
        super().__init__(daemon=True)
        self.server, self.engine, self.phase, self.flow = server, engine, phase, load_audit.flow_key(engine, flow_id)
        self.sqlite = server.database_url.removeprefix("sqlite:///") if engine.dialect.name == "sqlite" else ""
        self.stop, self.changed = threading.Event(), time.monotonic()

    def run(self) -> None:
        for tick in range(1, 10**9):
            if self.stop.wait(POLL_SECONDS):
                return
            with suppress(sa.exc.SQLAlchemyError), self.engine.connect() as connection:
                for session_id, *version in connection.execute(sa.text(VERSIONS_SQL), {"flow_id": self.flow}):
                    seen = self.phase.versions.setdefault(session_id, [])
                    if not seen or seen[-1] != tuple(version):
                        seen.append(tuple(version))
                        self.changed = time.monotonic()
                if tick % 4 == 0 and not self.sqlite:
                    self.phase.connections.append(connection.execute(sa.text(CONNECTIONS_SQL)).scalar_one())
            rss = handles = 0
            for process in server_processes(self.server) if tick % 4 == 0 else ():
                with suppress(psutil.Error):
                    rss += process.memory_info().rss
                    handles += sum(f.path == self.sqlite for f in process.open_files()) if self.sqlite else 0
            self.phase.rss += [rss / 2**20] if rss else []
            self.phase.connections += [handles] if rss and self.sqlite else []

    def settle(self) -> float:
        """Wait until no summary call runs and no state row changed for a while; the seconds waited (bounded)."""
        started = self.changed = time.monotonic()
        while time.monotonic() < min(started + SETTLE_TIMEOUT_SECONDS, self.changed + SETTLE_QUIET_SECONDS):
            # A call of a worker that was killed never ends: it is not running.
            calls = read_calls(self.phase.path("calls.jsonl"))[-500:]
            if any(c["end"] is None and c["kind"] == "summary" and psutil.pid_exists(c["pid"]) for c in calls):
                self.changed = time.monotonic()
            time.sleep(0.5)
        return time.monotonic() - started


async def user_loop(client: httpx.AsyncClient, phase: Phase, agent: str, flow_id: str, user: int, args: Any) -> None:
    marker, deadline = phase.sessions(agent)[user], phase.started + phase.seconds
    # User n of each agent draws the same think times (common random numbers): both agents' turns meet the server's
    # pauses alike. Users start spread over one think time.
    rng = random.Random(f"{phase.name}-u{user}")
    await asyncio.sleep(rng.uniform(0, args.think_seconds))
    for index in range(args.max_turns_per_user):
        if (started := time.time()) >= deadline:
            return
        text = " ".join([f"#{marker}-u{index}#", *islice(cycle(TEXT.split()), index, index + args.message_words - 1)])
        try:
            body = {"input_value": text, "session_id": f"load-{phase.name}-{marker}", **CHAT}
            response = await client.post(f"/api/v1/run/{flow_id}", json=body)
            ok = response.status_code == 200 and f"#{marker}-a{index}#" in response.text
            error = "" if ok else f"HTTP {response.status_code}: {response.text[:200]}"
        except httpx.HTTPError as exc:
            ok, error = False, f"{type(exc).__name__}: {exc}"
        phase.turns.append(Turn(agent, marker, index, started, time.time(), ok, error))
        await asyncio.sleep(max(0.0, min(deadline - time.time(), rng.uniform(0.5, 1.5) * args.think_seconds)))


async def drive(server: LangflowServer, phase: Phase, flow_ids: dict[str, str], args: Any) -> None:
    limits = httpx.Limits(max_connections=4 * phase.users + 8, max_keepalive_connections=0)
    phase.started, headers = time.time(), {"x-api-key": server.superuser_api_key}
    async with httpx.AsyncClient(
        base_url=server.base_url, headers=headers, timeout=REQUEST_TIMEOUT_SECONDS, limits=limits
    ) as client:
        users = [user_loop(client, phase, a, flow_ids[a], user, args) for a in AGENTS for user in range(phase.users)]
        faults = [phase.fault(phase)] if phase.fault else []
        await asyncio.wait_for(asyncio.gather(*users, *faults), timeout=phase.seconds + 2 * REQUEST_TIMEOUT_SECONDS)
    phase.ended = time.time()


def quantile(values: list[float], share: float) -> float | None:
    return round(float(np.percentile(values, 100 * share, method="nearest")), 3) if values else None


def p95_ratio_interval(stock: list[float], ours: list[float]) -> list[float] | None:
    """The 95% percentile-bootstrap interval of the Summarizing Agent's p95 turn time over the stock Agent's."""
    from scipy.stats import bootstrap

    def ratio(o: np.ndarray, s: np.ndarray, axis: int) -> np.ndarray:
        p95 = [np.percentile(x, 95, axis=axis, method="nearest") for x in (o, s)]
        return p95[0] / np.maximum(p95[1], 1e-9)

    if min(len(stock), len(ours)) < 2:
        return None
    found = bootstrap((ours, stock), ratio, n_resamples=2000, method="percentile", rng=np.random.default_rng(0))
    return [round(float(bound), 3) for bound in found.confidence_interval]


def agent_metrics(phase: Phase, agent: str, final: dict[str, list[str]]) -> dict[str, Any]:
    turns = [t for t in phase.turns if t.agent == agent]
    seconds = [t.end - t.start for t in turns if t.ok]
    calls = [c for c in phase.calls if c["session"] in phase.sessions(agent)]
    summary_calls = [c for c in calls if c["kind"] == "summary"]
    waits = load_audit.fold_queue_waits(turns, summary_calls)
    succeeded = [c for c in summary_calls if saved(c)]
    on_chain = {(c["session"], len(c["previous"]), len(chain(c))) for c in succeeded if on_final(c, final)}
    saved_counts = {s.rsplit("-", 1)[-1]: {count for _, count in seen} for s, seen in phase.versions.items()}
    failures = [f"{t.session} turn {t.index} at +{t.start - phase.started:.1f} s: {t.error}" for t in turns if not t.ok]
    return {
        "turns": len(turns),
        "turns_per_second": round(len(seconds) / max(phase.ended - phase.started, 1e-9), 3),
        **{f"p{q}_seconds": quantile(seconds, q / 100) for q in (50, 95, 99)},
        "failed_turns": len(turns) - len(seconds),
        "failures": failures[:20],
        "turns_waited": load_audit.turns_waited(turns, calls),
        "turns_folded_inline": sum(t.inline for t in turns),
        "turns_that_found_the_fold_running": sum(t.busy for t in turns),
        **{f"fold_queue_wait_p{q}_seconds": quantile(waits, q / 100) for q in (50, 95)},
        "fold_queue_wait_max_seconds": round(max(waits), 3) if waits else None,
        "summary_calls": len(summary_calls),
        "failed_summary_calls": sum(bool(c["failed"]) for c in summary_calls),
        "cut_off_summary_calls": sum(c["end"] is None for c in summary_calls),
        "summary_calls_per_exchange": round(len(summary_calls) / len(seconds), 3) if seconds else None,
        "wasted_summary_calls": len(succeeded) - len(on_chain),
        "most_calls_in_one_fold": load_audit.most_calls_in_one_fold(summary_calls, saved_counts),
        "retried_within_backoff": load_audit.retried_within_backoff(summary_calls),
    }


def phase_report(phase: Phase, final: dict[str, list[str]], audit: dict[str, Any]) -> dict[str, Any]:
    rss, connections = phase.rss, phase.connections
    memory = dict.fromkeys(("rss_mb_start", "rss_mb_after_warmup", "rss_mb_end", "rss_mb_max", "rss_growth"))
    if len(rss) >= 3:  # after the first third of the phase, the warm-up, and at its end
        warm, end = float(np.median(rss[len(rss) // 3 : len(rss) // 3 + 3])), float(np.median(rss[-3:]))
        memory = {k: round(v, 1) for k, v in zip(memory, (rss[0], warm, end, max(rss)), strict=False)}
        memory["rss_growth"] = round(end / warm - 1, 4)
    stock, ours = ([t.end - t.start for t in phase.turns if t.agent == agent and t.ok] for agent in AGENTS)
    report = {"name": phase.name, "backend": phase.backend, "users_per_agent": phase.users}
    report["seconds"] = round(phase.ended - phase.started, 1)
    report["agents"] = {agent: agent_metrics(phase, agent, final) for agent in AGENTS}
    report |= {"p95_ratio_interval": p95_ratio_interval(stock, ours), **memory}
    report |= {"db_connections_max": max(connections, default=None)}
    report |= {"db_connections_median": float(np.median(connections)) if connections else None}
    return {**report, "events": phase.events, "audit": audit}


def fault_report(phase: Phase, final: dict[str, list[str]]) -> dict[str, Any]:
    """What a fault's targets measure (docs/benchmarks.md): failed turns in and out of its window, the sessions
    folding across it, the saves the database rejected, the killed worker's fold."""
    times, (opens, closes) = {e["event"]: phase.started + e["at"] for e in phase.events}, WINDOWS[phase.name]
    start, end = times.get(opens), times.get(closes, times.get(opens))
    failed = {f"{agent}_{where}": 0 for agent in AGENTS for where in ("inside", "outside")}
    for turn in (t for t in phase.turns if not t.ok):
        inside = start and end and turn.end >= start and turn.start <= end + FAULT_MARGIN_SECONDS
        failed[f"{turn.agent}_{'inside' if inside else 'outside'}"] += 1
    folded = [c for c in phase.calls if c["kind"] == "summary" and saved(c) and chain(c) and on_final(c, final)]
    before = {c["session"] for c in folded if start is not None and c["end"] < start}
    after = {c["session"] for c in folded if end is not None and c["start"] > end}
    answered = [t.session for t in phase.turns if t.agent == "summarizing" and t.ok and end and t.start > end]
    chatting = {s for s in before if answered.count(s) >= DEFAULT_FOLD_BATCH}
    across = {"before": len(before), "before_and_after": len(before & after), "chatting_after": len(chatting)}
    across["chatting_after_and_folded"] = len(chatting & after)
    report: dict[str, Any] = {"failed_turns_in_fault": failed, "sessions_folding_across_fault": across}
    if phase.name == "rejected_saves":
        calls = [c for c in phase.calls if c["kind"] == "summary" and c["session"] in phase.sessions("summarizing")]
        report["rejected_saves"] = load_audit.rejected_saves(calls, start or 0.0, end or 0.0)
    if killed := next((e for e in phase.events if e["event"] == "worker killed"), None):
        # The messages the killed worker was folding: a later fold of that session takes them, once (the audit).
        folded_since = sum(m in final.get(killed["session"], []) for m in killed["folding"])
        report["killed_fold"] = {"session": killed["session"], "messages": len(killed["folding"])}
        report["killed_fold"]["folded_since"] = folded_since
    return report


async def inject(phase: Phase, args: Any, server: LangflowServer, engine: sa.Engine, pg: OwnPostgres) -> None:
    """The fault of `phase`, between the events of its window."""
    await asyncio.sleep(args.restart_at_seconds if phase.name == "pg_restart" else args.fault_at_seconds)
    deadline, workers = time.monotonic() + KILL_WAIT_SECONDS, {p.pid for p in server_processes(server)} - {server.pid}
    while phase.name == "worker_kill" and time.monotonic() < deadline:
        calls = [c for c in read_calls(phase.path("calls.jsonl")) if c["kind"] == "summary" and c["end"] is None]
        if running := [c for c in calls if c["pid"] in workers and c["start"] > phase.started]:
            os.kill(running[-1]["pid"], signal.SIGKILL)
            killed = {"pid": running[-1]["pid"], "session": running[-1]["session"], "folding": running[-1]["folded"]}
            return phase.event("worker killed", summary_calls_running=len(running), **killed)
        await asyncio.sleep(0.1)
    if phase.name == "worker_kill":
        return phase.event("no summary call ran in a worker; nothing killed")
    start, end = WINDOWS[phase.name]
    try:
        if phase.name == "rejected_saves":
            await asyncio.to_thread(run_sql, engine, REJECT_SAVES_SQL)
        phase.event(start)
        if phase.name == "pg_restart":
            await asyncio.to_thread(pg.stop, "fast")
        elif phase.name == "summary_outage":
            write_control(phase.path("control.json"), fail_summary=True)
        await asyncio.sleep(args.outage_seconds if phase.name == "pg_restart" else args.summary_outage_seconds)
    finally:  # also when the phase ends early: the next faults run on the same database
        if phase.name == "pg_restart":
            await asyncio.to_thread(pg.start)
        elif phase.name == "rejected_saves":
            await asyncio.to_thread(run_sql, engine, ACCEPT_SAVES_SQL)
        else:
            write_control(phase.path("control.json"))
        phase.event(end)


def run_sql(engine: sa.Engine, statements: tuple[str, ...]) -> None:
    with engine.begin() as connection:
        for statement in statements:
            connection.execute(sa.text(statement))


def write_control(path: Path, **values: Any) -> None:
    path.with_suffix(".tmp").write_text(json.dumps(values))
    path.with_suffix(".tmp").replace(path)


def fault_phase(
    name: str, args: Any, server: LangflowServer, engine: sa.Engine, pg: OwnPostgres, folder: Path
) -> Phase:
    # The restart late enough that every session has folded before it, long enough before the end for the next folds.
    restart = args.restart_at_seconds + args.outage_seconds + args.restart_recovery_seconds
    outage = args.fault_at_seconds + args.summary_outage_seconds + args.recovery_seconds
    seconds = {"pg_restart": restart, "summary_outage": outage, "rejected_saves": outage}.get(name, args.fault_seconds)
    fault = None if name == "slow_summary" else (lambda phase: inject(phase, args, server, engine, pg))
    control = {"summary_seconds": args.slow_summary_seconds} if name == "slow_summary" else {}
    return Phase(name, "postgres", args.fault_users, seconds, folder, fault, control)


def run_phase(server: LangflowServer, engine: sa.Engine, phase: Phase, args: Any) -> dict[str, Any]:
    phase.work_dir.mkdir(parents=True, exist_ok=True)
    write_control(phase.path("control.json"), **phase.control)
    with server.client(token=server.superuser_token) as client:
        flows = {agent: client.post("/api/v1/flows/", json=flow_data(agent, phase, args)) for agent in AGENTS}
    flow_ids = {agent: response.raise_for_status().json()["id"] for agent, response in flows.items()}
    for agent, n in ((agent, n) for agent in AGENTS for n in range(WARM_UP_TURNS)):  # a flow's first build is slow
        with server.client(api_key=server.superuser_api_key) as client:
            body = {"input_value": f"#w{AGENTS.index(agent)}-u{n}# hello", "session_id": uuid.uuid4().hex, **CHAT}
            client.post(f"/api/v1/run/{flow_ids[agent]}", json=body)
    print(f"{phase.name}: {phase.users} users per agent for {phase.seconds:g} s", flush=True)
    sampler = Sampler(server, engine, phase, flow_ids["summarizing"])
    sampler.start()
    try:
        asyncio.run(drive(server, phase, flow_ids, args))
        write_control(phase.path("control.json"))
        phase.event("folds settled", waited_seconds=round(sampler.settle(), 1))
    finally:
        sampler.stop.set()
        sampler.join()
    phase.calls = read_calls(phase.path("calls.jsonl"))
    phase.path("turns.jsonl").write_text("".join(json.dumps(asdict(t)) + "\n" for t in phase.turns))
    flow = {"flow_id": load_audit.flow_key(engine, flow_ids["summarizing"])}
    with engine.connect() as connection:
        replies = connection.execute(sa.text(REPLIES_SQL), flow).all()
        states = connection.execute(sa.text(load_audit.STATE_SQL), flow).all()
    # The memory step, stored with the reply, says whether the turn folded inline or found the session's fold running.
    steps = {load_audit.message_marker(r.text): r.content_blocks for r in replies}
    for turn in phase.turns:
        step = steps.get(f"{turn.session}-a{turn.index}", "")
        step = step if isinstance(step, str) else json.dumps(step)
        turn.inline, turn.busy = FOLDED_INLINE in step, BUSY_NOTE.lower() in step
    final = {r.session_id.rsplit("-", 1)[-1]: load_audit.summary_markers(r.summary) for r in states}
    chatted = [f"load-{phase.name}-{s}" for s in phase.sessions("summarizing")]

    def delete() -> list[str]:
        # A quarter of the sessions (at least one), through Langflow's monitor API, as the Playground does.
        with server.client(token=server.superuser_token) as client:
            deleting = chatted[: max(1, phase.users // 4)]
            gone = {s: client.delete(f"/api/v1/monitor/messages/session/{s}").status_code for s in deleting}
        return [s for s, status in gone.items() if status in {200, 204}]

    options = {"versions": phase.versions, "delete": delete, "n_messages": args.n_messages, "chatted": chatted}
    audit = load_audit.audit_phase(engine, flow_ids["summarizing"], **options)
    report = {**phase_report(phase, final, audit), **(fault_report(phase, final) if phase.name in WINDOWS else {})}
    for agent, m in report["agents"].items():
        print(f"  {agent:12} " + ", ".join(f"{k} {v}" for k, v in m.items() if k in SHOWN), flush=True)
    print(f"  RSS growth {report['rss_growth']}, DB connections max {report['db_connections_max']}; audit {audit}")
    return report


def zero(value: Any) -> tuple[Any, str, bool]:
    return value, "0", value == 0


def bounded(value: Any, bound: float, limit: str) -> tuple[Any, str, bool]:
    """`value` within `bound` as `limit` reads: "<= ..." or "< ..."."""
    return value, limit, value is not None and (value <= bound if limit.startswith("<=") else value < bound)


def all_of(done: int, of: int, shown: str = "") -> tuple[Any, str, bool]:
    return shown or f"{done} of {of}", "all, at least 1", of >= 1 and done == of


def p95_row(ours: Any, stock: Any, interval: Any) -> tuple[Any, str, bool]:
    limit, shown = P95_RATIO_TARGET * (stock or 0), ours
    if interval and stock and ours is not None:
        shown = f"{ours} s ({ours / stock:.2f} x stock; 95% bootstrap interval of this phase's turns "
        shown += f"{interval[0]:.2f}-{interval[1]:.2f} x)"
    return shown, f"<= {P95_RATIO_TARGET:g} x stock {stock} s = {limit:.3f} s", ours is not None and ours <= limit


def evaluate(report: dict[str, Any], where: str, run: dict[str, Any], backend: str = "postgres") -> list[dict]:
    """The target rows that apply to `where` ("load", or a fault's name) on one run: each row of `targets` names
    where it applies ("faults": every fault) and its measured value, limit and whether it holds (None: not measured)."""
    row: dict[str, Any] = {"backend": backend, "users": run.get("users_per_agent", report.get("fault_users"))}
    if "error" in run:
        return [
            {**row, "name": f"{where}: the fault ran", "measured": run["error"], "limit": "completes", "holds": False}
        ]
    ours, stock, audit, users = run["agents"]["summarizing"], run["agents"]["stock"], run["audit"], row["users"]
    failed, retried = stock["failed_turns"] + ours["failed_turns"], ours["retried_within_backoff"]
    outside = sum(run.get("failed_turns_in_fault", {}).get(f"{agent}_outside", 0) for agent in AGENTS)
    across, killed, rejected = (run.get(k) for k in ("sessions_folding_across_fault", "killed_fold", "rejected_saves"))
    p95 = p95_row(ours["p95_seconds"], stock["p95_seconds"], run.get("p95_ratio_interval"))
    most = report.get("max_folds_per_turn", DEFAULT_MAX_FOLDS_PER_TURN)
    most_folds = bounded(ours["most_calls_in_one_fold"], most, f"<= Max Folds per Turn ({most})")
    # One fold per session at a time: a fold waits at most for the sessions ahead of it, a call each.
    slow = report.get("slow_summary_seconds", 30.0)
    places = 2 * (run.get("max_background_folds") or report.get("fault_max_background_folds") or DEFAULT_MAX_RUNNING)
    queue = -(-users // places) * slow
    queue_limit = f"<= {users} sessions over {places} places x {slow:g} s = {queue:g} s"
    settled = next((e["waited_seconds"] for e in run["events"] if e["event"] == "folds settled"), None)
    settled_row = bounded(settled, SETTLE_TIMEOUT_SECONDS, f"< {SETTLE_TIMEOUT_SECONDS:g} s")
    kept_folding = across and all_of(across["before_and_after"], across["before"])
    killed_row = killed and all_of(killed["folded_since"], killed["messages"])
    rejected_row = rejected and (
        f"{rejected['retried_within_backoff']} after {rejected['folds']} rejected saves",
        "0, after at least 1",
        rejected["folds"] >= 1 and rejected["retried_within_backoff"] == 0,
    )
    restart_row = None
    if across:  # the sessions that chatted on long enough after the restart to fold again (older results: all)
        chatting = across.get("chatting_after", across["before"])
        folded = across.get("chatting_after_and_folded", across["before_and_after"])
        shown = f"{folded} of {chatting}; {across['before_and_after']} of all {across['before']} folded before"
        restart_row = all_of(folded, chatting, shown)
    targets = [
        ("p95 turn time, Summarizing", "load", p95),
        ("turns that waited for a summary call", "load", zero(ours["turns_waited"])),
        ("failed turns, both agents", "load slow_summary summary_outage rejected_saves", zero(failed)),
        # Only the database outage and the killed worker fail turns; the summary faults leave every turn running.
        ("failed turns outside the fault, both agents", "pg_restart worker_kill", zero(outside)),
        ("turns that waited for a summary call", "faults", zero(ours["turns_waited"])),
        ("lost or doubled folds (audit problems)", "load faults", (len(audit["problems"]), "0", audit["holds"])),
        ("RSS growth after warm-up", "load", bounded(run["rss_growth"], RSS_GROWTH, f"< {RSS_GROWTH:.0%}")),
        ("summary calls within the back-off after a failed one, any worker", "summary_outage", zero(retried)),
        ("most folds in one catch-up, the catch-up included", "summary_outage rejected_saves", most_folds),
        ("summary calls within the back-off after a rejected save, any worker", "rejected_saves", rejected_row),
        ("fold queue wait, max", "slow_summary", bounded(ours["fold_queue_wait_max_seconds"], queue, queue_limit)),
        ("seconds until the folds settled after the last turn", "slow_summary", settled_row),
        # Faults the sessions must outlast with their summaries.
        ("sessions that folded before the fault and fold on after it", "worker_kill", kept_folding),
        ("messages of the killed fold folded by a later fold", "worker_kill", killed_row),
        (RESTART_TARGET, "pg_restart", restart_row),
    ]
    rows, prefix = [], "" if where == "load" else f"{where}: "
    for name, applies, found in targets:
        if (where in applies.split() or (where != "load" and "faults" in applies.split())) and found:
            measured, limit, holds = found
            rows.append({**row, "name": prefix + name, "measured": measured, "limit": limit, "holds": bool(holds)})
    return rows


def saturation(runs: list[dict[str, Any]]) -> int | None:
    """The first N at which the stock Agent's turns per second fell below `SATURATION_SHARE` of N times its rate per
    user at the smallest N: the server no longer keeps up with its users."""
    rates = [
        (run["users_per_agent"], run["agents"]["stock"]["turns_per_second"] / run["users_per_agent"]) for run in runs
    ]
    return next((n for n, rate in rates[1:] if rate < SATURATION_SHARE * rates[0][1]), None)


def scored(report: dict[str, Any], backends: list[str]) -> None:
    """The load targets of `backends` (the phases up to the stock Agent's saturation) and every fault's, printed."""
    for backend in backends:
        report[f"stock_saturates_at_{backend}"] = top = saturation(runs := report["runs"][backend])
        measured = [run for run in runs if top is None or run["users_per_agent"] <= top]
        fresh = [row for run in measured for row in evaluate(report, "load", run, backend)]
        report["targets"] = [t for t in report["targets"] if t["backend"] != backend] + fresh
    report["targets"].sort(key=lambda t: list(report["runs"]).index(t["backend"]))
    report["fault_targets"] = [row for name, run in report["faults"].items() for row in evaluate(report, name, run)]
    print("\nTargets:")
    for t in [*report["targets"], *report["fault_targets"]]:
        print(f"{'PASS' if t['holds'] else 'FAIL'}  {t['backend']} N={t['users']} {t['name']}: ", end="")
        print(f"{t['measured']} (target {t['limit']})")


NUMBERS = {  # the numeric options (`--phase-seconds` and so on), all written to load.json
    "phase_seconds": 120.0,  # each load phase
    "think_seconds": 2.0,  # the mean pause between a reply and the next message
    "max_turns_per_user": 60,
    "n_messages": 10,  # Number of Chat History Messages, both agents
    "message_words": 150,  # each message, user and model
    "agent_seconds": 0.3,
    "summary_seconds": 2.0,
    "max_background_folds": 0,  # SUMMARIZING_AGENT_MAX_BACKGROUND_FOLDS of the server (0: its default)
    "fault_users": 3,
    "fault_max_background_folds": 1,  # the same, of the faults' server
    "fault_seconds": 70.0,
    "fault_at_seconds": 30.0,
    "outage_seconds": 5.0,  # PostgreSQL down this long
    "restart_at_seconds": 60.0,  # PostgreSQL stopped this far in
    "restart_recovery_seconds": 150.0,  # the phase goes on after it (turns in flight hang up to the 90 s timeout)
    "summary_outage_seconds": 60.0,
    "recovery_seconds": 50.0,
    "slow_summary_seconds": 30.0,
}


def chosen(text: str, choices: tuple[str, ...]) -> list[str]:
    names = list(choices) if text == "all" else [x for x in text.split(",") if x.strip() and text != "none"]
    if unknown := set(names) - set(choices):
        raise argparse.ArgumentTypeError(f"unknown: {sorted(unknown)}; choose from {choices}, all or none")
    return names


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.load", description=__doc__.split("\n")[0])
    add = parser.add_argument
    add("--backends", type=lambda text: chosen(text, BACKENDS), default=list(BACKENDS))
    add("--users", type=lambda text: [int(x) for x in text.split(",") if x.strip()], default=[1, 2, 4, 6, 8, 10])
    for option, default in NUMBERS.items():
        add(f"--{option.replace('_', '-')}", type=type(default), default=default)
    add("--faults", type=lambda text: chosen(text, FAULTS), default=list(FAULTS))
    add("--out", type=Path, default=Path("benchmarks/results"))
    add("--keep-records", type=Path, help="copy each phase's model calls and turns and the servers' logs here")
    add("--server", nargs=3, metavar=("URL", "DATABASE_URL", "PID"), help="a running server's load phases only")
    add("--rescore", type=Path, nargs="+", help="recompute the targets of saved load.json files, and exit")
    return parser.parse_args(argv)


def with_earlier_parts(report: dict[str, Any], path: Path) -> dict[str, Any]:
    """The parts of the saved results this run did not measure stay, each with the command and commit it was
    measured at: the load phases (and targets) of a backend not run, and the faults not run."""
    measured = {k: report[k] for k in ("command", "commit", "max_background_folds")}
    report["runs_measured"] = {backend: measured for backend in report["runs"]}
    if report["faults"]:
        report.update(faults_command=report["command"], faults_commit=report["commit"])
    earlier = json.loads(path.read_text()) if path.exists() else {"runs": {}, "faults": {}}
    for backend in (b for b in earlier["runs"] if b not in report["runs"]):
        report["runs"][backend] = earlier["runs"][backend]
        report["runs_measured"][backend] = earlier["runs_measured"][backend]
        report[f"stock_saturates_at_{backend}"] = earlier.get(f"stock_saturates_at_{backend}")
        report["targets"] += [t for t in earlier["targets"] if t["backend"] == backend]
    for part in ("runs", "runs_measured"):
        report[part] = {b: report[part][b] for b in BACKENDS if b in report[part]}
    kept = ["faults", "faults_command", "faults_commit", "faults_rescored", "fault_server_logs", "fault_users"]
    kept += ["fault_max_background_folds", "slow_summary_seconds"]
    if not report["faults"]:
        report |= {k: earlier[k] for k in kept if k in earlier}
    # Some faults re-run: the others keep their saved results, each with the commit and places it ran with.
    ran = {"commit": earlier.get("faults_commit", earlier.get("commit"))}
    ran["max_background_folds"] = earlier.get("fault_max_background_folds")
    for name, fault in earlier["faults"].items():
        report["faults"].setdefault(name, {**ran, **fault})
    return report


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    command = shlex.join(["python", "-m", "benchmarks.load", *(sys.argv[1:] if argv is None else argv)])
    for path in args.rescore or []:  # saved results, their saturation points and targets from their runs, and exit
        rescored, saved_report = {"command": command, "commit": commit()}, json.loads(path.read_text())
        for part in saved_report.get("runs_measured", {}).values():
            part["rescored"] = rescored
        saved_report |= {"faults_rescored": rescored} if saved_report.get("faults") else {}
        scored(saved_report, list(saved_report["runs"]))
        path.write_text(json.dumps(saved_report, indent=1) + "\n")
    if args.rescore:
        return 0
    report: dict[str, Any] = {"command": command, "commit": commit(), "cpus": os.cpu_count(), "runs": {}, "faults": {}}
    report |= {k: getattr(args, k) for k in NUMBERS} | {"max_folds_per_turn": DEFAULT_MAX_FOLDS_PER_TURN, "targets": []}
    report["max_background_folds"] = args.max_background_folds or DEFAULT_MAX_RUNNING
    report["fault_max_background_folds"] = places = args.fault_max_background_folds or DEFAULT_MAX_RUNNING
    report["fault_server_logs"] = FAULT_SERVER_LOGS
    with tempfile.TemporaryDirectory(prefix="summarizing-agent-load-") as temporary:
        work_dir = Path(temporary)
        os.chmod(work_dir, 0o777)  # the PostgreSQL server runs as its own user
        if args.server:  # a running server (of tests.support.server_fixtures): its backend's load phases only
            server = LangflowServer(base_url=args.server[0], database_url=args.server[1], log_path=work_dir / "log")
            server.pid, backend = int(args.server[2]), "sqlite" if args.server[1].startswith("sqlite") else "postgres"
            engine = sa.create_engine(args.server[1], poolclass=sa.pool.NullPool)
            report["runs"][backend] = load_phases(server, engine, backend, work_dir, args)
        for backend in [] if args.server else args.backends:
            with own_postgres() if backend == "postgres" else nullcontext() as pg:
                if args.users:
                    with langflow_server(work_dir / backend, pg, args.max_background_folds) as (server, db):
                        report["runs"][backend] = load_phases(server, db, backend, work_dir, args)
                # The faults' server has fewer places for folds after the reply: with the few sessions this machine
                # serves, more sessions fold at once than there are places, as with many more sessions.
                if pg is not None and args.faults:
                    with langflow_server(work_dir / "faults", pg, places, FAULT_SERVER_LOGS) as (server, db):
                        for name in args.faults:
                            try:
                                phase = fault_phase(name, args, server, db, pg, work_dir / "faults")
                                found = run_phase(server, db, phase, args)
                                report["faults"][name] = {**found, "commit": commit(), "max_background_folds": places}
                            except Exception as exc:  # noqa: BLE001 - a fault that did not run is reported
                                print(f"{name}: did not complete: {type(exc).__name__}: {exc}", flush=True)
                                report["faults"][name] = {"error": f"{type(exc).__name__}: {exc}"}
        for path in (p for pattern in ("*-calls.jsonl", "*-turns.jsonl", "*.log") for p in work_dir.rglob(pattern)):
            if args.keep_records:
                (args.keep_records / path.relative_to(work_dir)).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, args.keep_records / path.relative_to(work_dir))
    measured_backends = list(report["runs"])
    report = with_earlier_parts(report, args.out / "load.json")
    scored(report, measured_backends)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "load.json").write_text(json.dumps(report, indent=1) + "\n")
    if report["runs"]:
        plot(report, args.out / "load.png")
    audits = [run["audit"] for runs in report["runs"].values() for run in runs]
    broken = [a["problems"][:3] for a in audits + [f["audit"] for f in report["faults"].values() if "audit" in f]]
    broken = [problems for problems in broken if problems]
    print(f"\nWrote {args.out / 'load.json'} and load.png" + (f"\nAUDIT FAILED: {broken}" if broken else ""))
    return 1 if broken else 0


def load_phases(server: LangflowServer, engine: sa.Engine, backend: str, work_dir: Path, args: Any) -> list[dict]:
    phases = [Phase(f"{backend}-n{n}", backend, n, args.phase_seconds, work_dir / backend) for n in args.users]
    return [run_phase(server, engine, phase, args) for phase in phases]


def plot(report: dict[str, Any], path: Path) -> None:
    from matplotlib.figure import Figure

    figure = Figure(figsize=(8, 4.5), layout="tight")
    axis = figure.subplots()
    for backend, runs in report["runs"].items():
        for agent, style in (("stock", "--"), ("summarizing", "-")):
            xs, ys = [r["users_per_agent"] for r in runs], [r["agents"][agent]["p95_seconds"] for r in runs]
            axis.plot(xs, ys, style, marker="o", label=f"{agent}, {backend}")
    title = "p95 turn time against N: agent calls {:g} s, summary calls {:g} s"
    axis.set(xlabel="concurrent users per agent (N)", ylabel="p95 turn time (s)")
    axis.set_title(title.format(report["agent_seconds"], report["summary_seconds"]))
    axis.legend()
    axis.grid(alpha=0.3)
    figure.savefig(path, dpi=110)


if __name__ == "__main__":
    sys.exit(main())
