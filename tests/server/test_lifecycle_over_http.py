"""A summary goes wherever its messages go, on a real server: every monitor delete and rename endpoint of a real
`langflow run` over HTTP, checked against the state rows in the server's database, on the Summarizing Agent's flow
and on the memory chatbot's (the Summarizing Message History's).
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest

from tests.support.server_chat import FLOW_KINDS, TURNS_TO_FIRST_STATE, ServerChat
from tests.support.server_chat import summary_rows as server_summary_rows
from tests.support.server_fixtures import LangflowServer

# Every delete and rename path of a real server, over HTTP


def new_chat(server: LangflowServer, kind: str, record_dir: Any) -> ServerChat:
    return ServerChat.of_kind(server, server.superuser_token, server.superuser_api_key, kind, record_dir)


@pytest.fixture(scope="module", params=FLOW_KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture(scope="module")
def chat(langflow_server: LangflowServer, kind: str, tmp_path_factory: pytest.TempPathFactory) -> ServerChat:
    return new_chat(langflow_server, kind, tmp_path_factory.mktemp("lifecycle"))


@pytest.fixture(scope="module")
def bystander(chat: ServerChat) -> str:
    """A session of the same flow that no test deletes: its state must survive every other session's delete."""
    session_id = chat.new_session()
    assert len(server_summary_rows(chat.server, chat.flow_id, session_id)) == 1
    return session_id


def assert_bystander_kept(chat: ServerChat, bystander: str) -> None:
    assert len(server_summary_rows(chat.server, chat.flow_id, bystander)) == 1


def test_session_delete_over_http_deletes_its_state(chat: ServerChat, bystander: str) -> None:
    session_id = chat.new_session()
    assert len(server_summary_rows(chat.server, chat.flow_id, session_id)) == 1

    with chat.server.client(token=chat.token) as client:
        response = client.delete(f"/api/v1/monitor/messages/session/{session_id}")

    assert response.status_code == 204, response.text
    assert server_summary_rows(chat.server, chat.flow_id, session_id) == []
    assert_bystander_kept(chat, bystander)


def test_bulk_sessions_delete_over_http_deletes_their_states(chat: ServerChat, bystander: str) -> None:
    sessions = [chat.new_session(), chat.new_session()]

    with chat.server.client(token=chat.token) as client:
        response = client.request("DELETE", "/api/v1/monitor/messages/sessions", json=sessions)

    assert response.status_code == 200, response.text
    assert response.json()["deleted_count"] == 2
    assert [row for session_id in sessions for row in server_summary_rows(chat.server, chat.flow_id, session_id)] == []
    assert_bystander_kept(chat, bystander)


def test_message_delete_over_http_discards_the_state_only_when_a_folded_message_goes(chat: ServerChat) -> None:
    # Three exchanges: the folds after the second and third replies cover the first two; the third is unfolded. The
    # memory chatbot's flow, which folds a turn later, gets four exchanges; its folds cover the first five messages.
    session_id = chat.new_session(turns=chat.first_state_turns + 1)
    [state] = server_summary_rows(chat.server, chat.flow_id, session_id)
    messages = chat.messages(session_id)
    cursor_index = [m["id"] for m in messages].index(str(state["covered_until_message_id"]))
    assert cursor_index == (3 if chat.first_state_turns == TURNS_TO_FIRST_STATE else 4)
    assert len(messages) - cursor_index > 2, "the last exchange is not folded"

    def delete_messages(*ids: str) -> None:
        with chat.server.client(token=chat.token) as client:
            response = client.request("DELETE", "/api/v1/monitor/messages", json=list(ids))
        assert response.status_code == 204, response.text

    delete_messages(messages[-1]["id"], messages[-2]["id"])
    assert [row["version"] for row in server_summary_rows(chat.server, chat.flow_id, session_id)] == [state["version"]]

    delete_messages(messages[0]["id"])
    assert server_summary_rows(chat.server, chat.flow_id, session_id) == []
    assert len(chat.messages(session_id)) == len(messages) - 3

    # Later turns rebuild the summary from what is left (a fold needs two older messages again); the deleted
    # first message is not in it.
    chat.say(session_id, "after the delete")
    chat.say(session_id, "once more")
    [rebuilt] = server_summary_rows(chat.server, chat.flow_id, session_id)
    if chat.first_state_turns == TURNS_TO_FIRST_STATE:
        # Folded after each of the two replies: first the three older messages left, then two more.
        assert rebuilt["version"] == 2
    lines = rebuilt["summary"].splitlines()
    assert lines[:2] == [f"- folded {messages[1]['text']}".rstrip(), f"- folded {session_id}-2"]
    assert f"- folded {session_id}-1" not in lines


