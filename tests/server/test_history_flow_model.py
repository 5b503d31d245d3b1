"""A Summarizing Message History with no Summary Model picked folds with the flow's own language model: the ready memory
chatbot as exported, its Summary Model emptied, its Language Model's OpenAI model sending to the loopback provider
server. The fold goes to that model, with the Language Model's API Key, a key typed in the field or the name of the
user's global variable, and the summary covers the folded messages."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from tests.support.flow_files import LANGUAGE_MODEL_TYPE, history_template, load_memory_chatbot_flow, node_of_type
from tests.support.provider_servers import FOLD_ANSWER, Providers
from tests.support.server_chat import ServerChat
from tests.support.server_fixtures import LangflowServer

FLOW_MODEL = "gpt-4o-mini"
N_MESSAGES = 2
FOLD_BATCH = 2
TURNS = 5
KEY_VARIABLE = "FLOW_MODEL_TEST_KEY"


def first(turn: int) -> str:
    return f"Message {turn}: the deployment of project PRJ-{turn} fails."


def flow_with_no_summary_model(api_key: str, *, load_from_db: bool) -> dict[str, Any]:
    """The `data` of the memory chatbot as exported, its Summary Model empty, the Language Model's key set."""
    flow = load_memory_chatbot_flow()
    history = history_template(flow)
    history["summary_model"]["value"] = []
    values = {"n_messages": N_MESSAGES, "fold_batch": FOLD_BATCH, "history_token_budget": 0}
    for name, value in values.items():
        history[name]["value"] = value
    model = node_of_type(flow, LANGUAGE_MODEL_TYPE)["data"]["node"]["template"]
    assert [entry["name"] for entry in model["model"]["value"]] == [FLOW_MODEL]
    model["api_key"]["value"] = api_key
    model["api_key"]["load_from_db"] = load_from_db
    return flow["data"]


def _user_variable(server: LangflowServer, name: str, value: str) -> None:
    with server.client(token=server.superuser_token) as client:
        listed = client.get("/api/v1/variables/").raise_for_status().json()
        if any(variable["name"] == name for variable in listed):
            return
        body = {"name": name, "value": value, "type": "Credential", "default_fields": []}
        client.post("/api/v1/variables/", json=body).raise_for_status()


@pytest.mark.parametrize("key", ["typed", "global_variable"])
def test_with_no_summary_model_the_history_folds_with_the_flows_language_model(
    langflow_server: LangflowServer, loopback_providers: Providers, key: str
) -> None:
    server = langflow_server
    if key == "typed":
        data = flow_with_no_summary_model("any-key", load_from_db=False)
    else:
        _user_variable(server, KEY_VARIABLE, "any-key")
        data = flow_with_no_summary_model(KEY_VARIABLE, load_from_db=True)
    chat = ServerChat.create(server, server.superuser_token, server.superuser_api_key, data=data)
    start, session_id = len(loopback_providers.requests), f"flow-model-{uuid.uuid4().hex[:8]}"

    replies = [chat.say(session_id, first(turn)) for turn in range(1, TURNS + 1)]

    assert all(reply.startswith("Reply ") for reply in replies), replies
    folds = [r for r in loopback_providers.requests[start:] if r.wire == "openai" and r.is_fold]
    assert folds, "no fold reached the flow's model"
    assert {fold.body["model"] for fold in folds} == {FLOW_MODEL}
    assert not any(fold.body.get("stream") for fold in folds)
    state = chat.state(session_id)
    assert state is not None
    [summary] = state["summaries"]
    assert summary["failed_folds"] == 0
    assert summary["summary_model"] == FLOW_MODEL
    assert summary["summary"] in FOLD_ANSWER
    stored = chat.messages(session_id)
    folded = summary["folded_count"]
    assert folded >= FOLD_BATCH
    assert summary["cursor"]["message_id"] == stored[folded - 1]["id"], "the summary covers the oldest messages"
    assert first(1) in str(folds[0].body["messages"]), "the first fold folded the first message"
