"""An optional part never fails a turn: a Summary Model picked on the Summarizing Agent that cannot be built (OpenAI
with no key anywhere) fails the folds, with their back-off, while every turn over the run API answers, and the memory
step names the Summary Model and what to change."""

from __future__ import annotations

import pytest

from langflow_summarizing_agent.wiring.agent_turn import MEMORY_STEP_NAME
from tests.support.flow_files import AGENT_TYPE, HISTORY_TYPE
from tests.support.server_chat import ServerChat
from tests.support.server_fixtures import LangflowServer

PICKED = [{"name": "gpt-4o-mini", "provider": "OpenAI", "icon": "OpenAI", "metadata": {}}]
TURNS = 4


@pytest.mark.parametrize("component_type", [AGENT_TYPE, HISTORY_TYPE], ids=["agent", "message_history"])
def test_the_summary_model_is_served_as_a_picker_nothing_can_connect_to(
    langflow_server: LangflowServer, component_type: str
) -> None:
    """A model node connected to the Summary Model would be built with the flow, and its failure would fail the turn
    before any fold; a picker without "Connect other models" leaves nothing to connect."""
    with langflow_server.client(token=langflow_server.superuser_token) as client:
        catalog = client.get("/api/v1/all").raise_for_status().json()
    field = catalog["summarizing_agent"][component_type]["template"]["summary_model"]

    assert (field["type"], field["_input_type"], field["external_options"]) == ("model", "ModelInput", {})
    assert field["required"] is False


def test_a_picked_summary_model_that_cannot_be_built_fails_the_folds_and_every_turn_answers(
    langflow_server: LangflowServer,
) -> None:
    chat = ServerChat.create(
        langflow_server, langflow_server.superuser_token, langflow_server.superuser_api_key, summary_model=PICKED
    )
    session_id = "picked-summary-model"

    replies = [chat.say(session_id, f"message {turn}") for turn in range(1, TURNS + 1)]

    assert all(reply.startswith("echo:") for reply in replies), replies
    state = chat.state(session_id)
    assert state is not None
    [summary] = state["summaries"]
    assert summary["failed_folds"] >= 1
    assert summary["folded_count"] == 0
    assert summary["fold_failure"].startswith("RuntimeError: the summary model could not be built")
    # A reply's content blocks, grouped under "Agent Steps" or flat, as the Playground receives them.
    blocks = [
        item
        for message in chat.messages(session_id)
        for block in message.get("content_blocks") or []
        for item in block.get("contents") or [block]
    ]
    steps = [block["output"] for block in blocks if block.get("name") == MEMORY_STEP_NAME]
    assert len(steps) == TURNS
    failed = next(step for step in steps if "the fold after the previous reply failed" in step)
    assert "the summary model could not be built" in failed
    assert "set the Summary Model API Key" in failed
