"""A real `langflow run` server for tests: one per test session, with this extension installed.

Loaded as a pytest plugin: `pytest_plugins = ["tests.support.server_fixtures"]` in `tests/conftest.py`. The fixture
`langflow_server` starts the server on a fresh database chosen by the environment variable
`SUMMARIZING_AGENT_SERVER_DB`: `sqlite` (default, a file in a temporary directory) or `postgres` (a fresh database on
127.0.0.1:5432, dropped afterwards). Tests that use the
fixture are marked `server` (and `postgres` on that backend), so `pytest -m server` selects them.

Authentication is on (no auto-login): a superuser logs in with a password, and further users can be created, so tests
can check what one user may see of another's data.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest

from tests.support.postgres_database import fresh_postgres_database
from tests.support.redis_server import running_redis

if TYPE_CHECKING:
    from tests.support.provider_servers import Providers

SERVER_DATABASE_ENV = "SUMMARIZING_AGENT_SERVER_DB"
SERVER_DATABASE_BACKENDS = ("sqlite", "postgres")
STARTUP_TIMEOUT_SECONDS = 300
SHUTDOWN_TIMEOUT_SECONDS = 20
REQUEST_TIMEOUT_SECONDS = 120
LOG_TAIL_LINES = 80

SUPERUSER = "summarizing-agent-admin"
SUPERUSER_PASSWORD = "summarizing-agent-admin-password"


@dataclass(frozen=True)
class ServerUser:
    """A user of the test server, logged in: `token` is a bearer token for the API."""

    id: str
    username: str
    password: str
    token: str


class LangflowServer:
    """Handle on a running `langflow run` process: its address, its database and a few API shortcuts."""

    def __init__(self, *, base_url: str, database_url: str, log_path: Path) -> None:
        self.base_url = base_url
        self.database_url = database_url
        self.log_path = log_path
        self.pid: int | None = None
        """The `langflow run` process, leader of the server's process group (workers are its descendants)."""

    def client(self, *, token: str | None = None, api_key: str | None = None) -> httpx.Client:
        """An HTTP client on the server, authenticated by bearer token or API key (the run API takes only keys)."""
        headers = {}
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        if api_key is not None:
            headers["x-api-key"] = api_key
        return httpx.Client(base_url=self.base_url, headers=headers, timeout=REQUEST_TIMEOUT_SECONDS)

    def login(self, username: str, password: str) -> str:
        with self.client() as client:
            response = client.post("/api/v1/login", data={"username": username, "password": password})
        response.raise_for_status()
        return response.json()["access_token"]

    @cached_property
    def superuser_token(self) -> str:
        return self.login(SUPERUSER, SUPERUSER_PASSWORD)

    @cached_property
    def superuser_api_key(self) -> str:
        return self.create_api_key(self.superuser_token)

    def create_api_key(self, token: str, name: str = "summarizing-agent-tests") -> str:
        """A new API key for the user that `token` belongs to."""
        with self.client(token=token) as client:
            response = client.post("/api/v1/api_key/", json={"name": name})
        response.raise_for_status()
        return response.json()["api_key"]

    def create_user(self, username: str | None = None, password: str | None = None) -> ServerUser:
        """Create an active, non-superuser user (new users start inactive) and log it in."""
        username = username or f"user-{uuid.uuid4().hex[:8]}"
        password = password or f"password-{uuid.uuid4().hex}"
        with self.client(token=self.superuser_token) as client:
            created = client.post("/api/v1/users/", json={"username": username, "password": password})
            created.raise_for_status()
            user_id = created.json()["id"]
            client.patch(f"/api/v1/users/{user_id}", json={"is_active": True}).raise_for_status()
        return ServerUser(id=user_id, username=username, password=password, token=self.login(username, password))

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        if not self.log_path.exists():
            return "(no server log)"
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def langflow_executable() -> str:
    beside_python = Path(sys.executable).with_name("langflow")
    if beside_python.exists():
        return str(beside_python)
    on_path = shutil.which("langflow")
    if on_path is None:
        pytest.fail(
            "The `langflow` command is not installed; install this package with its dependencies", pytrace=False
        )
    return on_path


