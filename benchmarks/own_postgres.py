"""A PostgreSQL server of the load benchmark's own, which its fault `pg_restart` stops and starts mid-run: `initdb`
into a temporary directory, 127.0.0.1 on a free port, trust authentication, all removed at the end; never a server
that other people's tests share. `initdb` refuses to run as root, so as root the commands run as `postgres`.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import psycopg

USER = "postgres"


class OwnPostgres:
    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="summarizing-agent-load-pg-"))
        if os.geteuid() == 0:
            shutil.chown(self.root, user=USER, group=USER)
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.bin = Path(
            [shutil.which("pg_ctl") or "pg_ctl", *sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))][-1]
        )

    def database_url(self, name: str) -> str:
        """The SQLAlchemy URL of database `name`, created when missing."""
        with psycopg.connect(f"postgresql://{USER}@127.0.0.1:{self.port}/postgres", autocommit=True) as admin:
            if admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone() is None:
                admin.execute(f'CREATE DATABASE "{name}"')
        return f"postgresql+psycopg://{USER}@127.0.0.1:{self.port}/{name}"

    def run(self, command: str, *options: str) -> None:
        as_user = ["runuser", "-u", USER, "--"] if os.geteuid() == 0 else []
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
        server.run("initdb", "-U", USER, "--auth=trust", "-E", "UTF8", "--no-sync")
        server.start()
        yield server
    finally:
        with suppress(subprocess.CalledProcessError):
            server.stop("immediate")
        shutil.rmtree(server.root, ignore_errors=True)
