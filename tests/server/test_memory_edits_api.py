"""Users see and correct a session's memory through the session summary API, served by a real `langflow run`: seed
pinned facts before the first turn, edit the summary and its pinned facts by compare-and-swap on the ETag, list the
versions with what each fold cost, roll back, and a session delete leaves no version behind. The flow is the ready
flow as exported, with Pinned Keys `customer, cluster`; turns go through the run API."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
import sqlalchemy as sa

from langflow_summarizing_agent.storage.versions import VERSIONS
from langflow_summarizing_agent.wiring.api import ROUTE_PREFIX
from tests.support.server_chat import ServerChat, server_database, summarizing_flow_data
from tests.support.server_fixtures import LangflowServer

# The HTTP rules; the compare-and-swap, the versions and their purge are checked on both databases in
# `test_memory_versions.py`.
pytestmark = pytest.mark.one_database

PINNED_KEYS = ["customer", "cluster"]
"""As the canvas saves Pinned Keys: a list."""


@pytest.fixture(scope="module")
def chat(langflow_server: LangflowServer, tmp_path_factory: pytest.TempPathFactory) -> ServerChat:
    record_path = tmp_path_factory.mktemp("memory-edits") / "calls.jsonl"
    data = summarizing_flow_data(record_path, pinned_keys=PINNED_KEYS)
    made = ServerChat.create(
        langflow_server, langflow_server.superuser_token, langflow_server.superuser_api_key, data=data
    )
    made.record_path = record_path
    return made


def url(session_id: str, tail: str = "") -> str:
    return f"{ROUTE_PREFIX}/sessions/{session_id}/summary{tail}"


def read(chat: ServerChat, session_id: str) -> Any:
    with chat.server.client(token=chat.token) as client:
        return client.get(url(session_id), params={"flow_id": chat.flow_id})


def edit(chat: ServerChat, session_id: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> Any:
    with chat.server.client(token=chat.token) as client:
        return client.patch(url(session_id), params={"flow_id": chat.flow_id}, json=body, headers=headers or {})


def versions(chat: ServerChat, session_id: str) -> Any:
    with chat.server.client(token=chat.token) as client:
        return client.get(url(session_id, "/versions"), params={"flow_id": chat.flow_id})


def summary_messages(chat: ServerChat) -> list[str]:
    """The summary message of each agent call the flow's model received, oldest first ("" when a call had none)."""
    assert chat.record_path is not None
    if not chat.record_path.exists():
        return []
    records = [json.loads(line) for line in chat.record_path.read_text(encoding="utf-8").splitlines() if line]
    return [
        next((m["content"] for m in record["messages"] if m["content"].startswith("Here is a summary")), "")
        for record in records
        if record["kind"] == "agent"
    ]


def test_a_session_seeded_before_its_first_turn_sends_its_pinned_facts_to_the_model(chat: ServerChat) -> None:
    session_id = f"s-{uuid.uuid4().hex[:8]}"

    seeded = edit(
        chat, session_id, {"pinned": {"customer": "Acme GmbH", "cluster": "eu-3"}}, headers={"If-None-Match": "*"}
    )

    assert seeded.status_code == 200, seeded.text
    body = seeded.json()
    assert (body["version"], body["pinned"], body["folded_count"]) == (
        1,
        {"customer": "Acme GmbH", "cluster": "eu-3"},
        0,
    )
    assert seeded.headers["ETag"] == body["etag"]
    assert body["edited_at"] and body["edited_by"]
    calls_before = len(summary_messages(chat))

    chat.say(session_id, "Where does our workload run?")

    first_call = summary_messages(chat)[calls_before]
    assert "- customer: Acme GmbH" in first_call and "- cluster: eu-3" in first_call
    again = edit(chat, session_id, {"pinned": {"customer": "Other"}}, headers={"If-None-Match": "*"})
    assert again.status_code == 412, "a seed never overwrites a stored summary"


