"""The shipped flow `flows/summarizing_support_agent.json`: a Langflow export wiring Chat Input to the agent to Chat
Output, with the switch on and pinned keys; both ready flows carry the current component code."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from langflow_summarizing_agent.components import summarizing_agent
from tests.support.flow_files import (
    AGENT_TYPE,
    HISTORY_TYPE,
    SUPPORT_FLOW_PINNED_KEYS,
    agent_template,
    code_of,
    load_memory_chatbot_flow,
    load_support_flow,
    node_of_type,
)


def test_support_flow_wires_chat_input_to_the_agent_to_chat_output() -> None:
    flow = load_support_flow()
    types = {node["id"]: node["data"]["type"] for node in flow["data"]["nodes"]}
    assert sorted(types.values()) == sorted(["ChatInput", AGENT_TYPE, "ChatOutput"])
    wiring = {
        (types[edge["source"]], types[edge["target"]], edge["data"]["targetHandle"]["fieldName"])
        for edge in flow["data"]["edges"]
    }
    assert wiring == {("ChatInput", AGENT_TYPE, "input_value"), (AGENT_TYPE, "ChatOutput", "input_value")}


def test_support_flow_agent_summarizes_with_pinned_keys_and_a_support_prompt() -> None:
    template = agent_template(load_support_flow())
    assert template["summarize_older_messages"]["value"] is True
    assert template["pinned_keys"]["value"] == SUPPORT_FLOW_PINNED_KEYS
    assert template["pinned_keys"]["show"] is True
    assert template["n_messages"]["value"] == 10
    assert "support agent" in template["system_prompt"]["value"]
    assert [(model["provider"], model["name"]) for model in template["model"]["value"]] == [("OpenAI", "gpt-4o-mini")]
    assert not template["api_key"]["value"], "the user brings the model key; the file must not carry one"
    assert "class SummarizingAgentComponent(AgentComponent)" in code_of(template)


COMPONENTS_DIR = Path(summarizing_agent.__file__).resolve().parent


@pytest.mark.parametrize(
    ("load_flow", "component_type", "source"),
    [
        pytest.param(load_support_flow, AGENT_TYPE, "summarizing_agent.py", id="support_agent"),
        pytest.param(load_memory_chatbot_flow, HISTORY_TYPE, "summarizing_message_history.py", id="memory_chatbot"),
    ],
)
def test_a_ready_flow_carries_the_components_current_code(
    load_flow: Callable[[], dict[str, Any]], component_type: str, source: str
) -> None:
    """Langflow runs the code a flow file carries, not the installed one: a stale export runs stale code."""
    template = node_of_type(load_flow(), component_type)["data"]["node"]["template"]
    assert code_of(template) == (COMPONENTS_DIR / source).read_text(encoding="utf-8"), (
        f"{component_type} in the ready flow is older than {source}: re-export it (scripts/export_*_flow.py)"
    )
