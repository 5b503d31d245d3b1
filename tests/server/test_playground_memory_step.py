"""The memory step over the Playground's build endpoint on the shared real server: the reply carries it, the stream and
the stored rows carry no summary text nor pinned value.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from langflow_summarizing_agent.engine.prompt import SUMMARY_PREFIX
from langflow_summarizing_agent.wiring.agent_turn import MEMORY_STEP_NAME, MEMORY_STEP_TITLE
from tests.support.flow_files import agent_node, load_support_flow, with_offline_model
from tests.support.server_chat import playground_turn
from tests.support.server_fixtures import LangflowServer

PINNED_VALUES = ("PRJ-123", "EU cluster")


@pytest.fixture(scope="module")
def playground_events(
    langflow_server: LangflowServer, tmp_path_factory: pytest.TempPathFactory
) -> tuple[list[list[dict[str, Any]]], list[dict[str, Any]]]:
    """The events of 8 Playground turns of the ready flow (offline model), and the session's stored messages."""
    record_path: Path = tmp_path_factory.mktemp("memory-step") / "calls.jsonl"
    flow = with_offline_model(load_support_flow(), record_path, n_messages=4, fold_batch=4)
    session_id = f"playground-{uuid.uuid4().hex[:8]}"
    turns = []
    with langflow_server.client(token=langflow_server.superuser_token) as client:
        created = client.post("/api/v1/flows/", json=flow)
        assert created.status_code == 201, created.text[:2000]
        flow_id = created.json()["id"]
        turns.append(
            playground_turn(client, flow_id, session_id, f"Hello, this is Initech. Project {PINNED_VALUES[0]}.")
        )
        for turn in range(1, 8):
            turns.append(playground_turn(client, flow_id, session_id, f"Step {turn}: still failing on the EU cluster."))
        stored = client.get("/api/v1/monitor/messages", params={"flow_id": flow_id, "session_id": session_id})
    assert agent_node(flow)["id"]
    return turns, stored.raise_for_status().json()


def _steps_in(message: dict[str, Any]) -> list[dict[str, Any]]:
    """A reply's content blocks as the Playground receives them: grouped under "Agent Steps", or flat."""
    blocks = message.get("content_blocks") or []
    return [item for block in blocks for item in (block.get("contents") or [block])]


def _agent_messages(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e["data"] for e in events if e["event"] == "add_message" and e["data"].get("sender") != "User"]


def test_the_playground_gets_the_memory_step_in_the_reply(playground_events):
    turns, _ = playground_events

    last_reply = _agent_messages(turns[-1])[-1]
    step = _steps_in(last_reply)[0]
    assert (step["type"], step["name"], step["header"]["title"]) == ("tool_use", MEMORY_STEP_NAME, MEMORY_STEP_TITLE)
    assert step["output"].startswith("Memory:\n\n- summary covers ")
    assert "pinned: project_id" in step["output"]
    assert [b for b in _steps_in(last_reply) if b.get("name") == MEMORY_STEP_NAME] == [step]


def test_the_playground_stream_and_the_stored_rows_carry_no_summary(playground_events):
    turns, stored = playground_events

    chat_events = [e for events in turns for e in events if e["event"] in ("add_message", "token")]
    assert SUMMARY_PREFIX not in json.dumps(chat_events)
    assert all(PINNED_VALUES[0] not in json.dumps(message) for events in turns for message in _agent_messages(events))
    assert SUMMARY_PREFIX not in json.dumps(stored)
    replies = [m for m in stored if m["sender"] != "User"]
    assert len(replies) == 8
    assert _steps_in(replies[-1])[0]["name"] == MEMORY_STEP_NAME
    assert all(PINNED_VALUES[0] not in json.dumps(reply) for reply in replies)
