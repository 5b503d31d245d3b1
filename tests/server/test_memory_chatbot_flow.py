"""The shipped memory chatbot flow (`flows/summarizing_memory_chatbot.json`) on a real `langflow run` server, with an
offline model: over the run API and the Playground's build endpoint, after 15 messages the prompt the model received
holds the session's summary and the window, the fold runs after the flow's reply, and no summary text reaches a
stored message or the Playground's chat.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from langflow_summarizing_agent.engine.prompt import SUMMARY_PREFIX
from tests.support.flow_files import (
    HISTORY_TYPE,
    history_template,
    load_memory_chatbot_flow,
    memory_chatbot_offline,
    read_records,
)
from tests.support.server_chat import ServerChat, playground_turn, summary_rows
from tests.support.server_fixtures import LangflowServer

MESSAGES = 15
N_MESSAGES = 4
FOLD_BATCH = 4
REPLY_DELAY = 0.5
"""The model answers after this long: a fold started beside it, not after the reply, would be recorded first."""
FACTS = {"project_id": "PRJ-123", "customer": "Globex", "cluster": "EU cluster"}
OPENING = "Hello, this is customer Globex. Our project PRJ-123 on the EU cluster fails to deploy."


def follow_up(turn: int) -> str:
    return f"Step {turn}: I restarted the deployment and it still fails."


def prompts(record_path: Path) -> list[str]:
    """The prompt of each model call that was no fold, oldest first."""
    return [record["messages"][-1]["content"] for record in read_records(record_path) if record["kind"] == "agent"]


@pytest.fixture(scope="module")
def chatbot(langflow_server: LangflowServer, tmp_path_factory: pytest.TempPathFactory) -> tuple[ServerChat, Path]:
    record_path = tmp_path_factory.mktemp("memory-chatbot") / "calls.jsonl"
    flow = memory_chatbot_offline(
        load_memory_chatbot_flow(), record_path, reply_delay=REPLY_DELAY, n_messages=N_MESSAGES, fold_batch=FOLD_BATCH
    )
    chat = ServerChat.create(
        langflow_server, langflow_server.superuser_token, langflow_server.superuser_api_key, data=flow["data"]
    )
    return chat, record_path


def test_shipped_flow_wires_the_summarizing_history_into_the_prompt() -> None:
    flow = load_memory_chatbot_flow()
    types = {node["id"]: node["data"]["type"] for node in flow["data"]["nodes"]}
    wiring = {
        (types[edge["source"]], types[edge["target"]], edge["data"]["targetHandle"]["fieldName"])
        for edge in flow["data"]["edges"]
    }
    assert wiring == {
        ("ChatInput", "Prompt Template", "question"),
        (HISTORY_TYPE, "Prompt Template", "memory"),
        ("Prompt Template", "LanguageModelComponent", "input_value"),
        ("LanguageModelComponent", "ChatOutput", "input_value"),
    }
    template = history_template(flow)
    assert template["summarize_older_messages"]["value"] is True
    assert template["pinned_keys"]["value"] == list(FACTS)
    assert template["n_messages"]["value"] == 10
    assert [(m["provider"], m["name"]) for m in template["summary_model"]["value"]] == [("OpenAI", "gpt-4o-mini")]
    assert not template["api_key"]["value"], "the user brings the model key; the file must not carry one"


def test_over_the_run_api_the_prompt_holds_the_summary_and_the_window(chatbot: tuple[ServerChat, Path]) -> None:
    chat, record_path = chatbot
    session_id = f"run-api-{uuid.uuid4().hex[:8]}"
    turns = []
    for turn in range(MESSAGES):
        seen = len(read_records(record_path))
        # `say` returns once the fold after the reply has saved.
        assert chat.say(session_id, OPENING if turn == 0 else follow_up(turn)) == "Noted."
        turns.append([record["kind"] for record in read_records(record_path)[seen:]])

    assert all(kinds[0] == "agent" for kinds in turns), f"a fold ran before the reply: {turns}"
    assert sum(kinds.count("fold") for kinds in turns) >= 3, turns
    last = prompts(record_path)[-1]
    assert SUMMARY_PREFIX in last
    for key, value in FACTS.items():
        assert f"- {key}: {value}" in last
    # The stock window: the newest N_MESSAGES rows, the input last, formatted by the Template "{sender_name}: {text}".
    newest, previous = follow_up(MESSAGES - 1), follow_up(MESSAGES - 2)
    window = f"AI: Noted.\nUser: {previous}\nAI: Noted.\nUser: {newest}"
    assert last.endswith(f"\n{window}\n\nThe customer's new message: {newest}")
    assert OPENING not in last, "the first message reached the model through the summary only"
    [row] = summary_rows(chat.server, chat.flow_id, session_id)
    assert row["pinned"] == FACTS
    stored = json.dumps(chat.messages(session_id))
    assert SUMMARY_PREFIX not in stored and "project_id" not in stored, "no summary in stored messages"


def test_in_the_playground_the_chat_shows_no_summary_text(chatbot: tuple[ServerChat, Path]) -> None:
    chat, record_path = chatbot
    session_id = f"playground-{uuid.uuid4().hex[:8]}"
    chat_events: list[dict[str, Any]] = []
    with chat.server.client(token=chat.token) as client:
        turns = []
        for turn in range(MESSAGES):
            seen = len(read_records(record_path))
            events = playground_turn(client, chat.flow_id, session_id, OPENING if turn == 0 else follow_up(turn))
            chat_events += [event for event in events if event["event"] in ("add_message", "token")]
            chat.state(session_id)
            turns.append([record["kind"] for record in read_records(record_path)[seen:]])

    assert all(kinds[0] == "agent" for kinds in turns), f"a fold ran before the reply: {turns}"
    assert sum(kinds.count("fold") for kinds in turns) >= 3, turns

    last = prompts(record_path)[-1]
    assert SUMMARY_PREFIX in last and "- project_id: PRJ-123" in last
    assert chat_events
    shown = json.dumps(chat_events)
    assert SUMMARY_PREFIX not in shown
    assert "project_id" not in shown
    assert "Noted." in shown


def test_renaming_then_deleting_the_session_moves_then_purges_its_summary(chatbot: tuple[ServerChat, Path]) -> None:
    chat, record_path = chatbot
    session_id = f"lifecycle-{uuid.uuid4().hex[:8]}"
    for turn in range(6):
        chat.say(session_id, OPENING if turn == 0 else follow_up(turn))
    [before] = summary_rows(chat.server, chat.flow_id, session_id)
    renamed = f"{session_id}-renamed"

    with chat.server.client(token=chat.token) as client:
        moved = client.patch(f"/api/v1/monitor/messages/session/{session_id}", params={"new_session_id": renamed})
    assert moved.status_code == 200, moved.text
    assert summary_rows(chat.server, chat.flow_id, session_id) == []
    [after] = summary_rows(chat.server, chat.flow_id, renamed)
    assert (after["id"], after["summary"]) == (before["id"], before["summary"])
    chat.say(renamed, "Which project again?")
    assert "- project_id: PRJ-123" in prompts(record_path)[-1], "the renamed session keeps its summary"

    with chat.server.client(token=chat.token) as client:
        deleted = client.delete(f"/api/v1/monitor/messages/session/{renamed}")
    assert deleted.status_code in (200, 204), deleted.text
    assert summary_rows(chat.server, chat.flow_id, renamed) == []
