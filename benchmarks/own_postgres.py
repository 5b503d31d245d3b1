"""A PostgreSQL server of the benchmark's own: created in a temporary directory, started, restarted, removed.

The load benchmark restarts PostgreSQL mid-run, so it never uses a server other people's tests share: it runs
`initdb` into a fresh directory, listens on 127.0.0.1 on a free port (trust authentication, loopback only), and
`pg_ctl` starts, stops and restarts it. `initdb` refuses to run as root; as root the commands run as the `postgres`
user. Everything is removed at the end.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import psycopg

START_TIMEOUT_SECONDS = 60
OS_USER = "postgres"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _bin_dir() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("initdb")
    if on_path is None:
        msg = "initdb not found: install PostgreSQL's server binaries (Debian: postgresql)"
        raise RuntimeError(msg)
    return Path(on_path).parent


class OwnPostgres:
    """A running PostgreSQL server in `data_dir`, on 127.0.0.1:`port`."""

    def __init__(self, root: Path, port: int) -> None:
        self.root = root
        self.data_dir = root / "data"
        self.port = port
        self.bin = _bin_dir()
        self.log_path = root / "postgres.log"

    @property
    def admin_url(self) -> str:
        return f"postgresql://{OS_USER}@127.0.0.1:{self.port}/postgres"

    def database_url(self, name: str) -> str:
        """The SQLAlchemy URL of database `name`, created when missing."""
        with psycopg.connect(self.admin_url, autocommit=True) as connection:
            exists = connection.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
            if exists is None:
                connection.execute(f'CREATE DATABASE "{name}"')
        return f"postgresql+psycopg://{OS_USER}@127.0.0.1:{self.port}/{name}"

    def _run(self, *command: str) -> None:
        prefix = ["runuser", "-u", OS_USER, "--"] if os.geteuid() == 0 else []
        subprocess.run([*prefix, *command], check=True, capture_output=True, timeout=START_TIMEOUT_SECONDS)

    def _pg_ctl(self, action: str, *options: str) -> None:
        self._run(str(self.bin / "pg_ctl"), action, "-D", str(self.data_dir), "-w", *options)

    def init(self) -> None:
        self._run(str(self.bin / "initdb"), "-D", str(self.data_dir), "-U", OS_USER, "--auth=trust", "-E", "UTF8")

    def start(self) -> None:
        settings = f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.root} -c max_connections=200 -c fsync=off"
        self._pg_ctl("start", "-l", str(self.log_path), "-o", settings)
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while time.monotonic() < deadline:
            try:
                with psycopg.connect(self.admin_url, connect_timeout=2):
                    return
            except psycopg.OperationalError:
                time.sleep(0.2)
        msg = f"PostgreSQL did not accept connections on port {self.port}; see {self.log_path}"
        raise RuntimeError(msg)

    def stop(self, mode: str = "fast") -> None:
        self._pg_ctl("stop", "-m", mode)


@contextmanager
def own_postgres() -> Iterator[OwnPostgres]:
    """Create, start, yield, then stop and remove a PostgreSQL server of this process's own."""
    root = Path(tempfile.mkdtemp(prefix="summarizing-agent-load-pg-"))
    if os.geteuid() == 0:
        shutil.chown(root, user=OS_USER, group=OS_USER)
    server = OwnPostgres(root, _free_port())
    try:
        server.init()
        server.start()
        yield server
    finally:
        with suppress(subprocess.CalledProcessError):
            server.stop("immediate")
        shutil.rmtree(root, ignore_errors=True)
