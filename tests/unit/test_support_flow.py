"""The shipped flow `flows/summarizing_support_agent.json`: a Langflow export wiring Chat Input to the agent to Chat
Output, with the switch on and pinned keys."""

from __future__ import annotations

from tests.support.flow_files import (
    AGENT_TYPE,
    SUPPORT_FLOW_PINNED_KEYS,
    agent_template,
    code_of,
    load_support_flow,
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
