"""Benchmark: many sessions at once on a real `langflow run`, the stock Agent beside the Summarizing Agent, and faults.

    python -m benchmarks.load [--topologies sqlite,postgres,two_servers] [--users 1,2,4] [--faults all|none|NAME,...]

N users per agent (httpx) chat with both flows, half of them through the run API, half through the Playground's build
path (events by polling or streaming). With `--edit-seconds`, a last phase (`memory_edits`, on `postgres` or the
`--server`) has a user edit the Summarizing Agent's sessions while they chat: set a pinned fact, or roll back to a
kept version, through the session summary API; the audit then checks each session's versions.
Topologies: `sqlite`, one worker; `postgres`, two workers on PostgreSQL (a
server of its own) and Langflow's job queue on Redis, as docs/operations.md deploys them; `two_servers`, two such
servers of one worker each on that database and Redis, behind a loopback load balancer. The offline model
(`benchmarks.load_model`) runs inside the servers. Every session of a phase is audited (`benchmarks.load_audit`; a
failed audit exits 1). The faults run on `postgres`. Metrics and faults: docs/benchmarks.md, "Under load and faults".
Writes `load.json` and `load.png` to `--out`. Every loop is bounded in count and time; only 127.0.0.1 is used.
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
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field
from functools import partial
from itertools import cycle, islice
from pathlib import Path
from typing import Any

import httpx
import sqlalchemy as sa

from benchmarks import load_audit
from benchmarks.load_audit import read_calls
from benchmarks.load_deploy import Deployment, Sampler, deployed, own_postgres
from benchmarks.load_report import AGENTS, WINDOWS, fault_report, phase_report, plot, scored
from benchmarks.revision import commit
from langflow_summarizing_agent.engine.report import BUSY_NOTE
from langflow_summarizing_agent.engine.settings import DEFAULT_FOLD_BATCH, DEFAULT_MAX_FOLDS_PER_TURN
from langflow_summarizing_agent.storage.versions import versions_kept
from langflow_summarizing_agent.wiring.after_reply import DEFAULT_MAX_RUNNING
from langflow_summarizing_agent.wiring.api import ROUTE_PREFIX
from tests.support.deployment_recipe import install_recipe
from tests.support.server_fixtures import LangflowServer

REQUEST_TIMEOUT_SECONDS, KILL_WAIT_SECONDS = 90.0, 40.0
WARM_UP_TURNS = 4  # of each flow before a phase, so that both workers have built it
FAULTS = ("slow_summary", "summary_outage", "rejected_saves", "worker_kill", "redis_restart", "pg_restart")
TOPOLOGIES = ("sqlite", "postgres", "two_servers")
DELIVERIES = ("run", "polling", "run", "streaming")  # turn i of user n: DELIVERIES[(n + i) % 4]; "run": the run API
FOLDED_INLINE = " this turn ("  # in the memory step of a turn that folded inline (`engine.report.memory_step_text`)
TEXT = (
    "the deployment still shows the same error after the restart and the logs mention a timeout while the worker "
    "connects to the queue so I checked the settings again and they match the documentation"
)
CHAT = {"input_type": "chat", "output_type": "chat"}
ANSWERED = "answered"  # a turn whose reply came back
EDITS_PHASE = "memory_edits"
SHOWN = ("turns", "turns_per_second", "p95_seconds", "failed_turns", "turns_waited", "summary_calls_per_exchange")
REPLIES_SQL = "SELECT text, content_blocks FROM message WHERE flow_id = :flow_id AND sender <> 'User'"
REJECT_SAVES_SQL = (  # every save of a fold (it moves `absorbed_count`); the back-off of a failed one goes through
    "CREATE OR REPLACE FUNCTION load_reject_fold_saves() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
    "IF (TG_OP = 'INSERT' AND NEW.absorbed_count > 0) OR (TG_OP = 'UPDATE' AND NEW.absorbed_count IS DISTINCT FROM "
    "OLD.absorbed_count) THEN RAISE EXCEPTION 'load benchmark: the summary save is rejected'; END IF; RETURN NEW; "
    "END $$",
    "CREATE TRIGGER load_reject_fold_saves BEFORE INSERT OR UPDATE ON session_memory_state FOR EACH ROW "
    "EXECUTE FUNCTION load_reject_fold_saves()",
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
    via: str = "run"  # a DELIVERIES name
    saw: str = ANSWERED  # what the client saw: ANSWERED, "HTTP <status>", "error event", "no reply" or an httpx error
    inline: bool = False
    busy: bool = False  # the memory step says a fold of the session was running or waiting: this turn started none


@dataclass
class Phase:
    """One phase: what to run (`run_phase` takes it whole) and what it measured."""

    name: str
    topology: str
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
    flow_ids: dict[str, str] = field(default_factory=dict)
    edits: list[dict[str, Any]] = field(default_factory=list)
    """The memory edits of a `memory_edits` phase: session, kind (edit, rollback), HTTP status, version saved."""
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
    """The ready support flow as exported, its model the offline load model (connected as the canvas connects one),
    the summary switch on for the Summarizing Agent and off for the stock Agent (which it then is)."""
    from benchmarks.load_model import LoadModelComponent
    from tests.support.flow_files import load_support_flow, with_model

    model = LoadModelComponent(_id="LoadBenchmarkModel-L0adM")
    model.set(agent_seconds=args.agent_seconds, summary_seconds=args.summary_seconds, reply_words=args.message_words)
    model.set(control_path=str(phase.path("control.json")), record_path=str(phase.path("calls.jsonl")))
    values = {"summarize_older_messages": agent == "summarizing", "n_messages": args.n_messages}
    flow = with_model(load_support_flow(), model, **values, **({"fold_batch": args.fold_batch} if values else {}))
    return flow | {"name": f"load-{phase.name}-{agent}"}


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
        via, session = DELIVERIES[(user + index) % len(DELIVERIES)], f"load-{phase.name}-{marker}"
        try:
            answer = await (run_turn if via == "run" else build_turn)(client, flow_id, session, text, via)
            saw = "error event" if '"event": "error"' in answer else ANSWERED
            saw = saw if saw != ANSWERED or f"#{marker}-a{index}#" in answer else "no reply"
            error = "" if saw == ANSWERED else f"{saw}: {answer[-200:]}"
        except httpx.HTTPStatusError as exc:
            saw, error = f"HTTP {exc.response.status_code}", f"{type(exc).__name__}: {exc}"
        except httpx.HTTPError as exc:
            saw, error = type(exc).__name__, f"{type(exc).__name__}: {exc}"
        phase.turns.append(Turn(agent, marker, index, started, time.time(), saw == ANSWERED, error, via, saw))
        await asyncio.sleep(max(0.0, min(deadline - time.time(), rng.uniform(0.5, 1.5) * args.think_seconds)))


async def run_turn(client: httpx.AsyncClient, flow_id: str, session: str, text: str, _: str) -> str:
    response = await client.post(f"/api/v1/run/{flow_id}", json={"input_value": text, "session_id": session, **CHAT})
    return response.raise_for_status().text


async def build_turn(client: httpx.AsyncClient, flow_id: str, session: str, text: str, delivery: str) -> str:
    """A Playground turn: the build job, then its events by `delivery` (polled until the end event, or streamed),
    each request on a connection of its own (behind the load balancer, any server answers)."""
    body, options = {"inputs": {"input_value": text, "session": session}}, {"event_delivery": delivery}
    job = (await client.post(f"/api/v1/build/{flow_id}/flow", params=options, json=body)).raise_for_status()
    events, deadline = "", time.monotonic() + REQUEST_TIMEOUT_SECONDS
    while '"event": "end"' not in events and '"event": "error"' not in events and time.monotonic() < deadline:
        response = await client.get(f"/api/v1/build/{job.json()['job_id']}/events", params=options)
        events += response.raise_for_status().text + "\n"
    return events


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


async def inject(phase: Phase, args: Any, deployment: Deployment) -> None:
    """The fault of `phase`, between the events of its window."""
    restart, pg, redis = phase.name.endswith("_restart"), deployment.pg, deployment.redis
    await asyncio.sleep(args.restart_at_seconds if restart else args.fault_at_seconds)
    workers = {p.pid for p in deployment.processes()} - set(deployment.pids)
    deadline = time.monotonic() + KILL_WAIT_SECONDS
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
    assert pg is not None and redis is not None, "the faults run on PostgreSQL with Redis"
    try:
        if phase.name == "rejected_saves":
            await asyncio.to_thread(run_sql, deployment.engine, REJECT_SAVES_SQL)
        phase.event(start)
        if restart:
            await asyncio.to_thread(pg.stop if phase.name == "pg_restart" else redis.stop)
        elif phase.name == "summary_outage":
            write_control(phase.path("control.json"), fail_summary=True)
        await asyncio.sleep(args.outage_seconds if restart else args.summary_outage_seconds)
    finally:  # also when the phase ends early: the next faults run on the same database
        if restart:
            await asyncio.to_thread(pg.start if phase.name == "pg_restart" else redis.start)
        elif phase.name == "rejected_saves":
            await asyncio.to_thread(run_sql, deployment.engine, ACCEPT_SAVES_SQL)
        else:
            write_control(phase.path("control.json"))
        phase.event(end)


async def edit_memory(phase: Phase, args: Any, server: LangflowServer) -> None:
    """A user who, every `edit_seconds` on average, reads a random session's summary and, with its ETag, sets its
    `cluster` pinned fact (three times in four) or rolls it back to one of its newer kept versions."""
    rng, deadline = random.Random(phase.name), phase.started + phase.seconds
    sessions = [f"load-{phase.name}-{s}" for s in phase.sessions("summarizing")]
    params = {"flow_id": phase.flow_ids["summarizing"]}
    headers = {"x-api-key": server.superuser_api_key}
    async with httpx.AsyncClient(base_url=server.base_url, headers=headers, timeout=REQUEST_TIMEOUT_SECONDS) as client:
        while (pause := rng.expovariate(1 / args.edit_seconds)) < deadline - time.time():
            await asyncio.sleep(pause)
            session = rng.choice(sessions)
            api = f"{ROUTE_PREFIX}/sessions/{session}/summary"
            read = await client.get(api, params=params)
            if read.status_code == 404:  # no summary yet
                continue
            etag = {"If-Match": read.raise_for_status().json()["summaries"][0]["etag"]}
            if rng.random() < 0.25:
                listed = (await client.get(f"{api}/versions", params=params)).json()["summaries"][0]["versions"]
                version = rng.choice(listed[: max(1, len(listed) // 2)])["version"]
                kind, answer = (
                    "rollback",
                    await client.post(f"{api}/rollback", params=params, json={"version": version}, headers=etag),
                )
            else:
                body = {"pinned": {"cluster": f"c-{len(phase.edits)}"}}
                kind, answer = "edit", await client.patch(api, params=params, json=body, headers=etag)
            saved = answer.json().get("version") if answer.status_code == 200 else None
            phase.edits.append({"session": session, "kind": kind, "status": answer.status_code, "version": saved})


def edits_report(phase: Phase) -> dict[str, Any]:
    """What the memory edits saw: applied, refused as stale (412), a rollback to a version trimmed meanwhile (422),
    and any other answer, which is a fault."""

    def count(kind: str, *status: int) -> int:
        return sum(1 for e in phase.edits if e["kind"] == kind and e["status"] in status)

    other = [e for e in phase.edits if e["status"] not in (200, 412) and (e["kind"], e["status"]) != ("rollback", 422)]
    return {
        "edits_applied": count("edit", 200),
        "edits_stale": count("edit", 412),
        "rollbacks_applied": count("rollback", 200),
        "rollbacks_stale": count("rollback", 412, 422),
        "edits_answered_otherwise": other[:20],
    }


def run_sql(engine: sa.Engine, statements: tuple[str, ...]) -> None:
    with engine.begin() as connection:
        for statement in statements:
            connection.execute(sa.text(statement))


def write_control(path: Path, **values: Any) -> None:
    path.with_suffix(".tmp").write_text(json.dumps(values))
    path.with_suffix(".tmp").replace(path)


def fault_phase(name: str, args: Any, deployment: Deployment, folder: Path) -> Phase:
    # A restart late enough that every session has folded before it, long enough before the end for the next folds.
    restart = args.restart_at_seconds + args.outage_seconds + args.restart_recovery_seconds
    outage = args.fault_at_seconds + args.summary_outage_seconds + args.recovery_seconds
    seconds = {"summary_outage": outage, "rejected_saves": outage}.get(name, args.fault_seconds)
    seconds = restart if name.endswith("_restart") else seconds
    fault = None if name == "slow_summary" else (lambda phase: inject(phase, args, deployment))
    control = {"summary_seconds": args.slow_summary_seconds} if name == "slow_summary" else {}
    return Phase(name, "postgres", args.fault_users or max(args.users), seconds, folder, fault, control)


def run_phase(deployment: Deployment, phase: Phase, args: Any) -> dict[str, Any]:
    server, engine = deployment.server, deployment.engine
    phase.work_dir.mkdir(parents=True, exist_ok=True)
    write_control(phase.path("control.json"), **phase.control)
    with server.client(token=server.superuser_token) as client:
        flows = {agent: client.post("/api/v1/flows/", json=flow_data(agent, phase, args)) for agent in AGENTS}
    flow_ids = phase.flow_ids = {agent: response.raise_for_status().json()["id"] for agent, response in flows.items()}
    for agent, n in ((agent, n) for agent in AGENTS for n in range(WARM_UP_TURNS)):  # a flow's first build is slow
        with server.client(api_key=server.superuser_api_key) as client:
            body = {"input_value": f"#w{AGENTS.index(agent)}-u{n}# hello", "session_id": uuid.uuid4().hex, **CHAT}
            client.post(f"/api/v1/run/{flow_ids[agent]}", json=body)
    print(f"{phase.name}: {phase.users} users per agent for {phase.seconds:g} s", flush=True)
    sampler = Sampler(deployment, phase, flow_ids["summarizing"])
    sampler.start()
    try:
        asyncio.run(drive(server, phase, flow_ids, args))
        write_control(phase.path("control.json"))
        phase.event("folds settled", waited_seconds=round(sampler.settle(), 1))
    finally:
        sampler.stop.set()
        sampler.join()
    phase.calls = read_calls(phase.path("calls.jsonl"))
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
    phase.path("turns.jsonl").write_text("".join(json.dumps(asdict(t)) + "\n" for t in phase.turns))
    final = {r.session_id.rsplit("-", 1)[-1]: load_audit.summary_markers(r.summary) for r in states}
    chatted = [f"load-{phase.name}-{s}" for s in phase.sessions("summarizing")]

    def delete() -> list[str]:
        # A quarter of the sessions (at least one), through Langflow's monitor API, as the Playground does.
        with server.client(token=server.superuser_token) as client:
            deleting = chatted[: max(1, phase.users // 4)]
            gone = {s: client.delete(f"/api/v1/monitor/messages/session/{s}").status_code for s in deleting}
        return [s for s, status in gone.items() if status in {200, 204}]

    options = {"versions": phase.versions, "delete": delete, "n_messages": args.n_messages, "chatted": chatted}
    if phase.name == EDITS_PHASE:
        rolled_back = {e["session"] for e in phase.edits if e["kind"] == "rollback" and e["status"] == 200}
        options |= {"rolled_back": rolled_back, "versions_kept": versions_kept()}
    audit = load_audit.audit_phase(engine, flow_ids["summarizing"], **options)
    report = {**phase_report(phase, final, audit), **(fault_report(phase, final) if phase.name in WINDOWS else {})}
    report |= edits_report(phase) if phase.name == EDITS_PHASE else {}
    for agent, m in report["agents"].items():
        print(f"  {agent:12} " + ", ".join(f"{k} {v}" for k, v in m.items() if k in SHOWN), flush=True)
    print(f"  RSS growth {report['rss_growth']}, DB connections max {report['db_connections_max']}; audit {audit}")
    return report


NUMBERS = {  # the numeric options (`--phase-seconds` and so on), all written to load.json
    "phase_seconds": 120.0,  # each load phase
    "think_seconds": 2.0,  # the mean pause between a reply and the next message
    "max_turns_per_user": 60,
    "n_messages": 10,  # Number of Chat History Messages, both agents
    "fold_batch": DEFAULT_FOLD_BATCH,  # Fold Batch of the Summarizing Agent
    "message_words": 150,  # each message, user and model
    "agent_seconds": 0.3,
    "summary_seconds": 2.0,
    "max_background_folds": 0,  # SUMMARIZING_AGENT_MAX_BACKGROUND_FOLDS of the server (0: its default)
    "fault_users": 0,  # users per agent in each fault (0: the largest of --users, the load of the last phase)
    "fault_seconds": 70.0,
    "fault_at_seconds": 30.0,
    "outage_seconds": 5.0,  # PostgreSQL down this long
    "restart_at_seconds": 60.0,  # PostgreSQL stopped this far in
    "restart_recovery_seconds": 150.0,  # the phase goes on after it (turns in flight hang up to the 90 s timeout)
    "summary_outage_seconds": 60.0,
    "recovery_seconds": 50.0,
    "slow_summary_seconds": 30.0,
    "edit_seconds": 0.0,  # the mean pause between a user's memory edits in the `memory_edits` phase (0: no phase)
}


def chosen(text: str, choices: tuple[str, ...]) -> list[str]:
    names = list(choices) if text == "all" else [x for x in text.split(",") if x.strip() and text != "none"]
    if unknown := set(names) - set(choices):
        raise argparse.ArgumentTypeError(f"unknown: {sorted(unknown)}; choose from {choices}, all or none")
    return names


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.load", description=__doc__.split("\n")[0])
    add = parser.add_argument
    add("--topologies", type=lambda text: chosen(text, TOPOLOGIES), default=list(TOPOLOGIES))
    add("--users", type=lambda text: [int(x) for x in text.split(",") if x.strip()], default=[1, 2, 4, 6, 8, 10])
    for option, default in NUMBERS.items():
        add(f"--{option.replace('_', '-')}", type=type(default), default=default)
    add("--faults", type=lambda text: chosen(text, FAULTS), default=list(FAULTS))
    add("--out", type=Path, default=Path("benchmarks/results"))
    add("--langflow", help="the `langflow` of an environment the recipe installed (default: install one afresh)")
    add("--keep-records", type=Path, help="copy each phase's model calls and turns and the servers' logs here")
    add("--server", nargs=3, metavar=("URL", "DATABASE_URL", "PID"), help="a running server's load phases only")
    add("--rescore", type=Path, nargs="+", help="recompute the targets of saved load.json files, and exit")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    command = shlex.join(["python", "-m", "benchmarks.load", *(sys.argv[1:] if argv is None else argv)])
    for path in args.rescore or []:  # saved results, their saturation points and targets from their runs, and exit
        saved_report = json.loads(path.read_text()) | {"rescored": {"command": command, "commit": commit()}}
        scored(saved_report)
        path.write_text(json.dumps(saved_report, indent=1) + "\n")
    if args.rescore:
        return 0
    report: dict[str, Any] = {"command": command, "commit": commit(), "cpus": os.cpu_count(), "runs": {}, "faults": {}}
    report |= {k: getattr(args, k) for k in NUMBERS} | {"max_folds_per_turn": DEFAULT_MAX_FOLDS_PER_TURN}
    report["max_background_folds"] = args.max_background_folds or DEFAULT_MAX_RUNNING
    report["fault_users"] = args.fault_users or max(args.users, default=1)
    with tempfile.TemporaryDirectory(prefix="summarizing-agent-load-") as temporary:
        work_dir = Path(temporary)
        os.chmod(work_dir, 0o777)  # the PostgreSQL server runs as its own user
        if args.server:  # a running server (of tests.support.server_fixtures): its load phases only
            server = LangflowServer(base_url=args.server[0], database_url=args.server[1], log_path=work_dir / "log")
            topology = "sqlite" if args.server[1].startswith("sqlite") else "postgres"
            deployment = Deployment(server, [int(args.server[2])], sa.create_engine(args.server[1]))
            report["runs"][topology] = load_phases(deployment, topology, work_dir, args)
            if args.edit_seconds:
                report["edits"] = run_phase(deployment, edits_phase(topology, args, deployment, work_dir), args)
        langflow = args.langflow or ""
        if not args.server and not langflow:  # the recipe's install, in an environment of its own
            started = time.monotonic()
            langflow = str(Path(install_recipe(work_dir / "venv")["VIRTUAL_ENV"]) / "bin" / "langflow")
            report["install_seconds"] = round(time.monotonic() - started, 1)
            print(f"installed by the recipe in {report['install_seconds']} s: {langflow}", flush=True)
        for topology in [] if args.server else args.topologies:
            with (
                own_postgres() if topology != "sqlite" else nullcontext() as pg,
                deployed(topology, work_dir / topology, pg, langflow, args.max_background_folds) as deployment,
            ):
                if args.users:
                    report["runs"][topology] = load_phases(deployment, topology, work_dir / topology, args)
                # The faults follow the load phases on the same deployment, at the load of the last one.
                for name in args.faults if topology == "postgres" else ():
                    try:
                        phase = fault_phase(name, args, deployment, work_dir / "faults")
                        report["faults"][name] = run_phase(deployment, phase, args)
                    except Exception as exc:  # noqa: BLE001 - a fault that did not run is reported
                        print(f"{name}: did not complete: {type(exc).__name__}: {exc}", flush=True)
                        report["faults"][name] = {"error": f"{type(exc).__name__}: {exc}"}
                if topology == "postgres" and args.edit_seconds:
                    phase = edits_phase(topology, args, deployment, work_dir / "edits")
                    report["edits"] = run_phase(deployment, phase, args)
        for path in (p for pattern in ("*-calls.jsonl", "*-turns.jsonl", "*.log") for p in work_dir.rglob(pattern)):
            if args.keep_records:
                (args.keep_records / path.relative_to(work_dir)).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, args.keep_records / path.relative_to(work_dir))
    scored(report)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "load.json").write_text(json.dumps(report, indent=1) + "\n")
    if report["runs"]:
        plot(report, args.out / "load.png")
    audits = [run["audit"] for runs in report["runs"].values() for run in runs]
    audits += [report["edits"]["audit"]] if "edits" in report else []
    broken = [a["problems"][:3] for a in audits + [f["audit"] for f in report["faults"].values() if "audit" in f]]
    broken = [problems for problems in broken if problems]
    print(f"\nWrote {args.out / 'load.json'} and load.png" + (f"\nAUDIT FAILED: {broken}" if broken else ""))
    return 1 if broken else 0


def edits_phase(topology: str, args: Any, deployment: Deployment, folder: Path) -> Phase:
    """The load of the last phase, with a user editing the memory beside it."""
    users = args.fault_users or max(args.users, default=1)
    edit = partial(edit_memory, args=args, server=deployment.server)
    return Phase(EDITS_PHASE, topology, users, args.phase_seconds, folder, edit)


def load_phases(deployment: Deployment, topology: str, folder: Path, args: Any) -> list[dict]:
    phases = [Phase(f"{topology}-n{n}", topology, n, args.phase_seconds, folder) for n in args.users]
    return [run_phase(deployment, phase, args) for phase in phases]


if __name__ == "__main__":
    sys.exit(main())
