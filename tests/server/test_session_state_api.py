"""The API to inspect and reset a session's summary, served by a real `langflow run` through `langflow.plugins`."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from langflow_summarizing_agent.wiring.api import MAX_ID_LENGTH, ROUTE_PREFIX
from tests.support.server_chat import ServerChat, summary_rows
from tests.support.server_fixtures import LangflowServer


@pytest.fixture(scope="module")
def chat(langflow_server: LangflowServer) -> ServerChat:
    return ServerChat.create(langflow_server, langflow_server.superuser_token, langflow_server.superuser_api_key)


def state_url(session_id: str) -> str:
    return f"{ROUTE_PREFIX}/sessions/{session_id}/summary"


def get_state(chat: ServerChat, session_id: str, *, token: str | None = None, **params: str):
    with chat.server.client(token=token or chat.token) as client:
        return client.get(state_url(session_id), params={"flow_id": chat.flow_id, **params})


def reset_state(chat: ServerChat, session_id: str, *, token: str | None = None, **params: str):
    with chat.server.client(token=token or chat.token) as client:
        return client.delete(state_url(session_id), params={"flow_id": chat.flow_id, **params})


def test_read_returns_summary_cursor_and_counters(chat: ServerChat) -> None:
    session_id = chat.new_session()
    # The fold after the second reply planned the third turn: all but its window (the second exchange).
    first_reply = chat.messages(session_id)[1]

    response = get_state(chat, session_id)

    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["flow_id"], body["session_id"]) == (chat.flow_id, session_id)
    [state] = body["summaries"]
    assert state["summary"].startswith(f"- folded {session_id}-1\n- folded echo: {session_id}-1")
    assert state["cursor"]["message_id"] == first_reply["id"]
    assert state["cursor"]["timestamp"].startswith(first_reply["timestamp"][:19].replace(" ", "T"))
    assert (state["context_id"], state["folded_count"], state["version"]) == ("", 2, 1)
    assert state["absorbed_count"] == state["folded_count"], "the older name stays as an alias"
    assert state["summary_model"] == "FakeChatModel"
    assert state["pinned"] == {}
    assert state["updated_at"]


def test_an_api_key_of_the_flow_owner_works_like_a_token(chat: ServerChat) -> None:
    session_id = chat.new_session()

    with chat.server.client(api_key=chat.api_key) as client:
        read = client.get(state_url(session_id), params={"flow_id": chat.flow_id})
        reset = client.delete(state_url(session_id), params={"flow_id": chat.flow_id})

    assert read.status_code == 200, read.text
    assert read.json()["summaries"][0]["version"] == 1
    assert reset.json()["deleted"] == 1


def test_read_narrows_to_a_context(chat: ServerChat) -> None:
    session_id = chat.new_session()

    assert get_state(chat, session_id, context_id="").json()["summaries"][0]["context_id"] == ""
    missing = get_state(chat, session_id, context_id="other")
    assert missing.status_code == 404
    assert (
        missing.json()["detail"] == f"Session {session_id!r} of flow {chat.flow_id} has no summary in context 'other'"
    )


def test_reset_deletes_the_state_and_the_next_turn_rebuilds_it(chat: ServerChat) -> None:
    session_id = chat.new_session()

    response = reset_state(chat, session_id)

    assert response.status_code == 200, response.text
    assert response.json() == {"flow_id": chat.flow_id, "session_id": session_id, "deleted": 1}
    assert summary_rows(chat.server, chat.flow_id, session_id) == []
    assert get_state(chat, session_id).status_code == 404
    assert len(chat.messages(session_id)) == 4

    reply = chat.say(session_id, "after reset")
    # Nothing was lost meanwhile: the turn sent the first exchange word for word, and folded it after its reply.
    assert f"{session_id}-1 ||" in reply
    [rebuilt] = summary_rows(chat.server, chat.flow_id, session_id)
    assert rebuilt["version"] == 1
    assert rebuilt["summary"].startswith(f"- folded {session_id}-1\n")


def test_another_users_flow_is_not_found_like_a_missing_one(chat: ServerChat, langflow_server: LangflowServer) -> None:
    session_id = chat.new_session()
    intruder = langflow_server.create_user()
    missing_flow = str(uuid.uuid4())

    with langflow_server.client(token=intruder.token) as client:
        foreign_read = client.get(state_url(session_id), params={"flow_id": chat.flow_id})
        foreign_reset = client.delete(state_url(session_id), params={"flow_id": chat.flow_id})
        missing_read = client.get(state_url(session_id), params={"flow_id": missing_flow})

    assert foreign_read.status_code == foreign_reset.status_code == missing_read.status_code == 404
    assert foreign_read.json() == foreign_reset.json() == {"detail": f"Flow {chat.flow_id} not found"}
    assert missing_read.json() == {"detail": f"Flow {missing_flow} not found"}
    assert len(summary_rows(chat.server, chat.flow_id, session_id)) == 1


THIS_FLOW = "<the test flow>"


@pytest.mark.parametrize(
    ("session_id", "query", "message"),
    [
        ("s", {"flow_id": "not-a-uuid"}, "flow_id must be a flow's UUID"),
        ("s", {}, "flow_id is required"),
        (" ", {"flow_id": THIS_FLOW}, "session_id must not be empty or blank"),
        (
            "x" * (MAX_ID_LENGTH + 1),
            {"flow_id": THIS_FLOW},
            f"session_id is {MAX_ID_LENGTH + 1} characters long; at most {MAX_ID_LENGTH}",
        ),
        ("s", {"flow_id": THIS_FLOW, "context_id": "c" * (MAX_ID_LENGTH + 1)}, "context_id is"),
    ],
)
def test_invalid_ids_are_refused_with_what_is_wrong(
    chat: ServerChat, session_id: str, query: dict[str, str], message: str
) -> None:
    params = {key: chat.flow_id if value == THIS_FLOW else value for key, value in query.items()}
    with chat.server.client(token=chat.token) as client:
        responses = [
            client.get(state_url(session_id), params=params),
            client.delete(state_url(session_id), params=params),
        ]
    for response in responses:
        assert response.status_code == 422, response.text
        assert message in response.json()["detail"]


def test_refused_without_valid_credentials(chat: ServerChat) -> None:
    with chat.server.client() as client:
        anonymous = client.get(state_url("s"), params={"flow_id": chat.flow_id})
    with chat.server.client(token="not-a-token") as client:
        bad_token = client.delete(state_url("s"), params={"flow_id": chat.flow_id})

    # Langflow answers a request without credentials 403 ("No authentication credentials provided").
    assert anonymous.status_code in {401, 403}
    assert bad_token.status_code == 401


def test_the_0_1_0_path_answers_the_same_and_is_deprecated(chat: ServerChat) -> None:
    session_id = chat.new_session()
    old_path = f"{ROUTE_PREFIX}/sessions/{session_id}/state"

    with chat.server.client(token=chat.token) as client:
        new = client.get(state_url(session_id), params={"flow_id": chat.flow_id}).json()
        old = client.get(old_path, params={"flow_id": chat.flow_id}).json()
        schema = client.get("/openapi.json").json()
        reset = client.delete(old_path, params={"flow_id": chat.flow_id}).json()

    assert old == new
    assert new["states"] == new["summaries"], "the older name stays as an alias"
    assert schema["paths"][old_path.replace(session_id, "{session_id}")]["get"]["deprecated"] is True
    assert "deprecated" not in schema["paths"][state_url("{session_id}")]["get"]
    assert reset["deleted"] == 1


def test_a_summarizing_message_historys_summary_is_read_and_reset_through_the_same_api(
    langflow_server: LangflowServer, tmp_path: Path
) -> None:
    server = langflow_server
    chat = ServerChat.of_kind(server, server.superuser_token, server.superuser_api_key, "message_history", tmp_path)
    session_id = chat.new_session()
    [row] = summary_rows(server, chat.flow_id, session_id)

    read = get_state(chat, session_id)

    assert read.status_code == 200, read.text
    [state] = read.json()["summaries"]
    assert (state["summary"], state["folded_count"], state["version"]) == (row["summary"], row["absorbed_count"], 1)
    assert state["summary"].startswith(f"- folded {session_id}-1\n")
    assert state["cursor"]["message_id"] == str(row["covered_until_message_id"])
    assert state["summary_model"] == "FakeChatModel"

    reset = reset_state(chat, session_id)

    assert reset.json() == {"flow_id": chat.flow_id, "session_id": session_id, "deleted": 1}
    assert summary_rows(server, chat.flow_id, session_id) == []
    assert len(chat.messages(session_id)) == 2 * chat.first_state_turns
