"""Isolation over HTTP: another user never reads, resets or deletes a state row, through the state API and the
monitor's delete route of a real `langflow run`, on the Summarizing Agent's flow and on the memory chatbot's."""

from __future__ import annotations

from typing import Any

import pytest

from langflow_summarizing_agent.wiring.api import ROUTE_PREFIX
from tests.support.server_chat import FLOW_KINDS, ServerChat, summary_rows
from tests.support.server_fixtures import LangflowServer

# Through the HTTP API and the monitor's delete route


def state_url(session_id: str) -> str:
    return f"{ROUTE_PREFIX}/sessions/{session_id}/summary"


@pytest.fixture(scope="module", params=FLOW_KINDS)
def two_owners(
    langflow_server: LangflowServer, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> tuple[ServerChat, ServerChat, Any]:
    """The superuser's flow and another user's flow, both of one kind on the shared server."""
    server, records = langflow_server, tmp_path_factory.mktemp("isolation")
    owner = ServerChat.of_kind(server, server.superuser_token, server.superuser_api_key, request.param, records)
    other = server.create_user()
    intruder = ServerChat.of_kind(server, other.token, server.create_api_key(other.token), request.param, records)
    return owner, intruder, other


def test_another_user_reads_resets_and_deletes_only_their_own_state_over_http(
    two_owners: tuple[ServerChat, ServerChat, Any],
) -> None:
    owner, intruder, intruder_user = two_owners
    session_id = owner.new_session()
    [owner_row] = summary_rows(owner.server, owner.flow_id, session_id)
    for turn in range(1, 4):
        intruder.say(session_id, f"intruder turn {turn}")
    seen_by_model = intruder.model_inputs()
    assert any("intruder turn 3" in text for text in seen_by_model)
    assert not [text for text in seen_by_model if f"{session_id}-" in text], (
        "the intruder's model never sees the owner's messages or summary"
    )
    [intruder_row] = summary_rows(intruder.server, intruder.flow_id, session_id)
    assert str(intruder_row["user_id"]) == intruder_user.id

    with intruder.server.client(token=intruder.token) as client:
        foreign = [
            client.get(state_url(session_id), params={"flow_id": owner.flow_id}),
            client.delete(state_url(session_id), params={"flow_id": owner.flow_id}),
            client.delete(state_url(session_id), params={"flow_id": owner.flow_id, "context_id": ""}),
        ]
        own = client.get(state_url(session_id), params={"flow_id": intruder.flow_id})
    assert [response.status_code for response in foreign] == [404, 404, 404]
    assert own.status_code == 200, own.text
    [seen] = own.json()["summaries"]
    assert seen["user_id"] == intruder_user.id
    assert f"{session_id}-" not in seen["summary"]

    with owner.server.client(token=owner.token) as client:
        other_context = client.delete(state_url(session_id), params={"flow_id": owner.flow_id, "context_id": "ctx"})
    assert other_context.json()["deleted"] == 0

    with intruder.server.client(token=intruder.token) as client:
        own_reset = client.delete(state_url(session_id), params={"flow_id": intruder.flow_id})
        intruder.say(session_id, "intruder turn 4")
        intruder.say(session_id, "intruder turn 5")
        deleted = client.delete(f"/api/v1/monitor/messages/session/{session_id}")
    assert own_reset.json()["deleted"] == 1
    assert deleted.status_code == 204, deleted.text
    assert intruder.messages(session_id) == []
    assert summary_rows(intruder.server, intruder.flow_id, session_id) == []

    assert summary_rows(owner.server, owner.flow_id, session_id) == [owner_row]
    assert len(owner.messages(session_id)) == 2 * owner.first_state_turns
