"""Chat with the Summarizing Agent on the real test server, and read its state rows from the server's database.

The flow is the ready flow as exported (Chat Input -> Summarizing Agent -> Chat Output, the canvas's node ids and
types), posted to `POST /api/v1/flows/`, with `FakeChatModelComponent` connected as the agent's model: a reply is
"echo:" and the user-role messages the agent sent (the summary message is one), and a fold lists each folded message
on a line "- folded <text>". With `FAST_FOLDS`
a state row appears after the second reply, from the fold that runs then: it plans the third turn, whose window is the
second exchange, so it covers the first exchange (two messages) and the cursor is the first reply. `say` returns once
that fold has saved.

The memory chatbot's flow (`memory_chatbot_flow_data`) folds one turn later at the same settings: its fold after the
flow plans the turn that just ran, whose window is Number of Messages and the input, so its first state row appears
after the third reply (`ServerChat.first_state_turns`).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import sqlalchemy as sa

from langflow_summarizing_agent.storage.migrate import sync_database_url
from langflow_summarizing_agent.storage.summaries import SUMMARIES
from tests.support.flow_files import (
    HISTORY_TYPE,
    agent_node,
    load_memory_chatbot_flow,
    load_support_flow,
    memory_chatbot_offline,
    node_of_type,
    with_offline_model,
)
from tests.support.server_fixtures import LangflowServer

FAST_FOLDS = {
    "summarize_older_messages": True,
    "n_messages": 3,
    "fold_batch": 2,
    "history_token_budget": 0,
    "add_current_date_tool": False,
    "add_calculator_tool": False,
}
TURNS_TO_FIRST_STATE = 2


def summarizing_flow_data(record_path: Path | None = None, **agent_settings: Any) -> dict[str, Any]:
    """The `data` of a flow (nodes and edges) as the server stores it: the ready flow with `FAST_FOLDS` (and
    `agent_settings`) on its agent, whose model records to `record_path` if given."""
    flow = with_offline_model(load_support_flow(), record_path or Path(""), **{**FAST_FOLDS, **agent_settings})
    model = node_of_type(flow, "FakeChatModel")["data"]["node"]["template"]
    for name, value in {"reply": "echo:", "echo": "user_messages", "fold_answer": "list"}.items():
        model[name]["value"] = value
    if record_path is None:
        model["record_path"]["value"] = ""
    return flow["data"]


AGENT_ONLY_FIELDS = ("add_current_date_tool", "add_calculator_tool")


def memory_chatbot_flow_data(record_path: Path, **history_settings: Any) -> dict[str, Any]:
    """The `data` of the shipped memory chatbot flow with `FAST_FOLDS` (and `history_settings`) on its Summarizing
    Message History, and the fake chat model as both its Language Model and its Summary Model: a reply is "echo:"
    and the prompt's last line (the customer's new message), a fold lists each folded message as in
    `summarizing_flow_data`. The model records its calls to `record_path`."""
    settings = {key: value for key, value in FAST_FOLDS.items() if key not in AGENT_ONLY_FIELDS}
    flow = memory_chatbot_offline(load_memory_chatbot_flow(), record_path, **{**settings, **history_settings})
    model = node_of_type(flow, "FakeChatModel")["data"]["node"]["template"]
    for name, value in {"reply": "echo:", "echo": "question_line", "fold_answer": "list"}.items():
        model[name]["value"] = value
    return flow["data"]


FLOW_KINDS = ("agent", "message_history")
"""The two flows a server test runs on: the Summarizing Agent's (`summarizing_flow_data`) and the memory chatbot's
(`memory_chatbot_flow_data`)."""


def flow_data_of(kind: str, record_path: Path) -> dict[str, Any]:
    return summarizing_flow_data(record_path) if kind == "agent" else memory_chatbot_flow_data(record_path)


def agent_node_id(data: dict[str, Any]) -> str:
    """The agent node's id in a flow's `data`, as the canvas made it."""
    return str(agent_node({"data": data})["id"])


def agent_template(data: dict[str, Any]) -> dict[str, Any]:
    """The agent node's template in a flow's `data`."""
    return agent_node({"data": data})["data"]["node"]["template"]


@dataclass
class ServerChat:
    """One flow on the server, owned by the user of `token`, run with that user's `api_key`."""

    server: LangflowServer
    token: str
    api_key: str
    flow_id: str
    first_state_turns: int = TURNS_TO_FIRST_STATE
    """Turns of a new session until its first state row: one more on the memory chatbot's flow."""
    record_path: Path | None = None
    """Where the flow's model records its calls, for flows made by `of_kind`."""

    @classmethod
    def of_kind(cls, server: LangflowServer, token: str, api_key: str, kind: str, record_dir: Path) -> ServerChat:
        """A new flow of `kind` (one of `FLOW_KINDS`) whose model records its calls in `record_dir`."""
        record_path = record_dir / f"{kind}-{uuid.uuid4().hex[:8]}-calls.jsonl"
        chat = cls.create(server, token, api_key, data=flow_data_of(kind, record_path))
        chat.record_path = record_path
        return chat

    def model_inputs(self) -> list[str]:
        """The text of every message the flow's model received on calls that were no fold, oldest first."""
        assert self.record_path is not None, "made without a record path"
        if not self.record_path.exists():
            return []
        records = [json.loads(line) for line in self.record_path.read_text(encoding="utf-8").splitlines() if line]
        return [m["content"] for record in records if record["kind"] == "agent" for m in record["messages"]]

    @classmethod
    def create(
        cls,
        server: LangflowServer,
        token: str,
        api_key: str,
        *,
        data: dict[str, Any] | None = None,
        **agent_settings: Any,
    ) -> ServerChat:
        """A new flow of `data`, by default `summarizing_flow_data(**agent_settings)`."""
        with server.client(token=token) as client:
            response = client.post(
                "/api/v1/flows/",
                json={
                    "name": f"summarizing-{uuid.uuid4().hex[:8]}",
                    "data": data if data is not None else summarizing_flow_data(**agent_settings),
                },
            )
        response.raise_for_status()
        history = data is not None and any(node["data"]["type"] == HISTORY_TYPE for node in data["nodes"])
        first_state_turns = TURNS_TO_FIRST_STATE + 1 if history else TURNS_TO_FIRST_STATE
        return cls(server, token, api_key, response.json()["id"], first_state_turns)

    def say(self, session_id: str, text: str, tweaks: dict[str, Any] | None = None) -> str:
        """One turn through `POST /api/v1/run/{flow_id}`, with `tweaks` if given; returns the agent's reply."""
        response = self.run(session_id, text, tweaks)
        assert response.status_code == 200, response.text
        self.state(session_id)
        return reply_text(response.json())

    def run(self, session_id: str, text: str, tweaks: dict[str, Any] | None = None) -> httpx.Response:
        """One turn through `POST /api/v1/run/{flow_id}`: the server's answer as it is, a failed turn's too."""
        body: dict[str, Any] = {
            "input_value": text,
            "input_type": "chat",
            "output_type": "chat",
            "session_id": session_id,
        }
        if tweaks:
            body["tweaks"] = tweaks
        with self.server.client(api_key=self.api_key) as client:
            return client.post(f"/api/v1/run/{self.flow_id}", json=body)

    def state(self, session_id: str) -> dict[str, Any] | None:
        """The session's state as the API reads it, None when it has none; the read waits for the fold after the
        last reply, so a turn's fold is saved when `say` returns."""
        with self.server.client(token=self.token) as client:
            response = client.get(
                f"/api/v1/summarizing-agent/sessions/{session_id}/summary", params={"flow_id": self.flow_id}
            )
        if response.status_code == 404:
            return None
        response.raise_for_status()
        return response.json()

    def new_session(self, turns: int | None = None) -> str:
        """A fresh session with `turns` turns "<session>-1", "<session>-2", ...; by default (`first_state_turns`)
        it has a state row."""
        session_id = f"s-{uuid.uuid4().hex[:8]}"
        for turn in range(1, (turns or self.first_state_turns) + 1):
            self.say(session_id, f"{session_id}-{turn}")
        return session_id

    def messages(self, session_id: str) -> list[dict[str, Any]]:
        """The session's messages, oldest first, as the monitor API lists them."""
        with self.server.client(token=self.token) as client:
            response = client.get(
                "/api/v1/monitor/messages", params={"flow_id": self.flow_id, "session_id": session_id}
            )
        response.raise_for_status()
        return response.json()


