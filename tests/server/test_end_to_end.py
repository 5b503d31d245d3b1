"""Real use through a real `langflow run` server: the shipped flow, with an offline model, holds long conversations
through the run API and the Playground's build endpoint, and later turns carry each session's own summary.

The model is `FakeChatModelComponent`: its source travels in the flow and the server execs it; it appends every
call it gets to a file, which is how the test sees what the agent was sent at each turn.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine
from sqlmodel import Session, select

from langflow_summarizing_agent.engine.prompt import SUMMARY_PREFIX
from langflow_summarizing_agent.storage.models import SessionMemoryStateTable
from tests.support.flow_files import agent_node, load_support_flow, read_records, with_offline_model
from tests.support.server_chat import playground_turn
from tests.support.server_fixtures import LangflowServer

N_MESSAGES = 4
FOLD_BATCH = 4
RUN_API_EXCHANGES = 30
PLAYGROUND_EXCHANGES = 8
REPLY = "Noted."

RUN_API_FACTS = {"project_id": "PRJ-123", "customer": "Globex", "cluster": "EU cluster"}
PLAYGROUND_FACTS = {"project_id": "PRJ-456", "customer": "Initech", "cluster": "US cluster"}


def _opening(facts: dict[str, str]) -> str:
    return (
        f"Hello, this is customer {facts['customer']}. Our project {facts['project_id']} on the "
        f"{facts['cluster']} fails to deploy since this morning."
    )


def _follow_up(turn: int) -> str:
    return f"Step {turn}: I restarted the deployment again and it still fails with the same error."


@dataclass
class SessionCalls:
    """What one session's turns sent to the model: the agent call of each turn, in order."""

    session_id: str
    agent_calls: list[list[dict[str, str]]] = field(default_factory=list)
    fold_calls: int = 0
    agent_logs: list[str] = field(default_factory=list)
    streamed: list[str] = field(default_factory=list)


@dataclass
class Conversations:
    flow_id: str
    run_api: SessionCalls
    playground: SessionCalls


def _take_new_records(record_path: Path, seen: int, session: SessionCalls) -> int:
    records = read_records(record_path)
    new = records[seen:]
    agent_calls = [record["messages"] for record in new if record["kind"] == "agent"]
    assert len(agent_calls) == 1, f"expected one agent call in the turn, got {[r['kind'] for r in new]}"
    session.agent_calls.append(agent_calls[0])
    session.fold_calls += sum(1 for record in new if record["kind"] == "fold")
    return len(records)


def _say_through_run_api(client: Any, flow_id: str, session_id: str, text: str) -> str:
    response = client.post(
        f"/api/v1/run/{flow_id}",
        json={"input_value": text, "input_type": "chat", "output_type": "chat", "session_id": session_id},
    )
    assert response.status_code == 200, response.text[:2000]
    body = response.json()
    assert body["session_id"] == session_id
    return body["outputs"][0]["outputs"][0]["results"]["message"]["text"]


def _say_through_playground(
    client: Any, flow_id: str, agent_id: str, session_id: str, text: str
) -> tuple[str, str, list[str]]:
    """One Playground turn; returns the reply, the agent's logs and the streamed tokens, as the Playground gets them."""
    events = playground_turn(client, flow_id, session_id, text)
    assert events[-1]["event"] == "end"
    [agent_end] = [
        event["data"]["build_data"]
        for event in events
        if event["event"] == "end_vertex" and event["data"]["build_data"]["id"] == agent_id
    ]
    reply = agent_end["data"]["outputs"]["response"]["message"]
    logs = "\n".join(str(entry["message"]) for entry in agent_end["data"]["logs"]["response"])
    tokens = [str(event["data"].get("chunk", "")) for event in events if event["event"] == "token"]
    return reply, logs, tokens


@pytest.fixture(scope="module")
def conversations(langflow_server: LangflowServer, tmp_path_factory: pytest.TempPathFactory) -> Conversations:
    record_path = tmp_path_factory.mktemp("model-calls") / "calls.jsonl"
    flow = with_offline_model(load_support_flow(), record_path, n_messages=N_MESSAGES, fold_batch=FOLD_BATCH)
    with langflow_server.client(token=langflow_server.superuser_token) as client:
        created = client.post("/api/v1/flows/", json=flow)
        assert created.status_code == 201, created.text[:2000]
    flow_id = created.json()["id"]
    agent_id = agent_node(flow)["id"]
    run_api = SessionCalls(f"run-api-{uuid.uuid4().hex[:8]}")
    playground = SessionCalls(f"playground-{uuid.uuid4().hex[:8]}")
    seen = 0

    def say_through_run_api(turns: range) -> None:
        nonlocal seen
        with langflow_server.client(api_key=langflow_server.superuser_api_key) as client:
            for turn in turns:
                text = _opening(RUN_API_FACTS) if turn == 0 else _follow_up(turn)
                assert _say_through_run_api(client, flow_id, run_api.session_id, text) == REPLY
                seen = _take_new_records(record_path, seen, run_api)

    say_through_run_api(range(RUN_API_EXCHANGES - 1))
    with langflow_server.client(token=langflow_server.superuser_token) as client:
        for turn in range(PLAYGROUND_EXCHANGES):
            text = _opening(PLAYGROUND_FACTS) if turn == 0 else _follow_up(turn)
            reply, logs, tokens = _say_through_playground(client, flow_id, agent_id, playground.session_id, text)
            assert reply == REPLY
            playground.agent_logs.append(logs)
            playground.streamed.extend(tokens)
            seen = _take_new_records(record_path, seen, playground)
    # The run API's last turn comes after the Playground session has its summary, so that summary could leak into it.
    say_through_run_api(range(RUN_API_EXCHANGES - 1, RUN_API_EXCHANGES))

    return Conversations(flow_id=flow_id, run_api=run_api, playground=playground)


