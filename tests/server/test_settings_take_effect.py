"""Settings set by an API tweak or written into a flow take effect whether or not the canvas shows them.

Langflow leaves out the value of a hidden field when it builds a flow. The summary settings are hidden while the
switch is off, and flows saved by earlier versions of this package store them hidden. Each test runs a flow on the
shared real server with Fold Batch 2, Number of Chat History Messages 3 and no History Token Budget, where the defaults
(8, 100, 7,000) would not fold in two turns: a state row that covers the first exchange after the second turn shows
the settings were used.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from langflow_summarizing_agent.engine.settings import MAX_PINNED_KEY_CHARS
from tests.support.flow_files import read_records
from tests.support.server_chat import (
    FAST_FOLDS,
    TURNS_TO_FIRST_STATE,
    ServerChat,
    agent_node_id,
    agent_template,
    playground_turn,
    summarizing_flow_data,
    summary_rows,
)
from tests.support.server_fixtures import LangflowServer

COMPONENT_CODE_0_1_0 = Path(__file__).parents[1] / "support" / "data" / "summarizing_agent_0_1_0.py.txt"
"""The component source a flow saved by version 0.1.0 carries (it imports `agent_memory` and `fold`)."""
DEFAULTS = {"n_messages": 100, "fold_batch": 8, "history_token_budget": 7_000}
UPLOADED_PINNED_KEYS = ["customer name", "bad*key", "k" * 70]
SHOWN_PINNED_KEYS = ("customer_name", "badkey", "k" * MAX_PINNED_KEY_CHARS)
"""Pinned Keys a flow file holds, and as its node shows them once the canvas has settled them."""
SUMMARY_SETTINGS = ("pinned_keys", "fold_batch", "summary_words", "history_token_budget", "max_folds_per_turn")


def _hidden(data: dict[str, Any], *, saved_by_an_earlier_version: bool = False) -> dict[str, Any]:
    """`data` with the summary settings hidden, as the canvas stores them while the switch is off."""
    template = agent_template(data)
    for name in SUMMARY_SETTINGS:
        template[name]["show"] = False
        if saved_by_an_earlier_version:
            template[name].pop("override_skip", None)
    return data


def _folded_after_two_turns(chat: ServerChat, tweaks: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    session_id = "settings-session"
    for turn in range(1, TURNS_TO_FIRST_STATE + 1):
        chat.say(session_id, f"{session_id}-{turn}", tweaks=tweaks)
    return summary_rows(chat.server, chat.flow_id, session_id)


@pytest.fixture
def owner(langflow_server: LangflowServer) -> tuple[LangflowServer, str, str]:
    return langflow_server, langflow_server.superuser_token, langflow_server.superuser_api_key


def test_api_tweaks_of_hidden_settings_take_effect(owner):
    switched_off = _hidden(summarizing_flow_data(**DEFAULTS, summarize_older_messages=False))
    chat = ServerChat.create(*owner, data=switched_off)

    rows = _folded_after_two_turns(chat, tweaks={agent_node_id(switched_off): FAST_FOLDS})

    assert [row["absorbed_count"] for row in rows] == [2]


def test_a_flow_file_with_hidden_settings_runs_with_them(owner):
    chat = ServerChat.create(*owner, data=_hidden(summarizing_flow_data()))

    assert [row["absorbed_count"] for row in _folded_after_two_turns(chat)] == [2]


def test_a_flow_saved_by_an_earlier_version_runs_with_its_hidden_settings(owner):
    chat = ServerChat.create(*owner, data=_hidden(summarizing_flow_data(), saved_by_an_earlier_version=True))

    assert [row["absorbed_count"] for row in _folded_after_two_turns(chat)] == [2]


def test_a_saved_flow_with_the_switch_off_stays_off(owner):
    data = summarizing_flow_data(summarize_older_messages=False)
    chat = ServerChat.create(*owner, data=_hidden(data, saved_by_an_earlier_version=True))

    assert _folded_after_two_turns(chat) == []
    with chat.server.client(token=chat.token) as client:
        stored = client.get(f"/api/v1/flows/{chat.flow_id}").raise_for_status().json()
    assert agent_template(stored["data"])["summarize_older_messages"]["value"] is False


def test_a_flow_saved_by_0_1_0_runs_its_own_component_code_and_folds(owner):
    data = summarizing_flow_data()
    template = agent_template(data)
    saved_code = COMPONENT_CODE_0_1_0.read_text(encoding="utf-8")
    assert "from langflow_summarizing_agent import agent_memory" in saved_code
    assert template["code"]["value"] != saved_code
    template["code"]["value"] = saved_code
    chat = ServerChat.create(*owner, data=data)

    assert [row["absorbed_count"] for row in _folded_after_two_turns(chat)] == [2]


@pytest.mark.parametrize("path", ["run_api", "playground"])
def test_an_uploaded_flow_runs_with_the_settings_its_node_shows_over_the_run_api_and_the_playground(
    owner, tmp_path: Path, path: str
):
    """A flow file holds Pinned Keys and a Fold Batch the canvas settles as it opens (without saving them); every
    turn settles them alike, over the run API as over the Playground's build path, instead of failing."""
    record_path = tmp_path / "calls.jsonl"
    data = summarizing_flow_data(record_path, pinned_keys=UPLOADED_PINNED_KEYS, fold_batch=0)
    chat = ServerChat.create(*owner, data=data)
    session_id = f"uploaded-{path}"

    for turn in range(1, TURNS_TO_FIRST_STATE + 1):
        text = f"{session_id}-{turn}"
        if path == "run_api":
            chat.say(session_id, text)
        else:
            with chat.server.client(token=chat.token) as client:
                playground_turn(client, chat.flow_id, session_id, text)
            chat.state(session_id)

    folds = [record for record in read_records(record_path) if record["kind"] == "fold"]
    assert folds, "no fold ran"
    system = folds[0]["messages"][0]["content"]
    assert f"Pinned keys are exactly: {', '.join(SHOWN_PINNED_KEYS)}." in system
    assert [row["absorbed_count"] for row in summary_rows(chat.server, chat.flow_id, session_id)] == [2]