def reply_text(run_answer: dict[str, Any]) -> str:
    """The agent's reply in the answer of `POST /api/v1/run/{flow_id}`."""
    return run_answer["outputs"][0]["outputs"][0]["results"]["message"]["text"]


@contextmanager
def server_database(server: LangflowServer) -> Iterator[sa.Connection]:
    engine = sa.create_engine(sync_database_url(server.database_url), poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as connection:
            yield connection
    finally:
        engine.dispose()


def summary_rows(
    server: LangflowServer, flow_id: str | uuid.UUID, session_id: str | None = None
) -> list[dict[str, Any]]:
    """Summary rows of a flow (and session) in the server's database, read directly."""
    stmt = sa.select(SUMMARIES).where(SUMMARIES.c.flow_id == uuid.UUID(str(flow_id))).order_by(SUMMARIES.c.session_id)
    if session_id is not None:
        stmt = stmt.where(SUMMARIES.c.session_id == session_id)
    with server_database(server) as connection:
        return [dict(row._mapping) for row in connection.execute(stmt)]


def playground_turn(client: Any, flow_id: str, session_id: str, text: str) -> list[dict[str, Any]]:
    """One Playground turn through the build endpoint; the events the Playground receives, none of them an error."""
    response = client.post(
        f"/api/v1/build/{flow_id}/flow",
        params={"event_delivery": "direct"},
        json={"inputs": {"input_value": text, "session": session_id}},
    )
    assert response.status_code == 200, response.text[:2000]
    events = [json.loads(line) for line in response.text.splitlines() if line.strip()]
    assert [event for event in events if event["event"] == "error"] == []
    return events
