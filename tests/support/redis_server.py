"""A throwaway Redis for Langflow's job queue, which `langflow run --workers N` needs for N > 1 (tests and benchmarks).

`running_redis(work_dir)` starts Debian's `redis-server` on a free loopback port, without persistence, and stops it
after. `RedisServer.restart(down_seconds)` stops it and starts it again on the same port (a fault of the load
benchmark). Without `redis-server`, the caller is skipped locally with the reason, and failed under `CI=true`.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import redis

from tests.support.postgres_database import running_in_ci

STARTUP_TIMEOUT_SECONDS = 20.0


def job_queue_settings(host: str, port: int) -> dict[str, str]:
    """The variables that put Langflow's job queue on Redis (`LANGFLOW_REDIS_URL` alone is not read for it)."""
    return {"LANGFLOW_JOB_QUEUE_TYPE": "redis", "LANGFLOW_REDIS_HOST": host, "LANGFLOW_REDIS_PORT": str(port)}


@dataclass
class RedisServer:
    port: int
    log_path: Path
    host: str = "127.0.0.1"
    _process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def settings(self) -> dict[str, str]:
        return job_queue_settings(self.host, self.port)

    def start(self) -> None:
        executable = require_redis_server()
        with self.log_path.open("ab") as log:
            self._process = subprocess.Popen(
                [executable, "--bind", self.host, "--port", str(self.port), "--save", "", "--appendonly", "no"],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        client = redis.Redis(host=self.host, port=self.port, socket_connect_timeout=1)
        deadline = time.monotonic() + STARTUP_TIMEOUT_SECONDS
        while True:
            try:
                client.ping()
                return
            except redis.ConnectionError:
                if self._process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"redis-server did not start; see {self.log_path}") from None
                time.sleep(0.1)
            finally:
                client.close()

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            self._process.wait(timeout=STARTUP_TIMEOUT_SECONDS)
        self._process = None

    def restart(self, down_seconds: float) -> None:
        self.stop()
        time.sleep(down_seconds)
        self.start()


def require_redis_server() -> str:
    executable = shutil.which("redis-server")
    if executable is None:
        import pytest

        reason = "several workers need Langflow's job queue on Redis; install `redis-server` (Debian: redis-server)"
        if running_in_ci():
            pytest.fail(f"CI=true needs Redis: {reason}", pytrace=False)
        pytest.skip(reason)
    return executable


@contextmanager
def running_redis(work_dir: Path) -> Iterator[RedisServer]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = RedisServer(port=port, log_path=work_dir / "redis-server.log")
    server.start()
    try:
        yield server
    finally:
        server.stop()