def server_environment(config_dir: Path, database_url: str) -> dict[str, str]:
    # Inherited LANGFLOW_* settings (a developer's own, or an in-process fixture's) must not leak into the server.
    environment = {key: value for key, value in os.environ.items() if not key.startswith("LANGFLOW_")}
    environment.update(
        {
            "LANGFLOW_CONFIG_DIR": str(config_dir),
            "LANGFLOW_DATABASE_URL": database_url,
            "LANGFLOW_AUTO_LOGIN": "false",
            "LANGFLOW_SUPERUSER": SUPERUSER,
            "LANGFLOW_SUPERUSER_PASSWORD": SUPERUSER_PASSWORD,
            "LANGFLOW_ALLOW_PUBLIC_CUSTOM_COMPONENTS": "true",
            # Starter projects and telemetry cost startup time and network attempts that tests do not need.
            "LANGFLOW_CREATE_STARTER_PROJECTS": "false",
            "LANGFLOW_DO_NOT_TRACK": "true",
            # The suite logs in far more often than a person; Langflow's default is 5 logins a minute per IP.
            "LANGFLOW_RATE_LIMIT_PER_MINUTE": "1000",
            "LITELLM_LOCAL_MODEL_COST_MAP": "true",
        }
    )
    return environment


def _wait_until_healthy(
    process: subprocess.Popen[bytes], server: LangflowServer, timeout: float = STARTUP_TIMEOUT_SECONDS
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(
                f"langflow run exited with code {process.returncode} before it was healthy; log tail:\n"
                f"{server.log_tail()}",
                pytrace=False,
            )
        try:
            response = httpx.get(f"{server.base_url}/health_check", timeout=5)
            if response.status_code == 200 and response.json().get("status") == "ok":
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    pytest.fail(f"langflow run was not healthy after {timeout} s; log tail:\n{server.log_tail()}", pytrace=False)


def _stop_process_group(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=SHUTDOWN_TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def _migrate_before_workers(environment: dict[str, str], log_path: Path) -> None:
    with log_path.open("wb") as log_file:
        result = subprocess.run(
            [langflow_executable(), "migration"],
            env=environment,
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            timeout=STARTUP_TIMEOUT_SECONDS,
            check=False,
        )
    if result.returncode != 0:
        tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-LOG_TAIL_LINES:])
        pytest.fail(f"langflow migration exited with code {result.returncode}; log tail:\n{tail}", pytrace=False)


@contextmanager
def running_langflow_server(
    work_dir: Path,
    database_url: str,
    *,
    workers: int = 1,
    startup_timeout: float = STARTUP_TIMEOUT_SECONDS,
    settings: Mapping[str, str] | None = None,
    executable: str | None = None,
) -> Iterator[LangflowServer]:
    """Start `langflow run` (this environment's, or `executable`) in its own process group, wait until healthy, stop
    the whole group after.

    The server also serves Langflow's web UI (no `--backend-only`), so browser tests can share it. `settings` are
    environment variables of the server's (`LANGFLOW_*` ones included, which it inherits from no one else). Several
    workers get Redis for Langflow's job queue: the one `settings` names, or a private one.
    """
    config_dir = work_dir / "langflow-config"
    config_dir.mkdir(parents=True, exist_ok=True)
    environment = {**server_environment(config_dir, database_url), **(settings or {})}
    with ExitStack() as stack:
        if workers > 1 and environment.get("LANGFLOW_JOB_QUEUE_TYPE") != "redis":
            # Several workers share Langflow's job queue on Redis, as Langflow 1.13 requires; a private one here.
            environment.update(stack.enter_context(running_redis(work_dir)).settings)
        if workers > 1 and database_url.startswith("sqlite"):
            # Workers migrating one SQLite file at once collide; on Postgres an advisory lock serializes them.
            _migrate_before_workers(environment, work_dir / "langflow-migration.log")
        yield from _serve(work_dir, database_url, environment, workers, startup_timeout, executable)


