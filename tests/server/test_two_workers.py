"""Many runs on one session at once over HTTP, on a real `langflow run` with two workers on one Postgres database
(folds after the reply, one at a time per session across workers): every run completes, no fold is lost or applied
twice, versions only go up, and no summary call is wasted. On the Summarizing Agent's flow and on the memory
chatbot's (the Summarizing Message History's).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from langflow_summarizing_agent.wiring.after_reply import MAX_RUNNING_ENV
from tests.support.agent_runs import QUIET_AGENT
from tests.support.deployment_recipe import deployment_recipe, extra_requirements, follow_recipe
from tests.support.flow_files import (
    OFFLINE_MODEL_ID,
    load_memory_chatbot_flow,
    load_support_flow,
    memory_chatbot_offline,
    node_of_type,
    read_records,
    with_offline_model,
)
from tests.support.fold_audit import FOLD_OFTEN, SummaryWatch, check_fold_bookkeeping
from tests.support.postgres_database import fresh_postgres_database
from tests.support.redis_server import running_redis
from tests.support.server_fixtures import LangflowServer

# One xdist worker runs the module: its two-worker server (minutes to start) starts once.
pytestmark = pytest.mark.xdist_group("two_workers")
CONCURRENT_RUNS = 16
POSTGRES_DEFAULT_MAX_CONNECTIONS = 100
# How long concurrent rounds go on until one is spread over both workers (a worker boots Langflow on its own).
WORKER_SPREAD_TIMEOUT = 180.0
FOLDS_QUIET_SECONDS = 2.0
FOLDS_SETTLE_TIMEOUT = 60.0
READ_AFTER_TURNS = 6
WARM_UP_TURNS = 10
READS_AFTER_A_TURN = 4
# A fold queued behind other sessions' folds: one fold place per worker, taken by this many sessions' slow folds.
OTHER_SESSIONS = 10
SLOW_FOLD_SECONDS = 5.0
QUEUED_READS = 10
QUEUED_READ_SPACING = 0.5
# Two workers on one Postgres database, over HTTP


@pytest.fixture(scope="module")
def two_worker_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LangflowServer]:
    """Two workers on a fresh Postgres database and a Redis job queue, started by the recipe of docs/operations.md
    (CI=true fails without Postgres or Redis)."""
    work_dir = tmp_path_factory.mktemp("langflow-two-workers")
    with (
        # One fold place per worker, so a session's fold can be made to wait for one behind other sessions' folds.
        pytest.MonkeyPatch.context() as patch,
        fresh_postgres_database("summarizing_agent_concurrency") as database_url,
        running_redis(work_dir) as redis,
    ):
        patch.setenv(MAX_RUNNING_ENV, "1")
        with follow_recipe(work_dir, database_url, redis) as server:
            yield server


def test_the_recipe_runs_several_workers_on_the_redis_queue_with_the_postgresql_driver() -> None:
    recipe = deployment_recipe()
    assert recipe.workers > 1
    assert recipe.exports["LANGFLOW_JOB_QUEUE_TYPE"] == "redis"
    assert recipe.exports["LANGFLOW_DATABASE_URL"].startswith("postgresql+psycopg://")
    assert any(requirement.startswith("psycopg") for requirement in extra_requirements(recipe.extra))
    assert ["langflow", "summarizing-agent", "migrate"] in recipe.commands
    assert not any("DANGEROUSLY" in name for name in recipe.exports)
    # The variables Langflow's job queue reads (`settings.redis_queue_host`, `_port`), not only the job queue type.
    assert {"LANGFLOW_REDIS_QUEUE_HOST", "LANGFLOW_REDIS_QUEUE_PORT"} <= set(recipe.exports)
    # Two servers by the recipe (the load benchmark's two_servers) stay within PostgreSQL's default max_connections,
    # where Langflow's default pool (20 + 30 a worker) would not.
    pool = json.loads(recipe.exports["LANGFLOW_DB_CONNECTION_SETTINGS"])
    assert 2 * recipe.workers * (pool["pool_size"] + pool["max_overflow"]) < POSTGRES_DEFAULT_MAX_CONNECTIONS


def summarizing_flow(record_path: Path, **agent_settings: Any) -> dict[str, Any]:
    """The ready flow as exported (Chat Input -> Summarizing Agent -> Chat Output, the canvas's ids), its agent on an
    offline model recording to `record_path`, as the JSON `POST /api/v1/flows/` takes."""
    flow = with_offline_model(load_support_flow(), record_path, **{**QUIET_AGENT, **agent_settings})
    flow["name"] = f"concurrency-{uuid.uuid4().hex[:8]}"
    values = {
        "reply": "Noted:",
        "echo": "question",
        "worker_name": True,
        "fold_answer": "list",
        # Summary calls as slow as a provider's: folds started by both workers overlap, so without the session's
        # fold lock across workers a summary call is thrown away (seen: 6 calls, 2 wasted).
        "fold_delay": 1.0,
    }
    model = node_of_type(flow, "FakeChatModel")["data"]["node"]["template"]
    for name, value in values.items():
        model[name]["value"] = value
    return flow


def memory_chatbot_flow(record_path: Path, **history_settings: Any) -> dict[str, Any]:
    """The shipped memory chatbot flow with the same offline model as `summarizing_flow`: it answers with the last
    line of its prompt (the shipped prompt ends with the customer's new message) and the worker's name."""
    # Its replies take as long as a summary call, so a round's runs are still in flight when the first folds save.
    flow = memory_chatbot_offline(load_memory_chatbot_flow(), record_path, reply_delay=1.0, **history_settings)
    model = node_of_type(flow, "FakeChatModel")
    assert model["id"] == OFFLINE_MODEL_ID
    values = {"reply": "Noted:", "echo": "question_line", "worker_name": True, "fold_answer": "list", "fold_delay": 1.0}
    for name, value in values.items():
        model["data"]["node"]["template"][name]["value"] = value
    return flow


FLOWS = [
    pytest.param(summarizing_flow, "Noted: {question} ", id="agent"),
    pytest.param(memory_chatbot_flow, "Noted: The customer's new message: {question} ", id="message_history"),
]


def run_turn(server: LangflowServer, api_key: str, flow_id: str, session_id: str, text: str) -> str:
    # A client per request: a kept-alive connection would stick to one worker.
    with server.client(api_key=api_key) as client:
        response = client.post(
            f"/api/v1/run/{flow_id}",
            json={"input_value": text, "input_type": "chat", "output_type": "chat", "session_id": session_id},
        )
    assert response.status_code == 200, response.text[:2000]
    return response.json()["outputs"][0]["outputs"][0]["results"]["message"]["text"]


def worker_of(reply: str) -> str:
    """The worker process that answered, as the fake chat model names it at the end of its reply."""
    return reply.rsplit("worker ", 1)[-1].rstrip("]")


def concurrent_round(
    server: LangflowServer, api_key: str, flow_id: str, session_id: str, round_: int, answer: str
) -> set[str]:
    """`CONCURRENT_RUNS` runs on one session at once; every one completes with its own answer (`answer`, formatted
    with the question). Returns their workers."""
    questions = [f"concurrent question {round_}.{n}" for n in range(CONCURRENT_RUNS)]
    with ThreadPoolExecutor(CONCURRENT_RUNS) as pool:
        replies = list(pool.map(lambda text: run_turn(server, api_key, flow_id, session_id, text), questions))
    for question, reply in zip(questions, replies, strict=True):
        assert reply.startswith(answer.format(question=question)), reply
    return {worker_of(reply) for reply in replies}


@pytest.mark.server
@pytest.mark.postgres
@pytest.mark.parametrize(("flow_of", "answer"), FLOWS)
def test_concurrent_runs_on_two_workers_fold_each_message_once(
    two_worker_server: LangflowServer, tmp_path: Path, flow_of: Callable[..., dict[str, Any]], answer: str
) -> None:
    server = two_worker_server
    record_path = tmp_path / "calls.jsonl"
    with server.client(token=server.superuser_token) as client:
        created = client.post("/api/v1/flows/", json=flow_of(record_path, **FOLD_OFTEN))
    assert created.status_code in {200, 201}, created.text[:2000]
    flow_id = created.json()["id"]
    api_key = server.superuser_api_key
    session_id = f"session-{uuid.uuid4().hex[:8]}"
    for n in range(3):
        run_turn(server, api_key, flow_id, session_id, f"warm-up question {n}")

    engine = sa.create_engine(server.database_url, poolclass=sa.pool.NullPool)
    try:
        # The watch goes on until the rounds' folds have settled: folds run after the reply, so a round's runs may
        # all return before the first of their folds saves.
        with SummaryWatch(engine, uuid.UUID(flow_id), session_id) as watch:
            # The health check answers once one worker is up; the other may still be booting, and an idle pair may
            # leave a round to one of them. Rounds go on until one round's runs were spread over both workers.
            deadline = time.monotonic() + WORKER_SPREAD_TIMEOUT
            rounds = [concurrent_round(server, api_key, flow_id, session_id, 0, answer)]
            while len(rounds[-1]) < 2 and time.monotonic() < deadline:
                rounds.append(concurrent_round(server, api_key, flow_id, session_id, len(rounds), answer))
            assert len(rounds[-1]) == 2, f"no round was spread over two workers in {len(rounds)} rounds: {rounds}"
            state = check_fold_bookkeeping(engine, uuid.UUID(flow_id), session_id)

            run_turn(server, api_key, flow_id, session_id, "one more question once the dust has settled")
            settled = wait_until_folds_end(engine, uuid.UUID(flow_id), session_id)
    finally:
        engine.dispose()
    watch.assert_only_moved_forward(settled)
    assert settled["version"] >= state["version"]
    assert settled["absorbed_count"] >= state["absorbed_count"]
    folds = [record for record in read_records(record_path) if record["kind"] == "fold"]
    wasted = len(folds) - settled["version"]
    print(f"{len(folds)} summary calls, {settled['version']} saved, {wasted} wasted")
    assert wasted == 0, f"{wasted} of {len(folds)} summary calls were thrown away"


@pytest.mark.server
@pytest.mark.postgres
def test_a_summary_read_right_after_a_turn_answers_the_same_on_every_worker(
    two_worker_server: LangflowServer, tmp_path: Path
) -> None:
    """Each turn's fold after the reply takes a second; reads on new connections land on both workers at once."""
    server = two_worker_server
    with server.client(token=server.superuser_token) as client:
        created = client.post("/api/v1/flows/", json=summarizing_flow(tmp_path / "calls.jsonl", **FOLD_OFTEN))
    assert created.status_code in {200, 201}, created.text[:2000]
    flow_id, api_key = created.json()["id"], server.superuser_api_key
    session_id = f"session-{uuid.uuid4().hex[:8]}"

    def read() -> int:
        with server.client(api_key=api_key) as client:
            response = client.get(f"/api/v1/summarizing-agent/sessions/{session_id}/summary?flow_id={flow_id}")
        if response.status_code == 404:
            return 0
        assert response.status_code == 200, response.text[:2000]
        assert response.json()["fold_running"] is False
        return response.json()["summaries"][0]["folded_count"]

    engine = sa.create_engine(server.database_url, poolclass=sa.pool.NullPool)
    disagreements = []
    try:
        for n in range(WARM_UP_TURNS):  # until the first fold has saved
            run_turn(server, api_key, flow_id, session_id, f"warm-up question {n}")
            if read():
                break
        for n in range(READ_AFTER_TURNS):
            run_turn(server, api_key, flow_id, session_id, f"question {n}")
            with ThreadPoolExecutor(READS_AFTER_A_TURN) as pool:
                answers = list(pool.map(lambda _: read(), range(READS_AFTER_A_TURN)))
            settled = wait_until_folds_end(engine, uuid.UUID(flow_id), session_id)["absorbed_count"]
            disagreements += [(n, answer, settled) for answer in answers if answer != settled]
    finally:
        engine.dispose()
    assert disagreements == []


@pytest.mark.server
@pytest.mark.postgres
def test_a_read_on_the_other_worker_waits_for_a_fold_queued_behind_other_sessions_folds(
    two_worker_server: LangflowServer, tmp_path: Path
) -> None:
    """One fold place per worker, taken for a long while by other sessions' slow folds: the session's fold after its
    reply waits for a place, holding no lock, and every read, on either worker, shows what that fold saves or says
    it is pending. Before the summary's queued mark, a read on the other worker answered at once with the summary one
    fold behind and `fold_running` false."""
    server = two_worker_server
    api_key = server.superuser_api_key
    flow_id = create_flow(server, summarizing_flow(tmp_path / "calls.jsonl", **FOLD_OFTEN))
    slow_flow = summarizing_flow(tmp_path / "slow-calls.jsonl", **FOLD_OFTEN)
    node_of_type(slow_flow, "FakeChatModel")["data"]["node"]["template"]["fold_delay"]["value"] = SLOW_FOLD_SECONDS
    slow_flow_id = create_flow(server, slow_flow)
    session_id = f"session-{uuid.uuid4().hex[:8]}"
    others = [f"other-{uuid.uuid4().hex[:8]}" for _ in range(OTHER_SESSIONS)]

    def read(delay: float) -> dict[str, Any]:
        time.sleep(delay)
        # A client per read: reads land on both workers.
        with server.client(api_key=api_key) as client:
            response = client.get(f"/api/v1/summarizing-agent/sessions/{session_id}/summary?flow_id={flow_id}")
        assert response.status_code == 200, response.text[:2000]
        return response.json()

    def others_turn(text: str) -> set[str]:
        with ThreadPoolExecutor(OTHER_SESSIONS) as pool:
            replies = list(pool.map(lambda other: run_turn(server, api_key, slow_flow_id, other, text), others))
        return {worker_of(reply) for reply in replies}

    engine = sa.create_engine(server.database_url, poolclass=sa.pool.NullPool)
    try:
        for n in range(WARM_UP_TURNS):  # until the session's first fold has saved: a first fold is not waited for
            run_turn(server, api_key, flow_id, session_id, f"warm-up question {n}")
            if summary_version(engine, flow_id, session_id):
                break
        before = wait_until_folds_end(engine, uuid.UUID(flow_id), session_id)["version"]
        assert before > 0
        # The other sessions until each has a summary, and their folds have all ended.
        for n in range(WARM_UP_TURNS):
            others_turn(f"warm-up question {n}")
            others_before = settled_versions(engine, slow_flow_id, others)
            if all(others_before.values()):
                break
        assert all(others_before.values()), others_before

        # Each other session's turn makes a slow fold due: they take the one place of both workers for a while.
        busy_workers = others_turn("one more question")
        target_reply = run_turn(server, api_key, flow_id, session_id, "a question whose fold waits for a place")
        assert worker_of(target_reply) in busy_workers, (target_reply, busy_workers)
        started = time.monotonic()
        with ThreadPoolExecutor(QUEUED_READS) as pool:
            answers = list(pool.map(read, [n * QUEUED_READ_SPACING for n in range(QUEUED_READS)]))
        reads_took = time.monotonic() - started
        after = version_above(engine, flow_id, session_id, before)
        others_after = settled_versions(engine, slow_flow_id, others)
    finally:
        engine.dispose()
    assert all(others_after[other] > others_before[other] for other in others), (others_before, others_after)
    assert after > before
    pending = [answer.get("fold_pending", answer["fold_running"]) for answer in answers]
    versions = [answer["summaries"][0]["version"] for answer in answers]
    print(f"versions read {versions}, pending {pending}; before {before}, after {after}; reads took {reads_took:.1f} s")
    behind = [(version, flag) for version, flag in zip(versions, pending, strict=True) if version < after and not flag]
    assert behind == [], (
        f"{len(behind)} of {QUEUED_READS} reads one fold behind (version, pending), the fold saved version {after}"
    )


def create_flow(server: LangflowServer, flow: dict[str, Any]) -> str:
    with server.client(token=server.superuser_token) as client:
        created = client.post("/api/v1/flows/", json=flow)
    assert created.status_code in {200, 201}, created.text[:2000]
    return str(created.json()["id"])


def summary_version(engine: sa.Engine, flow_id: str, session_id: str) -> int:
    """The version of the session's summary; 0 before its first fold saved."""
    sql = "SELECT max(version) FROM session_memory_state WHERE flow_id = :flow_id AND session_id = :session_id"
    with engine.connect() as connection:
        found = connection.execute(sa.text(sql), {"flow_id": uuid.UUID(flow_id), "session_id": session_id}).scalar()
    return found or 0


def version_above(engine: sa.Engine, flow_id: str, session_id: str, version: int) -> int:
    """The session's summary version once a fold saved past `version` (it may wait behind slow folds)."""
    deadline = time.monotonic() + FOLDS_SETTLE_TIMEOUT
    while (found := summary_version(engine, flow_id, session_id)) <= version:
        if time.monotonic() > deadline:
            pytest.fail(f"the session's summary stayed at version {found} for {FOLDS_SETTLE_TIMEOUT} s")
        time.sleep(FOLDS_QUIET_SECONDS)
    return found


def settled_versions(engine: sa.Engine, flow_id: str, session_ids: list[str]) -> dict[str, int]:
    """The sessions' summary versions once none has changed for a while (their folds run after the reply)."""
    versions = {session_id: summary_version(engine, flow_id, session_id) for session_id in session_ids}
    deadline = time.monotonic() + FOLDS_SETTLE_TIMEOUT
    while time.monotonic() < deadline:
        time.sleep(SLOW_FOLD_SECONDS + FOLDS_QUIET_SECONDS)
        latest = {session_id: summary_version(engine, flow_id, session_id) for session_id in session_ids}
        if latest == versions:
            return latest
        versions = latest
    pytest.fail(f"folds still saving after {FOLDS_SETTLE_TIMEOUT} s")


def wait_until_folds_end(engine: sa.Engine, flow_id: uuid.UUID, session_id: str) -> dict[str, Any]:
    """The state once no fold has saved for a while: folds run after the reply, so one may still be running."""
    state = check_fold_bookkeeping(engine, flow_id, session_id)
    deadline = time.monotonic() + FOLDS_SETTLE_TIMEOUT
    while time.monotonic() < deadline:
        time.sleep(FOLDS_QUIET_SECONDS)
        latest = check_fold_bookkeeping(engine, flow_id, session_id)
        if latest["version"] == state["version"]:
            return latest
        state = latest
    pytest.fail(f"folds still saving after {FOLDS_SETTLE_TIMEOUT} s")