def test_an_edit_applies_on_the_etag_read_and_a_stale_etag_gets_412(chat: ServerChat) -> None:
    session_id = chat.new_session()
    read_before = read(chat, session_id)
    etag = read_before.headers["ETag"]
    assert etag == read_before.json()["summaries"][0]["etag"]

    edited = edit(
        chat,
        session_id,
        {"summary": "- the customer runs on eu-3", "pinned": {"cluster": "eu-3"}},
        headers={"If-Match": etag},
    )
    stale = edit(chat, session_id, {"pinned": {"cluster": "eu-2"}}, headers={"If-Match": etag})
    unconditional = edit(chat, session_id, {"pinned": {"cluster": "eu-2"}})

    assert edited.status_code == 200, edited.text
    assert (edited.json()["version"], edited.json()["summary"]) == (2, "- the customer runs on eu-3")
    assert edited.json()["cursor"] == read_before.json()["summaries"][0]["cursor"], "an edit keeps the cursor"
    assert stale.status_code == 412, stale.text
    assert stale.json()["detail"]["current"]["version"] == 2
    assert stale.headers["ETag"] == edited.headers["ETag"]
    assert unconditional.status_code == 428
    assert read(chat, session_id).json()["summaries"][0]["pinned"] == {"cluster": "eu-3"}


def test_a_key_outside_the_nodes_pinned_keys_is_refused_naming_the_field(chat: ServerChat) -> None:
    session_id = chat.new_session()
    etag = read(chat, session_id).headers["ETag"]

    refused = edit(chat, session_id, {"pinned": {"region": "eu"}}, headers={"If-Match": etag})

    assert refused.status_code == 422
    assert "'region' is not one of this flow's Pinned Keys (customer, cluster)" in refused.json()["detail"]
    assert read(chat, session_id).headers["ETag"] == etag, "a refused edit writes nothing"


def test_the_next_turn_sends_the_edited_summary_and_its_fold_builds_on_it(chat: ServerChat) -> None:
    session_id = chat.new_session()
    etag = read(chat, session_id).headers["ETag"]
    edit(
        chat, session_id, {"summary": "- EDITED: the customer is on eu-3"}, headers={"If-Match": etag}
    ).raise_for_status()
    calls_before = len(summary_messages(chat))

    chat.say(session_id, f"{session_id}-3")

    assert "- EDITED: the customer is on eu-3" in summary_messages(chat)[calls_before]
    after = read(chat, session_id).json()["summaries"][0]
    assert after["version"] == 3, "the fold after the reply saved on top of the edit"
    assert after["summary"].startswith("- EDITED: the customer is on eu-3"), after["summary"]
    with chat.server.client(token=chat.token) as client:
        stored = client.get("/api/v1/monitor/messages", params={"flow_id": chat.flow_id, "session_id": session_id})
    reply = stored.json()[-1]
    steps = [item for block in reply["content_blocks"] or [] for item in (block.get("contents") or [block])]
    memory = next(step["output"] for step in steps if str(step.get("output", "")).startswith("Memory:"))
    assert "memory version 2, edited by a user" in memory


def test_versions_keep_each_fold_with_its_cost_and_a_rollback_restores_one(chat: ServerChat) -> None:
    session_id = chat.new_session(3)
    current = read(chat, session_id).json()["summaries"][0]
    listed = versions(chat, session_id).json()["summaries"][0]
    assert [v["change"] for v in listed["versions"]] == ["fold"] * current["version"]
    first = listed["versions"][-1]
    assert first["version"] == 1 and first["folded_messages"] == 2
    assert first["fold_calls"] >= 1 and first["fold_input_tokens"] > 0 and first["fold_output_tokens"] > 0

    rolled = None
    with chat.server.client(token=chat.token) as client:
        rolled = client.post(
            url(session_id, "/rollback"),
            params={"flow_id": chat.flow_id},
            json={"version": 1},
            headers={"If-Match": current["etag"]},
        )

    assert rolled.status_code == 200, rolled.text
    body = rolled.json()
    assert (body["version"], body["summary"]) == (current["version"] + 1, first["summary"])
    assert (body["cursor"], body["folded_count"]) == (current["cursor"], current["folded_count"])
    newest = versions(chat, session_id).json()["summaries"][0]["versions"][0]
    assert (newest["change"], newest["rolled_back_to"]) == ("rollback", 1)