def _serve(
    work_dir: Path,
    database_url: str,
    environment: dict[str, str],
    workers: int,
    startup_timeout: float,
    executable: str | None = None,
) -> Iterator[LangflowServer]:
    port = _free_port()
    server = LangflowServer(
        base_url=f"http://127.0.0.1:{port}", database_url=database_url, log_path=work_dir / "langflow-server.log"
    )
    command = [
        executable or langflow_executable(),
        "run",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        str(workers),
        "--log-level",
        "warning",
    ]
    with server.log_path.open("wb") as log_file:
        process = subprocess.Popen(
            command,
            env=environment,
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    server.pid = process.pid
    try:
        _wait_until_healthy(process, server, startup_timeout)
        yield server
    finally:
        _stop_process_group(process)


def server_database_backend() -> str:
    backend = os.environ.get(SERVER_DATABASE_ENV, "sqlite").strip().lower() or "sqlite"
    if backend not in SERVER_DATABASE_BACKENDS:
        known = ", ".join(SERVER_DATABASE_BACKENDS)
        pytest.fail(f"{SERVER_DATABASE_ENV}={backend!r} is not a known backend; use one of {known}", pytrace=False)
    return backend


@pytest.fixture(scope="session")
def loopback_providers() -> Iterator[Providers]:
    """OpenAI's and Anthropic's wires on 127.0.0.2 (`tests.support.provider_servers`), for the session's server."""
    from tests.support.provider_servers import running_providers

    with running_providers() as providers:
        yield providers


@pytest.fixture(scope="session")
def langflow_server(
    tmp_path_factory: pytest.TempPathFactory, loopback_providers: Providers
) -> Iterator[LangflowServer]:
    """The session's one real Langflow server, on the database backend chosen by `SUMMARIZING_AGENT_SERVER_DB`. Its
    OpenAI and Anthropic models send to `loopback_providers` (any API key is taken there; the server has none)."""
    work_dir = tmp_path_factory.mktemp("langflow-server")
    settings = {
        "OPENAI_BASE_URL": loopback_providers.openai_base_url,
        "ANTHROPIC_BASE_URL": loopback_providers.anthropic_base_url,
    }
    if server_database_backend() == "postgres":
        with (
            fresh_postgres_database("summarizing_agent_server") as database_url,
            running_langflow_server(work_dir, database_url, settings=settings) as server,
        ):
            yield server
    else:
        with running_langflow_server(work_dir, f"sqlite:///{work_dir / 'langflow.db'}", settings=settings) as server:
            yield server


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    """Under `--dist loadgroup` each xdist worker names a grouped test `<id>@<group>`, and the controller sends a
    group to one worker. Where that renaming does not take (pytest 9.2 with pytest-xdist 3.8), every worker would
    start a shared server of its own: refuse to run."""
    if not getattr(session.config.option, "loadgroup", False):
        return
    ungrouped = [i.nodeid for i in session.items if i.get_closest_marker("xdist_group") and "@" not in i.nodeid]
    if ungrouped:
        msg = f"pytest-xdist's loadgroup does not group {ungrouped[0]} (and {len(ungrouped) - 1} more): pin pytest <9.2"
        sys.stderr.write(msg + "\n")  # an xdist worker's error shows only as a crash of its first test
        raise pytest.UsageError(msg)


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's, which names a grouped test by its group
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    backend = os.environ.get(SERVER_DATABASE_ENV, "sqlite").strip().lower()
    for item in items:
        if "langflow_server" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.server)
            item.add_marker(pytest.mark.shared_server)
            # Under pytest-xdist (`--dist loadgroup`) one worker runs every test on the shared server: it starts once.
            item.add_marker(pytest.mark.xdist_group("langflow_server"))
            groups = sorted({str(mark.args[0]) for mark in item.iter_markers("xdist_group") if mark.args})
            if groups != ["langflow_server"]:
                # xdist joins a test's groups into one of their own: it would run on another worker, another server.
                msg = f"{item.nodeid} runs on the shared server and may join no other xdist group, has {groups}"
                raise pytest.UsageError(msg)
            if backend == "postgres":
                item.add_marker(pytest.mark.postgres)