def test_flow_delete_over_http_deletes_every_state_of_the_flow(
    langflow_server: LangflowServer, kind: str, tmp_path: Any
) -> None:
    doomed = new_chat(langflow_server, kind, tmp_path)
    sessions = [doomed.new_session(), doomed.new_session()]
    assert len(server_summary_rows(langflow_server, doomed.flow_id)) == len(sessions)

    with langflow_server.client(token=doomed.token) as client:
        response = client.delete(f"/api/v1/flows/{doomed.flow_id}")

    assert response.status_code == 200, response.text
    assert server_summary_rows(langflow_server, doomed.flow_id) == []


def test_rename_over_http_moves_the_state_and_the_next_turn_uses_it(chat: ServerChat, kind: str) -> None:
    session_id = chat.new_session()
    [before] = server_summary_rows(chat.server, chat.flow_id, session_id)
    renamed = f"{session_id}-renamed"

    with chat.server.client(token=chat.token) as client:
        response = client.patch(f"/api/v1/monitor/messages/session/{session_id}", params={"new_session_id": renamed})

    assert response.status_code == 200, response.text
    assert server_summary_rows(chat.server, chat.flow_id, session_id) == []
    [moved] = server_summary_rows(chat.server, chat.flow_id, renamed)
    assert {key: moved[key] for key in ("id", "summary", "covered_until_message_id", "version")} == {
        key: before[key] for key in ("id", "summary", "covered_until_message_id", "version")
    }

    reply = chat.say(renamed, "in the renamed session")

    # The model got the moved summary: the agent's model echoes every user-role message it got, the summary
    # message first; the memory chatbot's model got it in its prompt.
    got = reply if kind == "agent" else chat.model_inputs()[-1]
    assert f"folded {session_id}-1" in got
    [after] = server_summary_rows(chat.server, chat.flow_id, renamed)
    # The fold after the turn compare-and-swapped the moved row (version 1 -> 2) instead of starting a new one.
    assert (after["id"], after["version"]) == (before["id"], 2)
    assert after["absorbed_count"] > before["absorbed_count"]


def test_shared_session_delete_over_http_deletes_the_state_of_the_public_run(
    chat: ServerChat, langflow_server: LangflowServer
) -> None:
    with langflow_server.client(token=chat.token) as client:
        client.patch(f"/api/v1/flows/{chat.flow_id}", json={"access_type": "PUBLIC"}).raise_for_status()
        me = client.get("/api/v1/users/whoami").json()["id"]
        client.cookies.set("client_id", f"client-{uuid.uuid4().hex[:8]}")
        for turn in range(1, 4):
            client.post(
                f"/api/v1/build_public_tmp/{chat.flow_id}/flow",
                params={"event_delivery": "direct"},
                json={"inputs": {"input_value": f"public-{turn}", "session": "shared"}},
            ).raise_for_status()
    # Langflow stores a signed-in user's public runs under a virtual flow, with the session id namespaced to it.
    virtual_flow = uuid.uuid5(uuid.NAMESPACE_DNS, f"user:{me}_{chat.flow_id}")
    stored_session = f"{virtual_flow}:shared"
    # The fold runs after the last reply, in the background.
    rows = wait_for(lambda: server_summary_rows(langflow_server, virtual_flow), "the public run's state row")
    assert [row["session_id"] for row in rows] == [stored_session]

    with langflow_server.client(token=chat.token) as client:
        response = client.delete(
            f"/api/v1/monitor/messages/shared/session/{stored_session}", params={"source_flow_id": chat.flow_id}
        )

    assert response.status_code == 204, response.text
    assert server_summary_rows(langflow_server, virtual_flow) == []


def wait_for(read: Any, what: str, timeout: float = 60.0) -> Any:
    """`read()` once it returns something, polled until `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = read()
        if found:
            return found
        time.sleep(0.1)
    pytest.fail(f"no {what} after {timeout:g} s")
