"""Where the load benchmark runs: a PostgreSQL server of its own, `langflow run` deployed as a topology, and the
sampler of state rows, RSS and database connections while a phase runs (`python -m benchmarks.load`)."""

from __future__ import annotations

import glob
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import psutil
import psycopg
import sqlalchemy as sa

from benchmarks import load_audit
from benchmarks.load_audit import read_calls
from benchmarks.load_balancer import load_balancer
from langflow_summarizing_agent.wiring.after_reply import MAX_RUNNING_ENV
from tests.support.deployment_recipe import follow_recipe
from tests.support.redis_server import RedisServer, running_redis
from tests.support.server_fixtures import LangflowServer, running_langflow_server

if TYPE_CHECKING:
    from benchmarks.load import Phase

PG_USER = "postgres"
STARTUP_TIMEOUT_SECONDS = 400.0  # two workers on a busy machine boot in minutes
POLL_SECONDS = 0.25  # the state rows; the RSS and database connections every fourth poll
SETTLE_QUIET_SECONDS, SETTLE_TIMEOUT_SECONDS = 3.0, 120.0
VERSIONS_SQL = "SELECT session_id, version, absorbed_count FROM session_memory_state WHERE flow_id = :flow_id"
CONNECTIONS_SQL = "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"


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
        settings = f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.root}"  # else PostgreSQL's defaults
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


@dataclass
class Deployment:
    """What a phase runs on: the server its users reach (the load balancer for `two_servers`), the `langflow run`
    processes behind it, an engine on its database, its PostgreSQL and the Redis of its job queue (None on SQLite)."""

    server: LangflowServer
    pids: list[int]
    engine: sa.Engine
    pg: OwnPostgres | None = None
    redis: RedisServer | None = None

    def processes(self) -> list[psutil.Process]:
        found = []
        for pid in self.pids:
            with suppress(psutil.Error):
                found += [root := psutil.Process(pid), *root.children(recursive=True)]
        return found


@contextmanager
def deployed(topology: str, work_dir: Path, pg: OwnPostgres | None, langflow: str, places: int) -> Iterator[Deployment]:
    """`langflow run` (the `langflow` the recipe installed) as `topology` deploys it: on SQLite one worker, as the
    quick start runs it; on PostgreSQL each server by the recipe of docs/operations.md (`follow_recipe`: its variables,
    `migrate` line and workers), one Redis for all; and an engine on its database."""
    url = pg.database_url("langflow_load") if pg else f"sqlite:///{work_dir / 'langflow.db'}"
    settings = {MAX_RUNNING_ENV: str(places)} if places else {}
    settings["LANGFLOW_SECRET_KEY"] = secrets.token_urlsafe(32)  # one for every server, as docs/operations.md says
    work_dir.mkdir(parents=True, exist_ok=True)
    with ExitStack() as stack:
        redis = stack.enter_context(running_redis(work_dir)) if pg else None
        servers = [
            stack.enter_context(
                follow_recipe(
                    work_dir / f"server{i}",
                    url,
                    redis,
                    langflow=langflow,
                    settings=settings,
                    startup_timeout=STARTUP_TIMEOUT_SECONDS,
                )
                if redis
                else running_langflow_server(
                    work_dir / f"server{i}",
                    url,
                    settings=settings,
                    executable=langflow,
                    startup_timeout=STARTUP_TIMEOUT_SECONDS,
                )
            )
            for i in range(2 if topology == "two_servers" else 1)
        ]
        front = servers[0]
        if len(servers) > 1:
            balancer = stack.enter_context(load_balancer([server.base_url for server in servers]))
            front = LangflowServer(base_url=balancer, database_url=url, log_path=front.log_path)
        engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
        yield Deployment(front, [server.pid or 0 for server in servers], engine, pg, redis)


class Sampler(threading.Thread):
    """Polls every state row's version, and the servers' RSS and the database connections in use."""

    def __init__(self, deployment: Deployment, phase: Phase, flow_id: str) -> None:
        super().__init__(daemon=True)
        self.deployment, self.engine, self.phase = deployment, deployment.engine, phase
        self.flow = load_audit.flow_key(self.engine, flow_id)
        self.sqlite = str(self.engine.url.database) if self.engine.dialect.name == "sqlite" else ""
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
            for process in self.deployment.processes() if tick % 4 == 0 else ():
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