def test_a_session_deleted_through_langflow_leaves_no_version(chat: ServerChat) -> None:
    session_id = chat.new_session(3)
    summary_id = uuid.UUID(read(chat, session_id).json()["summaries"][0]["etag"].strip('"').rpartition(".")[0])

    def kept() -> int:
        with server_database(chat.server) as connection:
            stmt = sa.select(sa.func.count()).select_from(VERSIONS).where(VERSIONS.c.summary_id == summary_id)
            return int(connection.execute(stmt).scalar_one())

    assert kept() >= 2
    with chat.server.client(token=chat.token) as client:
        assert client.delete(f"/api/v1/monitor/messages/session/{session_id}").status_code == 204

    assert kept() == 0
    assert versions(chat, session_id).status_code == 404


def test_the_cli_edits_lists_and_rolls_back_through_the_server(chat: ServerChat) -> None:
    from langflow.__main__ import app
    from typer.testing import CliRunner

    session_id = chat.new_session()
    target = [
        "--url",
        chat.server.base_url,
        "--api-key",
        chat.api_key,
        "--flow-id",
        chat.flow_id,
        "--session-id",
        session_id,
    ]
    runner = CliRunner()

    edited = runner.invoke(app, ["summarizing-agent", "memory", "edit", *target, "--pin", "cluster=eu-3"])
    refused = runner.invoke(app, ["summarizing-agent", "memory", "edit", *target, "--pin", "region=eu"])
    listed = runner.invoke(app, ["summarizing-agent", "memory", "versions", *target])
    rolled = runner.invoke(app, ["summarizing-agent", "memory", "rollback", *target, "--version", "1"])

    assert (edited.exit_code, edited.output.strip()) == (0, "version 2 saved"), edited.output
    assert refused.exit_code == 1 and "not one of this flow's Pinned Keys" in refused.output
    assert "   2  " in listed.output and "edit" in listed.output and "fold (2 messages" in listed.output
    assert rolled.exit_code == 0, rolled.output
    assert read(chat, session_id).json()["summaries"][0]["pinned"] == {}


def test_if_match_takes_a_summarys_etag_or_any_and_nothing_else(chat: ServerChat) -> None:
    empty = f"s-{uuid.uuid4().hex[:8]}"
    session_id = chat.new_session()
    etag = read(chat, session_id).headers["ETag"]
    weak = edit(chat, session_id, {"pinned": {"cluster": "eu-3"}}, headers={"If-Match": f"W/{etag}"})
    nothing = edit(chat, empty, {"pinned": {"cluster": "eu-3"}}, headers={"If-Match": '"0"'})
    any_on_empty = edit(chat, empty, {"pinned": {"cluster": "eu-3"}}, headers={"If-Match": "*"})
    both = edit(chat, session_id, {"pinned": {"cluster": "eu-1"}}, headers={"If-Match": etag, "If-None-Match": "*"})
    any_stored = edit(chat, session_id, {"pinned": {"cluster": "eu-3"}}, headers={"If-Match": "*"})

    assert [weak.status_code, nothing.status_code, any_on_empty.status_code] == [412, 412, 412]
    assert read(chat, empty).status_code == 404, "no precondition but If-None-Match: * seeds"
    assert both.status_code == 200, "If-Match is evaluated first"
    assert any_stored.status_code == 200
    assert any_stored.json()["version"] == both.json()["version"] + 1


def test_a_rollback_to_a_version_not_kept_names_the_field(chat: ServerChat) -> None:
    session_id = chat.new_session()
    etag = read(chat, session_id).headers["ETag"]

    with chat.server.client(token=chat.token) as client:
        refused = client.post(
            url(session_id, "/rollback"),
            params={"flow_id": chat.flow_id},
            json={"version": 99},
            headers={"If-Match": etag},
        )

    assert refused.status_code == 422
    assert refused.json()["detail"].startswith("version: version 99 is not kept for this summary")