def _summary_message(agent_call: list[dict[str, str]]) -> str | None:
    """The summary message of an agent call: the first message after the system prompt, if it is one."""
    first = agent_call[1]
    return first["content"] if first["type"] == "human" and first["content"].startswith(SUMMARY_PREFIX) else None


def _pinned_lines(facts: dict[str, str]) -> list[str]:
    return [f"- {key}: {value}" for key, value in facts.items()]


def test_run_api_last_turn_carries_the_first_message_facts_in_the_summary(conversations: Conversations) -> None:
    last_call = conversations.run_api.agent_calls[-1]
    summary = _summary_message(last_call)
    assert summary is not None, last_call
    for line in _pinned_lines(RUN_API_FACTS):
        assert line in summary
    assert _opening(RUN_API_FACTS) not in [message["content"] for message in last_call], "sent verbatim, not folded"
    assert conversations.run_api.fold_calls >= (2 * RUN_API_EXCHANGES - N_MESSAGES) // (2 * FOLD_BATCH)


def test_run_api_turns_after_the_first_fold_all_carry_the_summary(conversations: Conversations) -> None:
    calls = conversations.run_api.agent_calls
    first_with_summary = next(index for index, call in enumerate(calls) if _summary_message(call))
    assert first_with_summary < RUN_API_EXCHANGES // 2
    for call in calls[first_with_summary:]:
        assert "- project_id: PRJ-123" in (_summary_message(call) or "")


def test_run_api_model_input_stays_bounded_over_the_conversation(conversations: Conversations) -> None:
    # System prompt, summary, the verbatim part (at most n_messages plus twice the fold batch) and the input.
    bound = 1 + 1 + N_MESSAGES + 2 * FOLD_BATCH + 1
    assert max(len(call) for call in conversations.run_api.agent_calls) <= bound


def test_playground_turns_carry_their_own_session_summary(conversations: Conversations) -> None:
    summary = _summary_message(conversations.playground.agent_calls[-1])
    assert summary is not None
    for line in _pinned_lines(PLAYGROUND_FACTS):
        assert line in summary
    for value in RUN_API_FACTS.values():
        assert value not in summary
    assert "The model got: summary covering" in conversations.playground.agent_logs[-1]


def test_summary_calls_never_reach_the_playground_stream(conversations: Conversations) -> None:
    assert conversations.playground.fold_calls
    # The server folds after the reply, in the background: those summary calls reach no stream either.
    assert any("Folded after the previous reply" in logs for logs in conversations.playground.agent_logs)
    assert conversations.playground.streamed
    streamed = "".join(conversations.playground.streamed)
    assert "pinned" not in streamed
    assert "summary" not in streamed


def test_run_api_session_never_sees_the_playground_session(conversations: Conversations) -> None:
    # The last run API turn ran after the Playground session folded into its summary.
    assert conversations.playground.fold_calls
    assert _summary_message(conversations.run_api.agent_calls[-1]) is not None
    everything_sent = json.dumps(conversations.run_api.agent_calls)
    for value in PLAYGROUND_FACTS.values():
        assert value not in everything_sent


def test_each_session_id_has_its_own_summary_row(langflow_server: LangflowServer, conversations: Conversations) -> None:
    engine = create_engine(langflow_server.database_url)
    try:
        with Session(engine) as session:
            rows = session.exec(
                select(SessionMemoryStateTable).where(
                    SessionMemoryStateTable.flow_id == uuid.UUID(conversations.flow_id)
                )
            ).all()
    finally:
        engine.dispose()
    states = {row.session_id: row for row in rows}
    assert sorted(states) == sorted([conversations.run_api.session_id, conversations.playground.session_id])
    assert states[conversations.run_api.session_id].pinned == RUN_API_FACTS
    assert states[conversations.playground.session_id].pinned == PLAYGROUND_FACTS
    assert "PRJ-456" not in states[conversations.run_api.session_id].summary
    assert "PRJ-123" not in states[conversations.playground.session_id].summary
